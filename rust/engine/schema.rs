//! Shape checks for the type-specific fields of known entry types and message roles.
//!
//! A line whose JSON is valid but whose fields have the wrong shape (a thinking level
//! outside its set, a user message without a timestamp, a numeric provider) is reported
//! as malformed and skipped, like broken JSON, so one bad line from another writer never
//! makes a whole branch unreadable. The rules are the model's (`model.rs`): one checker,
//! [`check_object`], walks a type's [`TypeDef`], recursing into nested objects, content
//! blocks and messages.
//!
//! Fields are captured as borrowed raw JSON (one scan each) and checked by their first
//! byte; only `content` arrays are walked by a visitor, so their large strings are
//! scanned once.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::engine::fastline;
use crate::engine::line::UsageSums;
use crate::engine::model::{self, FieldDef, FieldKind, TypeDef};

/// Captured fields of a JSON object (key, raw JSON text of the value), in order.
///
/// A raw value is always the text of one valid JSON value, without surrounding whitespace
/// (what serde's `RawValue` holds, and what `fastline` captures the same way).
pub type Fields<'a> = Vec<(Cow<'a, str>, &'a str)>;

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
        fields.push((key, value.get()));
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
    /// The sums of a `usage` read in place from a pi line (the field is then left out of
    /// `fields`; see `fastline::capture_pi`).
    pub usage: Option<UsageSums>,
}

impl<'de> FromMap<'de> for MessageFields<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut out = MessageFields {
            fields: Vec::new(),
            content: None,
            usage: None,
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
                out.fields.push((key, value.get()));
            }
        }
        Ok(out)
    }
}

impl<'a> MessageFields<'a> {
    /// The raw value of `name`.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        get(&self.fields, name)
    }
}

fn get<'a>(fields: &[(Cow<'a, str>, &'a str)], name: &str) -> Option<&'a str> {
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

/// One field's value as the line parser captured it.
#[derive(Clone, Copy)]
pub enum Value<'v> {
    /// Borrowed raw JSON text (most fields).
    Raw(&'v str),
    /// A message's `content`, visited while the line was parsed.
    Content(&'v Shape<'v, RawObject<'v>>),
    /// An entry's `message`, visited while the line was parsed.
    Message(&'v Shape<'v, MessageFields<'v>>),
}

impl Value<'_> {
    /// The JSON kind, `None` for a visited scalar (which no visited field accepts).
    fn json(self) -> Option<Json> {
        fn shape<T>(s: &Shape<'_, T>) -> Option<Json> {
            match s {
                Shape::Object(_) => Some(Json::Object),
                Shape::Array(_) => Some(Json::Array),
                Shape::Str => Some(Json::Str),
                Shape::Other(_) => None,
            }
        }
        match self {
            Value::Raw(raw) => Some(kind_of(raw)),
            Value::Content(s) => shape(s),
            Value::Message(s) => shape(s),
        }
    }
}

/// The JSON kinds a field of `kind` accepts besides `null`; `None` for any value.
fn allowed(kind: FieldKind) -> Option<&'static [Json]> {
    Some(match kind {
        FieldKind::Str | FieldKind::OneOf(_) => &[Json::Str],
        FieldKind::Int | FieldKind::TimestampMs => &[Json::Int],
        FieldKind::Number => &[Json::Int, Json::Float],
        FieldKind::Bool => &[Json::Bool],
        FieldKind::Object | FieldKind::Nested(_) | FieldKind::Message => &[Json::Object],
        FieldKind::StrList | FieldKind::Blocks(_) | FieldKind::Messages => &[Json::Array],
        FieldKind::StrOrBlocks(_) => &[Json::Str, Json::Array],
        FieldKind::Any => return None,
    })
}

/// What a field must be, for error messages ("a string or null").
fn describe(field: &FieldDef) -> String {
    let what = match field.kind {
        FieldKind::Str | FieldKind::OneOf(_) => "a string",
        FieldKind::Int | FieldKind::TimestampMs => "an integer",
        FieldKind::Number => "a number",
        FieldKind::Bool => "a boolean",
        FieldKind::Object | FieldKind::Nested(_) | FieldKind::Message => "an object",
        FieldKind::StrList | FieldKind::Blocks(_) | FieldKind::Messages => "an array",
        FieldKind::StrOrBlocks(_) => "a string or an array",
        FieldKind::Any => "any JSON value",
    };
    if field.nullable {
        format!("{what} or null")
    } else {
        what.to_owned()
    }
}

/// Whether `field` holds content blocks (checked last: the largest part of a line).
fn is_content(field: &FieldDef) -> bool {
    matches!(field.kind, FieldKind::Blocks(_) | FieldKind::StrOrBlocks(_))
}

/// Checks an object of type `def`; `get` finds its fields, `what` names it in messages.
///
/// Three passes over the fields in the table's order, so the cheap checks come first:
/// every field's presence and JSON kind (one look at the first byte), then the inside of
/// the fields that have one (set membership, string lists, nested objects, messages), then
/// the content-block fields (presence, kind, every block).
pub fn check_object<'v>(
    what: &dyn fmt::Display,
    def: &TypeDef,
    get: impl Fn(&str) -> Option<Value<'v>>,
) -> Result<(), String> {
    // Each field is looked up once (no type has more than this many).
    const MAX: usize = 8;
    if def.fields.len() > MAX {
        return check_object_slow(what, def, get);
    }
    let mut values: [Option<Value<'v>>; MAX] = [None; MAX];
    for (slot, field) in values.iter_mut().zip(def.fields) {
        *slot = get(field.key);
    }
    let fields = || def.fields.iter().zip(values);
    for (field, value) in fields().filter(|(f, _)| !is_content(f)) {
        check_kind(what, field, value)?;
    }
    for (field, value) in fields().filter(|(f, _)| !is_content(f)) {
        if let Some(value) = value {
            check_contents(what, field, value)?;
        }
    }
    for (field, value) in fields().filter(|(f, _)| is_content(f)) {
        check_kind(what, field, value)?;
        if let Some(value) = value {
            check_contents(what, field, value)?;
        }
    }
    Ok(())
}

/// [`check_object`] of a type with many fields: the same passes, looking fields up anew.
fn check_object_slow<'v>(
    what: &dyn fmt::Display,
    def: &TypeDef,
    get: impl Fn(&str) -> Option<Value<'v>>,
) -> Result<(), String> {
    let rest = || def.fields.iter().filter(|f| !is_content(f));
    for field in rest() {
        check_kind(what, field, get(field.key))?;
    }
    for field in rest() {
        if let Some(value) = get(field.key) {
            check_contents(what, field, value)?;
        }
    }
    for field in def.fields.iter().filter(|f| is_content(f)) {
        let value = get(field.key);
        check_kind(what, field, value)?;
        if let Some(value) = value {
            check_contents(what, field, value)?;
        }
    }
    Ok(())
}

/// A field's presence and JSON kind.
fn check_kind(
    what: &dyn fmt::Display,
    field: &FieldDef,
    value: Option<Value<'_>>,
) -> Result<(), String> {
    let Some(value) = value else {
        if field.required() {
            return Err(format!("{what}: `{}` is missing", field.key));
        }
        return Ok(());
    };
    let Some(kinds) = allowed(field.kind) else {
        return Ok(());
    };
    let ok = value
        .json()
        .is_some_and(|j| kinds.contains(&j) || (j == Json::Null && field.nullable));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what}: `{}` must be {}",
            field.key,
            describe(field)
        ))
    }
}

/// The inside of a field whose kind was checked by [`check_object`].
fn check_contents(
    what: &dyn fmt::Display,
    field: &FieldDef,
    value: Value<'_>,
) -> Result<(), String> {
    if let Value::Raw(raw) = value {
        if kind_of(raw) == Json::Null {
            return Ok(());
        }
    }
    let key = field.key;
    match (field.kind, value) {
        (FieldKind::OneOf(set), Value::Raw(raw)) => match raw_str(raw) {
            Some(v) if set.contains(&&*v) => Ok(()),
            _ => Err(format!("{what}: `{key}` must be one of {}", set.join(", "))),
        },
        (FieldKind::StrList, Value::Raw(raw)) => {
            match serde_json::from_str::<Vec<&RawValue>>(raw) {
                Ok(items) if items.iter().all(|i| kind_of(i.get()) == Json::Str) => Ok(()),
                _ => Err(format!("`{key}` must be an array of strings")),
            }
        }
        // Most nested objects are checked in one pass; the rest (and every error) by the
        // captured fields.
        (FieldKind::Nested(def), Value::Raw(raw)) if fastline::conforms(raw, def) => Ok(()),
        (FieldKind::Nested(def), Value::Raw(raw)) => match raw_object(raw) {
            Ok(Shape::Object(RawObject(fields))) => {
                check_object(&format_args!("{what}.{key}"), def, |n| {
                    get(&fields, n).map(Value::Raw)
                })
            }
            _ => Err(format!("{what}: `{key}` must be an object")),
        },
        (FieldKind::Blocks(tags) | FieldKind::StrOrBlocks(tags), Value::Content(content)) => {
            check_blocks(what, content, tags)
        }
        (FieldKind::Blocks(tags) | FieldKind::StrOrBlocks(tags), Value::Raw(raw)) => {
            match serde_json::from_str::<Shape<'_, RawObject<'_>>>(raw) {
                Ok(content) => check_blocks(what, &content, tags),
                Err(e) => Err(format!("{what}: `{key}`: {e}")),
            }
        }
        (FieldKind::Message, Value::Message(Shape::Object(m))) => check_message(m),
        (FieldKind::Message, Value::Raw(raw)) => {
            match serde_json::from_str::<Shape<'_, MessageFields<'_>>>(raw) {
                Ok(Shape::Object(m)) => check_message(&m),
                Ok(_) => Err(format!("{what}: `{key}` must be an object")),
                Err(e) => Err(format!("{key}: {e}")),
            }
        }
        (FieldKind::Messages, Value::Raw(raw)) => {
            match serde_json::from_str::<Shape<'_, MessageFields<'_>>>(raw) {
                Ok(Shape::Array(items)) => items.iter().try_for_each(|item| match item {
                    Shape::Object(m) => check_message(m),
                    _ => Err(format!("{key}: every item must be a message object")),
                }),
                Ok(_) => Err(format!("`{key}` must be an array or null")),
                Err(e) => Err(format!("{key}: {e}")),
            }
        }
        _ => Ok(()),
    }
}

/// A raw object's fields as serde captures them (the fast scanner first).
fn raw_object(raw: &str) -> serde_json::Result<Shape<'_, RawObject<'_>>> {
    match fastline::object(raw) {
        Some(fields) => Ok(Shape::Object(RawObject(fields))),
        None => serde_json::from_str(raw),
    }
}

/// The blocks of a `content` array, each a block type of `tags` (a string passes: the
/// kind check has already refused one where it is not allowed).
fn check_blocks(
    what: &dyn fmt::Display,
    content: &Shape<'_, RawObject<'_>>,
    tags: &[&str],
) -> Result<(), String> {
    match content {
        Shape::Array(blocks) => blocks.iter().try_for_each(|b| check_block(what, b, tags)),
        _ => Ok(()),
    }
}

fn check_block(
    what: &dyn fmt::Display,
    block: &Shape<'_, RawObject<'_>>,
    tags: &[&str],
) -> Result<(), String> {
    let Shape::Object(RawObject(fields)) = block else {
        return Err(format!("{what}: a content block must be an object"));
    };
    let Some(kind) = get(fields, "type").and_then(raw_str) else {
        return Err(format!("{what}: a content block needs a string `type`"));
    };
    if !tags.contains(&&*kind) {
        return Err(format!(
            "{what}: content block type {kind:?} is not allowed here"
        ));
    }
    // Every tag a `Blocks` field names has a def (model.rs tests this).
    let Some(def) = model::block(&kind) else {
        return Ok(());
    };
    check_object(&format_args!("{what} {kind} block"), def, |n| {
        get(fields, n).map(Value::Raw)
    })
}

/// Checks a message object of a known role (unknown roles are kept as they are).
pub fn check_message(m: &MessageFields<'_>) -> Result<(), String> {
    let Some(role) = m.get("role").and_then(raw_str) else {
        return Err("message: `role` must be a string".into());
    };
    let Some(def) = model::message(&role) else {
        return Ok(());
    };
    check_object(&format_args!("{role} message"), def, |n| {
        if n == "content" {
            m.content.as_ref().map(Value::Content)
        } else {
            m.get(n).map(Value::Raw)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `check_contents` of a nested object without the one-pass check.
    fn captured_check(raw: &str, def: &TypeDef) -> bool {
        match raw_object(raw) {
            Ok(Shape::Object(RawObject(fields))) => {
                check_object(&"x", def, |n| get(&fields, n).map(Value::Raw)).is_ok()
            }
            _ => false,
        }
    }

    #[test]
    fn one_pass_nested_checks_accept_only_what_the_captured_check_accepts() {
        let seeds = [
            (
                r#"{"input":1,"output":2,"cache_read":0,"cache_write":0,"total_tokens":3,"cost":{"input":0.5,"output":1e-3,"total":2}}"#,
                &model::USAGE,
            ),
            (
                r#"{"input":1,"cost":null,"x":[1,{"y":null}],"z":"w"}"#,
                &model::USAGE,
            ),
            (
                r#"{"input":0.25,"output":-1,"cache_read":3E2,"total":0}"#,
                &model::COST,
            ),
            (
                r#"{"type":"text","text":"hi","signature":null}"#,
                &model::TEXT,
            ),
            (
                r#"{"thinking":"t","redacted":true,"signature":"s"}"#,
                &model::THINKING,
            ),
        ];
        let pieces = [
            "null",
            "1",
            "1.5",
            "-0",
            "\"s\"",
            "\"\\u00e9\"",
            "true",
            "{}",
            "[]",
            "\"input\"",
            "\"cost\"",
            ",",
            ":",
            "{\"total\":1}",
            "\"text\"",
            "\"x\":1,",
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        let (mut accepted, mut tried) = (0, 0);
        for _ in 0..60_000 {
            let (seed, def) = seeds[rng.usize(..seeds.len())];
            let mut text = seed.to_string();
            for _ in 0..rng.usize(1..4) {
                let at = rng.usize(..=text.len());
                if !text.is_char_boundary(at) {
                    continue;
                }
                match rng.u8(..3) {
                    0 => text.insert_str(at, pieces[rng.usize(..pieces.len())]),
                    1 => {
                        let end = (at + rng.usize(1..6)).min(text.len());
                        if text.is_char_boundary(end) {
                            text.replace_range(at..end, "");
                        }
                    }
                    _ => text.insert_str(at, pieces[rng.usize(..pieces.len())]),
                }
            }
            // Raw values are valid JSON.
            if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() {
                continue;
            }
            tried += 1;
            if fastline::conforms(&text, def) {
                accepted += 1;
                assert!(captured_check(&text, def), "{text}");
            }
        }
        for (seed, def) in seeds {
            assert!(fastline::conforms(seed, def), "{seed}");
        }
        assert!(accepted > 1000 && tried > 5000, "{accepted} of {tried}");
    }

    #[test]
    fn kinds_by_first_byte() {
        let k = |s: &str| kind_of(serde_json::from_str::<Box<RawValue>>(s).unwrap().get());
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
