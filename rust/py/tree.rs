//! `Session.get_tree()` for engine storages: the `TreeNode` objects made in one pass over
//! the arena, bottom-up (a child always comes after its parent in the file), so a tree of
//! any depth costs one node, one children tuple and one entry per entry, and no recursion.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple, PyType};

use super::slots::{setter, Alloc, Setter};
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
    let mut used = vec![false; n];
    // A child's node. A repeat of an id (pi files) shows the first copy's node again, as
    // pi's tree does, unless that node is not made when the repeat's parent is (a repeat
    // hung elsewhere than its first copy): then it is a leaf of its own.
    let mut child = |nodes: &[Option<Bound<'py, PyAny>>], c: u32| -> PyResult<Bound<'py, PyAny>> {
        let at = match arena.node(c).repeat {
            true if nodes[c as usize].is_some() => c,
            true => arena.lookup(arena.id(c)).unwrap_or(c),
            false if std::mem::replace(&mut used[c as usize], true) => {
                return Err(PyValueError::new_err(format!(
                    "entry {c} is the child of two entries"
                )))
            }
            false => c,
        };
        nodes[at as usize]
            .clone()
            .ok_or_else(|| PyValueError::new_err(format!("entry {at} is not made yet")))
    };
    let mut kids: Vec<Bound<'py, PyAny>> = Vec::new();
    for i in (0..n).rev() {
        let idx = i as u32;
        let node = arena.node(idx);
        if node.repeat {
            let first = arena.lookup(arena.id(idx)).unwrap_or(idx);
            if node.parent != NONE && first < node.parent {
                nodes[i] = Some(class.make(py, &entries.get_item(i)?, &empty, &none)?);
            }
            continue;
        }
        kids.clear();
        for c in arena.children(idx) {
            // Children come later in the file, so they are made already.
            kids.push(child(&nodes, c)?);
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
        roots.append(child(&nodes, r)?)?;
    }
    Ok(roots)
}
