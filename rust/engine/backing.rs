//! What holds a store's bytes — a memory buffer, a file (with its writer state: pending
//! bytes, the `group` syncer, the change watch), or what is left after close — and the
//! options a file is opened with. `open.rs` makes them; `store.rs`, `writer.rs` and
//! `ingest.rs` use them.

use std::fs::File;
use std::path::{Path, PathBuf};

#[cfg(feature = "test-hooks")]
use crate::engine::hooks::Fault;
use crate::engine::jsonl::{Durability, Limits};
use crate::engine::syncer::GroupSync;
use crate::engine::sys;
use crate::engine::watch::ChangeWatch;

pub(super) struct FileBacking {
    pub(super) path: PathBuf,
    pub(super) file: File,
    pub(super) writable: bool,
    pub(super) durability: Durability,
    /// Bytes appended but not yet written (`none` durability).
    pub(super) pending: Vec<u8>,
    /// Bytes of the file that are ours (written and scanned).
    pub(super) written_len: u64,
    pub(super) dev_ino: (u64, u64),
    pub(super) sync: Option<GroupSync>,
    /// A writer's inotify watch on its file and the directories above it, which spares
    /// the path look-up before each write while nothing changed (see `watch`).
    pub(super) watch: Option<ChangeWatch>,
    /// A failure to simulate on the next write or sync (tests of the error paths).
    #[cfg(feature = "test-hooks")]
    pub(super) fault: Option<Fault>,
}

impl FileBacking {
    /// The backing of `file`, open at `path` (`meta` its metadata), whose first
    /// `written_len` bytes are the store's; a writer's gets its change watch.
    pub(super) fn new(
        path: &Path,
        file: File,
        writable: bool,
        durability: Durability,
        written_len: u64,
        meta: &std::fs::Metadata,
        sync: Option<GroupSync>,
    ) -> FileBacking {
        let dev_ino = sys::file_id(meta);
        FileBacking {
            path: path.to_path_buf(),
            file,
            writable,
            durability,
            pending: Vec::new(),
            written_len,
            dev_ino,
            sync,
            watch: writable.then(|| ChangeWatch::new(path, dev_ino)).flatten(),
            #[cfg(feature = "test-hooks")]
            fault: None,
        }
    }
}

/// What is left of a backing after `close()`: no descriptor, no buffers.
pub(super) struct ClosedBacking {
    pub(super) path: Option<PathBuf>,
    pub(super) writable: bool,
    pub(super) len: u64,
}

pub(super) enum Backing {
    Memory(Vec<u8>),
    File(FileBacking),
    Closed(ClosedBacking),
}

/// Options for opening a file.
#[derive(Debug, Clone, Copy)]
pub struct OpenOptions {
    /// Open without the writer lock; never change the file.
    pub readonly: bool,
    /// Raise `corrupt` on any problem the lenient reader would report.
    pub strict: bool,
    /// The durability of appends.
    pub durability: Durability,
    /// Size limits.
    pub limits: Limits,
    /// Use and keep a persisted index (`<file>.idx`) once a file reaches this many bytes;
    /// `None` never reads or writes one.
    pub index_min_bytes: Option<u64>,
}

/// Files smaller than this open fast enough without a persisted index. Past it the index
/// pays for itself even when each open is followed by appends and a close (which rewrites
/// it): at 0.74 MB the scan costs 1.43 ms, the index 0.15 ms and its rewrite 0.17 ms
/// (benches/RESULTS-adapters.md, sixth round).
pub const DEFAULT_INDEX_MIN_BYTES: u64 = 128 << 10;

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            readonly: false,
            strict: false,
            durability: Durability::Group,
            limits: Limits::default(),
            index_min_bytes: Some(DEFAULT_INDEX_MIN_BYTES),
        }
    }
}

/// What happened to the persisted index at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexStatus {
    /// Not used: disabled, a memory store, or a file below the size threshold.
    Unused,
    /// A valid index was loaded; only lines after it were scanned.
    Loaded,
    /// There was none; one was written after the scan.
    Created,
    /// An index was there but stale, torn or foreign: ignored, and a new one written.
    Rebuilt,
}

impl IndexStatus {
    /// The string used by Python's `index_status`.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexStatus::Unused => "unused",
            IndexStatus::Loaded => "loaded",
            IndexStatus::Created => "created",
            IndexStatus::Rebuilt => "rebuilt",
        }
    }
}

impl FileBacking {
    /// The errno of an injected write fault, which it clears (the next write only).
    #[cfg(feature = "test-hooks")]
    pub(super) fn take_write_fault(&mut self) -> Option<i32> {
        match self.fault {
            Some(Fault::Write(errno)) => {
                self.fault = None;
                Some(errno)
            }
            _ => None,
        }
    }

    /// Never a fault without the `test-hooks` feature.
    #[cfg(not(feature = "test-hooks"))]
    #[inline]
    pub(super) fn take_write_fault(&mut self) -> Option<i32> {
        None
    }

    /// The errno of an injected sync fault, which it clears (the next sync only).
    #[cfg(feature = "test-hooks")]
    pub(super) fn take_sync_fault(&mut self) -> Option<i32> {
        match self.fault {
            Some(Fault::Sync(errno)) => {
                self.fault = None;
                Some(errno)
            }
            _ => None,
        }
    }

    /// Never a fault without the `test-hooks` feature.
    #[cfg(not(feature = "test-hooks"))]
    #[inline]
    pub(super) fn take_sync_fault(&mut self) -> Option<i32> {
        None
    }
}
