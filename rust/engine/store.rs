//! A session store: the arena plus the bytes behind it (a file or a memory buffer).
//!
//! One engine serves every storage: `InMemorySessionStorage` keeps its JSONL in a buffer,
//! `JsonlSessionStorage` in a file, and both index it the same way. Raw entry bytes are
//! kept intact; Python objects are made from them only on request.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use memchr::memchr;

use crate::engine::arena::{Arena, RefProblem};
use crate::engine::error::{err, EngineError, ErrorCode, Result};
use crate::engine::index;
use crate::engine::jsonl::{
    self, create_private, lock_writer, open_nofollow, scan, scan_error, BatchLine, Durability,
    IssueKind, Limits, Line, LoadIssue, LoadReport,
};
use crate::engine::line::{parse_entry, parse_header, ParsedEntry};

/// `none` durability writes its buffer out once it holds this much.
const BUFFER_LIMIT: usize = 1 << 16;

/// The background syncer of `group` durability.
struct GroupSync {
    shared: Arc<(Mutex<SyncState>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct SyncState {
    dirty: bool,
    stop: bool,
    failure: Option<EngineError>,
    /// An injected failure for the next background sync (tests).
    fault: Option<i32>,
}

impl GroupSync {
    fn start(file: File, path: PathBuf) -> GroupSync {
        let shared = Arc::new((Mutex::new(SyncState::default()), Condvar::new()));
        let worker = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("st-group-sync".into())
            .spawn(move || {
                let (lock, cvar) = &*worker;
                let mut state = lock.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if state.failure.is_some() {
                        // A failed handle never syncs again; an append that raced the
                        // failure must not leave `dirty` set, or this loop would spin.
                        state.dirty = false;
                    }
                    if !state.dirty && !state.stop {
                        state = cvar
                            .wait_timeout(state, Duration::from_secs(1))
                            .unwrap_or_else(|p| p.into_inner())
                            .0;
                    }
                    if state.dirty && state.failure.is_none() {
                        state.dirty = false;
                        let fault = state.fault.take();
                        drop(state);
                        // Wait a little so a burst of appends shares one sync.
                        std::thread::sleep(Duration::from_millis(20));
                        let res = match fault {
                            Some(errno) => Err(std::io::Error::from_raw_os_error(errno)),
                            None => file.sync_data(),
                        };
                        state = lock.lock().unwrap_or_else(|p| p.into_inner());
                        if let Err(e) = res {
                            state.failure = Some(EngineError::io(
                                format!("syncing {} (the storage is now unusable)", path.display()),
                                &e,
                            ));
                        }
                        continue;
                    }
                    if state.stop {
                        break;
                    }
                }
            })
            .ok();
        GroupSync { shared, thread }
    }

    fn mark_dirty(&self) -> Result<()> {
        let (lock, cvar) = &*self.shared;
        let mut state = lock.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = &state.failure {
            return Err(f.clone());
        }
        if !state.dirty {
            state.dirty = true;
            cvar.notify_one();
        }
        Ok(())
    }

    fn stop(&mut self) -> Result<()> {
        {
            let (lock, cvar) = &*self.shared;
            let mut state = lock.lock().unwrap_or_else(|p| p.into_inner());
            state.stop = true;
            cvar.notify_one();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let (lock, _) = &*self.shared;
        let state = lock.lock().unwrap_or_else(|p| p.into_inner());
        match &state.failure {
            Some(f) => Err(f.clone()),
            None => Ok(()),
        }
    }
}

struct FileBacking {
    path: PathBuf,
    file: File,
    writable: bool,
    durability: Durability,
    /// Bytes appended but not yet written (`none` durability).
    pending: Vec<u8>,
    /// Bytes of the file that are ours (written and scanned).
    written_len: u64,
    dev_ino: (u64, u64),
    sync: Option<GroupSync>,
    /// A failure to simulate on the next write or sync (tests of the error paths).
    fault: Option<Fault>,
}

/// A simulated OS failure for testing what a failed write or sync leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The next write stores half its bytes, then fails with this errno.
    Write(i32),
    /// The next sync fails with this errno.
    Sync(i32),
}

enum Backing {
    Memory(Vec<u8>),
    File(FileBacking),
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

/// Files smaller than this open fast enough without a persisted index.
pub const DEFAULT_INDEX_MIN_BYTES: u64 = 8 << 20;

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

/// A session's index and bytes.
pub struct Store {
    arena: Arena,
    backing: Backing,
    header: Vec<u8>,
    session_id: String,
    report: LoadReport,
    limits: Limits,
    strict: bool,
    next_line_no: u64,
    closed: bool,
    /// Set by a failed write or sync: every later call fails until reopened.
    poisoned: Option<EngineError>,
    torn_path: Option<PathBuf>,
    index_min_bytes: Option<u64>,
    /// Bytes covered by the persisted index last loaded or written.
    indexed_len: u64,
    index_status: IndexStatus,
}

fn check_header_line(line: &[u8]) -> Result<String> {
    let text = std::str::from_utf8(line)
        .map_err(|_| EngineError::new(ErrorCode::Corrupt, "session header is not UTF-8"))?;
    parse_header(text.trim_end_matches('\r')).map_err(|e| EngineError::new(ErrorCode::Corrupt, e.0))
}

impl Store {
    fn new(backing: Backing, header: Vec<u8>, session_id: String, limits: Limits) -> Store {
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
        }
    }

    /// A store kept in memory, starting from a header line (no newline).
    pub fn memory(header: &[u8], limits: Limits) -> Result<Store> {
        let id = check_header_line(header)?;
        let mut buf = Vec::with_capacity(header.len() + 1);
        buf.extend_from_slice(header);
        buf.push(b'\n');
        Ok(Store::new(
            Backing::Memory(buf),
            header.to_vec(),
            id,
            limits,
        ))
    }

    /// Loads a whole JSONL document held in memory (header first) into a memory store.
    pub fn memory_from_bytes(data: &[u8], strict: bool, limits: Limits) -> Result<Store> {
        let header_end = memchr(b'\n', data)
            .ok_or_else(|| EngineError::new(ErrorCode::Corrupt, "missing session header"))?;
        let mut store = Store::memory(&data[..header_end], limits)?;
        store.strict = strict;
        let body = &data[header_end + 1..];
        let end = scan(
            &mut &body[..],
            (header_end + 1) as u64,
            2,
            limits.max_line_bytes,
            body.len(),
            |batch| store.ingest_batch(batch),
        )
        .map_err(|e| scan_error(Path::new("<memory>"), e))?;
        if let Backing::Memory(buf) = &mut store.backing {
            buf.extend_from_slice(&data[header_end + 1..end.good_len as usize]);
        }
        store.next_line_no = end.next_line_no;
        store.note_torn_tail(data.len() as u64 - end.good_len, end.good_len)?;
        Ok(store)
    }

    /// Creates a new session file holding `header`; refuses an existing file (`exists`).
    pub fn create(
        path: &Path,
        header: &[u8],
        durability: Durability,
        limits: Limits,
    ) -> Result<Store> {
        let id = check_header_line(header)?;
        if memchr(b'\n', header).is_some() {
            return err(ErrorCode::InvalidArgument, "the header must be one line");
        }
        let exists = || {
            EngineError::new(
                ErrorCode::Exists,
                format!("{} already exists", path.display()),
            )
        };
        if path.symlink_metadata().is_ok() {
            return Err(exists());
        }
        // The header is written under a temporary name and linked into place, so the
        // session name never shows a file without its header, even after a crash.
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(
            ".creating-{}-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        let tmp = PathBuf::from(tmp);
        let mut file = create_private(&tmp)
            .map_err(|e| EngineError::io(format!("creating {}", path.display()), &e))?;
        let cleanup = |e: EngineError| {
            let _ = std::fs::remove_file(&tmp);
            e
        };
        lock_writer(&file, path).map_err(cleanup)?;
        let mut line = header.to_vec();
        line.push(b'\n');
        let io_err = |e: std::io::Error| EngineError::io(format!("writing {}", path.display()), &e);
        write_header(&mut file, &line, durability, &tmp).map_err(|e| cleanup(io_err(e)))?;
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => {
                let _ = std::fs::remove_file(&tmp);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(cleanup(exists()))
            }
            // No hard links on this file system: move the name instead (the check above
            // makes overwriting a file created meanwhile unlikely, not impossible).
            Err(_) => std::fs::rename(&tmp, path).map_err(|e| cleanup(io_err(e)))?,
        }
        if durability != Durability::None {
            jsonl::sync_parent_dir(path).map_err(io_err)?;
        }
        let meta = file.metadata().map_err(io_err)?;
        let sync = (durability == Durability::Group)
            .then(|| file.try_clone().ok())
            .flatten()
            .map(|f| GroupSync::start(f, path.to_path_buf()));
        let backing = Backing::File(FileBacking {
            path: path.to_path_buf(),
            file,
            writable: true,
            durability,
            pending: Vec::new(),
            written_len: line.len() as u64,
            dev_ino: (meta.dev(), meta.ino()),
            sync,
            fault: None,
        });
        let mut store = Store::new(backing, header.to_vec(), id, limits);
        store.index_min_bytes = Some(DEFAULT_INDEX_MIN_BYTES);
        Ok(store)
    }

    /// Sets when this store keeps a persisted index (`None`: never).
    pub fn set_index_min_bytes(&mut self, min: Option<u64>) {
        self.index_min_bytes = min;
    }

    /// Opens a session file; a writer takes the lock and cuts a torn tail into a side file.
    pub fn open(path: &Path, opts: OpenOptions) -> Result<Store> {
        let ctx = |what: &str| format!("{what} {}", path.display());
        let file = if opts.readonly {
            File::open(path)
        } else {
            open_nofollow(path, true)
        }
        .map_err(|e| EngineError::io(ctx("opening"), &e))?;
        if !opts.readonly {
            lock_writer(&file, path)?;
            index::remove_stale_temp(path);
        }
        let meta = file
            .metadata()
            .map_err(|e| EngineError::io(ctx("reading"), &e))?;
        if !meta.is_file() {
            return err(
                ErrorCode::Io,
                format!("{} is not a regular file", path.display()),
            );
        }
        // The header: read up to its newline.
        let mut reader = std::io::BufReader::with_capacity(1 << 16, &file);
        let mut header = Vec::new();
        {
            use std::io::{BufRead, Read};
            let mut limited = (&mut reader).take(opts.limits.max_line_bytes as u64 + 1);
            limited
                .read_until(b'\n', &mut header)
                .map_err(|e| EngineError::io(ctx("reading"), &e))?;
        }
        if header.last() != Some(&b'\n') {
            return err(
                ErrorCode::Corrupt,
                format!("{}: missing or incomplete session header", path.display()),
            );
        }
        header.pop();
        if header.last() == Some(&b'\r') {
            header.pop();
        }
        let id = check_header_line(&header)
            .map_err(|e| EngineError::new(e.code, format!("{}: {}", path.display(), e.message)))?;
        let header_len = reader
            .stream_position()
            .map_err(|e| EngineError::io(ctx("reading"), &e))?;
        let sync = (!opts.readonly && opts.durability == Durability::Group)
            .then(|| file.try_clone().ok())
            .flatten()
            .map(|f| GroupSync::start(f, path.to_path_buf()));
        let backing = Backing::File(FileBacking {
            path: path.to_path_buf(),
            file: file
                .try_clone()
                .map_err(|e| EngineError::io(ctx("opening"), &e))?,
            writable: !opts.readonly,
            durability: opts.durability,
            pending: Vec::new(),
            written_len: header_len,
            dev_ino: (meta.dev(), meta.ino()),
            sync,
            fault: None,
        });
        let mut store = Store::new(backing, header, id, opts.limits);
        store.strict = opts.strict;
        store.next_line_no = 2;
        store.index_min_bytes = opts.index_min_bytes;
        let mut start = header_len;
        let mut had_index = false;
        if opts.index_min_bytes.is_some() {
            match index::load(path, &file, &store.header, meta.len()) {
                Ok(loaded) => {
                    if opts.strict {
                        if let Some(first) = loaded.issues.first() {
                            return err(
                                ErrorCode::Corrupt,
                                format!(
                                    "line {} (byte {}): {}: {}",
                                    first.line,
                                    first.offset,
                                    first.kind.as_str(),
                                    first.message
                                ),
                            );
                        }
                    }
                    store.arena = loaded.arena;
                    store.report.issues = loaded.issues;
                    store.next_line_no = loaded.next_line_no;
                    store.indexed_len = loaded.covered;
                    store.index_status = IndexStatus::Loaded;
                    start = loaded.covered;
                    reader
                        .seek(SeekFrom::Start(start))
                        .map_err(|e| EngineError::io(ctx("reading"), &e))?;
                }
                Err(index::Rejected::Invalid) => had_index = true,
                Err(index::Rejected::Missing) => {}
            }
        }
        if let Backing::File(b) = &mut store.backing {
            b.written_len = start;
        }
        let torn = store.scan_from(&mut reader, start)?;
        drop(reader);
        if torn > 0 {
            let good = store.file_backing().map_or(0, |b| b.written_len);
            store.note_torn_tail(torn, good)?;
            if !opts.readonly {
                store.cut_torn_tail(torn)?;
            }
        }
        if store.index_status != IndexStatus::Loaded || store.unindexed_bytes() > 0 {
            let before = store.index_status;
            if store.refresh_index(had_index) {
                store.index_status = match before {
                    IndexStatus::Loaded => IndexStatus::Loaded,
                    _ if had_index => IndexStatus::Rebuilt,
                    _ => IndexStatus::Created,
                };
            }
        }
        Ok(store)
    }

    /// Bytes of the file past what the persisted index covers.
    fn unindexed_bytes(&self) -> u64 {
        self.file_backing()
            .map_or(0, |b| b.written_len.saturating_sub(self.indexed_len))
    }

    /// Writes the persisted index when enough of the file is not covered by it (or `force`
    /// and the file is large enough). Best effort: a failure only costs the next open a
    /// scan. Returns whether an index was written.
    fn refresh_index(&mut self, force: bool) -> bool {
        let Some(min) = self.index_min_bytes else {
            return false;
        };
        let Backing::File(b) = &self.backing else {
            return false;
        };
        let uncovered = b.written_len.saturating_sub(self.indexed_len);
        let big = b.written_len >= min;
        if !big || uncovered == 0 || (!force && uncovered < min && self.indexed_len > 0) {
            return false;
        }
        let bytes = index::encode(
            &b.file,
            &self.header,
            &self.arena,
            b.written_len,
            self.next_line_no,
            &self.report.issues,
        );
        match bytes.and_then(|bytes| index::write(&b.path, &bytes)) {
            Ok(()) => {
                self.indexed_len = b.written_len;
                true
            }
            Err(_) => false,
        }
    }

    /// What happened to the persisted index at open.
    pub fn index_status(&self) -> IndexStatus {
        self.index_status
    }

    /// Scans lines after the known part; returns the number of torn-tail bytes.
    fn scan_from<R: std::io::Read>(&mut self, reader: &mut R, offset: u64) -> Result<u64> {
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

    fn note_torn_tail(&mut self, torn: u64, at: u64) -> Result<()> {
        if torn == 0 {
            return Ok(());
        }
        self.report.torn_tail_bytes = torn;
        self.issue(
            IssueKind::TornTail,
            self.next_line_no,
            at,
            format!("incomplete last line ({torn} bytes without a newline)"),
        )
    }

    /// Moves a torn tail into `<file>.torn-<UTC stamp>` and truncates the file before it.
    fn cut_torn_tail(&mut self, torn: u64) -> Result<()> {
        let Backing::File(b) = &mut self.backing else {
            return Ok(());
        };
        let ctx = |what: &str| format!("{what} {}", b.path.display());
        let mut tail = vec![0u8; torn as usize];
        b.file
            .read_exact_at(&mut tail, b.written_len)
            .map_err(|e| EngineError::io(ctx("reading the torn tail of"), &e))?;
        let stamp = jsonl::utc_stamp();
        let mut attempt = 0u32;
        let (side, mut f) = loop {
            let mut name = b.path.clone().into_os_string();
            name.push(format!(".torn-{stamp}"));
            if attempt > 0 {
                name.push(format!("-{attempt}"));
            }
            let name = PathBuf::from(name);
            match create_private(&name) {
                Ok(f) => break (name, f),
                // Two cuts in one millisecond, or a leftover file: take the next free name.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 1000 => {
                    attempt += 1;
                }
                Err(e) => return Err(EngineError::io(ctx("saving the torn tail of"), &e)),
            }
        };
        let saved = match b.fault.take() {
            Some(Fault::Write(errno)) => Err(std::io::Error::from_raw_os_error(errno)),
            other => {
                b.fault = other;
                f.write_all(&tail).and_then(|()| f.sync_all())
            }
        };
        if let Err(e) = saved {
            // A partial copy would look like a complete one: keep the torn bytes in place.
            drop(f);
            let _ = std::fs::remove_file(&side);
            return Err(EngineError::io(ctx("saving the torn tail of"), &e));
        }
        b.file
            .set_len(b.written_len)
            .and_then(|()| b.file.sync_all())
            .map_err(|e| EngineError::io(ctx("trimming the torn tail of"), &e))?;
        self.torn_path = Some(side);
        Ok(())
    }

    fn issue(&mut self, kind: IssueKind, line: u64, offset: u64, message: String) -> Result<()> {
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
    fn ingest_batch(&mut self, batch: &[BatchLine<'_>]) -> Result<()> {
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

    fn file_backing(&self) -> Option<&FileBacking> {
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

    /// A fresh 8-hex-digit entry id not used in this session.
    pub fn create_entry_id(&self) -> String {
        loop {
            let id = format!("{:08x}", fastrand::u32(..));
            if self.arena.lookup(&id).is_none() {
                return id;
            }
        }
    }

    /// Appends one entry line (compact JSON, no newline); returns its arena index.
    ///
    /// The line is parsed by the same code as the reader, so what is written is exactly
    /// what a reopen will see. Nothing is written when the line or its references are bad.
    pub fn append(&mut self, line: &[u8]) -> Result<u32> {
        self.check_open()?;
        if self.is_readonly() {
            return err(ErrorCode::Readonly, "the session storage is read-only");
        }
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
        if self.limits.depth_exceeded(line) {
            return err(
                ErrorCode::LimitExceeded,
                format!(
                    "entry nests deeper than the limit of {}",
                    self.limits.max_depth
                ),
            );
        }
        let text = simdutf8::basic::from_utf8(line)
            .map_err(|_| EngineError::new(ErrorCode::InvalidArgument, "entry is not UTF-8"))?;
        let parsed = parse_entry(text, self.limits.max_id_bytes).map_err(|e| {
            let code = if e.0.contains("over the limit") {
                ErrorCode::LimitExceeded
            } else {
                ErrorCode::InvalidArgument
            };
            EngineError::new(code, e.0)
        })?;
        let (parent, target, problems) = self.arena.resolve(&parsed);
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
        Ok(self
            .arena
            .push(&parsed, parent, target, offset, line.len() as u32, line_no))
    }

    fn write_line(&mut self, line: &[u8]) -> Result<()> {
        let Backing::File(b) = &mut self.backing else {
            if let Backing::Memory(buf) = &mut self.backing {
                buf.extend_from_slice(line);
                buf.push(b'\n');
            }
            return Ok(());
        };
        if let Some(sync) = &b.sync {
            if let Err(e) = sync.mark_dirty_check() {
                self.poisoned = Some(e.clone());
                return Err(e);
            }
        }
        if b.durability == Durability::None {
            check_unchanged(b)?;
        }
        b.pending.extend_from_slice(line);
        b.pending.push(b'\n');
        if b.durability == Durability::None && b.pending.len() < BUFFER_LIMIT {
            return Ok(());
        }
        let res = write_pending(b);
        if let Err(e) = res {
            self.poisoned = e.1.then(|| e.0.clone());
            return Err(e.0);
        }
        Ok(())
    }

    /// Writes buffered appends and, unless durability is `none`, syncs them.
    pub fn flush(&mut self) -> Result<()> {
        self.check_open()?;
        let Backing::File(b) = &mut self.backing else {
            return Ok(());
        };
        if !b.writable {
            return Ok(());
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

    /// Makes the next write or sync of a file store fail (for tests of failure paths).
    ///
    /// With `group` durability a sync fault hits the background syncer's next sync.
    pub fn inject_fault(&mut self, fault: Option<Fault>) {
        if let Backing::File(b) = &mut self.backing {
            if let (Some(Fault::Sync(errno)), Some(sync)) = (fault, &b.sync) {
                let (lock, _) = &*sync.shared;
                lock.lock().unwrap_or_else(|p| p.into_inner()).fault = Some(errno);
                return;
            }
            b.fault = fault;
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

impl GroupSync {
    /// Fails with the syncer's error if a background sync has failed.
    fn mark_dirty_check(&self) -> Result<()> {
        let (lock, _) = &*self.shared;
        let state = lock.lock().unwrap_or_else(|p| p.into_inner());
        match &state.failure {
            Some(f) => Err(f.clone()),
            None => Ok(()),
        }
    }
}

/// Writes (and unless `none`, syncs) a new file's header line.
fn write_header(
    file: &mut File,
    line: &[u8],
    durability: Durability,
    path: &Path,
) -> std::io::Result<()> {
    if let Some(errno) = test_fault_on_create() {
        return Err(std::io::Error::from_raw_os_error(errno));
    }
    file.write_all(line)?;
    if durability != Durability::None {
        file.sync_all()?;
        jsonl::sync_parent_dir(path)?;
    }
    Ok(())
}

/// Tests set `SESSIONTREE_TEST_FAIL_CREATE=<errno>` to make header writes fail.
fn test_fault_on_create() -> Option<i32> {
    std::env::var("SESSIONTREE_TEST_FAIL_CREATE")
        .ok()?
        .parse()
        .ok()
}

/// `fdatasync`, or the injected sync fault.
fn sync_file(b: &mut FileBacking) -> Result<()> {
    let res = match b.fault {
        Some(Fault::Sync(errno)) => {
            b.fault = None;
            Err(std::io::Error::from_raw_os_error(errno))
        }
        _ => b.file.sync_data(),
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
    match std::fs::symlink_metadata(&b.path) {
        Ok(m) if (m.dev(), m.ino()) == b.dev_ino => {}
        Ok(_) => return changed("was replaced"),
        Err(_) => return changed("was removed"),
    }
    match b.file.metadata() {
        Ok(m) if m.len() == b.written_len => Ok(()),
        Ok(_) => changed("was changed by another program"),
        Err(e) => Err(EngineError::io(
            format!("checking {}", b.path.display()),
            &e,
        )),
    }
}

/// Writes `pending` in one `write`; on failure trims any partial line back off.
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
    let path = b.path.display().to_string();
    let written = match b.fault.take() {
        Some(Fault::Write(errno)) => {
            let half = &b.pending[..b.pending.len() / 2];
            b.file
                .write_all_at(half, b.written_len)
                .and(Err(std::io::Error::from_raw_os_error(errno)))
        }
        other => {
            b.fault = other;
            b.file.write_all_at(&b.pending, b.written_len)
        }
    };
    if let Err(e) = written {
        let error = EngineError::io(format!("appending to {path}"), &e);
        b.pending.clear();
        let trimmed = b.file.set_len(b.written_len).is_ok();
        return Err((error, buffered || !trimmed));
    }
    b.written_len += b.pending.len() as u64;
    b.pending.clear();
    match b.durability {
        Durability::Fsync => sync_file(b).map_err(|e| (e, true)),
        Durability::Group => match &b.sync {
            Some(s) => s.mark_dirty().map_err(|e| (e, true)),
            None => Ok(()),
        },
        Durability::None | Durability::Flush => Ok(()),
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
    if limits.depth_exceeded(trimmed) {
        let max = limits.max_depth;
        return Pre::Issue(
            IssueKind::TooLarge,
            format!("JSON nested deeper than the limit of {max}"),
        );
    }
    match parse_entry(text, limits.max_id_bytes) {
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
