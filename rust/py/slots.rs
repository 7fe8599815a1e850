//! Instances filled slot by slot: how the binding makes an empty instance of a Python
//! class (as `object.__new__(cls)` does) and fills its slots through their descriptors'
//! `__set__`, so a frozen class's `__setattr__` is never involved. Used by `build.rs` (the
//! model's entries and messages) and `tree.rs` (`get_tree`'s nodes).

use std::os::raw::c_void;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyMapping, PyType};

/// One slot's descriptor and its `__set__`.
pub(super) struct Setter {
    descr: Py<PyAny>,
    set: ffi::descrsetfunc,
}

impl Setter {
    /// Fills the slot of `obj` (an instance of the descriptor's class) with `value`.
    pub(super) fn set(&self, obj: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        // SAFETY: the descriptor's own `__set__` on an instance of its class; it takes a
        // new reference to `value`.
        let rc = unsafe { (self.set)(self.descr.as_ptr(), obj.as_ptr(), value.as_ptr()) };
        if rc != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(())
    }
}

/// How to make an empty instance of a class, as `object.__new__(cls)` does (its
/// `tp_alloc`); its slots are then filled through their [`Setter`]s.
pub(super) struct Alloc {
    cls: Py<PyType>,
    alloc: ffi::allocfunc,
}

impl Alloc {
    pub(super) fn new(cls: &Bound<'_, PyType>) -> PyResult<Alloc> {
        let alloc = type_slot(cls, ffi::Py_tp_alloc);
        if alloc.is_null() {
            return Err(PyTypeError::new_err(format!(
                "{} has no tp_alloc",
                cls.name()?
            )));
        }
        Ok(Alloc {
            cls: cls.clone().unbind(),
            // SAFETY: a non-null `Py_tp_alloc` slot holds an `allocfunc`.
            alloc: unsafe { std::mem::transmute::<*mut c_void, ffi::allocfunc>(alloc) },
        })
    }

    pub(super) fn make<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: the class's own `tp_alloc`, called as `object.__new__` does.
        unsafe {
            let raw = (self.alloc)(self.cls.bind(py).as_type_ptr(), 0);
            Bound::from_owned_ptr_or_err(py, raw)
        }
    }

    pub(super) fn cls<'py>(&self, py: Python<'py>) -> &Bound<'py, PyType> {
        self.cls.bind(py)
    }
}

/// The class `classes` maps the model table's class name `name` to.
pub(super) fn class_named<'py>(
    classes: &Bound<'py, PyMapping>,
    name: &str,
) -> PyResult<Bound<'py, PyType>> {
    classes
        .get_item(name)
        .map_err(|_| PyTypeError::new_err(format!("no class for {name}")))?
        .cast_into::<PyType>()
        .map_err(|_| PyTypeError::new_err(format!("the class for {name} is not a type")))
}

pub(super) fn type_slot(ty: &Bound<'_, PyType>, slot: std::os::raw::c_int) -> *mut c_void {
    // SAFETY: `ty` is a live type object; PyType_GetSlot accepts static types since 3.10.
    unsafe { ffi::PyType_GetSlot(ty.as_type_ptr(), slot) }
}

/// The slot descriptor `name` of `cls`, found along the MRO as attribute lookup finds it,
/// with the function its type fills `slot` with (`Py_tp_descr_set`, `Py_tp_descr_get`).
pub(super) fn slot_descriptor<'py>(
    cls: &Bound<'py, PyType>,
    name: &str,
    slot: std::os::raw::c_int,
) -> PyResult<(Bound<'py, PyAny>, *mut c_void)> {
    let mro = cls.getattr("__mro__")?;
    for base in mro.try_iter()? {
        let Ok(descr) = base?.getattr("__dict__")?.get_item(name) else {
            continue;
        };
        let func = type_slot(&descr.get_type(), slot);
        if func.is_null() {
            break;
        }
        return Ok((descr, func));
    }
    Err(PyTypeError::new_err(format!(
        "{}.{name} is not a slot",
        cls.name()?
    )))
}

/// The `__set__` of the slot descriptor `name` of `cls`.
pub(super) fn setter(cls: &Bound<'_, PyType>, name: &str) -> PyResult<Setter> {
    let (descr, set) = slot_descriptor(cls, name, ffi::Py_tp_descr_set)?;
    // SAFETY: a non-null `Py_tp_descr_set` slot holds a `descrsetfunc`.
    let set = unsafe { std::mem::transmute::<*mut c_void, ffi::descrsetfunc>(set) };
    Ok(Setter {
        descr: descr.unbind(),
        set,
    })
}

/// Whether the cyclic collector may ignore `obj` as a member of a value: it cannot be part
/// of a reference cycle by itself. True for objects that are not containers (strings,
/// numbers, None) and for containers the collector does not track (a tuple or a model
/// value untracked by [`untrack_if_acyclic`]); false for a dict even when CPython left it
/// untracked (it can still be changed to hold anything), and for every tracked object.
fn is_atomic(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: flag and tracking queries on a live object, under the GIL.
    unsafe {
        let flags = ffi::PyType_GetFlags(ffi::Py_TYPE(obj.as_ptr()));
        flags & ffi::Py_TPFLAGS_HAVE_GC == 0
            || (flags & ffi::Py_TPFLAGS_DICT_SUBCLASS == 0
                && ffi::PyObject_GC_IsTracked(obj.as_ptr()) == 0)
    }
}

/// Takes `obj` (a tuple or model value the binding just built, never changed after this)
/// out of the cyclic collector's lists when all of its `members` are atomic: it can then
/// never be part of a cycle, as CPython itself reasons for tuples of atomic items
/// (`_PyTuple_MaybeUntrack`). A read of 100k entries otherwise leaves ~10^5 more objects
/// for every later collection to traverse (about a tenth of a cold `build_context`, and a
/// longer pause of each full collection for as long as the session's values live).
pub(super) fn untrack_if_acyclic<'a, 'py: 'a>(
    obj: &Bound<'py, PyAny>,
    mut members: impl Iterator<Item = &'a Bound<'py, PyAny>>,
) {
    if members.all(is_atomic) {
        // SAFETY: `obj` is a live GC object (a tuple or a slotted class instance);
        // untracking an untracked object is a no-op.
        unsafe {
            if ffi::PyObject_GC_IsTracked(obj.as_ptr()) != 0 {
                ffi::PyObject_GC_UnTrack(obj.as_ptr().cast());
            }
        }
    }
}
