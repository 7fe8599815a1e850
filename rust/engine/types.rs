//! The types every part of line reading shares, below all of them: entry kinds and message
//! roles, what the engine keeps of a line ([`ParsedEntry`]), why a line was refused
//! ([`LineError`], with its place), and a line's values as the reader captured them
//! ([`Part`]). Nothing here reads JSON beyond a captured value's first byte.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;

use crate::engine::names::{lookup, name_of, names};

/// Readers accept ids of at most this many bytes (FORMAT.md).
pub const MAX_ID_BYTES: usize = 256;

/// The newest file-format version this engine reads and writes.
pub const FORMAT_VERSION: u64 = 3;

/// The default nesting limit: far above real entries (about 10 levels), far below the
/// depth at which Python's `json` raises `RecursionError`.
pub const DEFAULT_MAX_DEPTH: usize = 128;

/// The entry types of FORMAT.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// The `session` header line (never an arena entry).
    Header,
    /// `message`
    Message,
    /// `thinking_level_change`
    ThinkingLevelChange,
    /// `model_change`
    ModelChange,
    /// `active_tools_change`
    ActiveToolsChange,
    /// `compaction`
    Compaction,
    /// `branch_summary`
    BranchSummary,
    /// `custom`
    Custom,
    /// `custom_message`
    CustomMessage,
    /// `label`
    Label,
    /// `session_info`
    SessionInfo,
    /// `leaf`
    Leaf,
    /// Any other type, kept byte-for-byte.
    Unknown,
}

/// The `type` of the header line (FORMAT.md).
pub const HEADER_TYPE: &str = "session";

/// Every entry type of FORMAT.md with its `type` string, in FORMAT.md's order: the one
/// place these names are written ([`ENTRY_TYPES`] and `Kind`'s parsing and printing read it).
const KIND_NAMES: [(Kind, &str); 11] = [
    (Kind::Message, "message"),
    (Kind::ThinkingLevelChange, "thinking_level_change"),
    (Kind::ModelChange, "model_change"),
    (Kind::ActiveToolsChange, "active_tools_change"),
    (Kind::Compaction, "compaction"),
    (Kind::BranchSummary, "branch_summary"),
    (Kind::Custom, "custom"),
    (Kind::CustomMessage, "custom_message"),
    (Kind::Label, "label"),
    (Kind::SessionInfo, "session_info"),
    (Kind::Leaf, "leaf"),
];

/// The entry `type` values this version knows (Python's `ENTRY_TYPES`).
pub const ENTRY_TYPES: [&str; KIND_NAMES.len()] = names(&KIND_NAMES);

impl Kind {
    /// The kind for a `type` string.
    pub fn from_type(name: &str) -> Kind {
        if name == HEADER_TYPE {
            return Kind::Header;
        }
        lookup(&KIND_NAMES, name).unwrap_or(Kind::Unknown)
    }

    /// The `type` string of a known kind; `"unknown"` for [`Kind::Unknown`] (whose real
    /// type is kept by the arena).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Header => HEADER_TYPE,
            _ => name_of(&KIND_NAMES, self).unwrap_or("unknown"),
        }
    }
}

/// The role of a `message` entry (`None` for other entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Role {
    /// Not a message entry.
    None,
    /// `user`
    User,
    /// `assistant`
    Assistant,
    /// `tool_result`
    ToolResult,
    /// `custom`
    Custom,
    /// `compaction_summary`
    CompactionSummary,
    /// `branch_summary`
    BranchSummary,
    /// Any other role.
    Other,
}

/// Every message role of FORMAT.md with its `role` string, in FORMAT.md's order: the one
/// place these names are written ([`MESSAGE_ROLES`] and `Role`'s parsing and printing read it).
const ROLE_NAMES: [(Role, &str); 6] = [
    (Role::User, "user"),
    (Role::Assistant, "assistant"),
    (Role::ToolResult, "tool_result"),
    (Role::Custom, "custom"),
    (Role::CompactionSummary, "compaction_summary"),
    (Role::BranchSummary, "branch_summary"),
];

/// The message roles this version knows (Python's `MESSAGE_ROLES`).
pub const MESSAGE_ROLES: [&str; ROLE_NAMES.len()] = names(&ROLE_NAMES);

impl Role {
    /// The role for a `role` string.
    pub fn from_name(name: &str) -> Role {
        lookup(&ROLE_NAMES, name).unwrap_or(Role::Other)
    }

    /// The `role` string of a known role; `None` for [`Role::None`], `"other"` for
    /// [`Role::Other`].
    pub fn name(self) -> Option<&'static str> {
        match self {
            Role::None => None,
            _ => Some(name_of(&ROLE_NAMES, self).unwrap_or("other")),
        }
    }
}

/// The token and cost totals of one `usage` object.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageSums {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Cache-read tokens.
    pub cache_read: u64,
    /// Cache-write tokens.
    pub cache_write: u64,
    /// Total tokens.
    pub total_tokens: u64,
    /// Total cost.
    pub cost_total: f64,
}

/// What the engine keeps of one entry line.
#[derive(Debug, Clone)]
pub struct ParsedEntry<'a> {
    /// The entry type.
    pub kind: Kind,
    /// The `type` string (needed for unknown types).
    pub type_name: Cow<'a, str>,
    /// The entry id.
    pub id: Cow<'a, str>,
    /// The parent id, `None` for a root.
    pub parent_id: Option<Cow<'a, str>>,
    /// The ISO timestamp.
    pub timestamp: Cow<'a, str>,
    /// `target_id` of a `leaf` or `label` entry.
    pub target_id: Option<Cow<'a, str>>,
    /// `label` of a `label` entry, or `name` of a `session_info` entry.
    pub text: Option<Cow<'a, str>>,
    /// `first_kept_entry_id` of a compaction.
    pub first_kept: Option<Cow<'a, str>>,
    /// Whether a compaction has a non-null `retained_tail`.
    pub retained_tail: bool,
    /// The role of a `message` entry.
    pub role: Role,
    /// Usage of an assistant message, a compaction or a branch summary.
    pub usage: Option<UsageSums>,
}

impl ParsedEntry<'_> {
    /// The same entry, owning its strings (a line translated from another dialect).
    pub fn into_owned(self) -> ParsedEntry<'static> {
        let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        ParsedEntry {
            kind: self.kind,
            type_name: own(self.type_name),
            id: own(self.id),
            parent_id: self.parent_id.map(own),
            timestamp: own(self.timestamp),
            target_id: self.target_id.map(own),
            text: self.text.map(own),
            first_kept: self.first_kept.map(own),
            retained_tail: self.retained_tail,
            role: self.role,
            usage: self.usage,
        }
    }
}

/// The limits a line is read under (`jsonl::Limits` gives a store's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Longest accepted entry id in bytes.
    pub max_id_bytes: usize,
    /// Deepest accepted JSON nesting (the line's object is level 1).
    pub max_depth: usize,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits {
            max_id_bytes: MAX_ID_BYTES,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

impl ReadLimits {
    /// No limit: for re-reading a line a store already accepted.
    pub const NONE: ReadLimits = ReadLimits {
        max_id_bytes: usize::MAX,
        max_depth: usize::MAX,
    };
}

/// What kind of refusal a [`LineError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not JSON, or not an entry of the right shape.
    Malformed,
    /// JSON nested deeper than the configured limit.
    TooDeep,
    /// An id longer than the configured limit.
    IdTooLong,
}

/// Why a line was not accepted as an entry, and where.
///
/// The reader knows the column (serde's, 1-based, within the line) of a JSON error; the
/// caller, which knows where the line is, adds its number and byte offset ([`LineError::at`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// What is wrong, for humans, without the place.
    pub message: String,
    /// What kind of refusal.
    pub refusal: Refusal,
    /// 1-based column of a JSON error within the line (bytes), when known.
    pub column: Option<usize>,
    /// 1-based line number in the file, when known.
    pub line: Option<u64>,
    /// Byte offset of the line's start in the file, when known.
    pub offset: Option<u64>,
}

impl LineError {
    /// A malformed line, no place known.
    pub fn new(message: impl Into<String>) -> Self {
        LineError {
            message: message.into(),
            refusal: Refusal::Malformed,
            column: None,
            line: None,
            offset: None,
        }
    }

    /// A serde_json error: its message without serde's place (`prefix` first), the
    /// column kept.
    pub fn from_json(prefix: &str, e: &serde_json::Error) -> Self {
        let text = e.to_string();
        // serde_json words its errors "<what> at line L column C" (L is always 1 for a
        // line read alone); the place is kept apart.
        let what = match text.rfind(" at line ") {
            Some(at) if e.line() > 0 => &text[..at],
            _ => &text,
        };
        LineError {
            column: (e.line() > 0).then(|| e.column()),
            ..LineError::new(format!("{prefix}{what}"))
        }
    }

    /// The same error, placed in a file at line `line` starting at byte `offset`.
    #[must_use]
    pub fn at(mut self, line: u64, offset: u64) -> Self {
        self.line = Some(line);
        self.offset = Some(offset);
        self
    }

    /// The message with the column, without the line (a load issue carries that itself).
    pub fn detail(&self) -> String {
        match self.column {
            Some(c) => format!("{} (column {c})", self.message),
            None => self.message.clone(),
        }
    }
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.offset) {
            (Some(line), Some(offset)) => write!(f, "line {line} (byte {offset}): ")?,
            (Some(line), None) => write!(f, "line {line}: ")?,
            _ => {}
        }
        f.write_str(&self.detail())
    }
}

impl std::error::Error for LineError {}

/// A value of a line as the reader captured it: the raw JSON text of a value it did not
/// need to look inside (most), or the parts of one it visited (a message, its content and
/// its usage), so nothing is scanned twice.
#[derive(Debug, Clone)]
pub enum Part<'a> {
    /// The text of one valid JSON value, without surrounding whitespace.
    Raw(&'a str),
    /// A visited object's members, in order.
    Object(Fields<'a>),
    /// A visited array's items.
    Array(Vec<Part<'a>>),
    /// A visited scalar, by kind (its text is not kept).
    Scalar(Json),
}

/// The captured members of a JSON object (key in our dialect, value), in order.
pub type Fields<'a> = Vec<(Cow<'a, str>, Part<'a>)>;

/// The part of `fields` named `name`.
pub fn get<'f, 'a>(fields: &'f [(Cow<'a, str>, Part<'a>)], name: &str) -> Option<&'f Part<'a>> {
    fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

impl<'a> Part<'a> {
    /// The JSON kind of the value.
    pub fn json(&self) -> Json {
        match self {
            Part::Raw(raw) => kind_of(raw),
            Part::Object(_) => Json::Object,
            Part::Array(_) => Json::Array,
            Part::Scalar(j) => *j,
        }
    }

    /// The raw text of a value captured raw.
    pub fn raw(&self) -> Option<&'a str> {
        match self {
            Part::Raw(raw) => Some(raw),
            _ => None,
        }
    }

    /// The text of a JSON string captured raw, `None` for anything else.
    pub fn str(&self) -> Option<Cow<'a, str>> {
        self.raw().and_then(raw_str)
    }
}

/// The JSON kind of a raw value, from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Json {
    /// `null`
    Null,
    /// `true` / `false`
    Bool,
    /// An integer literal.
    Int,
    /// A number with a fraction or exponent.
    Float,
    /// A string.
    Str,
    /// An array.
    Array,
    /// An object.
    Object,
}

/// The kind of a raw JSON value.
pub fn kind_of(text: &str) -> Json {
    match text.as_bytes().first() {
        Some(b'n') => Json::Null,
        Some(b't' | b'f') => Json::Bool,
        Some(b'"') => Json::Str,
        Some(b'[') => Json::Array,
        Some(b'{') => Json::Object,
        _ if text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) => Json::Float,
        _ => Json::Int,
    }
}

/// A raw JSON string's text, or `None` if it is not a string.
pub fn raw_str(raw: &str) -> Option<Cow<'_, str>> {
    // A raw value is valid JSON: a string without a backslash is its own text.
    if let Some(inner) = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        if !inner.contains('\\') {
            return Some(Cow::Borrowed(inner));
        }
    }
    #[derive(Deserialize)]
    struct S<'a>(#[serde(borrow)] Cow<'a, str>);
    serde_json::from_str::<S<'_>>(raw).ok().map(|s| s.0)
}

/// True when the JSON text `raw` (valid JSON) nests deeper than `limit` levels (brackets
/// inside strings ignored). The reader calls it on the free-form values it captures raw
/// (tool arguments, `details`, `data`, unknown fields), never on a whole line.
pub fn nests_deeper(raw: &[u8], limit: usize) -> bool {
    // Depth never exceeds the number of openers, and counting them is a fast SIMD pass,
    // so real values never pay for the exact scan below.
    if memchr::memchr2_iter(b'{', b'[', raw).count() <= limit {
        return false;
    }
    let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
    for &b in raw {
        if in_str {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// An object key, borrowed from the line when it has no escapes (serde hands an escaped
/// key over undone). Every serde reader of the engine and the binding reads keys as this.
pub(crate) struct Key<'a>(pub(crate) Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}
