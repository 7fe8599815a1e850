//! Reading an entry line's searched texts where they are, in its raw JSON bytes, to rank
//! it without decoding it: the scan's fast path for a term counted by [`super::count`].
//!
//! [`read`] walks the line once and gives, for each text [`super::entry::entry_text`]
//! would decode, where its escaped bytes are (a [`Span`]), with the entry's type, id,
//! time and role borrowed from the line. Counting a word in a span ([`Counter::count_raw`])
//! and measuring its decoded length need no copy: JSON's two-byte escapes (`\"`, `\\`,
//! `\/`, `\b`, `\f`, `\n`, `\r`, `\t`) stand for characters that are never part of a
//! token, each one byte decoded, so a token of the decoded text is in the span as is and
//! the byte before or after an escape is a word boundary.
//!
//! The walk is sure only of lines this library writes: one object, keys written once,
//! no white space but spaces, no `\u` escape, no control byte, numbers any reading takes.
//! Any other line (and any value whose decoding the walk would have to guess: a number
//! read as text that could overflow, a tool argument that is not a plain integer or
//! string, an argument object with a key written twice) gives `None`, and the caller
//! decodes the line ([`super::entry::entry_text`]), which decides. So the fast path
//! changes no answer; a test compares both readings on odd lines.
//!
//! [`Counter::count_raw`]: super::count::Counter::count_raw

/// A searched text in a line: its raw bytes `line[start..end]` (a string's, between its
/// quotes; a number's digits), holding `escapes` two-byte escapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Where its bytes start in the line.
    pub start: usize,
    /// Where they end.
    pub end: usize,
    /// How many two-byte escapes they hold.
    pub escapes: usize,
}

impl Span {
    /// The length in bytes of the decoded text.
    pub fn decoded_len(&self) -> usize {
        self.end - self.start - self.escapes
    }
}

/// The facts of an entry line read in place: what [`super::entry::EntryText`] holds, the
/// texts as [`Span`]s (in [`Scratch::spans`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawEntry<'a> {
    /// The entry's `type`.
    pub entry_type: &'a str,
    /// Its `id`.
    pub id: &'a str,
    /// Its `timestamp` as written (`""` when it has none).
    pub timestamp: &'a str,
    /// The message's role, for a `message` entry (`""` when it has none).
    pub role: Option<&'a str>,
}

/// Which field a span was read from; the entry's type and role pick the ones searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    // A content block's fields (kept by the block's type).
    Text,
    Thinking,
    ToolName,
    ToolArg,
    // A message's.
    Content,
    Summary,
    Command,
    Output,
    // The line's.
    LineContent,
    LineSummary,
    Label,
    Name,
}

/// The vectors one walk fills, kept by a scan worker so a line allocates nothing.
#[derive(Debug, Default)]
pub struct Scratch {
    tagged: Vec<(Tag, Span)>,
    keys: Vec<(usize, usize)>,
    /// The searched texts of the last line [`read`], in no particular order.
    pub spans: Vec<Span>,
}

/// How deep values may nest (serde_json refuses past 128).
const MAX_DEPTH: usize = 100;
/// The longest number read as text that surely reads as a float (no overflow).
const MAX_TEXT_NUMBER: usize = 300;
/// The longest integer a tool argument's decoding surely writes back as written.
const MAX_PLAIN_INTEGER: usize = 18;

/// A value read where a text may be (a `Str` of the decoded reading).
#[derive(Debug, Clone, Copy)]
enum TextValue {
    /// A string.
    Str(Span),
    /// Anything else (no text).
    Other,
}

/// Bit of each field of a line or message object, to find a key written twice.
mod bit {
    pub const TYPE: u16 = 1;
    pub const ID: u16 = 1 << 1;
    pub const TIMESTAMP: u16 = 1 << 2;
    pub const MESSAGE: u16 = 1 << 3;
    pub const CONTENT: u16 = 1 << 4;
    pub const SUMMARY: u16 = 1 << 5;
    pub const LABEL: u16 = 1 << 6;
    pub const NAME: u16 = 1 << 7;
    pub const ROLE: u16 = 1 << 8;
    pub const COMMAND: u16 = 1 << 9;
    pub const OUTPUT: u16 = 1 << 10;
    pub const TEXT: u16 = 1 << 11;
    pub const THINKING: u16 = 1 << 12;
    pub const ARGUMENTS: u16 = 1 << 13;
}

/// The offset in `b` of its first quote, backslash or control byte: where a string's
/// plain run stops. Sixteen bytes at a time (SSE2, which every x86-64 has), thirty-two
/// on a processor with AVX2 for a long run: most strings of a line are short keys and
/// values, for which a call to `memchr` costs more than the search.
#[cfg(target_arch = "x86_64")]
fn stop(b: &[u8]) -> Option<usize> {
    if b.len() >= 64 && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2 (checked just above).
        return unsafe { stop_avx2(b) };
    }
    stop_sse2(b)
}

#[cfg(target_arch = "x86_64")]
fn stop_sse2(b: &[u8]) -> Option<usize> {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    let mut i = 0;
    // SAFETY: SSE2 is in every x86-64 processor (the target's baseline), and each load
    // reads `b[i..i + 16]`, inside `b` (unaligned loads).
    unsafe {
        let quote = _mm_set1_epi8(b'"'.cast_signed());
        let backslash = _mm_set1_epi8(b'\\'.cast_signed());
        let control = _mm_set1_epi8(0x1F);
        while i + 16 <= b.len() {
            let x = _mm_loadu_si128(b.as_ptr().add(i).cast::<__m128i>());
            let hit = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                // A byte at most 0x1F is its own minimum with 0x1F.
                _mm_cmpeq_epi8(_mm_min_epu8(x, control), x),
            );
            let mask = _mm_movemask_epi8(hit).cast_unsigned();
            if mask != 0 {
                return Some(i + mask.trailing_zeros() as usize);
            }
            i += 16;
        }
    }
    stop_scalar(&b[i..]).map(|k| i + k)
}

/// [`stop_sse2`] thirty-two bytes at a time.
///
/// # Safety
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn stop_avx2(b: &[u8]) -> Option<usize> {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8,
    };
    let quote = _mm256_set1_epi8(b'"'.cast_signed());
    let backslash = _mm256_set1_epi8(b'\\'.cast_signed());
    let control = _mm256_set1_epi8(0x1F);
    let mut i = 0;
    while i + 32 <= b.len() {
        // SAFETY: the load reads `b[i..i + 32]`, inside `b` (unaligned).
        let x = unsafe { _mm256_loadu_si256(b.as_ptr().add(i).cast::<__m256i>()) };
        let hit = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi8(x, quote), _mm256_cmpeq_epi8(x, backslash)),
            _mm256_cmpeq_epi8(_mm256_min_epu8(x, control), x),
        );
        let mask = _mm256_movemask_epi8(hit).cast_unsigned();
        if mask != 0 {
            return Some(i + mask.trailing_zeros() as usize);
        }
        i += 32;
    }
    stop_sse2(&b[i..]).map(|k| i + k)
}

/// [`stop`] elsewhere: a byte at a time.
#[cfg(not(target_arch = "x86_64"))]
fn stop(b: &[u8]) -> Option<usize> {
    stop_scalar(b)
}

fn stop_scalar(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20)
}

/// Reads the entry `line` (sessiontree's dialect) in place, its texts into
/// `scratch.spans`; `None` when the line is one to decode (see the module doc).
pub fn read<'a>(line: &'a str, scratch: &mut Scratch) -> Option<RawEntry<'a>> {
    scratch.tagged.clear();
    scratch.spans.clear();
    let mut w = Walk {
        b: line.as_bytes(),
        i: 0,
        scratch,
    };
    let top = w.line()?;
    w.ws();
    if w.i != w.b.len() {
        return None;
    }
    let text = |v: Option<TextValue>| -> Option<Option<&'a str>> {
        match v {
            Some(TextValue::Str(s)) if s.escapes == 0 => Some(Some(&line[s.start..s.end])),
            Some(TextValue::Str(_)) => None,
            Some(TextValue::Other) | None => Some(None),
        }
    };
    let entry_type = text(top.ty)??;
    let id = text(top.id)??;
    let timestamp = text(top.timestamp)?.unwrap_or("");
    let mut role = None;
    let keep: &[Tag] = match entry_type {
        "message" => {
            let m = top.message?;
            let r = text(m)?.unwrap_or("");
            role = Some(r);
            match r {
                "compaction_summary" | "branch_summary" => &[Tag::Summary],
                "bash_execution" => &[Tag::Command, Tag::Output],
                _ => &[Tag::Content],
            }
        }
        "custom_message" => &[Tag::LineContent],
        "compaction" | "branch_summary" => &[Tag::LineSummary],
        "label" => &[Tag::Label],
        "session_info" => &[Tag::Name],
        _ => &[],
    };
    let Scratch { tagged, spans, .. } = &mut *w.scratch;
    spans.extend(
        tagged
            .iter()
            .filter(|(t, _)| keep.contains(t))
            .map(|&(_, s)| s),
    );
    Some(RawEntry {
        entry_type,
        id,
        timestamp,
        role,
    })
}

/// The fields of the line object that decide what is searched.
struct Top {
    ty: Option<TextValue>,
    id: Option<TextValue>,
    timestamp: Option<TextValue>,
    /// The message's role, when the line has a message object.
    message: Option<Option<TextValue>>,
}

struct Walk<'a, 's> {
    b: &'a [u8],
    i: usize,
    scratch: &'s mut Scratch,
}

impl<'a> Walk<'a, '_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }

    /// A key's bytes; a key with an escape is none of the fields read (it holds a quote,
    /// a backslash, a slash or a control character).
    fn key(&self, k: Span) -> &'a [u8] {
        if k.escapes > 0 {
            return b"";
        }
        &self.b[k.start..k.end]
    }

    /// Reads byte `c` (after any spaces).
    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    /// A string (its opening quote at `i`).
    fn string(&mut self) -> Option<Span> {
        if self.peek() != Some(b'"') {
            return None;
        }
        let start = self.i + 1;
        let mut at = start;
        let mut escapes = 0;
        loop {
            let k = at + stop(self.b.get(at..)?)?;
            match self.b[k] {
                b'"' => {
                    self.i = k + 1;
                    return Some(Span {
                        start,
                        end: k,
                        escapes,
                    });
                }
                b'\\' => {}
                // A control byte, which JSON refuses in a string.
                _ => return None,
            }
            // A `\u` escape is refused too (see the module doc).
            match self.b.get(k + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                _ => return None,
            }
            escapes += 1;
            at = k + 2;
        }
    }

    fn digits(&mut self) -> usize {
        let from = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        self.i - from
    }

    /// A number (JSON's grammar): its span and whether it is an integer.
    fn number(&mut self) -> Option<(Span, bool)> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.i += 1;
            integer = false;
            if self.digits() == 0 {
                return None;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            integer = false;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        let span = Span {
            start,
            end: self.i,
            escapes: 0,
        };
        Some((span, integer))
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if self.b.get(self.i..self.i + word.len())? == word {
            self.i += word.len();
            Some(())
        } else {
            None
        }
    }

    /// Reads past any value (checked as JSON).
    fn skip(&mut self, depth: usize) -> Option<()> {
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => self.each_key(depth, |w, _, depth| w.skip(depth)),
            b'[' => self.each_item(depth, |w, depth| w.skip(depth)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(drop),
        }
    }

    /// A value where the decoded reading takes a text (`Str`): a string, or anything
    /// else read past; `None` for a number that reading might refuse (an overflow).
    fn text(&mut self, depth: usize) -> Option<TextValue> {
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(TextValue::Str),
            b'-' | b'0'..=b'9' => {
                let (s, _) = self.number()?;
                let b = &self.b[s.start..s.end];
                if b.len() > MAX_TEXT_NUMBER || b.iter().any(|&c| c == b'e' || c == b'E') {
                    return None;
                }
                Some(TextValue::Other)
            }
            _ => self.skip(depth).map(|()| TextValue::Other),
        }
    }

    /// A text field: its span kept under `tag` when it is a string.
    fn tagged_text(&mut self, depth: usize, tag: Tag) -> Option<()> {
        if let TextValue::Str(s) = self.text(depth)? {
            self.scratch.tagged.push((tag, s));
        }
        Some(())
    }

    /// An object (at `i`): `f(walk, key, depth)` reads each key's value.
    fn each_key(
        &mut self,
        depth: usize,
        mut f: impl FnMut(&mut Self, Span, usize) -> Option<()>,
    ) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.eat(b'{')?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Some(());
        }
        loop {
            self.ws();
            let k = self.string()?;
            self.eat(b':')?;
            f(self, k, depth + 1)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An array (at `i`): `f(walk, depth)` reads each item.
    fn each_item(
        &mut self,
        depth: usize,
        mut f: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.eat(b'[')?;
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Some(());
        }
        loop {
            f(self, depth + 1)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// The line object.
    fn line(&mut self) -> Option<Top> {
        let mut top = Top {
            ty: None,
            id: None,
            timestamp: None,
            message: None,
        };
        let mut seen = 0u16;
        self.each_key(0, |w, key, depth| {
            let field = match w.key(key) {
                b"type" => bit::TYPE,
                b"id" => bit::ID,
                b"timestamp" => bit::TIMESTAMP,
                b"message" => bit::MESSAGE,
                b"content" => bit::CONTENT,
                b"summary" => bit::SUMMARY,
                b"label" => bit::LABEL,
                b"name" => bit::NAME,
                _ => return w.skip(depth),
            };
            if seen & field != 0 {
                return None;
            }
            seen |= field;
            match field {
                bit::TYPE => top.ty = Some(w.text(depth)?),
                bit::ID => top.id = Some(w.text(depth)?),
                bit::TIMESTAMP => top.timestamp = Some(w.text(depth)?),
                bit::MESSAGE => {
                    w.ws();
                    match w.peek()? {
                        b'{' => top.message = Some(w.fields(depth, false)?),
                        b'n' => w.literal(b"null")?,
                        // A message read as a list of fields, or refused: decoded.
                        _ => return None,
                    }
                }
                bit::CONTENT => w.content(depth, Tag::LineContent)?,
                bit::SUMMARY => w.tagged_text(depth, Tag::LineSummary)?,
                bit::LABEL => w.tagged_text(depth, Tag::Label)?,
                _ => w.tagged_text(depth, Tag::Name)?,
            }
            Some(())
        })?;
        Some(top)
    }

    /// A message's or a content block's fields (the object at `i`); gives its role. In a
    /// block, the texts its type does not search are dropped.
    fn fields(&mut self, depth: usize, block: bool) -> Option<Option<TextValue>> {
        let mut seen = 0u16;
        let mut ty = None;
        let mut role = None;
        let from = self.scratch.tagged.len();
        self.each_key(depth, |w, key, depth| {
            let field = match w.key(key) {
                b"type" => bit::TYPE,
                b"role" => bit::ROLE,
                b"content" => bit::CONTENT,
                b"summary" => bit::SUMMARY,
                b"command" => bit::COMMAND,
                b"output" => bit::OUTPUT,
                b"text" => bit::TEXT,
                b"thinking" => bit::THINKING,
                b"name" => bit::NAME,
                b"arguments" => bit::ARGUMENTS,
                _ => return w.skip(depth),
            };
            if seen & field != 0 {
                return None;
            }
            seen |= field;
            match (field, block) {
                (bit::TYPE, _) => ty = Some(w.text(depth)?),
                (bit::ROLE, _) => role = Some(w.text(depth)?),
                (bit::CONTENT, false) => w.content(depth, Tag::Content)?,
                (bit::SUMMARY, false) => w.tagged_text(depth, Tag::Summary)?,
                (bit::COMMAND, false) => w.tagged_text(depth, Tag::Command)?,
                (bit::OUTPUT, false) => w.tagged_text(depth, Tag::Output)?,
                (bit::TEXT, true) => w.tagged_text(depth, Tag::Text)?,
                (bit::THINKING, true) => w.tagged_text(depth, Tag::Thinking)?,
                (bit::NAME, true) => w.tagged_text(depth, Tag::ToolName)?,
                (bit::ARGUMENTS, true) => w.scalars(depth)?,
                (bit::ARGUMENTS | bit::CONTENT, _) => w.skip(depth)?,
                _ => {
                    w.text(depth)?;
                }
            }
            Some(())
        })?;
        if block {
            let kept: &[Tag] = match ty {
                Some(TextValue::Str(s)) => match &self.b[s.start..s.end] {
                    b"text" => &[Tag::Text],
                    b"thinking" => &[Tag::Thinking],
                    b"tool_call" => &[Tag::ToolName, Tag::ToolArg],
                    _ => &[],
                },
                _ => &[],
            };
            let tagged = &mut self.scratch.tagged;
            let mut to = from;
            for k in from..tagged.len() {
                if kept.contains(&tagged[k].0) {
                    tagged[to] = tagged[k];
                    to += 1;
                }
            }
            tagged.truncate(to);
        }
        Some(role)
    }

    /// A `content` value: a string's span, or the searched texts of a list of blocks,
    /// kept under `tag`; anything else has no text.
    fn content(&mut self, depth: usize, tag: Tag) -> Option<()> {
        self.ws();
        match self.peek()? {
            b'"' => {
                let s = self.string()?;
                self.scratch.tagged.push((tag, s));
            }
            b'[' => {
                let from = self.scratch.tagged.len();
                self.each_item(depth, |w, depth| {
                    w.ws();
                    if w.peek()? == b'{' {
                        w.fields(depth, true).map(drop)
                    } else {
                        w.skip(depth)
                    }
                })?;
                for t in &mut self.scratch.tagged[from..] {
                    t.0 = tag;
                }
            }
            _ => self.skip(depth)?,
        }
        Some(())
    }

    /// A tool call's arguments: every string and number inside, never a key. A number
    /// other than a plain integer, or an object with a key written twice or escaped (the
    /// decoded reading keeps the last), sends the line to be decoded.
    fn scalars(&mut self, depth: usize) -> Option<()> {
        self.ws();
        match self.peek()? {
            b'"' => {
                let s = self.string()?;
                self.scratch.tagged.push((Tag::ToolArg, s));
            }
            b'{' => {
                let from = self.scratch.keys.len();
                self.each_key(depth, |w, key, depth| {
                    let b = w.b;
                    let name = &b[key.start..key.end];
                    if key.escapes > 0
                        || w.scratch.keys[from..]
                            .iter()
                            .any(|&(s, e)| &b[s..e] == name)
                    {
                        return None;
                    }
                    w.scratch.keys.push((key.start, key.end));
                    w.scalars(depth)
                })?;
                self.scratch.keys.truncate(from);
            }
            b'[' => self.each_item(depth, |w, depth| w.scalars(depth))?,
            b'-' | b'0'..=b'9' => {
                let (s, integer) = self.number()?;
                let b = &self.b[s.start..s.end];
                // `-0` reads as 0.
                if !integer || b.len() > MAX_PLAIN_INTEGER || b.starts_with(b"-0") {
                    return None;
                }
                self.scratch.tagged.push((Tag::ToolArg, s));
            }
            _ => self.skip(depth)?,
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::count::{counters, Finder};
    use super::super::entry::entry_text;
    use super::super::query::Query;
    use super::*;

    /// The texts of a line read in place, decoded, sorted (the in-place reading keeps no
    /// order); `None` when it sends the line to be decoded.
    fn in_place(line: &str) -> Option<(RawEntry<'_>, Vec<String>)> {
        let mut scratch = Scratch::default();
        let e = read(line, &mut scratch)?;
        let mut texts: Vec<String> = scratch
            .spans
            .iter()
            .map(|s| {
                let raw = &line[s.start..s.end];
                let text = if line.as_bytes()[s.start.saturating_sub(1)] == b'"' {
                    serde_json::from_str::<String>(&format!("\"{raw}\"")).unwrap()
                } else {
                    raw.to_owned() // a number
                };
                assert_eq!(text.len(), s.decoded_len(), "{raw}");
                text
            })
            .collect();
        texts.sort();
        Some((e, texts))
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
                r#"{"type":"message","id":"b","message":{"role":"assistant","content":[{"type":"thinking","thinking":"t\tx","signature":"abc"},{"type":"text","text":"T"},{"type":"tool_call","id":"c","arguments":{"path":"a/b","n":[1,-2,{"deep":"x","z":0}],"f":true,"g":null},"name":"bash"},{"type":"image","data":"merge","mime_type":"p"},"str",5,null,[1]]}}"#,
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
            (r#"{"type":"label","id":"m","label":15,"x":[1e400]}"#, true),
            // A number read as text that could overflow: decoded.
            (r#"{"type":"label","id":"m2","label":1.5e3}"#, false),
            (
                r#"{"type":"message","id":"n","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":1e5}]}}"#,
                false,
            ),
            // Lines the walk leaves to decoding.
            (r#"{"type":"label","id":"o","label":"caf\u00e9"}"#, false),
            (
                "{\"type\":\"label\",\t\"id\":\"p\",\"label\":\"tab\"}",
                false,
            ),
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
                r#"{"type":"message","id":"u","message":{"role":"assistant","content":[{"type":"tool_call","name":"n","arguments":{"a":1.5}}]}}"#,
                false,
            ),
            (
                r#"{"type":"message","id":"v","message":{"role":"assistant","content":[{"type":"tool_call","name":"n","arguments":[-0]}]}}"#,
                false,
            ),
            (
                r#"{"type":"message","id":"w","message":"not an object"}"#,
                false,
            ),
            (r#"{"type":"message","id":"x"}"#, false),
            (r#"{"type":"label","id":7,"label":"L"}"#, false),
            (r#"{"type":"label","id":"y\"q","label":"L"}"#, false),
            (r#"{"type":"label","id":"z","label":"L"} trailing"#, false),
            (r#"{"type":"label","id":"z2","label":"L""#, false),
            (r#"["label","z3"]"#, false),
            (r#"{"type":"label","id":"z4","label":"L","n":01}"#, false),
        ]);
    }

    #[test]
    fn nesting_past_the_limit_is_decoded() {
        let deep = format!(
            r#"{{"type":"label","id":"a","label":"L","x":{}{}}}"#,
            "[".repeat(150),
            "]".repeat(150)
        );
        assert!(in_place(&deep).is_none());
    }

    fn counter(q: &str) -> super::super::count::Counter {
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
            r#"\u00e9merge"#,
            r#"merge\n"#,
            r#"émerge mergeé merge→ «merge»"#,
            r#"nothing \nothing \\nothing"#,
            r#"\"quoted\" \"merge\""#,
            "",
        ];
        for q in [
            "merge", "merg*", "nothing", "nothing*", "quoted", "café", "b",
        ] {
            let c = counter(q);
            for raw in cases {
                if raw.contains("\\u") {
                    continue; // never read in place
                }
                let text = serde_json::from_str::<String>(&format!("\"{raw}\"")).unwrap();
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
