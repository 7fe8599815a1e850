//! A session store: the arena plus the bytes behind it (a file or a memory buffer).
//!
//! One engine serves every storage: `InMemorySessionStorage` keeps its JSONL in a buffer,
//! `JsonlSessionStorage` in a file, and both index it the same way. Raw entry bytes are
//! kept intact; Python objects are made from them only on request.
//!
//! `Store` is the facade; its parts live beside it: `open` (creating and opening, the
//! backing, the persisted index's use), `ingest` (scanning and applying lines), `writer`
//! (appends, flushes, external-change checks), `syncer` (the `group` background syncer)
//! and `torn` (torn-tail cuts).

use std::path::{Path, PathBuf};

use crate::engine::arena::Arena;
use crate::engine::backing::{Backing, ClosedBacking, FileBacking};
use crate::engine::dialect::{self, Dialect};
use crate::engine::error::{err, EngineError, ErrorCode, Result};
use crate::engine::jsonl::{Limits, LoadReport};
use crate::engine::sys::{self, FileAt};

pub use crate::engine::backing::{IndexStatus, OpenOptions, DEFAULT_INDEX_MIN_BYTES};
#[cfg(feature = "test-hooks")]
pub use crate::engine::hooks::Fault;

/// A session's index and bytes.
pub struct Store {
    pub(super) arena: Arena,
    pub(super) backing: Backing,
    pub(super) header: Vec<u8>,
    pub(super) session_id: String,
    pub(super) report: LoadReport,
    pub(super) limits: Limits,
    pub(super) strict: bool,
    pub(super) next_line_no: u64,
    pub(super) closed: bool,
    /// Set by a failed write or sync: every later call fails until reopened.
    pub(super) poisoned: Option<EngineError>,
    pub(super) torn_path: Option<PathBuf>,
    pub(super) index_min_bytes: Option<u64>,
    /// Bytes covered by the persisted index last loaded or written.
    pub(super) indexed_len: u64,
    pub(super) index_status: IndexStatus,
    /// The process that made this store: after `fork()` a child holds a copy whose lock,
    /// syncer and buffered appends are the parent's, and must leave them alone.
    pub(super) owner_pid: u32,
    /// The dialect the file is written in (its lines are translated to ours when read).
    pub(super) dialect: Dialect,
}

impl Store {
    pub(super) fn new(
        backing: Backing,
        header: Vec<u8>,
        session_id: String,
        limits: Limits,
    ) -> Store {
        Store {
            arena: Arena::new(),
            backing,
            header,
            session_id,
            report: LoadReport::default(),
            limits,
            strict: false,
            next_line_no: 2,
            closed: false,
            poisoned: None,
            torn_path: None,
            index_min_bytes: None,
            indexed_len: 0,
            index_status: IndexStatus::Unused,
            owner_pid: sys::current_pid(),
            dialect: Dialect::Native,
        }
    }

    pub(super) fn file_backing(&self) -> Option<&FileBacking> {
        match &self.backing {
            Backing::File(b) => Some(b),
            Backing::Memory(_) | Backing::Closed(_) => None,
        }
    }

    /// True in a forked child holding a copy of its parent's store.
    pub fn is_inherited(&self) -> bool {
        self.owner_pid != sys::current_pid()
    }

    /// A writer's copy in a forked child may not write: the lock, the syncer and any
    /// buffered appends belong to the parent (`locked`).
    pub(super) fn check_owner(&self) -> Result<()> {
        match self.file_backing() {
            Some(b) if b.writable && self.is_inherited() => err(
                ErrorCode::Locked,
                format!(
                    "{} is held by the writer of process {}, which opened it before fork(); \
                     a forked child may read this storage and close it, not write to it",
                    b.path.display(),
                    self.owner_pid
                ),
            ),
            _ => Ok(()),
        }
    }

    /// Fails with `closed` after close, or with the error that poisoned the store.
    pub fn check_open(&self) -> Result<()> {
        if self.closed {
            return err(ErrorCode::Closed, "the session storage is closed");
        }
        if let Some(p) = &self.poisoned {
            return Err(p.clone());
        }
        Ok(())
    }

    /// The arena (index, tree, labels, stats).
    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    /// The header line (no newline).
    pub fn header(&self) -> &[u8] {
        &self.header
    }

    /// The header line in the sessiontree dialect (a pi header translated).
    pub fn native_header(&self) -> Result<Vec<u8>> {
        if !self.dialect.is_pi() {
            return Ok(self.header.clone());
        }
        let text = std::str::from_utf8(&self.header).unwrap_or_default();
        dialect::header_to_native(text)
            .map(String::into_bytes)
            .map_err(|e| EngineError::new(ErrorCode::Corrupt, e.to_string()))
    }

    /// The dialect the file is written in.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The session id from the header.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// What the load found.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    /// Where a writer open saved a torn tail.
    pub fn torn_path(&self) -> Option<&Path> {
        self.torn_path.as_deref()
    }

    /// The file path, for file stores.
    pub fn path(&self) -> Option<&Path> {
        match &self.backing {
            Backing::File(b) => Some(b.path.as_path()),
            Backing::Closed(c) => c.path.as_deref(),
            Backing::Memory(_) => None,
        }
    }

    /// True after `close()`.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// True for a read-only file store.
    pub fn is_readonly(&self) -> bool {
        match &self.backing {
            Backing::File(b) => !b.writable,
            Backing::Closed(c) => c.path.is_some() && !c.writable,
            Backing::Memory(_) => false,
        }
    }

    /// Total bytes of the session (header and entries, pending ones included).
    pub fn byte_len(&self) -> u64 {
        match &self.backing {
            Backing::Memory(buf) => buf.len() as u64,
            Backing::File(b) => b.written_len + b.pending.len() as u64,
            Backing::Closed(c) => c.len,
        }
    }

    /// The whole JSONL document of a memory store.
    pub fn memory_bytes(&self) -> Option<&[u8]> {
        match &self.backing {
            Backing::Memory(buf) => Some(buf),
            Backing::File(_) | Backing::Closed(_) => None,
        }
    }

    /// The raw line of entry `idx` (no newline).
    ///
    /// A line read back from a file is checked to be the one indexed (its newline where
    /// it was, the entry's id in it): a file truncated or rewritten under the store gives
    /// `modified_externally`, an OS error `io`, never other bytes.
    pub fn line(&self, idx: u32) -> Result<Vec<u8>> {
        let raw = self.raw_line(idx)?;
        if !self.dialect.is_pi() {
            return Ok(raw);
        }
        self.to_native(idx, &raw)
    }

    /// A pi line of entry `idx` in the sessiontree dialect.
    pub fn to_native(&self, idx: u32, raw: &[u8]) -> Result<Vec<u8>> {
        let changed = |why: &str| {
            EngineError::new(
                ErrorCode::ModifiedExternally,
                format!(
                    "entry {:?} can no longer be read ({why}): the file was changed by another \
                     program (reopen it)",
                    self.arena.id(idx)
                ),
            )
        };
        let text = std::str::from_utf8(raw).map_err(|_| changed("not UTF-8"))?;
        let node = self.arena.node(idx);
        let parent = (node.parent != crate::engine::NONE).then(|| self.arena.id(node.parent));
        let v1 = (self.dialect == Dialect::Pi(1)).then(|| (node.line_no - 1, parent));
        dialect::entry_to_native(text, self.dialect, v1)
            .map(String::into_bytes)
            .map_err(|e| changed(&e.to_string()))
    }

    /// Calls `f(idx, line)` for every entry of `idxs`, in order, with its line in the
    /// sessiontree dialect (as [`Store::line`] gives it). A file's lines are read in runs
    /// of nearby lines, one read per run of up to [`RUN_BYTES`], instead of one per line:
    /// reading a whole session is then a few large reads.
    pub fn for_each_line<E: From<EngineError>>(
        &self,
        idxs: &[u32],
        mut f: impl FnMut(u32, &[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.check_open()?;
        let b = match &self.backing {
            Backing::File(b) if !self.dialect.is_pi() => b,
            _ => {
                for &i in idxs {
                    f(i, &self.line(i)?)?;
                }
                return Ok(());
            }
        };
        let mut buf = Vec::new();
        let mut at = 0;
        while at < idxs.len() {
            // The run: lines next to one another in the file, in the order asked (ascending,
            // as a whole read asks, or descending, as the newest first or a walk up a
            // branch asks), gaps of at most RUN_GAP bytes, all written, RUN_BYTES at most
            // (a longer line is a run of its own).
            let first = self.arena.node(idxs[at]);
            let mut start = first.offset;
            let mut end = start + u64::from(first.len) + 1;
            let mut stop = at + 1;
            let mut descending = None;
            if end <= b.written_len {
                while stop < idxs.len() {
                    let n = self.arena.node(idxs[stop]);
                    let n_end = n.offset + u64::from(n.len) + 1;
                    let down = n.offset < start;
                    let near = if down {
                        n_end <= start && start - n_end <= RUN_GAP
                    } else {
                        n.offset >= end && n.offset - end <= RUN_GAP
                    };
                    if !near
                        || *descending.get_or_insert(down) != down
                        || n_end > b.written_len
                        || n_end.max(end) - n.offset.min(start) > RUN_BYTES
                    {
                        break;
                    }
                    start = start.min(n.offset);
                    end = end.max(n_end);
                    stop += 1;
                }
            }
            if stop == at + 1 {
                f(idxs[at], &self.raw_line(idxs[at])?)?;
                at += 1;
                continue;
            }
            let span = (end - start) as usize;
            // Grown (and zeroed) once, to the largest run; later runs reuse it as it is.
            if buf.len() < span {
                buf.resize(span, 0);
            }
            let buf = &mut buf[..span];
            if let Err(e) = b.file.read_exact_at(buf, start) {
                if e.kind() != std::io::ErrorKind::UnexpectedEof {
                    return Err(EngineError::io(format!("reading {}", b.path.display()), &e).into());
                }
                // The file shrank: the line-by-line read says which entry is gone.
                for &i in &idxs[at..stop] {
                    f(i, &self.raw_line(i)?)?;
                }
                at = stop;
                continue;
            }
            for &i in &idxs[at..stop] {
                let node = self.arena.node(i);
                let from = (node.offset - start) as usize;
                let line = &buf[from..from + node.len as usize];
                if !matches!(buf[from + node.len as usize], b'\n' | b'\r')
                    || !line_has_id(line, self.arena.id(i))
                {
                    // Not the line indexed there: the line-by-line read words the error.
                    f(i, &self.raw_line(i)?)?;
                    continue;
                }
                f(i, line)?;
            }
            at = stop;
        }
        Ok(())
    }

    /// Entry `idx`'s line as the file holds it (in the file's dialect).
    pub fn raw_line(&self, idx: u32) -> Result<Vec<u8>> {
        self.check_open()?;
        let node = self.arena.node(idx);
        let (off, len) = (node.offset, node.len as usize);
        match &self.backing {
            Backing::Memory(buf) => Ok(buf[off as usize..off as usize + len].to_vec()),
            Backing::File(b) if off >= b.written_len => {
                let start = (off - b.written_len) as usize;
                Ok(b.pending[start..start + len].to_vec())
            }
            Backing::File(b) => {
                // The line and the byte after it: its `\n` (or the `\r` of `\r\n`).
                let mut out = vec![0u8; len + 1];
                let changed = || {
                    err(
                        ErrorCode::ModifiedExternally,
                        format!(
                            "{} was changed by another program since it was read: entry {:?} \
                             is no longer where it was (reopen it)",
                            b.path.display(),
                            self.arena.id(idx)
                        ),
                    )
                };
                match b.file.read_exact_at(&mut out, off) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return changed(),
                    Err(e) => {
                        return Err(EngineError::io(format!("reading {}", b.path.display()), &e))
                    }
                }
                // v1 lines of pi have no ids (they are numbered when read).
                if !matches!(out.pop(), Some(b'\n' | b'\r'))
                    || (self.dialect != Dialect::Pi(1) && !line_has_id(&out, self.arena.id(idx)))
                {
                    return changed();
                }
                Ok(out)
            }
            Backing::Closed(_) => err(ErrorCode::Closed, "the session storage is closed"),
        }
    }

    /// A fresh 8-hex-digit entry id not used in this session.
    pub fn create_entry_id(&self) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        loop {
            let n = fastrand::u32(..);
            let digits: [u8; 8] = std::array::from_fn(|i| HEX[(n >> (28 - 4 * i) & 0xf) as usize]);
            let id = std::str::from_utf8(&digits).unwrap_or_default();
            if self.arena.lookup(id).is_none() {
                return id.to_owned();
            }
        }
    }

    /// Flushes, stops the syncer, releases the lock, then the descriptor and the memory
    /// of the index, at once. Idempotent.
    ///
    /// In a forked child holding its parent's writer, only the child's own copies (the
    /// descriptor, the memory) are released: the lock, the syncer and buffered appends are
    /// the parent's, and are never flushed, stopped or unlocked from here.
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        if self.is_inherited() {
            self.release();
            return Ok(());
        }
        let mut result = if self.poisoned.is_none() {
            self.flush()
        } else {
            Ok(())
        };
        if result.is_ok() && self.poisoned.is_none() && !self.is_readonly() {
            self.refresh_index(true);
        }
        if let Backing::File(b) = &mut self.backing {
            if let Some(mut sync) = b.sync.take() {
                let stopped = sync.stop();
                if result.is_ok() {
                    result = stopped;
                }
            }
            if b.writable {
                let _ = b.file.unlock();
            }
        }
        self.release();
        result
    }

    /// Drops the backing (closing its descriptor) and the arena; marks the store closed.
    fn release(&mut self) {
        let closed = Backing::Closed(ClosedBacking {
            path: self.path().map(Path::to_path_buf),
            writable: !self.is_readonly(),
            len: self.byte_len(),
        });
        // A child's copy of a `group` writer's syncer handle is dropped without a word to
        // the syncer (whose thread and locks are the parent's).
        drop(std::mem::replace(&mut self.backing, closed));
        self.arena = Arena::new();
        self.closed = true;
    }
}

/// The most bytes [`Store::for_each_line`] reads at once.
const RUN_BYTES: u64 = 1 << 20;
/// The largest gap between two lines that [`Store::for_each_line`] reads through.
const RUN_GAP: u64 = 16 << 10;

/// True when `line` names entry `id`: its quoted id appears in it (the fast check), or,
/// for an id the line spells with escapes, the line parses to that id.
fn line_has_id(line: &[u8], id: &str) -> bool {
    let mut quoted = Vec::with_capacity(id.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(id.as_bytes());
    quoted.push(b'"');
    if memchr::memmem::find(line, &quoted).is_some() {
        return true;
    }
    let text = line.strip_suffix(b"\r").unwrap_or(line);
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| {
            crate::engine::line::parse_entry(t, crate::engine::types::ReadLimits::NONE).ok()
        })
        .is_some_and(|p| p.id == id)
}

impl Drop for Store {
    /// A store dropped without `close()` still flushes, stops its syncer and unlocks
    /// (a forked child's copy releases only its own descriptor).
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(feature = "test-hooks")]
impl Store {
    /// Makes the next write or sync of a file store fail (for tests of failure paths).
    ///
    /// With `group` durability a sync fault hits the background syncer's next sync.
    pub fn inject_fault(&mut self, fault: Option<Fault>) {
        if let Backing::File(b) = &mut self.backing {
            if let (Some(Fault::Sync(errno)), Some(sync)) = (fault, &b.sync) {
                sync.inject_fault(errno);
                return;
            }
            b.fault = fault;
        }
    }

    /// Whether a writer has its change watch (`watch`); `keep: false` drops it first, so
    /// that every later append looks the path up (tests of that path).
    pub fn change_watch(&mut self, keep: bool) -> bool {
        match &mut self.backing {
            Backing::File(b) => {
                if !keep {
                    b.watch = None;
                }
                b.watch.is_some()
            }
            _ => false,
        }
    }
}
