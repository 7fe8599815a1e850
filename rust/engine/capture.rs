//! The line reader: one serde_json pass over an entry line that captures what the checks
//! and the arena need, each byte scanned once.
//!
//! Most values are captured as borrowed raw JSON text (`RawValue`: serde validates and
//! skips them without building anything). The few that the model's checks look inside —
//! an entry's `message`, a message's `content` and `usage`, a compaction's
//! `retained_tail`, a custom message's `content` — are visited as they are read, their
//! members captured the same way ([`Part`]), so a content block's text is scanned once, by
//! serde, and never again.
//!
//! A pi line (v2 or v3) is read by the same pass: each key is looked up in pi's names
//! (`dialect_names::native_key`) and the few values pi spells its own way (a role, a block
//! type, a stop reason) are read as ours. What only the full translation reads (a leaf
//! marker, a label, v2's `hookMessage`, …) is flagged, and the caller translates the line.
//!
//! Depth: serde's own recursion limit (128) never applies, since the visited parts are at
//! most six levels deep and raw values are skipped without recursion. The configured
//! `max_depth` is checked on the visited containers as they open, and on each raw value
//! that is an object or an array by [`nests_deeper`] (a SIMD count of its brackets; an
//! exact scan only when there are more brackets than the depth left). That second look
//! covers only the free-form values (tool arguments, `details`, `data`, unknown fields),
//! never a line's text.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::engine::dialect_names::{has_pi_values, native_key, native_value, PiValue};
use crate::engine::model::{self, FieldKind, TypeDef};
use crate::engine::types::{nests_deeper, Fields, Json, Key, LineError, Part, Refusal};

/// How a line is read, and what reading it found besides its parts.
pub(crate) struct Reading {
    /// The line is pi's (v2 or v3): keys and some values are read through pi's names.
    pi: bool,
    /// The deepest nesting accepted (the line's object is level 1).
    max_depth: usize,
    /// Set when the line nests deeper than `max_depth` (the error says so too).
    too_deep: Cell<bool>,
    /// Set when a pi line has something only the full translation reads.
    translate: Cell<bool>,
}

/// An entry line's fields as captured, before any check (`None`: absent; JSON `null` is
/// captured as the raw text `null`).
#[derive(Default)]
pub(crate) struct RawEntry<'a> {
    /// The `type` string.
    pub(crate) kind: Cow<'a, str>,
    pub(crate) id: Option<Part<'a>>,
    pub(crate) parent_id: Option<Part<'a>>,
    pub(crate) timestamp: Option<Part<'a>>,
    pub(crate) target_id: Option<Part<'a>>,
    pub(crate) label: Option<Part<'a>>,
    pub(crate) first_kept_entry_id: Option<Part<'a>>,
    pub(crate) retained_tail: Option<Part<'a>>,
    pub(crate) name: Option<Part<'a>>,
    pub(crate) message: Option<Part<'a>>,
    pub(crate) usage: Option<Part<'a>>,
    pub(crate) thinking_level: Option<Part<'a>>,
    pub(crate) provider: Option<Part<'a>>,
    pub(crate) model_id: Option<Part<'a>>,
    pub(crate) active_tool_names: Option<Part<'a>>,
    pub(crate) summary: Option<Part<'a>>,
    pub(crate) tokens_before: Option<Part<'a>>,
    pub(crate) from_hook: Option<Part<'a>>,
    pub(crate) from_id: Option<Part<'a>>,
    pub(crate) custom_type: Option<Part<'a>>,
    pub(crate) content: Option<Part<'a>>,
    pub(crate) display: Option<Part<'a>>,
}

impl<'a> RawEntry<'a> {
    /// The slot of a top-level field the engine reads (every one but `type`), `None` for
    /// a key it does not read (`details` and `data` hold any JSON: never checked).
    pub(crate) fn slot(&mut self, key: &str) -> Option<&mut Option<Part<'a>>> {
        Some(match key {
            "id" => &mut self.id,
            "parent_id" => &mut self.parent_id,
            "timestamp" => &mut self.timestamp,
            "target_id" => &mut self.target_id,
            "label" => &mut self.label,
            "first_kept_entry_id" => &mut self.first_kept_entry_id,
            "retained_tail" => &mut self.retained_tail,
            "name" => &mut self.name,
            "message" => &mut self.message,
            "usage" => &mut self.usage,
            "thinking_level" => &mut self.thinking_level,
            "provider" => &mut self.provider,
            "model_id" => &mut self.model_id,
            "active_tool_names" => &mut self.active_tool_names,
            "summary" => &mut self.summary,
            "tokens_before" => &mut self.tokens_before,
            "from_hook" => &mut self.from_hook,
            "from_id" => &mut self.from_id,
            "custom_type" => &mut self.custom_type,
            "content" => &mut self.content,
            "display" => &mut self.display,
            _ => return None,
        })
    }

    /// A captured field by name (`null` included), as the checks read it.
    pub(crate) fn field(&self, key: &str) -> Option<&Part<'a>> {
        match key {
            "id" => self.id.as_ref(),
            "parent_id" => self.parent_id.as_ref(),
            "timestamp" => self.timestamp.as_ref(),
            "target_id" => self.target_id.as_ref(),
            "label" => self.label.as_ref(),
            "first_kept_entry_id" => self.first_kept_entry_id.as_ref(),
            "retained_tail" => self.retained_tail.as_ref(),
            "name" => self.name.as_ref(),
            "message" => self.message.as_ref(),
            "usage" => self.usage.as_ref(),
            "thinking_level" => self.thinking_level.as_ref(),
            "provider" => self.provider.as_ref(),
            "model_id" => self.model_id.as_ref(),
            "active_tool_names" => self.active_tool_names.as_ref(),
            "summary" => self.summary.as_ref(),
            "tokens_before" => self.tokens_before.as_ref(),
            "from_hook" => self.from_hook.as_ref(),
            "from_id" => self.from_id.as_ref(),
            "custom_type" => self.custom_type.as_ref(),
            "content" => self.content.as_ref(),
            "display" => self.display.as_ref(),
            _ => None,
        }
    }
}

/// What a captured line is: its fields, or a pi line only the full translation reads.
// One per line, consumed at once: boxing the entry would cost an allocation each.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Captured<'a> {
    /// The line's fields.
    Entry(RawEntry<'a>),
    /// A pi line to translate (`dialect_translate::entry_to_native`) and read as ours.
    Translate,
}

/// Reads an entry line (valid UTF-8, no newline) in one pass.
pub(crate) fn capture(text: &str, pi: bool, max_depth: usize) -> Result<Captured<'_>, LineError> {
    let reading = Reading {
        pi,
        max_depth,
        too_deep: Cell::new(false),
        translate: Cell::new(false),
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let result = EntrySeed(&reading)
        .deserialize(&mut de)
        .and_then(|raw| de.end().map(|()| raw));
    match result {
        Ok(_) if reading.translate.get() => Ok(Captured::Translate),
        Ok(raw) => Ok(Captured::Entry(raw)),
        Err(e) => Err(json_error(&e, reading.too_deep.get(), max_depth)),
    }
}

/// Reads the raw JSON text of a field that the model's checks look inside but that was
/// captured raw (`kind` says how to visit it), as the reader would have visited it.
pub(crate) fn visit_raw(raw: &str, kind: FieldKind) -> Result<Part<'_>, String> {
    let ctx = match kind {
        FieldKind::Nested(def) => Ctx::Nested(def),
        FieldKind::Blocks(_) | FieldKind::StrOrBlocks(_) => Ctx::Content,
        FieldKind::Message => Ctx::Message,
        FieldKind::Messages => Ctx::Messages,
        _ => Ctx::Flat,
    };
    let reading = Reading {
        pi: false,
        max_depth: usize::MAX,
        too_deep: Cell::new(false),
        translate: Cell::new(false),
    };
    let seed = Seed {
        ctx,
        depth: 1,
        reading: &reading,
    };
    let mut de = serde_json::Deserializer::from_str(raw);
    seed.deserialize(&mut de)
        .map_err(|e| json_error(&e, false, usize::MAX).detail())
}

/// A serde error as a [`LineError`]: the message without serde's place, the column kept.
fn json_error(e: &serde_json::Error, too_deep: bool, max_depth: usize) -> LineError {
    if too_deep {
        return LineError {
            refusal: Refusal::TooDeep,
            ..LineError::new(deeper(max_depth))
        };
    }
    LineError::from_json("invalid JSON entry: ", e)
}

/// The message of a line nested too deep.
pub(crate) fn deeper(max_depth: usize) -> String {
    format!("JSON nested deeper than the limit of {max_depth}")
}

impl Reading {
    /// Refuses a container opening at `depth`.
    fn enter<E: de::Error>(&self, depth: usize) -> Result<(), E> {
        if depth > self.max_depth {
            self.too_deep.set(true);
            return Err(E::custom(deeper(self.max_depth)));
        }
        Ok(())
    }

    /// Checks a raw value inside a container at `depth`.
    fn raw<'de, E: de::Error>(&self, raw: &'de RawValue, depth: usize) -> Result<&'de str, E> {
        let text = raw.get();
        if matches!(text.as_bytes().first(), Some(b'{' | b'['))
            && nests_deeper(text.as_bytes(), self.max_depth.saturating_sub(depth))
        {
            self.too_deep.set(true);
            return Err(E::custom(deeper(self.max_depth)));
        }
        Ok(text)
    }

    /// Our spelling of the key `key` of this line.
    fn key<'de>(&self, key: Cow<'de, str>) -> Cow<'de, str> {
        match self.pi.then(|| native_key(&key)).flatten() {
            Some(ours) => Cow::Borrowed(ours),
            None => key,
        }
    }

    /// A raw string value of our key `key`, as ours (a pi line's role, block type, stop
    /// reason), flagging what only the translation reads.
    fn value<'de>(&self, key: &str, raw: &'de str) -> &'de str {
        if !self.pi || !has_pi_values(key) {
            return raw;
        }
        let Some(text) = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else {
            return raw;
        };
        match native_value(key, text) {
            PiValue::Same => raw,
            PiValue::Ours(ours) => ours,
            PiValue::Translate => {
                self.translate.set(true);
                raw
            }
        }
    }
}

/// The line's object.
struct EntrySeed<'r>(&'r Reading);

impl<'de> DeserializeSeed<'de> for EntrySeed<'_> {
    type Value = RawEntry<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<RawEntry<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

/// How a top-level field is read: visited (the context), or `None` for raw.
fn entry_ctx(key: &str) -> Option<Ctx> {
    Some(match key {
        "message" => Ctx::Message,
        "usage" => Ctx::Nested(&model::USAGE),
        "content" => Ctx::Content,
        "retained_tail" => Ctx::Messages,
        _ => return None,
    })
}

/// How a field of a message is read: visited (the context), or `None` for raw.
fn message_ctx(key: &str) -> Option<Ctx> {
    Some(match key {
        "content" => Ctx::Content,
        "usage" => Ctx::Nested(&model::USAGE),
        _ => return None,
    })
}

impl<'de> Visitor<'de> for EntrySeed<'_> {
    type Value = RawEntry<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an entry object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawEntry<'de>, A::Error> {
        let r = self.0;
        r.enter(1)?;
        let mut raw = RawEntry::default();
        let mut kind: Option<Cow<'de, str>> = None;
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if r.pi && key == "parent_id" {
                // Ours in a pi file: the translation refuses it in its words.
                r.translate.set(true);
            }
            let name = r.key(key);
            let name = &*name;
            if name == "type" {
                if kind.is_some() {
                    return Err(de::Error::duplicate_field("type"));
                }
                let Key(value) = map.next_value::<Key<'de>>()?;
                if r.pi && native_value("type", &value) != PiValue::Same {
                    // Entry types are spelled alike; a label or a session name is
                    // translated.
                    r.translate.set(true);
                }
                kind = Some(value);
                continue;
            }
            let ctx = entry_ctx(name);
            let part = match ctx {
                Some(ctx) => map.next_value_seed(Seed {
                    ctx,
                    depth: 2,
                    reading: r,
                })?,
                None => {
                    let value: &'de RawValue = map.next_value()?;
                    Part::Raw(r.value(name, r.raw(value, 1)?))
                }
            };
            if let Some(slot) = raw.slot(name) {
                if slot.is_some() {
                    return Err(de::Error::custom(format_args!("duplicate field `{name}`")));
                }
                *slot = Some(part);
            }
        }
        raw.kind = kind.ok_or_else(|| de::Error::missing_field("type"))?;
        Ok(raw)
    }
}

/// What a visited value is, so its members are read the right way.
#[derive(Clone, Copy)]
enum Ctx {
    /// A message object: `content` and `usage` visited, the rest raw.
    Message,
    /// A `content` field: an array of blocks (objects, members raw).
    Content,
    /// A content block: members raw.
    Block,
    /// A `retained_tail`: an array of messages.
    Messages,
    /// An object of a nested type (`usage`, `cost`).
    Nested(&'static TypeDef),
    /// Anything else: members or items raw.
    Flat,
}

/// A visited value at `depth` (if it is a container).
#[derive(Clone, Copy)]
struct Seed<'r> {
    ctx: Ctx,
    depth: usize,
    reading: &'r Reading,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Part<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Part<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Part<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Part<'de>, A::Error> {
        let r = self.reading;
        r.enter(self.depth)?;
        let mut fields: Fields<'de> = Vec::with_capacity(8);
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let name = r.key(key);
            if fields.iter().any(|(k, _)| *k == name) {
                return Err(de::Error::custom(format_args!("duplicate field `{name}`")));
            }
            let inner = match self.ctx {
                Ctx::Message => message_ctx(&name),
                Ctx::Nested(def) => match def.field(&name).map(|f| f.kind) {
                    Some(FieldKind::Nested(inner)) => Some(Ctx::Nested(inner)),
                    _ => None,
                },
                _ => None,
            };
            let part = match inner {
                Some(ctx) => map.next_value_seed(Seed {
                    ctx,
                    depth: self.depth + 1,
                    reading: r,
                })?,
                None => {
                    let value: &'de RawValue = map.next_value()?;
                    let text = r.raw(value, self.depth)?;
                    match self.ctx {
                        Ctx::Message | Ctx::Block => Part::Raw(r.value(&name, text)),
                        _ => Part::Raw(text),
                    }
                }
            };
            fields.push((name, part));
        }
        Ok(Part::Object(fields))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Part<'de>, A::Error> {
        let r = self.reading;
        r.enter(self.depth)?;
        let item = match self.ctx {
            Ctx::Content => Some(Ctx::Block),
            Ctx::Messages => Some(Ctx::Message),
            _ => None,
        };
        let mut items = Vec::new();
        match item {
            Some(ctx) => {
                let seed = Seed {
                    ctx,
                    depth: self.depth + 1,
                    reading: r,
                };
                while let Some(part) = seq.next_element_seed(seed)? {
                    items.push(part);
                }
            }
            None => {
                while let Some(value) = seq.next_element::<&'de RawValue>()? {
                    items.push(Part::Raw(r.raw(value, self.depth)?));
                }
            }
        }
        Ok(Part::Array(items))
    }

    fn visit_str<E>(self, _: &str) -> Result<Part<'de>, E> {
        Ok(Part::Scalar(Json::Str))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Part<'de>, E> {
        Ok(Part::Scalar(Json::Bool))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Part<'de>, E> {
        Ok(Part::Scalar(Json::Int))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Part<'de>, E> {
        Ok(Part::Scalar(Json::Int))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Part<'de>, E> {
        Ok(Part::Scalar(Json::Float))
    }
    fn visit_unit<E>(self) -> Result<Part<'de>, E> {
        Ok(Part::Scalar(Json::Null))
    }
}

#[cfg(test)]
mod tests;
