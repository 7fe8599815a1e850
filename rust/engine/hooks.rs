//! Fault injection for tests of the failure paths, compiled in only with the `test-hooks`
//! cargo feature: the dev build and `cargo test --features test-hooks` turn it on, a wheel
//! built by plain `maturin build` has none of it.
//!
//! The engine asks these probes before a write or a sync (`Store::inject_fault` and the
//! backing's `take_*_fault` set and read a store's own). Without the feature each probe
//! is a constant `None`: no fault state, no injection API and no environment lookup exist,
//! and the branch a probe guards is dead code the compiler drops.

/// A simulated OS failure for testing what a failed write or sync leaves behind.
#[cfg(feature = "test-hooks")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The next write stores half its bytes, then fails with this errno.
    Write(i32),
    /// The next sync fails with this errno.
    Sync(i32),
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
