//! The model's one writer: entries, messages, the header and their nested values, as a
//! JSON line (appends, forks, conversion, `entry_to_json`) or as dicts (`entry_to_dict`,
//! `message_to_dict`). One walk of the model table (`engine::model`), two sinks.
//!
//! The walk reads each field's slot through the slot descriptor's `__get__` (no
//! `__dict__`, no `dataclasses.asdict`), in the table's order: the tag first, then (for an
//! entry) the entry base, then the type's fields (`signature` and `redacted` left out at
//! their defaults), then the unknown fields kept in `_extra` (one that names a known key
//! replaces that key's value in place, as `dict.update` does). A subclass of a model class
//! is written as the class it derives from; `UnknownEntry` and `UnknownMessage` write their
//! `data`.
//!
//! The sinks differ only in what they do with a field's value as it is (a string, a
//! number, `details`, `data`, tool `arguments`, an unknown field):
//! - [`Json`] writes it as Python's `json` writes it (`ensure_ascii=False`,
//!   `allow_nan=False`, compact separators), so lines are byte for byte what earlier
//!   versions wrote (`tests/fixtures/writer/golden.jsonl`): `str`, `int` (any width),
//!   `float` and their subclasses, `list`/`tuple`, `dict` (str, int, float, bool and None
//!   keys, as `json` converts them), `bool` and `None`. Anything else, NaN and infinities,
//!   lone surrogates and cycles are `invalid_argument` naming the field; nesting deeper
//!   than the hard cap of the engine's depth limit is `limit_exceeded`.
//! - [`Dicts`] puts the value itself in the dict (by reference, as `entry_to_dict` always
//!   has), so a large `details` costs nothing to hand out.
//!
//! Strings are read with `PyUnicode_AsUTF8AndSize`: free for ASCII text, and for other text
//! CPython keeps the UTF-8 copy it makes with the string (as orjson's encoder does).

use std::ptr;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyBytes, PyDict, PyFloat, PyInt, PyIterator, PyList, PyMapping, PyString, PyTuple,
    PyType,
};

use super::build::{self, fields_of};
use super::errors::to_py_err;
use super::slots::{class_named, slot_descriptor};
use crate::engine::arena::NONE;
use crate::engine::json_text::{push_f64, push_i64, push_str};
use crate::engine::model::{self, DefaultValue, FieldDef, FieldKind, Presence, TypeDef, Write};
use crate::engine::{EngineError, ErrorCode, Store};

/// Values nest at most this deep, the entry's own object being depth 1: the hard cap of
/// the engine's line limit (`Limits.max_depth`), so no line the writer writes is refused
/// for its depth by a store at the default limit, and no line it refuses could be read.
const MAX_DEPTH: usize = crate::engine::jsonl::DEFAULT_MAX_DEPTH;

// ------------------------------------------------------------------ the registered model

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

    /// The slot's value on `obj` (an instance of the descriptor's class or a subclass);
    /// an unset slot is looked up as an attribute, for its error.
    fn read<'py>(&self, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = obj.py();
        // SAFETY: the descriptor's own `__get__` on an instance of its class (the caller
        // found the class on the object's MRO); it returns a new reference or NULL with an
        // error set.
        let value = unsafe {
            let raw = (self.get)(self.descr.as_ptr(), obj.as_ptr(), ptr::null_mut());
            Bound::from_owned_ptr_or_opt(py, raw)
        };
        match value {
            Some(v) => Ok(v),
            None => {
                drop(PyErr::take(py));
                obj.getattr(self.name.bind(py))
            }
        }
    }
}

/// A field of a registered class: its table row, its slot and its key as a Python str.
struct Slot {
    def: &'static FieldDef,
    get: Getter,
    key: Py<PyString>,
}

/// A registered class: its table entry and how to read each field's slot.
struct Class {
    def: &'static TypeDef,
    ty: *mut ffi::PyTypeObject,
    /// Keeps `ty` alive.
    _cls: Py<PyType>,
    /// The tag's key and value as Python strs.
    tag: Option<(Py<PyString>, Py<PyString>)>,
    /// The fields in writing order (for an entry, `ENTRY_BASE`'s first).
    fields: Vec<Slot>,
    extra: Getter,
}

// SAFETY: `ty` is only compared by address, and the class it points to is kept alive by
// `_cls`.
unsafe impl Send for Class {}
unsafe impl Sync for Class {}

impl Class {
    /// Whether `key` is one this class writes itself (its tag or a field).
    fn knows(&self, key: &str) -> bool {
        self.def.tag.is_some_and(|(t, _)| t == key) || self.fields.iter().any(|f| f.def.key == key)
    }
}

/// A class whose instances write their `data` (`UnknownEntry`, `UnknownMessage`).
struct Unknown {
    cls: Py<PyType>,
    data: Getter,
}

/// The model's classes as the writer sees them, registered by `sessiontree.model`.
pub struct Model {
    classes: Vec<Class>,
    unknown: Vec<Unknown>,
}

static MODEL: Mutex<Option<Arc<Model>>> = Mutex::new(None);

fn model() -> PyResult<Arc<Model>> {
    MODEL
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .ok_or_else(|| PyRuntimeError::new_err("the model is not registered (import sessiontree)"))
}

/// Registers the model's classes for the writer: `classes` maps class names of the table
/// to their classes (those missing are not written), `unknown` lists the classes whose
/// instances are written as their `data`. A later call replaces an earlier one.
#[pyfunction]
pub fn _register_writer(
    classes: &Bound<'_, PyMapping>,
    unknown: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let py = classes.py();
    let mut built = Vec::new();
    for def in model::MODEL {
        if !classes.contains(def.class)? {
            continue;
        }
        let cls = class_named(classes, def.class)?;
        let fields = fields_of(def)
            .into_iter()
            .map(|f| {
                Ok(Slot {
                    def: f,
                    get: Getter::new(&cls, f.attr())?,
                    key: PyString::intern(py, f.key).unbind(),
                })
            })
            .collect::<PyResult<_>>()?;
        built.push(Class {
            def,
            ty: cls.as_type_ptr(),
            tag: def.tag.map(|(k, v)| {
                (
                    PyString::intern(py, k).unbind(),
                    PyString::intern(py, v).unbind(),
                )
            }),
            extra: Getter::new(&cls, "_extra")?,
            fields,
            _cls: cls.unbind(),
        });
    }
    let unknown = unknown
        .try_iter()?
        .map(|cls| {
            let cls = cls?.cast_into::<PyType>()?;
            Ok(Unknown {
                data: Getter::new(&cls, "data")?,
                cls: cls.unbind(),
            })
        })
        .collect::<PyResult<_>>()?;
    *MODEL.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(Model {
        classes: built,
        unknown,
    }));
    Ok(())
}

/// What a model value is written as.
enum Shape<'m> {
    Class(&'m Class),
    Unknown(&'m Getter),
}

impl Model {
    fn exact(&self, ty: *mut ffi::PyTypeObject) -> Option<&Class> {
        self.classes.iter().find(|c| c.ty == ty)
    }

    /// How `obj` is written: by its class, by the nearest registered class it derives
    /// from, or by its `data`; None for anything else.
    fn shape_of(&self, obj: &Bound<'_, PyAny>) -> PyResult<Option<Shape<'_>>> {
        let ty = obj.get_type();
        if let Some(c) = self.exact(ty.as_type_ptr()) {
            return Ok(Some(Shape::Class(c)));
        }
        for u in &self.unknown {
            if obj.is_instance(u.cls.bind(obj.py()))? {
                return Ok(Some(Shape::Unknown(&u.data)));
            }
        }
        for base in ty.mro().iter() {
            let base = base.cast_into::<PyType>()?;
            if let Some(c) = self.exact(base.as_type_ptr()) {
                return Ok(Some(Shape::Class(c)));
            }
        }
        Ok(None)
    }
}

// ------------------------------------------------------------------ failures

/// Where a failure was, from the value handed to the writer down.
enum Step {
    Attr(&'static str),
    Key(Py<PyAny>),
    Index(usize),
}

/// Why a walk stopped.
enum Fail {
    /// A Python error (a failing `items()`, an unset slot): raised as it is.
    Py(PyErr),
    /// A value JSON cannot hold (Python's `json` message for it); `invalid_argument`.
    Invalid { reason: String, at: Vec<Step> },
    /// Nested deeper than [`MAX_DEPTH`]: `limit_exceeded`, unless `seen` (the containers
    /// on the way down) holds one twice, a cycle.
    Deep { at: Vec<Step>, seen: Vec<usize> },
}

impl From<PyErr> for Fail {
    fn from(e: PyErr) -> Fail {
        Fail::Py(e)
    }
}

impl Fail {
    fn invalid(reason: impl Into<String>) -> Fail {
        Fail::Invalid {
            reason: reason.into(),
            at: Vec::new(),
        }
    }

    /// The failure, one step further up: `step` into the container `container`.
    fn at(mut self, step: Step, container: &Bound<'_, PyAny>) -> Fail {
        match &mut self {
            Fail::Py(_) => {}
            Fail::Invalid { at, .. } => at.push(step),
            Fail::Deep { at, seen } => {
                at.push(step);
                seen.push(container.as_ptr() as usize);
            }
        }
        self
    }

    /// The `SessionError` (or Python error) for a walk of `root` described as `what`.
    fn into_py(self, root: &Bound<'_, PyAny>, what: &str) -> PyErr {
        let py = root.py();
        let (code, message, at) = match self {
            Fail::Py(e) => return e,
            Fail::Invalid { reason, at } => (
                ErrorCode::InvalidArgument,
                format!("{what} is not valid JSON: {reason}"),
                at,
            ),
            Fail::Deep { at, mut seen } => {
                let n = seen.len();
                seen.sort_unstable();
                seen.dedup();
                if seen.len() < n {
                    (
                        ErrorCode::InvalidArgument,
                        format!("{what} is not valid JSON: Circular reference detected"),
                        at,
                    )
                } else {
                    (
                        ErrorCode::LimitExceeded,
                        format!("{what} nests deeper than the limit of {MAX_DEPTH}"),
                        at,
                    )
                }
            }
        };
        let mut path = type_name(root);
        for step in at.iter().rev() {
            match step {
                Step::Attr(a) => {
                    path.push('.');
                    path.push_str(a);
                }
                Step::Key(k) => {
                    let k = k.bind(py);
                    let text = k.repr().map_or_else(|_| "?".to_owned(), |r| r.to_string());
                    path.push_str(&format!("[{text}]"));
                }
                Step::Index(i) => path.push_str(&format!("[{i}]")),
            }
        }
        to_py_err(py, EngineError::new(code, format!("{message} (at {path})")))
    }
}

type Res = Result<(), Fail>;

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

fn not_a_model_value(v: &Bound<'_, PyAny>) -> Fail {
    Fail::Py(to_py_err(
        v.py(),
        EngineError::new(
            ErrorCode::InvalidArgument,
            format!("not a model value: {}", type_name(v)),
        ),
    ))
}

fn too_deep(v: &Bound<'_, PyAny>) -> Fail {
    Fail::Deep {
        at: Vec::new(),
        seen: vec![v.as_ptr() as usize],
    }
}

// ------------------------------------------------------------------ the sinks

/// Where the walk writes: a JSON object or array is opened, given keys and values, and
/// closed.
trait Sink<'py> {
    /// Opens an object (`array` false) or an array.
    fn open(&mut self, py: Python<'py>, array: bool) -> Res;
    fn close(&mut self, array: bool) -> Res;
    /// A key of the table (or a tag), as text and as the Python str.
    fn key(&mut self, text: &str, obj: &Bound<'py, PyString>) -> Res;
    /// A key of `_extra`: any object `json` accepts as a key.
    fn any_key(&mut self, key: &Bound<'py, PyAny>) -> Res;
    /// A tag's value.
    fn tag(&mut self, text: &str, obj: &Bound<'py, PyString>) -> Res;
    fn null(&mut self, py: Python<'py>) -> Res;
    /// A value as it is (`depth` is the depth a container would open at).
    fn value(&mut self, v: &Bound<'py, PyAny>, depth: usize) -> Res;
}

/// Writes JSON text.
struct Json {
    out: Vec<u8>,
}

impl Json {
    /// A comma, unless this is the first key or item of a container, or a key's value.
    fn sep(&mut self) {
        if !matches!(self.out.last(), Some(b'{' | b'[' | b':') | None) {
            self.out.push(b',');
        }
    }
}

impl<'py> Sink<'py> for Json {
    fn open(&mut self, _py: Python<'py>, array: bool) -> Res {
        self.sep();
        self.out.push(if array { b'[' } else { b'{' });
        Ok(())
    }

    fn close(&mut self, array: bool) -> Res {
        self.out.push(if array { b']' } else { b'}' });
        Ok(())
    }

    fn key(&mut self, text: &str, _obj: &Bound<'py, PyString>) -> Res {
        self.sep();
        push_str(&mut self.out, text);
        self.out.push(b':');
        Ok(())
    }

    fn any_key(&mut self, key: &Bound<'py, PyAny>) -> Res {
        self.sep();
        json_key(&mut self.out, key)?;
        self.out.push(b':');
        Ok(())
    }

    fn tag(&mut self, text: &str, _obj: &Bound<'py, PyString>) -> Res {
        self.sep();
        push_str(&mut self.out, text);
        Ok(())
    }

    fn null(&mut self, _py: Python<'py>) -> Res {
        self.sep();
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn value(&mut self, v: &Bound<'py, PyAny>, depth: usize) -> Res {
        self.sep();
        json_value(&mut self.out, v, depth)
    }
}

/// Builds dicts and lists, holding values as they are.
struct Dicts<'py> {
    /// The open containers, innermost last, each with the key its next value goes under.
    stack: Vec<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)>,
    done: Option<Bound<'py, PyAny>>,
}

impl<'py> Dicts<'py> {
    fn put(&mut self, v: Bound<'py, PyAny>) -> Res {
        match self.stack.last_mut() {
            None => self.done = Some(v),
            Some((c, key)) => match key.take() {
                Some(k) => c.cast::<PyDict>().map_err(PyErr::from)?.set_item(k, v)?,
                None => c.cast::<PyList>().map_err(PyErr::from)?.append(v)?,
            },
        }
        Ok(())
    }

    fn set_key(&mut self, k: Bound<'py, PyAny>) {
        if let Some((_, key)) = self.stack.last_mut() {
            *key = Some(k);
        }
    }
}

impl<'py> Sink<'py> for Dicts<'py> {
    fn open(&mut self, py: Python<'py>, array: bool) -> Res {
        let c = if array {
            PyList::empty(py).into_any()
        } else {
            PyDict::new(py).into_any()
        };
        self.stack.push((c, None));
        Ok(())
    }

    fn close(&mut self, _array: bool) -> Res {
        let (c, _) = self.stack.pop().expect("closed what was opened");
        self.put(c)
    }

    fn key(&mut self, _text: &str, obj: &Bound<'py, PyString>) -> Res {
        self.set_key(obj.clone().into_any());
        Ok(())
    }

    fn any_key(&mut self, key: &Bound<'py, PyAny>) -> Res {
        self.set_key(key.clone());
        Ok(())
    }

    fn tag(&mut self, _text: &str, obj: &Bound<'py, PyString>) -> Res {
        self.put(obj.clone().into_any())
    }

    fn null(&mut self, py: Python<'py>) -> Res {
        self.put(py.None().into_bound(py))
    }

    fn value(&mut self, v: &Bound<'py, PyAny>, _depth: usize) -> Res {
        self.put(v.clone())
    }
}

// ------------------------------------------------------------------ the walk

/// Writes a model value: a registered class (or a subclass of one) or an unknown one.
fn model_value<'py, S: Sink<'py>>(
    s: &mut S,
    m: &Model,
    obj: &Bound<'py, PyAny>,
    depth: usize,
) -> Res {
    match m.shape_of(obj)? {
        Some(Shape::Class(c)) => object(s, m, obj, c, depth),
        Some(Shape::Unknown(data)) => s
            .value(&data.read(obj)?, depth)
            .map_err(|e| e.at(Step::Attr("data"), obj)),
        None => Err(not_a_model_value(obj)),
    }
}

/// Writes `obj`, an instance of `class` (or of a subclass), as an object at `depth`.
fn object<'py, S: Sink<'py>>(
    s: &mut S,
    m: &Model,
    obj: &Bound<'py, PyAny>,
    class: &Class,
    depth: usize,
) -> Res {
    if depth > MAX_DEPTH {
        return Err(too_deep(obj));
    }
    let py = obj.py();
    let extra = class.extra.read(obj)?;
    let extra = if extra.is_none() {
        None
    } else {
        match extra.cast_into::<PyDict>() {
            Ok(d) => (!d.is_empty()).then_some(d),
            // Anything else is taken as `dict.update` takes it.
            Err(e) => {
                let d = PyDict::new(py);
                d.call_method1("update", (e.into_inner(),))?;
                (!d.is_empty()).then_some(d)
            }
        }
    };
    // An unknown field named as a known one replaces its value in place (`dict.update`);
    // only then are the written keys tracked.
    let clash = match &extra {
        Some(d) => d.keys().iter().any(|k| {
            k.cast::<PyString>()
                .is_ok_and(|k| k.to_str().is_ok_and(|k| class.knows(k)))
        }),
        None => false,
    };
    let mut written: Vec<&'static str> = Vec::new();
    let mut replaced = |s: &mut S, key: &'static str| -> Result<bool, Fail> {
        if !clash {
            return Ok(false);
        }
        written.push(key);
        match extra
            .as_ref()
            .map(|d| d.get_item(key))
            .transpose()?
            .flatten()
        {
            Some(v) => {
                s.value(&v, depth + 1).map_err(|e| {
                    e.at(Step::Key(PyString::new(py, key).into_any().unbind()), obj)
                })?;
                Ok(true)
            }
            None => Ok(false),
        }
    };
    s.open(py, false)?;
    if let (Some((key, value)), Some((k, v))) = (class.def.tag, &class.tag) {
        s.key(key, k.bind(py))?;
        if !replaced(s, key)? {
            s.tag(value, v.bind(py))?;
        }
    }
    for f in &class.fields {
        let v = f.get.read(obj)?;
        if f.def.write == Write::OmitDefault && omitted(f.def, &v) {
            continue;
        }
        s.key(f.def.key, f.key.bind(py))?;
        if !replaced(s, f.def.key)? {
            field(s, m, f.def, &v, depth + 1).map_err(|e| e.at(Step::Attr(f.def.attr()), obj))?;
        }
    }
    if let Some(extra) = &extra {
        for (k, v) in extra.iter() {
            if clash
                && k.cast::<PyString>()
                    .is_ok_and(|k| k.to_str().is_ok_and(|k| written.contains(&k)))
            {
                continue;
            }
            s.any_key(&k)
                .and_then(|()| s.value(&v, depth + 1))
                .map_err(|e| e.at(Step::Key(k.clone().unbind()), obj))?;
        }
    }
    s.close(false)
}

/// Whether an omit-at-default field is left out: when it is its default (`None`,
/// `False`, `True`: the same object, so `0` does not pass for `False`).
fn omitted(f: &FieldDef, v: &Bound<'_, PyAny>) -> bool {
    match f.presence {
        Presence::Optional(DefaultValue::Null) => v.is_none(),
        Presence::Optional(DefaultValue::False) => {
            v.cast_exact::<PyBool>().is_ok_and(|b| !b.is_true())
        }
        Presence::Optional(DefaultValue::True) => {
            v.cast_exact::<PyBool>().is_ok_and(|b| b.is_true())
        }
        _ => false,
    }
}

/// Writes one field's value by its kind; None is null for every kind.
fn field<'py, S: Sink<'py>>(
    s: &mut S,
    m: &Model,
    f: &FieldDef,
    v: &Bound<'py, PyAny>,
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
        return s.value(v, depth);
    }
    if v.is_none() {
        return s.null(v.py());
    }
    match f.kind {
        FieldKind::Nested(_) | FieldKind::Message => model_value(s, m, v, depth),
        FieldKind::StrOrBlocks(_) if v.is_instance_of::<PyString>() => s.value(v, depth),
        FieldKind::StrList => items(s, v, depth, |s, x| s.value(x, depth + 1)),
        _ => items(s, v, depth, |s, x| model_value(s, m, x, depth + 1)),
    }
}

/// Writes the items of `v` (a list, a tuple or any iterable) as an array at `depth`.
fn items<'py, S: Sink<'py>>(
    s: &mut S,
    v: &Bound<'py, PyAny>,
    depth: usize,
    mut item: impl FnMut(&mut S, &Bound<'py, PyAny>) -> Res,
) -> Res {
    if depth > MAX_DEPTH {
        return Err(too_deep(v));
    }
    s.open(v.py(), true)?;
    let mut each = |s: &mut S, i: usize, x: &Bound<'py, PyAny>| {
        item(s, x).map_err(|e| e.at(Step::Index(i), v))
    };
    if let Ok(t) = v.cast::<PyTuple>() {
        for (i, x) in t.iter().enumerate() {
            each(s, i, &x)?;
        }
    } else if let Ok(l) = v.cast::<PyList>() {
        for (i, x) in l.iter().enumerate() {
            each(s, i, &x)?;
        }
    } else {
        for (i, x) in PyIterator::from_object(v)?.enumerate() {
            each(s, i, &x?)?;
        }
    }
    s.close(true)
}

// ------------------------------------------------------------------ JSON values

/// Appends `s` as a JSON string; a lone surrogate is refused with Python's message.
fn push_py_str(out: &mut Vec<u8>, s: &Bound<'_, PyString>) -> Res {
    match s.to_str() {
        Ok(text) => {
            push_str(out, text);
            Ok(())
        }
        Err(e) => Err(Fail::invalid(
            e.value(s.py())
                .str()
                .map_or_else(|_| "lone surrogate".to_owned(), |t| t.to_string()),
        )),
    }
}

/// Appends an int (any width, a subclass as its int value) as `json` writes it.
fn push_py_int(out: &mut Vec<u8>, v: &Bound<'_, PyAny>) -> Res {
    if let Ok(n) = v.extract::<i64>() {
        push_i64(out, n);
        return Ok(());
    }
    // SAFETY: `v` is an int; `PyNumber_Index` returns a new reference to an exact int (or
    // NULL with an error set), whose `str` is its decimal form, as `int.__repr__` writes.
    let exact = unsafe { Bound::from_owned_ptr_or_err(v.py(), ffi::PyNumber_Index(v.as_ptr()))? };
    out.extend_from_slice(exact.str()?.to_str()?.as_bytes());
    Ok(())
}

fn push_py_float(out: &mut Vec<u8>, x: f64) -> Res {
    if push_f64(out, x) {
        Ok(())
    } else {
        Err(Fail::invalid(
            "Out of range float values are not JSON compliant",
        ))
    }
}

/// Writes a value as `json.dumps` does, in the order its C encoder tests the types.
fn json_value(out: &mut Vec<u8>, v: &Bound<'_, PyAny>, depth: usize) -> Res {
    if v.is_none() {
        out.extend_from_slice(b"null");
    } else if let Ok(b) = v.cast_exact::<PyBool>() {
        out.extend_from_slice(if b.is_true() { b"true" } else { b"false" });
    } else if let Ok(s) = v.cast::<PyString>() {
        push_py_str(out, s)?;
    } else if v.is_instance_of::<PyInt>() {
        push_py_int(out, v)?;
    } else if let Ok(x) = v.cast::<PyFloat>() {
        push_py_float(out, x.value())?;
    } else if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        if depth > MAX_DEPTH {
            return Err(too_deep(v));
        }
        out.push(b'[');
        let mut each = |i: usize, x: &Bound<'_, PyAny>| -> Res {
            if i > 0 {
                out.push(b',');
            }
            json_value(out, x, depth + 1).map_err(|e| e.at(Step::Index(i), v))
        };
        if let Ok(t) = v.cast::<PyTuple>() {
            for (i, x) in t.iter().enumerate() {
                each(i, &x)?;
            }
        } else if let Ok(l) = v.cast::<PyList>() {
            for (i, x) in l.iter().enumerate() {
                each(i, &x)?;
            }
        }
        out.push(b']');
    } else if let Ok(d) = v.cast::<PyDict>() {
        if depth > MAX_DEPTH {
            return Err(too_deep(v));
        }
        out.push(b'{');
        let mut each = |i: usize, k: &Bound<'_, PyAny>, x: &Bound<'_, PyAny>| -> Res {
            if i > 0 {
                out.push(b',');
            }
            json_key(out, k)
                .and_then(|()| {
                    out.push(b':');
                    json_value(out, x, depth + 1)
                })
                .map_err(|e| e.at(Step::Key(k.clone().unbind()), v))
        };
        if v.is_exact_instance_of::<PyDict>() {
            for (i, (k, x)) in d.iter().enumerate() {
                each(i, &k, &x)?;
            }
        } else {
            // A subclass is written from its `items()`, as `json` does.
            for (i, pair) in d.call_method0("items")?.try_iter()?.enumerate() {
                let (k, x): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair?.extract()?;
                each(i, &k, &x)?;
            }
        }
        out.push(b'}');
    } else {
        return Err(Fail::invalid(format!(
            "Object of type {} is not JSON serializable",
            type_name(v)
        )));
    }
    Ok(())
}

/// Writes a dict key as `json` does: a str as itself; a float, an int, True, False and
/// None as their JSON text in quotes; anything else is refused.
fn json_key(out: &mut Vec<u8>, k: &Bound<'_, PyAny>) -> Res {
    if let Ok(s) = k.cast::<PyString>() {
        return push_py_str(out, s);
    }
    out.push(b'"');
    if let Ok(x) = k.cast::<PyFloat>() {
        push_py_float(out, x.value())?;
    } else if let Ok(b) = k.cast_exact::<PyBool>() {
        out.extend_from_slice(if b.is_true() { b"true" } else { b"false" });
    } else if k.is_none() {
        out.extend_from_slice(b"null");
    } else if k.is_instance_of::<PyInt>() {
        push_py_int(out, k)?;
    } else {
        return Err(Fail::invalid(format!(
            "keys must be str, int, float, bool or None, not {}",
            type_name(k)
        )));
    }
    out.push(b'"');
    Ok(())
}

// ------------------------------------------------------------------ entry points

impl Model {
    /// The JSON text of a model value; errors name it as `what` ("entry", "header").
    fn json(&self, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
        let mut sink = Json {
            out: Vec::with_capacity(512),
        };
        match model_value(&mut sink, self, obj, 1) {
            Ok(()) => Ok(sink.out),
            Err(e) => Err(e.into_py(obj, what)),
        }
    }
}

/// The JSON text of a model value (an entry, a message, a content block, a usage, the
/// header), as one line without its newline; `what` names it in errors.
#[pyfunction]
pub fn to_json<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let line = model()?.json(value, what)?;
    Ok(PyBytes::new(py, &line))
}

/// The JSON object of a model value as a dict (free-form values by reference; an
/// unknown entry or message gives its `data` itself).
#[pyfunction]
pub fn to_dict<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let m = model()?;
    let mut sink = Dicts {
        stack: Vec::new(),
        done: None,
    };
    match model_value(&mut sink, &m, value, 1) {
        Ok(()) => Ok(sink
            .done
            .unwrap_or_else(|| value.py().None().into_bound(value.py()))),
        Err(e) => Err(e.into_py(value, "value")),
    }
}

/// Appends `entry` (any entry object): its line written here, then checked and written by
/// the store. Returns its arena index.
pub fn append_entry(py: Python<'_>, store: &mut Store, entry: &Bound<'_, PyAny>) -> PyResult<u32> {
    let line = model()?.json(entry, "entry")?;
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
    let m = model()?;
    let reg = build::registry().ok_or_else(|| {
        PyRuntimeError::new_err("the model is not registered (import sessiontree)")
    })?;
    let Some(class) = m
        .exact(message.get_type().as_type_ptr())
        .filter(|c| model::MESSAGES.iter().any(|d| ptr::eq(*d, c.def)))
    else {
        return Ok(None);
    };
    let stamp = store.stamp().map_err(|e| to_py_err(py, e))?;
    let parent = (stamp.parent != NONE).then(|| store.arena().id(stamp.parent).to_owned());
    let entry = reg
        .new_message_entry(py, &stamp.id, parent.as_deref(), stamp.timestamp(), message)
        .ok_or_else(|| PyRuntimeError::new_err("the model's MessageEntry cannot be built"))?;
    let mut sink = Json {
        out: Vec::with_capacity(512),
    };
    sink.out.extend_from_slice(b"{\"type\":\"message\",\"id\":");
    push_str(&mut sink.out, &stamp.id);
    sink.out.extend_from_slice(b",\"parent_id\":");
    match &parent {
        Some(p) => push_str(&mut sink.out, p),
        None => sink.out.extend_from_slice(b"null"),
    }
    sink.out.extend_from_slice(b",\"timestamp\":");
    push_str(&mut sink.out, stamp.timestamp());
    sink.out.extend_from_slice(b",\"message\":");
    object(&mut sink, &m, message, class, 2)
        .map_err(|e| e.at(Step::Attr("message"), &entry).into_py(&entry, "entry"))?;
    sink.out.push(b'}');
    let line = sink.out;
    py.detach(|| store.append_stamped(&stamp, &line))
        .map_err(|e| to_py_err(py, e))?;
    Ok(Some(entry))
}

/// `line` (an entry line) with its `parent_id` replaced by `parent_id`, every other byte
/// kept: how a fork re-parents the entries it copies (`engine::fork`), from Python too.
#[pyfunction]
pub fn reparent_line<'py>(
    py: Python<'py>,
    line: &[u8],
    parent_id: Option<&str>,
) -> PyResult<Bound<'py, PyBytes>> {
    let out = crate::engine::replace_parent(line, parent_id).map_err(|e| to_py_err(py, e))?;
    Ok(PyBytes::new(py, &out))
}
