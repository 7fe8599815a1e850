//! pi's dialect: the same tree of entries, written by pi (the TypeScript coding agent this
//! format descends from) with camelCase keys and its own role and block names.
//!
//! The engine reads a pi file by translating each line into the sessiontree dialect, and
//! writes to one by translating each new line back, so the arena, the checks and the
//! Python model are the same for both. The translation is driven by the model table
//! (`model.rs`): a field's pi key is the camelCase of its key ([`pi_key`]), a message
//! role's and a block type's pi tag the camelCase of its tag, an enum value's (a stop
//! reason) the camelCase of the value; the few names pi spells otherwise are in
//! [`PI_KEYS`]. Keys the model does not know are kept as they are, in both directions, and
//! so are `details`, `data`, `arguments` and `metadata`, which hold the application's JSON.
//!
//! pi's file versions: v1 (no `version` in the header, entries without ids: ids are
//! assigned from the line number, parents as a chain, `firstKeptEntryIndex` becomes
//! `firstKeptEntryId`), v2 (ids; the message role `hookMessage` reads as `custom`) and v3.
//! pi rewrites old files when it opens them; sessiontree never does, it reads them as if
//! migrated, and only v3 files are written to.
//!
//! pi has no `leaf` entry (its leaf is the last entry of the file). A sessiontree leaf
//! move in a pi file is written as a `custom` entry of type [`LEAF_MARKER`] hung under the
//! target, which pi ignores in the context, so pi resumes at the target too; sessiontree
//! reads the marker back as a `leaf` entry.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::engine::line::{LineError, FORMAT_VERSION};
use crate::engine::model::{self, FieldKind, TypeDef};

/// Which dialect a session file is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// sessiontree's own (FORMAT.md): snake_case.
    #[default]
    Native,
    /// pi's, of this file-format version (1, 2 or 3).
    Pi(u8),
}

impl Dialect {
    /// `"sessiontree"` or `"pi"`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Native => "sessiontree",
            Dialect::Pi(_) => "pi",
        }
    }

    /// True for pi's dialect, any version.
    pub fn is_pi(self) -> bool {
        matches!(self, Dialect::Pi(_))
    }

    /// The file-format version the file is written in.
    pub fn version(self) -> u8 {
        match self {
            Dialect::Native => FORMAT_VERSION as u8,
            Dialect::Pi(v) => v,
        }
    }

    /// Whether new lines may be appended: pi migrates (rewrites) v1 and v2 files when it
    /// opens them, which would orphan anything appended to them first.
    pub fn writable(self) -> bool {
        !matches!(self, Dialect::Pi(1 | 2))
    }
}

/// The `customType` of the entry that stands for a sessiontree leaf move in a pi file.
pub const LEAF_MARKER: &str = "sessiontree.leaf";

/// Keys pi spells other than as the camelCase of the model's key: (type tag, key, pi key).
const PI_KEYS: &[(&str, &str, &str)] = &[
    ("thinking", "signature", "thinkingSignature"),
    ("text", "signature", "textSignature"),
    ("session", "parent_session", "parentSession"),
];

/// pi's message role that has no sessiontree class: read as an unknown message whose keys
/// are translated like the model's (so `exit_code`, not `exitCode`).
static BASH_EXECUTION: TypeDef = TypeDef {
    class: "UnknownMessage",
    tag: Some(("role", "bash_execution")),
    doc: "A shell command the user ran in pi (`!cmd`), with its output.",
    fields: &[
        field("command", FieldKind::Str),
        field("output", FieldKind::Str),
        field("exit_code", FieldKind::Any),
        field("cancelled", FieldKind::Bool),
        field("truncated", FieldKind::Bool),
        field("full_output_path", FieldKind::Str),
        field("exclude_from_context", FieldKind::Bool),
        field("timestamp", FieldKind::TimestampMs),
    ],
};

const fn field(key: &'static str, kind: FieldKind) -> model::FieldDef {
    model::FieldDef {
        key,
        attr: None,
        kind,
        presence: model::Presence::Optional(model::DefaultValue::Null),
        nullable: true,
        write: model::Write::OmitDefault,
    }
}

/// The camelCase of a snake_case name (`first_kept_entry_id` → `firstKeptEntryId`).
pub fn camel(snake: &str) -> Cow<'_, str> {
    if !snake.contains('_') {
        return Cow::Borrowed(snake);
    }
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The pi key of field `key` of the type tagged `tag`.
pub fn pi_key<'a>(tag: Option<&str>, key: &'a str) -> Cow<'a, str> {
    for &(t, k, pi) in PI_KEYS {
        if Some(t) == tag && k == key {
            return Cow::Borrowed(pi);
        }
    }
    camel(key)
}

/// Which way a line is translated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    ToNative,
    ToPi,
}

fn bad<T>(msg: impl Into<String>) -> Result<T, LineError> {
    Err(LineError(msg.into()))
}

/// A translated key of `def` (the key itself when the model does not know it).
fn map_key<'k>(def: &TypeDef, key: &'k str, dir: Dir) -> Option<(&'static model::FieldDef, Cow<'k, str>)> {
    let tag = def.tag_value();
    for f in def.fields {
        match dir {
            Dir::ToNative => {
                if pi_key(tag, f.key) == key {
                    return Some((f, Cow::Borrowed(f.key)));
                }
            }
            Dir::ToPi => {
                if f.key == key {
                    return Some((f, Cow::Owned(pi_key(tag, f.key).into_owned())));
                }
            }
        }
    }
    None
}

/// Translates the keys of `obj` (an object of type `def`) and the values inside them.
fn convert_object(obj: Map<String, Value>, defs: &[&TypeDef], dir: Dir) -> Result<Map<String, Value>, LineError> {
    let mut out = Map::with_capacity(obj.len());
    for (key, value) in obj {
        let found = defs.iter().find_map(|d| map_key(d, &key, dir));
        match found {
            Some((f, new_key)) => {
                let value = convert_value(value, f.kind, dir)?;
                if dir == Dir::ToPi && value.is_null() && new_key != "parentId" {
                    // pi leaves out what it has not got; a sessiontree writer writes null.
                    continue;
                }
                out.insert(new_key.into_owned(), value);
            }
            None => {
                out.insert(key, value);
            }
        }
    }
    Ok(out)
}

fn convert_value(value: Value, kind: FieldKind, dir: Dir) -> Result<Value, LineError> {
    Ok(match (kind, value) {
        (FieldKind::Nested(def), Value::Object(o)) => Value::Object(convert_object(o, &[def], dir)?),
        (FieldKind::Blocks(_) | FieldKind::StrOrBlocks(_), Value::Array(a)) => {
            Value::Array(a.into_iter().map(|b| convert_block(b, dir)).collect::<Result<_, _>>()?)
        }
        (FieldKind::Message, Value::Object(o)) => convert_message(o, dir)?,
        (FieldKind::Messages, Value::Array(a)) => Value::Array(
            a.into_iter()
                .map(|m| match m {
                    Value::Object(o) => convert_message(o, dir),
                    other => Ok(other),
                })
                .collect::<Result<_, _>>()?,
        ),
        (FieldKind::OneOf(values), Value::String(s)) => Value::String(convert_enum(values, s, dir)),
        (_, v) => v,
    })
}

fn convert_enum(values: &[&str], s: String, dir: Dir) -> String {
    for v in values {
        let pi = camel(v);
        match dir {
            Dir::ToNative if pi == s.as_str() => return (*v).to_owned(),
            Dir::ToPi if *v == s => return pi.into_owned(),
            _ => {}
        }
    }
    s
}

/// The tag of `def` as pi writes it (message roles and block types are camelCase).
fn pi_tag(def: &TypeDef) -> Cow<'static, str> {
    camel(def.tag_value().unwrap_or_default())
}

fn convert_tagged(
    mut obj: Map<String, Value>,
    tag_key: &str,
    table: &[&'static TypeDef],
    dir: Dir,
) -> Result<Map<String, Value>, LineError> {
    let tag = obj.get(tag_key).and_then(Value::as_str).map(str::to_owned);
    let Some(tag) = tag else {
        return Ok(obj);
    };
    let def = table.iter().copied().find(|d| match dir {
        Dir::ToNative => pi_tag(d) == tag.as_str(),
        Dir::ToPi => d.tag_value() == Some(tag.as_str()),
    });
    let Some(def) = def else {
        return Ok(obj);
    };
    let new_tag = match dir {
        Dir::ToNative => def.tag_value().unwrap_or_default().to_owned(),
        Dir::ToPi => pi_tag(def).into_owned(),
    };
    obj.insert(tag_key.to_owned(), Value::String(new_tag));
    convert_object(obj, &[def], dir)
}

fn convert_block(block: Value, dir: Dir) -> Result<Value, LineError> {
    match block {
        Value::Object(o) => Ok(Value::Object(convert_tagged(o, "type", &model::BLOCKS, dir)?)),
        other => Ok(other),
    }
}

/// The message roles the translation knows: the model's and pi's `bashExecution`.
fn message_defs() -> [&'static TypeDef; 7] {
    let m = &model::MESSAGES;
    [m[0], m[1], m[2], m[3], m[4], m[5], &BASH_EXECUTION]
}

fn convert_message(mut obj: Map<String, Value>, dir: Dir) -> Result<Value, LineError> {
    // v2's `hookMessage` is v3's `custom` (pi's own migration).
    if dir == Dir::ToNative && obj.get("role").and_then(Value::as_str) == Some("hookMessage") {
        obj.insert("role".into(), Value::String("custom".into()));
    }
    Ok(Value::Object(convert_tagged(obj, "role", &message_defs(), dir)?))
}

/// How a v1 line (no ids) is placed: its id comes from its line index (the header is 0).
fn v1_id(index: u64) -> String {
    format!("{index:08x}")
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
    let value: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return bad(format!("invalid JSON entry: {e}")),
    };
    let Value::Object(mut obj) = value else {
        return bad("an entry must be a JSON object");
    };
    if obj.contains_key("parent_id") && !obj.contains_key("parentId") {
        return bad(MIXED_IN_PI);
    }
    let mut ty = obj.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
    if dialect == Dialect::Pi(1) {
        if let Some((i, parent)) = v1 {
            obj.insert("id".into(), Value::String(v1_id(i)));
            let parent = parent.map_or(Value::Null, |p| Value::String(p.to_owned()));
            obj.insert("parentId".into(), parent);
        }
        obj.entry("parentId").or_insert(Value::Null);
        if ty == "compaction" {
            if let Some(Value::Number(n)) = obj.remove("firstKeptEntryIndex") {
                let id = n.as_u64().filter(|&i| i > 0).map(v1_id);
                obj.insert("firstKeptEntryId".into(), id.map_or(Value::Null, Value::String));
            }
        }
    }
    if ty == "custom" && obj.get("customType").and_then(Value::as_str) == Some(LEAF_MARKER) {
        // The marker hangs under the target.
        let parent = obj.get("parentId").cloned().unwrap_or(Value::Null);
        let mut leaf = Map::new();
        leaf.insert("type".into(), Value::String("leaf".into()));
        for key in ["id", "parentId", "timestamp"] {
            if let Some(v) = obj.get(key) {
                leaf.insert(key.into(), v.clone());
            }
        }
        leaf.insert("targetId".into(), parent);
        obj = leaf;
        ty = "leaf".into();
    }
    let def = model::entry(&ty);
    let mut defs: Vec<&TypeDef> = vec![&model::ENTRY_BASE];
    defs.extend(def);
    let mut obj = convert_object(obj, &defs, Dir::ToNative)?;
    match ty.as_str() {
        // pi leaves out what sessiontree writes as null.
        "label" => {
            obj.entry("label").or_insert(Value::Null);
        }
        "session_info" => {
            // pi's name is trimmed, and an empty one clears it.
            let name = obj
                .get("name")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(|n| Value::String(n.to_owned()));
            obj.insert("name".into(), name.unwrap_or(Value::Null));
        }
        "compaction" => {
            obj.entry("first_kept_entry_id").or_insert(Value::Null);
        }
        _ => {}
    }
    serde_json::to_string(&obj).map_err(|e| LineError(e.to_string()))
}

/// The message of a sessiontree line found in a pi file.
pub const MIXED_IN_PI: &str =
    "a sessiontree (snake_case) entry in a pi (camelCase) file: the file mixes dialects";
/// The message of a pi line found in a sessiontree file.
pub const MIXED_IN_NATIVE: &str =
    "a pi (camelCase) entry in a sessiontree (snake_case) file: the file mixes dialects";

/// Translates one sessiontree entry line into pi's dialect (what is appended to a pi file).
pub fn entry_to_pi(line: &str) -> Result<String, LineError> {
    let value: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return bad(format!("invalid JSON entry: {e}")),
    };
    let Value::Object(obj) = value else {
        return bad("an entry must be a JSON object");
    };
    let ty = obj.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
    if ty == "leaf" {
        let mut marker = Map::new();
        marker.insert("type".into(), Value::String("custom".into()));
        for key in ["id", "timestamp"] {
            if let Some(v) = obj.get(key) {
                marker.insert(key.into(), v.clone());
            }
        }
        let target = obj.get("target_id").cloned().unwrap_or(Value::Null);
        marker.insert("parentId".into(), target);
        marker.insert("customType".into(), Value::String(LEAF_MARKER.into()));
        // Key order as pi writes it: type, id, parentId, timestamp.
        let mut ordered = Map::new();
        for key in ["type", "id", "parentId", "timestamp", "customType"] {
            if let Some(v) = marker.remove(key) {
                ordered.insert(key.into(), v);
            }
        }
        return serde_json::to_string(&ordered).map_err(|e| LineError(e.to_string()));
    }
    let mut defs: Vec<&TypeDef> = vec![&model::ENTRY_BASE];
    defs.extend(model::entry(&ty));
    let mut obj = convert_object(obj, &defs, Dir::ToPi)?;
    if ty == "session_info" {
        // pi reads an empty name as "no name".
        obj.entry("name").or_insert(Value::String(String::new()));
    }
    serde_json::to_string(&obj).map_err(|e| LineError(e.to_string()))
}

/// Which dialect a header says, if it says one: `Some(Pi(v))` for pi's `parentSession` or a
/// missing `version` (pi's v1), `Some(Native)` for sessiontree-only keys.
fn header_dialect(obj: &Map<String, Value>) -> Result<Option<Dialect>, LineError> {
    // (v1's `branchedFrom` needs no rule: a header without `version` is pi's v1.)
    let pi = obj.contains_key("parentSession");
    let native = obj.contains_key("parent_session") || obj.contains_key("metadata");
    let version = obj.get("version");
    if pi && native {
        return bad("the session header mixes pi's and sessiontree's keys: the dialect cannot be told");
    }
    let v = match version {
        None if native => return bad("session header has no valid integer `version`"),
        None => return Ok(Some(Dialect::Pi(1))),
        Some(v) => match v.as_u64() {
            Some(v) if (1..=FORMAT_VERSION).contains(&v) => v as u8,
            Some(v) => {
                return bad(format!(
                    "session format version {v} is newer than this reader (max {FORMAT_VERSION})"
                ))
            }
            None => return bad("session header has no valid integer `version`"),
        },
    };
    Ok(if pi {
        Some(Dialect::Pi(v))
    } else if native {
        Some(Dialect::Native)
    } else {
        None
    })
}

/// What one entry line says of its dialect: `parentId` is pi's, `parent_id` ours.
fn line_dialect(line: &str) -> Result<Option<bool>, LineError> {
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line.trim()) else {
        return Ok(None);
    };
    match (obj.contains_key("parentId"), obj.contains_key("parent_id")) {
        (true, true) => bad("an entry has both `parentId` and `parent_id`: the dialect cannot be told"),
        (true, false) => Ok(Some(true)),
        (false, true) => Ok(Some(false)),
        (false, false) => Ok(None),
    }
}

/// Tells a file's dialect from its header and its first entry lines (`first_lines`, any
/// number, the first that says wins). A header that says nothing and entries that say
/// nothing read as sessiontree's (nothing in them can be misread).
pub fn detect<'a>(header: &str, first_lines: impl IntoIterator<Item = &'a str>) -> Result<Dialect, LineError> {
    let obj = match serde_json::from_str::<Value>(header) {
        Ok(Value::Object(o)) => o,
        // The header's own checks word this.
        _ => return Ok(Dialect::Native),
    };
    let said = header_dialect(&obj)?;
    let version = obj.get("version").and_then(Value::as_u64).unwrap_or(1) as u8;
    for line in first_lines {
        match (line_dialect(line)?, said) {
            (None, _) => continue,
            (Some(true), None) => return Ok(Dialect::Pi(version)),
            (Some(false), None) => return Ok(Dialect::Native),
            (Some(true), Some(Dialect::Native)) => return bad(MIXED_IN_NATIVE),
            (Some(false), Some(Dialect::Pi(_))) => return bad(MIXED_IN_PI),
            (Some(_), Some(d)) => return Ok(d),
        }
    }
    Ok(said.unwrap_or(Dialect::Native))
}

/// pi's header in the sessiontree dialect (what the Python model reads).
pub fn header_to_native(header: &str) -> Result<String, LineError> {
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(header) else {
        return bad("malformed session header");
    };
    let mut out = convert_object(obj, &[&model::HEADER], Dir::ToNative)?;
    // Read as migrated: the model's version.
    out.insert("version".into(), Value::from(FORMAT_VERSION));
    out.entry("parent_session").or_insert(Value::Null);
    // Order as a sessiontree writer writes it.
    let mut ordered = Map::new();
    for key in ["type", "version", "id", "timestamp", "cwd", "parent_session"] {
        if let Some(v) = out.remove(key) {
            ordered.insert(key.into(), v);
        }
    }
    ordered.extend(out);
    serde_json::to_string(&ordered).map_err(|e| LineError(e.to_string()))
}

/// A sessiontree header in pi's dialect (a v3 pi header).
pub fn header_to_pi(header: &str) -> Result<String, LineError> {
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(header) else {
        return bad("malformed session header");
    };
    let out = convert_object(obj, &[&model::HEADER], Dir::ToPi)?;
    serde_json::to_string(&out).map_err(|e| LineError(e.to_string()))
}

/// Translates a session document (header first, one entry per line) into dialect `to`
/// (`"pi"`: pi's v3; `"sessiontree"`), told the document's own dialect as a file's is.
/// Blank lines, lines that are not JSON and a torn last line (no newline) are dropped, as
/// every reader skips them; a line that cannot be translated (one of the other dialect)
/// fails with `corrupt`, naming its line.
pub fn convert_document(data: &[u8], to: &str) -> crate::engine::Result<Vec<u8>> {
    use crate::engine::error::{EngineError, ErrorCode};
    let corrupt = |line: usize, e: LineError| {
        EngineError::new(ErrorCode::Corrupt, format!("line {line}: {}", e.0))
    };
    let to_pi = match to {
        "pi" => true,
        "sessiontree" => false,
        other => {
            return Err(EngineError::new(
                ErrorCode::InvalidArgument,
                format!("unknown dialect {other:?} (\"pi\" or \"sessiontree\")"),
            ))
        }
    };
    let text = std::str::from_utf8(data)
        .map_err(|_| EngineError::new(ErrorCode::Corrupt, "the document is not UTF-8"))?;
    // Complete lines only: a torn tail is not an entry.
    let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    let mut lines = complete.lines();
    let header = lines
        .next()
        .ok_or_else(|| EngineError::new(ErrorCode::Corrupt, "missing session header"))?;
    let rest: Vec<&str> = lines.collect();
    let from = detect(header, rest.iter().copied().take(64)).map_err(|e| corrupt(1, e))?;
    let mut out = String::with_capacity(data.len() + data.len() / 8);
    let header = match (from.is_pi(), to_pi) {
        (true, true) => header_to_pi(&header_to_native(header).map_err(|e| corrupt(1, e))?),
        (true, false) => header_to_native(header),
        (false, true) => header_to_pi(header),
        (false, false) => Ok(header.to_owned()),
    }
    .map_err(|e| corrupt(1, e))?;
    out.push_str(&header);
    out.push('\n');
    let mut last_id: Option<String> = None;
    for (i, line) in rest.iter().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let line_no = i + 2;
        if serde_json::from_str::<serde::de::IgnoredAny>(line).is_err() {
            // Not JSON: no reader makes an entry of it (a line glued to a torn tail).
            continue;
        }
        let native = if from.is_pi() {
            let v1 = (from == Dialect::Pi(1)).then(|| ((i + 1) as u64, last_id.as_deref()));
            entry_to_native(line, from, v1).map_err(|e| corrupt(line_no, e))?
        } else {
            line.to_owned()
        };
        if from == Dialect::Pi(1) {
            last_id = Some(v1_id((i + 1) as u64));
        }
        let converted = if to_pi {
            entry_to_pi(&native).map_err(|e| corrupt(line_no, e))?
        } else {
            native
        };
        out.push_str(&converted);
        out.push('\n');
    }
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case() {
        assert_eq!(camel("first_kept_entry_id"), "firstKeptEntryId");
        assert_eq!(camel("tool_result"), "toolResult");
        assert_eq!(camel("id"), "id");
    }

    #[test]
    fn a_pi_message_reads_as_ours_and_back() {
        let pi = r#"{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{"role":"assistant","content":[{"type":"thinking","thinking":"h","thinkingSignature":"s"},{"type":"toolCall","id":"c","name":"n","arguments":{"someKey":1}}],"api":"x","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"cost":{"input":0.1,"output":0,"cacheRead":0,"cacheWrite":0,"total":0.1}},"stopReason":"toolUse","timestamp":5,"piOnly":true}}"#;
        let native = entry_to_native(pi, Dialect::Pi(3), None).unwrap();
        assert_eq!(
            native,
            r#"{"type":"message","id":"a","parent_id":null,"timestamp":"T","message":{"role":"assistant","content":[{"type":"thinking","thinking":"h","signature":"s"},{"type":"tool_call","id":"c","name":"n","arguments":{"someKey":1}}],"api":"x","provider":"p","model":"m","usage":{"input":1,"output":2,"cache_read":3,"cache_write":4,"total_tokens":10,"cost":{"input":0.1,"output":0,"cache_read":0,"cache_write":0,"total":0.1}},"stop_reason":"tool_use","timestamp":5,"piOnly":true}}"#
        );
        assert_eq!(entry_to_pi(&native).unwrap(), pi);
    }

    #[test]
    fn leaf_moves_become_markers_under_the_target() {
        let native = r#"{"type":"leaf","id":"l","parent_id":"x","timestamp":"T","target_id":"t"}"#;
        let pi = entry_to_pi(native).unwrap();
        assert_eq!(
            pi,
            r#"{"type":"custom","id":"l","parentId":"t","timestamp":"T","customType":"sessiontree.leaf"}"#
        );
        let back = entry_to_native(&pi, Dialect::Pi(3), None).unwrap();
        assert_eq!(
            back,
            r#"{"type":"leaf","id":"l","parent_id":"t","timestamp":"T","target_id":"t"}"#
        );
    }

    #[test]
    fn detection() {
        let pi_header = r#"{"type":"session","version":3,"id":"s","timestamp":"T","cwd":"/"}"#;
        let pi_line = r#"{"type":"custom","id":"a","parentId":null}"#;
        let our_line = r#"{"type":"custom","id":"a","parent_id":null}"#;
        assert_eq!(detect(pi_header, [pi_line]).unwrap(), Dialect::Pi(3));
        assert_eq!(detect(pi_header, [our_line]).unwrap(), Dialect::Native);
        assert_eq!(detect(pi_header, ["junk", pi_line]).unwrap(), Dialect::Pi(3));
        let v1 = r#"{"type":"session","id":"s","timestamp":"T","cwd":"/"}"#;
        assert_eq!(detect(v1, ["{}"]).unwrap(), Dialect::Pi(1));
        let ours = r#"{"type":"session","version":3,"id":"s","timestamp":"T","cwd":"/","parent_session":null,"metadata":null}"#;
        assert!(detect(ours, [pi_line]).is_err());
        let v4 = r#"{"type":"session","version":4,"id":"s","timestamp":"T","cwd":"/","parentSession":"x"}"#;
        assert!(detect(v4, [pi_line]).unwrap_err().0.contains("newer"));
        assert!(entry_to_native(our_line, Dialect::Pi(3), None).is_err());
    }

    #[test]
    fn v1_lines_get_ids_from_their_line() {
        let line = r#"{"type":"compaction","timestamp":"T","summary":"s","firstKeptEntryIndex":10,"tokensBefore":5}"#;
        let native = entry_to_native(line, Dialect::Pi(1), Some((12, None))).unwrap();
        assert_eq!(
            native,
            r#"{"type":"compaction","timestamp":"T","summary":"s","parent_id":null,"tokens_before":5,"id":"0000000c","first_kept_entry_id":"0000000a"}"#
        );
    }
}
