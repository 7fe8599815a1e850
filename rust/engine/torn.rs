//! Torn tails: a last line without its newline (a crash mid-write) is reported, and a writer
//! open cuts it into a `<file>.torn-<UTC stamp>` side file before appending.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use crate::engine::backing::Backing;
use crate::engine::error::{EngineError, Result};
use crate::engine::jsonl::{self, IssueKind};
use crate::engine::store::Store;
use crate::engine::sys::{create_private, FileAt};

impl Store {
    pub(super) fn note_torn_tail(&mut self, torn: u64, at: u64) -> Result<()> {
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
    pub(super) fn cut_torn_tail(&mut self, torn: u64) -> Result<()> {
        let Backing::File(b) = &mut self.backing else {
            return Ok(());
        };
        // Owned, so the closure does not hold `b` borrowed across the fault probe below.
        let path = b.path.clone();
        let ctx = |what: &str| format!("{what} {}", path.display());
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
        let saved = match b.take_write_fault() {
            Some(errno) => Err(std::io::Error::from_raw_os_error(errno)),
            None => copy_range(&b.file, b.written_len, torn, &mut f).and_then(|()| f.sync_all()),
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
}

/// Copies `len` bytes of `from` at `offset` to `to` through a small buffer: a torn tail
/// can be gigabytes (a line that never ended), and is never held in memory whole.
fn copy_range(from: &File, offset: u64, len: u64, to: &mut File) -> std::io::Result<()> {
    let mut buf = vec![0u8; COPY_CHUNK.min(len as usize)];
    let mut done = 0u64;
    while done < len {
        let want = buf.len().min((len - done) as usize);
        let n = from.read_at(&mut buf[..want], offset + done)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the file shrank while its torn tail was being saved",
            ));
        }
        to.write_all(&buf[..n])?;
        done += n as u64;
    }
    Ok(())
}

/// The buffer of [`copy_range`].
const COPY_CHUNK: usize = 1 << 20;
