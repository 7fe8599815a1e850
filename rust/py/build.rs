//! Entry objects built straight from a line's bytes: one serde pass makes the entry (of
//! any type the model table declares), its message, content blocks, `Usage` and `Cost` as
//! the Python model's own frozen slotted dataclasses, with no intermediate dict and no
//! second validation.
//!
//! The builder is driven by the model table (`engine::model`): each field's kind says how
//! its value is read, its presence what a missing or `null` one becomes. It builds what
//! Python's validating reader (`entries.entry_from_dict`) builds from `json.loads` of the
//! same line: the same classes, equal values, the same `_extra` dicts of unknown keys (in
//! line order), tuples for lists, floats for costs and the shared zero `Usage`/`Cost` for
//! missing or `null` ones (`tests/storage/test_direct_build.py` compares them on random
//! lines of every type and role). Anything it does not expect (a wrong kind, a duplicate
//! known key, an integer too wide for 64 bits, a long id, a block whose tag is not allowed,
//! a retained message whose `role` is not its first key, an unknown type or role) makes it
//! give up on the entry, and the caller sends that entry through the dict path, where the
//! validating reader decides.
//!
//! Instances are made as `object.__new__(cls)` makes them (the class's `tp_alloc`) and
//! their slots filled through each slot descriptor's `__set__` (`tp_descr_set`), as
//! `messages._fast_init` does: the classes' frozen `__setattr__` is never involved.

use std::cell::Cell;
use std::fmt;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyMapping, PyString, PyTuple, PyType};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::pyjson;
use super::slots::{self, class_named, setter, Alloc, Setter};
use super::tree::NodeClass;
use crate::engine::arena::{Kind, Role};
use crate::engine::line::MAX_ID_BYTES;
use crate::engine::model::{
    self, DefaultValue, FieldDef, FieldKind, Presence, TypeDef, ENTRY_BASE,
};
use crate::engine::types::Key;

/// Whether `def` is built here: every type of the model table but the entry base (an
/// abstract class) and the header (read by `line::parse_header` and Python's reader).
fn built_here(def: &TypeDef) -> bool {
    !std::ptr::eq(def, &ENTRY_BASE) && !std::ptr::eq(def, &model::HEADER)
}

/// Whether `def` is an entry type (its fields follow [`ENTRY_BASE`]'s).
fn is_entry(def: &TypeDef) -> bool {
    model::ENTRIES.iter().any(|e| std::ptr::eq(*e, def))
}

/// The most fields a built type has, the entry base included (`CompactionEntry`).
const MAX_FIELDS: usize = 10;

/// Ids longer than this many characters may exceed `MAX_ID_BYTES` in UTF-8 (and the
/// engine's limit is configurable): the validating reader measures them.
const SHORT_ID: usize = MAX_ID_BYTES / 4;

/// A registered class: how to make an instance and fill each field's slot.
struct Class {
    def: &'static TypeDef,
    /// An entry type: its first fields are [`ENTRY_BASE`]'s.
    entry: bool,
    alloc: Alloc,
    /// The fields in table order (for an entry, `ENTRY_BASE`'s first), with their slots.
    fields: Vec<(&'static FieldDef, Setter)>,
    extra: Setter,
}

/// The Python model as the binding sees it, registered once by `sessiontree`.
pub struct Registry {
    classes: Vec<Class>,
    /// `TreeNode` (`tree.rs`), if registered.
    pub(super) tree_node: Option<NodeClass>,
    /// The shared instance a missing or `null` nested object reads as, per nested type.
    empties: Vec<(&'static TypeDef, Py<PyAny>)>,
}

static REGISTRY: Mutex<Option<Arc<Registry>>> = Mutex::new(None);

/// The registered model, or None before `sessiontree` registered it (the dict path then
/// serves every read).
pub fn registry() -> Option<Arc<Registry>> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The fields of `def` in the order a line has them (for an entry, `ENTRY_BASE`'s first).
pub(super) fn fields_of(def: &'static TypeDef) -> Vec<&'static FieldDef> {
    let base: &'static [FieldDef] = if is_entry(def) {
        ENTRY_BASE.fields
    } else {
        &[]
    };
    base.iter().chain(def.fields).collect()
}

fn class(cls: &Bound<'_, PyType>, def: &'static TypeDef) -> PyResult<Class> {
    let fields = fields_of(def);
    if fields.len() > MAX_FIELDS {
        return Err(PyTypeError::new_err(format!(
            "{} has too many fields",
            def.class
        )));
    }
    // Every slot must be filled: the class's dataclass fields (bases' first) are exactly
    // the table's and `_extra`.
    let py = cls.py();
    let declared: Vec<String> = py
        .import("dataclasses")?
        .getattr("fields")?
        .call1((cls,))
        .map_err(|_| {
            PyTypeError::new_err(format!("{} is not a model class (no fields)", def.class))
        })?
        .cast_into::<PyTuple>()?
        .iter()
        .map(|f| f.getattr("name")?.extract::<String>())
        .collect::<PyResult<_>>()?;
    let mut expected: Vec<String> = fields.iter().map(|f| f.attr().to_owned()).collect();
    expected.push("_extra".to_owned());
    let (mut a, mut b) = (declared.clone(), expected.clone());
    a.sort();
    b.sort();
    if a != b {
        return Err(PyTypeError::new_err(format!(
            "{} has fields {declared:?}, the model table {expected:?}",
            def.class
        )));
    }
    Ok(Class {
        def,
        entry: is_entry(def),
        alloc: Alloc::new(cls)?,
        fields: fields
            .into_iter()
            .map(|f| Ok((f, setter(cls, f.attr())?)))
            .collect::<PyResult<_>>()?,
        extra: setter(cls, "_extra")?,
    })
}

/// Registers the model's classes (`classes` maps each class name of the table to its
/// class) and the shared instances a missing nested object reads as (`empties`, by class
/// name). A second call replaces the first.
#[pyfunction]
pub fn _register_model(
    classes: &Bound<'_, PyMapping>,
    empties: &Bound<'_, PyMapping>,
) -> PyResult<()> {
    let mut built = Vec::new();
    for def in model::MODEL.iter().copied().filter(|d| built_here(d)) {
        built.push(class(&class_named(classes, def.class)?, def)?);
    }
    let mut shared = Vec::new();
    for c in &built {
        if let Ok(obj) = empties.get_item(c.def.class) {
            if !obj.is_exact_instance(c.alloc.cls(obj.py())) {
                return Err(PyTypeError::new_err(format!(
                    "the empty {} is not an instance of it",
                    c.def.class
                )));
            }
            shared.push((c.def, obj.unbind()));
        }
    }
    let tree_node = match classes.get_item("TreeNode") {
        Ok(cls) => Some(NodeClass::new(cls.cast::<PyType>()?)?),
        Err(_) => None,
    };
    *REGISTRY.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(Registry {
        classes: built,
        tree_node,
        empties: shared,
    }));
    Ok(())
}

impl Registry {
    fn class(&self, def: &TypeDef) -> Option<&Class> {
        self.classes.iter().find(|c| std::ptr::eq(c.def, def))
    }

    fn empty<'py>(&self, py: Python<'py>, def: &TypeDef) -> Option<Bound<'py, PyAny>> {
        self.empties
            .iter()
            .find(|(d, _)| std::ptr::eq(*d, def))
            .map(|(_, o)| o.bind(py).clone())
    }

    /// A `MessageEntry` of these values, made as the builder makes one (no checks: the
    /// caller vouches for them); None when the model is not registered as expected.
    pub fn new_message_entry<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        parent_id: Option<&str>,
        timestamp: &str,
        message: &Bound<'py, PyAny>,
    ) -> Option<Bound<'py, PyAny>> {
        let class = self.class(&model::MESSAGE_ENTRY)?;
        let parent = match parent_id {
            Some(p) => PyString::new(py, p).into_any(),
            None => py.None().into_bound(py),
        };
        let values = [
            Some(PyString::new(py, id).into_any()),
            Some(parent),
            Some(PyString::new(py, timestamp).into_any()),
            Some(message.clone()),
        ];
        // Base fields first, then `message`: the order `fields_of` gives.
        if class.fields.len() != values.len() {
            return None;
        }
        class.instance(py, &values, &py.None().into_bound(py))
    }

    /// Builds the entry of `line`, of kind `kind` (a message entry's message of role
    /// `role`); None when the line must go through the dict path. `root`: the entry has
    /// no parent in the tree (a dangling `parent_id` reads as None).
    pub fn entry<'py>(
        &self,
        py: Python<'py>,
        line: &[u8],
        kind: Kind,
        role: Role,
        root: bool,
    ) -> Option<Bound<'py, PyAny>> {
        let def = model::entry(kind.name())?;
        let message = if std::ptr::eq(def, &model::MESSAGE_ENTRY) {
            Some(self.class(model::message(role.name()?)?)?)
        } else {
            None
        };
        let text = simdutf8::basic::from_utf8(line).ok()?;
        let ctx = Ctx {
            py,
            reg: self,
            inexact: Cell::new(false),
            message,
            root,
        };
        let mut de = serde_json::Deserializer::from_str(text);
        let entry = Object {
            ctx: &ctx,
            class: self.class(def)?,
        }
        .deserialize(&mut de)
        .ok()?;
        de.end().ok()?;
        // A number that may have been a wide integer: Python's parser keeps it exact.
        (!ctx.inexact.get()).then_some(entry)
    }
}

struct Ctx<'py, 'r> {
    py: Python<'py>,
    reg: &'r Registry,
    inexact: Cell<bool>,
    /// The class of a message entry's message (its role is known from the arena).
    message: Option<&'r Class>,
    root: bool,
}

impl<'py> Ctx<'py, '_> {
    fn any(&self) -> pyjson::Seed<'py, '_> {
        pyjson::Seed {
            py: self.py,
            inexact: &self.inexact,
            strings: pyjson::PLAIN,
        }
    }

    /// What a default reads as (None for a nested type with no registered instance).
    fn default(&self, f: &FieldDef, d: DefaultValue) -> Option<Bound<'py, PyAny>> {
        let py = self.py;
        Some(match d {
            DefaultValue::Null => py.None().into_bound(py),
            DefaultValue::False => PyBool::new(py, false).to_owned().into_any(),
            DefaultValue::True => PyBool::new(py, true).to_owned().into_any(),
            DefaultValue::Zero if matches!(f.kind, FieldKind::Number) => {
                PyFloat::new(py, 0.0).into_any()
            }
            DefaultValue::Zero => 0i64.into_pyobject(py).ok()?.into_any(),
            DefaultValue::Str(s) => PyString::intern(py, s).into_any(),
            DefaultValue::Empty => match f.kind {
                FieldKind::Nested(def) => self.reg.empty(py, def)?,
                _ => return None,
            },
        })
    }

    /// What a missing field reads as; None (give up) for a required one.
    fn missing(&self, f: &FieldDef) -> Option<Bound<'py, PyAny>> {
        match f.presence {
            Presence::Required => None,
            Presence::Optional(d) => self.default(f, d),
        }
    }

    /// What `null` reads as; None (give up) where it is not allowed.
    fn null(&self, f: &FieldDef) -> Option<Bound<'py, PyAny>> {
        if !f.nullable {
            return None;
        }
        match f.presence {
            Presence::Required => Some(self.py.None().into_bound(self.py)),
            Presence::Optional(d) => self.default(f, d),
        }
    }

    /// Checks a scalar field's parsed value (None: give up).
    fn scalar(&self, f: &FieldDef, v: Bound<'py, PyAny>) -> Option<Bound<'py, PyAny>> {
        if v.is_none() {
            return self.null(f);
        }
        let ok = match f.kind {
            FieldKind::Str => v.is_exact_instance_of::<PyString>(),
            FieldKind::Int | FieldKind::TimestampMs => v.is_exact_instance_of::<PyInt>(),
            FieldKind::Number if v.is_exact_instance_of::<PyInt>() => {
                // Stored as a float, as the constructor stores it.
                return Some(PyFloat::new(self.py, v.extract::<f64>().ok()?).into_any());
            }
            FieldKind::Number => v.is_exact_instance_of::<PyFloat>(),
            FieldKind::Bool => v.is_exact_instance_of::<PyBool>(),
            FieldKind::Any => true,
            FieldKind::Object => v.is_exact_instance_of::<PyDict>(),
            FieldKind::OneOf(set) => v
                .cast::<PyString>()
                .ok()
                .and_then(|s| s.to_str().ok().map(|s| set.contains(&s)))
                .unwrap_or(false),
            _ => false,
        };
        ok.then_some(v)
    }

    /// Makes an instance of `class` from its field values (in `class.fields` order).
    fn make(
        &self,
        class: &Class,
        values: &mut [Option<Bound<'py, PyAny>>],
        extra: Option<Bound<'py, PyDict>>,
    ) -> Option<Bound<'py, PyAny>> {
        let mut filled: [Option<Bound<'py, PyAny>>; MAX_FIELDS] = [const { None }; MAX_FIELDS];
        for (i, (f, _)) in class.fields.iter().enumerate() {
            filled[i] = Some(match values[i].take() {
                Some(v) => v,
                None => self.missing(f)?,
            });
        }
        let extra = extra.map_or_else(|| self.py.None().into_bound(self.py), Bound::into_any);
        class.instance(self.py, &filled[..class.fields.len()], &extra)
    }
}

impl Class {
    /// A new instance with every slot filled: the fields from `values` (in `fields`
    /// order, all present) and `_extra`.
    fn instance<'py>(
        &self,
        py: Python<'py>,
        values: &[Option<Bound<'py, PyAny>>],
        extra: &Bound<'py, PyAny>,
    ) -> Option<Bound<'py, PyAny>> {
        let obj = self.alloc.make(py).ok()?;
        let slots = self
            .fields
            .iter()
            .map(|(_, s)| s)
            .zip(values.iter().map(|v| v.as_ref()))
            .chain(std::iter::once((&self.extra, Some(extra))));
        for (setter, value) in slots {
            setter.set(&obj, value?).ok()?;
        }
        let members = values.iter().flatten().chain(std::iter::once(extra));
        slots::untrack_if_acyclic(&obj, members);
        Some(obj)
    }
}

fn give_up<E: de::Error>() -> E {
    E::custom("not built directly")
}

/// An object of a known type (entry, message, usage, cost) read field by field.
struct Object<'c, 'py, 'r> {
    ctx: &'c Ctx<'py, 'r>,
    class: &'r Class,
}

impl<'de, 'py> DeserializeSeed<'de> for Object<'_, 'py, '_> {
    type Value = Bound<'py, PyAny>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 'py> Visitor<'de> for Object<'_, 'py, '_> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {} object", self.class.def.class)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        fields(self.ctx, self.class, map, false)
    }
}

/// The rest of an object of `class` read from `map` (`tagged`: its tag was read already).
fn fields<'de, 'py, A: MapAccess<'de>>(
    ctx: &Ctx<'py, '_>,
    class: &Class,
    mut map: A,
    mut tagged: bool,
) -> Result<Bound<'py, PyAny>, A::Error> {
    let mut values: [Option<Bound<'py, PyAny>>; MAX_FIELDS] = [const { None }; MAX_FIELDS];
    let mut extra: Option<Bound<'py, PyDict>> = None;
    while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
        if let Some((_, value)) = class.def.tag.filter(|(k, _)| *k == key) {
            let Key(got) = map.next_value::<Key<'de>>()?;
            if tagged || got != value {
                return Err(give_up());
            }
            tagged = true;
            continue;
        }
        let Some(i) = class.fields.iter().position(|(f, _)| f.key == key) else {
            let value = map.next_value_seed(ctx.any())?;
            let dict = extra.get_or_insert_with(|| PyDict::new(ctx.py));
            dict.set_item(PyString::intern(ctx.py, &key), value)
                .map_err(pyjson::py_err)?;
            continue;
        };
        if values[i].is_some() {
            return Err(give_up());
        }
        let f = class.fields[i].0;
        values[i] = Some(map.next_value_seed(Field { ctx, f })?);
    }
    if class.def.tag.is_some() && !tagged {
        return Err(give_up());
    }
    if class.entry {
        // The base fields come first: id, parent_id, timestamp.
        let id = values[0].as_ref().ok_or_else(give_up)?;
        if id.len().map_err(pyjson::py_err)? > SHORT_ID {
            return Err(give_up());
        }
        if ctx.root {
            values[1] = Some(ctx.py.None().into_bound(ctx.py));
        }
    }
    ctx.make(class, &mut values, extra).ok_or_else(give_up)
}

/// A message of any role the table knows, as `retained_tail` holds them: its `role` must
/// come first (as writers write it), else the entry goes through the dict path.
struct AnyMessage<'c, 'py, 'r> {
    ctx: &'c Ctx<'py, 'r>,
}

impl<'de, 'py> DeserializeSeed<'de> for AnyMessage<'_, 'py, '_> {
    type Value = Bound<'py, PyAny>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, 'py> Visitor<'de> for AnyMessage<'_, 'py, '_> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        match map.next_key::<Key<'de>>()? {
            Some(Key(key)) if key == "role" => {}
            _ => return Err(give_up()),
        }
        let Key(role) = map.next_value::<Key<'de>>()?;
        let def = model::message(&role).ok_or_else(give_up)?;
        let class = self.ctx.reg.class(def).ok_or_else(give_up)?;
        fields(self.ctx, class, map, true)
    }
}

/// One field's value, read by its kind.
struct Field<'c, 'py, 'r> {
    ctx: &'c Ctx<'py, 'r>,
    f: &'static FieldDef,
}

impl<'de, 'py> DeserializeSeed<'de> for Field<'_, 'py, '_> {
    type Value = Bound<'py, PyAny>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let ctx = self.ctx;
        match self.f.kind {
            FieldKind::Nested(_)
            | FieldKind::Message
            | FieldKind::Messages
            | FieldKind::StrList
            | FieldKind::Blocks(_)
            | FieldKind::StrOrBlocks(_) => d.deserialize_any(self),
            _ => {
                let v = ctx.any().deserialize(d)?;
                ctx.scalar(self.f, v).ok_or_else(give_up)
            }
        }
    }
}

impl<'de, 'py> Visitor<'de> for Field<'_, 'py, '_> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the value of {:?}", self.f.key)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.ctx.null(self.f).ok_or_else(give_up)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.visit_unit()
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match self.f.kind {
            FieldKind::StrOrBlocks(_) => Ok(PyString::new(self.ctx.py, v).into_any()),
            _ => Err(give_up()),
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let ctx = self.ctx;
        let mut items = Vec::new();
        match self.f.kind {
            FieldKind::Blocks(tags) | FieldKind::StrOrBlocks(tags) => {
                while let Some(b) = seq.next_element_seed(Block { ctx, tags })? {
                    items.push(b);
                }
            }
            FieldKind::Messages => {
                while let Some(m) = seq.next_element_seed(AnyMessage { ctx })? {
                    items.push(m);
                }
            }
            FieldKind::StrList => {
                while let Some(v) = seq.next_element_seed(ctx.any())? {
                    if !v.is_exact_instance_of::<PyString>() {
                        return Err(give_up());
                    }
                    items.push(v);
                }
            }
            _ => return Err(give_up()),
        }
        let tuple = PyTuple::new(ctx.py, &items)
            .map(Bound::into_any)
            .map_err(pyjson::py_err)?;
        slots::untrack_if_acyclic(&tuple, items.iter());
        Ok(tuple)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let class = match self.f.kind {
            FieldKind::Nested(def) => self.ctx.reg.class(def).ok_or_else(give_up)?,
            FieldKind::Message => self.ctx.message.ok_or_else(give_up)?,
            _ => return Err(give_up()),
        };
        Object {
            ctx: self.ctx,
            class,
        }
        .visit_map(map)
    }
}

/// A content block: its `type` may come after its fields, so the values are read first
/// (every block field is a scalar) and sorted out when the object ends.
struct Block<'c, 'py, 'r> {
    ctx: &'c Ctx<'py, 'r>,
    tags: &'static [&'static str],
}

impl<'de, 'py> DeserializeSeed<'de> for Block<'_, 'py, '_> {
    type Value = Bound<'py, PyAny>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, 'py> Visitor<'de> for Block<'_, 'py, '_> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let ctx = self.ctx;
        let mut tag = None;
        let mut pairs: Vec<(Key<'de>, Bound<'py, PyAny>)> = Vec::new();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if key.0 == "type" {
                if tag.is_some() {
                    return Err(give_up());
                }
                tag = Some(map.next_value::<Key<'de>>()?.0);
            } else {
                pairs.push((key, map.next_value_seed(ctx.any())?));
            }
        }
        let tag = tag.ok_or_else(give_up)?;
        if !self.tags.contains(&&*tag) {
            return Err(give_up());
        }
        let def = model::block(&tag).ok_or_else(give_up)?;
        let class = ctx.reg.class(def).ok_or_else(give_up)?;
        let mut values: [Option<Bound<'py, PyAny>>; MAX_FIELDS] = [const { None }; MAX_FIELDS];
        let mut extra: Option<Bound<'py, PyDict>> = None;
        for (Key(key), value) in pairs {
            match class.fields.iter().position(|(f, _)| f.key == key) {
                Some(i) if values[i].is_none() => {
                    values[i] = Some(ctx.scalar(class.fields[i].0, value).ok_or_else(give_up)?);
                }
                Some(_) => return Err(give_up()),
                None => {
                    let dict = extra.get_or_insert_with(|| PyDict::new(ctx.py));
                    dict.set_item(PyString::intern(ctx.py, &key), value)
                        .map_err(pyjson::py_err)?;
                }
            }
        }
        ctx.make(class, &mut values, extra).ok_or_else(give_up)
    }
}
