//! Ingesting lines: lines are parsed on every core, then applied to the arena in file order
//! under the lenient reader's rules (or refused in strict mode).
//!
//! A large part of a file is read in chunks by worker threads (`pread`), each parsing the
//! lines that start in its chunk; anything else (memory stores, small files, what follows
//! the chunks) is streamed by [`scan_into`] in batches parsed by [`parallel_map`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::{mpsc, Condvar, Mutex};

use crate::engine::arena::{Kind, RefProblem, Role};
use crate::engine::backing::Backing;
use crate::engine::dialect::{self, Dialect};
use crate::engine::error::{err, EngineError, ErrorCode, Result};
use crate::engine::jsonl::{
    scan_error, scan_into, BatchLine, IssueKind, Limits, Line, LoadIssue, ScanEnd, ScanSpan,
};
use crate::engine::line::read_entry;
use crate::engine::store::Store;
use crate::engine::sys::{self, FileAt};
use crate::engine::types::{ParsedEntry, Refusal, UsageSums};

impl Store {
    /// Scans lines after the known part; returns the number of torn-tail bytes.
    ///
    /// A file store reads the file itself with `pread` (`reader` is then unused): a large
    /// part is split into chunks that every core reads and parses, applied in file order;
    /// the rest (and any small file) is streamed on this thread.
    pub(super) fn scan_from<R: Read>(&mut self, reader: &mut R, offset: u64) -> Result<u64> {
        let path = self
            .file_backing()
            .map(|b| b.path.clone())
            .unwrap_or_default();
        let file = match &self.backing {
            Backing::File(b) => Some(
                b.file
                    .try_clone()
                    .map_err(|e| EngineError::io(format!("reading {}", path.display()), &e))?,
            ),
            Backing::Memory(_) | Backing::Closed(_) => None,
        };
        let len = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
        let rest = usize::try_from(len.saturating_sub(offset)).unwrap_or(usize::MAX);
        let limits = self.limits;
        let mut buf = Vec::new();
        let end = match &file {
            Some(file)
                if rest >= 2 * PARALLEL_CHUNK
                    && threads() > 1
                    && self.dialect != Dialect::Pi(1) =>
            {
                let done = self.scan_parallel(file, offset, len, &path)?;
                self.next_line_no = done.next_line_no;
                // What the chunks left: a torn tail, or lines appended meanwhile.
                let mut tail = PreadReader {
                    file,
                    pos: done.good_len,
                    soft_end: u64::MAX,
                };
                let span = ScanSpan {
                    offset: done.good_len,
                    first_line_no: done.next_line_no,
                    stop_at: u64::MAX,
                };
                scan_into(
                    &mut buf,
                    &mut tail,
                    span,
                    limits.max_line_bytes,
                    1 << 16,
                    |b| self.ingest_batch(b),
                )
            }
            _ => {
                let span = ScanSpan {
                    offset,
                    first_line_no: self.next_line_no,
                    stop_at: u64::MAX,
                };
                scan_into(&mut buf, reader, span, limits.max_line_bytes, rest, |b| {
                    self.ingest_batch(b)
                })
            }
        }
        .map_err(|e| scan_error(&path, e))?;
        self.next_line_no = end.next_line_no;
        let file_len = match &self.backing {
            Backing::File(b) => b.file.metadata().map(|m| m.len()).unwrap_or(end.good_len),
            Backing::Memory(_) | Backing::Closed(_) => end.good_len,
        };
        if let Backing::File(b) = &mut self.backing {
            b.written_len = end.good_len;
        }
        Ok(file_len.saturating_sub(end.good_len))
    }

    /// Scans `[offset, len)` of `file` in chunks on every core, applying each chunk's lines
    /// in file order; returns where the last complete line of the range ends.
    ///
    /// A chunk holds the lines that start inside it (the first one after the first newline
    /// at or after its start), read to their end even past the chunk. Chunks are handed
    /// out in order and at most [`AHEAD`] past the last one applied, which bounds memory.
    fn scan_parallel(
        &mut self,
        file: &File,
        offset: u64,
        len: u64,
        path: &Path,
    ) -> Result<ScanEnd> {
        let limits = self.limits;
        let dialect = self.dialect;
        let size = PARALLEL_CHUNK as u64;
        let count = usize::try_from((len - offset).div_ceil(size)).unwrap_or(usize::MAX);
        let chunk = |k: usize| {
            let start = offset + k as u64 * size;
            (start, (start + size).min(len))
        };
        let sched = Sched {
            state: Mutex::new((0, 0, false)),
            turn: Condvar::new(),
        };
        std::thread::scope(|scope| {
            let (tx, rx) = mpsc::channel::<(usize, io::Result<Chunk>)>();
            for _ in 0..threads().min(count) {
                let (tx, sched) = (tx.clone(), &sched);
                scope.spawn(move || {
                    let mut buf = Vec::new();
                    while let Some(k) = sched.take(count) {
                        let (start, end) = chunk(k);
                        let out = read_chunk(file, start, end, k == 0, &limits, dialect, &mut buf);
                        if tx.send((k, out)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            let result = self.apply_chunks(&rx, &sched, count, offset, path);
            sched.stop();
            result
        })
    }

    /// Applies the chunks `read_chunk` sends, in file order.
    fn apply_chunks(
        &mut self,
        rx: &mpsc::Receiver<(usize, io::Result<Chunk>)>,
        sched: &Sched,
        count: usize,
        offset: u64,
        path: &Path,
    ) -> Result<ScanEnd> {
        let mut waiting: BTreeMap<usize, io::Result<Chunk>> = BTreeMap::new();
        let mut end = ScanEnd {
            good_len: offset,
            next_line_no: self.next_line_no,
        };
        let changed = || EngineError::new(ErrorCode::Io, "the file changed while it was read");
        let stopped = || EngineError::new(ErrorCode::Io, "a reader thread stopped");
        for k in 0..count {
            let out = loop {
                if let Some(out) = waiting.remove(&k) {
                    break out;
                }
                let (i, out) = rx.recv().map_err(|_| stopped())?;
                waiting.insert(i, out);
            };
            let out = out.map_err(|e| scan_error(path, e))?;
            if let Some(lines_end) = out.end {
                if out.start != end.good_len {
                    return Err(changed());
                }
                let before = self.arena.len();
                for line in out.lines {
                    let no = end.next_line_no + line.no;
                    match line.pre {
                        Out::Blank => {}
                        Out::Issue(kind, message) => self.issue(kind, no, line.offset, message)?,
                        Out::Entry(e, len) => {
                            self.apply(&e.attach(&out.pool), len, line.offset, no)?;
                        }
                    }
                }
                if k == 0 && count > 1 {
                    // Size the arena for the whole range from the first chunk's entries,
                    // never for more than one entry per `MIN_RESERVED_BYTES` (a file of
                    // tiny lines regrows as it loads rather than reserving a lot up front).
                    let bytes = lines_end.good_len.saturating_sub(out.start).max(1) as f64;
                    let range = (count * PARALLEL_CHUNK) as f64;
                    let more = (self.arena.len() - before) as f64 * range / bytes * 1.05;
                    let more = (more as usize).min(count * PARALLEL_CHUNK / MIN_RESERVED_BYTES);
                    self.arena.reserve(self.arena.len() + more);
                }
                end = ScanEnd {
                    good_len: lines_end.good_len,
                    next_line_no: end.next_line_no + lines_end.next_line_no,
                };
            }
            sched.applied(k + 1);
        }
        Ok(end)
    }

    pub(super) fn issue(
        &mut self,
        kind: IssueKind,
        line: u64,
        offset: u64,
        message: String,
    ) -> Result<()> {
        if message == dialect::MIXED_IN_PI || message == dialect::MIXED_IN_NATIVE {
            let path = self
                .path()
                .map(|p| format!("{}: ", p.display()))
                .unwrap_or_default();
            return err(
                ErrorCode::Corrupt,
                format!("{path}line {line} (byte {offset}): {message}; it is refused, not read"),
            );
        }
        if self.strict {
            return err(
                ErrorCode::Corrupt,
                format!("line {line} (byte {offset}): {}: {message}", kind.as_str()),
            );
        }
        self.report.add(LoadIssue {
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
        let dialect = self.dialect;
        let span = match (batch.first(), batch.last()) {
            (Some(a), Some(b)) => (b.1 - a.1) as usize,
            _ => 0,
        };
        let parsed = parallel_map(batch, span >= PARALLEL_MIN_BYTES, |(line, _, line_no)| {
            pre_parse(line, &limits, dialect, *line_no)
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
        let chained;
        let parsed = if self.dialect == Dialect::Pi(1) {
            // pi's v1 sessions are one chain: each entry hangs under the one before.
            chained = ParsedEntry {
                parent_id: self.arena.last_id().map(|id| Cow::Owned(id.to_owned())),
                ..parsed.clone()
            };
            &chained
        } else {
            parsed
        };
        let (parent, target, problems) = self.arena.resolve(parsed);
        // pi keeps a re-flushed id's later copy as one more entry (see `Node::repeat`).
        let repeat = self.dialect.is_pi() && problems.contains(&RefProblem::DuplicateId);
        for p in &problems {
            let (kind, message) = match p {
                RefProblem::DuplicateId if repeat => (
                    IssueKind::DuplicateId,
                    format!(
                        "id {:?} was already used; as pi does, this copy is listed again \
                         (the id names the first)",
                        parsed.id
                    ),
                ),
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
        if problems.contains(&RefProblem::DuplicateId) && !repeat {
            return Ok(());
        }
        self.arena
            .push(parsed, parent, target, offset, len, line_no, repeat);
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
            Backing::File(_) | Backing::Memory(_) | Backing::Closed(_) => return Ok(0),
        };
        let meta = std::fs::metadata(&path)
            .map_err(|e| EngineError::io(format!("refreshing {}", path.display()), &e))?;
        let b = self.file_backing().map(|b| b.dev_ino).unwrap_or_default();
        if sys::file_id(&meta) != b || meta.len() < offset {
            return err(
                ErrorCode::ModifiedExternally,
                format!("{} was replaced or truncated; reopen it", path.display()),
            );
        }
        // Positional reads: the descriptor's offset may be shared (a dup, a forked child).
        let mut reader = std::io::BufReader::with_capacity(
            1 << 16,
            ReadAt {
                file: &file,
                pos: offset,
            },
        );
        let torn = self.scan_from(&mut reader, offset)?;
        self.report.torn_tail_bytes = torn;
        Ok(self.arena.len() - before)
    }
}

/// `Read` by `pread` from a position, leaving the descriptor's own offset alone.
struct ReadAt<'a> {
    file: &'a std::fs::File,
    pos: u64,
}

impl std::io::Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
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
fn pre_parse<'a>(line: &Line<'a>, limits: &Limits, dialect: Dialect, line_no: u64) -> Pre<'a> {
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
    let len = trimmed.len() as u32;
    // One reader for both dialects (`line::read_entry`): a pi line's keys are read through
    // pi's names, a few lines are translated first.
    let v1 = (dialect == Dialect::Pi(1)).then(|| (line_no.saturating_sub(1), None));
    match read_entry(text, dialect, v1, limits.read()) {
        Ok(p) => Pre::Entry(p, len),
        Err(e) if e.refusal == Refusal::TooDeep => Pre::Issue(IssueKind::TooLarge, e.message),
        Err(e) if dialect.is_pi() => Pre::Issue(IssueKind::Malformed, e.detail()),
        Err(e) => Pre::Issue(IssueKind::Malformed, native_issue(text, e.detail())),
    }
}

/// A line of ours without `parent_id` that has pi's `parentId` is pi's: the file mixes
/// dialects (refused, see [`Store::issue`]), not one malformed line.
fn native_issue(text: &str, message: String) -> String {
    if message.contains("`parent_id` is missing") && dialect::is_pi_line(text) {
        return dialect::MIXED_IN_NATIVE.to_owned();
    }
    message
}

/// Below this many bytes a batch is parsed on the calling thread.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// Maps `f` over `items` in order, splitting the work across the machine's cores.
fn parallel_map<'a, T: Sync, R: Send>(
    items: &'a [T],
    parallel: bool,
    f: impl Fn(&'a T) -> R + Sync,
) -> Vec<R> {
    let threads = threads();
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

/// Bytes a worker of the parallel scan reads and parses at a time (small in unit tests, so
/// their files cross many chunk boundaries).
const PARALLEL_CHUNK: usize = if cfg!(test) { 16 << 10 } else { 4 << 20 };

/// A worker reads its chunk this many bytes at a time (the bytes are still in the core's
/// cache when they are parsed).
const READ_SIZE: usize = if cfg!(test) { 4 << 10 } else { 512 << 10 };

/// The arena is sized up front for at most one entry per this many bytes of a file.
const MIN_RESERVED_BYTES: usize = 512;

/// How many chunks past the last one applied may be read (memory: this many chunks'
/// entries, plus one read buffer per worker).
const AHEAD: usize = 4;

/// Past its chunk, a worker reads the rest of its last line this many bytes at a time.
const TAIL_READ: usize = if cfg!(test) { 1000 } else { 64 << 10 };

/// The worker threads of a scan.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// Hands chunk numbers to the workers, in order, at most [`AHEAD`] past the applied ones.
struct Sched {
    /// (next chunk to hand out, chunks applied, stopped)
    state: Mutex<(usize, usize, bool)>,
    turn: Condvar,
}

impl Sched {
    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, usize, bool)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next chunk to read, waiting while the reader is too far ahead; `None` when
    /// every chunk was handed out or the scan stopped.
    fn take(&self, count: usize) -> Option<usize> {
        let mut st = self.lock();
        loop {
            let (next, applied, stopped) = *st;
            if stopped || next >= count {
                return None;
            }
            if next < applied + AHEAD {
                st.0 += 1;
                return Some(next);
            }
            st = self.turn.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn applied(&self, n: usize) {
        self.lock().1 = n;
        self.turn.notify_all();
    }

    fn stop(&self) {
        self.lock().2 = true;
        self.turn.notify_all();
    }
}

/// Reads a file from `pos` with `pread`, leaving the descriptor's offset alone; past
/// `soft_end`, [`TAIL_READ`] bytes at a time.
struct PreadReader<'f> {
    file: &'f File,
    pos: u64,
    soft_end: u64,
}

impl Read for PreadReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let room = match self.soft_end.checked_sub(self.pos) {
            Some(0) | None => TAIL_READ,
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        };
        let want = buf.len().min(room);
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// The lines of one chunk, pre-parsed by a worker.
struct Chunk {
    /// Offset of its first line.
    start: u64,
    /// Where its last line ends and how many lines it has; `None` when no line starts in it.
    end: Option<ScanEnd>,
    /// Its lines, numbered from 0.
    lines: Vec<ChunkLine>,
    /// The strings its entries keep.
    pool: String,
}

struct ChunkLine {
    offset: u64,
    no: u64,
    pre: Out,
}

/// [`Pre`] with its strings moved into the chunk's pool, to cross threads.
enum Out {
    Blank,
    Issue(IssueKind, String),
    Entry(Detached, u32),
}

/// A string of a chunk's pool: (start, length).
type Span = (u32, u32);

/// A [`ParsedEntry`] whose strings are in a chunk's pool.
struct Detached {
    kind: Kind,
    type_name: Option<Span>,
    id: Span,
    parent_id: Option<Span>,
    timestamp: Span,
    target_id: Option<Span>,
    text: Option<Span>,
    first_kept: Option<Span>,
    retained_tail: bool,
    role: Role,
    usage: Option<UsageSums>,
}

impl Detached {
    fn new(e: &ParsedEntry<'_>, pool: &mut String) -> Detached {
        let mut put = |s: &str| {
            let start = pool.len() as u32;
            pool.push_str(s);
            (start, s.len() as u32)
        };
        Detached {
            kind: e.kind,
            // Known types are their kind's name.
            type_name: (e.kind == Kind::Unknown).then(|| put(&e.type_name)),
            id: put(&e.id),
            parent_id: e.parent_id.as_deref().map(&mut put),
            timestamp: put(&e.timestamp),
            target_id: e.target_id.as_deref().map(&mut put),
            text: e.text.as_deref().map(&mut put),
            first_kept: e.first_kept.as_deref().map(&mut put),
            retained_tail: e.retained_tail,
            role: e.role,
            usage: e.usage,
        }
    }

    fn attach<'p>(&self, pool: &'p str) -> ParsedEntry<'p> {
        let get = |(start, len): Span| {
            Cow::Borrowed(
                pool.get(start as usize..(start + len) as usize)
                    .unwrap_or_default(),
            )
        };
        ParsedEntry {
            kind: self.kind,
            type_name: self.type_name.map_or(Cow::Borrowed(self.kind.name()), get),
            id: get(self.id),
            parent_id: self.parent_id.map(get),
            timestamp: get(self.timestamp),
            target_id: self.target_id.map(get),
            text: self.text.map(get),
            first_kept: self.first_kept.map(get),
            retained_tail: self.retained_tail,
            role: self.role,
            usage: self.usage,
        }
    }
}

/// Where the first line starting in `[start, end)` begins: just after the first newline at
/// or after `start - 1`; `None` if there is none before `end`.
fn first_line_start(file: &File, start: u64, end: u64) -> io::Result<Option<u64>> {
    let mut block = [0u8; 4096];
    let mut at = start - 1;
    while at < end {
        let n = file.read_at(&mut block, at)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(i) = memchr::memchr(b'\n', &block[..n]) {
            let line = at + i as u64 + 1;
            return Ok((line < end).then_some(line));
        }
        at += n as u64;
    }
    Ok(None)
}

/// Reads and pre-parses the lines starting in `[start, end)` (a worker's part of
/// [`Store::scan_parallel`]); `first`: a line starts at `start`.
fn read_chunk(
    file: &File,
    start: u64,
    end: u64,
    first: bool,
    limits: &Limits,
    dialect: Dialect,
    buf: &mut Vec<u8>,
) -> io::Result<Chunk> {
    let line_start = if first {
        Some(start)
    } else {
        first_line_start(file, start, end)?
    };
    let mut out = Chunk {
        start: line_start.unwrap_or(end),
        end: None,
        lines: Vec::new(),
        pool: String::new(),
    };
    let Some(line_start) = line_start else {
        return Ok(out);
    };
    let mut reader = PreadReader {
        file,
        pos: line_start,
        soft_end: end,
    };
    let span = ScanSpan {
        offset: line_start,
        first_line_no: 0,
        stop_at: end,
    };
    let (lines, pool) = (&mut out.lines, &mut out.pool);
    let scanned = scan_into(
        buf,
        &mut reader,
        span,
        limits.max_line_bytes,
        READ_SIZE,
        |batch| {
            lines.reserve(batch.len());
            for (line, offset, no) in batch {
                // Chunk line numbers are relative: v1 files (ids from line numbers) are
                // never read in chunks.
                let pre = match pre_parse(line, limits, dialect, *no) {
                    Pre::Blank => Out::Blank,
                    Pre::Issue(kind, message) => Out::Issue(kind, message),
                    Pre::Entry(e, len) => Out::Entry(Detached::new(&e, pool), len),
                };
                lines.push(ChunkLine {
                    offset: *offset,
                    no: *no,
                    pre,
                });
            }
            Ok(())
        },
    )?;
    out.end = Some(scanned);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::store::OpenOptions;

    /// A document with every kind of line the loader treats specially, lines of every
    /// length around the chunk size, and a torn tail.
    fn document(seed: u64, torn: bool) -> Vec<u8> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut doc =
            br#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#.to_vec();
        doc.push(b'\n');
        let mut ids: Vec<String> = Vec::new();
        for i in 0..2500 {
            let id = format!("e{i}");
            let parent = match ids.last() {
                Some(p) if rng.u8(..) > 10 => format!("{p:?}"),
                _ => "null".into(),
            };
            let text = "x\\n\\\"y".repeat(match rng.u8(..) {
                0..=200 => rng.usize(0..40),
                201..=250 => rng.usize(0..4000),
                _ => rng.usize(0..40_000),
            });
            let line = match rng.u8(..20) {
                0 => "{not json".to_string(),
                1 => String::new(),
                2 => "   ".into(),
                3 => format!(
                    r#"{{"type":"leaf","id":"{id}l","parent_id":{parent},"timestamp":"t","target_id":"nope"}}"#
                ),
                4 => format!(
                    r#"{{"type":"custom","id":"e{}","parent_id":null,"timestamp":"t","custom_type":"dup"}}"#,
                    rng.usize(..=i)
                ),
                5 => format!(
                    r#"{{"type":"custom","id":"{id}d","parent_id":"ghost","timestamp":"t","custom_type":"c"}}"#
                ),
                6 => format!(
                    r#"{{"type":"label","id":"{id}b","parent_id":{parent},"timestamp":"t","target_id":{parent},"label":"L{i}"}}"#
                ),
                7 => format!(
                    r#"{{"type":"message","id":"{id}","parent_id":{parent},"timestamp":"t","message":{{"role":"user","content":"{}","timestamp":1}}}}"#,
                    "y".repeat(70_000)
                ),
                _ => format!(
                    r#"{{"type":"message","id":"{id}","parent_id":{parent},"timestamp":"t{i}","message":{{"role":"user","content":"{text}","timestamp":1}}}}"#
                ),
            };
            ids.push(id);
            doc.extend_from_slice(line.as_bytes());
            if rng.u8(..) == 0 {
                doc.extend_from_slice(b"\xff\xfe bad utf-8");
            }
            doc.extend_from_slice(if rng.u8(..10) == 0 { b"\r\n" } else { b"\n" });
        }
        if torn {
            doc.extend_from_slice(br#"{"type":"custom","id":"torn""#);
        }
        doc
    }

    fn summary(store: &Store) -> String {
        let a = store.arena();
        let mut out = String::new();
        for i in 0..a.len() as u32 {
            let n = a.node(i);
            out += &format!(
                "{} {} {} {} {} {} {:?} {:?}\n",
                a.id(i),
                n.offset,
                n.len,
                n.line_no,
                n.parent,
                n.target,
                n.kind,
                a.label(i)
            );
        }
        out += &format!(
            "leaf {} name {:?} stats {:?} newest {:?}\n",
            a.leaf(),
            a.name(),
            a.stats(),
            a.newest_timestamp()
        );
        out += &format!("{:?}\n", store.report());
        out
    }

    #[test]
    fn parallel_file_scan_matches_the_streaming_scan() {
        let dir = tempfile::tempdir().unwrap();
        for (seed, torn) in [(1, false), (2, true), (3, true)] {
            let doc = document(seed, torn);
            assert!(doc.len() > 40 * PARALLEL_CHUNK, "{}", doc.len());
            let limits = Limits {
                max_line_bytes: 60_000,
                ..Limits::default()
            };
            let path = dir.path().join(format!("s{seed}.jsonl"));
            std::fs::write(&path, &doc).unwrap();
            let opts = OpenOptions {
                readonly: true,
                index_min_bytes: None,
                limits,
                ..OpenOptions::default()
            };
            let file = Store::open(&path, opts).unwrap();
            let memory = Store::memory_from_bytes(&doc, false, limits).unwrap();
            assert!(memory.report().issues.len() > 100);
            assert_eq!(summary(&file), summary(&memory), "seed {seed}");

            let strict = OpenOptions {
                strict: true,
                ..opts
            };
            let file_err = Store::open(&path, strict).err().unwrap();
            let memory_err = Store::memory_from_bytes(&doc, true, limits).err().unwrap();
            assert_eq!(file_err.message, memory_err.message);
        }
    }
}
