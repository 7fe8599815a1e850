//! Forking: a new session file holding some of this store's entries, written by copying
//! their lines' bytes in long runs (`copy_file_range`), its arena built from this store's
//! instead of by scanning the new file.
//!
//! The caller (Python's one fork planner, `sessiontree.repo.fork`) decides what is kept,
//! under which parent, and which entries are appended after the copy; this module writes
//! it. A kept line is copied byte for byte unless its parent changes: then only the value
//! of its `parent_id` is replaced. Lines are not parsed again, since the source read them
//! with the same code and a session file is append-only: the copy's arena takes each
//! entry's node and usage from the source's, and only label and name lines (a few) are
//! read for their text. The appended entries are checked as any append is. The file is written under a temporary name, synced, then linked into place,
//! so the session name never shows a partial file.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fs::File;
use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::engine::arena::{Kind, RefProblem, NONE};
use crate::engine::backing::{Backing, FileBacking};
use crate::engine::dialect::{self, Dialect};
use crate::engine::error::{err, EngineError, ErrorCode, Result};
use crate::engine::hooks;
use crate::engine::json_text::push_str;
use crate::engine::jsonl::{self, lock_writer, Durability, IssueKind, Limits};
use crate::engine::line::parse_entry;
use crate::engine::open::check_header_line;
use crate::engine::store::Store;
use crate::engine::syncer::GroupSync;
use crate::engine::sys::{self, FileAt};
use crate::engine::types::{LineError, ParsedEntry, ReadLimits};

/// How the forked store is opened.
#[derive(Debug, Clone, Copy)]
pub struct ForkOptions {
    /// The durability of appends to the fork.
    pub durability: Durability,
    /// Size limits of the fork.
    pub limits: Limits,
    /// As `OpenOptions::index_min_bytes`.
    pub index_min_bytes: Option<u64>,
}

/// Copies are handed to the kernel in runs of at most this many bytes, so the writeback
/// of one run overlaps the copy of the next.
const RUN_BYTES: u64 = 8 << 20;

impl Store {
    /// Writes a new session file at `dest` (refusing an existing one, `exists`): `header`,
    /// then entries `kept` of this store in that order, entry `kept[i]` under entry
    /// `parents[i]` of this store (an earlier kept one) or none ([`NONE`]), then the
    /// `extras` lines. Returns the store of the new file, open for writing.
    pub fn fork_to(
        &self,
        dest: &Path,
        header: &[u8],
        kept: &[u32],
        parents: &[u32],
        extras: &[Vec<u8>],
        opts: ForkOptions,
    ) -> Result<Store> {
        self.check_open()?;
        let session_id = check_header_line(header, &self.limits)?;
        if memchr::memchr(b'\n', header).is_some() {
            return err(ErrorCode::InvalidArgument, "the header must be one line");
        }
        // A fork of a pi session is a pi session (of pi's current version), as pi's own.
        let dialect = match self.dialect {
            Dialect::Native => Dialect::Native,
            Dialect::Pi(_) => Dialect::Pi(3),
        };
        let pi_header;
        let header = if dialect.is_pi() {
            let text = std::str::from_utf8(header).unwrap_or_default();
            pi_header = dialect::header_to_pi(text)
                .map_err(|e| EngineError::new(ErrorCode::InvalidArgument, e.to_string()))?;
            pi_header.as_bytes()
        } else {
            header
        };
        if kept.len() != parents.len() {
            return err(
                ErrorCode::InvalidArgument,
                "kept entries and parents differ in length",
            );
        }
        let exists = || {
            EngineError::new(
                ErrorCode::Exists,
                format!("{} already exists", dest.display()),
            )
        };
        if dest.symlink_metadata().is_ok() {
            return Err(exists());
        }
        // A hidden temporary name beside the file, as the repository's atomic writes use.
        let base = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dest.with_file_name(format!(
            ".{base}.{}.{:08x}.tmp",
            std::process::id(),
            fastrand::u32(..)
        ));
        let file = sys::create_private(&tmp)
            .map_err(|e| EngineError::os(format!("creating {}", dest.display()), &e))?;
        let remove_tmp = |e: EngineError| {
            let _ = std::fs::remove_file(&tmp);
            e
        };
        lock_writer(&file, dest).map_err(remove_tmp)?;
        let mut out = Copy {
            src: self,
            file: &file,
            len: 0,
            buf: Vec::with_capacity(1 << 16),
            run: None,
            synced_to: 0,
            dest,
        };
        let built = out
            .write_all(header, kept, parents, extras, opts.limits)
            .and_then(|arena| {
                out.flush()?;
                file.sync_data().map_err(|e| out.io_err(&e))?;
                Ok(arena)
            });
        let (arena, next_line_no) = built.map_err(remove_tmp)?;
        let total = out.len;
        let io_err = |e: std::io::Error| EngineError::os(format!("writing {}", dest.display()), &e);
        if let Some(errno) = hooks::publish_fault() {
            return Err(remove_tmp(io_err(std::io::Error::from_raw_os_error(errno))));
        }
        match std::fs::hard_link(&tmp, dest) {
            Ok(()) => {
                let _ = std::fs::remove_file(&tmp);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(remove_tmp(exists()))
            }
            // No hard links on this file system: move the name instead (as `create`).
            Err(_) => std::fs::rename(&tmp, dest).map_err(|e| remove_tmp(io_err(e)))?,
        }
        jsonl::sync_parent_dir(dest).map_err(io_err)?;
        let meta = file.metadata().map_err(io_err)?;
        let sync = match opts.durability {
            Durability::Group => Some(GroupSync::start(sys::raw_file(&file), dest.to_path_buf())?),
            _ => None,
        };
        let backing = Backing::File(FileBacking::new(
            dest,
            file,
            true,
            opts.durability,
            total,
            &meta,
            sync,
        ));
        let mut store = Store::new(backing, header.to_vec(), session_id, opts.limits);
        store.dialect = dialect;
        store.arena = arena;
        store.next_line_no = next_line_no;
        store.index_min_bytes = opts.index_min_bytes;
        Ok(store)
    }

    /// The bytes `[start, end)` of the session document, wherever they are.
    fn source_bytes(&self, start: u64, end: u64) -> Result<Vec<u8>> {
        match &self.backing {
            Backing::Memory(buf) => Ok(buf[start as usize..end as usize].to_vec()),
            Backing::File(b) => {
                let mut out = vec![0u8; (end - start) as usize];
                let on_disk = end.min(b.written_len).saturating_sub(start) as usize;
                b.file
                    .read_exact_at(&mut out[..on_disk], start)
                    .map_err(|e| EngineError::io(format!("reading {}", b.path.display()), &e))?;
                if on_disk < out.len() {
                    let from = (start + on_disk as u64 - b.written_len) as usize;
                    let n = out.len() - on_disk;
                    out[on_disk..].copy_from_slice(&b.pending[from..from + n]);
                }
                Ok(out)
            }
            Backing::Closed(_) => err(ErrorCode::Closed, "the session storage is closed"),
        }
    }
}

/// The new file being written: buffered small writes, and runs of source bytes copied by
/// the kernel.
struct Copy<'a> {
    src: &'a Store,
    file: &'a File,
    /// Bytes of the new file so far (written, buffered and in the pending run).
    len: u64,
    buf: Vec<u8>,
    /// Source bytes `[start, end)` still to copy, after `buf`.
    run: Option<(u64, u64)>,
    /// Bytes of the new file whose writeback was started.
    synced_to: u64,
    dest: &'a Path,
}

/// The `parent_id` value of an entry line, as the reader finds it.
#[derive(Deserialize)]
struct ParentOnly<'a> {
    #[serde(borrow)]
    parent_id: &'a RawValue,
}

impl Copy<'_> {
    fn io_err(&self, e: &std::io::Error) -> EngineError {
        EngineError::io(format!("writing {}", self.dest.display()), e)
    }

    /// Writes everything; returns the new arena and the number of the next line.
    fn write_all(
        &mut self,
        header: &[u8],
        kept: &[u32],
        parents: &[u32],
        extras: &[Vec<u8>],
        limits: Limits,
    ) -> Result<(crate::engine::Arena, u64)> {
        let src = self.src;
        let source = src.arena();
        let mut arena = crate::engine::Arena::new();
        self.put(header)?;
        self.put(b"\n")?;
        // Lines that named a parent the reader never found: the source made them roots,
        // and so must their copies, in their bytes too.
        let dangling: HashSet<u64> = src
            .report()
            .issues
            .iter()
            .filter(|i| i.kind == IssueKind::DanglingParent)
            .map(|i| i.line)
            .collect();
        let mut new_index = vec![NONE; source.len()];
        let mut line_no = 2;
        let copied = |new_index: &[u32], i: u32| new_index.get(i as usize).copied().unwrap_or(NONE);
        for (&k, &p) in kept.iter().zip(parents) {
            if k as usize >= source.len() || copied(&new_index, k) != NONE {
                return err(
                    ErrorCode::InvalidArgument,
                    format!("entry index {k} is out of range or copied twice"),
                );
            }
            let parent = match p {
                NONE => NONE,
                p => match copied(&new_index, p) {
                    NONE => {
                        return err(
                            ErrorCode::InvalidArgument,
                            format!("parent index {p} is not an entry copied before"),
                        )
                    }
                    i => i,
                },
            };
            let node = source.node(k);
            let reparent = node.parent != p || (p == NONE && dangling.contains(&node.line_no));
            let offset = self.len;
            let kept_line;
            // pi's v1 and v2 lines are written as v3 (the fork's header says v3).
            let rewrite = reparent || matches!(src.dialect, Dialect::Pi(1 | 2));
            let line: Option<&[u8]> = if rewrite {
                let old = if src.dialect.is_pi() {
                    let raw = src.source_bytes(node.offset, node.offset + u64::from(node.len))?;
                    src.to_native(k, &raw)?
                } else {
                    src.source_bytes(node.offset, node.offset + u64::from(node.len))?
                };
                let parent_id = (parent != NONE).then(|| arena.id(parent));
                kept_line = to_dialect(src.dialect, replace_parent(&old, parent_id)?)?;
                self.put(&kept_line)?;
                self.put(b"\n")?;
                Some(&kept_line)
            } else {
                self.copy(node.offset, u64::from(node.len))?;
                None
            };
            let len = line.map_or(node.len, |l| l.len() as u32);
            // The source's arena has all the copy's needs but label and name texts: only
            // those few lines are read again.
            let read;
            let parsed = if matches!(node.kind, Kind::Label | Kind::SessionInfo) {
                read = match line {
                    Some(l) => Cow::Borrowed(l),
                    None => Cow::Owned(
                        src.source_bytes(node.offset, node.offset + u64::from(node.len))?,
                    ),
                };
                let read = match (line, src.dialect.is_pi()) {
                    (None, true) => Cow::Owned(src.to_native(k, &read)?),
                    (Some(l), true) => Cow::Owned(
                        dialect::entry_to_native(
                            std::str::from_utf8(l).map_err(|_| changed(src))?,
                            Dialect::Pi(3),
                            None,
                        )
                        .map_err(|_| changed(src))?
                        .into_bytes(),
                    ),
                    _ => read,
                };
                let text = std::str::from_utf8(&read).map_err(|_| changed(src))?;
                parse_entry(text, ReadLimits::NONE)
                    .map_err(|_| changed(src))?
                    .into_owned()
            } else {
                ParsedEntry {
                    kind: node.kind,
                    type_name: Cow::Borrowed(source.unknown_type(k).unwrap_or(node.kind.name())),
                    id: Cow::Borrowed(source.id(k)),
                    parent_id: None,
                    timestamp: Cow::Borrowed(source.timestamp(k)),
                    target_id: (node.target != NONE).then(|| Cow::Borrowed(source.id(node.target))),
                    text: None,
                    first_kept: None,
                    retained_tail: node.retained_tail,
                    role: node.role,
                    usage: source.usage(k),
                }
            };
            if parsed.id != source.id(k) || parsed.kind != node.kind {
                return Err(changed(src));
            }
            let target = match node.target {
                NONE => NONE,
                t => new_index[t as usize],
            };
            if node.kind == Kind::Leaf && node.target != NONE && target == NONE {
                return err(
                    ErrorCode::InvalidArgument,
                    format!("leaf entry {:?} moves to an entry not copied", source.id(k)),
                );
            }
            new_index[k as usize] =
                arena.push(&parsed, parent, target, offset, len, line_no, node.repeat);
            line_no += 1;
        }
        for extra in extras {
            let offset = self.len;
            let text = std::str::from_utf8(extra)
                .map_err(|_| EngineError::new(ErrorCode::InvalidArgument, "entry is not UTF-8"))?;
            if extra.len() > limits.max_line_bytes || memchr::memchr(b'\n', extra).is_some() {
                return err(
                    ErrorCode::InvalidArgument,
                    "an appended entry is not one line",
                );
            }
            let bad = |e: LineError| EngineError::new(ErrorCode::InvalidArgument, e.to_string());
            let mut parsed = parse_entry(text, limits.read()).map_err(bad)?;
            let pi_line;
            let extra: &[u8] = if src.dialect.is_pi() {
                pi_line = dialect::entry_to_pi(text).map_err(bad)?;
                let native =
                    dialect::entry_to_native(&pi_line, Dialect::Pi(3), None).map_err(bad)?;
                parsed = parse_entry(&native, limits.read())
                    .map_err(bad)?
                    .into_owned();
                pi_line.as_bytes()
            } else {
                extra
            };
            let (parent, target, problems) = arena.resolve(&parsed);
            if let Some(p) = problems.first() {
                let what = match p {
                    RefProblem::DuplicateId => "its id is already used",
                    _ => "it refers to an entry not copied",
                };
                return err(
                    ErrorCode::InvalidArgument,
                    format!("appended entry {:?}: {what}", parsed.id),
                );
            }
            self.put(extra)?;
            self.put(b"\n")?;
            arena.push(
                &parsed,
                parent,
                target,
                offset,
                extra.len() as u32,
                line_no,
                false,
            );
            line_no += 1;
        }
        Ok((arena, line_no))
    }

    /// Appends `bytes` (after any pending run).
    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        if self.run.is_some() {
            self.flush_run()?;
        }
        self.buf.extend_from_slice(bytes);
        self.len += bytes.len() as u64;
        if self.buf.len() >= 1 << 16 {
            self.flush_buf()?;
        }
        Ok(())
    }

    /// Appends the source line at `offset` (`len` bytes) and a newline. Lines that follow
    /// each other in the source join one run: the newline between them is copied too.
    fn copy(&mut self, offset: u64, len: u64) -> Result<()> {
        match &mut self.run {
            Some((start, end)) if *end + 1 == offset && *end - *start < RUN_BYTES => {
                *end = offset + len;
                self.len += len + 1;
            }
            _ => {
                if self.run.is_some() {
                    self.flush_run()?;
                }
                self.flush_buf()?;
                self.run = Some((offset, offset + len));
                self.len += len + 1;
            }
        }
        Ok(())
    }

    fn written(&self) -> u64 {
        // `len` counts the pending run with its closing newline.
        self.len - self.buf.len() as u64 - self.run.map_or(0, |(start, end)| end - start + 1)
    }

    fn flush_buf(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let at = self.written();
        self.file
            .write_all_at(&self.buf, at)
            .map_err(|e| self.io_err(&e))?;
        self.buf.clear();
        Ok(())
    }

    fn flush_run(&mut self) -> Result<()> {
        let Some((start, end)) = self.run else {
            return Ok(());
        };
        // The buffer was written before the run started.
        let at = self.written();
        self.run = None;
        self.copy_range(start, end, at)?;
        self.buf.push(b'\n');
        self.start_writeback()?;
        Ok(())
    }

    /// Copies source bytes `[start, end)` to offset `at` of the new file.
    fn copy_range(&self, start: u64, end: u64, at: u64) -> Result<()> {
        let (file, on_disk) = match &self.src.backing {
            Backing::File(b) => (Some(&b.file), b.written_len),
            Backing::Memory(_) | Backing::Closed(_) => (None, 0),
        };
        let disk_end = end.min(on_disk);
        let mut done = 0;
        if let Some(src) = file.filter(|_| start < disk_end) {
            done = sys::kernel_copy(src, self.file, start, disk_end, at)
                .map_err(|e| self.io_err(&e))?;
        }
        if start + done < end {
            // Bytes not on disk (a memory store, a writer's buffer) or no kernel copy.
            let bytes = self.src.source_bytes(start + done, end)?;
            self.file
                .write_all_at(&bytes, at + done)
                .map_err(|e| self.io_err(&e))?;
        }
        Ok(())
    }

    /// Starts writing back what was written so far, so the final sync has less to wait for.
    fn start_writeback(&mut self) -> Result<()> {
        let to = self.written();
        if to - self.synced_to < RUN_BYTES {
            return Ok(());
        }
        sys::start_writeback(self.file, self.synced_to, to - self.synced_to);
        self.synced_to = to;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.flush_run()?;
        self.flush_buf()
    }
}

/// The source file no longer holds what its arena says.
fn changed(src: &Store) -> EngineError {
    let path = src
        .path()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    EngineError::new(
        ErrorCode::ModifiedExternally,
        format!("{path} was changed by another program since it was read; nothing was forked"),
    )
}

/// `line` with the value of its `parent_id` replaced (`None`: `null`); every other byte is
/// kept.
/// A sessiontree line in the fork's dialect.
fn to_dialect(dialect: Dialect, line: Vec<u8>) -> Result<Vec<u8>> {
    if !dialect.is_pi() {
        return Ok(line);
    }
    let text = std::str::from_utf8(&line)
        .map_err(|_| EngineError::new(ErrorCode::Corrupt, "entry line is not UTF-8"))?;
    dialect::entry_to_pi(text)
        .map(String::into_bytes)
        .map_err(|e| EngineError::new(ErrorCode::Corrupt, e.to_string()))
}

/// The entry line with its `parent_id` value replaced, every other byte kept.
pub fn replace_parent(line: &[u8], parent_id: Option<&str>) -> Result<Vec<u8>> {
    let text = std::str::from_utf8(line)
        .map_err(|_| EngineError::new(ErrorCode::Corrupt, "entry line is not UTF-8"))?;
    let found: ParentOnly<'_> = serde_json::from_str(text)
        .map_err(|e| EngineError::new(ErrorCode::Corrupt, format!("entry line: {e}")))?;
    let value = found.parent_id.get();
    let start = value.as_ptr() as usize - text.as_ptr() as usize;
    let end = start + value.len();
    let mut out = Vec::with_capacity(line.len() + 16);
    out.extend_from_slice(&line[..start]);
    match parent_id {
        Some(id) => push_str(&mut out, id),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(&line[end..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::replace_parent;

    #[test]
    fn only_the_parent_changes() {
        let line = br#"{"type":"custom","id":"b","parent_id":"a","timestamp":"T","data":{"parent_id":1},"x":"\u00e9"}"#;
        let got = replace_parent(line, Some("new \"one\"")).unwrap();
        assert_eq!(
            got,
            br#"{"type":"custom","id":"b","parent_id":"new \"one\"","timestamp":"T","data":{"parent_id":1},"x":"\u00e9"}"#
        );
        let got = replace_parent(br#"{"parent_id" : null ,"id":"b"}"#, None).unwrap();
        assert_eq!(got, br#"{"parent_id" : null ,"id":"b"}"#);
        let got = replace_parent(br#"{"par\u0065nt_id":"a","id":"b"}"#, None).unwrap();
        assert_eq!(got, br#"{"par\u0065nt_id":null,"id":"b"}"#);
    }
}

#[cfg(test)]
mod store_tests {
    use std::path::Path;

    use super::ForkOptions;
    use crate::engine::arena::NONE;
    use crate::engine::store::OpenOptions;
    use crate::engine::{Durability, ErrorCode, Limits, Store};

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w","parent_session":null,"metadata":null}"#;
    const FORK_HEADER: &str = r#"{"type":"session","version":3,"id":"s2","timestamp":"2026-01-02T00:00:00.000Z","cwd":"/w","parent_session":"s1","metadata":null}"#;

    fn line(kind: &str, id: &str, parent: Option<&str>, ts: &str, extra: &str) -> String {
        let parent = parent.map_or("null".to_string(), |p| format!("{p:?}"));
        format!(r#"{{"type":"{kind}","id":"{id}","parent_id":{parent},"timestamp":"{ts}"{extra}}}"#)
    }

    /// A source with every kind the fork treats specially, a branch, a CRLF line and a
    /// dangling parent.
    fn source_lines() -> Vec<String> {
        let t = "2026-01-01T00:00:0";
        vec![
            line(
                "message",
                "a",
                None,
                &format!("{t}1.000Z"),
                r#","message":{"role":"user","content":"hi","timestamp":1}"#,
            ),
            line(
                "message",
                "b",
                Some("a"),
                &format!("{t}2.000Z"),
                r#","message":{"role":"assistant","content":[],"provider":"p","model":"m","usage":{"input":3,"output":4,"cache_read":0,"cache_write":0,"total_tokens":7,"cost":{"total":0.5}},"timestamp":2}"#,
            ),
            line(
                "label",
                "l1",
                Some("b"),
                &format!("{t}3.000Z"),
                r#","target_id":"a","label":"start""#,
            ),
            line(
                "session_info",
                "n1",
                Some("l1"),
                &format!("{t}4.000Z"),
                r#","name":"demo""#,
            ) + "\r",
            line(
                "message",
                "c",
                Some("n1"),
                &format!("{t}5.000Z"),
                r#","message":{"role":"tool_result","tool_call_id":"x","tool_name":"t","content":[],"timestamp":3}"#,
            ),
            line(
                "leaf",
                "lf",
                Some("c"),
                &format!("{t}6.000Z"),
                r#","target_id":"a""#,
            ),
            line(
                "message",
                "d",
                Some("a"),
                &format!("{t}7.000Z"),
                r#","message":{"role":"user","content":"other","timestamp":4}"#,
            ),
            line(
                "custom",
                "g",
                Some("nowhere"),
                &format!("{t}8.000Z"),
                r#","custom_type":"k""#,
            ),
            line(
                "future_kind",
                "h",
                Some("g"),
                &format!("{t}9.000Z"),
                r#","x":1"#,
            ),
            line(
                "compaction",
                "e",
                Some("h"),
                "2026-01-01T00:00:10.000Z",
                r#","summary":"s","first_kept_entry_id":"c","tokens_before":5,"usage":{"input":1,"output":1,"cache_read":0,"cache_write":0,"total_tokens":2,"cost":{"total":0.25}}"#,
            ),
        ]
    }

    fn source(dir: &Path) -> Store {
        let path = dir.join("src.jsonl");
        let body: String = std::iter::once(HEADER.to_string())
            .chain(source_lines())
            .map(|l| l + "\n")
            .collect();
        std::fs::write(&path, body).unwrap();
        Store::open(
            &path,
            OpenOptions {
                readonly: true,
                index_min_bytes: None,
                ..OpenOptions::default()
            },
        )
        .unwrap()
    }

    fn opts() -> ForkOptions {
        ForkOptions {
            durability: Durability::Flush,
            limits: Limits::default(),
            index_min_bytes: None,
        }
    }

    fn idx(s: &Store, id: &str) -> u32 {
        s.arena().lookup(id).unwrap()
    }

    /// Everything a reader can observe of a store.
    fn observed(s: &Store) -> String {
        let a = s.arena();
        let mut out = String::new();
        for i in 0..a.len() as u32 {
            let n = a.node(i);
            let line = String::from_utf8(s.line(i).unwrap()).unwrap();
            out += &format!(
                "{} {:?} {:?} p={} t={} off={} len={} no={} tail={} {:?} {line}\n",
                a.id(i),
                n.kind,
                n.role,
                n.parent,
                n.target,
                n.offset,
                n.len,
                n.line_no,
                n.retained_tail,
                a.unknown_type(i)
            );
        }
        let mut labels: Vec<_> = a
            .labels()
            .map(|(i, l)| (a.id(i).to_string(), l.to_string()))
            .collect();
        labels.sort();
        out += &format!(
            "labels={labels:?} name={:?} leaf={} newest={:?} stats={:?} len={} next={}",
            a.name(),
            a.leaf(),
            a.newest_timestamp(),
            a.stats(),
            s.byte_len(),
            s.next_line_no
        );
        out
    }

    fn check_against_reopen(fork: &Store, path: &Path) {
        let again = Store::open(
            path,
            OpenOptions {
                readonly: true,
                index_min_bytes: None,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        assert!(
            again.report().issues.is_empty(),
            "{:?}",
            again.report().issues
        );
        assert_eq!(observed(fork), observed(&again));
    }

    #[test]
    fn a_fork_is_what_a_reopen_of_its_file_reads() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path());
        // Everything, as the source has it.
        let all: Vec<u32> = (0..src.arena().len() as u32).collect();
        let parents: Vec<u32> = all.iter().map(|&i| src.arena().node(i).parent).collect();
        let dest = dir.path().join("all.jsonl");
        let fork = src
            .fork_to(&dest, FORK_HEADER.as_bytes(), &all, &parents, &[], opts())
            .unwrap();
        check_against_reopen(&fork, &dest);
        let text = std::fs::read_to_string(&dest).unwrap();
        let want: String = std::iter::once(FORK_HEADER.to_string())
            .chain(source_lines().into_iter().map(|l| {
                l.trim_end_matches('\r')
                    .replace(r#""parent_id":"nowhere""#, r#""parent_id":null"#)
            }))
            .map(|l| l + "\n")
            .collect();
        assert_eq!(
            text, want,
            "bytes are copied, the dangling parent made null"
        );

        // A path with a re-parented entry, a dropped label, appended entries.
        let kept = [
            idx(&src, "a"),
            idx(&src, "b"),
            idx(&src, "n1"),
            idx(&src, "c"),
        ];
        let parents = [NONE, idx(&src, "a"), idx(&src, "b"), idx(&src, "n1")];
        let extras = [
            line(
                "label",
                "x1",
                Some("c"),
                "2026-01-03T00:00:00.000Z",
                r#","target_id":"b","label":"mid""#,
            )
            .into_bytes(),
            line(
                "leaf",
                "x2",
                Some("x1"),
                "2026-01-03T00:00:00.000Z",
                r#","target_id":"b""#,
            )
            .into_bytes(),
        ];
        let dest = dir.path().join("path.jsonl");
        let mut fork = src
            .fork_to(
                &dest,
                FORK_HEADER.as_bytes(),
                &kept,
                &parents,
                &extras,
                opts(),
            )
            .unwrap();
        check_against_reopen(&fork, &dest);
        assert_eq!(fork.arena().len(), 6);
        assert_eq!(fork.arena().id(fork.arena().leaf()), "b");
        assert_eq!(fork.arena().name(), Some("demo"));
        // The fork is a writer like any other.
        fork.append(line("custom", "y", Some("b"), "T", r#","custom_type":"k""#).as_bytes())
            .unwrap();
        fork.close().unwrap();
        let again = Store::open(&dest, OpenOptions::default());
        assert_eq!(again.unwrap().arena().len(), 7);
    }

    #[test]
    fn a_source_loaded_from_its_persisted_index_forks_the_same() {
        let dir = tempfile::tempdir().unwrap();
        drop(source(dir.path()));
        let path = dir.path().join("src.jsonl");
        let indexed = OpenOptions {
            readonly: true,
            index_min_bytes: Some(0),
            ..OpenOptions::default()
        };
        drop(Store::open(&path, indexed).unwrap());
        let src = Store::open(&path, indexed).unwrap();
        assert_eq!(src.index_status().as_str(), "loaded");
        let all: Vec<u32> = (0..src.arena().len() as u32).collect();
        let parents: Vec<u32> = all.iter().map(|&i| src.arena().node(i).parent).collect();
        let dest = dir.path().join("all.jsonl");
        let fork = src
            .fork_to(&dest, FORK_HEADER.as_bytes(), &all, &parents, &[], opts())
            .unwrap();
        check_against_reopen(&fork, &dest);
        assert_eq!(fork.arena().stats().usage.total_tokens, 9);
    }

    #[test]
    fn forks_from_memory_and_of_a_writer_with_buffered_lines() {
        let dir = tempfile::tempdir().unwrap();
        let mut mem = Store::memory(HEADER.as_bytes(), Limits::default()).unwrap();
        for l in source_lines().iter().take(3) {
            mem.append(l.as_bytes()).unwrap();
        }
        let dest = dir.path().join("m.jsonl");
        let fork = mem
            .fork_to(
                &dest,
                FORK_HEADER.as_bytes(),
                &[0, 1, 2],
                &[NONE, 0, 1],
                &[],
                opts(),
            )
            .unwrap();
        check_against_reopen(&fork, &dest);

        let path = dir.path().join("w.jsonl");
        let mut w = Store::create(
            &path,
            HEADER.as_bytes(),
            Durability::None,
            Limits::default(),
        )
        .unwrap();
        for l in source_lines().iter().take(3) {
            w.append(l.as_bytes()).unwrap();
        }
        w.flush().unwrap();
        w.append(source_lines()[3].trim_end_matches('\r').as_bytes())
            .unwrap();
        let dest = dir.path().join("w2.jsonl");
        let fork = w
            .fork_to(
                &dest,
                FORK_HEADER.as_bytes(),
                &[0, 1, 2, 3],
                &[NONE, 0, 1, 2],
                &[],
                opts(),
            )
            .unwrap();
        check_against_reopen(&fork, &dest);
    }

    #[test]
    fn refusals_leave_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let src = source(dir.path());
        let listing = || {
            let mut names: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            names.sort();
            names
        };
        let before = listing();
        let dest = dir.path().join("f.jsonl");
        let cases: [(&[u32], &[u32], ErrorCode); 3] = [
            (&[1], &[0], ErrorCode::InvalidArgument), // parent not copied
            (&[0, 0], &[NONE, NONE], ErrorCode::InvalidArgument), // twice
            (&[99], &[NONE], ErrorCode::InvalidArgument), // out of range
        ];
        for (kept, parents, code) in cases {
            let e = src
                .fork_to(&dest, FORK_HEADER.as_bytes(), kept, parents, &[], opts())
                .err()
                .unwrap();
            assert_eq!(e.code, code, "{}", e.message);
            assert_eq!(listing(), before);
        }
        let dup = [line("custom", "a", None, "T", r#","custom_type":"k""#).into_bytes()];
        let e = src
            .fork_to(&dest, FORK_HEADER.as_bytes(), &[0], &[NONE], &dup, opts())
            .err()
            .unwrap();
        assert_eq!(e.code, ErrorCode::InvalidArgument);
        assert_eq!(listing(), before);
        std::fs::write(&dest, "x").unwrap();
        let e = src
            .fork_to(&dest, FORK_HEADER.as_bytes(), &[0], &[NONE], &[], opts())
            .err()
            .unwrap();
        assert_eq!(e.code, ErrorCode::Exists);
    }
}
