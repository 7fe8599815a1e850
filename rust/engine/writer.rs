//! Writing: appends checked by the reader's own parser, the pending buffer of `none`
//! durability, flushes and syncs, and the checks that refuse to write over another
//! program's change.

use memchr::memchr;

use crate::engine::arena::{Kind, RefProblem, NONE};
use crate::engine::backing::{Backing, FileBacking};
use crate::engine::dialect;
use crate::engine::error::{err, EngineError, ErrorCode, Result};
use crate::engine::json_text::iso_now;
use crate::engine::jsonl::Durability;
use crate::engine::line::parse_entry;
use crate::engine::store::Store;
use crate::engine::sys::{self, FileAt};
use crate::engine::types::{LineError, Refusal};
use crate::engine::watch::{ChangeWatch, Quiet};

/// `none` durability writes its buffer out once it holds this much.
const BUFFER_LIMIT: usize = 1 << 16;

/// A refused line's error: `limit_exceeded` for a limit (`max_depth` the store's nesting
/// limit), else `invalid_argument`.
fn line_error(e: LineError, max_depth: usize) -> EngineError {
    match e.refusal {
        Refusal::TooDeep => EngineError::new(
            ErrorCode::LimitExceeded,
            format!("entry nests deeper than the limit of {max_depth}"),
        ),
        Refusal::IdTooLong => EngineError::new(ErrorCode::LimitExceeded, e.to_string()),
        Refusal::Malformed => EngineError::new(ErrorCode::InvalidArgument, e.to_string()),
    }
}

/// What a new entry is stamped with before its line is written: a fresh id, the leaf as
/// its parent, and the time now ([`Store::stamp`]).
#[derive(Debug, Clone)]
pub struct Stamp {
    /// An id no entry has.
    pub id: String,
    /// The leaf when stamped ([`NONE`] before any entry).
    pub parent: u32,
    /// The time, ISO-8601 UTC with milliseconds.
    pub timestamp: [u8; 24],
    /// The number of entries when stamped.
    entries: usize,
}

impl Stamp {
    /// The timestamp as text.
    pub fn timestamp(&self) -> &str {
        std::str::from_utf8(&self.timestamp).unwrap_or_default()
    }
}

impl Store {
    /// A stamp for the next entry under the leaf (see [`Store::append_stamped`]).
    pub fn stamp(&self) -> Result<Stamp> {
        self.check_open()?;
        Ok(Stamp {
            id: self.create_entry_id(),
            parent: self.arena.leaf(),
            timestamp: iso_now(),
            entries: self.arena.len(),
        })
    }

    /// Appends one entry line (compact JSON, no newline); returns its arena index.
    ///
    /// The line is parsed by the same code as the reader, so what is written is exactly
    /// what a reopen will see. Nothing is written when the line or its references are bad.
    pub fn append(&mut self, line: &[u8]) -> Result<u32> {
        self.append_line(line, None)
    }

    /// Appends a line written for `stamp`: as [`Store::append`], except that while no
    /// entry was added since the stamp, an entry with the stamp's id under its parent (and
    /// no target) needs no look-up of either — its id was fresh and its parent is known.
    pub fn append_stamped(&mut self, stamp: &Stamp, line: &[u8]) -> Result<u32> {
        self.append_line(line, Some(stamp))
    }

    fn append_line(&mut self, line: &[u8], stamp: Option<&Stamp>) -> Result<u32> {
        self.check_open()?;
        if self.is_readonly() {
            return err(ErrorCode::Readonly, "the session storage is read-only");
        }
        self.check_owner()?;
        let text = self.line_text(line)?;
        let max_depth = self.limits.max_depth;
        let bad_line = |e: LineError| line_error(e, max_depth);
        let mut parsed = parse_entry(text, self.limits.read()).map_err(bad_line)?;
        // A pi file gets the line in pi's dialect, and the arena what a reopen reads from
        // it (a leaf move, for one, is a marker hung under its target).
        let pi_line;
        let line = if self.dialect.is_pi() {
            pi_line = dialect::entry_to_pi(text).map_err(bad_line)?;
            let native =
                dialect::entry_to_native(&pi_line, self.dialect, None).map_err(bad_line)?;
            parsed = parse_entry(&native, self.limits.read())
                .map_err(bad_line)?
                .into_owned();
            pi_line.as_bytes()
        } else {
            line
        };
        let stamped = stamp.filter(|s| {
            s.entries == self.arena.len()
                && *parsed.id == *s.id
                && parsed.parent_id.as_deref()
                    == (s.parent != NONE).then(|| self.arena.id(s.parent))
                && parsed.target_id.is_none()
                && parsed.first_kept.is_none()
        });
        let (parent, target, problems) = match stamped {
            Some(s) => (s.parent, NONE, Vec::new()),
            None => self.arena.resolve(&parsed),
        };
        if let Some(p) = problems.first() {
            let (code, message) = match p {
                RefProblem::DuplicateId => (
                    ErrorCode::DuplicateId,
                    format!("entry id {:?} already exists", parsed.id),
                ),
                RefProblem::DanglingParent => (
                    ErrorCode::NotFound,
                    format!(
                        "parent entry {:?} not found",
                        parsed.parent_id.as_deref().unwrap_or_default()
                    ),
                ),
                RefProblem::UnknownLeafTarget | RefProblem::UnknownLabelTarget => (
                    ErrorCode::NotFound,
                    format!(
                        "target entry {:?} not found",
                        parsed.target_id.as_deref().unwrap_or_default()
                    ),
                ),
            };
            return err(code, message);
        }
        let offset = self.byte_len();
        self.write_line(line)?;
        let line_no = self.next_line_no;
        self.next_line_no += 1;
        Ok(self.arena.push(
            &parsed,
            parent,
            target,
            offset,
            line.len() as u32,
            line_no,
            false,
        ))
    }

    /// Appends a batch of entry lines as one unit; returns their arena indices.
    ///
    /// Every line is checked first, as [`Store::append`] checks one, its references
    /// resolved against the arena and the batch's earlier lines (so a batch may chain
    /// entries, each under the one before). When any line is refused nothing is written
    /// and the error names the line (`line N of the batch: ...`). Then all the lines are
    /// written with one write (an I/O error trims the file back, as for one line), and only
    /// after that are they added to the index.
    pub fn append_batch(&mut self, lines: &[&[u8]]) -> Result<Vec<u32>> {
        self.check_open()?;
        if self.is_readonly() {
            return err(ErrorCode::Readonly, "the session storage is read-only");
        }
        self.check_owner()?;
        if lines.is_empty() {
            return Ok(Vec::new());
        }
        let in_batch = |n: usize, e: EngineError| {
            EngineError::new(e.code, format!("line {n} of the batch: {}", e.message))
        };
        // The bytes checks, and for a pi file each line in pi's dialect (what is written)
        // with the native line a reopen reads of it.
        let mut translated: Vec<Option<(String, String)>> = Vec::with_capacity(lines.len());
        for (n, line) in lines.iter().enumerate() {
            translated.push(self.check_batch_line(line).map_err(|e| in_batch(n, e))?);
        }
        // Each line parsed once; its references checked against the arena and the
        // batch's earlier lines.
        let mut parsed = Vec::with_capacity(lines.len());
        let mut seen: hashbrown::HashSet<String> = hashbrown::HashSet::new();
        for (n, (line, pi)) in lines.iter().zip(&translated).enumerate() {
            let text = match pi {
                Some((_, native)) => native.as_str(),
                None => std::str::from_utf8(line).unwrap_or_default(),
            };
            let entry = parse_entry(text, self.limits.read())
                .map_err(|e| in_batch(n, line_error(e, self.limits.max_depth)))?;
            let known = |id: &str| self.arena.lookup(id).is_some() || seen.contains(id);
            let target = entry
                .target_id
                .as_deref()
                .filter(|t| matches!(entry.kind, Kind::Leaf | Kind::Label) && !known(t));
            let problem = if known(&entry.id) {
                Some((
                    ErrorCode::DuplicateId,
                    format!("entry id {:?} already exists", entry.id),
                ))
            } else if let Some(pid) = entry.parent_id.as_deref().filter(|p| !known(p)) {
                Some((
                    ErrorCode::NotFound,
                    format!("parent entry {pid:?} not found"),
                ))
            } else {
                target.map(|t| (ErrorCode::NotFound, format!("target entry {t:?} not found")))
            };
            if let Some((code, message)) = problem {
                return Err(in_batch(n, EngineError::new(code, message)));
            }
            seen.insert(entry.id.to_string());
            parsed.push(entry);
        }
        // One write of the whole batch.
        let first_offset = self.byte_len();
        let mut block = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        let mut lens = Vec::with_capacity(lines.len());
        for (line, pi) in lines.iter().zip(&translated) {
            let bytes: &[u8] = match pi {
                Some((pi_line, _)) => pi_line.as_bytes(),
                None => line,
            };
            block.extend_from_slice(bytes);
            block.push(b'\n');
            lens.push(bytes.len());
        }
        self.write_block(&block)?;
        // Then the index, in order: each line's references resolve now.
        let mut offset = first_offset;
        let mut out = Vec::with_capacity(lines.len());
        for (entry, len) in parsed.iter().zip(lens) {
            let (parent, target, _) = self.arena.resolve(entry);
            let line_no = self.next_line_no;
            self.next_line_no += 1;
            out.push(
                self.arena
                    .push(entry, parent, target, offset, len as u32, line_no, false),
            );
            offset += len as u64 + 1;
        }
        Ok(out)
    }

    /// The text of a line to append, once its bytes pass: within the line limit, no
    /// newline, UTF-8.
    fn line_text<'l>(&self, line: &'l [u8]) -> Result<&'l str> {
        if line.len() > self.limits.max_line_bytes {
            return err(
                ErrorCode::LimitExceeded,
                format!(
                    "entry of {} bytes is over the line limit of {}",
                    line.len(),
                    self.limits.max_line_bytes
                ),
            );
        }
        if memchr(b'\n', line).is_some() {
            return err(
                ErrorCode::InvalidArgument,
                "an entry line must not contain a newline",
            );
        }
        simdutf8::basic::from_utf8(line)
            .map_err(|_| EngineError::new(ErrorCode::InvalidArgument, "entry is not UTF-8"))
    }

    /// [`Store::append_batch`]'s check of one line's bytes ([`Store::line_text`]):
    /// `None` for a line written as it is, or, for a pi file, the line in pi's dialect
    /// and the native line a reopen reads of it.
    fn check_batch_line(&self, line: &[u8]) -> Result<Option<(String, String)>> {
        let text = self.line_text(line)?;
        if !self.dialect.is_pi() {
            return Ok(None);
        }
        let max_depth = self.limits.max_depth;
        let pi_line = dialect::entry_to_pi(text).map_err(|e| line_error(e, max_depth))?;
        let native = dialect::entry_to_native(&pi_line, self.dialect, None)
            .map_err(|e| line_error(e, max_depth))?;
        Ok(Some((pi_line, native)))
    }

    /// Writes a block of whole lines (each ending in a newline) as [`Store::append`]
    /// writes one: buffered under `none` durability, else one write (trimmed back on
    /// an I/O error).
    fn write_block(&mut self, block: &[u8]) -> Result<()> {
        self.write_parts(&[block])
    }

    /// Writes one line (without its newline), as [`Store::write_block`] does.
    fn write_line(&mut self, line: &[u8]) -> Result<()> {
        self.write_parts(&[line, b"\n"])
    }

    /// Appends `parts`, one after the other, to what is written next: buffered under
    /// `none` durability (written once the buffer is full), else written now.
    fn write_parts(&mut self, parts: &[&[u8]]) -> Result<()> {
        let Backing::File(b) = &mut self.backing else {
            if let Backing::Memory(buf) = &mut self.backing {
                parts.iter().for_each(|p| buf.extend_from_slice(p));
            }
            return Ok(());
        };
        if let Some(sync) = &b.sync {
            if let Err(e) = sync.check() {
                self.poisoned = Some(e.clone());
                return Err(e);
            }
        }
        if b.durability == Durability::None {
            check_unchanged(b)?;
        } else if let ([whole], true) = (parts, b.pending.is_empty()) {
            // One part and nothing buffered (a batch's block): written as it is, not
            // copied into the buffer first (150 MB less to copy and fault in for a
            // batch of 100k framework items).
            let written = check_unchanged(b)
                .map_err(|e| (e, false))
                .and_then(|()| write_bytes(b, whole));
            if let Err(e) = written {
                self.poisoned = e.1.then(|| e.0.clone());
                return Err(e.0);
            }
            return Ok(());
        }
        parts.iter().for_each(|p| b.pending.extend_from_slice(p));
        if b.durability == Durability::None && b.pending.len() < BUFFER_LIMIT {
            return Ok(());
        }
        if let Err(e) = write_pending(b) {
            self.poisoned = e.1.then(|| e.0.clone());
            return Err(e.0);
        }
        Ok(())
    }

    /// Writes buffered appends and, unless durability is `none`, syncs them.
    pub fn flush(&mut self) -> Result<()> {
        self.check_open()?;
        self.check_owner()?;
        let Backing::File(b) = &mut self.backing else {
            return Ok(());
        };
        if !b.writable {
            return Ok(());
        }
        // A background sync that failed may have lost what it covered: a later sync
        // succeeding proves nothing about it, so the failure is this call's too.
        if let Some(sync) = &b.sync {
            if let Err(e) = sync.check() {
                self.poisoned = Some(e.clone());
                return Err(e);
            }
        }
        if !b.pending.is_empty() {
            if let Err(e) = write_pending(b) {
                self.poisoned = e.1.then(|| e.0.clone());
                return Err(e.0);
            }
        }
        if b.durability != Durability::None {
            if let Err(e) = sync_file(b) {
                self.poisoned = Some(e.clone());
                return Err(e);
            }
        }
        Ok(())
    }
}

/// `fdatasync`, or the injected sync fault.
fn sync_file(b: &mut FileBacking) -> Result<()> {
    let res = match b.take_sync_fault() {
        Some(errno) => Err(std::io::Error::from_raw_os_error(errno)),
        None => b.file.sync_data(),
    };
    res.map_err(|e| {
        EngineError::io(
            format!(
                "syncing {} (the storage is now unusable; reopen it)",
                b.path.display()
            ),
            &e,
        )
    })
}

/// Refuses to write when the file changed size or was replaced since we last wrote.
fn check_unchanged(b: &FileBacking) -> Result<()> {
    let changed = |why: &str| {
        err(
            ErrorCode::ModifiedExternally,
            format!(
                "{} {why} since it was opened; nothing was written (reopen it)",
                b.path.display()
            ),
        )
    };
    // While the watch reports nothing, the file is still at its path: only its size can
    // have changed, and the open descriptor tells that without a path look-up.
    let quiet = b.watch.as_ref().map(ChangeWatch::quiet);
    if quiet == Some(Quiet::Yes) {
        match file_len(b) {
            Some(len) if len == b.written_len => return Ok(()),
            Some(_) => return changed("was changed by another program"),
            None => {}
        }
    }
    // One look at the path answers both questions: when it still names our inode, the
    // size it reports is our file's (a second `fstat` cost ~0.5 µs on every append).
    match sys::path_identity(&b.path) {
        Some((dev_ino, _)) if dev_ino != b.dev_ino => changed("was replaced"),
        Some((_, len)) if len != b.written_len => changed("was changed by another program"),
        Some(_) => {
            // The events seen so far (a `touch`, a `chmod`) changed nothing that matters.
            if let (Some(w), Some(Quiet::No(Some(events)))) = (&b.watch, quiet) {
                w.cover(events);
            }
            Ok(())
        }
        None => changed("was removed"),
    }
}

/// The size of the open file (`lseek` to its end: no path, nothing copied out).
fn file_len(b: &FileBacking) -> Option<u64> {
    // The offset it moves is unused: every write is positioned.
    std::io::Seek::seek(&mut &b.file, std::io::SeekFrom::End(0)).ok()
}

/// Writes `pending` in one `write` ([`write_bytes`]) and empties it; a buffer grown past
/// four times [`BUFFER_LIMIT`] by a big batch is given back.
///
/// The error's flag says whether the handle must be poisoned (the trim also failed, or
/// a sync failed, so the file state is unknown).
fn write_pending(b: &mut FileBacking) -> std::result::Result<(), (EngineError, bool)> {
    // Buffered (`none`) appends are already in the index: losing them must poison.
    let buffered = b.durability == Durability::None;
    if let Err(e) = check_unchanged(b) {
        if !buffered {
            // The one line of this append was never written: forget it.
            b.pending.clear();
        }
        return Err((e, buffered));
    }
    let pending = std::mem::take(&mut b.pending);
    let written = write_bytes(b, &pending);
    b.pending = pending;
    b.pending.clear();
    if b.pending.capacity() > 4 * BUFFER_LIMIT {
        b.pending.shrink_to(BUFFER_LIMIT);
    }
    written
}

/// Writes `bytes` (whole lines) at the end of the file in one `write`, then syncs as the
/// durability asks; on failure trims any partial line back off. The caller checked the
/// file is unchanged ([`check_unchanged`]).
fn write_bytes(b: &mut FileBacking, bytes: &[u8]) -> std::result::Result<(), (EngineError, bool)> {
    let buffered = b.durability == Durability::None;
    let written = match b.take_write_fault() {
        Some(errno) => {
            let half = &bytes[..bytes.len() / 2];
            b.file
                .write_all_at(half, b.written_len)
                .and(Err(std::io::Error::from_raw_os_error(errno)))
        }
        None => b.file.write_all_at(bytes, b.written_len),
    };
    if let Err(e) = written {
        let error = EngineError::io(format!("appending to {}", b.path.display()), &e);
        let trimmed = b.file.set_len(b.written_len).is_ok();
        return Err((error, buffered || !trimmed));
    }
    b.written_len += bytes.len() as u64;
    match b.durability {
        Durability::Fsync => sync_file(b).map_err(|e| (e, true)),
        Durability::Group => match &b.sync {
            Some(s) => s.mark_dirty().map_err(|e| (e, true)),
            None => Ok(()),
        },
        Durability::None | Durability::Flush => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::{ErrorCode, Limits, Store};

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w","parent_session":null,"metadata":null}"#;

    fn line(id: &str, parent: Option<&str>, ts: &str) -> String {
        let parent = parent.map_or("null".to_string(), |p| format!("{p:?}"));
        format!(
            r#"{{"type":"custom","id":"{id}","parent_id":{parent},"timestamp":"{ts}","custom_type":"k"}}"#
        )
    }

    #[test]
    fn stamped_appends_are_checked_as_any_other() {
        let mut s = Store::memory(HEADER.as_bytes(), Limits::default()).unwrap();
        let first = s.stamp().unwrap();
        assert_eq!(first.parent, crate::engine::NONE);
        assert_eq!(first.id.len(), 8);
        assert!(first.timestamp().ends_with('Z'));
        let a = s
            .append_stamped(&first, line(&first.id, None, first.timestamp()).as_bytes())
            .unwrap();
        let next = s.stamp().unwrap();
        assert_eq!(next.parent, a);
        // A line that is not the stamp's (another parent) is resolved as usual.
        let e = s
            .append_stamped(&next, line(&next.id, Some("nowhere"), "T").as_bytes())
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::NotFound);
        // A stale stamp: the entry appended since takes its id; the look-up finds it.
        let stale = s.stamp().unwrap();
        s.append(line(&stale.id, Some(&first.id), "T").as_bytes())
            .unwrap();
        let e = s
            .append_stamped(&stale, line(&stale.id, Some(&first.id), "T").as_bytes())
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::DuplicateId);
        assert_eq!(s.arena().len(), 2);
        let b = s.stamp().unwrap();
        let idx = s
            .append_stamped(&b, line(&b.id, Some(&stale.id), b.timestamp()).as_bytes())
            .unwrap();
        assert_eq!(s.arena().node(idx).parent, 1);
        assert_eq!(s.arena().leaf(), idx);
    }

    #[test]
    fn a_batch_chains_its_entries_and_is_written_whole_or_not_at_all() {
        let mut s = Store::memory(HEADER.as_bytes(), Limits::default()).unwrap();
        s.append(line("a", None, "T").as_bytes()).unwrap();
        let before = s.memory_bytes().unwrap().to_vec();
        // Each refused line leaves the store as it was: a bad reference late in the
        // batch, a duplicate within it, a line that is not an entry.
        for (bad, code) in [
            (line("z", Some("nowhere"), "T"), ErrorCode::NotFound),
            (line("b", Some("a"), "T"), ErrorCode::DuplicateId),
            ("{\"type\":".to_string(), ErrorCode::InvalidArgument),
        ] {
            let batch = [line("b", Some("a"), "T"), line("c", Some("b"), "T"), bad];
            let batch: Vec<&[u8]> = batch.iter().map(|l| l.as_bytes()).collect();
            let e = s.append_batch(&batch).unwrap_err();
            assert_eq!(e.code, code);
            assert!(
                e.message.starts_with("line 2 of the batch: "),
                "{}",
                e.message
            );
            assert_eq!(s.memory_bytes().unwrap(), &before[..]);
            assert_eq!(s.arena().len(), 1);
        }
        let batch = [
            line("b", Some("a"), "T"),
            line("c", Some("b"), "T"),
            line("d", Some("a"), "T"),
        ];
        let batch: Vec<&[u8]> = batch.iter().map(|l| l.as_bytes()).collect();
        let idxs = s.append_batch(&batch).unwrap();
        assert_eq!(idxs, vec![1, 2, 3]);
        assert_eq!(s.arena().node(2).parent, 1);
        assert_eq!(s.arena().node(3).parent, 0);
        assert_eq!(s.arena().leaf(), 3);
        assert!(s.append_batch(&[]).unwrap().is_empty());
        // What was written reads back as the same tree, lines at their offsets.
        let reopened =
            Store::memory_from_bytes(s.memory_bytes().unwrap(), true, Limits::default()).unwrap();
        assert_eq!(reopened.arena().len(), 4);
        for idx in 0..4 {
            assert_eq!(reopened.line(idx).unwrap(), s.line(idx).unwrap());
        }
    }
}
