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

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::engine::arena::Arena;
use crate::engine::error::{err, EngineError, ErrorCode, Result};
use crate::engine::jsonl::{Limits, LoadReport};
use crate::engine::lazy::{LazyLine, LineSource};
use crate::engine::open::{Backing, FileBacking};

#[cfg(feature = "test-hooks")]
pub use crate::engine::hooks::Fault;
pub use crate::engine::open::{IndexStatus, OpenOptions, DEFAULT_INDEX_MIN_BYTES};

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
    /// Where lines handed out unread are read from (made on first use; file stores only).
    pub(super) lines: OnceLock<Option<Arc<LineSource>>>,
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
            lines: OnceLock::new(),
        }
    }

    pub(super) fn file_backing(&self) -> Option<&FileBacking> {
        match &self.backing {
            Backing::File(b) => Some(b),
            Backing::Memory(_) => None,
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
        self.file_backing().map(|b| b.path.as_path())
    }

    /// True after `close()`.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// True for a read-only file store.
    pub fn is_readonly(&self) -> bool {
        self.file_backing().is_some_and(|b| !b.writable)
    }

    /// Total bytes of the session (header and entries, pending ones included).
    pub fn byte_len(&self) -> u64 {
        match &self.backing {
            Backing::Memory(buf) => buf.len() as u64,
            Backing::File(b) => b.written_len + b.pending.len() as u64,
        }
    }

    /// The whole JSONL document of a memory store.
    pub fn memory_bytes(&self) -> Option<&[u8]> {
        match &self.backing {
            Backing::Memory(buf) => Some(buf),
            Backing::File(_) => None,
        }
    }

    /// The raw line of entry `idx` (no newline).
    pub fn line(&self, idx: u32) -> Result<Vec<u8>> {
        self.check_open()?;
        let node = self.arena.node(idx);
        let (off, len) = (node.offset, node.len as usize);
        match &self.backing {
            Backing::Memory(buf) => Ok(buf[off as usize..off as usize + len].to_vec()),
            Backing::File(b) => {
                let mut out = vec![0u8; len];
                if off >= b.written_len {
                    let start = (off - b.written_len) as usize;
                    out.copy_from_slice(&b.pending[start..start + len]);
                } else {
                    b.file.read_exact_at(&mut out, off).map_err(|e| {
                        EngineError::io(format!("reading {}", b.path.display()), &e)
                    })?;
                }
                Ok(out)
            }
        }
    }

    /// Entry `idx`'s line, to be read when it is first needed; None for a memory store, a
    /// line not yet written to the file, or when the descriptor cannot be duplicated (the
    /// caller then reads the line now).
    pub fn lazy_line(&self, idx: u32) -> Option<Arc<LazyLine>> {
        let Backing::File(b) = &self.backing else {
            return None;
        };
        let node = self.arena.node(idx);
        if self.closed || node.offset + u64::from(node.len) > b.written_len {
            return None;
        }
        let src = self.lines.get_or_init(|| {
            let file = b.file.try_clone().ok()?;
            Some(LineSource::new(file, b.path.clone()))
        });
        Some(src.as_ref()?.issue(node.offset, node.len))
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

    /// Flushes, stops the syncer, releases the lock. Idempotent.
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
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
        // Lines handed out unread are read now, and their descriptor closed.
        if let Some(Some(src)) = self.lines.get() {
            src.detach();
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
        self.closed = true;
        result
    }
}

impl Drop for Store {
    /// A store dropped without `close()` still flushes, stops its syncer and unlocks.
    fn drop(&mut self) {
        let _ = self.close();
    }
}
