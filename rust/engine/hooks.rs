//! Fault injection for tests of the failure paths, compiled in only with the `test-hooks`
//! cargo feature: the dev build and `cargo test --features test-hooks` turn it on, a wheel
//! built by plain `maturin build` has none of it.
//!
//! The engine asks these probes before a write or a sync. Without the feature each probe
//! is a constant `None`: no fault state, no injection API and no environment lookup exist,
//! and the branch a probe guards is dead code the compiler drops.

#[cfg(feature = "test-hooks")]
use crate::engine::open::Backing;
use crate::engine::open::FileBacking;
#[cfg(feature = "test-hooks")]
use crate::engine::store::Store;
use crate::engine::syncer::SyncState;

/// A simulated OS failure for testing what a failed write or sync leaves behind.
#[cfg(feature = "test-hooks")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The next write stores half its bytes, then fails with this errno.
    Write(i32),
    /// The next sync fails with this errno.
    Sync(i32),
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

/// Tests set `SESSIONTREE_TEST_FAIL_CREATE=<errno>` to make header writes fail.
#[cfg(feature = "test-hooks")]
pub(super) fn create_fault() -> Option<i32> {
    std::env::var("SESSIONTREE_TEST_FAIL_CREATE")
        .ok()?
        .parse()
        .ok()
}

/// Never a fault without the `test-hooks` feature.
#[cfg(not(feature = "test-hooks"))]
#[inline]
pub(super) fn create_fault() -> Option<i32> {
    None
}

/// Tests set `SESSIONTREE_TEST_FAIL_SPAWN=<errno>` to make starting the `group` syncer's
/// thread fail (as it does when the process is out of threads or memory).
#[cfg(feature = "test-hooks")]
pub(super) fn spawn_fault() -> Option<i32> {
    std::env::var("SESSIONTREE_TEST_FAIL_SPAWN")
        .ok()?
        .parse()
        .ok()
}

/// Tests set `SESSIONTREE_TEST_FORK_FAULT` to `<errno>` to make a fork fail with that error
/// just before its file is linked into place, or to `exit` to end the process there (a
/// crash between writing and publishing).
#[cfg(feature = "test-hooks")]
pub(super) fn publish_fault() -> Option<i32> {
    let value = std::env::var("SESSIONTREE_TEST_FORK_FAULT").ok()?;
    if value == "exit" {
        crate::engine::sys::exit_now(3)
    }
    value.parse().ok()
}

/// Never a fault without the `test-hooks` feature.
#[cfg(not(feature = "test-hooks"))]
#[inline]
pub(super) fn spawn_fault() -> Option<i32> {
    None
}

/// Never a fault without the `test-hooks` feature.
#[cfg(not(feature = "test-hooks"))]
#[inline]
pub(super) fn publish_fault() -> Option<i32> {
    None
}
