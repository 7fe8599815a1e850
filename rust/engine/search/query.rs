//! The query language, parsed once into a [`Query`] every backend evaluates the same way.
//!
//! * words match whole tokens, case-insensitively ([`super::tokens`]); every word must
//!   appear in the entry;
//! * `"quoted phrases"` match consecutive tokens (within one text of the entry), and so
//!   does a word with parts (`snake_case` is the phrase `snake case`);
//! * `-word` (or `-"a phrase"`) excludes the entries that have it;
//! * a trailing `*` matches a prefix of the (last) token: `retr*`, `"exponential back*"`.
//!
//! A query with nothing to find (empty, only punctuation, only exclusions), an unbalanced
//! quote or more than [`MAX_TERMS`] terms is refused with a message saying why.

use crate::engine::error::{EngineError, ErrorCode};

use super::tokens::{lowercase, token_texts};

/// The most terms (words, phrases, exclusions) one query may have.
pub const MAX_TERMS: usize = 64;
/// The longest query, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;

/// One term: a word (one token) or a phrase (several), the last maybe a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// The lowercased tokens, in order (at least one).
    pub tokens: Vec<String>,
    /// Whether the last token matches as a prefix.
    pub prefix: bool,
    /// Whether the term excludes entries (`-word`).
    pub negated: bool,
}

impl Term {
    /// Whether the token at `tokens[i]` can start a match of this term, and how many
    /// tokens it spans.
    pub fn matches_at(&self, tokens: &[&str], i: usize) -> bool {
        let n = self.tokens.len();
        if i + n > tokens.len() {
            return false;
        }
        self.tokens.iter().enumerate().all(|(k, want)| {
            let have = tokens[i + k];
            if self.prefix && k == n - 1 {
                have.starts_with(want.as_str())
            } else {
                have == want
            }
        })
    }
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The terms, in the order written.
    pub terms: Vec<Term>,
}

fn invalid(msg: impl Into<String>) -> EngineError {
    EngineError::new(ErrorCode::InvalidArgument, msg)
}

impl Query {
    /// Parses `text` (see the module doc).
    ///
    /// # Errors
    /// `invalid_argument` for a query with nothing to find, an unbalanced quote, or one
    /// too long or with too many terms. (A NUL or any other non-token character only
    /// separates words.)
    pub fn parse(text: &str) -> Result<Query, EngineError> {
        if text.len() > MAX_QUERY_BYTES {
            return Err(invalid(format!(
                "the query is too long ({} bytes; at most {MAX_QUERY_BYTES})",
                text.len()
            )));
        }
        let mut terms = Vec::new();
        let mut rest = text;
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            let mut negated = false;
            if let Some(after) = rest.strip_prefix('-') {
                if after.starts_with(|c: char| !c.is_whitespace()) {
                    negated = true;
                    rest = after;
                }
            }
            let (body, after) = if let Some(inner) = rest.strip_prefix('"') {
                let Some(close) = inner.find('"') else {
                    return Err(invalid(
                        "the query has an unbalanced quote (a phrase is written \"like this\")",
                    ));
                };
                (&inner[..close], &inner[close + 1..])
            } else {
                let end = rest
                    .find(|c: char| c.is_whitespace() || c == '"')
                    .unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            };
            // A `*` right after the word or the closing quote.
            let (body, prefix, after) = match after.strip_prefix('*') {
                Some(more) => (body, true, more.trim_start_matches('*')),
                None => match body.strip_suffix('*') {
                    Some(b) => (b.trim_end_matches('*'), true, after),
                    None => (body, false, after),
                },
            };
            rest = after;
            let tokens = token_texts(body);
            if tokens.is_empty() {
                continue;
            }
            terms.push(Term {
                tokens,
                prefix,
                negated,
            });
            if terms.len() > MAX_TERMS {
                return Err(invalid(format!(
                    "the query has too many terms (at most {MAX_TERMS})"
                )));
            }
        }
        if terms.iter().all(|t| t.negated) {
            return Err(invalid(if terms.is_empty() {
                "the query has no word to search for".to_owned()
            } else {
                "the query only excludes words: give at least one word to search for".to_owned()
            }));
        }
        Ok(Query { terms })
    }

    /// The positive terms (those an entry must have).
    pub fn positive(&self) -> impl Iterator<Item = &Term> {
        self.terms.iter().filter(|t| !t.negated)
    }

    /// The token a byte-level prefilter looks for: the longest of the positive terms'
    /// tokens (a prefix counts as what it starts with), the rarest in most texts.
    pub fn needle(&self) -> &str {
        self.positive()
            .flat_map(|t| t.tokens.iter())
            .max_by_key(|t| t.chars().count())
            .map_or("", String::as_str)
    }

    /// The query written back in its normal form (lowercased tokens, phrases quoted).
    pub fn normal_form(&self) -> String {
        let mut out = String::new();
        for t in &self.terms {
            if !out.is_empty() {
                out.push(' ');
            }
            if t.negated {
                out.push('-');
            }
            let joined = t.tokens.join(" ");
            if t.tokens.len() > 1 {
                out.push('"');
                out.push_str(&joined);
                out.push('"');
            } else {
                out.push_str(&lowercase(&joined));
            }
            if t.prefix {
                out.push('*');
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(tokens: &[&str], prefix: bool, negated: bool) -> Term {
        Term {
            tokens: tokens.iter().map(|s| (*s).to_owned()).collect(),
            prefix,
            negated,
        }
    }

    #[test]
    fn parses_words_phrases_exclusions_prefixes() {
        let q =
            Query::parse(r#"Retry "connection  refused" -flaky back* snake_case -"a b"*"#).unwrap();
        assert_eq!(
            q.terms,
            [
                t(&["retry"], false, false),
                t(&["connection", "refused"], false, false),
                t(&["flaky"], false, true),
                t(&["back"], true, false),
                t(&["snake", "case"], false, false),
                t(&["a", "b"], true, true),
            ]
        );
        assert_eq!(q.needle(), "connection");
    }

    #[test]
    fn refuses_what_has_nothing_to_find() {
        for bad in ["", "   ", "-x", "!!! ...", "\"unbalanced", "*", "- -"] {
            let err = Query::parse(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidArgument, "{bad:?}");
        }
        let many = vec!["w"; MAX_TERMS + 1].join(" ");
        assert!(Query::parse(&many).is_err());
        assert!(Query::parse("a\u{0}b").is_ok());
        assert!(Query::parse(".*[a-z]+(?i)\\d").is_ok());
    }
}
