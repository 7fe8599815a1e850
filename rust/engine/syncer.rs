//! The background syncer of `group` durability: one thread per process serves every
//! `group` writer. An append marks its file dirty and queues it; the thread syncs each
//! queued file within about a second, and a failed sync poisons that writer's later
//! appends.
//!
//! One thread, not one per writer: 2,000 open writers cost one thread, and a thread that
//! cannot be started is an error at open (never a writer that silently stops syncing).
//! The thread holds no descriptor of its own: each writer lends it the raw fd of its file
//! under a mutex that `stop` takes before the file is closed, so a close releases the
//! descriptor at once and the syncer can never sync a number the process reused.
//!
//! After `fork()` the child has no syncer thread (threads do not survive a fork). A
//! writer inherited by a child never touches its syncer (`Store` checks its owner pid
//! first); a writer the child opens itself starts the child's own syncer.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::engine::error::{EngineError, Result};
use crate::engine::hooks;
use crate::engine::sys::{self, RawFile, NO_FILE};

/// Appends within this long of each other share one sync.
const BATCH_DELAY: Duration = Duration::from_millis(20);

/// Locks `m`, going on after a panic elsewhere (the state stays meaningful: flags only).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The process's syncer: a queue of dirty writers and the thread that drains it.
struct Syncer {
    /// The process that started the thread (a forked child needs its own).
    pid: u32,
    queue: Mutex<Vec<Arc<Member>>>,
    wake: Condvar,
}

/// The syncer of this process, started on first use.
static CURRENT: Mutex<Option<Arc<Syncer>>> = Mutex::new(None);

impl Syncer {
    /// This process's syncer; starts its thread if there is none yet (or none in this
    /// process, after a fork). Fails when the thread cannot be started.
    fn get() -> Result<Arc<Syncer>> {
        let pid = crate::engine::sys::current_pid();
        let mut current = lock(&CURRENT);
        if let Some(s) = current.as_ref().filter(|s| s.pid == pid) {
            return Ok(Arc::clone(s));
        }
        let syncer = Arc::new(Syncer {
            pid,
            queue: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        });
        let worker = Arc::clone(&syncer);
        let spawned = match hooks::spawn_fault() {
            Some(errno) => Err(std::io::Error::from_raw_os_error(errno)),
            None => std::thread::Builder::new()
                .name("st-group-sync".into())
                // The loop needs little stack; keep the thread's reservation small.
                .stack_size(256 << 10)
                .spawn(move || worker.run())
                .map(drop),
        };
        spawned.map_err(|e| {
            EngineError::io(
                "starting the background syncer of `group` durability (use `flush` or \
                 `fsync` durability, or free threads)",
                &e,
            )
        })?;
        *current = Some(Arc::clone(&syncer));
        Ok(syncer)
    }

    fn run(&self) {
        loop {
            {
                let mut queue = lock(&self.queue);
                while queue.is_empty() {
                    queue = self.wake.wait(queue).unwrap_or_else(|p| p.into_inner());
                }
            }
            // Let a burst of appends (from one writer or many) share one sync each.
            std::thread::sleep(BATCH_DELAY);
            let batch = std::mem::take(&mut *lock(&self.queue));
            for member in batch {
                member.sync_now();
            }
        }
    }

    fn enqueue(&self, member: &Arc<Member>) {
        lock(&self.queue).push(Arc::clone(member));
        self.wake.notify_one();
    }
}

/// One writer's part in the syncer.
struct Member {
    path: PathBuf,
    /// The writer's file descriptor, or `NO_FILE` once it stopped. Held while syncing, so a
    /// writer's `stop` waits for a sync in flight before its file is closed.
    fd: Mutex<RawFile>,
    state: Mutex<SyncState>,
}

#[derive(Default)]
pub(super) struct SyncState {
    /// Written since the last sync started (and queued).
    dirty: bool,
    failure: Option<EngineError>,
    /// An injected failure for the next background sync (tests).
    #[cfg(feature = "test-hooks")]
    pub(super) fault: Option<i32>,
}

impl Member {
    fn sync_now(&self) {
        let fault = {
            let mut state = lock(&self.state);
            if !state.dirty || state.failure.is_some() {
                // A failed handle never syncs again.
                state.dirty = false;
                return;
            }
            state.dirty = false;
            state.take_fault()
        };
        let res = {
            let fd = lock(&self.fd);
            if *fd == NO_FILE {
                return; // stopped: its close synced it
            }
            match fault {
                Some(errno) => Err(std::io::Error::from_raw_os_error(errno)),
                // SAFETY: `fd` is the writer's open descriptor: `stop` sets it to `NO_FILE`
                // under this lock before the writer closes its file.
                None => unsafe { sys::sync_data_raw(*fd) },
            }
        };
        if let Err(e) = res {
            lock(&self.state).failure = Some(EngineError::io(
                format!(
                    "syncing {} (the storage is now unusable)",
                    self.path.display()
                ),
                &e,
            ));
        }
    }
}

/// Starts this process's syncer if it is not running yet; fails when it cannot be started.
pub(super) fn ready() -> Result<()> {
    Syncer::get().map(drop)
}

/// A `group` writer's handle on the process's syncer.
pub(super) struct GroupSync {
    syncer: Arc<Syncer>,
    member: Arc<Member>,
}

impl GroupSync {
    /// Registers the writer whose file is `fd` (which must stay open until [`stop`]).
    ///
    /// [`stop`]: GroupSync::stop
    pub(super) fn start(fd: RawFile, path: PathBuf) -> Result<GroupSync> {
        Ok(GroupSync {
            syncer: Syncer::get()?,
            member: Arc::new(Member {
                path,
                fd: Mutex::new(fd),
                state: Mutex::new(SyncState::default()),
            }),
        })
    }

    /// Notes an append: the file is synced within about a second.
    pub(super) fn mark_dirty(&self) -> Result<()> {
        let mut state = lock(&self.member.state);
        if let Some(f) = &state.failure {
            return Err(f.clone());
        }
        if !state.dirty {
            state.dirty = true;
            drop(state);
            self.syncer.enqueue(&self.member);
        }
        Ok(())
    }

    /// Fails with the syncer's error if a background sync of this file has failed.
    pub(super) fn check(&self) -> Result<()> {
        match &lock(&self.member.state).failure {
            Some(f) => Err(f.clone()),
            None => Ok(()),
        }
    }

    /// Leaves the syncer (waiting for a sync of this file in flight); the file may be
    /// closed afterwards. Returns a background sync's failure, if one happened.
    pub(super) fn stop(&mut self) -> Result<()> {
        *lock(&self.member.fd) = NO_FILE;
        self.check()
    }

    /// Makes the next background sync of this file fail with `errno` (tests).
    #[cfg(feature = "test-hooks")]
    pub(super) fn inject_fault(&self, errno: i32) {
        lock(&self.member.state).fault = Some(errno);
    }
}

impl SyncState {
    /// The errno of an injected failure for the next background sync, which it clears.
    #[cfg(feature = "test-hooks")]
    pub(super) fn take_fault(&mut self) -> Option<i32> {
        self.fault.take()
    }

    /// Never a fault without the `test-hooks` feature.
    #[cfg(not(feature = "test-hooks"))]
    #[inline]
    pub(super) fn take_fault(&mut self) -> Option<i32> {
        None
    }
}
