//! Entry lines straight from the model's Python objects: the reverse of `build.rs`.
//!
//! The encoder is driven by the model table (`engine::model`): it reads each field's slot
//! through the slot descriptor's `__get__` (no `__dict__`, no `dataclasses.asdict`), in
//! the table's order, and writes the JSON line `entries.entry_to_json` writes for the same
//! entry — byte for byte: the tag first, then the entry base, then the type's fields
//! (`signature` and `redacted` left out at their defaults), then the unknown fields kept
//! in `_extra`, strings escaped and floats formatted as Python's `json` does
//! (`engine::json_text`). Appends then hand the line to `Store::append` (or, stamped by
//! the store, `append_stamped`), which checks it with the reader's own parser and schema
//! before writing it.
//!
//! It writes only what it is sure of: objects of exactly the registered classes, and in
//! their free-form values (`details`, `data`, tool `arguments`) exactly `dict` (with `str`
//! keys), `list`, `tuple`, `str`, `int` (64 bits), finite `float`, `bool` and `None`.
//! Anything else — a subclass, an unknown entry or message, a value Python's writer would
//! refuse or treat specially — makes it give up on the whole entry, and the registered
//! Python writer (`entry_to_json`) writes it instead, with its errors, as before.
//!
//! Strings are read with `PyUnicode_AsUTF8AndSize`: free for ASCII text, and for other text
//! CPython keeps the UTF-8 copy it makes with the string (as orjson's encoder does).

use std::ptr;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMapping, PyString, PyTuple, PyType,
};

use super::build::{self, fields_of};
use super::slots::{class_named, slot_descriptor};
use super::to_py_err;
use crate::engine::arena::NONE;
use crate::engine::json_text::{push_f64, push_i64, push_str};
use crate::engine::model::{self, DefaultValue, FieldDef, FieldKind, Presence, TypeDef, Write};
use crate::engine::Store;

/// The types the encoder writes: every type of the model but the entry base (written
/// with each entry) and the header (written once, by Python).
fn encoded() -> impl Iterator<Item = &'static TypeDef> {
    model::MODEL
        .iter()
        .copied()
        .filter(|d| !std::ptr::eq(*d, &model::ENTRY_BASE) && !std::ptr::eq(*d, &model::HEADER))
}

/// Free-form values nest at most this deep here (the engine's default line limit);
/// deeper ones, cycles included, go to the Python writer.
const MAX_DEPTH: usize = crate::engine::jsonl::DEFAULT_MAX_DEPTH;

/// One slot's descriptor and its `__get__`.
struct Getter {
    descr: Py<PyAny>,
    get: ffi::descrgetfunc,
    name: Py<PyString>,
}

impl Getter {
    fn new(cls: &Bound<'_, PyType>, name: &str) -> PyResult<Getter> {
        let (descr, get) = slot_descriptor(cls, name, ffi::Py_tp_descr_get)?;
        Ok(Getter {
            descr: descr.unbind(),
            // SAFETY: a non-null `Py_tp_descr_get` slot holds a `descrgetfunc`.
            get: unsafe {
                std::mem::transmute::<*mut std::os::raw::c_void, ffi::descrgetfunc>(get)
            },
            name: PyString::intern(cls.py(), name).unbind(),
        })
    }

    /// The slot's value on `obj` (an instance of the descriptor's class). An unset slot is
    /// an entry handed out unread: the attribute lookup reads it (`messages._Lazy`).
    fn read<'py>(&self, obj: &Bound<'py, PyAny>) -> Option<Bound<'py, PyAny>> {
        let py = obj.py();
        // SAFETY: the descriptor's own `__get__` on an instance of its class (the caller
        // checked the exact type); it returns a new reference or NULL with an error set.
        let value = unsafe {
            let raw = (self.get)(self.descr.as_ptr(), obj.as_ptr(), ptr::null_mut());
            Bound::from_owned_ptr_or_opt(py, raw)
        };
        value.or_else(|| {
            drop(PyErr::take(py));
            obj.getattr(self.name.bind(py)).ok()
        })
    }
}

/// Which table of the model a type is in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Group {
    Block,
    Message,
    Entry,
    /// `Usage` and `Cost`.
    Nested,
}

fn group_of(def: &'static TypeDef) -> Group {
    let among = |table: &[&'static TypeDef]| table.iter().any(|d| std::ptr::eq(*d, def));
    if among(&model::BLOCKS) {
        Group::Block
    } else if among(&model::MESSAGES) {
        Group::Message
    } else if among(&model::ENTRIES) {
        Group::Entry
    } else {
        Group::Nested
    }
}

/// A registered class: its table entry and how to read each field's slot.
struct Class {
    def: &'static TypeDef,
    group: Group,
    ty: *mut ffi::PyTypeObject,
    /// Keeps `ty` alive.
    _cls: Py<PyType>,
    /// The fields in writing order (for an entry, `ENTRY_BASE`'s first), with their slots.
    fields: Vec<(&'static FieldDef, Getter)>,
    extra: Getter,
}

// SAFETY: `ty` is only compared by address, and the class it points to is kept alive by
// `_cls`.
unsafe impl Send for Class {}
unsafe impl Sync for Class {}

/// The model's classes as the encoder sees them, registered once by `sessiontree`.
pub struct Encoder {
    classes: Vec<Class>,
    /// `entries.entry_to_json`, for whatever the encoder gives up on.
    fallback: Py<PyAny>,
}

static ENCODER: Mutex<Option<Arc<Encoder>>> = Mutex::new(None);

fn encoder() -> Option<Arc<Encoder>> {
    ENCODER.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Registers the model's classes for the encoder (`classes` maps each class name of the
/// table to its class) and the Python writer of what it does not write itself
/// (`fallback(entry) -> bytes`). A second call replaces the first.
#[pyfunction]
pub fn _register_encoder(
    classes: &Bound<'_, PyMapping>,
    fallback: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let mut built = Vec::new();
    for def in encoded() {
        let cls = class_named(classes, def.class)?;
        let fields = fields_of(def)
            .into_iter()
            .map(|f| Ok((f, Getter::new(&cls, f.attr())?)))
            .collect::<PyResult<_>>()?;
        built.push(Class {
            def,
            group: group_of(def),
            ty: cls.as_type_ptr(),
            extra: Getter::new(&cls, "_extra")?,
            fields,
            _cls: cls.unbind(),
        });
    }
    *ENCODER.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(Encoder {
        classes: built,
        fallback: fallback.clone().unbind(),
    }));
    Ok(())
}

/// The encoder gave up: the Python writer writes the entry.
struct GiveUp;

type Res = Result<(), GiveUp>;

impl Encoder {
    /// The registered class of `group` that `obj` is exactly an instance of.
    fn class_of(&self, obj: &Bound<'_, PyAny>, group: Group) -> Option<&Class> {
        let ty = obj.get_type().as_type_ptr();
        self.classes.iter().find(|c| c.ty == ty && c.group == group)
    }

    /// The line `entries.entry_to_json(entry)` writes.
    fn entry_line(&self, entry: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        let mut out = Vec::with_capacity(512);
        let written = match self.class_of(entry, Group::Entry) {
            Some(c) => object(&mut out, self, entry, c, 0),
            None => Err(GiveUp),
        };
        match written {
            Ok(()) => Ok(out),
            Err(GiveUp) => self.python_line(entry),
        }
    }

    fn python_line(&self, entry: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        let line = self.fallback.bind(entry.py()).call1((entry,))?;
        Ok(line.cast::<PyBytes>()?.as_bytes().to_vec())
    }
}

/// Writes `obj`, an instance of exactly `class`, as a JSON object.
fn object(
    out: &mut Vec<u8>,
    enc: &Encoder,
    obj: &Bound<'_, PyAny>,
    class: &Class,
    depth: usize,
) -> Res {
    out.push(b'{');
    let mut first = true;
    let mut key = |out: &mut Vec<u8>, k: &str| {
        if !first {
            out.push(b',');
        }
        first = false;
        push_str(out, k);
        out.push(b':');
    };
    if let Some((tag, value)) = class.def.tag {
        key(out, tag);
        push_str(out, value);
    }
    for (f, getter) in &class.fields {
        let v = getter.read(obj).ok_or(GiveUp)?;
        if f.write == Write::OmitDefault && omitted(f, &v)? {
            continue;
        }
        key(out, f.key);
        field(out, enc, f, &v, depth + 1)?;
    }
    let extra = class.extra.read(obj).ok_or(GiveUp)?;
    if !extra.is_none() {
        // Python writes `d.update(_extra)`: a key that is also a known one would replace
        // its value in place, which is left to Python.
        let extra = extra.cast_exact::<PyDict>().map_err(|_| GiveUp)?;
        for (k, v) in extra.iter() {
            let k = exact_str(&k)?;
            let known = class.def.tag.is_some_and(|(t, _)| t == k)
                || class.fields.iter().any(|(f, _)| f.key == k);
            if known {
                return Err(GiveUp);
            }
            key(out, k);
            value(out, &v, depth + 1)?;
        }
    }
    out.push(b'}');
    Ok(())
}

/// Whether an omit-at-default field is left out: `signature` when None, `redacted` when
/// False (Python writes `True` for any other value; anything but a bool is left to it).
fn omitted(f: &FieldDef, v: &Bound<'_, PyAny>) -> Result<bool, GiveUp> {
    match f.presence {
        Presence::Optional(DefaultValue::Null) => Ok(v.is_none()),
        Presence::Optional(DefaultValue::False) => match v.cast_exact::<PyBool>() {
            Ok(b) => Ok(!b.is_true()),
            Err(_) => Err(GiveUp),
        },
        _ => Err(GiveUp),
    }
}

/// Writes one field's value as the Python writer does for its kind.
fn field(
    out: &mut Vec<u8>,
    enc: &Encoder,
    f: &FieldDef,
    v: &Bound<'_, PyAny>,
    depth: usize,
) -> Res {
    let structured = matches!(
        f.kind,
        FieldKind::Nested(_)
            | FieldKind::Message
            | FieldKind::Messages
            | FieldKind::Blocks(_)
            | FieldKind::StrOrBlocks(_)
            | FieldKind::StrList
    );
    if !structured {
        // The value goes into the dict as it is.
        return value(out, v, depth);
    }
    if v.is_none() {
        // Written as null where the writer checks for None (a field whose default is
        // None); elsewhere Python's writer would fail on it.
        return match f.presence {
            Presence::Optional(DefaultValue::Null) if f.nullable => {
                out.extend_from_slice(b"null");
                Ok(())
            }
            _ => Err(GiveUp),
        };
    }
    match f.kind {
        FieldKind::Nested(def) => {
            let class = enc
                .class_of(v, Group::Nested)
                .filter(|c| std::ptr::eq(c.def, def))
                .ok_or(GiveUp)?;
            object(out, enc, v, class, depth)
        }
        FieldKind::Message => message(out, enc, v, depth),
        FieldKind::Messages => items(out, v, |out, m| message(out, enc, m, depth + 1)),
        FieldKind::StrOrBlocks(_) if v.is_exact_instance_of::<PyString>() => value(out, v, depth),
        FieldKind::Blocks(_) | FieldKind::StrOrBlocks(_) => items(out, v, |out, b| {
            let class = enc.class_of(b, Group::Block).ok_or(GiveUp)?;
            object(out, enc, b, class, depth + 1)
        }),
        // `list(names)`: the same array for a list or a tuple.
        FieldKind::StrList => items(out, v, |out, s| value(out, s, depth + 1)),
        _ => Err(GiveUp),
    }
}

fn message(out: &mut Vec<u8>, enc: &Encoder, v: &Bound<'_, PyAny>, depth: usize) -> Res {
    let class = enc.class_of(v, Group::Message).ok_or(GiveUp)?;
    object(out, enc, v, class, depth)
}

/// Writes a list or tuple as an array, each item with `item`.
fn items<'py>(
    out: &mut Vec<u8>,
    v: &Bound<'py, PyAny>,
    mut item: impl FnMut(&mut Vec<u8>, &Bound<'py, PyAny>) -> Res,
) -> Res {
    out.push(b'[');
    if let Ok(t) = v.cast_exact::<PyTuple>() {
        for (i, x) in t.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            item(out, &x)?;
        }
    } else if let Ok(l) = v.cast_exact::<PyList>() {
        for (i, x) in l.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            item(out, &x)?;
        }
    } else {
        return Err(GiveUp);
    }
    out.push(b']');
    Ok(())
}

fn exact_str<'a>(v: &'a Bound<'_, PyAny>) -> Result<&'a str, GiveUp> {
    let s = v.cast_exact::<PyString>().map_err(|_| GiveUp)?;
    // A lone surrogate has no UTF-8: Python's writer raises for it.
    s.to_str().map_err(|_| GiveUp)
}

/// Writes a free-form value as `json.dumps` does, for exactly the builtin JSON types.
fn value(out: &mut Vec<u8>, v: &Bound<'_, PyAny>, depth: usize) -> Res {
    if depth > MAX_DEPTH {
        return Err(GiveUp);
    }
    if v.is_none() {
        out.extend_from_slice(b"null");
    } else if let Ok(s) = v.cast_exact::<PyString>() {
        push_str(out, s.to_str().map_err(|_| GiveUp)?);
    } else if let Ok(b) = v.cast_exact::<PyBool>() {
        out.extend_from_slice(if b.is_true() { b"true" } else { b"false" });
    } else if v.is_exact_instance_of::<PyInt>() {
        // Wider integers are exact in Python's writer: left to it.
        push_i64(out, v.extract::<i64>().map_err(|_| GiveUp)?);
    } else if let Ok(x) = v.cast_exact::<PyFloat>() {
        if !push_f64(out, x.value()) {
            return Err(GiveUp);
        }
    } else if let Ok(d) = v.cast_exact::<PyDict>() {
        out.push(b'{');
        for (i, (k, item)) in d.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_str(out, exact_str(&k)?);
            out.push(b':');
            value(out, &item, depth + 1)?;
        }
        out.push(b'}');
    } else {
        return items(out, v, |out, x| value(out, x, depth + 1));
    }
    Ok(())
}

/// Appends `entry` (any entry object): one line, encoded here or by the Python writer, then
/// checked and written by the store. Returns its arena index.
pub fn append_entry(py: Python<'_>, store: &mut Store, entry: &Bound<'_, PyAny>) -> PyResult<u32> {
    let enc = encoder().ok_or_else(unregistered)?;
    let line = enc.entry_line(entry)?;
    py.detach(|| store.append(&line))
        .map_err(|e| to_py_err(py, e))
}

/// Appends `message` in a new `message` entry under the leaf, stamped with a fresh id and
/// the current time, and returns that `MessageEntry`; None (nothing done) when `message`
/// is not exactly one of the model's message classes.
pub fn append_message<'py>(
    py: Python<'py>,
    store: &mut Store,
    message: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let (Some(enc), Some(reg)) = (encoder(), build::registry()) else {
        return Err(unregistered());
    };
    let Some(class) = enc.class_of(message, Group::Message) else {
        return Ok(None);
    };
    let stamp = store.stamp().map_err(|e| to_py_err(py, e))?;
    let parent = (stamp.parent != NONE).then(|| store.arena().id(stamp.parent).to_owned());
    let entry = reg
        .new_message_entry(py, &stamp.id, parent.as_deref(), stamp.timestamp(), message)
        .ok_or_else(|| PyTypeError::new_err("the model's MessageEntry cannot be built"))?;
    let mut line = Vec::with_capacity(512);
    line.extend_from_slice(b"{\"type\":\"message\",\"id\":");
    push_str(&mut line, &stamp.id);
    line.extend_from_slice(b",\"parent_id\":");
    match &parent {
        Some(p) => push_str(&mut line, p),
        None => line.extend_from_slice(b"null"),
    }
    line.extend_from_slice(b",\"timestamp\":");
    push_str(&mut line, stamp.timestamp());
    line.extend_from_slice(b",\"message\":");
    let line = match object(&mut line, &enc, message, class, 1) {
        Ok(()) => {
            line.push(b'}');
            line
        }
        Err(GiveUp) => enc.python_line(&entry)?,
    };
    py.detach(|| store.append_stamped(&stamp, &line))
        .map_err(|e| to_py_err(py, e))?;
    Ok(Some(entry))
}

fn unregistered() -> PyErr {
    pyo3::exceptions::PyRuntimeError::new_err("the model is not registered (import sessiontree)")
}
