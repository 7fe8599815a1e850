//! A value shared by Python threads: one call at a time, and a thread that finds it busy
//! waits with the GIL released (never "Already mutably borrowed").
//!
//! Waiting without the GIL is what makes this deadlock-free: the holder may need the GIL
//! to finish (it builds Python objects, or re-acquires the GIL after a `detach`), and a
//! waiter that kept it would never let it. A thread that finds the value held by itself
//! (a callback re-entering the same engine) gets an error instead of waiting forever.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// `T` behind a mutex that Python threads wait for with the GIL released.
pub struct Shared<T> {
    inner: Mutex<T>,
    /// The holding thread's token while held, else 0.
    owner: AtomicUsize,
}

/// A token unique to each live thread: the address of a thread-local.
fn thread_token() -> usize {
    thread_local! {
        static TOKEN: u8 = const { 0 };
    }
    TOKEN.with(|t| std::ptr::from_ref(t) as usize)
}

impl<T: Send> Shared<T> {
    /// Wraps `value`.
    pub fn new(value: T) -> Self {
        Shared {
            inner: Mutex::new(value),
            owner: AtomicUsize::new(0),
        }
    }

    /// The value, for one call: waits (GIL released) while another thread holds it.
    pub fn lock(&self, py: Python<'_>) -> PyResult<Guard<'_, T>> {
        let me = thread_token();
        loop {
            match self.inner.try_lock() {
                Ok(guard) => return Ok(self.held(guard, me)),
                // A panic in an earlier call (reported to its caller) left the value as it
                // was then; the engine's own state checks (closed, poisoned) still hold.
                Err(TryLockError::Poisoned(p)) => return Ok(self.held(p.into_inner(), me)),
                Err(TryLockError::WouldBlock) => {
                    if self.owner.load(Ordering::Acquire) == me {
                        return Err(PyRuntimeError::new_err(
                            "this session storage is already in use by this thread (a \
                             callback re-entered it)",
                        ));
                    }
                    // Wait for the holder without the GIL, then race for it again with it.
                    py.detach(|| drop(self.inner.lock()));
                }
            }
        }
    }

    fn held<'a>(&'a self, guard: MutexGuard<'a, T>, me: usize) -> Guard<'a, T> {
        self.owner.store(me, Ordering::Release);
        Guard {
            guard,
            owner: &self.owner,
        }
    }
}

/// The held value; lets go of it when dropped.
pub struct Guard<'a, T> {
    guard: MutexGuard<'a, T>,
    owner: &'a AtomicUsize,
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        // Runs before `guard` is dropped (fields drop after `drop`), so no other thread
        // can hold the value while the token still names this one.
        self.owner.store(0, Ordering::Release);
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}
