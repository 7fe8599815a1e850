//! Shape checks for the type-specific fields of known entry types and message roles.
//!
//! A line whose JSON is valid but whose fields have the wrong shape (a thinking level
//! outside its set, a user message without a timestamp, a numeric provider) is reported
//! as malformed and skipped, like broken JSON, so one bad line from another writer never
//! makes a whole branch unreadable. The rules match what the Python layer decodes.
//!
//! Fields are captured as borrowed raw JSON (one scan each) and checked by their first
//! byte; only `content` arrays are walked by a visitor, so their large strings are
//! scanned once.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::engine::arena::{Kind, Role};

/// Captured fields of a JSON object (key, raw value), in order.
type Fields<'a> = Vec<(Cow<'a, str>, &'a RawValue)>;

/// What a value looked like, for the few places that must recurse.
pub enum Shape<'a, T> {
    /// A JSON object, visited.
    Object(T),
    /// A JSON array, visited.
    Array(Vec<Shape<'a, T>>),
    /// A JSON string.
    Str,
    /// Anything else.
    Other(std::marker::PhantomData<&'a ()>),
}

/// A JSON string borrowed from the line when it has no escapes.
#[derive(Deserialize)]
struct Key<'a>(#[serde(borrow)] Cow<'a, str>);

/// An object's fields captured raw (used for content blocks).
pub struct RawObject<'a>(pub Fields<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for Shape<'a, RawObject<'a>> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let shape: Shape<'de, RawObject<'de>> =
            d.deserialize_any(ShapeVisitor::<RawObject<'de>>(std::marker::PhantomData))?;
        Ok(shape)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Shape<'a, MessageFields<'a>> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let shape: Shape<'de, MessageFields<'de>> =
            d.deserialize_any(ShapeVisitor::<MessageFields<'de>>(std::marker::PhantomData))?;
        Ok(shape)
    }
}

/// Builds `T` from an object's entries.
trait FromMap<'de>: Sized {
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

struct ShapeVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: FromMap<'de>> Visitor<'de> for ShapeVisitor<T>
where
    Shape<'de, T>: Deserialize<'de>,
{
    type Value = Shape<'de, T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::from_map(map).map(Shape::Object)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Shape<'de, T>>()? {
            items.push(item);
        }
        Ok(Shape::Array(items))
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Shape::Str)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Shape::Other(std::marker::PhantomData))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Shape::Other(std::marker::PhantomData))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Shape::Other(std::marker::PhantomData))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Shape::Other(std::marker::PhantomData))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Shape::Other(std::marker::PhantomData))
    }
}

fn capture<'de, A: MapAccess<'de>>(mut map: A) -> Result<Fields<'de>, A::Error> {
    let mut fields: Fields<'de> = Vec::new();
    while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
        if fields.iter().any(|(k, _)| *k == key) {
            return Err(de::Error::custom(format!("duplicate field `{key}`")));
        }
        let value: &'de RawValue = map.next_value()?;
        fields.push((key, value));
    }
    Ok(fields)
}

impl<'de> FromMap<'de> for RawObject<'de> {
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        capture(map).map(RawObject)
    }
}

/// A message object: `content` visited, every other field captured raw.
pub struct MessageFields<'a> {
    /// Fields other than `content`.
    pub fields: Fields<'a>,
    /// The `content` field, if present.
    pub content: Option<Shape<'a, RawObject<'a>>>,
}

impl<'de> FromMap<'de> for MessageFields<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut out = MessageFields {
            fields: Vec::new(),
            content: None,
        };
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let seen = out.fields.iter().any(|(k, _)| *k == key)
                || (key == "content" && out.content.is_some());
            if seen {
                return Err(de::Error::custom(format!("duplicate field `{key}`")));
            }
            if key == "content" {
                out.content = Some(map.next_value()?);
            } else {
                let value: &'de RawValue = map.next_value()?;
                out.fields.push((key, value));
            }
        }
        Ok(out)
    }
}

impl MessageFields<'_> {
    /// The raw value of `name`.
    pub fn get(&self, name: &str) -> Option<&RawValue> {
        get(&self.fields, name)
    }
}

fn get<'a>(fields: &[(Cow<'a, str>, &'a RawValue)], name: &str) -> Option<&'a RawValue> {
    fields.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
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
pub fn kind_of(raw: &RawValue) -> Json {
    let text = raw.get();
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

/// A field requirement: which JSON kinds are allowed, and whether it may be missing.
#[derive(Clone, Copy)]
pub struct Rule {
    name: &'static str,
    allowed: &'static [Json],
    required: bool,
}

const fn req(name: &'static str, allowed: &'static [Json]) -> Rule {
    Rule {
        name,
        allowed,
        required: true,
    }
}

const fn opt(name: &'static str, allowed: &'static [Json]) -> Rule {
    Rule {
        name,
        allowed,
        required: false,
    }
}

const STR: &[Json] = &[Json::Str];
const STR_NULL: &[Json] = &[Json::Str, Json::Null];
const INT: &[Json] = &[Json::Int];
const BOOL: &[Json] = &[Json::Bool];
const NUM: &[Json] = &[Json::Int, Json::Float];
const OBJ: &[Json] = &[Json::Object];
const OBJ_NULL: &[Json] = &[Json::Object, Json::Null];
const ARRAY: &[Json] = &[Json::Array];
const ARRAY_NULL: &[Json] = &[Json::Array, Json::Null];

fn describe(allowed: &[Json]) -> &'static str {
    match allowed {
        [Json::Str] => "a string",
        [Json::Str, Json::Null] => "a string or null",
        [Json::Int] => "an integer",
        [Json::Bool] => "a boolean",
        [Json::Int, Json::Float] => "a number",
        [Json::Object] => "an object",
        [Json::Object, Json::Null] => "an object or null",
        [Json::Array] => "an array",
        _ => "an array or null",
    }
}

/// Checks `rules` against captured fields; `what` names the object in messages.
pub fn check_rules<'v>(
    what: &str,
    lookup: impl Fn(&str) -> Option<&'v RawValue>,
    rules: &[Rule],
) -> Result<(), String> {
    for rule in rules {
        match lookup(rule.name) {
            None if rule.required => return Err(format!("{what}: `{}` is missing", rule.name)),
            None => {}
            Some(raw) if !rule.allowed.contains(&kind_of(raw)) => {
                return Err(format!(
                    "{what}: `{}` must be {}",
                    rule.name,
                    describe(rule.allowed)
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

const THINKING_RULES: &[Rule] = &[req("thinking_level", STR)];
const MODEL_RULES: &[Rule] = &[req("provider", STR), req("model_id", STR)];
const TOOLS_RULES: &[Rule] = &[req("active_tool_names", ARRAY)];
const COMPACTION_RULES: &[Rule] = &[
    req("summary", STR),
    req("first_kept_entry_id", STR_NULL),
    req("tokens_before", INT),
    opt("retained_tail", ARRAY_NULL),
    opt("usage", OBJ_NULL),
    opt("from_hook", BOOL),
];
const BRANCH_RULES: &[Rule] = &[
    req("from_id", STR),
    req("summary", STR),
    opt("usage", OBJ_NULL),
    opt("from_hook", BOOL),
];
const CUSTOM_RULES: &[Rule] = &[req("custom_type", STR)];
const CUSTOM_MESSAGE_RULES: &[Rule] = &[
    req("custom_type", STR),
    req("content", STR),
    opt("display", BOOL),
];
const LABEL_RULES: &[Rule] = &[req("target_id", STR), req("label", STR_NULL)];
const SESSION_INFO_RULES: &[Rule] = &[req("name", STR_NULL)];
const LEAF_RULES: &[Rule] = &[req("target_id", STR_NULL)];

/// The fields of a known entry type beyond the base, with their rules.
pub fn entry_rules(kind: Kind) -> &'static [Rule] {
    match kind {
        Kind::ThinkingLevelChange => THINKING_RULES,
        Kind::ModelChange => MODEL_RULES,
        Kind::ActiveToolsChange => TOOLS_RULES,
        Kind::Compaction => COMPACTION_RULES,
        Kind::BranchSummary => BRANCH_RULES,
        Kind::Custom => CUSTOM_RULES,
        Kind::CustomMessage => CUSTOM_MESSAGE_RULES,
        Kind::Label => LABEL_RULES,
        Kind::SessionInfo => SESSION_INFO_RULES,
        Kind::Leaf => LEAF_RULES,
        Kind::Header | Kind::Message | Kind::Unknown => &[],
    }
}

/// Thinking levels of FORMAT.md.
pub const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];
/// Stop reasons of FORMAT.md.
pub const STOP_REASONS: &[&str] = &["stop", "length", "tool_use", "error", "aborted"];

/// A raw JSON string's text, or `None` if it is not a string.
pub fn raw_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    #[derive(Deserialize)]
    struct S<'a>(#[serde(borrow)] Cow<'a, str>);
    serde_json::from_str::<S<'_>>(raw.get()).ok().map(|s| s.0)
}

/// Checks a string field against a fixed set of values.
pub fn check_one_of(
    what: &str,
    name: &str,
    raw: Option<&RawValue>,
    set: &[&str],
) -> Result<(), String> {
    let Some(raw) = raw else { return Ok(()) };
    match raw_str(raw) {
        Some(v) if set.contains(&&*v) => Ok(()),
        _ => Err(format!(
            "{what}: `{name}` must be one of {}",
            set.join(", ")
        )),
    }
}

/// Checks a `usage` object (integer counts, numeric cost fields).
pub fn check_usage(what: &str, raw: &RawValue) -> Result<(), String> {
    if kind_of(raw) == Json::Null {
        return Ok(());
    }
    let fields: Fields<'_> = match serde_json::from_str::<Shape<'_, RawObject<'_>>>(raw.get()) {
        Ok(Shape::Object(RawObject(f))) => f,
        _ => return Err(format!("{what}: `usage` must be an object")),
    };
    let lookup = |n: &str| get(&fields, n);
    check_rules(
        &format!("{what}.usage"),
        lookup,
        &[
            opt("input", INT),
            opt("output", INT),
            opt("cache_read", INT),
            opt("cache_write", INT),
            opt("total_tokens", INT),
            opt("cost", OBJ_NULL),
        ],
    )?;
    if let Some(cost) = get(&fields, "cost").filter(|c| kind_of(c) == Json::Object) {
        let cost_fields = match serde_json::from_str::<Shape<'_, RawObject<'_>>>(cost.get()) {
            Ok(Shape::Object(RawObject(f))) => f,
            _ => return Err(format!("{what}: `usage.cost` must be an object")),
        };
        check_rules(
            &format!("{what}.usage.cost"),
            |n| get(&cost_fields, n),
            &[
                opt("input", NUM),
                opt("output", NUM),
                opt("cache_read", NUM),
                opt("cache_write", NUM),
                opt("total", NUM),
            ],
        )?;
    }
    Ok(())
}

fn check_block(
    what: &str,
    block: &Shape<'_, RawObject<'_>>,
    allowed: &[&str],
) -> Result<(), String> {
    let Shape::Object(RawObject(fields)) = block else {
        return Err(format!("{what}: a content block must be an object"));
    };
    let kind = get(fields, "type").and_then(raw_str);
    let kind = match kind {
        Some(k) if allowed.contains(&&*k) => k,
        Some(k) => {
            return Err(format!(
                "{what}: content block type {k:?} is not allowed here"
            ))
        }
        None => return Err(format!("{what}: a content block needs a string `type`")),
    };
    let lookup = |n: &str| get(fields, n);
    let what = format!("{what} {kind} block");
    match &*kind {
        "text" => check_rules(
            &what,
            lookup,
            &[req("text", STR), opt("signature", STR_NULL)],
        ),
        "thinking" => check_rules(
            &what,
            lookup,
            &[
                req("thinking", STR),
                opt("signature", STR_NULL),
                opt("redacted", BOOL),
            ],
        ),
        "image" => check_rules(&what, lookup, &[req("data", STR), req("mime_type", STR)]),
        _ => check_rules(
            &what,
            lookup,
            &[req("id", STR), req("name", STR), req("arguments", OBJ)],
        ),
    }
}

fn check_blocks(
    what: &str,
    content: Option<&Shape<'_, RawObject<'_>>>,
    allowed: &[&str],
    str_ok: bool,
) -> Result<(), String> {
    match content {
        None => Err(format!("{what}: `content` is missing")),
        Some(Shape::Str) if str_ok => Ok(()),
        Some(Shape::Array(blocks)) => blocks
            .iter()
            .try_for_each(|b| check_block(what, b, allowed)),
        Some(_) if str_ok => Err(format!("{what}: `content` must be a string or an array")),
        Some(_) => Err(format!("{what}: `content` must be an array")),
    }
}

/// Checks a message object of a known role (unknown roles are kept as they are).
pub fn check_message(m: &MessageFields<'_>) -> Result<(), String> {
    let Some(role) = m.get("role").and_then(raw_str) else {
        return Err("message: `role` must be a string".into());
    };
    let what = format!("{role} message");
    let lookup = |n: &str| m.get(n);
    let content = m.content.as_ref();
    match Role::from_name(&role) {
        Role::User => {
            check_rules(&what, lookup, &[req("timestamp", INT)])?;
            check_blocks(&what, content, &["text", "image"], true)
        }
        Role::Assistant => {
            check_rules(
                &what,
                lookup,
                &[
                    req("provider", STR),
                    req("model", STR),
                    opt("api", STR_NULL),
                    opt("stop_reason", STR),
                    opt("error_message", STR_NULL),
                    req("timestamp", INT),
                ],
            )?;
            check_one_of(&what, "stop_reason", m.get("stop_reason"), STOP_REASONS)?;
            if let Some(u) = m.get("usage") {
                check_usage(&what, u)?;
            }
            check_blocks(&what, content, &["text", "thinking", "tool_call"], false)
        }
        Role::ToolResult => {
            check_rules(
                &what,
                lookup,
                &[
                    req("tool_call_id", STR),
                    req("tool_name", STR),
                    opt("is_error", BOOL),
                    req("timestamp", INT),
                ],
            )?;
            check_blocks(&what, content, &["text", "image"], false)
        }
        Role::Custom => {
            check_rules(
                &what,
                lookup,
                &[
                    req("custom_type", STR),
                    opt("display", BOOL),
                    req("timestamp", INT),
                ],
            )?;
            match content {
                Some(Shape::Str) => Ok(()),
                _ => Err(format!("{what}: `content` must be a string")),
            }
        }
        Role::CompactionSummary => check_rules(
            &what,
            lookup,
            &[
                req("summary", STR),
                req("tokens_before", INT),
                req("timestamp", INT),
            ],
        ),
        Role::BranchSummary => check_rules(
            &what,
            lookup,
            &[
                req("summary", STR),
                req("from_id", STR),
                req("timestamp", INT),
            ],
        ),
        _ => Ok(()),
    }
}

/// Checks a raw array of messages (a compaction's retained tail).
pub fn check_message_list(raw: &RawValue) -> Result<(), String> {
    match serde_json::from_str::<Shape<'_, MessageFields<'_>>>(raw.get()) {
        Ok(Shape::Array(items)) => items.iter().try_for_each(|item| match item {
            Shape::Object(m) => check_message(m),
            _ => Err("retained_tail: every item must be a message object".into()),
        }),
        Ok(_) => Err("`retained_tail` must be an array or null".into()),
        Err(e) => Err(format!("retained_tail: {e}")),
    }
}

/// Checks a raw array of strings (active tool names).
pub fn check_str_list(name: &str, raw: &RawValue) -> Result<(), String> {
    match serde_json::from_str::<Vec<&RawValue>>(raw.get()) {
        Ok(items) if items.iter().all(|i| kind_of(i) == Json::Str) => Ok(()),
        _ => Err(format!("`{name}` must be an array of strings")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_first_byte() {
        let k = |s: &str| kind_of(&serde_json::from_str::<Box<RawValue>>(s).unwrap());
        assert_eq!(k("null"), Json::Null);
        assert_eq!(k("true"), Json::Bool);
        assert_eq!(k("-12"), Json::Int);
        assert_eq!(k("1.5"), Json::Float);
        assert_eq!(k("1e3"), Json::Float);
        assert_eq!(k("\"x\""), Json::Str);
        assert_eq!(k("[1]"), Json::Array);
        assert_eq!(k("{}"), Json::Object);
    }
}
