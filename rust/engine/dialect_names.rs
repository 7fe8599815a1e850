//! pi's names for the model's keys and tags, and which dialect a file is in (the parts of
//! pi's dialect that reading, writing and detection share; see `dialect.rs`).
//!
//! A field's pi key is the camelCase of its key ([`pi_key`]), a message role's and a block
//! type's pi tag the camelCase of its tag, an enum value's (a stop reason) the camelCase of
//! the value; the few names pi spells otherwise are in [`PI_KEYS`]. The line reader reads a
//! pi line through [`native_key`] and [`native_value`], made from the same table.

use std::borrow::Cow;

use crate::engine::model::{self, FieldKind, TypeDef};
use crate::engine::types::FORMAT_VERSION;

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
pub(crate) static BASH_EXECUTION: TypeDef = TypeDef {
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
pub(crate) fn pi_exception(tag: Option<&str>, key: &str) -> Option<&'static str> {
    PI_KEYS
        .iter()
        .find(|(t, k, _)| Some(*t) == tag && *k == key)
        .map(|(_, _, pi)| *pi)
}

/// The pi key of field `key` of the type tagged `tag`.
pub fn pi_key<'a>(tag: Option<&str>, key: &'a str) -> Cow<'a, str> {
    pi_exception(tag, key).map_or_else(|| camel(key), Cow::Borrowed)
}

/// True when `pi` is the camelCase of `snake` (without building it).
pub(crate) fn camel_eq(snake: &str, pi: &str) -> bool {
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

/// The message roles the translation knows: the model's and pi's `bashExecution`.
pub(crate) fn message_defs() -> [&'static TypeDef; 7] {
    let m = &model::MESSAGES;
    [m[0], m[1], m[2], m[3], m[4], m[5], &BASH_EXECUTION]
}

/// The message of a sessiontree line found in a pi file.
pub const MIXED_IN_PI: &str =
    "a sessiontree (snake_case) entry in a pi (camelCase) file: the file mixes dialects";
/// The message of a pi line found in a sessiontree file.
pub const MIXED_IN_NATIVE: &str =
    "a pi (camelCase) entry in a sessiontree (snake_case) file: the file mixes dialects";

// ------------------------------------------------------------------ the reader's table

/// How the reader takes a string value of a pi line ([`native_value`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PiValue {
    /// As written (the same in both dialects).
    Same,
    /// Read as ours: the value's JSON string in our spelling (quoted).
    Ours(&'static str),
    /// Only the full translation reads the line (`dialect_translate::entry_to_native`): a
    /// label or a session name (pi leaves out or trims what we write), a leaf marker, v2's
    /// `hookMessage`.
    Translate,
}

/// pi's spellings of some values of a key: (pi's, ours quoted or `None`).
type Spellings = Vec<(String, Option<String>)>;

/// The reader's table, made once from the model.
struct PiNames {
    /// pi key → ours, for every key pi spells otherwise.
    keys: hashbrown::HashMap<String, &'static str>,
    /// Whether every key of `keys` has a capital letter (a key without one is then ours).
    all_capitalised: bool,
    /// For each of our keys whose values pi spells its own way: (pi's spelling, ours quoted
    /// or `None` for [`PiValue::Translate`]).
    values: Vec<(&'static str, Spellings)>,
}

fn pi_names() -> &'static PiNames {
    static NAMES: std::sync::OnceLock<PiNames> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let mut keys = hashbrown::HashMap::new();
        for def in model::MODEL.iter().copied().chain([&BASH_EXECUTION]) {
            for f in def.fields {
                let pi = pi_key(def.tag_value(), f.key);
                if pi != f.key {
                    keys.insert(pi.into_owned(), f.key);
                }
            }
        }
        let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let tags = |defs: &[&'static TypeDef]| -> Spellings {
            defs.iter()
                .filter_map(|d| d.tag_value())
                .filter(|t| camel(t) != *t)
                .map(|t| (camel(t).into_owned(), Some(quoted(t))))
                .collect()
        };
        let mut roles = tags(&message_defs());
        roles.push(("hookMessage".into(), None));
        let mut types = tags(&model::BLOCKS);
        types.extend([("label".into(), None), ("session_info".into(), None)]);
        let reasons = model::STOP_REASONS
            .iter()
            .filter(|v| camel(v) != **v)
            .map(|v| (camel(v).into_owned(), Some(quoted(v))))
            .collect();
        let values = vec![
            ("role", roles),
            ("type", types),
            ("stop_reason", reasons),
            ("custom_type", vec![(LEAF_MARKER.to_owned(), None)]),
        ];
        let all_capitalised = keys
            .keys()
            .all(|k| k.bytes().any(|b| b.is_ascii_uppercase()));
        PiNames {
            keys,
            all_capitalised,
            values,
        }
    })
}

/// Our key for the key `pi` of a pi line, `None` when it is spelled alike (or unknown).
pub(crate) fn native_key(pi: &str) -> Option<&'static str> {
    let names = pi_names();
    if names.all_capitalised && !pi.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    names.keys.get(pi).copied()
}

/// Whether pi spells some values of our key `key` its own way (`role`, `type`,
/// `stop_reason`, `custom_type`).
pub(crate) fn has_pi_values(key: &str) -> bool {
    matches!(key, "role" | "type" | "stop_reason" | "custom_type")
}

/// How the reader takes the string `text` (as written between the quotes) of our key
/// `key` in a pi line.
pub(crate) fn native_value(key: &str, text: &str) -> PiValue {
    let Some((_, values)) = pi_names().values.iter().find(|(k, _)| *k == key) else {
        return PiValue::Same;
    };
    match values.iter().find(|(pi, _)| pi == text) {
        None if text.contains('\\') => PiValue::Translate,
        None => PiValue::Same,
        Some((_, Some(ours))) => PiValue::Ours(ours),
        Some((_, None)) => PiValue::Translate,
    }
}
