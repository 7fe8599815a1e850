//! The background syncer of `group` durability: appends mark the file dirty, one thread
//! syncs it within a second, and a failed sync poisons every later append.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::engine::error::{EngineError, Result};

/// The background syncer of `group` durability.
pub(super) struct GroupSync {
    pub(super) shared: Arc<(Mutex<SyncState>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
pub(super) struct SyncState {
    dirty: bool,
    stop: bool,
    failure: Option<EngineError>,
    /// An injected failure for the next background sync (tests).
    #[cfg(feature = "test-hooks")]
    pub(super) fault: Option<i32>,
}

impl GroupSync {
    pub(super) fn start(file: File, path: PathBuf) -> GroupSync {
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
                        let fault = state.take_fault();
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

    pub(super) fn mark_dirty(&self) -> Result<()> {
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

    pub(super) fn stop(&mut self) -> Result<()> {
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

impl GroupSync {
    /// Fails with the syncer's error if a background sync has failed.
    pub(super) fn mark_dirty_check(&self) -> Result<()> {
        let (lock, _) = &*self.shared;
        let state = lock.lock().unwrap_or_else(|p| p.into_inner());
        match &state.failure {
            Some(f) => Err(f.clone()),
            None => Ok(()),
        }
    }
}
