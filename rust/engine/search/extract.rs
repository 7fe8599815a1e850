//! What the search index stores of a session file: each entry line's searched texts as
//! tokens ([`extract`], [`line_tokens`]), the same texts and tokens the scan matches.

use std::fs::File;
use std::io::Read;

use memchr::{memchr, memrchr};

use crate::engine::dialect::{detect, entry_to_native, Dialect};

use super::entry::entry_text;
use super::tokens::{each_token, lowercase};

/// What the search index stores of a session file's lines: see [`extract`].
#[derive(Debug, Default)]
pub struct Extracted {
    /// The offset just past the last complete line read.
    pub end: u64,
    /// The header line (no newline).
    pub header: Vec<u8>,
    /// Whether the file is pi v1 (ids come from line numbers): the index leaves such
    /// files to the scan.
    pub legacy: bool,
    /// Per entry line with searched text: (offset, length, its tokens joined by spaces).
    pub rows: Vec<(u64, u64, String)>,
}

/// Reads session file `path` from byte `from` (0: the start; the header is never a row)
/// to its last complete line, and gives the tokens of each entry line's searched texts
/// (the same texts and tokens the scan matches).
///
/// # Errors
/// The file cannot be read.
pub fn extract(path: &std::path::Path, from: u64) -> std::io::Result<Extracted> {
    use std::io::{Seek, SeekFrom};
    let mut file = File::open(path)?;
    let mut head = Vec::new();
    let mut out = Extracted::default();
    // The header and the first lines (the dialect is told from them); a header longer
    // than a chunk (large metadata) is read on to its newline.
    let nl = loop {
        let before = head.len();
        (&mut file).take(1 << 16).read_to_end(&mut head)?;
        if let Some(nl) = memchr(b'\n', &head) {
            break nl;
        }
        if head.len() == before {
            return Ok(out); // no complete header yet
        }
    };
    out.header = head[..nl].to_vec();
    let header = String::from_utf8_lossy(&head[..nl]).into_owned();
    let firsts = head[nl + 1..]
        .split(|&b| b == b'\n')
        .take(4)
        .filter_map(|l| std::str::from_utf8(l).ok());
    let dialect = detect(header.trim_end_matches('\r'), firsts).unwrap_or_default();
    let start = from.max(nl as u64 + 1);
    out.end = start;
    if dialect == Dialect::Pi(1) {
        out.legacy = true;
        return Ok(out);
    }
    file.seek(SeekFrom::Start(start))?;
    let mut data = Vec::new();
    file.read_to_end(&mut data)?;
    let Some(last) = memrchr(b'\n', &data) else {
        return Ok(out);
    };
    out.end = start + last as u64 + 1;
    let mut pos = 0usize;
    while pos <= last {
        let end = memchr(b'\n', &data[pos..]).map_or(last, |i| pos + i);
        let raw = data[pos..end]
            .strip_suffix(b"\r")
            .unwrap_or(&data[pos..end]);
        if let Ok(text) = simdutf8::basic::from_utf8(raw) {
            let native = if dialect.is_pi() {
                entry_to_native(text, dialect, None).ok()
            } else {
                None
            };
            if let Some(e) = entry_text(native.as_deref().unwrap_or(text)) {
                let toks = joined_tokens(&e.texts);
                if !toks.is_empty() {
                    out.rows
                        .push((start + pos as u64, (end - pos) as u64, toks));
                }
            }
        }
        pos = end + 1;
    }
    Ok(out)
}

/// The tokens of one entry line's searched texts, joined by spaces (`""` when it has no
/// searched text); `pi` for a line in pi's (v3) dialect.
pub fn line_tokens(line: &[u8], pi: bool) -> String {
    let Ok(text) = std::str::from_utf8(line.strip_suffix(b"\r").unwrap_or(line)) else {
        return String::new();
    };
    let native = if pi {
        entry_to_native(text, Dialect::Pi(3), None).ok()
    } else {
        None
    };
    entry_text(native.as_deref().unwrap_or(text))
        .map_or_else(String::new, |e| joined_tokens(&e.texts))
}

/// The lowercased tokens of `texts`, joined by spaces.
fn joined_tokens<S: AsRef<str>>(texts: &[S]) -> String {
    let mut toks = String::new();
    for t in texts {
        let t = t.as_ref();
        each_token(t, |s, e| {
            if !toks.is_empty() {
                toks.push(' ');
            }
            toks.push_str(&lowercase(&t[s..e]));
        });
    }
    toks
}
