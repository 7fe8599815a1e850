//! The scan's scoring pass: a term of one token is counted in a decoded text by a literal
//! search for its case forms, each found occurrence checked to be a whole token by the
//! bytes around it, so ranking an entry needs no tokenisation, no lowercased copy and no
//! allocation. Whenever a check would need the full tokeniser (a non-ASCII neighbour, a
//! script UAX #29 may cut), the count says so and the caller tokenises instead
//! ([`super::entry::match_texts`]), so the counts are always those of the tokeniser.

use regex_automata::meta::{Cache, Regex};
use regex_automata::util::prefilter::Prefilter;
use regex_automata::{Input, Span};

use super::query::{Query, Term};
use super::tokens::{joins, upper_variants};

/// What finds a literal in every case form.
#[derive(Debug)]
pub enum Finder {
    /// The case forms themselves, searched for by a vectorised literal search alone
    /// (the regex would trim a set of more than ten to their first bytes and confirm
    /// each find with an automaton).
    Literals(Prefilter),
    /// A regex of them (too many forms to list).
    Regex(Regex),
}

impl Finder {
    /// A cache for [`Counter::count_raw`] (one a thread: the regex's shared one is
    /// slower to take from a second thread).
    pub fn cache(&self) -> Option<Cache> {
        match self {
            Finder::Literals(_) => None,
            Finder::Regex(re) => Some(re.create_cache()),
        }
    }

    fn find(&self, cache: Option<&mut Cache>, b: &[u8], from: usize) -> Option<Span> {
        match self {
            Finder::Literals(p) => p.find(b, Span::from(from..b.len())),
            Finder::Regex(re) => {
                let input = Input::new(b).span(from..b.len());
                match cache {
                    Some(c) => re.search_with(c, &input),
                    None => re.search(&input),
                }
                .map(|m| m.span())
            }
        }
    }
}

/// How one term of a query is counted.
#[derive(Debug)]
pub struct Counter {
    /// Every case form of the token, or (`part` set) of a part of it (built like the
    /// scan's prefilter).
    re: Finder,
    /// For a token whose case forms are all ASCII: where the part `re` finds starts in
    /// the token, and the token, checked around each find (every case form of a long
    /// word is too many literals for a literal search).
    part: Option<(usize, Box<[u8]>)>,
    /// Whether the token is a prefix.
    prefix: bool,
}

/// The counters of a query's terms, in order; `None` when a term has several tokens or
/// characters the tokeniser may cut (then entries are tokenised). `build(literal)` gives
/// the finder of every case form of a literal; `part(token)` the part of a token to look
/// for.
pub fn counters(
    query: &Query,
    build: impl Fn(&str) -> Option<Finder>,
    part: impl Fn(&str) -> &str,
) -> Option<Vec<Counter>> {
    query
        .terms
        .iter()
        .map(|t| counter(t, &build, &part))
        .collect()
}

fn counter(
    term: &Term,
    build: &impl Fn(&str) -> Option<Finder>,
    part: &impl Fn(&str) -> &str,
) -> Option<Counter> {
    let [token] = term.tokens.as_slice() else {
        return None;
    };
    if !token.chars().all(joins) {
        return None;
    }
    let ascii = token
        .chars()
        .all(|c| c.is_ascii() && upper_variants(c).iter().all(char::is_ascii));
    if ascii {
        let p = part(token);
        let at = token.find(p)?;
        return Some(Counter {
            re: build(p)?,
            part: Some((at, token.as_bytes().into())),
            prefix: term.prefix,
        });
    }
    Some(Counter {
        re: build(token)?,
        part: None,
        prefix: term.prefix,
    })
}

/// Whether the characters of `span` are all ones no word boundary separates
/// ([`joins`]): the tokeniser keeps such a run whole.
fn simple(span: &[u8]) -> bool {
    span.is_ascii() || std::str::from_utf8(span).is_ok_and(|s| s.chars().all(joins))
}

impl Counter {
    /// How many tokens of `text` the term matches (as the tokeniser would count), or
    /// `None` when that takes the tokeniser.
    pub fn count(&self, text: &str) -> Option<usize> {
        self.count_in(None, text.as_bytes(), false)
    }

    /// A cache for [`Counter::count_raw`] ([`Finder::cache`]).
    pub fn cache(&self) -> Option<Cache> {
        self.re.cache()
    }

    /// [`Counter::count`] with the worker's cache.
    pub fn count_with(&self, cache: Option<&mut Cache>, text: &str) -> Option<usize> {
        self.count_in(cache, text.as_bytes(), false)
    }

    /// [`Counter::count`] of the text a JSON string's raw bytes `raw` (between its
    /// quotes) decode to, read in place: `raw` must hold no `\u` escape (see
    /// the in-place reading). Its other escapes decode to characters that are never part of a
    /// token, so a find that starts with an escape's letter (`n` of `\n`) is none, and an
    /// escape beside a find is a word boundary.
    pub fn count_raw(&self, cache: Option<&mut Cache>, raw: &[u8]) -> Option<usize> {
        self.count_in(cache, raw, true)
    }

    fn count_in(&self, cache: Option<&mut Cache>, b: &[u8], escaped: bool) -> Option<usize> {
        let mut n = 0;
        let mut sure = true;
        self.each(cache, b, 0, escaped, |_, certain| {
            n += 1;
            sure = certain;
            certain
        });
        sure.then_some(n)
    }

    /// Where the term may match in a JSON line's raw bytes `line` (holding no `\u`
    /// escape): the start of every find [`Counter::count_raw`] would count or send to
    /// the tokeniser, pushed to `out`. A match of the term in any text of the line is
    /// among them (its quotes are word boundaries), with finds in keys and other fields.
    /// `from`: where to look from (no find starts before it).
    pub fn finds_raw(
        &self,
        cache: Option<&mut Cache>,
        line: &[u8],
        from: usize,
        out: &mut Vec<usize>,
    ) {
        self.each(cache, line, from, true, |m, _| {
            out.push(m.start);
            true
        });
    }

    /// Calls `f(find, certain)` for each find in `b` the tokeniser may count: `certain`
    /// when it surely does, `false` when that takes the tokeniser (a non-ASCII
    /// neighbour); stops when `f` says so. `escaped`: `b` is a JSON string's raw bytes.
    fn each(
        &self,
        mut cache: Option<&mut Cache>,
        b: &[u8],
        mut from: usize,
        escaped: bool,
        mut f: impl FnMut(std::ops::Range<usize>, bool) -> bool,
    ) {
        // Whether the byte at `i` is an escape's letter: after an odd run of backslashes.
        let escape_letter =
            |i: usize| escaped && b[..i].iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 1;
        while let Some(found) = self.re.find(cache.as_deref_mut(), b, from) {
            let m = match &self.part {
                None => {
                    from = found.end;
                    found.range()
                }
                Some((at, token)) => {
                    // Finds may overlap (a part like `aba`): the next starts one on.
                    from = found.start + 1;
                    let Some(start) = found.start.checked_sub(*at) else {
                        continue;
                    };
                    let end = start + token.len();
                    if !b
                        .get(start..end)
                        .is_some_and(|s| s.eq_ignore_ascii_case(token))
                    {
                        continue;
                    }
                    start..end
                }
            };
            if escape_letter(m.start) {
                continue;
            }
            // The byte before must end the previous run: ASCII and not a token character
            // (or an escape's letter).
            let mut certain = true;
            if let Some(&p) = b[..m.start].last() {
                if p >= 0x80 {
                    certain = false;
                } else if p.is_ascii_alphanumeric() && !escape_letter(m.start - 1) {
                    continue;
                }
            }
            if !simple(&b[m.clone()]) {
                certain = false;
            }
            match b.get(m.end) {
                None => {}
                Some(&q) if q >= 0x80 => certain = false,
                // A longer token: a match for a prefix only.
                Some(&q) if q.is_ascii_alphanumeric() && !self.prefix => continue,
                Some(_) => {}
            }
            if !f(m, certain) {
                return;
            }
        }
    }
}

/// How many escapes a JSON string's raw bytes (between its quotes, no `\u` escape)
/// hold: each is a backslash and one byte, read in pairs.
pub fn escapes(raw: &[u8]) -> usize {
    let mut n = 0;
    let mut at = 0;
    while let Some(k) = raw.get(at..).and_then(|r| memchr::memchr(b'\\', r)) {
        n += 1;
        at += k + 2;
    }
    n
}

/// The per-term counts over `texts` (summed), or `None` when one needs the tokeniser.
pub fn count_terms(
    counters: &[Counter],
    texts: &[std::borrow::Cow<'_, str>],
) -> Option<Vec<usize>> {
    let mut out = vec![0usize; counters.len()];
    for t in texts {
        for (c, o) in counters.iter().zip(out.iter_mut()) {
            *o += c.count(t)?;
        }
    }
    Some(out)
}
