//! Opening a store: a memory buffer, a new file, or an existing file (lock, header, persisted
//! index, scan, torn tail), into the backing (`backing.rs`) that holds the bytes afterwards.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use memchr::memchr;

use crate::engine::backing::{
    Backing, FileBacking, IndexStatus, OpenOptions, DEFAULT_INDEX_MIN_BYTES,
};
use crate::engine::dialect::{self, Dialect};
use crate::engine::error::{err, EngineError, ErrorCode, Result};
use crate::engine::hooks;
use crate::engine::index;
use crate::engine::jsonl::{
    self, lock_writer, open_error, open_regular, scan, scan_error, Durability, Limits,
};
use crate::engine::line::parse_header;
use crate::engine::store::Store;
use crate::engine::syncer::{self, GroupSync};
use crate::engine::sys::{self, create_private, FileAt};
use crate::engine::types::{nests_deeper, LineError};

pub(super) fn check_header_line(line: &[u8], limits: &Limits) -> Result<String> {
    let text = std::str::from_utf8(line)
        .map_err(|_| EngineError::new(ErrorCode::Corrupt, "session header is not UTF-8"))?;
    // The header is read once per file: the one line whose whole text is looked at for
    // its depth (its `metadata` is free-form).
    if nests_deeper(line, limits.max_depth) {
        return err(
            ErrorCode::Corrupt,
            format!(
                "session header nests deeper than the limit of {}",
                limits.max_depth
            ),
        );
    }
    parse_header(text.trim_end_matches('\r'))
        .map_err(|e| EngineError::new(ErrorCode::Corrupt, e.to_string()))
}

/// How much after the header is read to tell the dialect, at most.
const DIALECT_PEEK_BYTES: usize = 64 << 10;
/// How many entry lines are looked at to tell the dialect, at most.
const DIALECT_PEEK_LINES: usize = 64;

/// The dialect of a file whose header is `header` and whose next bytes are `after` (the
/// complete lines in them are looked at), and the session id its header gives.
pub(super) fn check_header_and_dialect(
    header: &[u8],
    after: &[u8],
    limits: &Limits,
) -> Result<(String, Dialect)> {
    let text = std::str::from_utf8(header)
        .map_err(|_| EngineError::new(ErrorCode::Corrupt, "session header is not UTF-8"))?;
    let corrupt = |e: LineError| EngineError::new(ErrorCode::Corrupt, e.to_string());
    let end = memchr::memrchr(b'\n', after).map_or(0, |i| i + 1);
    let lines = after[..end]
        .split(|&b| b == b'\n')
        .filter_map(|l| std::str::from_utf8(l).ok())
        .take(DIALECT_PEEK_LINES);
    let found = if nests_deeper(header, limits.max_depth) {
        Dialect::Native
    } else {
        dialect::detect(text.trim_end_matches('\r'), lines).map_err(corrupt)?
    };
    let id = if found.is_pi() {
        let native = dialect::header_to_native(text).map_err(corrupt)?;
        check_header_line(native.as_bytes(), limits)?
    } else {
        check_header_line(header, limits)?
    };
    Ok((id, found))
}

impl Store {
    /// A store kept in memory, starting from a header line (no newline).
    pub fn memory(header: &[u8], limits: Limits) -> Result<Store> {
        let id = check_header_line(header, &limits)?;
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
        // Every line is in memory: the first ones tell the dialect, however long.
        let peek = &data[header_end + 1..];
        let (id, dialect) = check_header_and_dialect(&data[..header_end], peek, &limits)?;
        let mut store = Store::new(
            Backing::Memory(data[..=header_end].to_vec()),
            data[..header_end].to_vec(),
            id,
            limits,
        );
        store.dialect = dialect;
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
        Store::create_in(path, header, durability, limits, Dialect::Native)
    }

    /// [`Store::create`] in `dialect`: `header` (a sessiontree header) and every entry
    /// appended are written in it. A pi header keeps `parentSession` (null when there is
    /// none), so the file is known as pi's before it has entries.
    pub fn create_in(
        path: &Path,
        header: &[u8],
        durability: Durability,
        limits: Limits,
        dialect: Dialect,
    ) -> Result<Store> {
        let id = check_header_line(header, &limits)?;
        let pi_header;
        let header = if dialect.is_pi() {
            let text = std::str::from_utf8(header).unwrap_or_default();
            pi_header = dialect::header_to_pi_new(text)
                .map_err(|e| EngineError::new(ErrorCode::InvalidArgument, e.to_string()))?;
            pi_header.as_bytes()
        } else {
            header
        };
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
        // Started before the file exists: a `group` writer that could not be synced must
        // fail here, not after its file appeared.
        let syncer = match durability {
            Durability::Group => Some(syncer::ready()?),
            _ => None,
        };
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
            // A missing directory is an OS error, not an unknown session (API.md: `io`).
            .map_err(|e| EngineError::os(format!("creating {}", path.display()), &e))?;
        let cleanup = |e: EngineError| {
            let _ = std::fs::remove_file(&tmp);
            e
        };
        lock_writer(&file, path).map_err(cleanup)?;
        let mut line = header.to_vec();
        line.push(b'\n');
        let io_err = |e: std::io::Error| EngineError::os(format!("writing {}", path.display()), &e);
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
        let sync = match syncer {
            Some(()) => Some(GroupSync::start(sys::raw_file(&file), path.to_path_buf())?),
            None => None,
        };
        let backing = Backing::File(FileBacking::new(
            path,
            file,
            true,
            durability,
            line.len() as u64,
            &meta,
            sync,
        ));
        let mut store = Store::new(backing, header.to_vec(), id, limits);
        store.dialect = dialect;
        store.index_min_bytes = Some(DEFAULT_INDEX_MIN_BYTES);
        Ok(store)
    }

    /// Sets when this store keeps a persisted index (`None`: never).
    pub fn set_index_min_bytes(&mut self, min: Option<u64>) {
        self.index_min_bytes = min;
    }

    /// Opens a session file; a writer takes the lock and cuts a torn tail into a side file.
    ///
    /// Readers and writers alike refuse a symlink at the session's name and anything but
    /// a regular file (`io`), without waiting on a FIFO or device.
    pub fn open(path: &Path, opts: OpenOptions) -> Result<Store> {
        let ctx = |what: &str| format!("{what} {}", path.display());
        let file = open_regular(path, !opts.readonly).map_err(|e| open_error(path, &e))?;
        if !opts.readonly {
            lock_writer(&file, path)?;
            index::remove_stale_temp(path);
        }
        let meta = file
            .metadata()
            .map_err(|e| EngineError::io(ctx("reading"), &e))?;
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
        let header_len = reader
            .stream_position()
            .map_err(|e| EngineError::io(ctx("reading"), &e))?;
        let peek = peek_lines(&file, header_len, opts.limits.max_line_bytes)
            .map_err(|e| EngineError::io(ctx("reading"), &e))?;
        let (id, dialect) = check_header_and_dialect(&header, &peek, &opts.limits)
            .map_err(|e| EngineError::new(e.code, format!("{}: {}", path.display(), e.message)))?;
        if !opts.readonly && !dialect.writable() {
            return err(
                ErrorCode::Readonly,
                format!(
                    "{} is a pi session of format v{}: pi rewrites such files when it opens \
                     them, so sessiontree only reads them (open it read-only, or convert it to \
                     v3 with `sessiontree convert`)",
                    path.display(),
                    dialect.version()
                ),
            );
        }
        let own = file
            .try_clone()
            .map_err(|e| EngineError::io(ctx("opening"), &e))?;
        let sync = if !opts.readonly && opts.durability == Durability::Group {
            Some(GroupSync::start(sys::raw_file(&own), path.to_path_buf())?)
        } else {
            None
        };
        let backing = Backing::File(FileBacking::new(
            path,
            own,
            !opts.readonly,
            opts.durability,
            header_len,
            &meta,
            sync,
        ));
        let mut store = Store::new(backing, header, id, opts.limits);
        store.dialect = dialect;
        store.strict = opts.strict;
        store.next_line_no = 2;
        store.index_min_bytes = opts.index_min_bytes;
        let mut start = header_len;
        let mut had_index = false;
        if opts.index_min_bytes.is_some() {
            match index::load(path, &file, &store.header, &store.limits, meta.len()) {
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
                    store.report.counts = loaded.counts;
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
    pub(super) fn unindexed_bytes(&self) -> u64 {
        self.file_backing()
            .map_or(0, |b| b.written_len.saturating_sub(self.indexed_len))
    }

    /// Writes the persisted index when enough of the file is not covered by it (or `force`
    /// and the file is large enough). Best effort: a failure only costs the next open a
    /// scan. Returns whether an index was written.
    pub(super) fn refresh_index(&mut self, force: bool) -> bool {
        let Some(min) = self.index_min_bytes else {
            return false;
        };
        if self.arena.has_repeats() {
            return false; // the index's id table holds each id once
        }
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
            &self.limits,
            &self.arena,
            b.written_len,
            self.next_line_no,
            &self.report,
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
}

/// Writes (and unless `none`, syncs) a new file's header line.
/// The bytes after the header that tell the dialect: [`DIALECT_PEEK_BYTES`], or more
/// until they hold a whole line (a first entry can be long), up to a line's limit.
fn peek_lines(file: &File, offset: u64, max_line: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut want = DIALECT_PEEK_BYTES;
    loop {
        let start = buf.len();
        buf.resize(want, 0);
        let got = read_at_most(file, &mut buf[start..], offset + start as u64)?;
        buf.truncate(start + got);
        if got < want - start || memchr(b'\n', &buf).is_some() || want > max_line {
            return Ok(buf);
        }
        want *= 2;
    }
}

/// Reads up to `buf.len()` bytes at `offset` (fewer at the end of the file).
fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

fn write_header(
    file: &mut File,
    line: &[u8],
    durability: Durability,
    path: &Path,
) -> std::io::Result<()> {
    if let Some(errno) = hooks::create_fault() {
        return Err(std::io::Error::from_raw_os_error(errno));
    }
    file.write_all(line)?;
    if durability != Durability::None {
        file.sync_all()?;
        jsonl::sync_parent_dir(path)?;
    }
    Ok(())
}
