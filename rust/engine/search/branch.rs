//! Which entries of a session are on its current branch, told from the lines the scan has
//! read anyway, so a hit's `on_branch` costs no second read of the session.
//!
//! The fast path reads only the start of each line: `{"type":"T","id":"I","parent_id":P`,
//! the order this library writes, and replays the leaf as the format defines it (after an
//! entry the leaf is the entry, after a `leaf` entry its `target_id`). Anything else (a
//! line in another shape, a duplicated id, a parent or leaf target not seen before, a line
//! over the limits, pi's dialect) gives `None`: the caller asks the reader instead, which
//! knows every rule of the format. One rule is not checked, as it would cost a pass over
//! every byte: a line nested deeper than the reader's limit (128 levels, written only by
//! hand) counts here as the entry its start says; the reader skips it.

use std::collections::{HashMap, HashSet};

use foldhash::fast::RandomState;

use memchr::memchr;
use serde::Deserialize;

/// The limits a line must be within to be read by the fast path (the reader skips lines
/// beyond them).
#[derive(Debug, Clone, Copy)]
pub struct LineLimits {
    /// The longest line, in bytes.
    pub max_line_bytes: usize,
    /// The longest entry id, in bytes.
    pub max_id_bytes: usize,
}

/// A JSON string starting at `at` (its opening quote) with no escape: its contents and
/// the offset past its closing quote.
fn plain_string(line: &[u8], at: usize) -> Option<(&[u8], usize)> {
    if line.get(at) != Some(&b'"') {
        return None;
    }
    let len = memchr(b'"', &line[at + 1..])?;
    let s = &line[at + 1..at + 1 + len];
    if s.contains(&b'\\') || s.iter().any(|&c| c < 0x20) {
        return None;
    }
    Some((s, at + len + 2))
}

/// The start of an entry line: its type, id and parent id, and where the rest starts.
type Head<'a> = (&'a [u8], &'a [u8], Option<&'a [u8]>, usize);

/// `(type, id, parent id, offset past it)` from the start of an entry line.
fn head(line: &[u8]) -> Option<Head<'_>> {
    let rest = line.strip_prefix(b"{\"type\":")?;
    let at = line.len() - rest.len();
    let (ty, at) = plain_string(line, at)?;
    let at = at + line[at..].strip_prefix(b",\"id\":".as_slice()).map(|_| 6)?;
    let (id, at) = plain_string(line, at)?;
    let at = at
        + line[at..]
            .strip_prefix(b",\"parent_id\":".as_slice())
            .map(|_| 13)?;
    let (parent, at) = if line[at..].starts_with(b"null") {
        (None, at + 4)
    } else {
        let (p, at) = plain_string(line, at)?;
        (Some(p), at)
    };
    Some((ty, id, parent, at))
}

/// The `id` an entry line starts with, after its type (the order this library writes),
/// when it is a string without escapes.
pub fn head_id(line: &[u8]) -> Option<&[u8]> {
    head(line).map(|(_, id, _, _)| id)
}

/// The `timestamp` an entry line starts with, after its type, id and parent id (the
/// order this library writes), when it is a string without escapes.
pub fn head_timestamp(line: &[u8]) -> Option<&str> {
    let (_, _, _, at) = head(line)?;
    let at = at
        + line[at..]
            .strip_prefix(b",\"timestamp\":".as_slice())
            .map(|_| 13)?;
    std::str::from_utf8(plain_string(line, at)?.0).ok()
}

#[derive(Deserialize)]
struct LeafTarget<'a> {
    #[serde(borrow)]
    target_id: Option<&'a str>,
}

/// The ids on the current branch of a session document in sessiontree's dialect (`body`:
/// the lines after the header), or `None` when the fast path cannot tell (see the module
/// doc).
pub fn branch_ids(body: &[u8], limits: LineLimits) -> Option<HashSet<&[u8], RandomState>> {
    let mut parent: HashMap<&[u8], Option<&[u8]>, RandomState> = HashMap::default();
    let mut leaf: Option<&[u8]> = None;
    let mut pos = 0;
    while pos < body.len() {
        // A last line without its newline is torn: not an entry.
        let Some(nl) = memchr(b'\n', &body[pos..]) else {
            break;
        };
        let raw = &body[pos..pos + nl];
        pos += nl + 1;
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if line.len() > limits.max_line_bytes || !line.ends_with(b"}") {
            return None;
        }
        let (ty, id, up, _) = head(line)?;
        if id.is_empty() || id.len() > limits.max_id_bytes || parent.contains_key(id) {
            return None;
        }
        if up.is_some_and(|p| !parent.contains_key(p)) {
            return None;
        }
        parent.insert(id, up);
        leaf = if ty == b"leaf" {
            let t: LeafTarget<'_> = serde_json::from_slice(line).ok()?;
            match t.target_id {
                None => None,
                Some(t) => Some(parent.get_key_value(t.as_bytes())?.0),
            }
        } else {
            Some(id)
        };
    }
    let mut on = HashSet::default();
    let mut at = leaf;
    while let Some(id) = at {
        if !on.insert(id) {
            break;
        }
        at = parent.get(id).copied().flatten();
    }
    Some(on)
}

/// Which of `ids` are on the current branch of session document `data` (header first), by
/// [`branch_ids`]; `None` when it cannot tell (pi's dialect too).
pub fn document_members(data: &[u8], ids: &[String], limits: LineLimits) -> Option<Vec<bool>> {
    let nl = memchr(b'\n', data)?;
    let header = std::str::from_utf8(&data[..nl]).ok()?;
    let firsts = data[nl + 1..]
        .split(|&b| b == b'\n')
        .take(4)
        .filter_map(|l| std::str::from_utf8(l).ok());
    let dialect = crate::engine::dialect::detect(header.trim_end_matches('\r'), firsts).ok()?;
    if dialect != crate::engine::dialect::Dialect::Native {
        return None;
    }
    let on = branch_ids(&data[nl + 1..], limits)?;
    Some(ids.iter().map(|id| on.contains(id.as_bytes())).collect())
}

/// [`document_members`] of each `(path, ids)`, read on up to `threads` threads; `None`
/// for a file that cannot be read or told.
pub fn files_members(
    files: &[(std::path::PathBuf, Vec<String>)],
    limits: LineLimits,
    threads: usize,
) -> Vec<Option<Vec<bool>>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let one = |(path, ids): &(std::path::PathBuf, Vec<String>)| {
        std::fs::read(path)
            .ok()
            .and_then(|data| document_members(&data, ids, limits))
    };
    if threads <= 1 || files.len() <= 1 {
        // No thread to start for one file (an indexed search's few hits).
        return files.iter().map(one).collect();
    }
    let next = AtomicUsize::new(0);
    let out: Vec<std::sync::Mutex<Option<Vec<bool>>>> =
        files.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, files.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(file) = files.get(i) else {
                    break;
                };
                let told = one(file);
                *out[i]
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = told;
            });
        }
    });
    out.into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: LineLimits = LineLimits {
        max_line_bytes: 1 << 20,
        max_id_bytes: 128,
    };

    fn ids(body: &str) -> Option<Vec<String>> {
        branch_ids(body.as_bytes(), LIMITS).map(|s| {
            let mut v: Vec<String> = s
                .into_iter()
                .map(|b| String::from_utf8(b.to_vec()).unwrap())
                .collect();
            v.sort();
            v
        })
    }

    #[test]
    fn replays_the_leaf() {
        let body = concat!(
            "{\"type\":\"message\",\"id\":\"a\",\"parent_id\":null,\"x\":1}\n",
            "{\"type\":\"message\",\"id\":\"b\",\"parent_id\":\"a\",\"x\":1}\n",
            "{\"type\":\"leaf\",\"id\":\"l\",\"parent_id\":\"b\",\"target_id\":\"a\"}\n",
            "{\"type\":\"message\",\"id\":\"c\",\"parent_id\":\"a\",\"x\":1}\n",
            "{\"type\":\"message\",\"id\":\"torn\",\"parent_id\":\"c\""
        );
        assert_eq!(ids(body).unwrap(), ["a", "c"]);
        let back = "{\"type\":\"message\",\"id\":\"a\",\"parent_id\":null}\n{\"type\":\"leaf\",\"id\":\"l\",\"parent_id\":\"a\",\"target_id\":null}\n";
        assert_eq!(ids(back).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn reads_the_time_at_the_start() {
        let line = br#"{"type":"message","id":"a","parent_id":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"timestamp":"x"}}"#;
        assert_eq!(head_timestamp(line), Some("2026-01-01T00:00:00.000Z"));
        let later =
            br#"{"type":"message","id":"a","parent_id":"p","message":{},"timestamp":"2026"}"#;
        assert_eq!(head_timestamp(later), None);
    }

    #[test]
    fn leaves_the_unusual_to_the_reader() {
        for body in [
            "{\"id\":\"a\",\"type\":\"message\",\"parent_id\":null}\n",
            "{\"type\":\"message\",\"id\":\"a\",\"parent_id\":\"zz\"}\n",
            "{\"type\":\"message\",\"id\":\"a\",\"parent_id\":null}\n{\"type\":\"message\",\"id\":\"a\",\"parent_id\":null}\n",
            "{\"type\":\"message\",\"id\":\"a\\u0041\",\"parent_id\":null}\n",
            "{\"type\":\"message\",\"id\":\"a\",\"parent_id\":null\n",
            "{\"type\":\"leaf\",\"id\":\"l\",\"parent_id\":null,\"target_id\":\"nope\"}\n",
        ] {
            assert!(ids(body).is_none(), "{body}");
        }
    }
}
