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
//! target, which pi ignores in the context, so pi resumes at the target too; its `data`
//! names the leaf it moved from, and sessiontree reads it back as the `leaf` entry it was
//! (parent: that leaf; target: the marker's parent).

use std::borrow::Cow;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::engine::line::{LineError, FORMAT_VERSION};
use crate::engine::model::{self, FieldKind, TypeDef};
use crate::engine::schema;

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
    params: None,
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
        rule: model::Rule::None,
        ctor_default: model::CtorDefault::None,
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

/// pi's own spelling of field `key` of the type tagged `tag`, where it is not camelCase.
fn pi_exception(tag: Option<&str>, key: &str) -> Option<&'static str> {
    PI_KEYS
        .iter()
        .find(|(t, k, _)| Some(*t) == tag && *k == key)
        .map(|(_, _, pi)| *pi)
}

/// The pi key of field `key` of the type tagged `tag`.
pub fn pi_key<'a>(tag: Option<&str>, key: &'a str) -> Cow<'a, str> {
    pi_exception(tag, key).map_or_else(|| camel(key), Cow::Borrowed)
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

// ------------------------------------------------------------------ raw objects

/// A JSON object as its keys and their values' raw JSON text, in order: only the values
/// the translation changes are parsed (a tool result's text is copied, never unescaped).
struct RawObj<'a>(Vec<(Cow<'a, str>, Val<'a>)>);

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

struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
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
    fn parse(text: &'a str) -> Result<RawObj<'a>, LineError> {
        serde_json::from_str(text).map_err(|e| LineError(format!("invalid JSON entry: {e}")))
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.raw())
    }

    fn has(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    /// The value of `key` when it is a JSON string.
    fn get_str(&self, key: &str) -> Option<Cow<'_, str>> {
        self.get(key).and_then(schema::raw_str)
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

fn is_object(raw: &str) -> bool {
    raw.trim_start().starts_with('{')
}

fn is_array(raw: &str) -> bool {
    raw.trim_start().starts_with('[')
}

// ------------------------------------------------------------------ the translation

/// True when `pi` is the camelCase of `snake` (without building it).
fn camel_eq(snake: &str, pi: &str) -> bool {
    let mut want = pi.chars();
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
            continue;
        }
        let expect = if upper { c.to_ascii_uppercase() } else { c };
        upper = false;
        if want.next() != Some(expect) {
            return false;
        }
    }
    want.next().is_none()
}

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
            match schema::raw_str(text).and_then(|s| convert_enum(values, &s, dir)) {
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
        serde_json::from_str(text).map_err(|e| LineError(format!("invalid JSON entry: {e}")))?;
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

/// The message roles the translation knows: the model's and pi's `bashExecution`.
fn message_defs() -> [&'static TypeDef; 7] {
    let m = &model::MESSAGES;
    [m[0], m[1], m[2], m[3], m[4], m[5], &BASH_EXECUTION]
}

fn convert_message(mut obj: RawObj<'_>, dir: Dir) -> Result<RawObj<'_>, LineError> {
    // v2's `hookMessage` is v3's `custom` (pi's own migration).
    if dir == Dir::ToNative && obj.get_str("role").as_deref() == Some("hookMessage") {
        obj.set("role", json_str("custom"));
    }
    convert_tagged(obj, "role", &message_defs(), dir)
}

/// How a v1 line (no ids) is placed: its id comes from its line index (the header is 0).
fn v1_id(index: u64) -> String {
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
            Err(e) => bad(format!("invalid JSON entry: {e}")),
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

// ------------------------------------------------------------------ the scan's shortcut

/// What the scan's renaming pass does with a key it finds.
#[derive(Default)]
struct Act {
    /// The key's name in our dialect, when it differs.
    key: Option<&'static str>,
    /// Values of the key that pi spells its own way: ours, or `None` for a line the full
    /// translation must read.
    values: Vec<(String, Option<&'static str>)>,
    /// The key means the line must take the full translation.
    long: bool,
    /// The values' native spellings as JSON strings (quoted), in the order of `values`.
    quoted: Vec<Option<String>>,
}

/// How the scanner reads a key of a pi line in place ([`in_place_key`]).
pub(crate) struct InPlaceKey {
    /// Our spelling, when it differs.
    pub native: Option<&'static str>,
    /// The key's values spelled pi's way, if it has some ([`PiValues::read`]).
    pub values: Option<PiValues>,
}

/// The values of one key that pi spells its own way.
#[derive(Clone, Copy)]
pub(crate) struct PiValues(&'static Act);

/// How the scanner reads a value of a pi line in place ([`in_place_value`]).
pub(crate) enum InPlace {
    /// As written.
    Keep,
    /// Read as ours: the value's JSON string in our spelling.
    Rename(&'static str),
    /// The line takes the renaming pass (or the full translation).
    Decline,
}

/// A key of a pi line as the engine's scanner reads it in place, or `None` for a key that
/// sends the line to [`scan_to_native`]. The same table as the renaming pass's, so both
/// read a line alike; most keys (no capital letter, not one of the table's few lowercase
/// keys) are told apart without a lookup.
pub(crate) fn in_place_key(key: &str) -> Option<InPlaceKey> {
    let sc = shortcut();
    if !key.bytes().any(|b| b.is_ascii_uppercase()) && !sc.lowercase.iter().any(|k| k == key) {
        return Some(InPlaceKey {
            native: None,
            values: None,
        });
    }
    match sc.acts.get(key) {
        Some(act) if act.long => None,
        Some(act) => Some(InPlaceKey {
            native: act.key,
            values: (!act.values.is_empty()).then_some(PiValues(act)),
        }),
        None => Some(InPlaceKey {
            native: None,
            values: None,
        }),
    }
}

impl PiValues {
    /// A string value (unquoted, unescaped text) as the scanner reads it in place: our
    /// spelling (`role`, `type`, `stopReason`), or `Decline` for a value only the full
    /// translation reads (a label, a name, a leaf marker, v2's `hookMessage`).
    pub(crate) fn read(self, value: &str) -> InPlace {
        let act = self.0;
        match act.values.iter().position(|(pi, _)| pi == value) {
            None => InPlace::Keep,
            Some(i) => match (act.values[i].1, &act.quoted[i]) {
                (Some(_), Some(quoted)) => InPlace::Rename(quoted),
                _ => InPlace::Decline,
            },
        }
    }
}

/// A fragment of a pi line (an object such as `usage`) with its keys renamed, or `None`
/// when it has a key or value only the full translation reads.
pub(crate) fn rename_fragment(text: &str) -> Option<String> {
    rename(text).map(|(out, _)| out)
}

/// The renaming pass over a pi line, made from the model table: every key whose pi
/// spelling differs, the values of `role`, `type` and `stopReason` that pi spells its own
/// way, and what makes a line take the full translation.
struct Shortcut {
    acts: hashbrown::HashMap<String, Act>,
    /// The keys of `acts` without a capital letter.
    lowercase: Vec<String>,
    finder: memchr::memmem::Finder<'static>,
}

fn shortcut() -> &'static Shortcut {
    static SHORTCUT: std::sync::OnceLock<Shortcut> = std::sync::OnceLock::new();
    SHORTCUT.get_or_init(|| {
        let mut acts: hashbrown::HashMap<String, Act> = hashbrown::HashMap::new();
        for def in model::MODEL.iter().copied().chain([&BASH_EXECUTION]) {
            for f in def.fields {
                let pi = pi_key(def.tag_value(), f.key);
                if pi != f.key {
                    acts.entry(pi.into_owned()).or_default().key = Some(f.key);
                }
            }
        }
        let tags = |defs: &[&'static TypeDef]| -> Vec<(String, Option<&'static str>)> {
            defs.iter()
                .filter_map(|d| d.tag_value())
                .filter(|t| camel(t) != *t)
                .map(|t| (camel(t).into_owned(), Some(t)))
                .collect()
        };
        let mut roles = tags(&message_defs());
        roles.push(("hookMessage".into(), None));
        let mut types = tags(&model::BLOCKS);
        types.extend([("label".into(), None), ("session_info".into(), None)]);
        let reasons = model::STOP_REASONS
            .iter()
            .filter(|v| camel(v) != **v)
            .map(|v| (camel(v).into_owned(), Some(*v)))
            .collect();
        for (key, values) in [
            ("role", roles),
            ("type", types),
            ("stopReason", reasons),
            ("customType", vec![(LEAF_MARKER.to_owned(), None)]),
        ] {
            let act = acts.entry(key.to_owned()).or_default();
            act.quoted = values.iter().map(|(_, v)| v.map(json_str)).collect();
            act.values = values;
        }
        acts.entry("parent_id".into()).or_default().long = true;
        let lowercase = acts
            .keys()
            .filter(|k| !k.bytes().any(|b| b.is_ascii_uppercase()))
            .cloned()
            .collect();
        Shortcut {
            acts,
            lowercase,
            finder: memchr::memmem::Finder::new(b"\":").into_owned(),
        }
    })
}

/// True when the byte at `at` is escaped (an odd run of backslashes before it).
fn escaped(bytes: &[u8], at: usize) -> bool {
    bytes[..at]
        .iter()
        .rev()
        .take_while(|&&b| b == b'\\')
        .count()
        % 2
        == 1
}

/// The longest key or value the renaming pass looks for, in bytes.
const MAX_NAME: usize = 40;

/// The string ending at the unescaped quote `close` (a key the pass may rename), if it is
/// short: its opening quote is the nearest unescaped one before.
fn name_before(bytes: &[u8], close: usize) -> Option<usize> {
    let from = close.saturating_sub(MAX_NAME + 1);
    let open = from + memchr::memrchr(b'"', &bytes[from..close])?;
    (!escaped(bytes, open)).then_some(open)
}

/// A v2 or v3 pi line renamed for the scan, or `None` when it must be read through
/// [`entry_to_native`].
///
/// One pass finds every `":` (memchr's SIMD search); where its quote is unescaped it ends
/// a key (in valid JSON an unescaped quote followed by a colon can only end a key, or open
/// a string beginning with a colon, whose "key" is then a lone `:` and not looked up).
/// Known keys are renamed, and so are the values of `role`, `type` and `stopReason` that
/// pi spells its own way. Keys and values inside application data (`arguments`,
/// `details`, `data`) are renamed too; the scan neither checks nor keeps them (Python reads
/// entries through [`entry_to_native`]). A line the native reader then refuses is read
/// through the full translation, so a wrong guess costs time, never a wrong entry.
pub fn scan_to_native(line: &str) -> Option<String> {
    rename(line).and_then(|(out, parent)| parent.then_some(out))
}

/// [`scan_to_native`]'s pass: the renamed text, and whether a `parentId` key was seen.
fn rename(line: &str) -> Option<(String, bool)> {
    let sc = shortcut();
    let bytes = line.as_bytes();
    let mut out = String::with_capacity(line.len() + 32);
    let mut last = 0;
    let mut parent = false;
    for close in sc.finder.find_iter(bytes) {
        if close < last || escaped(bytes, close) {
            continue;
        }
        let Some(open) = name_before(bytes, close) else {
            continue;
        };
        let key = &line[open + 1..close];
        let Some(act) = sc.acts.get(key) else {
            continue;
        };
        if act.long {
            return None;
        }
        if let Some(native) = act.key {
            parent |= key == "parentId";
            out.push_str(&line[last..=open]);
            out.push_str(native);
            last = close;
        }
        let v = close + 2;
        if act.values.is_empty() || bytes.get(v) != Some(&b'"') {
            continue;
        }
        let window = &bytes[v + 1..(v + 2 + MAX_NAME).min(bytes.len())];
        let Some(end) = memchr::memchr(b'"', window).map(|i| v + 1 + i) else {
            continue;
        };
        let value = &line[v + 1..end];
        if let Some((_, native)) = act.values.iter().find(|(pi, _)| pi == value) {
            let native = (*native)?;
            out.push_str(&line[last..=v]);
            out.push_str(native);
            last = end;
        }
    }
    out.push_str(&line[last..]);
    Some((out, parent))
}

/// True for a line of pi's: a JSON object with a top-level `parentId` and no `parent_id`.
pub fn is_pi_line(line: &str) -> bool {
    is_object(line) && RawObj::parse(line).is_ok_and(|o| o.has("parentId") && !o.has("parent_id"))
}

/// The message of a sessiontree line found in a pi file.
pub const MIXED_IN_PI: &str =
    "a sessiontree (snake_case) entry in a pi (camelCase) file: the file mixes dialects";
/// The message of a pi line found in a sessiontree file.
pub const MIXED_IN_NATIVE: &str =
    "a pi (camelCase) entry in a sessiontree (snake_case) file: the file mixes dialects";

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

/// Which dialect a header says, if it says one: `Some(Pi(v))` for pi's `parentSession` or a
/// missing `version` (pi's v1), `Some(Native)` for sessiontree-only keys.
fn header_dialect(obj: &Map<String, Value>) -> Result<Option<Dialect>, LineError> {
    // (v1's `branchedFrom` needs no rule: a header without `version` is pi's v1.)
    let pi = obj.contains_key("parentSession");
    // sessiontree's writers always write `parent_session` (null included); `metadata`
    // says nothing (a converted header keeps it).
    let native = obj.contains_key("parent_session");
    let version = obj.get("version");
    if pi && native {
        return bad(
            "the session header mixes pi's and sessiontree's keys: the dialect cannot be told",
        );
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
        (true, true) => {
            bad("an entry has both `parentId` and `parent_id`: the dialect cannot be told")
        }
        (true, false) => Ok(Some(true)),
        (false, true) => Ok(Some(false)),
        (false, false) => Ok(None),
    }
}

/// Tells a file's dialect from its header and its first entry lines (`first_lines`, any
/// number, the first that says wins). A header that says nothing and entries that say
/// nothing read as sessiontree's (nothing in them can be misread).
pub fn detect<'a>(
    header: &str,
    first_lines: impl IntoIterator<Item = &'a str>,
) -> Result<Dialect, LineError> {
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

    /// What the engine keeps of an entry (every field), for comparing two reads of a line.
    fn kept(e: &crate::engine::line::ParsedEntry<'_>) -> String {
        format!("{e:?}")
    }

    #[test]
    fn a_pi_line_read_in_place_is_read_as_its_translation() {
        use crate::engine::line::{parse_entry_fast, parse_pi_entry_fast};
        let read = |line: &str| parse_pi_entry_fast(line, 128, 64).map(|r| r.map(|e| kept(&e)));
        let renamed = |line: &str| {
            let native = entry_to_native(line, Dialect::Pi(3), None).unwrap();
            kept(&parse_entry_fast(&native, 128, 64).unwrap().unwrap())
        };
        for line in [
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{"role":"toolResult","toolCallId":"c","toolName":"n","content":[{"type":"text","text":"a \"toolCall\" \"parentId\": x"},{"type":"image","data":"d","mimeType":"image/png"}],"isError":false,"timestamp":5}}"#,
            r#"{"type":"message","id":"e","parentId":"a","timestamp":"T","message":{"role":"assistant","content":[{"type":"thinking","thinking":"h","thinkingSignature":"s"},{"type":"toolCall","id":"c","name":"n","arguments":{"parentId":1,"role":"toolResult"}}],"api":"x","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"cost":{"input":0.1,"output":0,"cacheRead":0,"cacheWrite":0,"total":0.25}},"stopReason":"toolUse","timestamp":5}}"#,
            r#"{"type":"message","id":"n","parentId":"a","timestamp":"T","message":{"role":"assistant","content":[],"provider":"p","model":"m","usage":null,"stopReason":"stop","timestamp":1}}"#,
            r#"{"type":"model_change","id":"m","parentId":"a","timestamp":"T","provider":"p","modelId":"x"}"#,
            r#"{"type":"compaction","id":"k","parentId":"m","timestamp":"T","summary":"s","firstKeptEntryId":"a","tokensBefore":5}"#,
            r#"{"type":"custom","id":"c","parentId":"a","timestamp":"T","customType":"x","data":{"customType":"sessiontree.leaf"}}"#,
        ] {
            assert_eq!(read(line), Some(Ok(renamed(line))), "{line}");
        }
        assert!(read(r#"{"type":"message","id":"e","parentId":"a","timestamp":"T","message":{"role":"assistant","content":[],"provider":"p","model":"m","usage":{"cacheRead":3,"cost":{"total":1.5}},"stopReason":"toolUse","timestamp":5}}"#)
            .unwrap()
            .unwrap()
            .contains("cache_read: 3"));
        // What only the full translation reads is left to it.
        for line in [
            r#"{"type":"label","id":"b","parentId":"a","timestamp":"T","targetId":"a","label":"x"}"#,
            r#"{"type":"session_info","id":"b","parentId":"a","timestamp":"T","name":" x "}"#,
            r#"{"type":"custom","id":"c","parentId":"a","timestamp":"T","customType":"sessiontree.leaf","data":{}}"#,
            r#"{"type":"message","id":"h","parentId":"a","timestamp":"T","message":{"role":"hookMessage","content":"x","timestamp":1}}"#,
            r#"{"type":"message","id":"s","parent_id":"a","timestamp":"T","message":{"role":"user","content":"x","timestamp":1}}"#,
            r#"{"type":"branch_summary","id":"b","parentId":"a","timestamp":"T","fromId":"a","summary":"s","usage":{"cacheRead":1}}"#,
        ] {
            assert!(read(line).is_none(), "{line}");
        }
    }

    #[test]
    fn mutated_pi_lines_read_in_place_only_as_their_translation_reads() {
        use crate::engine::line::{parse_entry_fast, parse_entry_serde, parse_pi_entry_fast};
        let seeds = [
            r#"{"type":"message","id":"e","parentId":"a","timestamp":"T","message":{"role":"assistant","content":[{"type":"thinking","thinking":"h","thinkingSignature":"s"},{"type":"toolCall","id":"c","name":"n","arguments":{"k":1}}],"api":"x","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"cost":{"total":0.25}},"stopReason":"toolUse","timestamp":5}}"#,
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{"role":"toolResult","toolCallId":"c","toolName":"n","content":[{"type":"text","text":"t"}],"isError":false,"timestamp":5}}"#,
            r#"{"type":"compaction","id":"k","parentId":"m","timestamp":"T","summary":"s","firstKeptEntryId":"a","tokensBefore":5}"#,
            r#"{"type":"custom_message","id":"k","parentId":"m","timestamp":"T","customType":"c","content":"x","display":true}"#,
        ];
        let pieces = [
            "null",
            "1",
            "\"s\"",
            "\"toolResult\"",
            "\"parent_id\":\"a\",",
            "\"label\"",
            "\"stopReason\":\"stop\",",
            "\"usage\":{\"cacheRead\":1},",
            "{}",
            "[]",
            ",",
            ":",
            "\"type\":\"toolCall\",",
            "\"role\":\"hookMessage\",",
            "\"cacheRead\":-1,",
            "\"cost\":{\"total\":\"x\"},",
            "\"timestamp\":1,",
            "\"parentId\":\"b\",",
        ];
        let mut rng = fastrand::Rng::with_seed(11);
        let (mut read, mut tried) = (0, 0);
        for _ in 0..40_000 {
            let mut text = seeds[rng.usize(..seeds.len())].to_string();
            for _ in 0..rng.usize(1..4) {
                let at = rng.usize(..=text.len());
                if rng.bool() {
                    text.insert_str(at, pieces[rng.usize(..pieces.len())]);
                } else {
                    let end = (at + rng.usize(1..6)).min(text.len());
                    text.replace_range(at..end, "");
                }
            }
            if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() {
                continue;
            }
            tried += 1;
            let Some(Ok(fast)) = parse_pi_entry_fast(&text, 128, 64) else {
                continue;
            };
            read += 1;
            let native = entry_to_native(&text, Dialect::Pi(3), None).expect(&text);
            let full = parse_entry_fast(&native, 128, 64)
                .unwrap_or_else(|| parse_entry_serde(&native, 128))
                .expect(&text);
            assert_eq!(kept(&fast), kept(&full), "{text}");
        }
        assert!(read > 1000 && tried > 5000, "{read} of {tried}");
    }

    #[test]
    fn the_shortcut_agrees_with_the_translation() {
        let pi = r#"{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{"role":"toolResult","toolCallId":"c","toolName":"n","content":[{"type":"text","text":"a \"toolCall\" \"parentId\": x"},{"type":"image","data":"d","mimeType":"image/png"}],"isError":false,"timestamp":5}}"#;
        let fast = scan_to_native(pi).unwrap();
        assert_eq!(fast, entry_to_native(pi, Dialect::Pi(3), None).unwrap());
        let label = r#"{"type":"label","id":"b","parentId":"a","timestamp":"T","targetId":"a"}"#;
        assert_eq!(scan_to_native(label), None);
        // Colons and quotes inside strings, a value opening with a colon, long and unknown
        // keys, a custom entry that is not a marker: renamed exactly as in full.
        for line in [
            r#"{"type":"custom","id":"c","parentId":"a","timestamp":"T","customType":"x","data":{"k\"parentId\":":":toolCall","aVeryLongApplicationKeyNameThatIsLongerThanForty":1}}"#,
            r#"{"type":"message","id":"d","parentId":"a","timestamp":"T","message":{"role":"user","content":"\\\":\"role\":\"toolResult\"","timestamp":1}}"#,
            r#"{"type":"message","id":"e","parentId":"a","timestamp":"T","message":{"role":"assistant","content":[],"provider":"p","model":"m","stopReason":"toolUse","usage":{"cacheRead":1},"timestamp":1}}"#,
        ] {
            let fast = scan_to_native(line).unwrap();
            let full = entry_to_native(line, Dialect::Pi(3), None).unwrap();
            let fast: serde_json::Value = serde_json::from_str(&fast).unwrap();
            let full: serde_json::Value = serde_json::from_str(&full).unwrap();
            assert_eq!(fast, full, "{line}");
        }
        let marker = r#"{"type":"custom","id":"l","parentId":"t","timestamp":"T","customType":"sessiontree.leaf"}"#;
        assert_eq!(scan_to_native(marker), None);
        let v2 = r#"{"type":"message","id":"h","parentId":"a","timestamp":"T","message":{"role":"hookMessage"}}"#;
        assert_eq!(scan_to_native(v2), None);
        let ours = r#"{"type":"custom","id":"a","parent_id":null,"timestamp":"T"}"#;
        assert_eq!(scan_to_native(ours), None);
    }

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
            r#"{"type":"custom","id":"l","parentId":"t","timestamp":"T","customType":"sessiontree.leaf","data":{"parentId":"x"}}"#
        );
        let back = entry_to_native(&pi, Dialect::Pi(3), None).unwrap();
        assert_eq!(
            back,
            r#"{"type":"leaf","id":"l","parent_id":"x","timestamp":"T","target_id":"t"}"#
        );
    }

    #[test]
    fn detection() {
        let pi_header = r#"{"type":"session","version":3,"id":"s","timestamp":"T","cwd":"/"}"#;
        let pi_line = r#"{"type":"custom","id":"a","parentId":null}"#;
        let our_line = r#"{"type":"custom","id":"a","parent_id":null}"#;
        assert_eq!(detect(pi_header, [pi_line]).unwrap(), Dialect::Pi(3));
        assert_eq!(detect(pi_header, [our_line]).unwrap(), Dialect::Native);
        assert_eq!(
            detect(pi_header, ["junk", pi_line]).unwrap(),
            Dialect::Pi(3)
        );
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
            r#"{"type":"compaction","timestamp":"T","summary":"s","tokens_before":5,"id":"0000000c","parent_id":null,"first_kept_entry_id":"0000000a"}"#
        );
    }
}

#[cfg(test)]
mod timing {
    /// `cargo test --release --lib dialect::timing -- --ignored --nocapture` with
    /// `SESSIONTREE_PI_TIMING=<pi file>`: where a pi scan's time goes.
    #[test]
    #[ignore = "a measurement, run by hand"]
    fn pi_scan_timing() {
        let Ok(path) = std::env::var("SESSIONTREE_PI_TIMING") else {
            return;
        };
        let data = std::fs::read_to_string(path).unwrap();
        let lines: Vec<&str> = data.lines().skip(1).collect();
        let t = std::time::Instant::now();
        let mut n = 0usize;
        for l in &lines {
            n += super::scan_to_native(l).map_or(0, |s| s.len());
        }
        let ac = t.elapsed();
        let natives: Vec<String> = lines
            .iter()
            .filter_map(|l| super::scan_to_native(l))
            .collect();
        let t = std::time::Instant::now();
        let mut ok = 0;
        let mut shown = 0;
        for l in &natives {
            match crate::engine::line::parse_entry(l, 256) {
                Ok(_) => ok += 1,
                Err(e) if shown < 3 => {
                    shown += 1;
                    println!("{e}: {}", l.chars().take(200).collect::<String>());
                }
                Err(_) => {}
            }
        }
        let parse = t.elapsed();
        println!(
            "lines {} bytes {} rename {:?} parse {:?} ok {}",
            lines.len(),
            n,
            ac,
            parse,
            ok
        );
    }
}
