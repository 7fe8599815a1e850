//! The persisted index: a derived file beside a session (`<file>.idx`) that lets a reopen
//! skip the scan of the lines it covers.
//!
//! The JSONL file stays the only source of truth. The index records how many bytes of the
//! file it covers and a check of that prefix (the header line, the last 64 KiB before the
//! covered end and 16 samples spread over the prefix, hashed with XXH3), the size limits
//! its lines were read under, and ends with a hash of its own bytes. On open, an index
//! whose hashes, header, limits or covered length do not match is ignored and rebuilt;
//! only lines after the covered length are scanned. It is written to a temporary file and
//! renamed into place, so a crash leaves the old index, the new one, or none — and a
//! damaged one is never trusted.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use xxhash_rust::xxh3::xxh3_64;

use crate::engine::arena::Arena;
use crate::engine::index_codec::Cursor;
use crate::engine::jsonl::{open_regular, IssueKind, Limits, LoadIssue, LoadReport, ISSUE_KINDS};
use crate::engine::sys::{self, create_private, FileAt};

// Bumped whenever the schema rules change (an index records which lines were accepted),
// what the arena keeps of them does, or the layout does (4: the report's counts by kind,
// and each entry's usage; 5: both together; 6: the limits the lines were read under).
const MAGIC: &[u8; 8] = b"STIDX\0\0\x06";
const SAMPLES: u64 = 16;
const SAMPLE: u64 = 4096;
const TAIL: u64 = 64 << 10;

/// What a valid index restores.
pub struct Loaded {
    /// The arena as of the covered prefix.
    pub arena: Arena,
    /// Bytes of the file covered.
    pub covered: u64,
    /// Number of the first line after the covered prefix.
    pub next_line_no: u64,
    /// Problems found in the covered prefix when it was scanned (the first ones in full).
    pub issues: Vec<LoadIssue>,
    /// Every problem found in the covered prefix, by kind.
    pub counts: [u64; ISSUE_KINDS],
}

/// `<file>.idx`.
pub fn index_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".idx");
    PathBuf::from(name)
}

/// A check of the first `covered` bytes of `file`, cheap even for gigabytes.
fn prefix_check(file: &File, header: &[u8], covered: u64) -> std::io::Result<u64> {
    let mut buf = Vec::with_capacity((SAMPLES * SAMPLE + TAIL) as usize + header.len() + 8);
    buf.extend_from_slice(&covered.to_le_bytes());
    buf.extend_from_slice(header);
    let mut read = |offset: u64, len: u64| -> std::io::Result<()> {
        let start = buf.len();
        buf.resize(start + len as usize, 0);
        file.read_exact_at(&mut buf[start..], offset)
    };
    for i in 0..SAMPLES {
        let at = covered / SAMPLES * i;
        read(at, SAMPLE.min(covered - at))?;
    }
    let tail = TAIL.min(covered);
    read(covered - tail, tail)?;
    Ok(xxh3_64(&buf))
}

fn issue_kind(v: u8) -> Option<IssueKind> {
    Some(match v {
        0 => IssueKind::TornTail,
        1 => IssueKind::Malformed,
        2 => IssueKind::InvalidUtf8,
        3 => IssueKind::DuplicateId,
        4 => IssueKind::DanglingParent,
        5 => IssueKind::UnknownLeafTarget,
        6 => IssueKind::TooLarge,
        _ => return None,
    })
}

fn issue_code(k: IssueKind) -> u8 {
    match k {
        IssueKind::TornTail => 0,
        IssueKind::Malformed => 1,
        IssueKind::InvalidUtf8 => 2,
        IssueKind::DuplicateId => 3,
        IssueKind::DanglingParent => 4,
        IssueKind::UnknownLeafTarget => 5,
        IssueKind::TooLarge => 6,
    }
}

/// The limits as the index records them: which lines were accepted depends on them, so an
/// index is only used under the limits it was read under.
fn limits_bytes(limits: &Limits) -> [u8; 24] {
    let mut out = [0u8; 24];
    let values = [limits.max_line_bytes, limits.max_depth, limits.max_id_bytes];
    for (slot, v) in out.chunks_exact_mut(8).zip(values) {
        slot.copy_from_slice(&(v as u64).to_le_bytes());
    }
    out
}

/// Serialises an index of `arena` covering `covered` bytes of `file`, whose lines were read
/// under `limits`.
pub fn encode(
    file: &File,
    header: &[u8],
    limits: &Limits,
    arena: &Arena,
    covered: u64,
    next_line_no: u64,
    report: &LoadReport,
) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(64 + arena.len() * 48);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&xxh3_64(header).to_le_bytes());
    out.extend_from_slice(&limits_bytes(limits));
    out.extend_from_slice(&covered.to_le_bytes());
    out.extend_from_slice(&prefix_check(file, header, covered)?.to_le_bytes());
    out.extend_from_slice(&next_line_no.to_le_bytes());
    // A torn tail lies past the covered prefix: it is found again by the next scan.
    let kept: Vec<&LoadIssue> = report
        .issues
        .iter()
        .filter(|i| i.kind != IssueKind::TornTail)
        .collect();
    for kind in IssueKind::ALL {
        let n = match kind {
            IssueKind::TornTail => 0,
            _ => report.counts[kind as usize],
        };
        out.extend_from_slice(&n.to_le_bytes());
    }
    out.extend_from_slice(&(kept.len() as u64).to_le_bytes());
    for i in kept {
        out.extend_from_slice(&i.line.to_le_bytes());
        out.extend_from_slice(&i.offset.to_le_bytes());
        out.push(issue_code(i.kind));
        out.extend_from_slice(&(i.message.len() as u32).to_le_bytes());
        out.extend_from_slice(i.message.as_bytes());
    }
    arena.encode(&mut out);
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    Ok(out)
}

/// `<file>.idx.tmp`: where an index is written before it is renamed into place.
fn temp_path(path: &Path) -> PathBuf {
    let mut name = index_path(path).into_os_string();
    name.push(".tmp");
    PathBuf::from(name)
}

/// Writes the index atomically (temporary file, then rename) with mode 0600.
///
/// The temporary name is fixed and created exclusively: two processes writing at once
/// cannot mix their bytes (the second simply skips, the index is best effort), and a
/// temporary file left by a killed writer is one known name, not a pattern to scan for.
/// The writer holds a `flock` on it while it writes, so a leftover that nobody holds is
/// known to be stale and is removed (see [`clear_stale_temp`]).
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temp_path(path);
    let mut f = match create_private(&tmp) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && clear_stale_temp(&tmp) => {
            create_private(&tmp)?
        }
        other => other?,
    };
    // Marks the file as being written; released when `f` is closed after the rename.
    let _ = f.try_lock();
    let result = f
        .write_all(bytes)
        .and_then(|()| std::fs::rename(&tmp, index_path(path)));
    drop(f);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A temporary index younger than this may be between its creation and its writer's lock.
const STALE_AFTER: Duration = Duration::from_secs(2);

/// Removes the temporary index at `tmp` if it is a leftover: a regular file nobody holds
/// locked and older than [`STALE_AFTER`], or anything but a regular file (planted at a
/// name only the index uses). Never blocks; returns whether the name is free now.
fn clear_stale_temp(tmp: &Path) -> bool {
    let file = match open_regular(tmp, false) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
        Err(_) => return std::fs::remove_file(tmp).is_ok(),
    };
    if file.try_lock().is_err() {
        return false; // another process is writing it
    }
    let Ok(meta) = file.metadata() else {
        return false;
    };
    let age = meta
        .modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok());
    if age.is_none_or(|a| a < STALE_AFTER) {
        return false;
    }
    // Only if the name still holds the file checked above.
    let same =
        std::fs::symlink_metadata(tmp).is_ok_and(|m| sys::file_id(&m) == sys::file_id(&meta));
    same && std::fs::remove_file(tmp).is_ok()
}

/// Why an index was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// There was no index file.
    Missing,
    /// The index is damaged, foreign, or does not match the file.
    Invalid,
}

/// Loads and checks the index of `path` against `file` (whose first line is `header`), to
/// be read under `limits`.
pub fn load(
    path: &Path,
    file: &File,
    header: &[u8],
    limits: &Limits,
    file_len: u64,
) -> Result<Loaded, Rejected> {
    // A FIFO, device or symlink planted at the name is never waited on or followed: it is
    // ignored like a damaged index, and replaced when the index is written again.
    let index_file = match open_regular(&index_path(path), false) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Rejected::Missing),
        Err(_) => return Err(Rejected::Invalid),
    };
    // SAFETY: the map is only read, and only while `index_file` is open. Another process
    // replacing the index renames a new file over the name, which leaves this mapping's
    // inode intact; one truncating it in place could fault us, which the atomic write
    // protocol never does. A damaged mapping is caught by the checksum below.
    let map = match unsafe { memmap2::Mmap::map(&index_file) } {
        Ok(m) => m,
        Err(_) => return Err(Rejected::Invalid),
    };
    decode(&map, file, header, limits, file_len).ok_or(Rejected::Invalid)
}

fn decode(
    bytes: &[u8],
    file: &File,
    header: &[u8],
    limits: &Limits,
    file_len: u64,
) -> Option<Loaded> {
    let body_len = bytes.len().checked_sub(8)?;
    let (body, sum) = bytes.split_at(body_len);
    if xxh3_64(body).to_le_bytes() != sum {
        return None;
    }
    let mut c = Cursor::new(body);
    if c.bytes(MAGIC.len())? != MAGIC || c.u64()? != xxh3_64(header) {
        return None;
    }
    if c.bytes(24)? != limits_bytes(limits) {
        return None;
    }
    let covered = c.u64()?;
    if covered > file_len || covered < header.len() as u64 {
        return None;
    }
    if c.u64()? != prefix_check(file, header, covered).ok()? {
        return None;
    }
    let next_line_no = c.u64()?;
    let mut counts = [0u64; ISSUE_KINDS];
    for n in &mut counts {
        *n = c.u64()?;
    }
    let count = c.u64()?;
    let mut issues = Vec::new();
    for _ in 0..count {
        let (line, offset) = (c.u64()?, c.u64()?);
        let kind = issue_kind(c.u8()?)?;
        let message = c.text()?.to_owned();
        issues.push(LoadIssue {
            line,
            offset,
            kind,
            message,
        });
    }
    let arena = Arena::decode(&mut c)?;
    let ends_inside = (0..arena.len() as u32).all(|i| {
        let n = arena.node(i);
        n.offset + u64::from(n.len) < covered
    });
    if !c.at_end() || !ends_inside {
        return None;
    }
    Some(Loaded {
        arena,
        covered,
        next_line_no,
        issues,
        counts,
    })
}

/// Removes the `<file>.idx.tmp` a killed index writer may have left (one `open`, no
/// directory scan; a temporary file another process is writing is left alone).
pub fn remove_stale_temp(path: &Path) {
    clear_stale_temp(&temp_path(path));
}
