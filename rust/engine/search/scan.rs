//! The scan: every session document read in parallel, lines found by a byte-level
//! prefilter, only those lines decoded and matched.
//!
//! The prefilter looks for a part of the query's longest token ([`prefilter_part`]) in
//! the raw bytes, in every case form that lowercases to it (one `regex-automata` literal
//! search, as ripgrep does), or for a JSON `\u` escape (a token written with escapes is
//! not in the bytes as written). A token of decoded text is otherwise in its line's bytes
//! as is: JSON escapes only quotes, backslashes and control characters, none of them
//! token characters. So the lines the prefilter skips cannot match, and the answers equal
//! a full decode of every line. Matching lines are ranked from counts ([`super::count`])
//! taken on their raw bytes where the line allows ([`super::inplace`]), and tokenised only
//! when among the best at the end; by relevance, a line whose score's bound
//! (`Searcher::bound`) cannot beat the worst hit kept is skipped unread. Hits of whole
//! documents get `on_branch` from the lines ([`super::branch`]).

use std::cmp::Ordering;
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Mutex;

use memchr::{memchr, memrchr};
use regex_automata::meta::Regex;
use regex_automata::util::prefilter::Prefilter as Literals;
use regex_automata::{Input, MatchKind};

use crate::engine::dialect::{detect, entry_to_native, Dialect};
use crate::engine::error::{EngineError, ErrorCode};
use crate::engine::line::days_from_civil;

use super::branch::{branch_ids, head_id, head_timestamp, LineLimits};
use super::count::{count_terms, counters, Counter, Finder};
use super::entry::{entry_text, match_texts, score, snippet};
use super::inplace;
use super::query::{Query, MAX_TERMS};
use super::tokens::upper_variants;

/// Which entries count, besides the query.
#[derive(Debug, Clone, Default)]
pub struct Filters {
    /// Keep only messages of these roles (sessiontree's names).
    pub roles: Option<Vec<String>>,
    /// Keep only entries of these types.
    pub types: Option<Vec<String>>,
    /// Keep only entries at or after this time (Unix milliseconds).
    pub since_ms: Option<i64>,
    /// Keep only entries before this time (Unix milliseconds).
    pub until_ms: Option<i64>,
}

/// How hits are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Best score first, then newest.
    Relevance,
    /// Newest first.
    Newest,
}

/// Where a session's lines are.
#[derive(Debug, Clone)]
pub enum Source {
    /// A session file (header first).
    Path(PathBuf),
    /// A session document in memory (header first).
    Bytes(Vec<u8>),
}

/// One session to search.
#[derive(Debug, Clone)]
pub struct Doc {
    /// The session's id, as the repository names it.
    pub session_id: String,
    /// Its lines.
    pub source: Source,
}

/// One entry that matched.
#[derive(Debug, Clone)]
pub struct Hit {
    /// The index of its document in the searched list.
    pub doc: usize,
    /// The session id.
    pub session_id: String,
    /// The entry id.
    pub entry_id: String,
    /// The entry type.
    pub entry_type: String,
    /// The message role, for a message entry.
    pub role: Option<String>,
    /// The entry's ISO timestamp as written.
    pub timestamp: String,
    /// The timestamp in Unix milliseconds, when it reads as one.
    pub ts_ms: Option<i64>,
    /// The relevance score.
    pub score: f64,
    /// The marked snippet.
    pub snippet: String,
    /// Character offsets of the marked text in the snippet.
    pub marks: Vec<(usize, usize)>,
    /// Whether the entry is on its session's current branch, when the scan could tell
    /// (whole documents in sessiontree's dialect; see [`super::branch`]).
    pub on_branch: Option<bool>,
    /// The entry's line while the hit may still be dropped for better ones: its snippet
    /// is made once it is among the best ([`Searcher::run`]).
    line: Option<String>,
}

/// Parses an ISO-8601 time (`YYYY-MM-DD[T ]HH:MM:SS[.fff][Z|±HH:MM]`, or a bare date as
/// midnight UTC) into Unix milliseconds.
pub fn parse_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |at: usize, n: usize| -> Option<i64> {
        let part = b.get(at..at + n)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |v, d| v * 10 + i64::from(d - b'0')))
    };
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') || !(1..=12).contains(&mo) {
        return None;
    }
    if !(1..=31).contains(&d) {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    if b.len() == 10 {
        return Some(days * 86_400_000);
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' ')) || b.get(13) != Some(&b':') {
        return None;
    }
    let (h, mi) = (num(11, 2)?, num(14, 2)?);
    let (sec, mut at) = if b.get(16) == Some(&b':') {
        (num(17, 2)?, 19)
    } else {
        (0, 16)
    };
    let mut ms = 0i64;
    if matches!(b.get(at), Some(b'.' | b',')) {
        let digits = b[at + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits == 0 {
            return None;
        }
        for k in 0..3 {
            ms = ms * 10
                + b.get(at + 1 + k)
                    .filter(|c| k < digits && c.is_ascii_digit())
                    .map_or(0, |c| i64::from(c - b'0'));
        }
        at += 1 + digits;
    }
    let offset = match b.get(at) {
        None => 0,
        Some(b'Z' | b'z') if at + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) => {
            let colon = usize::from(b.get(at + 3) == Some(&b':'));
            let (oh, om) = (num(at + 1, 2)?, num(at + 3 + colon, 2)?);
            if at + 5 + colon != b.len() {
                return None;
            }
            let m = oh * 60 + om;
            if sign == b'-' {
                -m
            } else {
                m
            }
        }
        _ => return None,
    };
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    Some(((days * 24 + h) * 60 + mi - offset) * 60_000 + sec * 1000 + ms)
}

/// `c` written so a regex reads it literally, in or out of a class.
fn lit(out: &mut String, c: char) {
    if c.is_alphanumeric() {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{:X}}}", c as u32));
    }
}

/// The most case forms of a needle written one by one (an alternation of literals, which
/// the regex searches for with a vectorised literal search alone); a needle with more is
/// written with a class for each character.
const MAX_FORMS: usize = 64;

/// Every case form of `needle` (each character or a character lowercasing to it), when
/// there are at most [`MAX_FORMS`].
fn forms(needle: &str) -> Option<Vec<String>> {
    let chars: Vec<(char, &[char])> = needle.chars().map(|c| (c, upper_variants(c))).collect();
    let n = chars
        .iter()
        .try_fold(1usize, |n, (_, v)| n.checked_mul(v.len() + 1))
        .filter(|&n| n <= MAX_FORMS)?;
    let all = (0..n).map(|k| {
        // Form `k`: each character's variant by the digits of `k` in mixed radix.
        let mut rest = k;
        chars
            .iter()
            .map(|&(c, variants)| {
                let base = variants.len() + 1;
                let pick = rest % base;
                rest /= base;
                if pick == 0 {
                    c
                } else {
                    variants[pick - 1]
                }
            })
            .collect()
    });
    Some(all.collect())
}

/// `needle` in every case form, as a regex (an alternation: wrap it in a group to use
/// it as a part).
fn case_forms(pat: &mut String, needle: &str) {
    if let Some(all) = forms(needle) {
        for (k, form) in all.iter().enumerate() {
            if k > 0 {
                pat.push('|');
            }
            for c in form.chars() {
                lit(pat, c);
            }
        }
        return;
    }
    for c in needle.chars() {
        let variants = upper_variants(c);
        if variants.is_empty() {
            lit(pat, c);
        } else {
            pat.push('[');
            lit(pat, c);
            for &v in variants {
                lit(pat, v);
            }
            pat.push(']');
        }
    }
}

fn compile(pat: &str) -> Result<Regex, EngineError> {
    Regex::new(pat).map_err(|e| {
        EngineError::new(
            ErrorCode::InvalidArgument,
            format!("the query cannot be searched for: {e}"),
        )
    })
}

/// How common a character is in text (higher: rarer), by English letter frequency; any
/// other character counts as rare.
fn rarity(c: char) -> usize {
    const COMMON: &str = "etaoinsrhldcumfpgwybvkxjqz";
    COMMON.find(c).map_or(40, |i| i + 1)
}

/// The part of `needle` the line prefilter looks for: its rarest three characters in a
/// row. A line holding the needle holds every part of it, so it stays a prefilter (the
/// matcher checks the lines it finds), and three characters in two case forms each are
/// eight literals, which a vectorised literal search (Teddy) tells apart by their first
/// bytes with few false alarms, where every case form of a long word (2^n literals) would
/// confirm many.
pub fn prefilter_part(needle: &str) -> &str {
    let chars: Vec<(usize, char)> = needle.char_indices().collect();
    if chars.len() <= 3 {
        return needle;
    }
    // Teddy tells literals apart by their first bytes: those matter most.
    let best = (0..=chars.len() - 3)
        .max_by_key(|&i| {
            let lead = rarity(chars[i].1) + rarity(chars[i + 1].1);
            (lead, rarity(chars[i + 2].1), std::cmp::Reverse(i))
        })
        .unwrap_or(0);
    let end = chars.get(best + 3).map_or(needle.len(), |&(at, _)| at);
    &needle[chars[best].0..end]
}

/// The line prefilters: a part of the needle ([`prefilter_part`]) in every case form, and
/// the same or a JSON `\u` escape. The second alone serves when the part starts with two
/// rare characters; else a document is first searched for a `\u` and, holding none,
/// searched with the first: the two-byte escape makes every literal's fingerprint two
/// bytes, and two common characters (`rg` of `merge`) raise many false alarms.
#[derive(Debug)]
struct Prefilter {
    plain: Regex,
    or_escape: Regex,
    rare: bool,
}

fn prefilter(needle: &str) -> Result<Prefilter, EngineError> {
    let part = prefilter_part(needle);
    let mut pat = String::new();
    case_forms(&mut pat, part);
    let lead: usize = part.chars().take(2).map(rarity).sum();
    Ok(Prefilter {
        plain: compile(&pat)?,
        or_escape: compile(&format!("(?:{pat})|\\\\u"))?,
        rare: lead >= 36,
    })
}

/// The text prefilter: any token of any term (a prefix as what it starts with), in every
/// case form. A decoded text without one has no match of any term.
fn any_token(query: &Query) -> Result<Regex, EngineError> {
    let mut pat = String::new();
    for t in &query.terms {
        for tok in &t.tokens {
            if !pat.is_empty() {
                pat.push('|');
            }
            pat.push_str("(?:");
            case_forms(&mut pat, tok);
            pat.push(')');
        }
    }
    compile(&pat)
}

/// The order documents are read in: as given, or for `Newest` the most recently modified
/// files first, so the newest hits are found early and older entries are skipped sooner
/// (the answers do not depend on it).
fn visiting_order(docs: &[Doc], order: Order) -> Vec<usize> {
    let mut visit: Vec<usize> = (0..docs.len()).collect();
    if order == Order::Newest {
        let modified: Vec<Option<std::time::SystemTime>> = docs
            .iter()
            .map(|d| match &d.source {
                Source::Path(p) => std::fs::metadata(p).and_then(|m| m.modified()).ok(),
                Source::Bytes(_) => None,
            })
            .collect();
        visit.sort_by(|&a, &b| modified[b].cmp(&modified[a]));
    }
    visit
}

/// A query ready to run over documents.
#[derive(Debug)]
pub struct Searcher {
    query: Query,
    filters: Filters,
    prefilter: std::sync::Arc<Prefilter>,
    any_token: Regex,
    counters: Option<std::sync::Arc<Vec<Counter>>>,
    /// Whether the documents are whole sessions (then `on_branch` is told from them).
    whole: bool,
    limits: LineLimits,
}

/// The prefilters of the last queries: compiling them costs more than an indexed search
/// of a few candidates, and agents repeat queries.
type Compiled = (
    Query,
    std::sync::Arc<Prefilter>,
    Regex,
    Option<std::sync::Arc<Vec<Counter>>>,
);
static RECENT: Mutex<Vec<(String, std::sync::Arc<Compiled>)>> = Mutex::new(Vec::new());
const RECENT_MAX: usize = 32;

fn compiled(text: &str) -> Result<std::sync::Arc<Compiled>, EngineError> {
    let mut recent = RECENT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(at) = recent.iter().position(|(q, _)| q == text) {
        let hit = recent.remove(at);
        let c = hit.1.clone();
        recent.push(hit);
        return Ok(c);
    }
    drop(recent);
    let query = Query::parse(text)?;
    let pre = std::sync::Arc::new(prefilter(query.needle())?);
    let any = any_token(&query)?;
    let count = counters(
        &query,
        |tok| {
            if let Some(pre) = forms(tok).and_then(|f| Literals::new(MatchKind::LeftmostFirst, &f))
            {
                return Some(Finder::Literals(pre));
            }
            let mut pat = String::new();
            case_forms(&mut pat, tok);
            compile(&pat).ok().map(Finder::Regex)
        },
        prefilter_part,
    )
    .map(std::sync::Arc::new);
    let c = std::sync::Arc::new((query, pre, any, count));
    let mut recent = RECENT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if recent.len() >= RECENT_MAX {
        recent.remove(0);
    }
    recent.push((text.to_owned(), c.clone()));
    Ok(c)
}

/// The best hits seen so far, kept to about `limit`.
struct Best {
    order: Order,
    limit: Option<usize>,
    hits: Vec<Hit>,
    /// The worst hit kept at the last trim: anything not better is not kept.
    bar: Option<(f64, Option<i64>, String, String)>,
    /// The worker's caches of the regexes: the prefilters', then each counter's.
    caches: Caches,
    /// The worker's vectors of finds and of the strings holding them
    /// ([`Searcher::bound`]).
    finds: Vec<usize>,
    strings: Vec<(usize, usize, [usize; MAX_BOUND_TERMS])>,
}

/// The most strings with finds, and positive terms, [`Searcher::bound`] tries every set
/// of (more: a looser bound).
const MAX_BOUND_STRINGS: usize = 6;
const MAX_BOUND_TERMS: usize = 4;

/// A worker's regex caches (see [`Counter::cache`]).
struct Caches {
    plain: regex_automata::meta::Cache,
    or_escape: regex_automata::meta::Cache,
    counters: Vec<Option<regex_automata::meta::Cache>>,
}

/// Whether the quote at `q` ends or starts a string: not after an odd run of
/// backslashes.
fn unescaped(line: &[u8], q: usize) -> bool {
    line[..q].iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 0
}

/// The quotes around byte `p` of a JSON line, taken to be in a string.
fn enclosing(line: &[u8], p: usize) -> Option<(usize, usize)> {
    let mut i = p;
    let open = loop {
        let q = memrchr(b'"', &line[..i])?;
        if unescaped(line, q) {
            break q;
        }
        i = q;
    };
    let mut j = p;
    let close = loop {
        let q = j + memchr(b'"', &line[j..])?;
        if unescaped(line, q) {
            break q;
        }
        j = q + 1;
    };
    Some((open, close))
}

/// The start of the line holding byte `at` of `data` (none before `from`), and the
/// quote before `at` on it, when not escaped.
fn line_start(data: &[u8], from: usize, at: usize) -> (usize, Option<usize>) {
    let mut i = at;
    loop {
        let Some(k) = memchr::memrchr2(b'\n', b'"', &data[from..i]).map(|k| from + k) else {
            return (from, None);
        };
        if data[k] == b'\n' {
            return (k + 1, None);
        }
        if unescaped(data, k) {
            let start = memrchr(b'\n', &data[from..k]).map_or(from, |j| from + j + 1);
            return (start, Some(k));
        }
        i = k;
    }
}

/// The quote after byte `at` of `data` on its line, when not escaped, and the line's
/// end (its newline); `None` for a line without one (torn).
fn line_end(data: &[u8], at: usize) -> Option<(Option<usize>, usize)> {
    let mut j = at;
    loop {
        let k = j + memchr::memchr2(b'\n', b'"', &data[j..])?;
        if data[k] == b'\n' {
            return Some((None, k));
        }
        if unescaped(data, k) {
            let end = k + 1 + memchr(b'\n', &data[k + 1..])?;
            return Some((Some(k), end));
        }
        j = k + 1;
    }
}

/// The ids of a document's entries that matched (a duplicated id names its first line
/// that matched), and the lines skipped for their score's bound ([`Searcher::bound`]),
/// any of which may have matched.
struct Seen<'d> {
    ids: hashbrown::HashSet<String>,
    /// The document.
    data: &'d [u8],
    /// The hashes of the skipped lines' ids.
    skipped: hashbrown::HashSet<u64>,
    /// The skipped lines: their id's hash and where they are in `data`.
    skipped_lines: Vec<(u64, usize, usize)>,
}

impl<'d> Seen<'d> {
    fn new(data: &'d [u8]) -> Seen<'d> {
        Seen {
            ids: hashbrown::HashSet::new(),
            data,
            // About one line in 2 kB of a document is skipped, commonly.
            skipped: hashbrown::HashSet::with_capacity(data.len() / 2048),
            skipped_lines: Vec::new(),
        }
    }
}

fn id_hash(id: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(id)
}

/// What reading a line in place ([`Searcher::in_place`]) decided.
enum InPlace<'a> {
    /// The entry is no hit, or none better than those kept.
    Done,
    /// It is kept (its id recorded as seen), with this score and time.
    Kept(inplace::Entry<'a>, f64, Option<i64>),
    /// Decode the line to tell.
    Decode,
}

fn cmp_keys(
    order: Order,
    a: (f64, Option<i64>, &str, &str),
    b: (f64, Option<i64>, &str, &str),
) -> Ordering {
    let by_time =
        b.1.cmp(&a.1)
            .then_with(|| a.2.cmp(b.2))
            .then_with(|| a.3.cmp(b.3));
    match order {
        Order::Relevance => b.0.total_cmp(&a.0).then(by_time),
        Order::Newest => by_time,
    }
}

fn key(h: &Hit) -> (f64, Option<i64>, &str, &str) {
    (h.score, h.ts_ms, &h.session_id, &h.entry_id)
}

/// Sorts hits best first.
pub fn sort_hits(order: Order, hits: &mut [Hit]) {
    hits.sort_by(|a, b| cmp_keys(order, key(a), key(b)));
}

impl Best {
    fn wants(&self, score: f64, ts: Option<i64>, sid: &str, eid: &str) -> bool {
        self.bar.as_ref().is_none_or(|bar| {
            cmp_keys(
                self.order,
                (score, ts, sid, eid),
                (bar.0, bar.1, &bar.2, &bar.3),
            ) == Ordering::Less
        })
    }

    fn push(&mut self, hit: Hit) {
        self.hits.push(hit);
        // Trimmed often (a sort of a few dozen hits): the sooner the bar rises, the more
        // lines are skipped unread.
        if let Some(limit) = self.limit {
            if self.hits.len() >= limit + (limit / 4).max(8) {
                self.trim(limit);
            }
        }
    }

    fn trim(&mut self, limit: usize) {
        sort_hits(self.order, &mut self.hits);
        self.hits.truncate(limit);
        if self.hits.len() == limit {
            if let Some(w) = self.hits.last() {
                self.bar = Some((w.score, w.ts_ms, w.session_id.clone(), w.entry_id.clone()));
            }
        }
    }
}

impl Searcher {
    /// Parses `query`.
    ///
    /// # Errors
    /// `invalid_argument` for a bad query.
    pub fn new(query: &str, filters: Filters) -> Result<Searcher, EngineError> {
        let c = compiled(query)?;
        Ok(Searcher {
            query: c.0.clone(),
            filters,
            prefilter: c.1.clone(),
            any_token: c.2.clone(),
            counters: c.3.clone(),
            whole: false,
            limits: LineLimits {
                max_line_bytes: crate::engine::jsonl::DEFAULT_MAX_LINE_BYTES,
                max_id_bytes: crate::engine::types::MAX_ID_BYTES,
            },
        })
    }

    /// Says the documents are whole sessions read with these line limits: hits then
    /// carry `on_branch` when the lines tell it ([`super::branch`]).
    #[must_use]
    pub fn whole_documents(mut self, limits: LineLimits) -> Searcher {
        self.whole = true;
        self.limits = limits;
        self
    }

    /// The score of an entry with `texts`, counted without tokenising: `Some(None)` when
    /// it does not match, `None` when counting needs the tokeniser.
    fn quick_score(&self, texts: &[std::borrow::Cow<'_, str>]) -> Option<Option<f64>> {
        let counters = self.counters.as_deref()?;
        let counts = count_terms(counters, texts)?;
        let mut positive = Vec::with_capacity(counts.len());
        for (t, c) in self.query.terms.iter().zip(counts) {
            match (t.negated, c) {
                (true, 0) => {}
                (true, _) | (false, 0) => return Some(None),
                (false, c) => positive.push(c),
            }
        }
        let n: usize = texts.iter().map(|t| t.len()).sum();
        Some(Some(score(&positive, n)))
    }

    /// Ranks the entry `line` from its raw bytes ([`inplace::read`],
    /// [`Counter::count_raw`]): no decoding but of a text with a `\u` escape.
    /// `Decode` when the line or a count needs the decoded reading.
    fn in_place<'a>(
        &self,
        line: &'a str,
        unicode: bool,
        sid: &str,
        seen: &mut Seen,
        best: &mut Best,
    ) -> InPlace<'a> {
        let Some(counters) = self.counters.as_deref() else {
            return InPlace::Decode;
        };
        let mut texts = Vec::new();
        let Some(e) = inplace::read(line, &mut texts, unicode) else {
            return InPlace::Decode;
        };
        let ts = parse_ms(e.timestamp);
        if texts.is_empty() || !self.keep(e.entry_type, e.role, ts) {
            return InPlace::Done;
        }
        let mut positive = [0usize; MAX_TERMS + 1];
        let mut n_positive = 0;
        let terms = self.query.terms.iter().zip(counters);
        for ((t, c), cache) in terms.zip(&mut best.caches.counters) {
            let mut n = 0;
            for text in &texts {
                let k = match text {
                    inplace::Text::Raw(r) => c.count_raw(cache.as_mut(), r.as_bytes()),
                    inplace::Text::Decoded(t) => c.count_with(cache.as_mut(), t),
                };
                let Some(k) = k else {
                    return InPlace::Decode;
                };
                n += k;
            }
            match (t.negated, n) {
                (true, 0) => {}
                (true, _) | (false, 0) => return InPlace::Done,
                (false, n) => {
                    positive[n_positive] = n;
                    n_positive += 1;
                }
            }
        }
        let len = texts.iter().map(inplace::Text::decoded_len).sum();
        let s = score(&positive[..n_positive], len);
        if !self.first(seen, e.id) || !best.wants(s, ts, sid, e.id) {
            return InPlace::Done;
        }
        InPlace::Kept(e, s, ts)
    }

    /// The parsed query.
    pub fn query(&self) -> &Query {
        &self.query
    }

    fn keep(&self, ty: &str, role: Option<&str>, ts: Option<i64>) -> bool {
        if let Some(types) = &self.filters.types {
            if !types.iter().any(|t| t == ty) {
                return false;
            }
        }
        if let Some(roles) = &self.filters.roles {
            if !role.is_some_and(|r| roles.iter().any(|x| x == r)) {
                return false;
            }
        }
        if let Some(since) = self.filters.since_ms {
            if ts.is_none_or(|t| t < since) {
                return false;
            }
        }
        if let Some(until) = self.filters.until_ms {
            if ts.is_none_or(|t| t >= until) {
                return false;
            }
        }
        true
    }

    /// Matches one entry line (sessiontree's dialect); a hit is offered to `best`.
    ///
    /// `unicode`: whether the line may hold a `\u` escape ([`inplace::read`]).
    fn line(
        &self,
        doc: usize,
        sid: &str,
        line: &str,
        unicode: bool,
        seen: &mut Seen,
        best: &mut Best,
    ) {
        // Newest first: an entry older than the worst kept hit is not read further (its
        // time read from the start of the line, where this library writes it).
        if best.order == Order::Newest {
            if let Some(bar) = best.bar.as_ref().and_then(|b| b.1) {
                if head_timestamp(line.as_bytes())
                    .and_then(parse_ms)
                    .is_some_and(|t| t < bar)
                {
                    return;
                }
            }
        }
        match self.in_place(line, unicode, sid, seen, best) {
            InPlace::Done => return,
            InPlace::Kept(e, score, ts) => {
                let mut hit = Hit {
                    doc,
                    session_id: sid.to_owned(),
                    entry_id: e.id.to_owned(),
                    entry_type: e.entry_type.to_owned(),
                    role: e.role.map(str::to_owned),
                    timestamp: e.timestamp.to_owned(),
                    ts_ms: ts,
                    score,
                    snippet: String::new(),
                    marks: Vec::new(),
                    on_branch: None,
                    line: Some(line.to_owned()),
                };
                // With a limit, the snippet waits until the hit is among the best.
                if best.limit.is_none() {
                    self.quote(&mut hit);
                }
                best.push(hit);
                return;
            }
            InPlace::Decode => {}
        }
        let Some(e) = entry_text(line) else { return };
        let ts = parse_ms(&e.timestamp);
        if e.texts.is_empty() || !self.keep(&e.entry_type, e.role.as_deref(), ts) {
            return;
        }
        // Ranked from counts alone when it can be; tokenised (for the snippet) only if
        // kept. A duplicated id names its first line (the format's rule).
        let quick = self.quick_score(&e.texts);
        if let Some(q) = quick {
            let Some(s) = q else { return };
            if !self.first(seen, &e.id) || !best.wants(s, ts, sid, &e.id) {
                return;
            }
        }
        let might = |t: &str| self.any_token.is_match(t.as_bytes());
        let Some(m) = match_texts(&self.query, &e.texts, Some(&might)) else {
            debug_assert!(quick.is_none(), "the counts and the tokeniser disagree");
            return;
        };
        debug_assert!(quick.is_none_or(|q| q == Some(m.score)));
        if quick.is_none() && (!self.first(seen, &e.id) || !best.wants(m.score, ts, sid, &e.id)) {
            return;
        }
        let (snippet, marks) = snippet(&e.texts, &m);
        best.push(Hit {
            doc,
            session_id: sid.to_owned(),
            entry_id: e.id,
            entry_type: e.entry_type,
            role: e.role,
            timestamp: e.timestamp,
            ts_ms: ts,
            score: m.score,
            snippet,
            marks,
            on_branch: None,
            line: None,
        });
    }

    /// Records that the entry `id` matched: whether it is the first line with this id
    /// that did (an earlier line skipped for its bound is read again to tell).
    fn first(&self, seen: &mut Seen<'_>, id: &str) -> bool {
        if !seen.ids.insert(id.to_owned()) {
            return false;
        }
        if seen.skipped.is_empty() || !seen.skipped.contains(&id_hash(id.as_bytes())) {
            return true;
        }
        let h = id_hash(id.as_bytes());
        seen.skipped_lines
            .iter()
            .filter(|l| l.0 == h)
            .filter_map(|&(_, s, e)| simdutf8::basic::from_utf8(&seen.data[s..e]).ok())
            .all(|line| self.matched_id(line).as_deref() != Some(id))
    }

    /// The id of the entry `line` when it matches (filters included), read the long way.
    fn matched_id(&self, line: &str) -> Option<String> {
        let e = entry_text(line)?;
        let ts = parse_ms(&e.timestamp);
        if e.texts.is_empty() || !self.keep(&e.entry_type, e.role.as_deref(), ts) {
            return None;
        }
        let matched = match self.quick_score(&e.texts) {
            Some(q) => q.is_some(),
            None => match_texts(&self.query, &e.texts, None).is_some(),
        };
        matched.then_some(e.id)
    }

    /// An upper bound of the score of the entry `line` (raw bytes, from a document with
    /// no `\u` escape), from the finds of each positive term in the whole line (more
    /// than its texts hold) and the shortest string holding one (no shorter than the
    /// entry's searched text, which holds a match): `None` when a term has no find, so
    /// the entry cannot match. Reads only the strings holding finds, not the line.
    ///
    /// `first`: where the line prefilter's first find is in the line; the needle's
    /// token starts no sooner than its longest form before it.
    /// `quotes`: those around the first find, when known.
    fn bound(
        &self,
        line: &[u8],
        first: usize,
        quotes: Option<(usize, usize)>,
        bar: f64,
        best: &mut Best,
    ) -> Option<f64> {
        let needle = self.query.needle();
        let needle_from = first.saturating_sub(4 * needle.chars().count());
        let counters = self.counters.as_deref()?;
        let finds = &mut best.finds;
        finds.clear();
        let mut counts = [0usize; MAX_TERMS + 1];
        let mut k = 0;
        let terms = self.query.terms.iter().zip(counters);
        for ((t, c), cache) in terms.zip(&mut best.caches.counters) {
            if t.negated {
                continue;
            }
            let before = finds.len();
            let from = if t.tokens.len() == 1 && t.tokens[0] == needle {
                needle_from
            } else {
                0
            };
            c.finds_raw(cache.as_mut(), line, from, finds);
            counts[k] = finds.len() - before;
            if counts[k] == 0 {
                return None;
            }
            k += 1;
        }
        // The strings holding finds, each with its finds of each term.
        let strings = &mut best.strings;
        strings.clear();
        let mut term = 0;
        let mut ends = counts[..k].iter().scan(0, |sum, &c| {
            *sum += c;
            Some(*sum)
        });
        let mut term_end = ends.next().unwrap_or(0);
        for (i, &p) in finds.iter().enumerate() {
            while i >= term_end {
                term += 1;
                term_end = ends.next().unwrap_or(usize::MAX);
            }
            let at = match strings.iter().position(|s| s.0 < p && p < s.1) {
                Some(at) => at,
                None => {
                    let quotes = match quotes {
                        Some((o, c)) if o < p && p < c => Some((o, c)),
                        _ => enclosing(line, p),
                    };
                    // Not in a string: no bound.
                    let Some((open, close)) = quotes else {
                        return Some(f64::INFINITY);
                    };
                    strings.push((open, close, [0; MAX_BOUND_TERMS]));
                    strings.len() - 1
                }
            };
            if let Some(n) = strings[at].2.get_mut(term) {
                *n += 1;
            }
        }
        // Each escape is two bytes of one character: a text is at least half its bytes
        // (its escapes counted when that bound is too loose).
        let loose = self.best_subset(&counts[..k], strings, |o, c| (c - o - 1).div_ceil(2));
        if loose < bar {
            return Some(loose);
        }
        Some(self.best_subset(&counts[..k], strings, |o, c| {
            c - o - 1 - memchr::memchr_iter(b'\\', &line[o + 1..c]).count()
        }))
    }

    /// The highest score an entry can have whose matches lie in some of `strings` (each
    /// with its finds of each positive term), its text at least as long as theirs
    /// (`len(open, close)` each): over every set of them holding each term. With too
    /// many strings or terms to list, the score of all the finds in the shortest string.
    fn best_subset(
        &self,
        counts: &[usize],
        strings: &[(usize, usize, [usize; MAX_BOUND_TERMS])],
        len: impl Fn(usize, usize) -> usize,
    ) -> f64 {
        if strings.len() > MAX_BOUND_STRINGS || counts.len() > MAX_BOUND_TERMS {
            let shortest = strings.iter().map(|s| len(s.0, s.1)).min().unwrap_or(0);
            return score(counts, shortest);
        }
        let mut lens = [0usize; MAX_BOUND_STRINGS];
        for (l, s) in lens.iter_mut().zip(strings) {
            *l = len(s.0, s.1);
        }
        let mut top = f64::NEG_INFINITY;
        for set in 1..(1u32 << strings.len()) {
            let mut sum = [0usize; MAX_BOUND_TERMS];
            let mut n = 0;
            for (j, s) in strings.iter().enumerate() {
                if set & (1 << j) != 0 {
                    n += lens[j];
                    for (t, c) in sum.iter_mut().zip(s.2) {
                        *t += c;
                    }
                }
            }
            if sum[..counts.len()].iter().all(|&c| c > 0) {
                top = top.max(score(&sum[..counts.len()], n));
            }
        }
        top
    }

    /// Makes the snippet of a hit kept from its line read in place.
    fn quote(&self, hit: &mut Hit) {
        let Some(line) = hit.line.take() else { return };
        let Some(e) = entry_text(&line) else {
            debug_assert!(false, "a line read in place is no entry: {line}");
            return;
        };
        let might = |t: &str| self.any_token.is_match(t.as_bytes());
        let Some(m) = match_texts(&self.query, &e.texts, Some(&might)) else {
            debug_assert!(false, "a line read in place does not match: {line}");
            return;
        };
        debug_assert_eq!(m.score, hit.score, "{line}");
        (hit.snippet, hit.marks) = snippet(&e.texts, &m);
    }

    /// Searches one session document (header line first).
    fn document(&self, doc: usize, sid: &str, data: &[u8], best: &mut Best) {
        let Some(nl) = memchr(b'\n', data) else {
            return;
        };
        let Ok(header) = std::str::from_utf8(&data[..nl]) else {
            return;
        };
        let firsts = data[nl + 1..]
            .split(|&b| b == b'\n')
            .take(4)
            .filter_map(|l| std::str::from_utf8(l).ok());
        let Ok(dialect) = detect(header.trim_end_matches('\r'), firsts) else {
            return;
        };
        let mut seen = Seen::new(data);
        let mut pos = nl + 1;
        let pre = &*self.prefilter;
        let escapes = pre.rare || memchr::memmem::find(&data[pos..], b"\\u").is_some();
        // Ranking by relevance, a line is skipped when its score's bound is below the
        // worst hit kept (not for digits: a number's text is not its bytes).
        let bounded = best.order == Order::Relevance
            && dialect == Dialect::Native
            && !escapes
            && self.counters.is_some()
            && self.query.positive().all(|t| {
                !t.tokens
                    .iter()
                    .any(|w| w.bytes().any(|b| b.is_ascii_digit()))
            });

        // pi v1 lines have no ids: they are numbered by line (the header is line 0).
        let (mut line_no, mut counted) = (0u64, 0usize);
        while pos < data.len() {
            let (prefilter, cache) = if escapes {
                (&pre.or_escape, &mut best.caches.or_escape)
            } else {
                (&pre.plain, &mut best.caches.plain)
            };
            let Some(m) = prefilter.search_with(cache, &Input::new(data).span(pos..data.len()))
            else {
                break;
            };
            // The line's bounds, and the quotes around the find when it is in a string,
            // read in the same passes (a string holds no newline).
            let (start, open) = line_start(data, pos, m.start());
            // A last line without its newline is torn: not an entry.
            let Some((close, end)) = line_end(data, m.start()) else {
                break;
            };
            pos = end + 1;
            let raw = data[start..end]
                .strip_suffix(b"\r")
                .unwrap_or(&data[start..end]);
            if bounded {
                if let Some(bar) = best.bar.as_ref().map(|b| b.0) {
                    let quotes = open.zip(close).map(|(o, c)| (o - start, c - start));
                    match self.bound(raw, m.start() - start, quotes, bar, best) {
                        None => continue,
                        Some(b) if b < bar => {
                            // Skipped, its id kept in case a later line has it.
                            if let Some(id) = head_id(raw) {
                                let h = id_hash(id);
                                seen.skipped.insert(h);
                                seen.skipped_lines.push((h, start, start + raw.len()));
                                continue;
                            }
                        }
                        Some(_) => {}
                    }
                }
            }
            let Ok(text) = simdutf8::basic::from_utf8(raw) else {
                continue;
            };
            if dialect.is_pi() {
                let v1 = if dialect == Dialect::Pi(1) {
                    line_no += memchr::memchr_iter(b'\n', &data[counted..start]).count() as u64;
                    counted = start;
                    Some((line_no, None))
                } else {
                    None
                };
                if let Ok(native) = entry_to_native(text, dialect, v1) {
                    self.line(doc, sid, &native, true, &mut seen, best);
                }
            } else {
                self.line(doc, sid, text, escapes, &mut seen, best);
            }
        }
        if self.whole && dialect == Dialect::Native && best.hits.iter().any(|h| h.doc == doc) {
            if let Some(on) = branch_ids(&data[nl + 1..], self.limits) {
                for h in best.hits.iter_mut().filter(|h| h.doc == doc) {
                    h.on_branch = Some(on.contains(h.entry_id.as_bytes()));
                }
            }
        }
    }

    /// Searches document `i` (read into `buf` when it is a file).
    fn load(&self, i: usize, doc: &Doc, buf: &mut Vec<u8>, best: &mut Best) {
        match &doc.source {
            Source::Bytes(b) => self.document(i, &doc.session_id, b, best),
            Source::Path(p) => {
                buf.clear();
                if File::open(p).and_then(|mut f| f.read_to_end(buf)).is_ok() {
                    self.document(i, &doc.session_id, buf, best);
                }
            }
        }
    }

    /// Searches `docs` on up to `threads` threads; the best `limit` hits (all with
    /// `None`), best first. A file that cannot be read (deleted since it was listed) is
    /// skipped.
    pub fn run(
        &self,
        docs: &[Doc],
        order: Order,
        limit: Option<usize>,
        threads: usize,
    ) -> Vec<Hit> {
        let next = AtomicUsize::new(0);
        let visit = visiting_order(docs, order);
        // A worker takes the next document to visit until none is left, keeping its best.
        let work = || {
            let mut best = Best {
                order,
                limit,
                hits: Vec::new(),
                bar: None,
                caches: Caches {
                    plain: self.prefilter.plain.create_cache(),
                    or_escape: self.prefilter.or_escape.create_cache(),
                    counters: self
                        .counters
                        .iter()
                        .flat_map(|c| c.iter().map(Counter::cache))
                        .collect(),
                },
                finds: Vec::new(),
                strings: Vec::new(),
            };
            let mut buf = Vec::new();
            loop {
                let k = next.fetch_add(1, AtomicOrdering::Relaxed);
                let Some(&i) = visit.get(k) else { break };
                self.load(i, &docs[i], &mut buf, &mut best);
            }
            if let Some(l) = limit {
                best.trim(l);
            }
            best.hits
        };
        let threads = threads.clamp(1, docs.len().max(1));
        let mut hits = if threads == 1 {
            // No thread to start for one document (an indexed search's few candidates).
            work()
        } else {
            std::thread::scope(|s| {
                let workers: Vec<_> = (0..threads).map(|_| s.spawn(work)).collect();
                workers
                    .into_iter()
                    .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                    .collect()
            })
        };
        sort_hits(order, &mut hits);
        if let Some(l) = limit {
            hits.truncate(l);
        }
        for h in &mut hits {
            self.quote(h);
        }
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w","parent_session":null,"metadata":null}"#;

    fn doc(lines: &[&str]) -> Doc {
        let mut data = format!("{HEADER}\n");
        for l in lines {
            data.push_str(l);
            data.push('\n');
        }
        Doc {
            session_id: "s1".into(),
            source: Source::Bytes(data.into_bytes()),
        }
    }

    fn ids(q: &str, d: &Doc) -> Vec<String> {
        let s = Searcher::new(q, Filters::default()).unwrap();
        s.run(std::slice::from_ref(d), Order::Newest, None, 2)
            .into_iter()
            .map(|h| h.entry_id)
            .collect()
    }

    #[test]
    fn finds_decoded_text_only() {
        let d = doc(&[
            r#"{"type":"message","id":"a1","parent_id":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"He said \"Caf\u00e9\"\nthen left","timestamp":1}}"#,
            r#"{"type":"message","id":"a2","parent_id":"a1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"tool_call","id":"t","name":"bash","arguments":{"command":"grep retry"}},{"type":"image","data":"cmV0cnk=","mime_type":"image/png"}],"timestamp":2}}"#,
            r#"{"type":"label","id":"a3","parent_id":"a2","timestamp":"2026-01-01T00:00:03.000Z","target_id":"a1","label":"café"}"#,
        ]);
        assert_eq!(ids("café", &d), ["a3", "a1"]);
        assert_eq!(ids("retry", &d), ["a2"]);
        assert!(ids("command", &d).is_empty());
        assert!(ids("a1", &d).is_empty());
        assert_eq!(ids("\"said café\"", &d), ["a1"]);
    }

    #[test]
    fn counts_agree_with_the_tokeniser() {
        let texts = [
            "merge merged MERGE Merge emerge _merge_ merge: merge\nmerge x-merge-y",
            "mergeé émerge 東京merge merge東京 merge🎉 İmerge",
            "café Café CAFÉ cafés xcafé café.",
            "ababa aba aba-aba abab",
            "\u{212A}elvin kelvin KELVIN K k",
            "SELECT … FOR UPDATE; for For fOr",
            "",
        ];
        let queries = [
            "merge",
            "merge*",
            "café",
            "aba",
            "aba*",
            "-merge aba",
            "kelvin",
            "k",
            "ka*",
            "é",
            "for",
            "merge -café",
            "merg*",
        ];
        let mut quick = 0;
        for q in queries {
            let searcher = Searcher::new(q, Filters::default()).unwrap();
            for t in texts {
                let owned = vec![std::borrow::Cow::Borrowed(t), "and merge".into()];
                let full = match_texts(searcher.query(), &owned, None).map(|m| m.score);
                if let Some(fast) = searcher.quick_score(&owned) {
                    quick += 1;
                    assert_eq!(fast, full, "{q:?} in {t:?}");
                }
            }
        }
        assert!(quick > 40, "{quick}");
    }

    /// The best hits by the long way: every line decoded, matched and scored, the
    /// first matching line of an id kept.
    fn reference(
        q: &str,
        lines: &[String],
        order: Order,
        limit: usize,
    ) -> Vec<(String, f64, String)> {
        let query = Query::parse(q).unwrap();
        let mut seen = std::collections::HashSet::new();
        let mut hits = Vec::new();
        for line in lines {
            let Some(e) = entry_text(line) else { continue };
            let Some(m) = match_texts(&query, &e.texts, None) else {
                continue;
            };
            if !seen.insert(e.id.clone()) {
                continue;
            }
            let (snippet, marks) = snippet(&e.texts, &m);
            hits.push(Hit {
                doc: 0,
                session_id: "s1".into(),
                ts_ms: parse_ms(&e.timestamp),
                entry_id: e.id,
                entry_type: e.entry_type,
                role: e.role,
                timestamp: e.timestamp,
                score: m.score,
                snippet,
                marks,
                on_branch: None,
                line: None,
            });
        }
        sort_hits(order, &mut hits);
        hits.truncate(limit);
        hits.into_iter()
            .map(|h| (h.entry_id, h.score, h.snippet))
            .collect()
    }

    /// A random entry line: texts of words, escapes and non-ASCII beside the word, in
    /// every field the search reads and some it does not; ids repeat now and then.
    fn random_line(rng: &mut fastrand::Rng, n: usize, escapes: bool) -> String {
        const PIECES: &[&str] = &[
            "merge",
            "Merge",
            "MERGE",
            "emerge",
            "merged",
            "merge_case",
            "a.merge.b",
            "\\nmerge",
            "merge\\n",
            "\\\\nmerge",
            "\\\"merge\\\"",
            "merge\\t",
            "émerge",
            "merge→",
            "«merge»",
            "café",
            "Café",
            "cafés",
            "東京merge",
            "the",
            "word",
            "x",
            "lorem ipsum dolor",
            "\\\\",
            "merg",
            "1234",
            "",
        ];
        fn text(rng: &mut fastrand::Rng) -> String {
            let k = rng.usize(0..12);
            let words: Vec<&str> = (0..k).map(|_| PIECES[rng.usize(..PIECES.len())]).collect();
            let pad = " filler".repeat(rng.usize(0..40));
            format!("{}{pad}", words.join(" "))
        }
        // Ids written twice late in the document, once a bar skips lines.
        let id = if n > 300 && rng.usize(0..6) == 0 {
            format!("d{}", rng.usize(0..3))
        } else {
            format!("e{n}")
        };
        let ts = format!("2026-01-01T00:{:02}:{:02}.000Z", (n / 60) % 60, n % 60);
        let head = r#"{"type":"#;
        let line = match rng.usize(0..9) {
            0 => format!(
                r#"{head}"message","id":"{id}","parent_id":null,"timestamp":"{ts}","message":{{"role":"user","content":"{}","timestamp":1}}}}"#,
                text(rng)
            ),
            1 => format!(
                r#"{head}"message","id":"{id}","parent_id":"p","timestamp":"{ts}","message":{{"role":"assistant","content":[{{"type":"thinking","thinking":"{}","signature":"merge"}},{{"type":"text","text":"{}"}},{{"type":"tool_call","id":"merge","name":"{}","arguments":{{"cmd":"{}","n":[3,{{"k":"{}"}}]}}}}],"usage":{{"cost":0.5}}}}}}"#,
                text(rng),
                text(rng),
                text(rng),
                text(rng),
                text(rng)
            ),
            2 => format!(
                r#"{head}"message","id":"{id}","timestamp":"{ts}","message":{{"role":"tool_result","content":[{{"type":"text","text":"{}"}},{{"type":"image","data":"merge=="}}]}}}}"#,
                text(rng)
            ),
            3 => format!(r#"{head}"label","id":"{id}","timestamp":"{ts}","label":"{}"}}"#, text(rng)),
            4 => format!(
                r#"{head}"compaction","id":"{id}","timestamp":"{ts}","summary":"{}"}}"#,
                text(rng)
            ),
            5 => format!(
                r#"{head}"custom_message","id":"{id}","timestamp":"{ts}","content":"{}"}}"#,
                text(rng)
            ),
            6 => format!(
                r#"{head}"message","id":"{id}","timestamp":"{ts}","message":{{"role":"bash_execution","command":"{}","output":"{}"}}}}"#,
                text(rng),
                text(rng)
            ),
            // Decoded: a `\u` escape (where the document may have one), a tab.
            7 if escapes => format!(
                "{head}\"label\",\"id\":\"{id}\",\"timestamp\":\"{ts}\",\t\"label\":\"{} m\\u0065rge\"}}",
                text(rng)
            ),
            7 => format!(
                "{head}\"label\",\"id\":\"{id}\",\"timestamp\":\"{ts}\",\t\"label\":\"{}\"}}",
                text(rng)
            ),
            _ => format!(r#"{head}"session_info","id":"{id}","timestamp":"{ts}","name":"{}"}}"#, text(rng)),
        };
        // Where the document may have one: `é` written as a `\u` escape in any text (a
        // message's content, a block's text, a tool call's arguments...).
        if escapes && rng.usize(0..3) == 0 {
            return line.replace('é', "\\u00e9");
        }
        line
    }

    #[test]
    fn equals_the_long_way_on_random_lines() {
        let mut rng = fastrand::Rng::with_seed(29);
        for round in 0..6 {
            let lines: Vec<String> = (0..600)
                .map(|n| random_line(&mut rng, n, round % 2 == 1))
                .collect();
            let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
            let d = doc(&refs);
            for q in [
                "merge",
                "café",
                "merg*",
                "merge -café",
                "café merge",
                "\"merge the\"",
                "x",
            ] {
                for (order, limit) in [
                    (Order::Relevance, 5),
                    (Order::Relevance, 40),
                    (Order::Newest, 7),
                ] {
                    let s = Searcher::new(q, Filters::default()).unwrap();
                    let got: Vec<(String, f64, String)> = s
                        .run(std::slice::from_ref(&d), order, Some(limit), 1)
                        .into_iter()
                        .map(|h| (h.entry_id, h.score, h.snippet))
                        .collect();
                    let want = reference(q, &lines, order, limit);
                    assert_eq!(got, want, "round {round}, {q:?}, {order:?}, {limit}");
                }
            }
        }
    }

    #[test]
    fn the_prefilter_looks_for_a_rare_part() {
        assert_eq!(prefilter_part("merge"), "rge");
        assert_eq!(prefilter_part("ab"), "ab");
        assert_eq!(prefilter_part("café"), "afé");
        assert_eq!(prefilter_part("zygomorphic"), "zyg");
    }

    #[test]
    fn times_read_as_milliseconds() {
        assert_eq!(parse_ms("1970-01-01T00:00:01.5Z"), Some(1500));
        assert_eq!(parse_ms("1970-01-02"), Some(86_400_000));
        assert_eq!(parse_ms("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_ms("nope"), None);
    }
}

#[cfg(test)]
mod timing {
    /// The steps of reading a common word's lines in place, each timed over every file
    /// (one thread): `SEARCH_TIMING_DIR=/path SEARCH_TIMING_WORD=merge cargo test
    /// --release --lib raw_steps -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement on local files"]
    fn raw_steps() {
        use super::super::inplace;
        use std::time::Instant;
        let Ok(dir) = std::env::var("SEARCH_TIMING_DIR") else {
            return;
        };
        let word = std::env::var("SEARCH_TIMING_WORD").unwrap_or_else(|_| "merge".into());
        let searcher = super::Searcher::new(&word, super::Filters::default()).unwrap();
        let counters = searcher.counters.as_deref().unwrap();
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        paths.sort();
        let t = Instant::now();
        let docs: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
        let total: usize = docs.iter().map(Vec::len).sum();
        println!("read {} MB: {:?}", total / 1_000_000, t.elapsed());
        let t = Instant::now();
        let n: usize = docs
            .iter()
            .map(|d| usize::from(memchr::memmem::find(d, b"\\u").is_some()))
            .sum();
        println!("\\u check: {:?} ({n})", t.elapsed());
        let t = Instant::now();
        let mut lines: Vec<(usize, usize, usize)> = Vec::new();
        let mut cache = searcher.prefilter.plain.create_cache();
        for (k, d) in docs.iter().enumerate() {
            let mut pos = memchr::memchr(b'\n', d).unwrap() + 1;
            while let Some(m) = searcher
                .prefilter
                .plain
                .search_with(&mut cache, &super::Input::new(d).span(pos..d.len()))
            {
                let start = memchr::memrchr(b'\n', &d[pos..m.start()]).map_or(pos, |i| pos + i + 1);
                let Some(end) = memchr::memchr(b'\n', &d[m.start()..]).map(|i| m.start() + i)
                else {
                    break;
                };
                lines.push((k, start, end));
                pos = end + 1;
            }
        }
        let bytes: usize = lines.iter().map(|l| l.2 - l.1).sum();
        println!(
            "prefilter: {:?} ({} lines, {} MB)",
            t.elapsed(),
            lines.len(),
            bytes / 1_000_000
        );
        for _round in 0..3 {
            let t = Instant::now();
            let ok = lines
                .iter()
                .filter(|l| simdutf8::basic::from_utf8(&docs[l.0][l.1..l.2]).is_ok())
                .count();
            println!("utf-8: {:?} ({ok})", t.elapsed());
            let t = Instant::now();

            let mut texts = Vec::new();
            let mut n_texts = 0;
            let strs: Vec<&str> = lines
                .iter()
                .map(|l| std::str::from_utf8(&docs[l.0][l.1..l.2]).unwrap())
                .collect();
            for l in &strs {
                if inplace::read(l, &mut texts, n > 0).is_some() {
                    n_texts += texts.len();
                }
            }
            println!("read in place: {:?} ({n_texts} texts)", t.elapsed());
            let t = Instant::now();
            let mut found = 0;
            let mut caches: Vec<_> = counters.iter().map(super::Counter::cache).collect();
            for l in &strs {
                if inplace::read(l, &mut texts, n > 0).is_some() {
                    for text in &texts {
                        let k = match text {
                            inplace::Text::Raw(r) => {
                                counters[0].count_raw(caches[0].as_mut(), r.as_bytes())
                            }
                            inplace::Text::Decoded(t) => {
                                counters[0].count_with(caches[0].as_mut(), t)
                            }
                        };
                        found += k.unwrap_or(0);
                    }
                }
            }
            println!("read and count: {:?} ({found} found)", t.elapsed());
        }
    }

    /// `SEARCH_TIMING_DIR=/path cargo test --release --lib timing -- --ignored --nocapture`
    #[test]
    #[ignore = "a measurement on local files"]
    fn where_the_time_goes() {
        let Ok(dir) = std::env::var("SEARCH_TIMING_DIR") else {
            return;
        };
        let mut lines = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_none_or(|x| x != "jsonl") {
                continue;
            }
            let data = std::fs::read(path).unwrap();
            for l in data.split(|&b| b == b'\n').skip(1) {
                if memchr::memmem::find(&l.to_ascii_lowercase(), b"merge").is_some() {
                    lines.push(String::from_utf8(l.to_vec()).unwrap());
                }
            }
        }
        let t = std::time::Instant::now();
        let texts: Vec<_> = lines.iter().filter_map(|l| super::entry_text(l)).collect();
        println!("{} lines, json {:?}", lines.len(), t.elapsed());
        let t = std::time::Instant::now();
        let mut n = 0;
        for e in &texts {
            for x in &e.texts {
                n += super::super::tokens::tokenize(x).list.len();
            }
        }
        println!("tokenize {:?} ({n} tokens)", t.elapsed());
        let q = super::Query::parse("merge").unwrap();
        let t = std::time::Instant::now();
        let m = texts
            .iter()
            .filter(|e| super::match_texts(&q, &e.texts, None).is_some())
            .count();
        println!("match_texts {:?} ({m})", t.elapsed());
    }
}
