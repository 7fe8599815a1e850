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

/// One token of a text: its lowercased form and where it is (byte offsets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The lowercased token.
    pub text: String,
    /// Byte offset of its first character in the text.
    pub start: usize,
    /// Byte offset just past its last character.
    pub end: usize,
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

/// Calls `f(start, end)` for every token of `text` (byte offsets), in order.
pub fn each_token(text: &str, mut f: impl FnMut(usize, usize)) {
    // ASCII-only words need no UAX #29 pass: the cut at non-token characters alone gives
    // the same tokens, and it is several times faster.
    if text.is_ascii() {
        ascii_runs(text.as_bytes(), 0, &mut f);
        return;
    }
    for (at, word) in text.split_word_bound_indices() {
        let mut start = None;
        for (i, c) in word.char_indices() {
            match (is_token_char(c), start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    f(at + s, at + i);
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            f(at + s, at + word.len());
        }
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
pub fn tokenize(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    each_token(text, |start, end| {
        out.push(Token {
            text: lowercase(&text[start..end]),
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
        for u in 0..=0x10FFFFu32 {
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
        for t in tokenize(text) {
            assert_eq!(lowercase(&text[t.start..t.end]), t.text);
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
