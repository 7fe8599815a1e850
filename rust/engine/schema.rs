//! Shape checks for the type-specific fields of known entry types and message roles.
//!
//! A line whose JSON is valid but whose fields have the wrong shape (a thinking level
//! outside its set, a user message without a timestamp, a numeric provider) is reported
//! as malformed and skipped, like broken JSON, so one bad line from another writer never
//! makes a whole branch unreadable. The rules are the model's (`model.rs`): one checker,
//! [`check_object`], walks a type's [`TypeDef`], recursing into nested objects, content
//! blocks and messages.
//!
//! The checks read what the line reader captured (`capture.rs`): most fields as raw JSON
//! text, checked by their first byte; messages, content blocks and usage objects as the
//! parts the reader visited, so nothing is parsed again.

use std::fmt;

use serde_json::value::RawValue;

use crate::engine::capture::visit_raw;
use crate::engine::model::{self, FieldDef, FieldKind, TypeDef};
use crate::engine::types::{get, kind_of, Json, Part};

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
    get: impl Fn(&str) -> Option<&'v Part<'v>>,
) -> Result<(), String> {
    // Each field is looked up once (no type has more than this many).
    const MAX: usize = 8;
    if def.fields.len() > MAX {
        return check_object_slow(what, def, get);
    }
    let mut values: [Option<&'v Part<'v>>; MAX] = [None; MAX];
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
    get: impl Fn(&str) -> Option<&'v Part<'v>>,
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
    value: Option<&Part<'_>>,
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
    let j = value.json();
    let ok = kinds.contains(&j) || (j == Json::Null && field.nullable);
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
    value: &Part<'_>,
) -> Result<(), String> {
    if value.json() == Json::Null {
        return Ok(());
    }
    let key = field.key;
    // A field the reader captured raw that the checks look inside (never one of a line
    // the reader visited as it should; kept so any captured value can be checked).
    let visited;
    let value = match (field.kind, value) {
        (
            FieldKind::Nested(_)
            | FieldKind::Blocks(_)
            | FieldKind::StrOrBlocks(_)
            | FieldKind::Message
            | FieldKind::Messages,
            Part::Raw(raw),
        ) if matches!(kind_of(raw), Json::Object | Json::Array) => {
            visited = visit_raw(raw, field.kind).map_err(|e| format!("{what}: `{key}`: {e}"))?;
            &visited
        }
        _ => value,
    };
    match (field.kind, value) {
        (FieldKind::OneOf(set), Part::Raw(_)) => match value.str() {
            Some(v) if set.contains(&&*v) => Ok(()),
            _ => Err(format!("{what}: `{key}` must be one of {}", set.join(", "))),
        },
        (FieldKind::StrList, Part::Raw(raw)) => match serde_json::from_str::<Vec<&RawValue>>(raw) {
            Ok(items) if items.iter().all(|i| kind_of(i.get()) == Json::Str) => Ok(()),
            _ => Err(format!("`{key}` must be an array of strings")),
        },
        (FieldKind::Nested(def), Part::Object(fields)) => {
            check_object(&format_args!("{what}.{key}"), def, |n| get(fields, n))
        }
        (FieldKind::Nested(_), _) => Err(format!("{what}: `{key}` must be an object")),
        (FieldKind::Blocks(tags) | FieldKind::StrOrBlocks(tags), Part::Array(blocks)) => {
            blocks.iter().try_for_each(|b| check_block(what, b, tags))
        }
        (FieldKind::Message, Part::Object(m)) => check_message(m),
        (FieldKind::Message, _) => Err(format!("{what}: `{key}` must be an object")),
        (FieldKind::Messages, Part::Array(items)) => items.iter().try_for_each(|item| match item {
            Part::Object(m) => check_message(m),
            _ => Err(format!("{key}: every item must be a message object")),
        }),
        (FieldKind::Messages, _) => Err(format!("`{key}` must be an array or null")),
        _ => Ok(()),
    }
}

/// One block of a `content` array: an object whose `type` is one of `tags`.
fn check_block(what: &dyn fmt::Display, block: &Part<'_>, tags: &[&str]) -> Result<(), String> {
    let Part::Object(fields) = block else {
        return Err(format!("{what}: a content block must be an object"));
    };
    let Some(kind) = get(fields, "type").and_then(Part::str) else {
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
        get(fields, n)
    })
}

/// Checks a message object (its captured fields) of a known role (unknown roles are kept
/// as they are).
pub fn check_message(m: &[(std::borrow::Cow<'_, str>, Part<'_>)]) -> Result<(), String> {
    let Some(role) = get(m, "role").and_then(Part::str) else {
        return Err("message: `role` must be a string".into());
    };
    let Some(def) = model::message(&role) else {
        return Ok(());
    };
    check_object(&format_args!("{role} message"), def, |n| get(m, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;

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

    #[test]
    fn a_field_captured_raw_is_checked_as_if_visited() {
        let usage = Part::Raw(r#"{"input":1.5}"#);
        let text = Part::Raw(r#""s""#);
        let get = |n: &str| match n {
            "usage" => Some(&usage),
            "from_id" | "summary" => Some(&text),
            _ => None,
        };
        let err = check_object(&"x", &model::BRANCH_SUMMARY, get).unwrap_err();
        assert!(err.contains("usage"), "{err}");
        let blocks = Part::Raw(r#"[{"type":"image"}]"#);
        let fields = vec![
            (std::borrow::Cow::Borrowed("role"), Part::Raw(r#""user""#)),
            (std::borrow::Cow::Borrowed("content"), blocks),
            (std::borrow::Cow::Borrowed("timestamp"), Part::Raw("1")),
        ];
        let err = check_message(&fields).unwrap_err();
        assert!(err.contains("image block"), "{err}");
    }
}
