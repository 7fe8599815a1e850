//! Reading an entry line's searched texts where they are, to rank it without decoding it:
//! the scan's fast path for a term counted by [`super::count`].
//!
//! Every byte is read by serde_json, the engine's one JSON reader: the line is
//! deserialized into borrowed structs whose searched fields are `&RawValue`s (the raw
//! JSON text of a string, escapes kept, validated and skipped by serde without a copy).
//! [`read`] gives the entry's type, id, time and role borrowed from the line, and its
//! searched texts (the ones [`super::entry::entry_text`] decodes) as [`Text`]s: a
//! string's raw bytes between its quotes, or, where counting on those bytes would be
//! wrong, the text decoded:
//!
//! * a string holding a `\u` escape (it may stand for a letter) is decoded, that text
//!   only;
//! * a number among a tool call's arguments is written as `serde_json::Value` writes it;
//! * a string serde hands over decoded (a message's `content` or an argument with an
//!   escape, read in the line's pass) is kept as such.
//!
//! Counting a word in raw bytes ([`Counter::count_raw`]) needs no copy: JSON's other
//! escapes (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`) stand for characters that are
//! never part of a token, each one byte decoded, so a token of the decoded text is in the
//! raw bytes as is, the byte before or after an escape is a word boundary, and the
//! decoded length is the bytes less one per escape ([`super::count::escapes`]).
//!
//! The structs take the same fields, with the same rules, as the decoding reading
//! (`entry.rs`); where that reading would refuse a value this one reads (a number too
//! big for a float where a text may be, a string with a lone surrogate, a key written
//! twice in a tool call's arguments) or read a line another way (a message that is not
//! an object, a type, id or role with an escape), [`read`] gives `None` and the caller
//! decodes the line, which decides. A test compares both readings on odd lines.
//!
//! [`Counter::count_raw`]: super::count::Counter::count_raw

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Number, Value};

use crate::engine::types::Key;

use super::count::escapes;
use super::entry::{by_block, by_role, by_type, ByBlock, ByRole, ByType, LineOf, MessageOf};

/// A searched text of a line read in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Text<'a> {
    /// A JSON string's bytes between its quotes, escapes kept (none of them `\u`).
    Raw(&'a str),
    /// The text itself (see the module doc for when).
    Decoded(Cow<'a, str>),
}

impl Text<'_> {
    /// The length in bytes of the decoded text.
    pub fn decoded_len(&self) -> usize {
        match self {
            Text::Raw(r) => r.len() - escapes(r.as_bytes()),
            Text::Decoded(t) => t.len(),
        }
    }
}

/// The facts of an entry line read in place (its texts apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The entry's `type`.
    pub entry_type: &'a str,
    /// Its `id`.
    pub id: &'a str,
    /// Its `timestamp` as written (`""` when it has none).
    pub timestamp: &'a str,
    /// The message's role, for a `message` entry (`""` when it has none).
    pub role: Option<&'a str>,
}

/// A value left as its raw JSON text.
type Raw<'a> = Option<&'a RawValue>;

/// The fields of an entry line the search reads (`entry.rs`'s list), raw, its message and
/// content read in the same pass.
type Line<'a> = LineOf<&'a RawValue, Message<'a>, Content<'a>>;

/// A message's fields, raw, its content read in the same pass.
type Message<'a> = MessageOf<&'a RawValue, Content<'a>, &'a RawValue>;

/// A content block's fields, raw, a tool call's arguments read in the same pass.
type Block<'a> = MessageOf<&'a RawValue, &'a RawValue, Args<'a>>;

/// A `content` value: a string, a list (its objects read as blocks), or anything else
/// (no text).
enum Content<'a> {
    Text(Text<'a>),
    Blocks(Vec<Option<Block<'a>>>),
    Other,
}

/// A string handed over by serde: borrowed from the line when it holds no escape (its
/// raw bytes, then), decoded otherwise.
fn handed<'a>(borrowed: Option<&'a str>, decoded: &str) -> Text<'a> {
    match borrowed {
        Some(s) => Text::Raw(s),
        None => Text::Decoded(Cow::Owned(decoded.to_owned())),
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Content<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Content<'a>, E> {
                Ok(Content::Text(handed(Some(v), v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Content<'a>, E> {
                Ok(Content::Text(handed(None, v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content<'a>, A::Error> {
                let mut blocks = Vec::new();
                while let Some(Item(b)) = seq.next_element::<Item<'a>>()? {
                    blocks.push(b);
                }
                Ok(Content::Blocks(blocks))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Content<'a>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Content::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Content<'a>, E> {
                Ok(Content::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Content<'a>, E> {
                Ok(Content::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Content<'a>, E> {
                Ok(Content::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Content<'a>, E> {
                Ok(Content::Other)
            }
            fn visit_unit<E>(self) -> Result<Content<'a>, E> {
                Ok(Content::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// An item of a content list: a block, or `None` for a value that is not an object
/// (skipped, as the decoding skips it).
struct Item<'a>(Option<Block<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for Item<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Item<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content block")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Item<'a>, A::Error> {
                Block::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|b| Item(Some(b)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Item<'a>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Item(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Item<'a>, E> {
                Ok(Item(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Item<'a>, E> {
                Ok(Item(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Item<'a>, E> {
                Ok(Item(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Item<'a>, E> {
                Ok(Item(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Item<'a>, E> {
                Ok(Item(None))
            }
            fn visit_unit<E>(self) -> Result<Item<'a>, E> {
                Ok(Item(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A tool call's arguments: every string and number inside, never a key (what
/// `entry.rs` reads from a `serde_json::Value`).
struct Args<'a>(Vec<Text<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for Args<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = Vec::new();
        Scalars(&mut out).deserialize(d)?;
        Ok(Args(out))
    }
}

/// The key serde_json's `Value` reads as a raw value's text, not as a key.
const RAW_VALUE_KEY: &str = "$serde_json::private::RawValue";

/// Reads a value's strings and numbers into the vector.
struct Scalars<'v, 'a>(&'v mut Vec<Text<'a>>);

impl<'de: 'a, 'a> DeserializeSeed<'de> for Scalars<'_, 'a> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for Scalars<'_, 'a> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<(), E> {
        self.0.push(handed(Some(v), v));
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.push(handed(None, v));
        Ok(())
    }
    // Numbers written as `Value` writes them.
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.0
            .push(Text::Decoded(Number::from(v).to_string().into()));
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.0
            .push(Text::Decoded(Number::from(v).to_string().into()));
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        if let Some(n) = Number::from_f64(v) {
            self.0.push(Text::Decoded(n.to_string().into()));
        }
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Scalars(&mut *self.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // A key written twice: `Value` keeps the last value, this would keep both.
        let mut keys: Vec<Cow<'de, str>> = Vec::new();
        while let Some(Key(k)) = map.next_key::<Key<'de>>()? {
            if k == RAW_VALUE_KEY || keys.contains(&k) {
                return Err(de::Error::custom("read by decoding"));
            }
            keys.push(k);
            map.next_value_seed(Scalars(&mut *self.0))?;
        }
        Ok(())
    }
}

/// The text of a type, id, time or role: a string without escapes, else `None`.
fn plain(v: &RawValue) -> Option<&str> {
    let s = v.get().strip_prefix('"')?.strip_suffix('"')?;
    memchr::memchr(b'\\', s.as_bytes()).is_none().then_some(s)
}

/// Where a line's searched texts go, and whether its document may hold a `\u` escape
/// (where none is, no text is looked at for one).
struct Out<'v, 'a> {
    texts: &'v mut Vec<Text<'a>>,
    unicode: bool,
}

impl<'a> Out<'_, 'a> {
    /// Whether a string's raw text (quotes included) holds a `\u` escape (or an escaped
    /// backslash before a `u`: decoded too, for nothing).
    fn has_u(&self, raw: &str) -> bool {
        self.unicode && memchr::memmem::find(raw.as_bytes(), b"\\u").is_some()
    }

    /// Whether the decoding reads `v` where it takes a text: it decodes a string and
    /// parses a number, and refuses a lone surrogate or a number past a float's range.
    fn readable(&self, v: Raw<'_>) -> bool {
        let Some(v) = v else { return true };
        let raw = v.get();
        match raw.as_bytes().first() {
            Some(b'"') => !self.has_u(raw) || serde_json::from_str::<Cow<'_, str>>(raw).is_ok(),
            Some(b'-' | b'0'..=b'9') => serde_json::from_str::<Value>(raw).is_ok(),
            _ => true,
        }
    }

    /// Whether the decoding reads each of `values` where it takes a text.
    fn all_readable<const N: usize>(&self, values: [Raw<'_>; N]) -> bool {
        values.into_iter().all(|v| self.readable(v))
    }

    /// Adds a searched field's text (a string's); `None` when the decoding would refuse
    /// it.
    fn push(&mut self, v: Raw<'a>) -> Option<()> {
        let Some(v) = v else { return Some(()) };
        let raw = v.get();
        if raw.starts_with('"') {
            let text = if self.has_u(raw) {
                Text::Decoded(serde_json::from_str::<Cow<'_, str>>(raw).ok()?)
            } else {
                Text::Raw(&raw[1..raw.len() - 1])
            };
            self.texts.push(text);
            return Some(());
        }
        self.readable(Some(v)).then_some(())
    }

    /// Adds a `content` value's texts: a string's, or each block's.
    fn content(&mut self, content: Option<Content<'a>>) -> Option<()> {
        match content {
            Some(Content::Text(t)) => self.texts.push(t),
            Some(Content::Blocks(blocks)) => {
                for b in blocks.into_iter().flatten() {
                    self.block(b)?;
                }
            }
            Some(Content::Other) | None => {}
        }
        Some(())
    }

    /// Adds a content block's texts, by its type.
    fn block(&mut self, b: Block<'a>) -> Option<()> {
        let kind = match b.ty {
            Some(t) if t.get().starts_with('"') => plain(t)?,
            // Not a string: no text (a block the decoding cannot read has none either).
            _ => return Some(()),
        };
        let others = match by_block(kind) {
            ByBlock::Text => {
                self.push(b.text)?;
                [b.thinking, b.name]
            }
            ByBlock::Thinking => {
                self.push(b.thinking)?;
                [b.text, b.name]
            }
            ByBlock::NameArguments => {
                self.push(b.name)?;
                self.texts
                    .extend(b.arguments.map(|a| a.0).unwrap_or_default());
                [b.text, b.thinking]
            }
            ByBlock::Nothing => return Some(()),
        };
        // A block the decoding cannot read is skipped there: the same must hold here.
        (self.all_readable([b.role, b.summary, b.command, b.output]) && self.all_readable(others))
            .then_some(())
    }
}

/// Reads the entry `line` (sessiontree's dialect) in place, its searched texts into
/// `texts` (cleared first, in no particular order); `None` when the line is one to
/// decode (see the module doc). `unicode`: whether the line may hold a `\u` escape
/// (`false` only when its document holds none).
pub fn read<'a>(line: &'a str, texts: &mut Vec<Text<'a>>, unicode: bool) -> Option<Entry<'a>> {
    texts.clear();
    let mut out = Out { texts, unicode };
    let l: Line<'a> = serde_json::from_str(line).ok()?;
    let entry_type = plain(l.ty?)?;
    let id = plain(l.id?)?;
    let timestamp = match l.timestamp {
        Some(t) => plain(t)?,
        None => "",
    };
    let mut role = None;
    match by_type(entry_type) {
        ByType::Message => {
            let m = l.message?;
            let r = match m.role {
                Some(r) => plain(r)?,
                None => "",
            };
            role = Some(r);
            let others = match by_role(r) {
                ByRole::Summary => {
                    out.push(m.summary)?;
                    [m.command, m.output, None]
                }
                ByRole::CommandOutput => {
                    out.push(m.command)?;
                    out.push(m.output)?;
                    [m.summary, None, None]
                }
                ByRole::Content => {
                    out.content(m.content)?;
                    [m.summary, m.command, m.output]
                }
            };
            // The decoding reads a message whole or not at all.
            if !(out.all_readable([m.ty, m.text, m.thinking, m.name]) && out.all_readable(others)) {
                return None;
            }
        }
        ByType::Content => out.content(l.content)?,
        ByType::Summary => out.push(l.summary)?,
        ByType::Label => out.push(l.label)?,
        ByType::Name => out.push(l.name)?,
        ByType::Nothing => {}
    }
    Some(Entry {
        entry_type,
        id,
        timestamp,
        role,
    })
}

#[cfg(test)]
mod tests {
    use super::super::count::{counters, Counter, Finder};
    use super::super::entry::entry_text;
    use super::super::query::Query;
    use super::*;

    /// The texts of a line read in place, decoded, sorted (the in-place reading keeps no
    /// order); `None` when it sends the line to be decoded.
    fn in_place(line: &str) -> Option<(Entry<'_>, Vec<String>)> {
        let mut texts = Vec::new();
        let e = read(line, &mut texts, true)?;
        let mut out: Vec<String> = texts
            .iter()
            .map(|t| {
                let text = match t {
                    Text::Raw(raw) => {
                        assert!(!raw.contains("\\u"), "{raw}");
                        serde_json::from_str::<String>(&format!("\"{raw}\"")).unwrap()
                    }
                    Text::Decoded(d) => d.to_string(),
                };
                assert_eq!(text.len(), t.decoded_len(), "{t:?}");
                text
            })
            .collect();
        out.sort();
        Some((e, out))
    }

    /// An entry's type, id, time, role and texts.
    type Facts = (String, String, String, Option<String>, Vec<String>);

    /// The decoded reading's facts, texts sorted.
    fn decoded(line: &str) -> Option<Facts> {
        let e = entry_text(line)?;
        let mut texts: Vec<String> = e.texts.into_iter().map(|t| t.into_owned()).collect();
        texts.sort();
        Some((e.entry_type, e.id, e.timestamp, e.role, texts))
    }

    /// Lines read in place give what decoding gives; `sure`: whether each is read in
    /// place (else it is left to decoding).
    fn agree(cases: &[(&str, bool)]) {
        for &(line, sure) in cases {
            let got = in_place(line);
            assert_eq!(got.is_some(), sure, "{line}");
            if let Some((e, texts)) = got {
                let want = decoded(line).expect(line);
                assert_eq!(
                    (
                        e.entry_type.to_owned(),
                        e.id.to_owned(),
                        e.timestamp.to_owned(),
                        e.role.map(str::to_owned),
                        texts
                    ),
                    want,
                    "{line}"
                );
            }
        }
    }

    #[test]
    fn reads_what_decoding_reads() {
        agree(&[
            (
                r#"{"type":"message","id":"a","parent_id":null,"timestamp":"T","message":{"role":"user","content":"say \"merge\"\nnow \\ ok","timestamp":1}}"#,
                true,
            ),
            (
                r#"{"type":"message","id":"a2","message":{"role":"user","content":"plain, borrowed"}}"#,
                true,
            ),
            (
                r#"{"type":"message","id":"b","message":{"role":"assistant","content":[{"type":"thinking","thinking":"t\tx","signature":"abc"},{"type":"text","text":"T"},{"type":"tool_call","id":"c","arguments":{"path":"a/b","n":[1,-2,{"deep":"x\ny","z":0}],"f":true,"g":null,"h":1.50,"i":-0,"j":1e3,"k":123456789012345678901234},"name":"bash"},{"type":"image","data":"merge","mime_type":"p"},"str",5,null,[1]]}}"#,
                true,
            ),
            (
                r#"{"type":"message","id":"c","message":{"content":"x","role":"branch_summary","summary":"S"}}"#,
                true,
            ),
            (
                r#"{"type":"message","id":"d","message":{"role":"bash_execution","command":"ls","output":"out","content":"no"}}"#,
                true,
            ),
            (
                r#"{"type":"message","id":"e","message":{"content":"no role"}}"#,
                true,
            ),
            (
                r#"{"type":"custom_message","id":"f","content":[{"type":"text","text":"c"}],"summary":"no"}"#,
                true,
            ),
            (
                r#"{"type":"custom_message","id":"f2","content":{"a":"b"}}"#,
                true,
            ),
            (
                r#"{"type":"compaction","id":"g","summary":"sum","label":"no"}"#,
                true,
            ),
            (r#"{"type":"branch_summary","id":"h","summary":7}"#, true),
            (
                r#"{"type":"label","id":"i","label":"L","target_id":"a"}"#,
                true,
            ),
            (r#"{"type":"session_info","id":"j","name":"N"}"#, true),
            (
                r#"{"type":"model_change","id":"k","name":"not searched"}"#,
                true,
            ),
            (
                r#" { "type" : "label" , "id" : "l" , "label" : "spaced" } "#,
                true,
            ),
            (
                "{\"type\":\"label\",\t\"id\":\"p\",\r\n\"label\":\"tab\"}",
                true,
            ),
            (r#"{"type":"label","id":"m","label":15,"x":[1e400]}"#, true),
            (r#"{"type":"label","id":"m2","label":1.5e3}"#, true),
            // `\u` escapes: that text decoded, a key's read by serde.
            (
                r#"{"type":"label","id":"o","label":"caf\u00e9 m\u0065rge \\u00e9"}"#,
                true,
            ),
            (
                r#"{"type":"message","id":"o2","message":{"role":"assistant","content":[{"type":"text","text":"\ud83c\udf89 merge"},{"type":"tool_call","name":"n","arguments":{"a":"\u00e9"}}]}}"#,
                true,
            ),
            (r#"{"type":"label","id":"o3","l\u0061bel":"key"}"#, true),
            // Lines left to the decoding.
            (r#"{"type":"label","id":"m3","label":1e400}"#, false),
            (
                r#"{"type":"message","id":"n","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":1e500}]}}"#,
                false,
            ),
            (
                r#"{"type":"message","id":"n2","message":{"role":"user","content":"a","text":1e500}}"#,
                false,
            ),
            (
                r#"{"type":"message","id":"n3","message":{"role":"user","content":"a","name":"\udc00"}}"#,
                false,
            ),
            (r#"{"type":"label","id":"n4","label":"lone \ud800"}"#, false),
            (
                "{\"type\":\"label\",\"id\":\"q\",\"label\":\"raw\tcontrol\"}",
                false,
            ),
            (
                r#"{"type":"label","id":"r","id":"r2","label":"twice"}"#,
                false,
            ),
            (
                r#"{"type":"message","id":"s","message":{"role":"user","role":"x","content":"c"}}"#,
                false,
            ),
            (
                r#"{"type":"message","id":"t","message":{"role":"assistant","content":[{"type":"tool_call","name":"n","arguments":{"a":"1","a":"2"}}]}}"#,
                false,
            ),
            (
                r#"{"type":"message","id":"w","message":"not an object"}"#,
                false,
            ),
            (r#"{"type":"message","id":"x"}"#, false),
            (r#"{"type":"label","id":7,"label":"L"}"#, false),
            (r#"{"type":"label","id":"y\"q","label":"L"}"#, false),
            (r#"{"type":"l\u0061bel","id":"y2","label":"L"}"#, false),
            (r#"{"type":"label","id":"z","label":"L"} trailing"#, false),
            (r#"{"type":"label","id":"z2","label":"L""#, false),
            (r#"["label","z3"]"#, false),
            (r#"{"type":"label","id":"z4","label":"L","n":01}"#, false),
        ]);
    }

    #[test]
    fn nesting_past_serdes_limit_is_decoded() {
        let deep = format!(
            r#"{{"type":"message","id":"a","message":{{"role":"assistant","content":[{{"type":"tool_call","name":"n","arguments":{}{}}}]}}}}"#,
            "[".repeat(130),
            "]".repeat(130)
        );
        assert!(in_place(&deep).is_none());
        assert!(decoded(&deep).is_some());
    }

    fn counter(q: &str) -> Counter {
        let query = Query::parse(q).unwrap();
        let mut all = counters(
            &query,
            |tok| {
                let forms: Vec<String> = tok.chars().fold(vec![String::new()], |acc, c| {
                    let mut variants = vec![c];
                    variants.extend(super::super::tokens::upper_variants(c));
                    acc.iter()
                        .flat_map(|p| variants.iter().map(move |v| format!("{p}{v}")))
                        .collect()
                });
                regex_automata::util::prefilter::Prefilter::new(
                    regex_automata::MatchKind::LeftmostFirst,
                    &forms,
                )
                .map(Finder::Literals)
            },
            |tok| tok,
        )
        .unwrap();
        all.remove(0)
    }

    #[test]
    fn counts_on_escaped_bytes_as_on_the_decoded_text() {
        let cases = [
            r#"merge\nmerge\tmerge\\merge\"merge\/merge"#,
            r#"\nmerge \\nmerge \\\nmerge x\/merge"#,
            r#"emerge merged MERGE_x snake_case_merge a.merge.b paths/merge/x"#,
            r#"merge\n"#,
            r#"émerge mergeé merge→ «merge»"#,
            r#"nothing \nothing \\nothing"#,
            r#"\"quoted\" \"merge\""#,
            r#"\\\\"#,
            "",
        ];
        for q in [
            "merge", "merg*", "nothing", "nothing*", "quoted", "café", "b",
        ] {
            let c = counter(q);
            for raw in cases {
                let text = serde_json::from_str::<String>(&format!("\"{raw}\"")).unwrap();
                assert_eq!(text.len(), Text::Raw(raw).decoded_len(), "{raw:?}");
                let want = c.count(&text);
                let got = c.count_raw(None, raw.as_bytes());
                assert_eq!(got, want, "{q:?} in {raw:?}");
            }
        }
    }

    #[test]
    fn every_match_is_among_the_finds_of_the_line() {
        let line = r#"{"type":"message","id":"merge","message":{"role":"user","content":"x\nmerge, Merge; merge\\merge"}}"#;
        let c = counter("merge");
        let mut finds = Vec::new();
        c.finds_raw(None, line.as_bytes(), 0, &mut finds);
        // The id's and the text's four.
        assert_eq!(finds.len(), 5, "{finds:?}");
    }
}
