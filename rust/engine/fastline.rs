//! The fast path of the line parser: one pass over an entry line that validates it as JSON
//! and captures the same fields as serde does (`line::RawEntry`), without serde's
//! per-token overhead.
//!
//! It accepts a subset of what serde accepts, and for every line it accepts it captures
//! exactly what serde would. Anything it is unsure of it declines (`None`), and the line
//! goes to serde, whose error messages the load report quotes: malformed JSON, a key with
//! an escape, a duplicate key where serde refuses one, a `message` that is not an object,
//! `content` that is neither a string nor an array of objects, or nesting deeper than
//! `max_depth`. Its string rules are serde's strictest (no control characters, valid
//! escapes, paired `\u` surrogates) everywhere, which only declines more lines.
//!
//! Strings, most of a line's bytes, are scanned 64 bytes at a time from three masks (quotes,
//! backslashes, control characters; AVX2 where the CPU has it, SSE2 or a plain loop
//! otherwise): escaped characters follow from the backslash mask without a branch per
//! escape, the string ends at the first quote that is not escaped. The same scanner checks
//! small nested objects against their model type in one pass ([`conforms`]).

use std::borrow::Cow;

use crate::engine::dialect::{self, InPlace, PiValues};
use crate::engine::line::{parse_usage, RawCost, RawEntry, RawUsage};
use crate::engine::model::{self, FieldDef, FieldKind, TypeDef};
use crate::engine::schema::{Fields, MessageFields, RawObject, Shape};

/// The deepest line the fast path takes, far below serde's recursion limit (128), so a
/// line it accepts never hits that limit on the serde side either.
pub(crate) const MAX_DEPTH: usize = 100;

/// Captures an entry line (UTF-8, no newline) as serde would; `None` leaves it to serde.
pub(crate) fn capture(text: &str, max_depth: usize) -> Option<RawEntry<'_>> {
    let mut s = Scanner::new(text, max_depth.min(MAX_DEPTH));
    s.whole_entry()
}

/// Captures a v2 or v3 pi line in place, as [`capture`] would capture the line
/// `dialect::scan_to_native` makes of it: keys and the values pi spells its own way are
/// read as ours through the renaming pass's table (application data — what is skipped —
/// is not renamed, and is not needed), `usage` is read from its renamed text. `None`
/// leaves the line to that pass: anything the table declines, or any doubt.
pub(crate) fn capture_pi(text: &str, max_depth: usize) -> Option<RawEntry<'_>> {
    let mut s = Scanner::new(text, max_depth.min(MAX_DEPTH));
    s.pi = true;
    s.whole_entry()
}

impl<'a> Scanner<'a> {
    /// An entry line: the object, with nothing but whitespace around it.
    fn whole_entry(&mut self) -> Option<RawEntry<'a>> {
        self.ws();
        let entry = self.entry()?;
        self.ws();
        (self.pos == self.b.len()).then_some(entry)
    }
}

/// The fields of a JSON object (valid JSON text, nothing else) as serde's `RawObject`
/// capture has them; `None` leaves it to serde.
pub(crate) fn object(text: &str) -> Option<Fields<'_>> {
    let mut s = Scanner::new(text, MAX_DEPTH);
    s.ws();
    if s.peek()? != b'{' {
        return None;
    }
    let fields = s.object()?;
    s.ws();
    (s.pos == s.b.len()).then_some(fields)
}

/// True when `text` (valid JSON) is an object that `schema::check_object` accepts as a
/// `def` (flat types only: scalars, sets, nested objects); `false` when unsure.
///
/// One pass, nothing captured: for the small nested objects every entry has (`usage`,
/// `cost`), which `check_object` would capture and look up field by field.
pub(crate) fn conforms(text: &str, def: &TypeDef) -> bool {
    let mut s = Scanner::new(text, MAX_DEPTH);
    s.ws();
    let ok = s.conforms(def).is_some();
    s.ws();
    ok && s.pos == s.b.len()
}

/// The field of a usage's `cost` that its sums read (`UsageSums::cost_total`).
const COST_TOTAL: &str = "total";

/// A `usage` object's numbers as [`crate::engine::line::parse_usage`] sums them, read in
/// one pass; None for anything but an object of plain keys whose known fields are finite
/// numbers and whose `cost` is null or such an object (serde then decides, as before).
pub(crate) fn usage_numbers(text: &str) -> Option<RawUsage> {
    let mut s = Scanner::new(text, MAX_DEPTH);
    s.ws();
    let mut usage = RawUsage::default();
    // Known keys seen: serde refuses a duplicate, so such an object is left to it.
    let mut seen = 0u32;
    s.open(b'{')?;
    if !s.empty(b'}')? {
        loop {
            let key = s.key()?;
            // The model table's fields of `usage`: its token counts, then `cost`.
            let known = model::USAGE.fields.iter().position(|f| f.key == key);
            if let Some(i) = known {
                if seen & 1 << i != 0 {
                    return None;
                }
                seen |= 1 << i;
            }
            match known {
                Some(i) if matches!(model::USAGE.fields[i].kind, FieldKind::Nested(_)) => {
                    usage.cost = s.cost()?;
                }
                Some(i) => *usage.tokens_mut().into_iter().nth(i)? = s.float()?,
                None => s.skip()?,
            }
            if !s.next_or_close(b'}')? {
                break;
            }
        }
    }
    s.ws();
    (s.pos == s.b.len()).then_some(usage)
}

struct Scanner<'a> {
    text: &'a str,
    b: &'a [u8],
    pos: usize,
    depth: usize,
    max_depth: usize,
    /// A pi line read in place ([`capture_pi`]).
    pi: bool,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str, max_depth: usize) -> Self {
        Scanner {
            text,
            b: text.as_bytes(),
            pos: 0,
            depth: 0,
            max_depth,
            pi: false,
        }
    }
}

/// What a container being skipped is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Object,
    Array,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// Skips JSON whitespace.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Consumes `c` or fails.
    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.pos += 1)
    }

    /// Consumes an opening bracket, one level deeper.
    fn open(&mut self, c: u8) -> Option<()> {
        self.eat(c)?;
        self.depth += 1;
        (self.depth <= self.max_depth).then_some(())
    }

    /// After a member or item: `,` (then whitespace) gives `true`, the closing `close`
    /// gives `false` (one level up).
    fn next_or_close(&mut self, close: u8) -> Option<bool> {
        self.ws();
        match self.peek()? {
            b',' => {
                self.pos += 1;
                self.ws();
                Some(true)
            }
            c if c == close => {
                self.pos += 1;
                self.depth -= 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// After an opening bracket: whitespace, then `true` if the container is empty (and
    /// closed), `false` if a member or item follows.
    fn empty(&mut self, close: u8) -> Option<bool> {
        self.ws();
        if self.peek()? == close {
            self.pos += 1;
            self.depth -= 1;
            return Some(true);
        }
        Some(false)
    }

    /// A string at the cursor: its contents' span and whether it has an escape.
    fn string(&mut self) -> Option<(usize, usize, bool)> {
        self.eat(b'"')?;
        let start = self.pos;
        let (end, escaped) = string_end(self.b, start)?;
        self.pos = end + 1;
        Some((start, end, escaped))
    }

    /// An object key without escapes (serde compares decoded keys; these are their own
    /// text), then the colon and whitespace.
    fn key(&mut self) -> Option<&'a str> {
        let (a, e, escaped) = self.string()?;
        if escaped {
            return None;
        }
        self.ws();
        self.eat(b':')?;
        self.ws();
        self.text.get(a..e)
    }

    /// [`Scanner::key`] as ours, and the values of it spelled pi's way, if it has some
    /// (a pi line only).
    fn named_key(&mut self) -> Option<(&'a str, Option<PiValues>)> {
        let key = self.key()?;
        if !self.pi {
            return Some((key, None));
        }
        let found = dialect::in_place_key(key)?;
        Some((found.native.unwrap_or(key), found.values))
    }

    /// A member's raw value; in a pi line, a string that pi spells its own way (one of
    /// `values`, its key's) is read as ours.
    fn member_value(&mut self, values: Option<PiValues>) -> Option<&'a str> {
        let Some(values) = values.filter(|_| self.peek() == Some(b'"')) else {
            return self.raw();
        };
        let (a, e, escaped) = self.string()?;
        if escaped {
            return None;
        }
        match values.read(self.text.get(a..e)?) {
            InPlace::Keep => self.text.get(a - 1..=e),
            InPlace::Rename(quoted) => Some(quoted),
            InPlace::Decline => None,
        }
    }

    /// Any value, validated; returns its raw text.
    fn raw(&mut self) -> Option<&'a str> {
        let start = self.pos;
        self.skip()?;
        self.text.get(start..self.pos)
    }

    /// Skips any value, validating it, without recursion.
    fn skip(&mut self) -> Option<()> {
        // Open containers, innermost last; bounded by `max_depth`.
        let mut stack: Vec<Open> = Vec::new();
        loop {
            // A value.
            match self.peek()? {
                b'"' => {
                    self.string()?;
                }
                b'{' => {
                    self.open(b'{')?;
                    if !self.empty(b'}')? {
                        stack.push(Open::Object);
                        self.member_key()?;
                        continue;
                    }
                }
                b'[' => {
                    self.open(b'[')?;
                    if !self.empty(b']')? {
                        stack.push(Open::Array);
                        continue;
                    }
                }
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                b'-' | b'0'..=b'9' => self.number()?,
                _ => return None,
            }
            // What follows it: the next member or item, or closing brackets.
            loop {
                let Some(&top) = stack.last() else {
                    return Some(());
                };
                let close = if top == Open::Object { b'}' } else { b']' };
                if self.next_or_close(close)? {
                    if top == Open::Object {
                        self.member_key()?;
                    }
                    break;
                }
                stack.pop();
            }
        }
    }

    /// The key of a member of a skipped object (any valid string), colon, whitespace.
    fn member_key(&mut self) -> Option<()> {
        self.string()?;
        self.ws();
        self.eat(b':')?;
        self.ws();
        Some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.pos + word.len();
        (self.b.get(self.pos..end)? == word).then(|| self.pos = end)
    }

    fn digits(&mut self) -> Option<()> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        (self.pos > start).then_some(())
    }

    /// A number: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek()? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => self.digits()?,
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.digits()?;
        }
        Some(())
    }

    /// A finite number at the cursor, as f64.
    fn float(&mut self) -> Option<f64> {
        let start = self.pos;
        self.number()?;
        let v: f64 = self.text.get(start..self.pos)?.parse().ok()?;
        v.is_finite().then_some(v)
    }

    /// A usage's `cost`: null, or an object whose `total` (if any) is a finite number.
    fn cost(&mut self) -> Option<Option<RawCost>> {
        if self.peek()? == b'n' {
            return (self.raw()? == "null").then_some(None);
        }
        let mut cost = RawCost::default();
        let mut seen = false;
        self.open(b'{')?;
        if !self.empty(b'}')? {
            loop {
                if self.key()? == COST_TOTAL {
                    if std::mem::replace(&mut seen, true) {
                        return None;
                    }
                    cost.total = self.float()?;
                } else {
                    self.skip()?;
                }
                if !self.next_or_close(b'}')? {
                    break;
                }
            }
        }
        Some(Some(cost))
    }

    /// The top-level object, captured as `RawEntry` is by serde.
    fn entry(&mut self) -> Option<RawEntry<'a>> {
        self.open(b'{')?;
        let mut raw = RawEntry::default();
        let mut kind = None;
        if self.empty(b'}')? {
            return None; // no `type`
        }
        loop {
            let (key, values) = self.named_key()?;
            match key {
                "type" => {
                    let (a, e, escaped) = self.string()?;
                    if kind.is_some() || escaped {
                        return None;
                    }
                    let name = self.text.get(a..e)?;
                    kind = Some(match values {
                        None => name,
                        Some(values) => match values.read(name) {
                            InPlace::Keep => name,
                            // Entry types are spelled alike (a block's name here is left
                            // to the translation), and some take it in any case.
                            InPlace::Rename(..) | InPlace::Decline => return None,
                        },
                    });
                }
                // An entry's own usage (rare in pi's files) takes the renaming pass.
                "usage" if self.pi => return None,
                "message" => {
                    if raw.message.is_some() || self.peek()? != b'{' {
                        return None;
                    }
                    raw.message = Some(Shape::Object(self.message()?));
                }
                _ => {
                    let value = self.member_value(values)?;
                    if let Some(slot) = raw.raw_slot(key) {
                        if slot.is_some() {
                            return None; // serde: "duplicate field"
                        }
                        *slot = Some(value);
                    }
                }
            }
            if !self.next_or_close(b'}')? {
                break;
            }
        }
        raw.kind = Cow::Borrowed(kind?);
        Some(raw)
    }

    /// A message object: `content` visited, every other field raw.
    fn message(&mut self) -> Option<MessageFields<'a>> {
        self.open(b'{')?;
        let mut out = MessageFields {
            fields: Vec::with_capacity(8),
            content: None,
            usage: None,
        };
        if self.empty(b'}')? {
            return Some(out);
        }
        loop {
            let (key, values) = self.named_key()?;
            if key == "content" {
                if out.content.is_some() {
                    return None;
                }
                out.content = Some(self.content()?);
            } else {
                if out.fields.iter().any(|(k, _)| k == key) || out.usage.is_some() && key == "usage"
                {
                    return None;
                }
                let value = self.member_value(values)?;
                if self.pi && key == "usage" && value != "null" {
                    // pi's usage keys, renamed in a copy of this small object, checked
                    // there as the model's `usage` and summed.
                    let renamed = dialect::rename_fragment(value)?;
                    if !conforms(&renamed, &model::USAGE) {
                        return None;
                    }
                    out.usage = Some(parse_usage(Some(&renamed))?);
                } else {
                    out.fields.push((Cow::Borrowed(key), value));
                }
            }
            if !self.next_or_close(b'}')? {
                return Some(out);
            }
        }
    }

    /// A message's `content`: a string, or an array of objects (blocks) captured raw.
    fn content(&mut self) -> Option<Shape<'a, RawObject<'a>>> {
        match self.peek()? {
            b'"' => {
                self.string()?;
                Some(Shape::Str)
            }
            b'[' => {
                self.open(b'[')?;
                let mut items = Vec::new();
                if self.empty(b']')? {
                    return Some(Shape::Array(items));
                }
                loop {
                    items.push(Shape::Object(RawObject(self.object()?)));
                    if !self.next_or_close(b']')? {
                        return Some(Shape::Array(items));
                    }
                }
            }
            _ => None,
        }
    }

    /// [`conforms`] at the cursor.
    fn conforms(&mut self, def: &TypeDef) -> Option<()> {
        // Fields seen, by their place in `def`; other keys seen (a duplicate of any key
        // makes `check_object`'s capture fail).
        const OTHERS: usize = 8;
        if def.fields.len() > 32 {
            return None;
        }
        let mut seen = 0u32;
        let mut others: [&str; OTHERS] = [""; OTHERS];
        let mut n_others = 0;
        self.open(b'{')?;
        if !self.empty(b'}')? {
            loop {
                let key = self.key()?;
                match def.fields.iter().position(|f| f.key == key) {
                    Some(i) => {
                        if seen & 1 << i != 0 {
                            return None;
                        }
                        seen |= 1 << i;
                        self.value_conforms(&def.fields[i])?;
                    }
                    None => {
                        if others[..n_others].contains(&key) || n_others == OTHERS {
                            return None;
                        }
                        others[n_others] = key;
                        n_others += 1;
                        self.skip()?;
                    }
                }
                if !self.next_or_close(b'}')? {
                    break;
                }
            }
        }
        let missing = def
            .fields
            .iter()
            .enumerate()
            .any(|(i, f)| f.required() && seen & 1 << i == 0);
        (!missing).then_some(())
    }

    /// A field's value of [`conforms`]: its JSON kind, set membership, nested objects.
    fn value_conforms(&mut self, field: &FieldDef) -> Option<()> {
        let c = self.peek()?;
        if matches!(field.kind, FieldKind::Any) {
            return self.skip();
        }
        if c == b'n' {
            return if field.nullable {
                self.literal(b"null")
            } else {
                None
            };
        }
        match field.kind {
            FieldKind::Str if c == b'"' => self.string().map(drop),
            FieldKind::OneOf(set) if c == b'"' => {
                let (a, e, escaped) = self.string()?;
                (!escaped && set.contains(&self.text.get(a..e)?)).then_some(())
            }
            FieldKind::Int | FieldKind::TimestampMs | FieldKind::Number => {
                let start = self.pos;
                self.number()?;
                let int = !self.b[start..self.pos]
                    .iter()
                    .any(|c| matches!(c, b'.' | b'e' | b'E'));
                (int || matches!(field.kind, FieldKind::Number)).then_some(())
            }
            FieldKind::Bool if c == b't' => self.literal(b"true"),
            FieldKind::Bool if c == b'f' => self.literal(b"false"),
            FieldKind::Object if c == b'{' => self.skip(),
            FieldKind::Nested(def) if c == b'{' => self.conforms(def),
            _ => None,
        }
    }

    /// An object whose fields are captured raw; a duplicate key declines.
    fn object(&mut self) -> Option<Fields<'a>> {
        self.open(b'{')?;
        let mut fields: Fields<'a> = Vec::with_capacity(8);
        if self.empty(b'}')? {
            return Some(fields);
        }
        loop {
            let (key, values) = self.named_key()?;
            if fields.iter().any(|(k, _)| k == key) {
                return None;
            }
            let value = self.member_value(values)?;
            fields.push((Cow::Borrowed(key), value));
            if !self.next_or_close(b'}')? {
                return Some(fields);
            }
        }
    }
}

const SIMPLE: u8 = 1;
const UNICODE: u8 = 2;

/// What the letter after a backslash starts.
static ESCAPES: [u8; 256] = {
    let mut t = [0u8; 256];
    let simple = b"\"\\/bfnrt";
    let mut i = 0;
    while i < simple.len() {
        t[simple[i] as usize] = SIMPLE;
        i += 1;
    }
    t[b'u' as usize] = UNICODE;
    t
};

/// Where the `\u` escape whose `u` is at `p` ends; `None` for bad hex digits or a
/// surrogate that is not a leading one followed by a trailing one (serde's rules for text).
#[cold]
fn unicode_escape_end(b: &[u8], p: usize) -> Option<usize> {
    let n = hex4(b, p + 1)?;
    if (0xDC00..=0xDFFF).contains(&n) {
        return None;
    }
    if !(0xD800..=0xDBFF).contains(&n) {
        return Some(p + 5);
    }
    if b.get(p + 5..p + 7)? != b"\\u" {
        return None;
    }
    let n2 = hex4(b, p + 7)?;
    (0xDC00..=0xDFFF).contains(&n2).then_some(p + 11)
}

fn hex4(b: &[u8], p: usize) -> Option<u16> {
    b.get(p..p + 4)?.iter().try_fold(0u16, |n, &c| {
        let d = (c as char).to_digit(16)?;
        Some(n << 4 | d as u16)
    })
}

/// How many bytes of a string [`string_end`] looks at one by one before its block scan.
const SHORT_STRING: usize = 16;

/// The closing quote of the string whose contents start at `start`, and whether it has
/// an escape; `None` for a control character, an invalid escape or no closing quote.
#[inline]
fn string_end(b: &[u8], start: usize) -> Option<(usize, bool)> {
    // Most strings are keys and short values: a look at their first bytes one by one ends
    // them without making the masks of a 64-byte block. Anything but a plain byte before
    // the quote (a backslash, a control character) leaves the string to the block scan.
    for (i, &c) in b.iter().enumerate().skip(start).take(SHORT_STRING) {
        if c == b'"' {
            return Some((i, false));
        }
        if c == b'\\' || c < 0x20 {
            break;
        }
    }
    #[cfg(target_arch = "x86_64")]
    if simd::has_avx2() {
        return string_end_with(
            b,
            start,
            // SAFETY: the CPU has AVX2 (checked at run time), all either function
            // requires. (They stay calls: inlining the scan loop into an AVX2 function
            // made LLVM unpack every mask bit by bit.)
            |block| unsafe { simd::masks64_avx2(block) },
            |block| Some(unsafe { simd::escape_letters_avx2(block) }),
        );
    }
    string_end_with(b, start, masks64, |_| None)
}

/// The masks of 64 bytes: quotes, backslashes and control characters (bit `i`: byte `i`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Masks {
    quote: u64,
    backslash: u64,
    control: u64,
}

/// The characters escaped by a backslash (the one after each backslash that starts an
/// escape), given the block's backslashes and whether its first byte is escaped (`carry`,
/// updated for the next block): simdjson's odd-backslash-run trick, no loop.
fn escaped_chars(backslash: u64, carry: &mut u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    // A backslash escaped by the previous block's last one starts nothing.
    let backslash = backslash & !*carry;
    let follows_escape = backslash << 1 | *carry;
    // Runs of backslashes that start on an odd bit, added to the backslashes, carry
    // through their run and flip the parity of what follows.
    let odd_starts = backslash & !EVEN & !follows_escape;
    let (even_starts, overflow) = odd_starts.overflowing_add(backslash);
    *carry = u64::from(overflow);
    (EVEN ^ even_starts << 1) & follows_escape
}

/// [`string_end`] with `masks` giving the masks of 64 bytes, and `letters` the masks of
/// their bytes that may follow a backslash (the simple escapes, then `u`), or None to
/// look each escaped byte up in a table instead.
///
/// The string is looked at in 64-byte blocks: the quotes that are not escaped end it,
/// the escaped characters are checked (from `letters`' masks, or a table look-up each;
/// `\u` escapes by [`unicode_escape_end`]), and a control character before the end
/// refuses it.
#[inline(always)]
fn string_end_with(
    b: &[u8],
    start: usize,
    masks: impl Fn(&[u8]) -> Masks,
    letters: impl Fn(&[u8]) -> Option<(u64, u64)>,
) -> Option<(usize, bool)> {
    let mut escaped = false;
    let (mut base, mut carry) = (start, 0u64);
    // A `\u` trailing surrogate checked with its leading one: its `u` is skipped.
    let mut checked_until = 0;
    // The text's last bytes, padded with a plain byte (an escape reaching past the end
    // finds it and is refused; no quote there: unterminated). Filled only for the tail.
    let mut padded: Option<[u8; 64]> = None;
    loop {
        let block = match b.get(base..base + 64) {
            Some(block) => block,
            None => {
                let tail = b.get(base..)?;
                let p = padded.insert([b'a'; 64]);
                p[..tail.len()].copy_from_slice(tail);
                &p[..]
            }
        };
        let m = masks(block);
        let escapes = escaped_chars(m.backslash, &mut carry);
        let quotes = m.quote & !escapes;
        // The bytes of this block before the closing quote (all of it if none).
        let inside = match quotes {
            0 => u64::MAX,
            q => (1u64 << q.trailing_zeros()) - 1,
        };
        if m.control & inside != 0 {
            return None;
        }
        let mut escaped_here = escapes & inside;
        if escaped_here != 0 {
            escaped = true;
            if let Some((simple, unicode)) = letters(block) {
                // Every escaped byte is a letter; only `\u` escapes need a closer look.
                // (A backslash ending the text escapes the padding: no letter, no string.)
                if escaped_here & !(simple | unicode) != 0 {
                    return None;
                }
                escaped_here &= unicode;
            }
        }
        while escaped_here != 0 {
            let at = base + escaped_here.trailing_zeros() as usize;
            escaped_here &= escaped_here - 1;
            match ESCAPES[usize::from(*b.get(at)?)] {
                SIMPLE => {}
                UNICODE if at < checked_until => {}
                UNICODE => checked_until = unicode_escape_end(b, at)?,
                _ => return None,
            }
        }
        if quotes != 0 {
            return Some((base + quotes.trailing_zeros() as usize, escaped));
        }
        base += 64;
    }
}

/// [`Masks`] of 64 bytes (SSE2 or portable).
fn masks64(block: &[u8]) -> Masks {
    let mut m = Masks {
        quote: 0,
        backslash: 0,
        control: 0,
    };
    for (i, chunk) in block.chunks_exact(16).enumerate() {
        let chunk: &[u8; 16] = chunk.try_into().unwrap_or(&[0; 16]);
        let (q, bs, c) = masks16(chunk);
        m.quote |= u64::from(q) << (16 * i);
        m.backslash |= u64::from(bs) << (16 * i);
        m.control |= u64::from(c) << (16 * i);
    }
    m
}

/// Quote, backslash and control masks of 16 bytes.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
fn masks16(block: &[u8; 16]) -> (u16, u16, u16) {
    // SAFETY: SSE2 is enabled for this target (the cfg above), which is all the
    // function requires; it reads nothing but its argument.
    unsafe { simd::masks16_sse2(block) }
}

/// Quote, backslash and control masks of 16 bytes (portable fallback).
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline]
fn masks16(block: &[u8; 16]) -> (u16, u16, u16) {
    block
        .iter()
        .enumerate()
        .fold((0, 0, 0), |(q, bs, c), (i, &x)| {
            (
                q | u16::from(x == b'"') << i,
                bs | u16::from(x == b'\\') << i,
                c | u16::from(x < 0x20) << i,
            )
        })
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8, _mm_cmpeq_epi8, _mm_min_epu8,
        _mm_movemask_epi8, _mm_set1_epi8, _mm_set_epi64x,
    };
    use std::sync::OnceLock;

    use super::Masks;

    /// Whether this CPU has AVX2 (asked once).
    #[inline]
    pub(super) fn has_avx2() -> bool {
        static AVX2: OnceLock<bool> = OnceLock::new();
        *AVX2.get_or_init(|| std::arch::is_x86_feature_detected!("avx2"))
    }

    fn word(w: &[u8]) -> i64 {
        i64::from_le_bytes(w.try_into().unwrap_or_default())
    }

    #[target_feature(enable = "sse2")]
    #[inline]
    pub(super) fn masks16_sse2(block: &[u8; 16]) -> (u16, u16, u16) {
        let v: __m128i = _mm_set_epi64x(word(&block[8..]), word(&block[..8]));
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // x < 0x20 exactly when min(x, 0x1f) == x (unsigned).
        let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
        let bits = |m: __m128i| _mm_movemask_epi8(m) as u16;
        (bits(quote), bits(backslash), bits(control))
    }

    /// The first 32 bytes of `h` (which has at least 32).
    #[target_feature(enable = "avx2")]
    #[inline]
    fn load32(h: &[u8]) -> __m256i {
        assert!(h.len() >= 32);
        // SAFETY: `h` has 32 bytes to read (just checked); the load takes any alignment.
        unsafe { _mm256_loadu_si256(h.as_ptr().cast::<__m256i>()) }
    }

    /// The masks of the bytes of a 64-byte `block` that are a simple escape's letter
    /// (`" \ / b f n r t`) and of those that are `u`, with AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) fn escape_letters_avx2(block: &[u8]) -> (u64, u64) {
        let half = |h: &[u8]| -> (u64, u64) {
            let v = load32(h);
            let is = |c: u8| _mm256_cmpeq_epi8(v, _mm256_set1_epi8(c as i8));
            let simple = _mm256_or_si256(
                _mm256_or_si256(
                    _mm256_or_si256(is(b'"'), is(b'\\')),
                    _mm256_or_si256(is(b'/'), is(b'b')),
                ),
                _mm256_or_si256(
                    _mm256_or_si256(is(b'f'), is(b'n')),
                    _mm256_or_si256(is(b'r'), is(b't')),
                ),
            );
            let bits = |m: __m256i| u64::from(_mm256_movemask_epi8(m) as u32);
            (bits(simple), bits(is(b'u')))
        };
        let (lo, hi) = (half(&block[..32]), half(&block[32..64]));
        (lo.0 | hi.0 << 32, lo.1 | hi.1 << 32)
    }

    /// [`super::masks64`] with AVX2; `block` is 64 bytes.
    #[target_feature(enable = "avx2")]
    pub(super) fn masks64_avx2(block: &[u8]) -> Masks {
        let half = |h: &[u8]| -> (u64, u64, u64) {
            let v = load32(h);
            let quote = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8));
            let backslash = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8));
            let control = _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1f)), v);
            let bits = |m: __m256i| u64::from(_mm256_movemask_epi8(m) as u32);
            (bits(quote), bits(backslash), bits(control))
        };
        let (lo, hi) = (half(&block[..32]), half(&block[32..64]));
        Masks {
            quote: lo.0 | hi.0 << 32,
            backslash: lo.1 | hi.1 << 32,
            control: lo.2 | hi.2 << 32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_mark_the_special_bytes() {
        for at in 0..64 {
            for c in [b'"', b'\\', 0x00, 0x1f] {
                let mut b = [b'a'; 64];
                b[at] = c;
                let m = masks64(&b);
                let bit = |hit: bool| if hit { 1u64 << at } else { 0 };
                let want = (bit(c == b'"'), bit(c == b'\\'), bit(c < 0x20));
                assert_eq!((m.quote, m.backslash, m.control), want, "{at} {c}");
                #[cfg(target_arch = "x86_64")]
                if simd::has_avx2() {
                    // SAFETY: the CPU has AVX2 (just checked).
                    assert_eq!(unsafe { simd::masks64_avx2(&b) }, m);
                }
            }
        }
        let plain = masks64(&[0x80; 64]);
        assert_eq!((plain.quote, plain.backslash, plain.control), (0, 0, 0));
    }

    #[test]
    fn runs_of_backslashes_escape_by_parity() {
        // n backslashes, then a quote: it ends the string when n is even.
        for pad in 0..70 {
            for n in 0..70 {
                let body = format!("{}{}", "a".repeat(pad), "\\".repeat(n));
                let s = format!("\"{body}\"tail\"");
                let end = if n % 2 == 0 { body.len() + 2 } else { s.len() };
                assert_eq!(scan_string(&s), Some(end), "{pad} {n}");
                let prefix = &s[..end];
                assert!(serde_json::from_str::<String>(prefix).is_ok(), "{prefix}");
                // Cut off before its closing quote (a backslash may end the text).
                assert_eq!(scan_string(&format!("\"{body}")), None, "{pad} {n}");
            }
        }
    }

    #[test]
    fn escape_letters_are_the_table_s() {
        #[cfg(target_arch = "x86_64")]
        if simd::has_avx2() {
            for first in (0..=255u8).step_by(64) {
                let block: Vec<u8> = (0..64).map(|i| first.wrapping_add(i)).collect();
                let mut want = (0u64, 0u64);
                for (i, &x) in block.iter().enumerate() {
                    match ESCAPES[usize::from(x)] {
                        SIMPLE => want.0 |= 1 << i,
                        UNICODE => want.1 |= 1 << i,
                        _ => {}
                    }
                }
                // SAFETY: the CPU has AVX2 (just checked).
                assert_eq!(
                    unsafe { simd::escape_letters_avx2(&block) },
                    want,
                    "{first}"
                );
            }
        }
    }

    /// Where a string scan ends, checking the dispatched (AVX2 here) and SSE2 scans agree.
    fn scan_string(s: &str) -> Option<usize> {
        let mut sc = Scanner::new(s, 10);
        let got = sc.string().map(|_| sc.pos);
        let sse2 = string_end_with(s.as_bytes(), 1, masks64, |_| None).map(|(end, _)| end + 1);
        assert_eq!(got, sse2, "{s}");
        got
    }

    #[test]
    fn usage_numbers_agree_with_serde() {
        use crate::engine::line::RawUsage;
        let serde = |s: &str| serde_json::from_str::<RawUsage>(s).ok();
        // Read in one pass, as serde reads them.
        let fast = [
            r#"{"input":900,"output":40,"cache_read":0,"cache_write":0,"total_tokens":940,"cost":{"input":0.1,"output":0.2,"cache_read":0,"cache_write":0,"total":0.3}}"#,
            r#"{"input":1.5e3,"output":-4,"total_tokens":18446744073709551617,"cost":null}"#,
            r#" { "output" : 7 , "extra" : [1, {"a": "b\n"}], "cost": {} } "#,
            "{}",
            r#"{"cost":{"total":2,"note":"x","total_ish":true}}"#,
        ];
        for s in fast {
            let got = usage_numbers(s);
            assert!(got.is_some(), "{s}");
            assert_eq!(got, serde(s), "{s}");
        }
        // Left to serde (which refuses most of them: the usage counts as none).
        let declined = [
            r#"{"input":"900"}"#,
            r#"{"input":null}"#,
            r#"{"input":1,"input":2}"#,
            r#"{"cost":{"total":1,"total":2}}"#,
            r#"{"cost":5}"#,
            r#"{"in\u0070ut":3}"#,
            r#"{"input":1e400}"#,
            r#"{"input":1,}"#,
            r#"{"input":1} x"#,
            "[1]",
            "null",
        ];
        for s in declined {
            assert_eq!(usage_numbers(s), None, "{s}");
        }
        assert_eq!(serde(r#"{"in\u0070ut":3}"#).unwrap().input, 3.0);
        // The token fields as the model table names and orders them, and `cost.total`:
        // what serde's names and `RawUsage::tokens_mut` read.
        let tokens: Vec<_> = model::USAGE
            .fields
            .iter()
            .filter(|f| !matches!(f.kind, FieldKind::Nested(_)))
            .collect();
        assert_eq!(tokens.len(), 5);
        let mut json: Vec<String> = tokens
            .iter()
            .enumerate()
            .map(|(i, f)| format!("{:?}:{}", f.key, i + 1))
            .collect();
        assert!(model::COST.fields.iter().any(|f| f.key == COST_TOTAL));
        json.push(format!(r#""cost":{{"{COST_TOTAL}":6}}"#));
        let text = format!("{{{}}}", json.join(","));
        for mut u in [serde(&text).unwrap(), usage_numbers(&text).unwrap()] {
            let got: Vec<f64> = u.tokens_mut().into_iter().map(|n| *n).collect();
            assert_eq!(got, [1.0, 2.0, 3.0, 4.0, 5.0], "{text}");
            assert_eq!(u.cost.map(|c| c.total), Some(6.0));
        }
    }

    #[test]
    fn escapes_follow_serdes_string_rules() {
        let ok = [
            "",
            r#"a\"b"#,
            r#"\\\/\b\f\n\r\t"#,
            r#"\u00e9\uD83D\uDE00"#,
            r#"\\"#,
        ];
        let bad = [
            r#"\x"#,
            "\\",
            r#"\u12"#,
            r#"\uDE00"#,
            r#"\uD83D"#,
            r#"\uD83Dx"#,
            r#"\uD83D\u0041"#,
            "a\u{1}",
            "\u{1f}",
        ];
        // Every offset, so escapes straddle the 64-byte blocks and the tail.
        for pad in 0..140 {
            let (before, after) = ("a".repeat(pad), "z".repeat(pad % 7));
            for body in ok {
                let s = format!("\"{before}{body}{after}\"");
                assert_eq!(scan_string(&s), Some(s.len()), "{s}");
                assert!(serde_json::from_str::<String>(&s).is_ok(), "{s}");
                let open = format!("\"{before}{body}{after}");
                assert_eq!(scan_string(&open), None, "{open}");
            }
            for body in bad {
                let s = format!("\"{before}{body}{after}\"");
                assert_eq!(scan_string(&s), None, "{s}");
                assert!(serde_json::from_str::<String>(&s).is_err(), "{s}");
            }
        }
    }
}
