//! The tokeniser: the one definition of a searchable word, used by the scan, the index
//! and (through `_core.search_tokens`) PostgreSQL.
//!
//! Text is cut at Unicode word boundaries (UAX #29, so CJK ideographs and emoji are words
//! of their own), then each word is cut again at every character that is not a *token
//! character*: ASCII letters and digits, and any non-ASCII character that is not white
//! space, a control character or punctuation. So `snake_case`, `dotted.names` and
//! `paths/like/this` give their parts, and a query word made of several parts is a phrase
//! of them. Tokens are lowercased one character at a time ([`lower`]), the same on every
//! side, which is what "case-insensitive" means here.

use std::collections::HashMap;
use std::sync::OnceLock;

use unicode_segmentation::UnicodeSegmentation;

/// One token of a text: where its lowercased form is in [`Tokens::low`] and where it is
/// in the text (byte offsets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// Its lowercased form: `low[lo..hi]`.
    pub lo: usize,
    /// See `lo`.
    pub hi: usize,
    /// Byte offset of its first character in the text.
    pub start: usize,
    /// Byte offset just past its last character.
    pub end: usize,
}

/// The tokens of a text, their lowercased forms in one string (one allocation a text,
/// not one a token).
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    /// Every token's lowercase, back to back.
    pub low: String,
    /// The tokens, in order.
    pub list: Vec<Token>,
}

impl Tokens {
    /// The lowercased text of token `t`.
    pub fn text(&self, t: &Token) -> &str {
        &self.low[t.lo..t.hi]
    }
}

/// The lowercase of one character: the first character of its full lowercase (only `İ`
/// lowercases to two, `i` and a combining dot; it becomes `i`), so a token has as many
/// characters as the text it comes from.
pub fn lower(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    c.to_lowercase().next().unwrap_or(c)
}

/// Whether `c` can be part of a token (see the module doc).
pub fn is_token_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    !(c.is_whitespace() || c.is_control() || is_punctuation(c))
}

/// Non-ASCII punctuation: the Latin-1 signs, general and supplemental punctuation (but not
/// the zero-width joiners emoji sequences are made of), CJK and fullwidth punctuation and a
/// few script-specific marks.
fn is_punctuation(c: char) -> bool {
    let u = c as u32;
    match u {
        0x00A0..=0x00BF => !c.is_alphanumeric(),
        0x00D7 | 0x00F7 => true,
        0x200C | 0x200D => false,
        0x2000..=0x206F | 0x2E00..=0x2E7F => true,
        0x3000..=0x303F => !c.is_alphanumeric(),
        0x30FB | 0x060C | 0x061B | 0x061F | 0x066A..=0x066D | 0x0964 | 0x0965 => true,
        0xFE10..=0xFE1F | 0xFE30..=0xFE4F | 0xFE50..=0xFE6F => true,
        0xFF01..=0xFF0F | 0xFF1A..=0xFF20 | 0xFF3B..=0xFF40 | 0xFF5B..=0xFF65 => true,
        _ => false,
    }
}

/// Whether UAX #29 never puts a word boundary between two token characters of the
/// scripts below U+0E00 (Latin, Greek, Cyrillic, Hebrew, Arabic, Indic, ...) and Latin and
/// Greek Extended: their letters, digits and marks join (WB5-WB13), so a run of them is one
/// word and needs no segmentation pass.
pub fn joins(c: char) -> bool {
    let u = c as u32;
    u < 0x0E00 || (0x1E00..0x2000).contains(&u)
}

/// Calls `f(start, end)` for every token of `text` (byte offsets), in order: each run of
/// token characters, cut again at its Unicode word boundaries when it holds characters
/// UAX #29 may separate (ideographs, kana, emoji, Thai, ...).
pub fn each_token(text: &str, mut f: impl FnMut(usize, usize)) {
    if text.is_ascii() {
        ascii_runs(text.as_bytes(), 0, &mut f);
        return;
    }
    let run = |s: usize, e: usize, simple: bool, f: &mut dyn FnMut(usize, usize)| {
        if simple {
            f(s, e);
        } else {
            for (at, word) in text[s..e].split_word_bound_indices() {
                f(s + at, s + at + word.len());
            }
        }
    };
    let b = text.as_bytes();
    let mut start: Option<(usize, bool)> = None;
    let mut i = 0;
    while i < b.len() {
        // ASCII bytes without decoding a character: most of any text.
        let (token, simple, len) = if b[i] < 0x80 {
            (b[i].is_ascii_alphanumeric(), true, 1)
        } else {
            let c = text[i..].chars().next().unwrap_or(' ');
            (is_token_char(c), joins(c), c.len_utf8())
        };
        match (token, start) {
            (true, None) => start = Some((i, simple)),
            (true, Some((s, true))) if !simple => start = Some((s, false)),
            (false, Some((s, was_simple))) => {
                run(s, i, was_simple, &mut f);
                start = None;
            }
            _ => {}
        }
        i += len;
    }
    if let Some((s, simple)) = start {
        run(s, text.len(), simple, &mut f);
    }
}

fn ascii_runs(b: &[u8], base: usize, f: &mut impl FnMut(usize, usize)) {
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphanumeric() {
            let s = i;
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                i += 1;
            }
            f(base + s, base + i);
        } else {
            i += 1;
        }
    }
}

/// The lowercase of `text` (character by character, see [`lower`]).
pub fn lowercase(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    text.chars().map(lower).collect()
}

/// Every token of `text`, with its position.
pub fn tokenize(text: &str) -> Tokens {
    let mut out = Tokens {
        low: String::with_capacity(text.len()),
        list: Vec::new(),
    };
    each_token(text, |start, end| {
        let lo = out.low.len();
        let word = &text[start..end];
        if word.is_ascii() {
            out.low
                .extend(word.bytes().map(|b| char::from(b.to_ascii_lowercase())));
        } else {
            out.low.extend(word.chars().map(lower));
        }
        out.list.push(Token {
            lo,
            hi: out.low.len(),
            start,
            end,
        });
    });
    out
}

/// Every token of `text`, lowercased, without positions (what an index stores).
pub fn token_texts(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    each_token(text, |start, end| out.push(lowercase(&text[start..end])));
    out
}

/// For each lowercase character, the other characters that lowercase to it (`k` → `K`
/// and the Kelvin sign): what a byte-level prefilter must also accept.
pub fn upper_variants(c: char) -> &'static [char] {
    static TABLE: OnceLock<HashMap<char, Vec<char>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut map: HashMap<char, Vec<char>> = HashMap::new();
        // Every character with a lowercase mapping is below U+1E960 (Adlam is the last
        // cased script), so the table is built from that range alone.
        for u in 0..0x1E960u32 {
            if let Some(ch) = char::from_u32(u) {
                let l = lower(ch);
                if l != ch {
                    map.entry(l).or_default().push(ch);
                }
            }
        }
        map
    });
    table.get(&c).map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        token_texts(text)
    }

    #[test]
    fn words_and_their_parts() {
        assert_eq!(
            words("Retry snake_case dotted.names paths/like/this v1.2"),
            ["retry", "snake", "case", "dotted", "names", "paths", "like", "this", "v1", "2"]
        );
        assert_eq!(
            words("«Café» au lait—déjà vu"),
            ["café", "au", "lait", "déjà", "vu"]
        );
        assert_eq!(
            words("東京タワーに行く"),
            ["東", "京", "タワー", "に", "行", "く"]
        );
        assert_eq!(words("party 🎉🎉 time"), ["party", "🎉", "🎉", "time"]);
        assert_eq!(words("ÉCOLE İstanbul"), ["école", "istanbul"]);
        assert!(words(" ,.;:!?()[]{}<>\"'\u{0}\t\n").is_empty());
    }

    #[test]
    fn positions_point_at_the_text() {
        let text = "a «Bé» c";
        let toks = tokenize(text);
        for t in &toks.list {
            assert_eq!(lowercase(&text[t.start..t.end]), toks.text(t));
        }
    }

    #[test]
    fn variants_cover_every_uppercase() {
        assert!(upper_variants('k').contains(&'K'));
        assert!(upper_variants('k').contains(&'\u{212A}'));
        assert!(upper_variants('i').contains(&'İ'));
        assert!(upper_variants('é').contains(&'É'));
    }
}
