//! Ingesting lines: scanned batches are parsed on every core, then applied to the arena in
//! file order under the lenient reader's rules (or refused in strict mode).

use std::io::{Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;

use crate::engine::arena::RefProblem;
use crate::engine::error::{err, EngineError, ErrorCode, Result};
use crate::engine::jsonl::{scan, scan_error, BatchLine, IssueKind, Limits, Line, LoadIssue};
use crate::engine::line::{parse_entry_fast, parse_entry_serde, ParsedEntry};
use crate::engine::open::Backing;
use crate::engine::store::Store;

impl Store {
    /// Scans lines after the known part; returns the number of torn-tail bytes.
    pub(super) fn scan_from<R: std::io::Read>(
        &mut self,
        reader: &mut R,
        offset: u64,
    ) -> Result<u64> {
        let path = self
            .file_backing()
            .map(|b| b.path.clone())
            .unwrap_or_default();
        let hint = match &self.backing {
            Backing::File(b) => b
                .file
                .metadata()
                .map_or(0, |m| m.len().saturating_sub(offset)),
            Backing::Memory(_) => 0,
        };
        let end = scan(
            reader,
            offset,
            self.next_line_no,
            self.limits.max_line_bytes,
            usize::try_from(hint).unwrap_or(usize::MAX),
            |batch| self.ingest_batch(batch),
        )
        .map_err(|e| scan_error(&path, e))?;
        self.next_line_no = end.next_line_no;
        let file_len = match &self.backing {
            Backing::File(b) => b.file.metadata().map(|m| m.len()).unwrap_or(end.good_len),
            Backing::Memory(_) => end.good_len,
        };
        if let Backing::File(b) = &mut self.backing {
            b.written_len = end.good_len;
        }
        Ok(file_len.saturating_sub(end.good_len))
    }

    pub(super) fn issue(
        &mut self,
        kind: IssueKind,
        line: u64,
        offset: u64,
        message: String,
    ) -> Result<()> {
        if self.strict {
            return err(
                ErrorCode::Corrupt,
                format!("line {line} (byte {offset}): {}: {message}", kind.as_str()),
            );
        }
        self.report.issues.push(LoadIssue {
            line,
            offset,
            kind,
            message,
        });
        Ok(())
    }

    /// Indexes a batch of scanned lines: parsed on every core, then applied in file order
    /// (the lenient reader's rules, or `corrupt` in strict mode).
    pub(super) fn ingest_batch(&mut self, batch: &[BatchLine<'_>]) -> Result<()> {
        let limits = self.limits;
        let span = match (batch.first(), batch.last()) {
            (Some(a), Some(b)) => (b.1 - a.1) as usize,
            _ => 0,
        };
        let parsed = parallel_map(batch, span >= PARALLEL_MIN_BYTES, |(line, _, _)| {
            pre_parse(line, &limits)
        });
        for (pre, &(_, offset, line_no)) in parsed.into_iter().zip(batch) {
            match pre {
                Pre::Blank => {}
                Pre::Issue(kind, message) => self.issue(kind, line_no, offset, message)?,
                Pre::Entry(parsed, len) => self.apply(&parsed, len, offset, line_no)?,
            }
        }
        Ok(())
    }

    fn apply(
        &mut self,
        parsed: &ParsedEntry<'_>,
        len: u32,
        offset: u64,
        line_no: u64,
    ) -> Result<()> {
        let (parent, target, problems) = self.arena.resolve(parsed);
        for p in &problems {
            let (kind, message) = match p {
                RefProblem::DuplicateId => (
                    IssueKind::DuplicateId,
                    format!("id {:?} was already used; this line is ignored", parsed.id),
                ),
                RefProblem::DanglingParent => (
                    IssueKind::DanglingParent,
                    format!(
                        "parent_id {:?} names no earlier entry; {:?} is made a root",
                        parsed.parent_id.as_deref().unwrap_or_default(),
                        parsed.id
                    ),
                ),
                RefProblem::UnknownLeafTarget => (
                    IssueKind::UnknownLeafTarget,
                    format!(
                        "leaf target {:?} is unknown; the leaf is unchanged",
                        parsed.target_id.as_deref().unwrap_or_default()
                    ),
                ),
                RefProblem::UnknownLabelTarget => continue,
            };
            self.issue(kind, line_no, offset, message)?;
        }
        if problems.contains(&RefProblem::DuplicateId) {
            return Ok(());
        }
        self.arena
            .push(parsed, parent, target, offset, len, line_no);
        Ok(())
    }

    /// Reads lines appended by another writer since the last load (read-only stores).
    ///
    /// Returns how many entries were added.
    pub fn refresh(&mut self) -> Result<usize> {
        self.check_open()?;
        let before = self.arena.len();
        let (file, offset, path) = match &self.backing {
            Backing::File(b) if !b.writable => (
                b.file
                    .try_clone()
                    .map_err(|e| EngineError::io("refreshing", &e))?,
                b.written_len,
                b.path.clone(),
            ),
            Backing::File(_) => return Ok(0),
            Backing::Memory(_) => return Ok(0),
        };
        let meta = std::fs::metadata(&path)
            .map_err(|e| EngineError::io(format!("refreshing {}", path.display()), &e))?;
        let b = self.file_backing().map(|b| b.dev_ino).unwrap_or_default();
        if (meta.dev(), meta.ino()) != b || meta.len() < offset {
            return err(
                ErrorCode::ModifiedExternally,
                format!("{} was replaced or truncated; reopen it", path.display()),
            );
        }
        let mut f = file;
        f.seek(SeekFrom::Start(offset))
            .map_err(|e| EngineError::io(format!("refreshing {}", path.display()), &e))?;
        let mut reader = std::io::BufReader::with_capacity(1 << 16, f);
        let torn = self.scan_from(&mut reader, offset)?;
        self.report.torn_tail_bytes = torn;
        Ok(self.arena.len() - before)
    }
}

/// A line after the order-independent part of loading.
// One per line of a batch, consumed at once: boxing the entry would cost an allocation each.
#[allow(clippy::large_enum_variant)]
enum Pre<'a> {
    Blank,
    Issue(IssueKind, String),
    Entry(ParsedEntry<'a>, u32),
}

/// Checks and parses one line on its own (size, UTF-8, depth, JSON, base fields).
fn pre_parse<'a>(line: &Line<'a>, limits: &Limits) -> Pre<'a> {
    let bytes = match *line {
        Line::TooLarge(n) => {
            let max = limits.max_line_bytes;
            return Pre::Issue(
                IssueKind::TooLarge,
                format!("line of {n} bytes is over the limit of {max}"),
            );
        }
        Line::Text(t) => t,
    };
    if bytes.len() > limits.max_line_bytes {
        let (n, max) = (bytes.len(), limits.max_line_bytes);
        return Pre::Issue(
            IssueKind::TooLarge,
            format!("line of {n} bytes is over the limit of {max}"),
        );
    }
    let trimmed = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    if trimmed.iter().all(u8::is_ascii_whitespace) {
        return Pre::Blank;
    }
    // The SIMD check is several times faster than std's on non-ASCII text (the std one
    // was 13% of an open of real tool output).
    let Ok(text) = simdutf8::basic::from_utf8(trimmed) else {
        return Pre::Issue(IssueKind::InvalidUtf8, "line is not valid UTF-8".into());
    };
    // Most lines take the fast path, which also bounds their depth; the rest go through
    // the depth check and serde, which word the load report's messages.
    if let Some(result) = parse_entry_fast(text, limits.max_id_bytes, limits.max_depth) {
        return match result {
            Ok(p) => Pre::Entry(p, trimmed.len() as u32),
            Err(e) => Pre::Issue(IssueKind::Malformed, e.0),
        };
    }
    if limits.depth_exceeded(trimmed) {
        let max = limits.max_depth;
        return Pre::Issue(
            IssueKind::TooLarge,
            format!("JSON nested deeper than the limit of {max}"),
        );
    }
    match parse_entry_serde(text, limits.max_id_bytes) {
        Ok(p) => Pre::Entry(p, trimmed.len() as u32),
        Err(e) => Pre::Issue(IssueKind::Malformed, e.0),
    }
}

/// Below this many bytes a batch is parsed on the calling thread.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// Maps `f` over `items` in order, splitting the work across the machine's cores.
fn parallel_map<'a, T: Sync, R: Send>(
    items: &'a [T],
    parallel: bool,
    f: impl Fn(&'a T) -> R + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if threads < 2 || !parallel || items.len() < 2 {
        return items.iter().map(f).collect();
    }
    let per = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let f = &f;
        let handles: Vec<_> = items
            .chunks(per)
            .map(|part| scope.spawn(move || part.iter().map(f).collect::<Vec<R>>()))
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for h in handles {
            match h.join() {
                Ok(part) => out.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}
