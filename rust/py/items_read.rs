//! The adapters' readers: sessiontree entry lines straight to the OpenAI SDK's response
//! items (plain dicts), the lines `items.rs` (and the adapter's Python path) write; and
//! straight to the data of custom entries of one type (the Claude store's transcript).
//!
//! Every byte of a line is parsed by serde_json, in one pass: a `DeserializeSeed` per level
//! of the entry line (the entry object, its `message`, the content blocks) takes the keys
//! it needs as serde hands them over and steps over the rest (`IgnoredAny`: checked, built
//! into nothing). Strings the items hold become Python strings straight from the line's
//! bytes (serde borrows them when they have no escapes); the item kept beside the message
//! and a custom entry's data are built by `pyjson::Seed` (with the read's
//! short strings shared), as `json.loads` builds them.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString};

use super::items::{learn, python_dumps, text, Decline};
use super::pyjson;
use crate::engine::types;

/// What the adapter's view calls an entry (`_ITEM`, `_COMPACTION`, `_OTHER`).
const ITEM: i64 = 1;
const COMPACTION: i64 = 2;
const OTHER: i64 = 0;

/// Strings up to this many bytes go through the [`StrTable`].
const SHORT: usize = 24;
const SLOTS: usize = 4096;

/// A string of [`StrTable`]: its length, its bytes, the str.
type Slot<'py> = (u8, [u8; SHORT], Bound<'py, PyString>);

/// Short strings made once per read and shared (ids, names, short texts): a fixed table
/// indexed by a hash of the bytes, where a collision replaces the slot, so a read's
/// unique strings cost a lookup each and never grow it.
struct StrTable<'py> {
    py: Python<'py>,
    slots: Vec<Option<Slot<'py>>>,
    hasher: foldhash::fast::FixedState,
}

impl<'py> StrTable<'py> {
    fn new(py: Python<'py>) -> Self {
        StrTable {
            py,
            slots: vec![None; SLOTS],
            hasher: foldhash::fast::FixedState::with_seed(0x5e55),
        }
    }

    /// The str of a value.
    fn get(&mut self, s: &str) -> Bound<'py, PyString> {
        self.shared(s, false)
    }

    /// The str of a key: interned when made (as `json.loads` shares its keys).
    fn key(&mut self, s: &str) -> Bound<'py, PyString> {
        self.shared(s, true)
    }

    fn shared(&mut self, s: &str, key: bool) -> Bound<'py, PyString> {
        use std::hash::BuildHasher;
        let bytes = s.as_bytes();
        let make = |py| {
            if key {
                PyString::intern(py, s)
            } else {
                PyString::new(py, s)
            }
        };
        if bytes.len() > SHORT {
            return make(self.py);
        }
        let at = (self.hasher.hash_one(bytes) as usize) & (SLOTS - 1);
        if let Some((len, held, obj)) = &self.slots[at] {
            if usize::from(*len) == bytes.len() && &held[..bytes.len()] == bytes {
                return obj.clone();
            }
        }
        let obj = make(self.py);
        let mut held = [0u8; SHORT];
        held[..bytes.len()].copy_from_slice(bytes);
        self.slots[at] = Some((bytes.len() as u8, held, obj.clone())); // at most SHORT
        obj
    }
}

/// What every seed of one read shares.
struct Cx<'a, 'py> {
    py: Python<'py>,
    strings: RefCell<StrTable<'py>>,
    /// Set by the free-form values' seed when a number may have been an integer wider than 64 bits
    /// (the line is then the Python path's: only Python's parser keeps it exact).
    inexact: Cell<bool>,
    residual_key: &'a str,
}

impl<'a, 'py> Cx<'a, 'py> {
    fn new(py: Python<'py>, residual_key: &'a str) -> Self {
        Cx {
            py,
            strings: RefCell::new(StrTable::new(py)),
            inexact: Cell::new(false),
            residual_key,
        }
    }

    /// Any JSON value as the Python object `json.loads` makes of it, with keys and short
    /// strings shared through the read's table: the item kept beside each message
    /// repeats the same keys and values ("type", "status", "completed"...).
    fn any<'c>(&'c self) -> pyjson::Seed<'py, 'c> {
        pyjson::Seed {
            py: self.py,
            inexact: &self.inexact,
            strings: &self.strings,
        }
    }
}

/// The table makes the strings straight from a line's bytes (no escapes); others are made
/// anew (keys interned), as [`pyjson::Plain`] makes them.
impl<'py> pyjson::Strings<'py> for RefCell<StrTable<'py>> {
    fn value(&self, py: Python<'py>, s: &str, borrowed: bool) -> Bound<'py, PyAny> {
        if borrowed {
            self.borrow_mut().get(s).into_any()
        } else {
            PyString::new(py, s).into_any()
        }
    }
    fn key(&self, py: Python<'py>, s: &str, borrowed: bool) -> Bound<'py, PyString> {
        if borrowed {
            self.borrow_mut().key(s)
        } else {
            PyString::intern(py, s)
        }
    }
}

/// The keys this reader reads (any other is skipped).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Type,
    Message,
    CustomType,
    Data,
    Role,
    Content,
    ToolCallId,
    Residual,
    Text,
    Thinking,
    Id,
    Name,
    Arguments,
    Other,
}

/// Reads a key as a [`Key`] (escaped keys too: serde hands those over undone).
#[derive(Clone, Copy)]
struct KeySeed<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(match v {
            "type" => Key::Type,
            "message" => Key::Message,
            "custom_type" => Key::CustomType,
            "data" => Key::Data,
            "role" => Key::Role,
            "content" => Key::Content,
            "tool_call_id" => Key::ToolCallId,
            "text" => Key::Text,
            "thinking" => Key::Thinking,
            "id" => Key::Id,
            "name" => Key::Name,
            "arguments" => Key::Arguments,
            _ if v == self.0 => Key::Residual,
            _ => Key::Other,
        })
    }
}

/// A string value as a Python str (short ones shared through [`StrTable`]), or `null` as
/// `None`; anything else fails the line.
#[derive(Clone, Copy)]
struct StrSeed<'c, 'a, 'py>(&'c Cx<'a, 'py>);

impl<'de, 'py> DeserializeSeed<'de> for StrSeed<'_, '_, 'py> {
    type Value = Option<Bound<'py, PyAny>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 'py> Visitor<'de> for StrSeed<'_, '_, 'py> {
    type Value = Option<Bound<'py, PyAny>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Some(self.0.strings.borrow_mut().get(v).into_any()))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        // Undone escapes (serde's scratch buffer): a string of its own.
        Ok(Some(PyString::new(self.0.py, v).into_any()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// A block of a message's content: its type, and the fields the items are made of.
struct BlockIn<'de, 'py> {
    kind: Cow<'de, str>,
    text: Option<Option<Bound<'py, PyAny>>>,
    thinking: Option<Option<Bound<'py, PyAny>>>,
    id: Option<Option<Bound<'py, PyAny>>>,
    name: Option<Option<Bound<'py, PyAny>>>,
    arguments: Option<&'de RawValue>,
}

impl BlockIn<'_, '_> {
    fn is(&self, kind: &str) -> bool {
        self.kind == kind
    }
}

/// The message's content: its text, or its blocks.
enum Content<'de, 'py> {
    Text(Bound<'py, PyAny>),
    Blocks(Vec<BlockIn<'de, 'py>>),
}

struct MessageIn<'de, 'py> {
    role: Option<Cow<'de, str>>,
    content: Option<Content<'de, 'py>>,
    tool_call_id: Option<Option<Bound<'py, PyAny>>>,
    residual: Option<Bound<'py, PyAny>>,
}

struct EntryIn<'de, 'py> {
    kind: Option<Cow<'de, str>>,
    message: Option<MessageIn<'de, 'py>>,
    /// Whether `custom_type` is the adapter's (`None`: no such key).
    custom: Option<bool>,
    data: Option<Bound<'py, PyAny>>,
}

/// Sets a field read once (a key given twice fails the line: `json.loads` keeps the last).
fn once<T, E: de::Error>(slot: &mut Option<T>, value: T) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::custom("a key given twice"));
    }
    *slot = Some(value);
    Ok(())
}

/// A short string value (a type, a role), borrowed from the line when it has no escapes.
fn short<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Cow<'de, str>, A::Error> {
    Ok(map.next_value::<types::Key<'de>>()?.0)
}

/// Reads one content block.
#[derive(Clone, Copy)]
struct BlockSeed<'c, 'a, 'py>(&'c Cx<'a, 'py>);

impl<'de, 'py> DeserializeSeed<'de> for BlockSeed<'_, '_, 'py> {
    type Value = BlockIn<'de, 'py>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, 'py> Visitor<'de> for BlockSeed<'_, '_, 'py> {
    type Value = BlockIn<'de, 'py>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let cx = self.0;
        let s = StrSeed(cx);
        let (mut kind, mut text, mut thinking, mut id, mut name, mut arguments) =
            (None, None, None, None, None, None);
        while let Some(key) = map.next_key_seed(KeySeed(cx.residual_key))? {
            match key {
                Key::Type => once(&mut kind, short(&mut map)?)?,
                Key::Text => once(&mut text, map.next_value_seed(s)?)?,
                Key::Thinking => once(&mut thinking, map.next_value_seed(s)?)?,
                Key::Id => once(&mut id, map.next_value_seed(s)?)?,
                Key::Name => once(&mut name, map.next_value_seed(s)?)?,
                Key::Arguments => once(&mut arguments, map.next_value::<&'de RawValue>()?)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(BlockIn {
            kind: kind.ok_or_else(|| de::Error::missing_field("type"))?,
            text,
            thinking,
            id,
            name,
            arguments,
        })
    }
}

/// Reads a message's content: a string, or a list of blocks.
#[derive(Clone, Copy)]
struct ContentSeed<'c, 'a, 'py>(&'c Cx<'a, 'py>);

impl<'de, 'py> DeserializeSeed<'de> for ContentSeed<'_, '_, 'py> {
    type Value = Content<'de, 'py>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 'py> Visitor<'de> for ContentSeed<'_, '_, 'py> {
    type Value = Content<'de, 'py>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or a list of blocks")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Content::Text(self.0.strings.borrow_mut().get(v).into_any()))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Content::Text(PyString::new(self.0.py, v).into_any()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(1));
        while let Some(block) = seq.next_element_seed(BlockSeed(self.0))? {
            blocks.push(block);
        }
        Ok(Content::Blocks(blocks))
    }
}

/// Reads the entry's `message` object (`null` fails the line: only the entry can say).
#[derive(Clone, Copy)]
struct MessageSeed<'c, 'a, 'py>(&'c Cx<'a, 'py>);

impl<'de, 'py> DeserializeSeed<'de> for MessageSeed<'_, '_, 'py> {
    type Value = MessageIn<'de, 'py>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, 'py> Visitor<'de> for MessageSeed<'_, '_, 'py> {
    type Value = MessageIn<'de, 'py>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let cx = self.0;
        let mut m = MessageIn {
            role: None,
            content: None,
            tool_call_id: None,
            residual: None,
        };
        while let Some(key) = map.next_key_seed(KeySeed(cx.residual_key))? {
            match key {
                Key::Role => once(&mut m.role, short(&mut map)?)?,
                Key::Content => once(&mut m.content, map.next_value_seed(ContentSeed(cx))?)?,
                Key::ToolCallId => {
                    let s = StrSeed(cx);
                    once(&mut m.tool_call_id, map.next_value_seed(s)?)?;
                }
                Key::Residual => once(&mut m.residual, map.next_value_seed(cx.any())?)?,
                // Ids, times, provider, model, usage...: checked, built into nothing.
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(m)
    }
}

/// Whether a `custom_type` value is the string `self.0` (any other value is stepped over).
#[derive(Clone, Copy)]
struct IsStr<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for IsStr<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IsStr<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

/// Reads an entry line: the fields [`known_of`] decides on.
#[derive(Clone, Copy)]
struct EntrySeed<'c, 'a, 'py> {
    cx: &'c Cx<'a, 'py>,
    custom_type: &'c str,
}

impl<'de, 'py> DeserializeSeed<'de> for EntrySeed<'_, '_, 'py> {
    type Value = EntryIn<'de, 'py>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, 'py> Visitor<'de> for EntrySeed<'_, '_, 'py> {
    type Value = EntryIn<'de, 'py>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an entry")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let cx = self.cx;
        let mut e = EntryIn {
            kind: None,
            message: None,
            custom: None,
            data: None,
        };
        while let Some(key) = map.next_key_seed(KeySeed(cx.residual_key))? {
            // The message and the data are read only where the type (first in the lines
            // sessiontree writes) does not rule them out.
            let may = |want: &str| e.kind.as_deref().is_none_or(|k| k == want);
            match key {
                Key::Type => once(&mut e.kind, short(&mut map)?)?,
                Key::Message if may("message") => {
                    once(&mut e.message, map.next_value_seed(MessageSeed(cx))?)?;
                }
                Key::CustomType => {
                    once(&mut e.custom, map.next_value_seed(IsStr(self.custom_type))?)?;
                }
                Key::Data if may("custom") => once(&mut e.data, map.next_value_seed(cx.any())?)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(e)
    }
}

/// `{**rest, key: value}` of a freshly parsed `rest` (changed in place: it is ours).
fn with<'py>(
    rest: &Bound<'py, PyAny>,
    key: &Bound<'py, PyString>,
    value: &Bound<'py, PyAny>,
) -> Result<Bound<'py, PyAny>, Decline> {
    let d = rest.cast_exact::<PyDict>().map_err(|_| Decline)?;
    d.set_item(key, value)?;
    Ok(rest.clone())
}

fn field<'a, 'py>(
    f: &'a Option<Option<Bound<'py, PyAny>>>,
) -> Result<&'a Bound<'py, PyAny>, Decline> {
    f.as_ref().and_then(Option::as_ref).ok_or(Decline)
}

/// The rest of a residual's blocks (`_blocks_from_dicts`) for text blocks only.
fn text_blocks<'py>(
    py: Python<'py>,
    blocks: &[BlockIn<'_, 'py>],
    rest: &Bound<'py, PyAny>,
) -> Result<Bound<'py, PyAny>, Decline> {
    let rest = rest.cast_exact::<PyList>().map_err(|_| Decline)?;
    if rest.len() != blocks.len() {
        return Err(Decline);
    }
    let key = pyo3::intern!(py, "text");
    let mut out = Vec::with_capacity(blocks.len());
    for (b, r) in blocks.iter().zip(rest.iter()) {
        if !b.is("text") {
            return Err(Decline);
        }
        out.push(with(&r, key, field(&b.text)?)?);
    }
    Ok(PyList::new(py, out)?.into_any())
}

/// The item a mapped message line stands for (`_item_from_message_dict`).
fn item_of<'py>(
    py: Python<'py>,
    m: MessageIn<'_, 'py>,
    names: &Bound<'py, PyDict>,
) -> Result<Bound<'py, PyAny>, Decline> {
    let residual = m.residual.ok_or(Decline)?;
    let item = residual
        .cast_exact::<PyDict>()
        .map_err(|_| Decline)?
        .clone();
    let content = m.content.ok_or(Decline)?;
    let rest_of = |key: &Bound<'py, PyString>| -> Result<Option<Bound<'py, PyAny>>, Decline> {
        Ok(item.get_item(key)?.filter(|v| !v.is_none()))
    };
    let k_content = pyo3::intern!(py, "content");
    let k_text = pyo3::intern!(py, "text");
    match m.role.as_deref().ok_or(Decline)? {
        "user" => match (rest_of(k_content)?, content) {
            (None, Content::Text(t)) => item.set_item(k_content, t)?,
            (Some(rest), Content::Blocks(blocks)) => {
                item.set_item(k_content, text_blocks(py, &blocks, &rest)?)?;
            }
            _ => return Err(Decline),
        },
        "tool_result" => {
            let Content::Blocks(blocks) = content else {
                return Err(Decline);
            };
            let call_id = field(&m.tool_call_id)?;
            item.set_item(pyo3::intern!(py, "call_id"), call_id)?;
            let k_output = pyo3::intern!(py, "output");
            match rest_of(k_output)? {
                None => {
                    let mut texts = blocks.iter().filter(|b| b.is("text"));
                    match (texts.next(), texts.next()) {
                        (None, _) => item.set_item(k_output, "")?,
                        (Some(one), None) => item.set_item(k_output, field(&one.text)?)?,
                        _ => {
                            let mut joined = String::new();
                            for b in blocks.iter().filter(|b| b.is("text")) {
                                joined.push_str(text(field(&b.text)?)?);
                            }
                            item.set_item(k_output, joined)?;
                        }
                    }
                }
                Some(rest) => item.set_item(k_output, text_blocks(py, &blocks, &rest)?)?,
            }
        }
        "assistant" => {
            let Content::Blocks(blocks) = content else {
                return Err(Decline);
            };
            let kind = item.get_item(pyo3::intern!(py, "type"))?;
            let kind = match &kind {
                Some(k) if k.is_instance_of::<PyString>() => Some(text(k)?.to_owned()),
                _ => None,
            };
            match kind.as_deref() {
                Some("function_call") => {
                    let [call] = blocks.as_slice() else {
                        return Err(Decline);
                    };
                    if !call.is("tool_call") {
                        return Err(Decline);
                    }
                    let k_args = pyo3::intern!(py, "arguments");
                    let marker = item.get_item(k_args)?;
                    let compact = match &marker {
                        None => Some(false),
                        Some(v) if v.is_none() => Some(false),
                        Some(v) if v.is_exact_instance_of::<PyInt>() => {
                            if v.extract::<i64>()? == 1 {
                                Some(true)
                            } else {
                                return Err(Decline);
                            }
                        }
                        Some(_) => None,
                    };
                    let (call_id, name) = (field(&call.id)?, field(&call.name)?);
                    item.set_item(pyo3::intern!(py, "call_id"), call_id)?;
                    item.set_item(pyo3::intern!(py, "name"), name)?;
                    names.set_item(call_id, name)?;
                    if let Some(compact) = compact {
                        let raw = call.arguments.ok_or(Decline)?.get();
                        let args: serde_json::Value =
                            serde_json::from_str(raw).map_err(|_| Decline)?;
                        let mut out = Vec::new();
                        python_dumps(&mut out, &args, compact).ok_or(Decline)?;
                        let out = String::from_utf8(out).map_err(|_| Decline)?;
                        item.set_item(k_args, out)?;
                    }
                }
                Some("reasoning") => {
                    let rest = item
                        .get_item(pyo3::intern!(py, "summary"))?
                        .ok_or(Decline)?;
                    let rest = rest.cast_exact::<PyList>().map_err(|_| Decline)?;
                    if rest.len() != blocks.len() {
                        return Err(Decline);
                    }
                    let mut out = Vec::with_capacity(blocks.len());
                    for (b, r) in blocks.iter().zip(rest.iter()) {
                        if b.is("thinking") {
                            out.push(with(&r, k_text, field(&b.thinking)?)?);
                        }
                    }
                    item.set_item(pyo3::intern!(py, "summary"), PyList::new(py, out)?)?;
                }
                _ => {
                    let texts: Vec<&Bound<'py, PyAny>> = blocks
                        .iter()
                        .filter(|b| b.is("text"))
                        .map(|b| field(&b.text))
                        .collect::<Result<_, _>>()?;
                    match rest_of(k_content)? {
                        None => item.set_item(k_content, *texts.first().ok_or(Decline)?)?,
                        Some(rest) => {
                            let rest = rest.cast_exact::<PyList>().map_err(|_| Decline)?;
                            if rest.len() != texts.len() {
                                return Err(Decline);
                            }
                            let k_refusal = pyo3::intern!(py, "refusal");
                            let mut out = Vec::with_capacity(texts.len());
                            for (t, r) in texts.iter().zip(rest.iter()) {
                                let d = r.cast_exact::<PyDict>().map_err(|_| Decline)?;
                                let refusal =
                                    d.get_item(pyo3::intern!(py, "type"))?.is_some_and(|k| {
                                        k.cast::<PyString>()
                                            .is_ok_and(|s| s.to_str().ok() == Some("refusal"))
                                    });
                                out.push(with(&r, if refusal { k_refusal } else { k_text }, t)?);
                            }
                            item.set_item(k_content, PyList::new(py, out)?)?;
                        }
                    }
                }
            }
        }
        _ => return Err(Decline),
    }
    Ok(item.into_any())
}

/// An entry line read by [`EntrySeed`], or `Decline` where it is not certainly read as
/// `json.loads` reads it (not UTF-8, malformed, a read key given twice, a number that may
/// have been an integer wider than 64 bits).
fn read_entry<'de, 'py>(
    cx: &Cx<'_, 'py>,
    line: &'de [u8],
    custom_type: &str,
) -> Result<EntryIn<'de, 'py>, Decline> {
    // One UTF-8 check for the whole line; serde_json's `from_str` then checks no string.
    let text = simdutf8::basic::from_utf8(line).map_err(|_| Decline)?;
    cx.inexact.set(false);
    let mut de = serde_json::Deserializer::from_str(text);
    let entry = EntrySeed { cx, custom_type }
        .deserialize(&mut de)
        .and_then(|e| de.end().map(|()| e))
        .map_err(|_| Decline)?;
    if cx.inexact.get() {
        return Err(Decline);
    }
    Ok(entry)
}

/// What one line is for the adapter's view (`_items_from_line`): `(code, items)`, or
/// `Decline` where only the entry object can say, or where the line is not certainly read
/// as `json.loads` reads it (malformed, a lone surrogate or a wide integer in what the
/// items hold, a read key given twice, nesting deeper than serde_json's limit). One pass
/// of serde_json over the line (see the section's comment).
fn known_of<'py>(
    cx: &Cx<'_, 'py>,
    line: &[u8],
    custom_type: &str,
    names: &Bound<'py, PyDict>,
) -> Result<Bound<'py, PyAny>, Decline> {
    let py = cx.py;
    let entry = read_entry(cx, line, custom_type)?;
    let (code, items) = match entry.kind.as_deref().ok_or(Decline)? {
        "message" => (
            ITEM,
            vec![item_of(py, entry.message.ok_or(Decline)?, names)?],
        ),
        "custom" if entry.custom == Some(true) => {
            let data = entry.data.ok_or(Decline)?;
            if let Ok(d) = data.cast_exact::<PyDict>() {
                learn(d, names)?;
            }
            (ITEM, vec![data])
        }
        "compaction" => (COMPACTION, Vec::new()),
        _ => (OTHER, Vec::new()),
    };
    Ok((code, PyList::new(py, items)?)
        .into_pyobject(py)?
        .into_any())
}

/// For each entry line, what the OpenAI adapter's view keeps of it: `(1, [item])` for an
/// item entry (a message the adapter mapped, or a custom entry of `custom_type`), `(2, [])`
/// for a compaction, `(0, [])` for any other entry, or `None` where the adapter's Python
/// path must say (a message it did not map, a shape this reader does not vouch for). The
/// same items `_items_from_line` gives, built straight from the line (serde_json, one pass);
/// `names` (call id -> tool name) learns the name of every function call read.
#[pyfunction]
pub fn openai_items_of_lines<'py>(
    py: Python<'py>,
    lines: &Bound<'py, PyList>,
    custom_type: &str,
    residual_key: &str,
    names: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyList>> {
    let cx = Cx::new(py, residual_key);
    let mut out = Vec::with_capacity(lines.len());
    for line in lines.iter() {
        let line = line.cast::<PyBytes>()?;
        let found = known_of(&cx, line.as_bytes(), custom_type, names);
        out.push(match found {
            Ok(found) => found,
            Err(Decline) => py.None().into_bound(py),
        });
    }
    PyList::new(py, out)
}

/// The OpenAI adapter's first read of a session, in one pass: the line of each entry of
/// `idxs` read by `engine` and converted as [`openai_items_of_lines`] converts it, with
/// no `bytes` object per line, into `known` (entry id -> `(code, items)`), the view's
/// lists extended on the way (`ids`, `codes`, `items`, `ends`: see `_View`; `None` to
/// leave the view). Returns the bytes of the lines read, the positions (in `idxs`) of the
/// lines left to the adapter's Python path (which reads those again, and builds the view
/// afresh then), and the position of the last compaction read, if any.
#[pyfunction]
#[pyo3(signature = (engine, idxs, custom_type, residual_key, names, known, view=None))]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub fn openai_read_known<'py>(
    py: Python<'py>,
    engine: &Bound<'py, super::engine::PyEngine>,
    idxs: Vec<u32>,
    custom_type: &str,
    residual_key: &str,
    names: &Bound<'py, PyDict>,
    known: &Bound<'py, PyDict>,
    view: Option<(
        Bound<'py, PyList>,
        Bound<'py, PyList>,
        Bound<'py, PyList>,
        Bound<'py, PyList>,
    )>,
) -> PyResult<(u64, Vec<usize>, Option<usize>)> {
    // The collector stays off while the engine's lock is held: a collection could run
    // finalizers (any Python code) that reach for the same engine.
    let _paused = super::copy::GcPaused::new();
    let cx = Cx::new(py, residual_key);
    let mut size = 0u64;
    let mut left = Vec::new();
    let mut last = None;
    let mut k = 0usize;
    let mut count = view.as_ref().map_or(0, |v| v.2.len());
    engine.get().each_line(py, &idxs, |entry_id, line| {
        size += line.len() as u64;
        let found = known_of(&cx, line, custom_type, names);
        match found {
            Ok(found) => {
                let entry_id = PyString::new(py, entry_id);
                if let Some((ids, codes, items, ends)) = &view {
                    let found = found.cast::<pyo3::types::PyTuple>()?;
                    let code = found.get_item(0)?;
                    if code.extract::<i64>()? == COMPACTION {
                        last = Some(k);
                    }
                    let these = found.get_item(1)?;
                    let these = these.cast::<PyList>()?;
                    for item in these.iter() {
                        items.append(item)?;
                    }
                    count += these.len();
                    ids.append(&entry_id)?;
                    codes.append(code)?;
                    ends.append(count)?;
                }
                known.set_item(entry_id, found)?;
            }
            Err(Decline) => left.push(k),
        }
        k += 1;
        Ok(())
    })?;
    Ok((size, left, last))
}

/// The `data` of each entry of `idxs` that is a custom entry of `custom_type`, in order,
/// read by `engine` and built straight from its line (serde_json, one pass a line: the
/// data as `json.loads` builds it, the rest of the line stepped over, no `bytes` object
/// per line): the Claude store's load. `None` when a line is not certainly read as
/// `json.loads` reads it (malformed, a key given twice, a wide integer, nesting past
/// serde_json's limit) or is a custom entry of that type without its data: the caller's
/// Python path then reads them all, and decides.
#[pyfunction]
pub fn custom_data_of_lines<'py>(
    py: Python<'py>,
    engine: &Bound<'py, super::engine::PyEngine>,
    idxs: Vec<u32>,
    custom_type: &str,
) -> PyResult<Option<Bound<'py, PyList>>> {
    // Off while the engine's lock is held, as in `openai_read_known`.
    let _paused = super::copy::GcPaused::new();
    // No message is read here, so no key is the residual's: "" only ever names a key the
    // entry's visitor steps over.
    let cx = Cx::new(py, "");
    let out = PyList::empty(py);
    let mut sure = true;
    engine.get().each_line(py, &idxs, |_, line| {
        if !sure {
            return Ok(());
        }
        match data_of(&cx, line, custom_type) {
            Ok(Some(data)) => out.append(data)?,
            Ok(None) => {}
            Err(Decline) => sure = false,
        }
        Ok(())
    })?;
    Ok(sure.then_some(out))
}

/// One line of [`custom_data_of_lines`]: its data, `None` for an entry of another kind or
/// type, or `Decline`.
fn data_of<'py>(
    cx: &Cx<'_, 'py>,
    line: &[u8],
    custom_type: &str,
) -> Result<Option<Bound<'py, PyAny>>, Decline> {
    let entry = read_entry(cx, line, custom_type)?;
    if entry.kind.as_deref() != Some("custom") || entry.custom != Some(true) {
        return Ok(None);
    }
    entry.data.map(Some).ok_or(Decline)
}

/// The loop of the OpenAI adapter's `_View.push_all`: for each id of `ids`, its
/// `(code, items)` in `known` appended, the code to `codes`, the items to `items`, and
/// the count of `items` after them to `ends`. Returns the position in `ids` of the last
/// compaction (code 2), if any.
#[pyfunction]
pub fn openai_view_extend<'py>(
    ids: &Bound<'py, PyList>,
    known: &Bound<'py, PyDict>,
    codes: &Bound<'py, PyList>,
    items: &Bound<'py, PyList>,
    ends: &Bound<'py, PyList>,
) -> PyResult<Option<usize>> {
    let mut last = None;
    let mut count = items.len();
    for (k, entry_id) in ids.iter().enumerate() {
        let found = known
            .get_item(&entry_id)?
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(entry_id.clone().unbind()))?;
        let found = found.cast::<pyo3::types::PyTuple>()?;
        let code = found.get_item(0)?;
        if code.extract::<i64>()? == COMPACTION {
            last = Some(k);
        }
        codes.append(code)?;
        let these = found.get_item(1)?;
        let these = these.cast::<PyList>()?;
        for item in these.iter() {
            items.append(item)?;
        }
        count += these.len();
        ends.append(count)?;
    }
    Ok(last)
}
