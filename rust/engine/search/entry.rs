//! What of an entry is searched, and how one entry is matched, scored and quoted.
//!
//! The searched texts of an entry (read from its line in sessiontree's dialect) are the
//! decoded strings of: a message's content (text, thinking, a tool call's name and every
//! string or number in its arguments, tool results), a custom message's content, the
//! summaries of compactions and branch summaries (entries and messages), a label and a
//! session name, and pi's shell commands and their output. Never JSON keys, ids,
//! timestamps, signatures or image data.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::query::{Query, Term};
use super::tokens::{tokenize, Tokens};

/// Where an entry's searched texts are, by its `type`: the one statement of what is
/// searched (with [`by_role`] and [`by_block`]), which both readings of a line follow
/// (this module's decoding, and `inplace.rs`'s reading in place).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum ByType {
    /// A message's fields, by its role ([`by_role`]).
    Message,
    /// The entry's `content`: a string, or blocks ([`by_block`]).
    Content,
    /// The entry's `summary`.
    Summary,
    /// The entry's `label`.
    Label,
    /// The entry's `name`.
    Name,
    /// No text.
    Nothing,
}

/// What of an entry of type `entry_type` is searched.
pub(super) fn by_type(entry_type: &str) -> ByType {
    match entry_type {
        "message" => ByType::Message,
        "custom_message" => ByType::Content,
        "compaction" | "branch_summary" => ByType::Summary,
        "label" => ByType::Label,
        "session_info" => ByType::Name,
        _ => ByType::Nothing,
    }
}

/// Where a message's searched texts are, by its `role`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum ByRole {
    /// Its `summary` (a compaction's or a branch's summary message).
    Summary,
    /// Its `command` and `output` (pi's shell commands).
    CommandOutput,
    /// Its `content`: a string, or blocks ([`by_block`]).
    Content,
}

/// What of a message of role `role` is searched.
pub(super) fn by_role(role: &str) -> ByRole {
    match role {
        "compaction_summary" | "branch_summary" => ByRole::Summary,
        "bash_execution" => ByRole::CommandOutput,
        _ => ByRole::Content,
    }
}

/// Where a content block's searched texts are, by its `type`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum ByBlock {
    /// Its `text`.
    Text,
    /// Its `thinking`.
    Thinking,
    /// A tool call's `name`, and every string and number in its `arguments`.
    NameArguments,
    /// No text (images, unknown blocks).
    Nothing,
}

/// What of a content block of type `block_type` is searched.
pub(super) fn by_block(block_type: &str) -> ByBlock {
    match block_type {
        "text" => ByBlock::Text,
        "thinking" => ByBlock::Thinking,
        "tool_call" => ByBlock::NameArguments,
        _ => ByBlock::Nothing,
    }
}

/// The searchable facts of one entry line.
#[derive(Debug)]
pub struct EntryText<'a> {
    /// The entry's `type`.
    pub entry_type: String,
    /// Its `id`.
    pub id: String,
    /// Its ISO `timestamp` as written.
    pub timestamp: String,
    /// The message's role, for a `message` entry.
    pub role: Option<String>,
    /// The searched texts, in the entry's order (borrowed from the line where they hold
    /// no escape).
    pub texts: Vec<Cow<'a, str>>,
}

/// A JSON value left unread until needed: only the searched fields are ever decoded,
/// the rest of a line (usage, signatures, image data) is skipped without allocating.
type Raw<'a> = Option<&'a RawValue>;

/// A JSON value read as text: a string's decoded text (borrowed from the line when it has
/// no escape), or `None` for any other value (read past). The text is decoded in the
/// pass that reads the line, where a [`Raw`] value is read again to decode it.
struct Str<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Str<'a>, E> {
                Ok(Str(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<Str<'a>, E> {
                Ok(Str(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E>(self, v: String) -> Result<Str<'a>, E> {
                Ok(Str(Some(Cow::Owned(v))))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Str<'a>, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Str(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Str<'a>, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Str(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Str<'a>, E> {
                Ok(Str(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Str<'a>, E> {
                Ok(Str(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Str<'a>, E> {
                Ok(Str(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Str<'a>, E> {
                Ok(Str(None))
            }
            fn visit_unit<E>(self) -> Result<Str<'a>, E> {
                Ok(Str(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A field read as text ([`Str`]).
type Text<'a> = Option<Str<'a>>;

/// A value's text: a JSON string's, decoded; `None` for any other value.
trait AsText<'a> {
    fn text(self) -> Option<Cow<'a, str>>;
}

impl<'a> AsText<'a> for Raw<'a> {
    fn text(self) -> Option<Cow<'a, str>> {
        let raw = self?.get();
        if !raw.starts_with('"') {
            return None;
        }
        serde_json::from_str::<Cow<'a, str>>(raw).ok()
    }
}

impl<'a> AsText<'a> for Text<'a> {
    fn text(self) -> Option<Cow<'a, str>> {
        self?.0
    }
}

impl<'a> Str<'a> {
    /// The [`Str`] of a value read raw.
    fn of(v: Raw<'a>) -> Text<'a> {
        let raw = v?.get();
        if !raw.starts_with('"') {
            return Some(Str(None));
        }
        Some(Str(serde_json::from_str::<Cow<'a, str>>(raw).ok()))
    }
}

/// The fields of an entry line the search reads (any other key is skipped): one list for
/// both readings of a line, this module's decoding and `inplace.rs`'s reading in place,
/// which read each field as `T` (raw, or as text), the `message` as `M` and the `content`
/// as `C`.
#[derive(Deserialize)]
pub(super) struct LineOf<T, M, C> {
    #[serde(rename = "type")]
    pub(super) ty: Option<T>,
    pub(super) id: Option<T>,
    pub(super) timestamp: Option<T>,
    pub(super) message: Option<M>,
    pub(super) content: Option<C>,
    pub(super) summary: Option<T>,
    pub(super) label: Option<T>,
    pub(super) name: Option<T>,
}

/// The fields of a message, and of a content block, the search reads: each as `T`, the
/// `content` as `C` and a tool call's `arguments` as `A` (see [`LineOf`]).
#[derive(Deserialize)]
pub(super) struct MessageOf<T, C, A> {
    #[serde(rename = "type")]
    pub(super) ty: Option<T>,
    pub(super) role: Option<T>,
    pub(super) content: Option<C>,
    pub(super) summary: Option<T>,
    pub(super) command: Option<T>,
    pub(super) output: Option<T>,
    pub(super) text: Option<T>,
    pub(super) thinking: Option<T>,
    pub(super) name: Option<T>,
    pub(super) arguments: Option<A>,
}

/// An entry line's fields, raw.
type LineFields<'a> = LineOf<&'a RawValue, &'a RawValue, &'a RawValue>;

/// [`LineFields`] with the message read in the same pass (one read of its bytes fewer).
/// A line this does not read (a message that is not an object, a key written twice) is
/// read again as [`LineFields`], whose reading decides.
type LineWithMessage<'a> = LineOf<Str<'a>, Fields<'a>, &'a RawValue>;

/// The fields of a message (and of a content block), as text.
type Fields<'a> = MessageOf<Str<'a>, &'a RawValue, &'a RawValue>;

/// The string a value holds (`None` for any other JSON value).
fn string<'a>(v: impl AsText<'a>) -> Option<String> {
    v.text().map(Cow::into_owned)
}

fn push_str<'a>(out: &mut Vec<Cow<'a, str>>, v: impl AsText<'a>) {
    if let Some(s) = v.text() {
        out.push(s);
    }
}

/// Every string and number inside a JSON value (a tool call's arguments), never its keys.
fn push_scalars(out: &mut Vec<Cow<'_, str>>, v: &Value) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => out.push(Cow::Owned(s.clone())),
            Value::Number(n) => out.push(Cow::Owned(n.to_string())),
            Value::Array(a) => stack.extend(a.iter().rev()),
            Value::Object(o) => stack.extend(o.values().rev()),
            Value::Bool(_) | Value::Null => {}
        }
    }
}

/// A content block read in the list's pass: its fields, or `None` for a value that is
/// not an object (skipped, as [`push_content`] skips it).
struct Block<'a>(Option<Fields<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for Block<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Block<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a content block")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Block<'a>, A::Error> {
                Fields::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(|f| Block(Some(f)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Block<'a>, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Block(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Block<'a>, E> {
                Ok(Block(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Block<'a>, E> {
                Ok(Block(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Block<'a>, E> {
                Ok(Block(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Block<'a>, E> {
                Ok(Block(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Block<'a>, E> {
                Ok(Block(None))
            }
            fn visit_unit<E>(self) -> Result<Block<'a>, E> {
                Ok(Block(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A message's (or custom message's) `content`: a string or a list of blocks.
fn push_content<'a>(out: &mut Vec<Cow<'a, str>>, content: Raw<'a>) {
    let Some(raw) = content else { return };
    if raw.get().starts_with('"') {
        push_str(out, content);
        return;
    }
    // The blocks in one pass; a block this cannot read (a key written twice) sends the
    // list to the reading block by block, which skips just that block.
    let blocks: Vec<Fields<'_>> = match serde_json::from_str::<Vec<Block<'_>>>(raw.get()) {
        Ok(blocks) => blocks.into_iter().filter_map(|b| b.0).collect(),
        Err(_) => {
            let Ok(raws) = serde_json::from_str::<Vec<&RawValue>>(raw.get()) else {
                return;
            };
            raws.into_iter()
                .filter_map(|b| serde_json::from_str::<Fields<'_>>(b.get()).ok())
                .collect()
        }
    };
    for f in blocks {
        let Some(kind) = string(f.ty) else { continue };
        match by_block(&kind) {
            ByBlock::Text => push_str(out, f.text),
            ByBlock::Thinking => push_str(out, f.thinking),
            ByBlock::NameArguments => {
                push_str(out, f.name);
                if let Some(args) = f.arguments {
                    if let Ok(v) = serde_json::from_str::<Value>(args.get()) {
                        push_scalars(out, &v);
                    }
                }
            }
            ByBlock::Nothing => {}
        }
    }
}

/// Reads the searchable facts of an entry line in sessiontree's dialect; `None` for a line
/// that is not an entry object with an `id`.
pub fn entry_text(line: &str) -> Option<EntryText<'_>> {
    let f = match serde_json::from_str::<LineWithMessage<'_>>(line) {
        Ok(f) => f,
        Err(_) => {
            let f: LineFields<'_> = serde_json::from_str(line).ok()?;
            let message = match (Str::of(f.ty).text().as_deref(), f.message) {
                (Some("message"), Some(m)) => Some(serde_json::from_str(m.get()).ok()?),
                _ => None,
            };
            LineWithMessage {
                ty: Str::of(f.ty),
                id: Str::of(f.id),
                timestamp: Str::of(f.timestamp),
                message,
                content: f.content,
                summary: Str::of(f.summary),
                label: Str::of(f.label),
                name: Str::of(f.name),
            }
        }
    };
    let entry_type = string(f.ty)?;
    let id = string(f.id)?;
    let timestamp = string(f.timestamp).unwrap_or_default();
    let mut texts = Vec::new();
    let mut role = None;
    match by_type(&entry_type) {
        ByType::Message => {
            let m = f.message?;
            let r = string(m.role).unwrap_or_default();
            match by_role(&r) {
                ByRole::Summary => push_str(&mut texts, m.summary),
                ByRole::CommandOutput => {
                    push_str(&mut texts, m.command);
                    push_str(&mut texts, m.output);
                }
                ByRole::Content => push_content(&mut texts, m.content),
            }
            role = Some(r);
        }
        ByType::Content => push_content(&mut texts, f.content),
        ByType::Summary => push_str(&mut texts, f.summary),
        ByType::Label => push_str(&mut texts, f.label),
        ByType::Name => push_str(&mut texts, f.name),
        ByType::Nothing => {}
    }
    Some(EntryText {
        entry_type,
        id,
        timestamp,
        role,
        texts,
    })
}

/// Where a positive term matched: (text, first token, token count).
type Match = (usize, usize, usize);

/// The outcome of matching one entry.
#[derive(Debug)]
pub struct Matched {
    /// The relevance score (see [`score`]).
    pub score: f64,
    /// The texts' tokens.
    pub tokens: Vec<Tokens>,
    /// Where the positive terms matched.
    pub matches: Vec<Match>,
}

fn term_matches(term: &Term, fields: &[Vec<&str>], out: Option<&mut Vec<Match>>) -> usize {
    let mut count = 0;
    let mut out = out;
    for (f, toks) in fields.iter().enumerate() {
        for i in 0..toks.len() {
            if term.matches_at(toks, i) {
                count += 1;
                if let Some(o) = out.as_deref_mut() {
                    o.push((f, i, term.tokens.len()));
                }
            }
        }
    }
    count
}

/// The score of an entry: for each positive term `1 + ln(count)`, summed, divided by
/// `1 + ln(1 + n / 600)` for an entry of `n` bytes of searched text (about 100 words). It
/// depends on the entry alone, so every backend ranks alike.
pub fn score(counts: &[usize], n_bytes: usize) -> f64 {
    let tf: f64 = counts.iter().map(|&c| 1.0 + (c as f64).ln()).sum();
    #[allow(clippy::cast_precision_loss)]
    let norm = 1.0 + (1.0 + n_bytes as f64 / 600.0).ln();
    // Rounded, so a score printed and read back (JSON) compares equal.
    (tf / norm * 1e6).round() / 1e6
}

/// Matches `texts` against `query`: `None` unless every positive term and no excluded
/// term is found. `might(text)` may tell that a text holds none of the query's tokens
/// (a literal prefilter): such a text is not tokenised.
pub fn match_texts(
    query: &Query,
    texts: &[Cow<'_, str>],
    might: Option<&dyn Fn(&str) -> bool>,
) -> Option<Matched> {
    let tokens: Vec<Tokens> = texts
        .iter()
        .map(|t| {
            if might.is_none_or(|m| m(t)) {
                tokenize(t)
            } else {
                Tokens::default()
            }
        })
        .collect();
    let fields: Vec<Vec<&str>> = tokens
        .iter()
        .map(|ts| ts.list.iter().map(|t| ts.text(t)).collect())
        .collect();
    let mut matches = Vec::new();
    let mut counts = Vec::new();
    for term in &query.terms {
        if term.negated {
            if term_matches(term, &fields, None) > 0 {
                return None;
            }
        } else {
            let c = term_matches(term, &fields, Some(&mut matches));
            if c == 0 {
                return None;
            }
            counts.push(c);
        }
    }
    let n: usize = texts.iter().map(|t| t.len()).sum();
    Some(Matched {
        score: score(&counts, n),
        tokens,
        matches,
    })
}

/// Characters of context before the first match in a snippet.
const BEFORE: usize = 60;
/// The most characters of text a snippet shows.
const WIDTH: usize = 200;
/// What marks a match in a snippet.
pub const MARK: &str = "**";

/// A snippet of the text holding the first match: up to [`WIDTH`] characters around it,
/// white space and control characters folded to one space, `…` where cut, every match
/// in it between [`MARK`]s. Returns it with the (start, end) character offsets of the
/// marked text (between the marks).
pub fn snippet(texts: &[Cow<'_, str>], m: &Matched) -> (String, Vec<(usize, usize)>) {
    let Some(&(field, first, _)) = m.matches.iter().min() else {
        return (String::new(), Vec::new());
    };
    let text = &texts[field];
    let toks = &m.tokens[field].list;
    // Byte spans of the matches in this text, merged.
    let mut spans: Vec<(usize, usize)> = m
        .matches
        .iter()
        .filter(|(f, _, _)| *f == field)
        .map(|&(_, i, n)| (toks[i].start, toks[i + n - 1].end))
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (s, e) in spans {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    let at = toks[first].start;
    // Start BEFORE characters ahead of the match (at a character boundary).
    let start = text[..at]
        .char_indices()
        .rev()
        .nth(BEFORE - 1)
        .map_or(0, |(i, _)| i);
    let mut out = String::new();
    let mut marks = Vec::new();
    let mut n_chars = 0usize;
    if start > 0 {
        out.push('…');
        n_chars += 1;
    }
    let mut shown = 0usize;
    let mut space = false;
    let mut open: Option<usize> = None;
    let mut next = merged.iter().filter(|(_, e)| *e > start).peekable();
    for (i, c) in text[start..].char_indices() {
        let i = start + i;
        if let Some(o) = open {
            if merged.iter().any(|&(_, e)| e == i) {
                out.push_str(MARK);
                n_chars += MARK.len();
                marks.push((o, n_chars - MARK.len()));
                open = None;
            }
        }
        if shown >= WIDTH && open.is_none() {
            out.push('…');
            return (out, marks);
        }
        if c.is_whitespace() || c.is_control() {
            space = true;
            continue;
        }
        if space && shown > 0 {
            out.push(' ');
            n_chars += 1;
            shown += 1;
        }
        space = false;
        if open.is_none() {
            while next.peek().is_some_and(|(_, e)| *e <= i) {
                next.next();
            }
            if next.peek().is_some_and(|(s, _)| *s == i) {
                out.push_str(MARK);
                n_chars += MARK.len();
                open = Some(n_chars);
                next.next();
            }
        }
        out.push(c);
        n_chars += 1;
        shown += 1;
    }
    if let Some(o) = open {
        out.push_str(MARK);
        marks.push((o, n_chars));
    }
    (out, marks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(q: &str, texts: &[&str]) -> Option<(String, Vec<(usize, usize)>)> {
        let query = Query::parse(q).unwrap();
        let texts: Vec<Cow<'_, str>> = texts.iter().map(|s| Cow::Borrowed(*s)).collect();
        match_texts(&query, &texts, None).map(|m| snippet(&texts, &m))
    }

    #[test]
    fn matches_and_marks() {
        let (s, marks) = hit("retry", &["We chose a Retry with\nbackoff."]).unwrap();
        assert_eq!(s, "We chose a **Retry** with backoff.");
        let chars: Vec<char> = s.chars().collect();
        let marked: String = chars[marks[0].0..marks[0].1].iter().collect();
        assert_eq!(marked, "Retry");
        assert!(hit("retry -backoff", &["retry", "backoff"]).is_none());
        assert!(hit("\"retry backoff\"", &["retry", "backoff"]).is_none());
        assert!(hit("\"retry backoff\"", &["a retry backoff"]).is_some());
        assert!(hit("back*", &["backoff"]).is_some());
        assert!(hit("snake_case", &["use snake_case here"]).is_some());
        assert!(hit("case", &["use snake_case here"]).is_some());
        assert!(hit("東京", &["私は東京に行く"]).is_some());
        let (s, _) = hit("for", &["SELECT … FOR UPDATE"]).unwrap();
        assert_eq!(s, "SELECT … **FOR** UPDATE");
    }

    fn texts(line: &str) -> Option<Vec<String>> {
        entry_text(line).map(|e| e.texts.into_iter().map(Cow::into_owned).collect())
    }

    #[test]
    fn reads_odd_lines_as_the_field_by_field_reading_does() {
        let m = |content: &str| {
            format!(
                r#"{{"type":"message","id":"a","message":{{"role":"user","content":{content}}}}}"#
            )
        };
        // A block with a key written twice is skipped, the others read.
        assert_eq!(
            texts(&m(
                r#"[{"type":"text","text":"x","text":"y"},{"type":"text","text":"ok"}]"#
            )),
            Some(vec!["ok".to_owned()])
        );
        // Blocks that are not objects, texts that are not strings, escapes.
        assert_eq!(
            texts(&m(
                r#"[1,"s",[2],null,{"type":"text","text":5},{"type":"text","text":"a\"b\u00e9"}]"#
            )),
            Some(vec!["a\"bé".to_owned()])
        );
        // A message that is not an object: no entry; beside another type: ignored.
        assert!(texts(r#"{"type":"message","id":"a","message":"no"}"#).is_none());
        assert_eq!(
            texts(r#"{"type":"label","id":"a","message":{"role":1,"role":2},"label":"L"}"#),
            Some(vec!["L".to_owned()])
        );
        // The role read after the content, and a key written twice in the line.
        assert_eq!(
            texts(
                r#"{"type":"message","id":"a","message":{"summary":"S","role":"branch_summary"}}"#
            ),
            Some(vec!["S".to_owned()])
        );
        assert!(texts(r#"{"type":"label","id":"a","id":"b","label":"L"}"#).is_none());
        assert!(texts(r#"{"type":"label","id":7,"label":"L"}"#).is_none());
    }

    #[test]
    fn long_texts_are_cut_around_the_match() {
        let text = format!("{} needle {}", "a ".repeat(500), "b ".repeat(500));
        let (s, _) = hit("needle", &[&text]).unwrap();
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("**needle**"));
        assert!(s.chars().count() < 220);
    }
}
