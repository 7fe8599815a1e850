//! Lines read on demand: an entry object handed out before its line is read.
//!
//! A file store can hand out an entry as a [`LazyLine`] — where its line lives — instead of
//! the line's bytes, so building the context of a large session reads no message text
//! until the caller looks at it. The session file is append-only: the bytes of a line the
//! store has scanned never change, so reading them later gives what reading them now would.
//!
//! Lines are read through the store's [`LineSource`], which holds a duplicate of the
//! store's descriptor. When the store closes, the source reads every line still handed out
//! and alive into memory and then drops its descriptor, so `close()` releases every OS
//! resource at once and a line handed out earlier can always be read.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use crate::engine::error::{EngineError, ErrorCode, Result};
use crate::engine::sys::FileAt;

/// The least number of handed-out lines kept before dead ones are dropped from the list.
const PRUNE_MIN: usize = 4096;

/// Where the lines of one store are read from, shared by the store and its lines.
pub struct LineSource {
    state: Mutex<SourceState>,
}

struct SourceState {
    /// The duplicated descriptor; None once the store closed.
    file: Option<Arc<File>>,
    path: PathBuf,
    /// Every line handed out (dead ones are pruned now and then).
    issued: Vec<Weak<LazyLine>>,
    prune_at: usize,
}

/// One line handed out before its bytes were read.
pub struct LazyLine {
    src: Arc<LineSource>,
    offset: u64,
    len: u32,
    /// The bytes, once read at close (or by [`LazyLine::keep`]).
    bytes: OnceLock<Box<[u8]>>,
}

impl LineSource {
    /// A source reading `file` (a duplicate of the store's descriptor) at `path`.
    pub fn new(file: File, path: PathBuf) -> Arc<LineSource> {
        Arc::new(LineSource {
            state: Mutex::new(SourceState {
                file: Some(Arc::new(file)),
                path,
                issued: Vec::new(),
                prune_at: PRUNE_MIN,
            }),
        })
    }

    fn state(&self) -> MutexGuard<'_, SourceState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands out the line at `offset` of `len` bytes (without its newline).
    pub fn issue(self: &Arc<Self>, offset: u64, len: u32) -> Arc<LazyLine> {
        let line = Arc::new(LazyLine {
            src: Arc::clone(self),
            offset,
            len,
            bytes: OnceLock::new(),
        });
        let mut st = self.state();
        if st.issued.len() >= st.prune_at {
            st.issued.retain(|w| w.strong_count() > 0);
            st.prune_at = (st.issued.len() * 2).max(PRUNE_MIN);
        }
        st.issued.push(Arc::downgrade(&line));
        line
    }

    /// True while the source still reads from its descriptor (the store is open).
    pub fn is_attached(&self) -> bool {
        self.state().file.is_some()
    }

    /// Reads every live line into memory, then drops the descriptor. Idempotent; a read
    /// that fails leaves that line unreadable (its reader gets the error).
    pub fn detach(&self) {
        let (file, issued) = {
            let mut st = self.state();
            (st.file.take(), std::mem::take(&mut st.issued))
        };
        let Some(file) = file else { return };
        for line in issued.iter().filter_map(Weak::upgrade) {
            if line.bytes.get().is_none() {
                if let Ok(bytes) = line.read_from(&file) {
                    let _ = line.bytes.set(bytes);
                }
            }
        }
    }
}

impl LazyLine {
    /// The line's bytes (no newline): from memory once the store closed, else read now.
    pub fn bytes(&self) -> Result<LineBytes<'_>> {
        if let Some(b) = self.bytes.get() {
            return Ok(LineBytes::Kept(b));
        }
        let (file, path) = {
            let st = self.src.state();
            (st.file.clone(), st.path.clone())
        };
        match file {
            Some(file) => Ok(LineBytes::Read(self.read_from(&file).map_err(|e| {
                match e {
                    ReadError::Short => EngineError::new(
                        ErrorCode::ModifiedExternally,
                        format!(
                            "{} is shorter than when it was read: it was changed by another program",
                            path.display()
                        ),
                    ),
                    ReadError::Os(e) => EngineError::io(format!("reading {}", path.display()), &e),
                }
            })?)),
            // Closed, and the line could not be read when it closed.
            None => match self.bytes.get() {
                Some(b) => Ok(LineBytes::Kept(b)),
                None => Err(EngineError::new(
                    ErrorCode::Io,
                    format!(
                        "the line at byte {} of {} could not be read when its storage closed",
                        self.offset,
                        path.display()
                    ),
                )),
            },
        }
    }

    /// Where the line starts in the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn read_from(&self, file: &File) -> std::result::Result<Box<[u8]>, ReadError> {
        let mut buf = vec![0u8; self.len as usize].into_boxed_slice();
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], self.offset + done as u64) {
                Ok(0) => return Err(ReadError::Short),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Os(e)),
            }
        }
        Ok(buf)
    }
}

enum ReadError {
    Short,
    Os(std::io::Error),
}

/// A line's bytes: kept in memory, or just read.
pub enum LineBytes<'a> {
    /// Read at close and kept.
    Kept(&'a [u8]),
    /// Read now.
    Read(Box<[u8]>),
}

impl std::ops::Deref for LineBytes<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            LineBytes::Kept(b) => b,
            LineBytes::Read(b) => b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(text: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.jsonl");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(text)
            .unwrap();
        (dir, path)
    }

    #[test]
    fn lines_read_now_and_after_detach() {
        let (_dir, path) = file_with(b"aaa\nbbbb\n");
        let src = LineSource::new(File::open(&path).unwrap(), path.clone());
        let a = src.issue(0, 3);
        let b = src.issue(4, 4);
        assert_eq!(&*a.bytes().unwrap(), b"aaa");
        drop(a);
        src.detach();
        assert!(!src.is_attached());
        // The file changes afterwards: the kept bytes are what was there.
        std::fs::write(&path, b"xxxxxxxxx\n").unwrap();
        assert_eq!(&*b.bytes().unwrap(), b"bbbb");
    }

    #[test]
    fn a_truncated_file_is_modified_externally() {
        let (_dir, path) = file_with(b"aaa\nbbbb\n");
        let src = LineSource::new(File::open(&path).unwrap(), path.clone());
        let b = src.issue(4, 4);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(5)
            .unwrap();
        let err = b.bytes().err().unwrap();
        assert_eq!(err.code, ErrorCode::ModifiedExternally);
    }

    #[test]
    fn dead_lines_are_pruned() {
        let (_dir, path) = file_with(b"a\n");
        let src = LineSource::new(File::open(&path).unwrap(), path);
        for _ in 0..3 * PRUNE_MIN {
            drop(src.issue(0, 1));
        }
        assert!(src.state().issued.len() <= PRUNE_MIN + 1);
    }
}
