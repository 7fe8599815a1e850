//! Translating lines between pi's dialect and ours: each object's keys, and the values
//! the model says hold tags or enum values, driven by the model table (`model.rs`). Keys
//! the model does not know are kept as they are, in both directions, and so are
//! `details`, `data`, `arguments` and `metadata`, which hold the application's JSON.
//!
//! The reader reads most pi lines without this (`capture.rs` maps the keys as it reads);
//! what it leaves here is a v1 line, a leaf marker, a label or session name, v2's
//! `hookMessage`, and any line it refuses (so the refusal is worded as ours). Writing a
//! line to a pi file always translates it.

use std::borrow::Cow;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::engine::dialect_names::{
    camel, camel_eq, message_defs, pi_exception, pi_key, Dialect, LEAF_MARKER, MIXED_IN_PI,
};
use crate::engine::model::{self, FieldKind, TypeDef};
use crate::engine::types::{raw_str, Key, LineError, FORMAT_VERSION};

/// Which way a line is translated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    ToNative,
    ToPi,
}

fn bad<T>(msg: impl Into<String>) -> Result<T, LineError> {
    Err(LineError::new(msg))
}

// ------------------------------------------------------------------ raw objects

/// A JSON object as its keys and their values' raw JSON text, in order: only the values
/// the translation changes are parsed (a tool result's text is copied, never unescaped).
pub(crate) struct RawObj<'a>(Vec<(Cow<'a, str>, Val<'a>)>);

/// A value of a [`RawObj`]: raw JSON text, or an object or array being translated (written
/// out once, at the end, so a long text is copied once).
enum Val<'a> {
    Raw(Cow<'a, str>),
    Obj(RawObj<'a>),
    Arr(Vec<Val<'a>>),
}

impl Val<'_> {
    fn raw(&self) -> Option<&str> {
        match self {
            Val::Raw(r) => Some(r),
            Val::Obj(_) | Val::Arr(_) => None,
        }
    }

    fn write(&self, out: &mut String) {
        match self {
            Val::Raw(r) => out.push_str(r),
            Val::Obj(o) => o.write_to(out),
            Val::Arr(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
        }
    }

    fn len_hint(&self) -> usize {
        match self {
            Val::Raw(r) => r.len(),
            Val::Obj(o) => o.len_hint(),
            Val::Arr(items) => items.iter().map(|v| v.len_hint() + 1).sum::<usize>() + 2,
        }
    }
}

impl<'de> Deserialize<'de> for RawObj<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawObj<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<RawObj<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<Key<'de>, &'de RawValue>()? {
                    out.push((k.0, Val::Raw(Cow::Borrowed(v.get()))));
                }
                Ok(RawObj(out))
            }
        }
        d.deserialize_map(V)
    }
}

impl<'a> RawObj<'a> {
    pub(crate) fn parse(text: &'a str) -> Result<RawObj<'a>, LineError> {
        serde_json::from_str(text).map_err(|e| LineError::from_json("invalid JSON entry: ", &e))
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.raw())
    }

    pub(crate) fn has(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    /// The value of `key` when it is a JSON string.
    fn get_str(&self, key: &str) -> Option<Cow<'_, str>> {
        self.get(key).and_then(raw_str)
    }

    fn set(&mut self, key: &'static str, raw: String) {
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = Val::Raw(Cow::Owned(raw)),
            None => self.0.push((Cow::Borrowed(key), Val::Raw(Cow::Owned(raw)))),
        }
    }

    fn set_if_missing(&mut self, key: &'static str, raw: &str) {
        if !self.has(key) {
            self.0
                .push((Cow::Borrowed(key), Val::Raw(Cow::Owned(raw.to_owned()))));
        }
    }

    fn remove(&mut self, key: &str) -> Option<Val<'a>> {
        let i = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(i).1)
    }

    fn len_hint(&self) -> usize {
        self.0
            .iter()
            .map(|(k, v)| k.len() + v.len_hint() + 4)
            .sum::<usize>()
            + 2
    }

    fn write_to(&self, out: &mut String) {
        out.push('{');
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_json_str(out, k);
            out.push(':');
            v.write(out);
        }
        out.push('}');
    }

    fn write(&self) -> String {
        let mut out = String::with_capacity(self.len_hint());
        self.write_to(&mut out);
        out
    }
}

/// `s` as a JSON string.
fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&json_str(s));
    }
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

pub(crate) fn is_object(raw: &str) -> bool {
    raw.trim_start().starts_with('{')
}

fn is_array(raw: &str) -> bool {
    raw.trim_start().starts_with('[')
}

// ------------------------------------------------------------------ the translation

/// The field of `def` whose key is `key` in dialect `dir` comes from, and its key in the
/// other.
fn map_key(
    def: &TypeDef,
    key: &str,
    dir: Dir,
) -> Option<(&'static model::FieldDef, Cow<'static, str>)> {
    let tag = def.tag_value();
    for f in def.fields {
        match dir {
            Dir::ToNative => {
                let hit = match pi_exception(tag, f.key) {
                    Some(pi) => pi == key,
                    None => camel_eq(f.key, key),
                };
                if hit {
                    return Some((f, Cow::Borrowed(f.key)));
                }
            }
            Dir::ToPi if f.key == key => {
                return Some((f, pi_key(tag, f.key)));
            }
            Dir::ToPi => {}
        }
    }
    None
}

/// Translates the keys of `obj` (an object of the types `defs`) and the values inside them.
fn convert_object<'a>(
    obj: RawObj<'a>,
    defs: &[&TypeDef],
    dir: Dir,
) -> Result<RawObj<'a>, LineError> {
    let mut out = Vec::with_capacity(obj.0.len());
    for (key, value) in obj.0 {
        match defs.iter().find_map(|d| map_key(d, &key, dir)) {
            Some((f, new_key)) => {
                if dir == Dir::ToPi && value.raw() == Some("null") && new_key != "parentId" {
                    // pi leaves out what it has not got; a sessiontree writer writes null.
                    continue;
                }
                let value = convert_value(value, f.kind, dir)?;
                out.push((new_key, value));
            }
            None => out.push((key, value)),
        }
    }
    Ok(RawObj(out))
}

fn convert_value<'a>(value: Val<'a>, kind: FieldKind, dir: Dir) -> Result<Val<'a>, LineError> {
    let text = match value {
        Val::Raw(Cow::Borrowed(text)) => text,
        // A value set while translating: small, translated where it was set.
        other => return Ok(other),
    };
    Ok(match kind {
        FieldKind::Nested(def) if is_object(text) => {
            Val::Obj(convert_object(RawObj::parse(text)?, &[def], dir)?)
        }
        FieldKind::Blocks(_) | FieldKind::StrOrBlocks(_) if is_array(text) => {
            convert_array(text, dir, |o, dir| {
                convert_tagged(o, "type", &model::BLOCKS, dir)
            })?
        }
        FieldKind::Message if is_object(text) => {
            Val::Obj(convert_message(RawObj::parse(text)?, dir)?)
        }
        FieldKind::Messages if is_array(text) => convert_array(text, dir, convert_message)?,
        FieldKind::OneOf(values) => {
            match raw_str(text).and_then(|s| convert_enum(values, &s, dir)) {
                Some(v) => Val::Raw(Cow::Owned(json_str(&v))),
                None => Val::Raw(Cow::Borrowed(text)),
            }
        }
        _ => Val::Raw(Cow::Borrowed(text)),
    })
}

/// Each object of a JSON array converted by `f` (anything else kept).
fn convert_array<'a>(
    text: &'a str,
    dir: Dir,
    f: impl Fn(RawObj<'a>, Dir) -> Result<RawObj<'a>, LineError>,
) -> Result<Val<'a>, LineError> {
    let items: Vec<&'a RawValue> =
        serde_json::from_str(text).map_err(|e| LineError::from_json("invalid JSON entry: ", &e))?;
    items
        .into_iter()
        .map(|item| {
            let raw = item.get();
            if is_object(raw) {
                Ok(Val::Obj(f(RawObj::parse(raw)?, dir)?))
            } else {
                Ok(Val::Raw(Cow::Borrowed(raw)))
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Val::Arr)
}

fn convert_enum(values: &[&str], s: &str, dir: Dir) -> Option<String> {
    values.iter().find_map(|v| match dir {
        Dir::ToNative if camel_eq(v, s) && *v != s => Some((*v).to_owned()),
        Dir::ToPi if *v == s => Some(camel(v).into_owned()),
        _ => None,
    })
}

fn convert_tagged<'a>(
    mut obj: RawObj<'a>,
    tag_key: &'static str,
    table: &[&'static TypeDef],
    dir: Dir,
) -> Result<RawObj<'a>, LineError> {
    let Some(tag) = obj.get_str(tag_key).map(Cow::into_owned) else {
        return Ok(obj);
    };
    let def = table.iter().copied().find(|d| {
        let own = d.tag_value().unwrap_or_default();
        match dir {
            Dir::ToNative => camel_eq(own, &tag),
            Dir::ToPi => own == tag,
        }
    });
    let Some(def) = def else {
        return Ok(obj);
    };
    let own = def.tag_value().unwrap_or_default();
    let new_tag = match dir {
        Dir::ToNative => Cow::Borrowed(own),
        Dir::ToPi => camel(own),
    };
    if new_tag != tag.as_str() {
        obj.set(tag_key, json_str(&new_tag));
    }
    convert_object(obj, &[def], dir)
}

fn convert_message(mut obj: RawObj<'_>, dir: Dir) -> Result<RawObj<'_>, LineError> {
    // v2's `hookMessage` is v3's `custom` (pi's own migration).
    if dir == Dir::ToNative && obj.get_str("role").as_deref() == Some("hookMessage") {
        obj.set("role", json_str("custom"));
    }
    convert_tagged(obj, "role", &message_defs(), dir)
}

/// How a v1 line (no ids) is placed: its id comes from its line index (the header is 0).
pub(crate) fn v1_id(index: u64) -> String {
    format!("{index:08x}")
}

fn entry_defs(ty: &str) -> Vec<&'static TypeDef> {
    let mut defs: Vec<&'static TypeDef> = vec![&model::ENTRY_BASE];
    defs.extend(model::entry(ty));
    defs
}

/// Translates one pi entry line into the sessiontree dialect.
///
/// `v1` is, for a v1 file (whose entries have no ids), the line's index in the file (header
/// 0) and its parent's id when known (a v1 session is one chain; the engine chains it).
pub fn entry_to_native(
    line: &str,
    dialect: Dialect,
    v1: Option<(u64, Option<&str>)>,
) -> Result<String, LineError> {
    if !is_object(line) {
        return match serde_json::from_str::<serde::de::IgnoredAny>(line) {
            Err(e) => Err(LineError::from_json("invalid JSON entry: ", &e)),
            Ok(_) => bad("an entry must be a JSON object"),
        };
    }
    let mut obj = RawObj::parse(line)?;
    if obj.has("parent_id") && !obj.has("parentId") {
        return bad(MIXED_IN_PI);
    }
    let mut ty = obj.get_str("type").map(Cow::into_owned).unwrap_or_default();
    if dialect == Dialect::Pi(1) {
        if let Some((i, parent)) = v1 {
            obj.set("id", json_str(&v1_id(i)));
            obj.set(
                "parentId",
                parent.map_or_else(|| "null".to_owned(), json_str),
            );
        }
        obj.set_if_missing("parentId", "null");
        if ty == "compaction" {
            if let Some(index) = obj.remove("firstKeptEntryIndex") {
                let index = index.raw().and_then(|r| r.parse::<u64>().ok());
                let id = index.filter(|&i| i > 0).map(v1_id);
                obj.set(
                    "firstKeptEntryId",
                    id.map_or_else(|| "null".to_owned(), |i| json_str(&i)),
                );
            }
        }
    }
    if ty == "custom" && obj.get_str("customType").as_deref() == Some(LEAF_MARKER) {
        // The marker hangs under the target; its data names the leaf it moved from,
        // which is a leaf entry's parent.
        let from = match obj.get("data") {
            Some(d) if is_object(d) => RawObj::parse(d)?.get("parentId").map(str::to_owned),
            _ => None,
        };
        let mut leaf = RawObj(Vec::new());
        leaf.set("type", json_str("leaf"));
        if let Some(v) = obj.get("id") {
            leaf.set("id", v.to_owned());
        }
        leaf.set("parentId", from.unwrap_or_else(|| "null".to_owned()));
        if let Some(v) = obj.get("timestamp") {
            leaf.set("timestamp", v.to_owned());
        }
        leaf.set("targetId", obj.get("parentId").unwrap_or("null").to_owned());
        obj = leaf;
        ty = "leaf".into();
    }
    let mut obj = convert_object(obj, &entry_defs(&ty), Dir::ToNative)?;
    match ty.as_str() {
        // pi leaves out what sessiontree writes as null.
        "label" => obj.set_if_missing("label", "null"),
        "session_info" => {
            // pi's name is trimmed, and an empty one clears it.
            let name = obj
                .get_str("name")
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty());
            obj.set(
                "name",
                name.map_or_else(|| "null".to_owned(), |n| json_str(&n)),
            );
        }
        "compaction" => obj.set_if_missing("first_kept_entry_id", "null"),
        _ => {}
    }
    Ok(obj.write())
}

/// Translates one sessiontree entry line into pi's dialect (what is appended to a pi file).
pub fn entry_to_pi(line: &str) -> Result<String, LineError> {
    if !is_object(line) {
        return bad("an entry must be a JSON object");
    }
    let obj = RawObj::parse(line)?;
    let ty = obj.get_str("type").map(Cow::into_owned).unwrap_or_default();
    if ty == "leaf" {
        // Key order as pi writes it: type, id, parentId, timestamp.
        let mut marker = RawObj(Vec::new());
        marker.set("type", json_str("custom"));
        if let Some(v) = obj.get("id") {
            marker.set("id", v.to_owned());
        }
        marker.set(
            "parentId",
            obj.get("target_id").unwrap_or("null").to_owned(),
        );
        if let Some(v) = obj.get("timestamp") {
            marker.set("timestamp", v.to_owned());
        }
        marker.set("customType", json_str(LEAF_MARKER));
        let from = obj.get("parent_id").unwrap_or("null");
        marker.set("data", format!("{{\"parentId\":{from}}}"));
        return Ok(marker.write());
    }
    let mut obj = convert_object(obj, &entry_defs(&ty), Dir::ToPi)?;
    if ty == "session_info" {
        // pi reads an empty name as "no name".
        obj.set_if_missing("name", "\"\"");
    }
    Ok(obj.write())
}

/// pi's header in the sessiontree dialect (what the Python model reads).
pub fn header_to_native(header: &str) -> Result<String, LineError> {
    if !is_object(header) {
        return bad("malformed session header");
    }
    let mut out = convert_object(RawObj::parse(header)?, &[&model::HEADER], Dir::ToNative)?;
    // Read as migrated: the model's version.
    out.set("version", FORMAT_VERSION.to_string());
    out.set_if_missing("parent_session", "null");
    // Order as a sessiontree writer writes it.
    let mut ordered = RawObj(Vec::new());
    for key in [
        "type",
        "version",
        "id",
        "timestamp",
        "cwd",
        "parent_session",
    ] {
        if let Some(v) = out.remove(key) {
            ordered.0.push((Cow::Borrowed(key), v));
        }
    }
    ordered.0.extend(out.0);
    Ok(ordered.write())
}

/// A sessiontree header in pi's dialect (a v3 pi header).
pub fn header_to_pi(header: &str) -> Result<String, LineError> {
    if !is_object(header) {
        return bad("malformed session header");
    }
    Ok(convert_object(RawObj::parse(header)?, &[&model::HEADER], Dir::ToPi)?.write())
}

/// The header of a new pi file: [`header_to_pi`], keeping `parentSession` (null when there
/// is none, which pi reads as none) so the file says its dialect before it has entries.
pub fn header_to_pi_new(header: &str) -> Result<String, LineError> {
    let mut obj = RawObj::parse(header)?;
    let parent = obj.remove("parent_session");
    let mut out = convert_object(obj, &[&model::HEADER], Dir::ToPi)?;
    let parent = parent
        .and_then(|v| v.raw().map(str::to_owned))
        .unwrap_or_else(|| "null".into());
    out.set("parentSession", parent);
    Ok(out.write())
}
