//! Noticing that another program moved, removed or replaced a writer's file without
//! looking its path up before every append.
//!
//! Before each write a writer makes sure its file is still the one it opened, at the size
//! it left it (`writer::check_unchanged`). Looking the path up (`statx`) is the costly half
//! of that: 1.5 µs on some machines, more than the write itself. On Linux, for a file on a
//! local file system, a writer instead asks inotify to report when the file is renamed,
//! unlinked or replaced by a rename (`IN_MOVE_SELF`, and `IN_ATTRIB` for the change of its
//! link count, which also reports `chmod` and `touch`), and when a directory on its path is
//! moved or removed. The kernel queues such an event inside the call that made the change,
//! so once the other program's `rename` or `unlink` has returned, our next read of the
//! queue sees it. While no event came, a writer only compares the size of its open file
//! (an `lseek`); after one, the full path check decides, as it does without a watch.
//!
//! One inotify instance serves the whole process (the kernel allows 128 per user by
//! default) behind a mutex: whoever reads it counts every event against the watches it
//! belongs to, so no writer's event is lost to another's read. Once made, the instance stays
//! open for the life of the process, without watches while no writer is open: closing an
//! inotify instance waits for the kernel to retire its watches (a grace period, 10–20 ms
//! here), which made every close of a process's last writer that much slower. A forked
//! child never reads its parent's instance (that would take the parent's events): it
//! makes its own.
//!
//! Not seen by a watch, and so allowed: the file reached through a symlinked directory
//! (such a writer keeps the path check), or a file system other programs change from
//! another machine (network file systems get no watch either).

#[cfg(all(target_os = "linux", not(feature = "portable")))]
use std::path::Path;

/// Where a watch can tell: the file's size when no event came, or nothing (the path
/// check decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Quiet {
    /// No event since the last passing path check: the size alone decides.
    Yes,
    /// Events came (their count so far, for [`ChangeWatch::cover`]), or the queue could
    /// not be read: the path check decides.
    No(Option<u64>),
}

#[cfg(all(target_os = "linux", not(feature = "portable")))]
pub(super) use linux::ChangeWatch;

#[cfg(not(all(target_os = "linux", not(feature = "portable"))))]
pub(super) use portable::ChangeWatch;

/// True for the local file systems whose changes inotify reports, whoever makes them.
#[cfg(all(target_os = "linux", not(feature = "portable")))]
pub(super) fn local_fs(path: &Path) -> bool {
    crate::engine::sys::inotify::local_fs(path)
}

#[cfg(all(
    test,
    feature = "test-hooks",
    not(all(target_os = "linux", not(feature = "portable")))
))]
pub(super) fn local_fs(_path: &std::path::Path) -> bool {
    false
}

#[cfg(not(all(target_os = "linux", not(feature = "portable"))))]
mod portable {
    use super::Quiet;
    use std::path::Path;

    /// No watches outside Linux: every append looks the path up.
    pub(crate) struct ChangeWatch(());

    impl ChangeWatch {
        pub(crate) fn new(_path: &Path, _dev_ino: (u64, u64)) -> Option<ChangeWatch> {
            None
        }
        pub(crate) fn quiet(&self) -> Quiet {
            Quiet::No(None)
        }
        pub(crate) fn cover(&self, _events: u64) {}
    }
}

#[cfg(all(target_os = "linux", not(feature = "portable")))]
mod linux {
    use std::collections::HashMap;
    use std::path::Path;
    use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, MutexGuard};

    use super::Quiet;
    use crate::engine::sys::current_pid;
    use crate::engine::sys::inotify::{self, DIR_EVENTS, FILE_EVENTS};

    /// The process's inotify instance and, per watch descriptor, the event counters of the
    /// writers using it (a directory is watched once for all the files below it).
    struct Instance {
        fd: i32,
        users: HashMap<i32, Vec<Arc<AtomicU64>>>,
    }

    /// One process's instance (None until its first writer), behind its lock.
    struct Slot {
        pid: u32,
        /// The instance's descriptor (-1 while there is none), readable without the lock:
        /// a forked child closes its copy without taking a lock that a thread of its
        /// parent may have held at the fork.
        fd: AtomicI32,
        instance: Mutex<Option<Instance>>,
    }

    /// The slot of the process that made it. A forked child makes its own: the copy it
    /// inherits may be locked by a parent's thread that does not exist in the child, and
    /// its instance is the parent's. That copy is left as it is (a few bytes).
    static SLOT: AtomicPtr<Slot> = AtomicPtr::new(std::ptr::null_mut());

    fn slot() -> &'static Slot {
        let pid = current_pid();
        loop {
            let current = SLOT.load(Ordering::Acquire);
            // SAFETY: a published slot is never freed (see SLOT).
            if let Some(s) = unsafe { current.as_ref() } {
                if s.pid == pid {
                    return s;
                }
            }
            let fresh = Box::into_raw(Box::new(Slot {
                pid,
                fd: AtomicI32::new(-1),
                instance: Mutex::new(None),
            }));
            match SLOT.compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    // SAFETY: `current`, if any, is the inherited slot; its descriptor is
                    // this process's copy, closed once (swapped out first).
                    if let Some(old) = unsafe { current.as_ref() } {
                        let fd = old.fd.swap(-1, Ordering::AcqRel);
                        if fd >= 0 {
                            inotify::close(fd);
                        }
                    }
                    // SAFETY: just published, never freed.
                    return unsafe { &*fresh };
                }
                // Another thread published first: drop ours and use theirs.
                // SAFETY: `fresh` was never published.
                Err(_) => drop(unsafe { Box::from_raw(fresh) }),
            }
        }
    }

    /// This process's instance, locked.
    fn instance() -> MutexGuard<'static, Option<Instance>> {
        // The state stays consistent across a panic (counters only grow).
        slot().instance.lock().unwrap_or_else(|e| e.into_inner())
    }

    impl Instance {
        /// Counts every queued event against its watch's users; false when the queue
        /// could not be read.
        fn drain(&mut self) -> bool {
            let users = &self.users;
            inotify::drain(self.fd, |wd, overflow| {
                if overflow {
                    // Events were dropped: every writer looks at its path.
                    for c in users.values().flatten() {
                        c.fetch_add(1, Ordering::Relaxed);
                    }
                } else if let Some(counters) = users.get(&wd) {
                    for c in counters {
                        c.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        }

        fn add(&mut self, path: &Path, mask: u32, counter: &Arc<AtomicU64>) -> Option<i32> {
            let wd = inotify::add_watch(self.fd, path, mask)?;
            self.users.entry(wd).or_default().push(Arc::clone(counter));
            Some(wd)
        }

        fn remove(&mut self, wd: i32, counter: &Arc<AtomicU64>) {
            let Some(counters) = self.users.get_mut(&wd) else {
                return;
            };
            counters.retain(|c| !Arc::ptr_eq(c, counter));
            if counters.is_empty() {
                self.users.remove(&wd);
                inotify::rm_watch(self.fd, wd);
            }
        }
    }

    /// A writer's watches on its file and on every directory above it.
    pub(crate) struct ChangeWatch {
        events: Arc<AtomicU64>,
        /// The events a passing path check has accounted for.
        covered: AtomicU64,
        wds: Vec<i32>,
        pid: u32,
    }

    impl ChangeWatch {
        /// Watches the file at `path` (open by the caller, with `dev_ino`) and the
        /// directories above it; None where a watch could miss a change (another file
        /// system kind, a symlinked directory) or cannot be had (the limits on watches).
        pub(crate) fn new(path: &Path, dev_ino: (u64, u64)) -> Option<ChangeWatch> {
            let path = std::path::absolute(path).ok()?;
            if !super::local_fs(&path) {
                return None;
            }
            let pid = current_pid();
            let mut guard = instance();
            if guard.is_none() {
                let fd = inotify::init()?;
                slot().fd.store(fd, Ordering::Release);
                *guard = Some(Instance {
                    fd,
                    users: HashMap::new(),
                });
            }
            let inst = guard.as_mut()?;
            let mut watch = ChangeWatch {
                events: Arc::new(AtomicU64::new(0)),
                covered: AtomicU64::new(0),
                wds: Vec::new(),
                pid,
            };
            let mut ok = inst
                .add(&path, FILE_EVENTS, &watch.events)
                .map(|wd| watch.wds.push(wd))
                .is_some();
            for dir in path.ancestors().skip(1) {
                if !ok {
                    break;
                }
                // A symlinked directory could be swapped without an event on what we watch.
                ok = dir.symlink_metadata().is_ok_and(|m| m.is_dir())
                    && inst
                        .add(dir, DIR_EVENTS, &watch.events)
                        .map(|wd| watch.wds.push(wd))
                        .is_some();
            }
            drop(guard);
            // The path may have changed before the watch was in place: it must still
            // name the caller's file now, or there is no watch.
            let same =
                crate::engine::sys::path_identity(&path).is_some_and(|(now, _)| now == dev_ino);
            (ok && same).then_some(watch)
        }

        /// Whether any change was reported since the last passing path check.
        pub(crate) fn quiet(&self) -> Quiet {
            if self.pid != current_pid() {
                return Quiet::No(None); // the parent's watch, in a forked child
            }
            let mut guard = instance();
            let Some(inst) = guard.as_mut() else {
                return Quiet::No(None);
            };
            if !inst.drain() {
                return Quiet::No(None);
            }
            let events = self.events.load(Ordering::Relaxed);
            if events == self.covered.load(Ordering::Relaxed) {
                Quiet::Yes
            } else {
                Quiet::No(Some(events))
            }
        }

        /// A path check that ran after `events` were counted passed: they are accounted for.
        pub(crate) fn cover(&self, events: u64) {
            self.covered.fetch_max(events, Ordering::Relaxed);
        }
    }

    impl Drop for ChangeWatch {
        fn drop(&mut self) {
            if self.pid != current_pid() {
                return; // the parent's watch, in a forked child: not ours to change
            }
            let mut guard = instance();
            let Some(inst) = guard.as_mut() else {
                return;
            };
            // Removing a watch is quick; the instance is kept (see the module's notes).
            for &wd in &self.wds {
                inst.remove(wd, &self.events);
            }
        }
    }
}
