//! The model of FORMAT.md declared once: every content block, usage value, message role,
//! entry type and the header, with its fields in FORMAT.md's order.
//!
//! Each type is a [`TypeDef`] and each field a [`FieldDef`]: its JSON key, the JSON kinds a
//! reader accepts ([`FieldKind`], plus `null` when `nullable`), whether a reader requires it
//! or what a missing one means ([`Presence`]), and how a writer writes it ([`Write`]). The
//! reading rules are the engine's: `schema.rs` walks these tables to check every line it
//! loads or appends, and the binding exports them as `sessiontree._core.MODEL`, which the
//! Python model is tested against (`tests/model/test_model_table.py`).
//!
//! Reading rules shared by every type: unknown keys are allowed (and kept by Python); a
//! `null` is accepted only where `nullable` says so; a `null` in an optional field reads as
//! its default, in a required one as "no value" (Python's `None`). A `required` field with
//! kind [`FieldKind::TimestampMs`] must be in the file, but a constructor may default it to
//! the current time (reading must not depend on the clock).

/// What kind of JSON value a field holds.
#[derive(Debug, Clone, Copy)]
pub enum FieldKind {
    /// A string.
    Str,
    /// An integer literal (no fraction or exponent).
    Int,
    /// Any number (Python stores it as a float).
    Number,
    /// `true` or `false`.
    Bool,
    /// Unix milliseconds, an integer (a constructor may default it to now).
    TimestampMs,
    /// Any JSON value, not checked.
    Any,
    /// A JSON object, not checked inside.
    Object,
    /// An array of strings.
    StrList,
    /// A string from a fixed set.
    OneOf(&'static [&'static str]),
    /// An array of content blocks with these `type` tags.
    Blocks(&'static [&'static str]),
    /// A string, or an array of content blocks with these `type` tags.
    StrOrBlocks(&'static [&'static str]),
    /// An object of the given type.
    Nested(&'static TypeDef),
    /// A message object (any role; unknown roles are not checked).
    Message,
    /// An array of message objects.
    Messages,
}

impl FieldKind {
    /// The kind's name in `sessiontree._core.MODEL`.
    pub fn name(self) -> &'static str {
        match self {
            FieldKind::Str => "str",
            FieldKind::Int => "int",
            FieldKind::Number => "number",
            FieldKind::Bool => "bool",
            FieldKind::TimestampMs => "timestamp_ms",
            FieldKind::Any => "any",
            FieldKind::Object => "object",
            FieldKind::StrList => "str_list",
            FieldKind::OneOf(_) => "one_of",
            FieldKind::Blocks(_) => "blocks",
            FieldKind::StrOrBlocks(_) => "str_or_blocks",
            FieldKind::Nested(_) => "nested",
            FieldKind::Message => "message",
            FieldKind::Messages => "messages",
        }
    }
}

/// The value a missing optional field reads as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultValue {
    /// `null` (Python's `None`).
    Null,
    /// `false`.
    False,
    /// `true`.
    True,
    /// `0` (`0.0` for a [`FieldKind::Number`]).
    Zero,
    /// This string.
    Str(&'static str),
    /// The nested type with every field at its default (an empty object).
    Empty,
}

/// Whether a reader needs the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// A reader refuses the object without it.
    Required,
    /// It may be missing, and then reads as this value.
    Optional(DefaultValue),
}

/// How a writer writes the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Always, `null` included.
    Always,
    /// Left out when it has its default.
    OmitDefault,
}

/// What a Python constructor refuses beyond the field's kind: values a user can get wrong.
/// Readers do not apply these rules (a file written by an earlier version may hold such a
/// value, and it loads), except [`Rule::Id`], which `line.rs` applies to every entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Nothing beyond the kind.
    None,
    /// A string that is not empty (`provider`, `model`).
    NotEmpty,
    /// A count or an amount of money that is not negative (a number must also be finite).
    NonNegative,
    /// A MIME type of the form `image/...`.
    ImageMime,
    /// An entry id: not empty, and at most `MAX_ID_BYTES` UTF-8 bytes.
    Id,
}

impl Rule {
    /// The rule's name in `sessiontree._core.MODEL` (None for [`Rule::None`]).
    pub fn name(self) -> Option<&'static str> {
        match self {
            Rule::None => None,
            Rule::NotEmpty => Some("not_empty"),
            Rule::NonNegative => Some("non_negative"),
            Rule::ImageMime => Some("image_mime"),
            Rule::Id => Some("id"),
        }
    }
}

/// What a Python constructor gives a field that readers require, when it is not passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtorDefault {
    /// Nothing: the constructor needs it too.
    None,
    /// The current time (Unix milliseconds).
    Now,
    /// The format version this package writes.
    FormatVersion,
}

impl CtorDefault {
    /// The default's name in `sessiontree._core.MODEL` (None for [`CtorDefault::None`]).
    pub fn name(self) -> Option<&'static str> {
        match self {
            CtorDefault::None => None,
            CtorDefault::Now => Some("now"),
            CtorDefault::FormatVersion => Some("format_version"),
        }
    }
}

/// One field of a type.
#[derive(Debug, Clone, Copy)]
pub struct FieldDef {
    /// The JSON key.
    pub key: &'static str,
    /// The Python attribute name, when it is not the key.
    pub attr: Option<&'static str>,
    /// What the value holds.
    pub kind: FieldKind,
    /// Whether a reader requires it.
    pub presence: Presence,
    /// Whether `null` is accepted.
    pub nullable: bool,
    /// How a writer writes it.
    pub write: Write,
    /// What a constructor refuses beyond the kind.
    pub rule: Rule,
    /// What a constructor gives the field, when readers require it but a user need not.
    pub ctor_default: CtorDefault,
}

impl FieldDef {
    /// Whether a reader refuses the object without it.
    pub fn required(&self) -> bool {
        self.presence == Presence::Required
    }

    /// The Python attribute name.
    pub fn attr(&self) -> &'static str {
        self.attr.unwrap_or(self.key)
    }

    /// The same field, also accepting `null`.
    const fn or_null(self) -> FieldDef {
        FieldDef {
            nullable: true,
            ..self
        }
    }

    /// The same field, left out by writers when it has its default.
    const fn omit_default(self) -> FieldDef {
        FieldDef {
            write: Write::OmitDefault,
            ..self
        }
    }

    /// The same field, with a constructor rule.
    const fn rule(self, rule: Rule) -> FieldDef {
        FieldDef { rule, ..self }
    }

    /// The same field, which a constructor defaults to `value`.
    const fn ctor_default(self, value: CtorDefault) -> FieldDef {
        FieldDef {
            ctor_default: value,
            ..self
        }
    }
}

/// A field a reader requires (a timestamp, which a constructor stamps, excepted).
const fn req(key: &'static str, kind: FieldKind) -> FieldDef {
    let ctor_default = match kind {
        FieldKind::TimestampMs => CtorDefault::Now,
        _ => CtorDefault::None,
    };
    FieldDef {
        key,
        attr: None,
        kind,
        presence: Presence::Required,
        nullable: false,
        write: Write::Always,
        rule: Rule::None,
        ctor_default,
    }
}

/// A field that may be missing, reading as `default` then.
const fn opt(key: &'static str, kind: FieldKind, default: DefaultValue) -> FieldDef {
    FieldDef {
        key,
        attr: None,
        kind,
        presence: Presence::Optional(default),
        nullable: false,
        write: Write::Always,
        rule: Rule::None,
        ctor_default: CtorDefault::None,
    }
}

/// Any JSON for the application (`details`, `data`): optional, `null` by default.
const fn any(key: &'static str) -> FieldDef {
    opt(key, FieldKind::Any, DefaultValue::Null).or_null()
}

/// One type of the model.
#[derive(Debug)]
pub struct TypeDef {
    /// The Python class name.
    pub class: &'static str,
    /// The key and value that mark the type in JSON (`("type", "text")`), if any.
    pub tag: Option<(&'static str, &'static str)>,
    /// One line on what it is.
    pub doc: &'static str,
    /// Its fields in FORMAT.md's order (for entries, only those beyond [`ENTRY_BASE`]).
    pub fields: &'static [FieldDef],
    /// The Python constructor's positional order, where API.md's differs from the rule:
    /// fields the constructor needs, then those it defaults, each in FORMAT.md's order
    /// (a required field with a [`CtorDefault`] counts as defaulted, and comes last).
    pub params: Option<&'static [&'static str]>,
}

impl TypeDef {
    /// The tag value (`"text"`, `"user"`, `"compaction"`), if the type has one.
    pub fn tag_value(&self) -> Option<&'static str> {
        self.tag.map(|(_, v)| v)
    }

    /// The field with JSON key `key`.
    pub fn field(&self, key: &str) -> Option<&'static FieldDef> {
        self.fields.iter().find(|f| f.key == key)
    }
}

use DefaultValue as D;
use FieldKind as K;

/// Thinking levels of FORMAT.md, lowest first.
pub const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];
/// Stop reasons of FORMAT.md.
pub const STOP_REASONS: &[&str] = &["stop", "length", "tool_use", "error", "aborted"];

/// Blocks allowed in user and tool-result content.
const USER_BLOCKS: &[&str] = &["text", "image"];
/// Blocks allowed in assistant content.
const ASSISTANT_BLOCKS: &[&str] = &["text", "thinking", "tool_call"];

// ------------------------------------------------------------------ content blocks

/// `{"type":"text"}`
pub static TEXT: TypeDef = TypeDef {
    class: "TextContent",
    tag: Some(("type", "text")),
    doc: "A block of text.",
    params: None,
    fields: &[
        req("text", K::Str),
        opt("signature", K::Str, D::Null).or_null().omit_default(),
    ],
};

/// `{"type":"thinking"}`
pub static THINKING: TypeDef = TypeDef {
    class: "ThinkingContent",
    tag: Some(("type", "thinking")),
    doc: "A block of model reasoning.",
    params: None,
    fields: &[
        req("thinking", K::Str),
        opt("signature", K::Str, D::Null).or_null().omit_default(),
        opt("redacted", K::Bool, D::False).omit_default(),
    ],
};

/// `{"type":"image"}`
pub static IMAGE: TypeDef = TypeDef {
    class: "ImageContent",
    tag: Some(("type", "image")),
    doc: "An image, base64-encoded.",
    params: None,
    fields: &[
        req("data", K::Str),
        req("mime_type", K::Str).rule(Rule::ImageMime),
    ],
};

/// `{"type":"tool_call"}`
pub static TOOL_CALL: TypeDef = TypeDef {
    class: "ToolCall",
    tag: Some(("type", "tool_call")),
    doc: "A tool invocation requested by the assistant.",
    params: None,
    fields: &[
        req("id", K::Str),
        req("name", K::Str),
        req("arguments", K::Object),
    ],
};

// ------------------------------------------------------------------ usage

/// The `cost` object of a usage.
pub static COST: TypeDef = TypeDef {
    class: "Cost",
    tag: None,
    doc: "Money spent on one call, per token class.",
    params: None,
    fields: &[
        opt("input", K::Number, D::Zero).rule(Rule::NonNegative),
        opt("output", K::Number, D::Zero).rule(Rule::NonNegative),
        opt("cache_read", K::Number, D::Zero).rule(Rule::NonNegative),
        opt("cache_write", K::Number, D::Zero).rule(Rule::NonNegative),
        opt("total", K::Number, D::Zero).rule(Rule::NonNegative),
    ],
};

/// A `usage` object.
pub static USAGE: TypeDef = TypeDef {
    class: "Usage",
    tag: None,
    doc: "Token counts and cost of one model call.",
    params: None,
    fields: &[
        opt("input", K::Int, D::Zero).rule(Rule::NonNegative),
        opt("output", K::Int, D::Zero).rule(Rule::NonNegative),
        opt("cache_read", K::Int, D::Zero).rule(Rule::NonNegative),
        opt("cache_write", K::Int, D::Zero).rule(Rule::NonNegative),
        opt("total_tokens", K::Int, D::Zero).rule(Rule::NonNegative),
        opt("cost", K::Nested(&COST), D::Empty).or_null(),
    ],
};

// ------------------------------------------------------------------ messages

/// `{"role":"user"}`
pub static USER: TypeDef = TypeDef {
    class: "UserMessage",
    tag: Some(("role", "user")),
    doc: "A message from the user.",
    params: None,
    fields: &[
        req("content", K::StrOrBlocks(USER_BLOCKS)),
        req("timestamp", K::TimestampMs),
    ],
};

/// `{"role":"assistant"}`
pub static ASSISTANT: TypeDef = TypeDef {
    class: "AssistantMessage",
    tag: Some(("role", "assistant")),
    doc: "A model reply.",
    params: None,
    fields: &[
        req("content", K::Blocks(ASSISTANT_BLOCKS)),
        opt("api", K::Str, D::Null).or_null(),
        req("provider", K::Str).rule(Rule::NotEmpty),
        req("model", K::Str).rule(Rule::NotEmpty),
        opt("usage", K::Nested(&USAGE), D::Empty).or_null(),
        opt("stop_reason", K::OneOf(STOP_REASONS), D::Str("stop")),
        opt("error_message", K::Str, D::Null).or_null(),
        req("timestamp", K::TimestampMs),
    ],
};

/// `{"role":"tool_result"}`
pub static TOOL_RESULT: TypeDef = TypeDef {
    class: "ToolResultMessage",
    tag: Some(("role", "tool_result")),
    doc: "The result of running a tool call.",
    params: Some(&[
        "tool_call_id",
        "tool_name",
        "content",
        "is_error",
        "details",
        "timestamp",
    ]),
    fields: &[
        req("tool_call_id", K::Str),
        req("tool_name", K::Str),
        req("content", K::Blocks(USER_BLOCKS)),
        any("details"),
        opt("is_error", K::Bool, D::False),
        req("timestamp", K::TimestampMs),
    ],
};

/// `{"role":"custom"}`
pub static CUSTOM_MESSAGE: TypeDef = TypeDef {
    class: "CustomMessage",
    tag: Some(("role", "custom")),
    doc: "An application-defined message that takes part in the context.",
    params: None,
    fields: &[
        req("custom_type", K::Str),
        req("content", K::StrOrBlocks(USER_BLOCKS)),
        opt("display", K::Bool, D::True),
        any("details"),
        req("timestamp", K::TimestampMs),
    ],
};

/// `{"role":"compaction_summary"}`
pub static COMPACTION_SUMMARY: TypeDef = TypeDef {
    class: "CompactionSummaryMessage",
    tag: Some(("role", "compaction_summary")),
    doc: "The summary that stands in for the entries a compaction dropped.",
    params: None,
    fields: &[
        req("summary", K::Str),
        req("tokens_before", K::Int).rule(Rule::NonNegative),
        req("timestamp", K::TimestampMs),
    ],
};

/// `{"role":"branch_summary"}`
pub static BRANCH_SUMMARY_MESSAGE: TypeDef = TypeDef {
    class: "BranchSummaryMessage",
    tag: Some(("role", "branch_summary")),
    doc: "The summary of a branch the session moved away from.",
    params: None,
    fields: &[
        req("summary", K::Str),
        req("from_id", K::Str),
        req("timestamp", K::TimestampMs),
    ],
};

// ------------------------------------------------------------------ entries

/// The fields every entry has after its `type` tag (read by `line.rs`, which also limits
/// the id to `MAX_ID_BYTES` and refuses an empty one).
pub static ENTRY_BASE: TypeDef = TypeDef {
    class: "SessionTreeEntry",
    tag: None,
    doc: "The common base of every entry.",
    params: None,
    fields: &[
        req("id", K::Str).rule(Rule::Id),
        req("parent_id", K::Str).or_null(),
        req("timestamp", K::Str),
    ],
};

/// `{"type":"message"}`
pub static MESSAGE_ENTRY: TypeDef = TypeDef {
    class: "MessageEntry",
    tag: Some(("type", "message")),
    doc: "An entry holding one conversation message.",
    params: None,
    fields: &[req("message", K::Message)],
};

/// `{"type":"thinking_level_change"}`
pub static THINKING_LEVEL_CHANGE: TypeDef = TypeDef {
    class: "ThinkingLevelChangeEntry",
    tag: Some(("type", "thinking_level_change")),
    doc: "Sets the thinking level from here on.",
    params: None,
    fields: &[req("thinking_level", K::OneOf(THINKING_LEVELS))],
};

/// `{"type":"model_change"}`
pub static MODEL_CHANGE: TypeDef = TypeDef {
    class: "ModelChangeEntry",
    tag: Some(("type", "model_change")),
    doc: "Sets the model from here on.",
    params: None,
    fields: &[
        req("provider", K::Str).rule(Rule::NotEmpty),
        req("model_id", K::Str).rule(Rule::NotEmpty),
    ],
};

/// `{"type":"active_tools_change"}`
pub static ACTIVE_TOOLS_CHANGE: TypeDef = TypeDef {
    class: "ActiveToolsChangeEntry",
    tag: Some(("type", "active_tools_change")),
    doc: "Sets the active tools from here on.",
    params: None,
    fields: &[req("active_tool_names", K::StrList)],
};

/// `{"type":"compaction"}`
pub static COMPACTION: TypeDef = TypeDef {
    class: "CompactionEntry",
    tag: Some(("type", "compaction")),
    doc: "Replaces the context before it with a summary.",
    params: None,
    fields: &[
        req("summary", K::Str),
        req("first_kept_entry_id", K::Str).or_null(),
        req("tokens_before", K::Int).rule(Rule::NonNegative),
        opt("retained_tail", K::Messages, D::Null).or_null(),
        any("details"),
        opt("usage", K::Nested(&USAGE), D::Null).or_null(),
        opt("from_hook", K::Bool, D::False),
    ],
};

/// `{"type":"branch_summary"}`
pub static BRANCH_SUMMARY: TypeDef = TypeDef {
    class: "BranchSummaryEntry",
    tag: Some(("type", "branch_summary")),
    doc: "Summarises the branch the session moved away from.",
    params: None,
    fields: &[
        req("from_id", K::Str),
        req("summary", K::Str),
        any("details"),
        opt("usage", K::Nested(&USAGE), D::Null).or_null(),
        opt("from_hook", K::Bool, D::False),
    ],
};

/// `{"type":"custom"}`
pub static CUSTOM: TypeDef = TypeDef {
    class: "CustomEntry",
    tag: Some(("type", "custom")),
    doc: "Application data that is not sent to the model (unless a projector maps it).",
    params: None,
    fields: &[req("custom_type", K::Str), any("data")],
};

/// `{"type":"custom_message"}`
pub static CUSTOM_MESSAGE_ENTRY: TypeDef = TypeDef {
    class: "CustomMessageEntry",
    tag: Some(("type", "custom_message")),
    doc: "An application message that is sent to the model as a custom message.",
    params: None,
    fields: &[
        req("custom_type", K::Str),
        req("content", K::StrOrBlocks(USER_BLOCKS)),
        any("details"),
        opt("display", K::Bool, D::True),
    ],
};

/// `{"type":"label"}`
pub static LABEL: TypeDef = TypeDef {
    class: "LabelEntry",
    tag: Some(("type", "label")),
    doc: "Sets (or with null clears) the label of another entry; a label is never empty.",
    params: None,
    // An empty label would read as "no label" in some tools and as a label in others:
    // constructors refuse it (`None` clears). Files holding one still load.
    fields: &[
        req("target_id", K::Str),
        req("label", K::Str).or_null().rule(Rule::NotEmpty),
    ],
};

/// `{"type":"session_info"}`
pub static SESSION_INFO: TypeDef = TypeDef {
    class: "SessionInfoEntry",
    tag: Some(("type", "session_info")),
    doc: "Names the session (the last one in the file wins).",
    params: None,
    fields: &[req("name", K::Str).or_null()],
};

/// `{"type":"leaf"}`
pub static LEAF: TypeDef = TypeDef {
    class: "LeafEntry",
    tag: Some(("type", "leaf")),
    doc: "Moves the leaf (where the next entry hangs) to the target.",
    params: None,
    fields: &[req("target_id", K::Str).or_null()],
};

// ------------------------------------------------------------------ header

/// Line 1 of a session file. The engine reads it with `line::parse_header` (which checks
/// `version`, `id` and `timestamp` and refuses the file rather than skipping a line); the
/// rules of `cwd`, `parent_session` and `metadata` are the Python reader's.
pub static HEADER: TypeDef = TypeDef {
    class: "SessionHeader",
    tag: Some(("type", "session")),
    doc: "Line 1 of a session file: the session's identity, not a tree node.",
    params: None,
    fields: &[
        req("version", K::Int).ctor_default(CtorDefault::FormatVersion),
        req("id", K::Str),
        req("timestamp", K::Str),
        req("cwd", K::Str),
        opt("parent_session", K::Str, D::Null).or_null(),
        opt("metadata", K::Object, D::Null).or_null(),
    ],
};

// ------------------------------------------------------------------ the tables

/// The content blocks, by `type`.
pub static BLOCKS: [&TypeDef; 4] = [&TEXT, &THINKING, &IMAGE, &TOOL_CALL];

/// The message roles of FORMAT.md, in its order.
pub static MESSAGES: [&TypeDef; 6] = [
    &USER,
    &ASSISTANT,
    &TOOL_RESULT,
    &CUSTOM_MESSAGE,
    &COMPACTION_SUMMARY,
    &BRANCH_SUMMARY_MESSAGE,
];

/// The entry types of FORMAT.md, in its order (each beside [`ENTRY_BASE`]).
pub static ENTRIES: [&TypeDef; 11] = [
    &MESSAGE_ENTRY,
    &THINKING_LEVEL_CHANGE,
    &MODEL_CHANGE,
    &ACTIVE_TOOLS_CHANGE,
    &COMPACTION,
    &BRANCH_SUMMARY,
    &CUSTOM,
    &CUSTOM_MESSAGE_ENTRY,
    &LABEL,
    &SESSION_INFO,
    &LEAF,
];

/// Every type of the model (what `sessiontree._core.MODEL` lists, in this order).
pub static MODEL: [&TypeDef; 25] = [
    &TEXT,
    &THINKING,
    &IMAGE,
    &TOOL_CALL,
    &COST,
    &USAGE,
    &USER,
    &ASSISTANT,
    &TOOL_RESULT,
    &CUSTOM_MESSAGE,
    &COMPACTION_SUMMARY,
    &BRANCH_SUMMARY_MESSAGE,
    &ENTRY_BASE,
    &MESSAGE_ENTRY,
    &THINKING_LEVEL_CHANGE,
    &MODEL_CHANGE,
    &ACTIVE_TOOLS_CHANGE,
    &COMPACTION,
    &BRANCH_SUMMARY,
    &CUSTOM,
    &CUSTOM_MESSAGE_ENTRY,
    &LABEL,
    &SESSION_INFO,
    &LEAF,
    &HEADER,
];

fn by_tag(table: &[&'static TypeDef], tag: &str) -> Option<&'static TypeDef> {
    table.iter().copied().find(|d| d.tag_value() == Some(tag))
}

/// The content block with `type` tag `tag`.
pub fn block(tag: &str) -> Option<&'static TypeDef> {
    by_tag(&BLOCKS, tag)
}

/// The message of role `role`.
pub fn message(role: &str) -> Option<&'static TypeDef> {
    by_tag(&MESSAGES, role)
}

/// The entry of type `kind` (its own fields; the base is [`ENTRY_BASE`]).
pub fn entry(kind: &str) -> Option<&'static TypeDef> {
    by_tag(&ENTRIES, kind)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::engine::arena::{Kind, Role, ENTRY_TYPES, HEADER_TYPE, MESSAGE_ROLES};

    fn every_kind() -> [Kind; 13] {
        [
            Kind::Header,
            Kind::Message,
            Kind::ThinkingLevelChange,
            Kind::ModelChange,
            Kind::ActiveToolsChange,
            Kind::Compaction,
            Kind::BranchSummary,
            Kind::Custom,
            Kind::CustomMessage,
            Kind::Label,
            Kind::SessionInfo,
            Kind::Leaf,
            Kind::Unknown,
        ]
    }

    #[test]
    fn every_entry_kind_has_a_def() {
        for kind in every_kind() {
            let def = entry(kind.name());
            match kind {
                Kind::Header | Kind::Unknown => assert!(def.is_none(), "{kind:?}"),
                _ => assert_eq!(def.and_then(TypeDef::tag_value), Some(kind.name())),
            }
        }
        let tags: Vec<_> = ENTRIES.iter().filter_map(|d| d.tag_value()).collect();
        assert_eq!(tags, ENTRY_TYPES);
        assert_eq!(HEADER.tag, Some(("type", HEADER_TYPE)));
    }

    #[test]
    fn every_role_has_a_def() {
        let roles = [
            Role::None,
            Role::User,
            Role::Assistant,
            Role::ToolResult,
            Role::Custom,
            Role::CompactionSummary,
            Role::BranchSummary,
            Role::Other,
        ];
        for role in roles {
            let def = role.name().and_then(message);
            match role {
                Role::None | Role::Other => assert!(def.is_none(), "{role:?}"),
                _ => assert_eq!(def.and_then(TypeDef::tag_value), role.name()),
            }
        }
        let tags: Vec<_> = MESSAGES.iter().filter_map(|d| d.tag_value()).collect();
        assert_eq!(tags, MESSAGE_ROLES);
        assert!(MESSAGES.iter().all(|d| d.tag.unwrap().0 == "role"));
    }

    #[test]
    fn tags_classes_and_keys_are_unique() {
        let classes: HashSet<_> = MODEL.iter().map(|d| d.class).collect();
        assert_eq!(classes.len(), MODEL.len());
        for group in [&BLOCKS[..], &MESSAGES, &ENTRIES] {
            let tags: HashSet<_> = group.iter().map(|d| d.tag.unwrap()).collect();
            assert_eq!(tags.len(), group.len());
        }
        for def in MODEL {
            let keys: HashSet<_> = def.fields.iter().map(|f| f.key).collect();
            assert_eq!(keys.len(), def.fields.len(), "{}", def.class);
            let attrs: HashSet<_> = def.fields.iter().map(FieldDef::attr).collect();
            assert_eq!(attrs.len(), def.fields.len(), "{}", def.class);
            // The tag and the entry base are never declared again as a field.
            if let Some((tag, _)) = def.tag {
                assert!(def.field(tag).is_none(), "{}", def.class);
            }
            if ENTRIES.iter().any(|e| std::ptr::eq(*e, def)) {
                for base in ENTRY_BASE.fields {
                    assert!(def.field(base.key).is_none(), "{}.{}", def.class, base.key);
                }
            }
        }
    }

    #[test]
    fn every_reference_resolves() {
        for def in MODEL {
            for f in def.fields {
                match f.kind {
                    K::Nested(target) => {
                        assert!(MODEL.iter().any(|d| std::ptr::eq(*d, target)), "{}", f.key);
                        assert!(target.tag.is_none(), "{}", f.key);
                    }
                    K::Blocks(tags) | K::StrOrBlocks(tags) => {
                        assert!(!tags.is_empty());
                        assert!(tags.iter().all(|t| block(t).is_some()), "{tags:?}");
                    }
                    K::OneOf(values) => assert!(!values.is_empty()),
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn constructor_orders_name_every_field_once() {
        for def in MODEL {
            let Some(params) = def.params else { continue };
            let mut named: Vec<_> = params.to_vec();
            let mut fields: Vec<_> = def.fields.iter().map(|f| f.attr()).collect();
            named.sort_unstable();
            fields.sort_unstable();
            assert_eq!(named, fields, "{}", def.class);
        }
    }

    #[test]
    fn constructor_defaults_are_for_required_fields() {
        for def in MODEL {
            for f in def.fields {
                if f.ctor_default != CtorDefault::None {
                    assert!(f.required(), "{}.{}", def.class, f.key);
                }
                if matches!(f.kind, FieldKind::TimestampMs) && f.required() {
                    assert_eq!(f.ctor_default, CtorDefault::Now, "{}.{}", def.class, f.key);
                }
            }
        }
    }

    #[test]
    fn defaults_fit_their_fields() {
        for def in MODEL {
            for f in def.fields {
                let Presence::Optional(default) = f.presence else {
                    continue;
                };
                let fits = match (default, f.kind) {
                    (D::Null, _) => f.nullable,
                    (D::False | D::True, K::Bool) => true,
                    (D::Zero, K::Int | K::Number) => true,
                    (D::Str(s), K::OneOf(set)) => set.contains(&s),
                    (D::Str(_), K::Str) => true,
                    (D::Empty, K::Nested(target)) => target.fields.iter().all(|t| !t.required()),
                    _ => false,
                };
                assert!(fits, "{}.{}", def.class, f.key);
            }
            for f in def.fields.iter().filter(|f| f.write == Write::OmitDefault) {
                assert!(!f.required(), "{}.{}", def.class, f.key);
            }
        }
    }
}
