//! Fresh copies of JSON-shaped values for the adapters: every `dict` and `list` (exactly
//! those types) is new, every other object (strings, numbers, `None`, anything else) is
//! shared, as it is immutable or not the copier's to copy. What an adapter hands out of the
//! items it keeps, so the caller owns dicts and lists no later call returns again.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// Deeper than any line the engine reads or writes (its `max_depth` is at most this).
const MOST_DEPTH: usize = 10_000;

fn copy_value<'py>(value: &Bound<'py, PyAny>, depth: usize) -> PyResult<Bound<'py, PyAny>> {
    let py = value.py();
    // SAFETY: the GIL is held (`py`); `copy_obj` returns a new reference or NULL with an
    // exception set, which `from_owned_ptr_or_err` takes over.
    unsafe { Bound::from_owned_ptr_or_err(py, copy_obj(value.as_ptr(), depth)) }
}

/// `obj` copied (a new reference), or NULL with the exception set. Lists and dicts of
/// exactly those types are new; anything else is the object itself, with a new reference.
///
/// Raw C API calls, with borrowed references while walking: a copy runs no Python code
/// (exact `dict` and `list` only; the keys' hashes are the dict's own, and the collector,
/// whose callbacks could run code, is paused by the callers), so nothing it walks can
/// change or go away under it.
///
/// # Safety
/// The GIL must be held and `obj` a valid object.
unsafe fn copy_obj(obj: *mut ffi::PyObject, depth: usize) -> *mut ffi::PyObject {
    let kind = ffi::Py_TYPE(obj);
    if kind == std::ptr::addr_of_mut!(ffi::PyDict_Type) {
        copy_dict(obj, depth)
    } else if kind == std::ptr::addr_of_mut!(ffi::PyList_Type) {
        copy_list(obj, depth)
    } else {
        ffi::Py_INCREF(obj);
        obj
    }
}

/// # Safety
/// As [`copy_obj`]'s.
unsafe fn is_container(obj: *mut ffi::PyObject) -> bool {
    let kind = ffi::Py_TYPE(obj);
    kind == std::ptr::addr_of_mut!(ffi::PyDict_Type)
        || kind == std::ptr::addr_of_mut!(ffi::PyList_Type)
}

/// # Safety
/// As [`copy_obj`]'s, `obj` an exact dict.
unsafe fn copy_dict(obj: *mut ffi::PyObject, depth: usize) -> *mut ffi::PyObject {
    if depth > MOST_DEPTH {
        return too_deep();
    }
    // `dict.copy()` (one block copy for a plain dict), then its containers replaced by
    // copies: the keys stay where they are, so the copy keeps the order.
    let out = ffi::PyDict_Copy(obj);
    if out.is_null() {
        return out;
    }
    let mut pos: ffi::Py_ssize_t = 0;
    let mut key: *mut ffi::PyObject = std::ptr::null_mut();
    let mut value: *mut ffi::PyObject = std::ptr::null_mut();
    while ffi::PyDict_Next(obj, &mut pos, &mut key, &mut value) != 0 {
        if !is_container(value) {
            continue;
        }
        let copy = copy_obj(value, depth + 1);
        if copy.is_null() {
            ffi::Py_DECREF(out);
            return copy;
        }
        let failed = ffi::PyDict_SetItem(out, key, copy) < 0;
        ffi::Py_DECREF(copy);
        if failed {
            ffi::Py_DECREF(out);
            return std::ptr::null_mut();
        }
    }
    out
}

/// # Safety
/// As [`copy_obj`]'s, `obj` an exact list.
unsafe fn copy_list(obj: *mut ffi::PyObject, depth: usize) -> *mut ffi::PyObject {
    if depth > MOST_DEPTH {
        return too_deep();
    }
    let len = ffi::PyList_Size(obj);
    let out = ffi::PyList_New(len);
    if out.is_null() {
        return out;
    }
    for i in 0..len {
        let item = ffi::PyList_GetItem(obj, i);
        if item.is_null() {
            ffi::Py_DECREF(out);
            return item;
        }
        let copy = copy_obj(item, depth + 1);
        // `PyList_SetItem` takes the reference (and the unset slots of a list dropped on
        // an error are empty, which its deallocation skips).
        if copy.is_null() || ffi::PyList_SetItem(out, i, copy) < 0 {
            ffi::Py_DECREF(out);
            return std::ptr::null_mut();
        }
    }
    out
}

/// NULL with a `RecursionError` set.
///
/// # Safety
/// The GIL must be held.
unsafe fn too_deep() -> *mut ffi::PyObject {
    ffi::PyErr_SetString(
        ffi::PyExc_RecursionError,
        c"a value nested too deep to copy".as_ptr(),
    );
    std::ptr::null_mut()
}

/// Turns the cyclic garbage collector off while alive and back on (if it was on) when
/// dropped: a copy makes only acyclic objects, and the collector's passes over the
/// hundreds of thousands it makes (each pass walking every older object too) would cost
/// several times the copy.
pub(crate) struct GcPaused(bool);

impl GcPaused {
    pub(crate) fn new() -> Self {
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
pub fn copy_json_items<'py>(items: &Bound<'py, PyList>) -> PyResult<Bound<'py, PyAny>> {
    let _paused = GcPaused::new();
    // A list subclass is copied into a plain list (as its items are, one by one).
    let py = items.py();
    // SAFETY: the GIL is held; `items` is a list (any subclass: `PyList_Size` and
    // `PyList_GetItem` read its items as a list's).
    unsafe { Bound::from_owned_ptr_or_err(py, copy_list(items.as_ptr(), 0)) }
}

/// A fresh copy of one JSON-shaped value (see the module's doc).
#[pyfunction]
pub fn copy_json<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let _paused = GcPaused::new();
    copy_value(value, 0)
}
