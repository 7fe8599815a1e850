//! Fresh copies of JSON-shaped values for the adapters: every `dict` and `list` (exactly
//! those types) is new, every other object (strings, numbers, `None`, anything else) is
//! shared, as it is immutable or not the copier's to copy. What an adapter hands out of the
//! items it keeps, so the caller owns dicts and lists no later call returns again.

use pyo3::exceptions::PyRecursionError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// Deeper than any line the engine reads or writes (its `max_depth` is at most this).
const MOST_DEPTH: usize = 10_000;

fn copy_value<'py>(value: &Bound<'py, PyAny>, depth: usize) -> PyResult<Bound<'py, PyAny>> {
    if let Ok(dict) = value.cast_exact::<PyDict>() {
        return Ok(copy_dict(dict, depth)?.into_any());
    }
    if let Ok(list) = value.cast_exact::<PyList>() {
        return Ok(copy_list(list, depth)?.into_any());
    }
    Ok(value.clone())
}

fn is_container(value: &Bound<'_, PyAny>) -> bool {
    value.is_exact_instance_of::<PyDict>() || value.is_exact_instance_of::<PyList>()
}

fn copy_dict<'py>(dict: &Bound<'py, PyDict>, depth: usize) -> PyResult<Bound<'py, PyDict>> {
    if depth > MOST_DEPTH {
        return Err(PyRecursionError::new_err("a value nested too deep to copy"));
    }
    // `dict.copy()` (one block copy for a plain dict), then its containers replaced by
    // copies: the keys stay where they are, so the copy keeps the order.
    let out = dict.copy()?;
    for (key, inner) in dict.iter() {
        if is_container(&inner) {
            out.set_item(key, copy_value(&inner, depth + 1)?)?;
        }
    }
    Ok(out)
}

fn copy_list<'py>(list: &Bound<'py, PyList>, depth: usize) -> PyResult<Bound<'py, PyList>> {
    if depth > MOST_DEPTH {
        return Err(PyRecursionError::new_err("a value nested too deep to copy"));
    }
    let mut out = Vec::with_capacity(list.len());
    for inner in list.iter() {
        out.push(copy_value(&inner, depth + 1)?);
    }
    PyList::new(list.py(), out)
}

/// Turns the cyclic garbage collector off while alive and back on (if it was on) when
/// dropped: a copy makes only acyclic objects, and the collector's passes over the
/// hundreds of thousands it makes (each pass walking every older object too) would cost
/// several times the copy.
struct GcPaused(bool);

impl GcPaused {
    fn new() -> Self {
        // SAFETY: called with the GIL held (a `Python` token is alive in the callers).
        Self(unsafe { pyo3::ffi::PyGC_Disable() } != 0)
    }
}

impl Drop for GcPaused {
    fn drop(&mut self) {
        if self.0 {
            // SAFETY: the GIL is still held: the guard never leaves the call that made it.
            unsafe { pyo3::ffi::PyGC_Enable() };
        }
    }
}

/// A new list of fresh copies of `items` (see the module's doc): each `dict` and `list` in
/// them copied, all else shared. The collector is paused during the copy.
#[pyfunction]
pub fn copy_json_items<'py>(items: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyList>> {
    let _paused = GcPaused::new();
    copy_list(items, 0)
}

/// A fresh copy of one JSON-shaped value (see the module's doc).
#[pyfunction]
pub fn copy_json<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let _paused = GcPaused::new();
    copy_value(value, 0)
}
