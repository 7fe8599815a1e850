//! JSONL streaming I/O: the line scanner, load reports, limits, durability modes, the
//! single-writer lock and small file-system helpers.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use memchr::memchr;

use crate::engine::error::{EngineError, ErrorCode, Result};
use crate::engine::names::{lookup, names};
use crate::engine::sys;
use crate::engine::types::ReadLimits;

/// How far an append is pushed towards the disk before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Buffered in memory until `flush()` or `close()`.
    None,
    /// Written to the OS (one `write`) on every append.
    Flush,
    /// Written on every append; a background thread syncs within one second.
    Group,
    /// Synced (`fdatasync`) before every append returns.
    Fsync,
}

/// Every durability mode with its name, weakest first: the one place these names are
/// written ([`DURABILITY_MODES`] and [`Durability::parse`] read it).
const DURABILITY_NAMES: [(Durability, &str); 4] = [
    (Durability::None, "none"),
    (Durability::Flush, "flush"),
    (Durability::Group, "group"),
    (Durability::Fsync, "fsync"),
];

/// The durability mode names (Python's `DURABILITY_MODES`).
pub const DURABILITY_MODES: [&str; DURABILITY_NAMES.len()] = names(&DURABILITY_NAMES);

impl Durability {
    /// Parses one of [`DURABILITY_MODES`].
    pub fn parse(s: &str) -> Result<Durability> {
        lookup(&DURABILITY_NAMES, s).ok_or_else(|| {
            EngineError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "durability must be one of {} (got {s:?})",
                    DURABILITY_MODES.join(", ")
                ),
            )
        })
    }
}

/// Configurable limits on what a file may contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest accepted line in bytes (newline excluded).
    pub max_line_bytes: usize,
    /// Deepest accepted JSON nesting (Python's own `json` gives up near 1,000 levels).
    pub max_depth: usize,
    /// Longest accepted entry id in bytes.
    pub max_id_bytes: usize,
}

/// The default line limit: 256 MiB, far above any real entry.
pub const DEFAULT_MAX_LINE_BYTES: usize = 256 << 20;

pub use crate::engine::types::DEFAULT_MAX_DEPTH;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_depth: DEFAULT_MAX_DEPTH,
            max_id_bytes: crate::engine::types::MAX_ID_BYTES,
        }
    }
}

impl Limits {
    /// The limits a line is read under.
    pub fn read(&self) -> ReadLimits {
        ReadLimits {
            max_id_bytes: self.max_id_bytes,
            max_depth: self.max_depth,
        }
    }
}

/// The kinds of problem a lenient load reports (FORMAT.md "Robustness").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueKind {
    /// An incomplete last line (no newline).
    TornTail,
    /// A line that is not a valid entry.
    Malformed,
    /// A line that is not UTF-8.
    InvalidUtf8,
    /// An entry whose id was already used (ignored).
    DuplicateId,
    /// An entry whose parent is unknown (made a root).
    DanglingParent,
    /// A `leaf` entry whose target is unknown (leaf unchanged).
    UnknownLeafTarget,
    /// A line over the size limit (skipped).
    TooLarge,
}

impl IssueKind {
    /// Every kind, in declaration order (`kind as usize` indexes it).
    pub const ALL: [IssueKind; ISSUE_KINDS] = [
        IssueKind::TornTail,
        IssueKind::Malformed,
        IssueKind::InvalidUtf8,
        IssueKind::DuplicateId,
        IssueKind::DanglingParent,
        IssueKind::UnknownLeafTarget,
        IssueKind::TooLarge,
    ];

    /// The string used by Python's `LoadIssue.kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            IssueKind::TornTail => "torn_tail",
            IssueKind::Malformed => "malformed",
            IssueKind::InvalidUtf8 => "invalid_utf8",
            IssueKind::DuplicateId => "duplicate_id",
            IssueKind::DanglingParent => "dangling_parent",
            IssueKind::UnknownLeafTarget => "unknown_leaf_target",
            IssueKind::TooLarge => "too_large",
        }
    }
}

/// One problem found while loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadIssue {
    /// 1-based line number (the header is line 1).
    pub line: u64,
    /// Byte offset of the line's start.
    pub offset: u64,
    /// What kind of problem.
    pub kind: IssueKind,
    /// Details for humans.
    pub message: String,
}

/// How many issues a report keeps in full; past them it only counts them by kind, so a
/// file of millions of bad lines costs memory for its entries, not for its problems.
pub const MAX_REPORTED_ISSUES: usize = 1000;

/// The number of issue kinds (the length of [`LoadReport::counts`]).
pub const ISSUE_KINDS: usize = 7;

/// What a load found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// The first [`MAX_REPORTED_ISSUES`] problems in file order (and a torn tail, always).
    pub issues: Vec<LoadIssue>,
    /// Bytes after the last newline (0 when the file ends cleanly).
    pub torn_tail_bytes: u64,
    /// Every problem found, kept or not, counted by kind (`IssueKind as usize`).
    pub counts: [u64; ISSUE_KINDS],
}

impl LoadReport {
    /// Records a problem: kept in full while under the cap (a torn tail always), counted
    /// whatever.
    pub fn add(&mut self, issue: LoadIssue) {
        self.counts[issue.kind as usize] += 1;
        if self.issues.len() < MAX_REPORTED_ISSUES || issue.kind == IssueKind::TornTail {
            self.issues.push(issue);
        }
    }
}

/// Where a scan stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanEnd {
    /// Offset just past the last complete line.
    pub good_len: u64,
    /// Number of the next line.
    pub next_line_no: u64,
}

/// One complete line handed out by [`scan`].
pub enum Line<'a> {
    /// A line within the size limit, without its `\n`.
    Text(&'a [u8]),
    /// A line over the size limit, with its length.
    TooLarge(u64),
}

/// Read size: large enough that splitting a chunk's lines across cores pays off.
const CHUNK: usize = 8 << 20;

/// The most lines handed to one `on_batch` call (real entries are kilobytes, so a chunk
/// holds a few thousand; junk lines of one byte would be millions).
const MAX_BATCH_LINES: usize = 1 << 14;

/// One complete line of a batch: the line, its byte offset and its 1-based number.
pub type BatchLine<'a> = (Line<'a>, u64, u64);

/// Streams `reader` from `offset`, handing every run of complete lines (ending in `\n`) to
/// `on_batch`; never holds more than one chunk plus one line in memory.
pub fn scan<R: Read>(
    reader: &mut R,
    offset: u64,
    first_line_no: u64,
    max_line_bytes: usize,
    size_hint: usize,
    on_batch: impl FnMut(&[BatchLine<'_>]) -> Result<()>,
) -> io::Result<ScanEnd> {
    let mut buf = Vec::new();
    let span = ScanSpan {
        offset,
        first_line_no,
        stop_at: u64::MAX,
    };
    scan_into(&mut buf, reader, span, max_line_bytes, size_hint, on_batch)
}

/// Where a scan starts, and the offset at which a line starting there ends it.
#[derive(Debug, Clone, Copy)]
pub struct ScanSpan {
    /// File offset of the first line (`reader`'s position).
    pub offset: u64,
    /// Number of the first line.
    pub first_line_no: u64,
    /// A line starting at or after this offset is left unread (`u64::MAX`: read to EOF).
    pub stop_at: u64,
}

/// [`scan`] into a buffer the caller keeps between scans (its length is the read size;
/// one of at most 8 MiB is made for an empty one), stopping before the first line that
/// starts at or after `span.stop_at`. `ScanEnd::good_len` is then that line's offset.
pub fn scan_into<R: Read>(
    buf: &mut Vec<u8>,
    reader: &mut R,
    span: ScanSpan,
    max_line_bytes: usize,
    size_hint: usize,
    mut on_batch: impl FnMut(&[BatchLine<'_>]) -> Result<()>,
) -> io::Result<ScanEnd> {
    // Small documents get a small buffer (a full chunk costs ~0.1 ms to allocate and
    // clear); the buffer grows past the hint when a line needs it.
    if buf.is_empty() {
        buf.resize(size_hint.saturating_add(1).clamp(4096, CHUNK), 0);
    }
    let (mut start, mut end) = (0usize, 0usize);
    let mut base = span.offset; // file offset of buf[0]
    let mut line_no = span.first_line_no;
    // While skipping an oversize line: where it started and how long it is so far.
    let mut skipping: Option<(u64, u64)> = None;
    loop {
        let mut stopped = false;
        // The complete lines in the buffer, in batches of at most MAX_BATCH_LINES: a chunk
        // of millions of tiny lines must not cost a parse result per line at once.
        loop {
            let mut spans: Vec<(usize, usize, u64, u64)> = Vec::new();
            let mut too_large: Option<(u64, u64, u64)> = None;
            let mut full = false;
            while let Some(nl) = memchr(b'\n', &buf[start..end]) {
                match skipping.take() {
                    Some((at, skipped)) => too_large = Some((skipped + nl as u64, at, line_no)),
                    None if base + start as u64 >= span.stop_at => {
                        stopped = true;
                        break;
                    }
                    None => spans.push((start, start + nl, base + start as u64, line_no)),
                }
                line_no += 1;
                start += nl + 1;
                if spans.len() >= MAX_BATCH_LINES {
                    full = true;
                    break;
                }
            }
            let mut batch: Vec<BatchLine<'_>> = Vec::with_capacity(spans.len() + 1);
            if let Some((n, at, no)) = too_large {
                batch.push((Line::TooLarge(n), at, no));
            }
            batch.extend(
                spans
                    .iter()
                    .map(|&(a, b, off, no)| (Line::Text(&buf[a..b]), off, no)),
            );
            if !batch.is_empty() {
                on_batch(&batch).map_err(io::Error::other)?;
            }
            if !full || stopped {
                break;
            }
        }
        if stopped || (skipping.is_none() && base + start as u64 >= span.stop_at) {
            return Ok(ScanEnd {
                good_len: base + start as u64,
                next_line_no: line_no,
            });
        }
        if let Some((_, skipped)) = &mut skipping {
            *skipped += (end - start) as u64;
            base += end as u64;
            start = 0;
            end = 0;
        } else {
            buf.copy_within(start..end, 0);
            base += start as u64;
            end -= start;
            start = 0;
            if end == buf.len() {
                if buf.len() > max_line_bytes {
                    skipping = Some((base, end as u64));
                    base += end as u64;
                    end = 0;
                } else {
                    let grown = (buf.len() * 2).min(max_line_bytes + 1);
                    buf.resize(grown.max(buf.len() + 1), 0);
                }
            }
        }
        let n = loop {
            match reader.read(&mut buf[end..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        if n == 0 {
            let good_len = match skipping {
                Some((at, _)) => at,
                None => base + start as u64,
            };
            return Ok(ScanEnd {
                good_len,
                next_line_no: line_no,
            });
        }
        end += n;
    }
}

/// Unwraps an engine error that [`scan`] carried through `io::Error`.
pub fn scan_error(context: &Path, e: io::Error) -> EngineError {
    if e.get_ref().is_some_and(|inner| inner.is::<EngineError>()) {
        if let Some(inner) = e.into_inner() {
            if let Ok(engine) = inner.downcast::<EngineError>() {
                return *engine;
            }
        }
        return EngineError::new(ErrorCode::Io, "scan failed");
    }
    EngineError::io(format!("reading {}", context.display()), &e)
}

/// Why [`open_regular`] refused a file that exists.
#[derive(Debug)]
pub struct NotRegular(&'static str);

impl std::fmt::Display for NotRegular {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not a regular file (a {})", self.0)
    }
}

impl std::error::Error for NotRegular {}

/// Opens an existing regular file: no symlink followed at the last component
/// (`O_NOFOLLOW`, `ELOOP`), no wait on a FIFO or device (`O_NONBLOCK`, then `fstat`), and
/// anything but a regular file refused with a [`NotRegular`] error.
pub fn open_regular(path: &Path, write: bool) -> io::Result<File> {
    let file = sys::open_no_follow(path, write)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            NotRegular(sys::special_kind(&kind)),
        ));
    }
    sys::blocking(&file);
    Ok(file)
}

/// The error of a failed [`open_regular`] of a session file, saying what was refused.
pub fn open_error(path: &Path, e: &io::Error) -> EngineError {
    if let Some(why) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<NotRegular>())
    {
        return EngineError::new(ErrorCode::Io, format!("{}: {why}", path.display()));
    }
    if sys::is_link_refusal(e) {
        let mut err = EngineError::io(format!("opening {}", path.display()), e);
        err.message = format!(
            "{} is a symbolic link; a session is never opened through a link at its name \
             (open the file it points to)",
            path.display()
        );
        return err;
    }
    EngineError::io(format!("opening {}", path.display()), e)
}

/// Syncs the directory holding `path` so a newly created name survives a crash.
pub fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(parent)?.sync_all()
}

/// Takes the single-writer lock on an open session file; `locked` names the holder.
pub fn lock_writer(file: &File, path: &Path) -> Result<()> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => {
            let who = match sys::lock_holder(file) {
                // The lock is per open file: a second handle of this very process is refused
                // too, and a newcomer looking for "another process" would look in vain.
                Some(pid) if pid == std::process::id() => {
                    "another writer in this process (a second handle on the same file)".to_owned()
                }
                Some(pid) => format!("another writer (process {pid})"),
                None => "another writer".to_owned(),
            };
            Err(EngineError::new(
                ErrorCode::Locked,
                format!(
                    "{} is open for writing by {who}; open it read-only or close the other writer",
                    path.display()
                ),
            ))
        }
        Err(std::fs::TryLockError::Error(e)) => {
            Err(EngineError::io(format!("locking {}", path.display()), &e))
        }
    }
}

/// Now as `YYYYMMDDTHHMMSS.mmmZ` (for side-file names).
pub fn utc_stamp() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        now.subsec_millis()
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(data: &[u8], max: usize) -> (Vec<(String, u64, u64)>, ScanEnd) {
        let mut out = Vec::new();
        let end = scan(&mut &data[..], 0, 1, max, data.len(), |batch| {
            for (l, off, no) in batch {
                let text = match l {
                    Line::Text(t) => String::from_utf8_lossy(t).into_owned(),
                    Line::TooLarge(n) => format!("<{n}>"),
                };
                out.push((text, *off, *no));
            }
            Ok(())
        })
        .unwrap();
        (out, end)
    }

    #[test]
    fn splits_lines_and_finds_torn_tail() {
        let (lines, end) = lines_of(b"a\nbb\n\nccc", 100);
        assert_eq!(
            lines,
            vec![("a".into(), 0, 1), ("bb".into(), 2, 2), ("".into(), 5, 3)]
        );
        assert_eq!(end.good_len, 6);
        assert_eq!(end.next_line_no, 4);
    }

    #[test]
    fn long_lines_cross_chunks_and_oversize_lines_are_skipped() {
        let big = "x".repeat(3 * CHUNK);
        let data = format!("h\n{big}\nz\n");
        let (lines, end) = lines_of(data.as_bytes(), 4 * CHUNK);
        assert_eq!(lines[1].0.len(), 3 * CHUNK);
        assert_eq!(lines[2], ("z".into(), (3 * CHUNK + 3) as u64, 3));
        assert_eq!(end.good_len, data.len() as u64);

        let (lines, _) = lines_of(data.as_bytes(), CHUNK / 2);
        assert_eq!(lines[1].0, format!("<{}>", 3 * CHUNK));
        assert_eq!(lines[1].1, 2);
        assert_eq!(lines[2].0, "z");
    }

    #[test]
    fn oversize_torn_tail_is_measured_from_its_start() {
        let data = format!("h\n{}", "y".repeat(2 * CHUNK));
        let (lines, end) = lines_of(data.as_bytes(), 1000);
        assert_eq!(lines.len(), 1);
        assert_eq!(end.good_len, 2);
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(utc_stamp().len(), "20261130T184512.123Z".len());
    }
}
