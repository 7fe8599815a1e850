//! `Session.get_tree()` for engine storages: the `TreeNode` objects made in one pass over
//! the arena, bottom-up (a child always comes after its parent in the file), so a tree of
//! any depth costs one node, one children tuple and one entry per entry, and no recursion.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple, PyType};

use super::build::{setter, Alloc, Setter};
use crate::engine::arena::{Arena, NONE};

/// How `TreeNode` instances are made: allocated, then each slot's `__set__`.
pub(super) struct NodeClass {
    alloc: Alloc,
    entry: Setter,
    children: Setter,
    label: Setter,
}

impl NodeClass {
    pub(super) fn new(cls: &Bound<'_, PyType>) -> PyResult<NodeClass> {
        Ok(NodeClass {
            alloc: Alloc::new(cls)?,
            entry: setter(cls, "entry")?,
            children: setter(cls, "children")?,
            label: setter(cls, "label")?,
        })
    }

    fn make<'py>(
        &self,
        py: Python<'py>,
        entry: &Bound<'py, PyAny>,
        children: &Bound<'py, PyAny>,
        label: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let obj = self.alloc.make(py)?;
        self.entry.set(&obj, entry)?;
        self.children.set(&obj, children)?;
        self.label.set(&obj, label)?;
        Ok(obj)
    }
}

/// The root nodes (file order) of the tree whose entries, in file order, are `entries`.
pub(super) fn build<'py>(
    py: Python<'py>,
    class: &NodeClass,
    arena: &Arena,
    entries: &Bound<'py, PyList>,
) -> PyResult<Bound<'py, PyList>> {
    let n = arena.len();
    if entries.len() != n {
        return Err(PyValueError::new_err(format!(
            "{} entries for a tree of {n}",
            entries.len()
        )));
    }
    let none = py.None().into_bound(py);
    let empty = PyTuple::empty(py).into_any();
    let mut nodes: Vec<Option<Bound<'py, PyAny>>> = vec![None; n];
    let mut kids: Vec<Bound<'py, PyAny>> = Vec::new();
    for i in (0..n).rev() {
        let idx = i as u32;
        kids.clear();
        for c in arena.children(idx) {
            // Children come later in the file, so they are made already.
            kids.push(nodes[c as usize].take().ok_or_else(|| {
                PyValueError::new_err(format!("entry {c} is the child of two entries"))
            })?);
        }
        let children = if kids.is_empty() {
            empty.clone()
        } else {
            PyTuple::new(py, kids.drain(..))?.into_any()
        };
        let label = match arena.label(idx) {
            Some(l) => PyString::new(py, l).into_any(),
            None => none.clone(),
        };
        nodes[i] = Some(class.make(py, &entries.get_item(i)?, &children, &label)?);
    }
    let roots = PyList::empty(py);
    for r in arena.children(NONE) {
        if let Some(node) = nodes[r as usize].take() {
            roots.append(node)?;
        }
    }
    Ok(roots)
}
