//! Entry objects handed out before their line is read.
//!
//! For a file store, `Engine.entries` makes each entry of a known type as an instance of
//! its model class with only what the arena knows filled in — `id`, `parent_id`,
//! `timestamp`, and for a message entry its `message` (an instance of the role's class,
//! itself unfilled) — and the hidden slot `_src` set to a [`LineRef`]: where the line lives.
//! The first access to any other attribute reaches the model's `__getattr__`, which asks
//! the `LineRef` to build the entry from its line (`build.rs`, or the dict path) and copies
//! the fields over (`sessiontree.entries._fill`). Nothing is decoded until then, so the
//! context of a long session costs a few small objects per message, not its text.
//!
//! Which types are handed out this way is this module's choice: every entry type of the
//! model table whose class is registered, for messages of a role the table knows.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyMapping, PyString, PyType};

use super::build::{self, class_named, setter, Alloc, Setter};
use super::to_py_err;
use crate::engine::arena::{Kind, Role};
use crate::engine::lazy::LazyLine;
use crate::engine::model;

/// Where an unread entry's line lives, and what the arena knew of it.
#[pyclass(module = "sessiontree._core", name = "LineRef", frozen)]
pub struct LineRef {
    line: Arc<LazyLine>,
    kind: Kind,
    role: Role,
    /// The entry has no parent in the tree (a dangling `parent_id` reads as None).
    root: bool,
    id: Py<PyString>,
}

#[pymethods]
impl LineRef {
    /// The entry's id, as the arena has it.
    #[getter]
    fn id(&self, py: Python<'_>) -> Py<PyString> {
        self.id.clone_ref(py)
    }

    /// The entry of this line, fully built: an entry object, or a dict for Python's
    /// readers (as `Engine.entries` hands them out). Reads the line if its storage is
    /// open; after close, the bytes read at close.
    fn build<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let bytes = self.line.bytes().map_err(|e| to_py_err(py, e))?;
        if let Some(entry) =
            build::registry().and_then(|reg| reg.entry(py, &bytes, self.kind, self.role, self.root))
        {
            return Ok(entry);
        }
        super::line_dict(py, &bytes, self.root).map_err(|e| {
            let what = format!("the session file (line at byte {})", self.line.offset());
            super::changed_line(py, &what, &self.id.bind(py).to_string_lossy(), &e)
        })
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<LineRef of entry {:?} at byte {}>",
            self.id.bind(py).to_string_lossy(),
            self.line.offset()
        )
    }
}

/// How to make an unfilled instance of one class.
pub(super) struct Shell {
    alloc: Alloc,
    src: Setter,
}

impl Shell {
    fn new(cls: &Bound<'_, PyType>) -> PyResult<Shell> {
        Ok(Shell {
            alloc: Alloc::new(cls)?,
            src: setter(cls, "_src")?,
        })
    }

    fn make<'py>(&self, py: Python<'py>, src: &Bound<'py, PyAny>) -> Option<Bound<'py, PyAny>> {
        let obj = self.alloc.make(py).ok()?;
        set(&self.src, &obj, src)?;
        Some(obj)
    }
}

/// Fills one slot; None (the caller reads the line now instead) if it cannot.
fn set(s: &Setter, obj: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> Option<()> {
    s.set(obj, value).ok()
}

/// An entry class: its shell and the slots the arena fills.
pub(super) struct EntryShell {
    shell: Shell,
    id: Setter,
    parent_id: Setter,
    timestamp: Setter,
    /// `MessageEntry.message`.
    message: Option<Setter>,
}

/// The shells of every entry kind and message role the model table knows.
pub(super) struct Shells {
    /// By `Kind as usize`.
    entries: Vec<Option<EntryShell>>,
    /// By `Role as usize`.
    messages: Vec<Option<Shell>>,
}

impl Shells {
    pub(super) fn new(classes: &Bound<'_, PyMapping>) -> PyResult<Shells> {
        let mut entries: Vec<Option<EntryShell>> = Vec::new();
        for def in model::ENTRIES {
            let Some(kind) = def.tag_value().map(Kind::from_type) else {
                continue;
            };
            let cls = class_named(classes, def.class)?;
            let shell = EntryShell {
                shell: Shell::new(&cls)?,
                id: setter(&cls, "id")?,
                parent_id: setter(&cls, "parent_id")?,
                timestamp: setter(&cls, "timestamp")?,
                message: if std::ptr::eq(def, &model::MESSAGE_ENTRY) {
                    Some(setter(&cls, "message")?)
                } else {
                    None
                },
            };
            let at = kind as usize;
            if entries.len() <= at {
                entries.resize_with(at + 1, || None);
            }
            entries[at] = Some(shell);
        }
        let mut messages: Vec<Option<Shell>> = Vec::new();
        for def in model::MESSAGES {
            let Some(role) = def.tag_value().map(Role::from_name) else {
                continue;
            };
            let at = role as usize;
            if messages.len() <= at {
                messages.resize_with(at + 1, || None);
            }
            messages[at] = Some(Shell::new(&class_named(classes, def.class)?)?);
        }
        Ok(Shells { entries, messages })
    }

    /// Entry `id` of kind `kind` (a message of role `role`) as an unfilled instance reading
    /// `line` on first use; None for a kind or role without a shell (read it now instead).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn entry<'py>(
        &self,
        py: Python<'py>,
        kind: Kind,
        role: Role,
        id: &Bound<'py, PyString>,
        parent: Option<&Bound<'py, PyString>>,
        timestamp: &str,
        line: Arc<LazyLine>,
    ) -> Option<Bound<'py, PyAny>> {
        let shell = self.entries.get(kind as usize)?.as_ref()?;
        let message = match &shell.message {
            Some(_) => Some(self.messages.get(role as usize)?.as_ref()?),
            None => None,
        };
        let src = Bound::new(
            py,
            LineRef {
                line,
                kind,
                role,
                root: parent.is_none(),
                id: id.clone().unbind(),
            },
        )
        .ok()?
        .into_any();
        // Nothing it holds can lead back to it.
        untrack(&src);
        let obj = shell.shell.make(py, &src)?;
        set(&shell.id, &obj, id)?;
        let none = py.None().into_bound(py);
        set(&shell.parent_id, &obj, parent.map_or(&none, |p| p.as_any()))?;
        set(
            &shell.timestamp,
            &obj,
            PyString::new(py, timestamp).as_any(),
        )?;
        match (&shell.message, message) {
            (Some(slot), Some(m)) => {
                // The message holds only its `LineRef` until it is filled. The entry stays
                // tracked: its message may come to hold dicts when it is filled alone.
                let message = m.make(py, &src)?;
                untrack(&message);
                set(slot, &obj, &message)?;
            }
            // Strings and its `LineRef` until it is filled.
            _ => untrack(&obj),
        }
        Some(obj)
    }
}

/// Takes an object out of the cyclic garbage collector's lists: one that holds only
/// strings, None and other untracked objects can be in no reference cycle, and each
/// tracked object costs every collection a visit (the unread entries of a long context
/// were two thirds of the objects a collection after it walked). Filling an unread
/// object (`sessiontree.model.entries._fill_from`) tracks it again ([`gc_track`]).
fn untrack(obj: &Bound<'_, PyAny>) {
    // SAFETY: `obj` is a live object of a GC type (the model classes and `LineRef` are),
    // and untracking an untracked object does nothing. Its deallocator untracks it again
    // first, which is also harmless.
    unsafe { pyo3::ffi::PyObject_GC_UnTrack(obj.as_ptr().cast()) }
}

/// Puts `obj` back in the cyclic garbage collector's lists if it was taken out
/// ([`untrack`]); for an object of a GC type only (a `TypeError` otherwise).
#[pyfunction]
pub fn gc_track(obj: &Bound<'_, PyAny>) -> PyResult<()> {
    // SAFETY: reading the type's flags of a live object.
    let is_gc = unsafe {
        pyo3::ffi::PyType_HasFeature(obj.get_type().as_type_ptr(), pyo3::ffi::Py_TPFLAGS_HAVE_GC)
    };
    if is_gc == 0 {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{} objects are not collected by the cyclic GC",
            obj.get_type().name()?
        )));
    }
    // SAFETY: a live object of a GC type; tracked only if it is not (tracking a tracked
    // object is an error).
    unsafe {
        if pyo3::ffi::PyObject_GC_IsTracked(obj.as_ptr()) == 0 {
            pyo3::ffi::PyObject_GC_Track(obj.as_ptr().cast());
        }
    }
    Ok(())
}
