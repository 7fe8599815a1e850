//! The PyO3 binding: a thin wrapper exposing the engine to `sessiontree` as `_core`.
//!
//! Arguments are checked in Python; this module converts engine errors at one point
//! (`to_py_err`), releases the GIL around file work and hands out raw lines as `bytes`.
//!
//! The binding never imports the package above it: `sessiontree.errors` hands its
//! exception classes to `_register_error_classes` once, at import, and `to_py_err` only
//! looks them up.

use std::path::PathBuf;
use std::sync::Mutex;

mod build;
mod encode;
mod lazy;
mod pyjson;
mod tree;

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyMapping, PyString, PyTuple, PyType};

use crate::engine::arena::{Kind, Role, ENTRY_TYPES, MESSAGE_ROLES, NONE};
use crate::engine::error::ERROR_CODES;
use crate::engine::jsonl::{DEFAULT_MAX_DEPTH, DEFAULT_MAX_LINE_BYTES, DURABILITY_MODES};
use crate::engine::line::{FORMAT_VERSION, MAX_ID_BYTES};
use crate::engine::model::{STOP_REASONS, THINKING_LEVELS};
#[cfg(feature = "test-hooks")]
use crate::engine::store::Fault;
use crate::engine::store::{OpenOptions, DEFAULT_INDEX_MIN_BYTES};
use crate::engine::{Durability, EngineError, ErrorCode, Limits, Store};

/// The `SessionError` subclass of each code, in `ErrorCode::ALL` order; registered once by
/// `sessiontree.errors` (a reload registers again and replaces them).
static ERROR_CLASSES: Mutex<Vec<Py<PyType>>> = Mutex::new(Vec::new());

/// Stores the exception class of every error code: `base` is `SessionError`, `by_code`
/// maps each code to its subclass (a missing code falls back to `base`).
#[pyfunction]
fn _register_error_classes(
    base: &Bound<'_, PyType>,
    by_code: &Bound<'_, PyMapping>,
) -> PyResult<()> {
    let mut classes = Vec::with_capacity(ErrorCode::ALL.len());
    for code in ErrorCode::ALL {
        let cls = if by_code.contains(code.as_str())? {
            by_code
                .get_item(code.as_str())?
                .cast_into::<PyType>()
                .map_err(|_| {
                    PyTypeError::new_err(format!("the class for {:?} is not a type", code.as_str()))
                })?
        } else {
            base.clone()
        };
        if !cls.is_subclass(base)? {
            return Err(PyTypeError::new_err(format!(
                "the class for {:?} does not derive from the base class",
                code.as_str()
            )));
        }
        classes.push(cls.unbind());
    }
    *ERROR_CLASSES.lock().unwrap_or_else(|p| p.into_inner()) = classes;
    Ok(())
}

/// Converts an engine error into its registered `SessionError` subclass, with an `io`
/// error's `OSError` as `__cause__`.
fn to_py_err(py: Python<'_>, e: EngineError) -> PyErr {
    let cls = ERROR_CLASSES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(e.code as usize)
        .map(|c| c.clone_ref(py));
    let Some(cls) = cls else {
        // Only reachable when `_core` is used before `sessiontree.errors` was imported.
        return PyRuntimeError::new_err(e.to_string());
    };
    let err = match cls.bind(py).call1((e.code.as_str(), e.message.as_str())) {
        Ok(exc) => PyErr::from_value(exc),
        Err(failed) => return failed,
    };
    if let Some(errno) = e.errno {
        // `OSError(errno, strerror)` picks the builtin subclass (`FileNotFoundError`, …)
        // and sets `.errno`, as Python's own `os` functions do.
        let os = std::io::Error::from_raw_os_error(errno).to_string();
        let suffix = format!(" (os error {errno})");
        let strerror = os.strip_suffix(&suffix).unwrap_or(&os).to_owned();
        err.set_cause(py, Some(PyOSError::new_err((errno, strerror))));
    }
    err
}

fn limits(
    max_line_bytes: Option<usize>,
    max_depth: Option<usize>,
    max_id_bytes: Option<usize>,
) -> Limits {
    let d = Limits::default();
    Limits {
        max_line_bytes: max_line_bytes.unwrap_or(d.max_line_bytes),
        max_depth: max_depth.unwrap_or(d.max_depth),
        max_id_bytes: max_id_bytes.unwrap_or(d.max_id_bytes),
    }
}

/// The one place engine lines become entry dicts, so every read agrees with the tree:
/// a root (`root`) whose line names a parent the reader never found (a dangling parent,
/// reported at load) gets `parent_id` None, as FORMAT.md asks; the line itself is not
/// changed.
fn line_dict<'py>(py: Python<'py>, line: &[u8], root: bool) -> PyResult<Bound<'py, PyAny>> {
    let obj = pyjson::loads(py, line)?;
    if root {
        if let Ok(dict) = obj.cast::<PyDict>() {
            let parent_key = pyo3::intern!(py, "parent_id");
            if dict.get_item(parent_key)?.is_some_and(|p| !p.is_none()) {
                dict.set_item(parent_key, py.None())?;
            }
        }
    }
    Ok(obj)
}

/// Entries as `Engine.entries` hands them out: objects, with the positions of those
/// handed out as dicts for Python's readers.
type Entries<'py> = (Bound<'py, PyList>, Vec<usize>);

fn opt_idx(idx: u32) -> Option<u32> {
    (idx != NONE).then_some(idx)
}

/// One session's engine: the arena over a file or a memory buffer.
#[pyclass(module = "sessiontree._core", name = "Engine")]
pub struct PyEngine {
    store: Store,
}

impl PyEngine {
    fn idx(&self, py: Python<'_>, id: &str) -> PyResult<u32> {
        self.store.arena().lookup(id).ok_or_else(|| {
            to_py_err(
                py,
                EngineError::new(
                    crate::engine::ErrorCode::NotFound,
                    format!("entry {id:?} not found"),
                ),
            )
        })
    }

    fn lines_of<'py>(&self, py: Python<'py>, idxs: &[u32]) -> PyResult<Bound<'py, PyList>> {
        let len = self.store.arena().len();
        if let Some(bad) = idxs.iter().find(|&&i| i as usize >= len) {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "entry index {bad} out of range (0..{len})"
            )));
        }
        let mut out = Vec::with_capacity(idxs.len());
        for &i in idxs {
            let line = self.store.line(i).map_err(|e| to_py_err(py, e))?;
            out.push(PyBytes::new(py, &line));
        }
        PyList::new(py, out)
    }

    fn dict_of<'py>(&self, py: Python<'py>, i: u32, line: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        line_dict(py, line, self.store.arena().node(i).parent == NONE)
    }

    fn check_idxs(&self, idxs: &[u32]) -> PyResult<()> {
        let len = self.store.arena().len();
        match idxs.iter().find(|&&i| i as usize >= len) {
            Some(bad) => Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "entry index {bad} out of range (0..{len})"
            ))),
            None => Ok(()),
        }
    }

    fn objects_of<'py>(&self, py: Python<'py>, idxs: &[u32]) -> PyResult<Bound<'py, PyList>> {
        self.check_idxs(idxs)?;
        let out = PyList::empty(py);
        for &i in idxs {
            let line = self.store.line(i).map_err(|e| to_py_err(py, e))?;
            out.append(self.dict_of(py, i, &line)?)?;
        }
        Ok(out)
    }

    /// Entries `idxs` as entry objects. For a file store, entries of a known type are
    /// handed out unread (`lazy.rs`: filled from their line on first use); others are
    /// built by the binding where it can (`build.rs`: message entries of the user,
    /// assistant and tool-result roles), else handed out as the dicts of `objects_of` for
    /// Python's readers to build.
    fn entries_of<'py>(&self, py: Python<'py>, idxs: &[u32]) -> PyResult<Entries<'py>> {
        self.check_idxs(idxs)?;
        let Some(registry) = build::registry() else {
            return Ok((self.objects_of(py, idxs)?, (0..idxs.len()).collect()));
        };
        let arena = self.store.arena();
        let out = PyList::empty(py);
        let mut dicts = Vec::new();
        // The previous entry's index and id: on a path, it is the next one's parent.
        let mut prev: Option<(u32, Bound<'py, PyString>)> = None;
        for &i in idxs {
            let node = arena.node(i);
            if let Some(line) = self.store.lazy_line(i) {
                let id = PyString::new(py, arena.id(i));
                let parent = match (&prev, node.parent) {
                    (_, NONE) => None,
                    (Some((p, pid)), parent) if *p == parent => Some(pid.clone()),
                    (_, parent) => Some(PyString::new(py, arena.id(parent))),
                };
                let shell = registry.shells.entry(
                    py,
                    node.kind,
                    node.role,
                    &id,
                    parent.as_ref(),
                    arena.timestamp(i),
                    line,
                );
                if let Some(entry) = shell {
                    out.append(entry)?;
                    prev = Some((i, id));
                    continue;
                }
            }
            prev = None;
            let line = self.store.line(i).map_err(|e| to_py_err(py, e))?;
            let built = if node.kind == Kind::Message {
                registry.message_entry(py, &line, node.role, node.parent == NONE)
            } else {
                None
            };
            match built {
                Some(entry) => out.append(entry)?,
                None => {
                    dicts.push(out.len());
                    out.append(self.dict_of(py, i, &line)?)?;
                }
            }
        }
        Ok((out, dicts))
    }

    /// `closed` after close, `io` once a failed write or sync poisoned the store.
    fn check(&self, py: Python<'_>) -> PyResult<()> {
        self.store.check_open().map_err(|e| to_py_err(py, e))
    }
}

#[pymethods]
impl PyEngine {
    /// A new memory engine from a header line.
    #[staticmethod]
    #[pyo3(signature = (header, max_line_bytes=None, max_depth=None, max_id_bytes=None))]
    fn memory(
        py: Python<'_>,
        header: &[u8],
        max_line_bytes: Option<usize>,
        max_depth: Option<usize>,
        max_id_bytes: Option<usize>,
    ) -> PyResult<Self> {
        let store = Store::memory(header, limits(max_line_bytes, max_depth, max_id_bytes))
            .map_err(|e| to_py_err(py, e))?;
        Ok(PyEngine { store })
    }

    /// A memory engine loaded from a whole JSONL document.
    #[staticmethod]
    #[pyo3(signature = (data, strict=false, max_line_bytes=None, max_depth=None, max_id_bytes=None))]
    fn from_bytes(
        py: Python<'_>,
        data: &[u8],
        strict: bool,
        max_line_bytes: Option<usize>,
        max_depth: Option<usize>,
        max_id_bytes: Option<usize>,
    ) -> PyResult<Self> {
        let lim = limits(max_line_bytes, max_depth, max_id_bytes);
        let store = Store::memory_from_bytes(data, strict, lim).map_err(|e| to_py_err(py, e))?;
        Ok(PyEngine { store })
    }

    /// Creates a session file (exclusive, 0600) holding `header`.
    #[staticmethod]
    #[pyo3(signature = (path, header, durability="group", max_line_bytes=None, max_depth=None, max_id_bytes=None, index=true, index_min_bytes=None))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        path: PathBuf,
        header: Vec<u8>,
        durability: &str,
        max_line_bytes: Option<usize>,
        max_depth: Option<usize>,
        max_id_bytes: Option<usize>,
        index: bool,
        index_min_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let dur = Durability::parse(durability).map_err(|e| to_py_err(py, e))?;
        let lim = limits(max_line_bytes, max_depth, max_id_bytes);
        let mut store = py
            .detach(|| Store::create(&path, &header, dur, lim))
            .map_err(|e| to_py_err(py, e))?;
        store
            .set_index_min_bytes(index.then(|| index_min_bytes.unwrap_or(DEFAULT_INDEX_MIN_BYTES)));
        Ok(PyEngine { store })
    }

    /// Opens a session file.
    #[staticmethod]
    #[pyo3(signature = (path, readonly=false, strict=false, durability="group", max_line_bytes=None, max_depth=None, max_id_bytes=None, index=true, index_min_bytes=None))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        readonly: bool,
        strict: bool,
        durability: &str,
        max_line_bytes: Option<usize>,
        max_depth: Option<usize>,
        max_id_bytes: Option<usize>,
        index: bool,
        index_min_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let opts = OpenOptions {
            readonly,
            strict,
            durability: Durability::parse(durability).map_err(|e| to_py_err(py, e))?,
            limits: limits(max_line_bytes, max_depth, max_id_bytes),
            index_min_bytes: index.then(|| index_min_bytes.unwrap_or(DEFAULT_INDEX_MIN_BYTES)),
        };
        let store = py
            .detach(|| Store::open(&path, opts))
            .map_err(|e| to_py_err(py, e))?;
        Ok(PyEngine { store })
    }

    /// The header line.
    fn header<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.store.header())
    }

    /// The session id.
    #[getter]
    fn session_id(&self) -> &str {
        self.store.session_id()
    }

    /// The file path, or None for memory engines.
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        self.store.path().map(PathBuf::from)
    }

    /// True after close().
    #[getter]
    fn closed(&self) -> bool {
        self.store.is_closed()
    }

    /// True for a read-only file engine.
    #[getter]
    fn readonly(&self) -> bool {
        self.store.is_readonly()
    }

    /// Bytes of the session document.
    #[getter]
    fn byte_len(&self) -> u64 {
        self.store.byte_len()
    }

    /// What happened to the persisted index at open: unused, loaded, created or rebuilt.
    #[getter]
    fn index_status(&self) -> &'static str {
        self.store.index_status().as_str()
    }

    /// Where a writer open saved a torn tail.
    #[getter]
    fn torn_path(&self) -> Option<PathBuf> {
        self.store.torn_path().map(PathBuf::from)
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.check(py)?;
        Ok(self.store.arena().len())
    }

    /// The whole document of a memory engine.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.store.memory_bytes().map(|b| PyBytes::new(py, b))
    }

    /// (issues as (line, offset, kind, message) tuples, torn_tail_bytes).
    fn report(&self) -> (Vec<(u64, u64, &'static str, String)>, u64) {
        let r = self.store.report();
        let issues = r
            .issues
            .iter()
            .map(|i| (i.line, i.offset, i.kind.as_str(), i.message.clone()))
            .collect();
        (issues, r.torn_tail_bytes)
    }

    /// The current leaf's index, or None.
    fn leaf(&self, py: Python<'_>) -> PyResult<Option<u32>> {
        self.check(py)?;
        Ok(opt_idx(self.store.arena().leaf()))
    }

    /// The index of `id`, or None.
    fn lookup(&self, py: Python<'_>, id: &str) -> PyResult<Option<u32>> {
        self.check(py)?;
        Ok(self.store.arena().lookup(id))
    }

    /// The id of entry `idx`.
    fn id_of(&self, py: Python<'_>, idx: u32) -> PyResult<String> {
        self.check(py)?;
        if idx as usize >= self.store.arena().len() {
            return Err(PyRuntimeError::new_err("index out of range"));
        }
        Ok(self.store.arena().id(idx).to_owned())
    }

    /// (type, role, parent index, target index, line number) of entry `idx`.
    #[allow(clippy::type_complexity)]
    fn info(
        &self,
        idx: u32,
    ) -> PyResult<(
        &'static str,
        Option<&'static str>,
        Option<u32>,
        Option<u32>,
        u64,
    )> {
        if idx as usize >= self.store.arena().len() {
            return Err(PyRuntimeError::new_err("index out of range"));
        }
        let n = self.store.arena().node(idx);
        Ok((
            n.kind.name(),
            n.role.name(),
            opt_idx(n.parent),
            opt_idx(n.target),
            n.line_no,
        ))
    }

    /// The raw line of `id` (None if unknown).
    fn get_line<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Option<Bound<'py, PyBytes>>> {
        self.check(py)?;
        match self.store.arena().lookup(id) {
            None => Ok(None),
            Some(i) => {
                let line = self.store.line(i).map_err(|e| to_py_err(py, e))?;
                Ok(Some(PyBytes::new(py, &line)))
            }
        }
    }

    /// Entries `idxs` as objects built by the binding, or dicts where Python builds them.
    fn entries<'py>(&self, py: Python<'py>, idxs: Vec<u32>) -> PyResult<Entries<'py>> {
        self.check(py)?;
        self.entries_of(py, &idxs)
    }

    /// The path from the root to `id` as `entries` gives them (`to_compaction`: cut at the
    /// compaction).
    fn path_entries<'py>(
        &self,
        py: Python<'py>,
        id: Option<&str>,
        to_compaction: bool,
    ) -> PyResult<Entries<'py>> {
        let idxs = self.path_indices(py, id, to_compaction)?;
        self.entries_of(py, &idxs)
    }

    /// The raw lines of entries `idxs`.
    fn lines<'py>(&self, py: Python<'py>, idxs: Vec<u32>) -> PyResult<Bound<'py, PyList>> {
        self.check(py)?;
        self.lines_of(py, &idxs)
    }

    /// Raw lines of the path from the root to `id` (empty for None).
    fn path_to_root<'py>(&self, py: Python<'py>, id: Option<&str>) -> PyResult<Bound<'py, PyList>> {
        self.check(py)?;
        let path = match id {
            None => Vec::new(),
            Some(id) => self.store.arena().path_to_root(self.idx(py, id)?),
        };
        self.lines_of(py, &path)
    }

    /// Raw lines of the path to the root or the nearest compaction's cut (FORMAT.md).
    fn path_to_root_or_compaction<'py>(
        &self,
        py: Python<'py>,
        id: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.check(py)?;
        let path = match id {
            None => Vec::new(),
            Some(id) => self
                .store
                .arena()
                .path_to_root_or_compaction(self.idx(py, id)?),
        };
        self.lines_of(py, &path)
    }

    /// Indices of the path to the root or compaction cut.
    fn path_indices(
        &self,
        py: Python<'_>,
        id: Option<&str>,
        to_compaction: bool,
    ) -> PyResult<Vec<u32>> {
        self.check(py)?;
        Ok(match id {
            None => Vec::new(),
            Some(id) => {
                let i = self.idx(py, id)?;
                if to_compaction {
                    self.store.arena().path_to_root_or_compaction(i)
                } else {
                    self.store.arena().path_to_root(i)
                }
            }
        })
    }

    /// The entries that set thinking level, model and active tools on the path to `id`:
    /// raw lines of the nearest of each (None where absent).
    fn state_lines<'py>(&self, py: Python<'py>, id: Option<&str>) -> PyResult<Bound<'py, PyList>> {
        self.check(py)?;
        let arena = self.store.arena();
        let mut found = [NONE; 3];
        let mut cur = match id {
            None => NONE,
            Some(id) => self.idx(py, id)?,
        };
        while cur != NONE && found.contains(&NONE) {
            let n = arena.node(cur);
            let slot = match n.kind {
                Kind::ThinkingLevelChange => Some(0),
                Kind::ModelChange => Some(1),
                Kind::Message if n.role == Role::Assistant => Some(1),
                Kind::ActiveToolsChange => Some(2),
                _ => None,
            };
            if let Some(s) = slot {
                if found[s] == NONE {
                    found[s] = cur;
                }
            }
            cur = n.parent;
        }
        let mut out: Vec<Option<Bound<'py, PyBytes>>> = Vec::with_capacity(3);
        for f in found {
            out.push(if f == NONE {
                None
            } else {
                Some(PyBytes::new(
                    py,
                    &self.store.line(f).map_err(|e| to_py_err(py, e))?,
                ))
            });
        }
        PyList::new(py, out)
    }

    /// Child indices of `id` in file order (roots for None).
    fn children(&self, py: Python<'_>, id: Option<&str>) -> PyResult<Vec<u32>> {
        self.check(py)?;
        let parent = match id {
            None => NONE,
            Some(id) => self.idx(py, id)?,
        };
        Ok(self.store.arena().children(parent).collect())
    }

    /// The tree's root `TreeNode`s (file order), made from `entries` (every entry, in file
    /// order, as `entries` handed them out and Python's readers finished them).
    fn tree<'py>(
        &self,
        py: Python<'py>,
        entries: &Bound<'py, PyList>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.check(py)?;
        let registry = build::registry();
        let class = registry
            .as_ref()
            .and_then(|r| r.tree_node.as_ref())
            .ok_or_else(|| PyTypeError::new_err("TreeNode is not registered"))?;
        tree::build(py, class, self.store.arena(), entries)
    }

    /// Parent index of every entry (-1 for roots), in file order.
    fn parents(&self, py: Python<'_>) -> PyResult<Vec<i64>> {
        self.check(py)?;
        let a = self.store.arena();
        Ok((0..a.len() as u32)
            .map(|i| {
                let p = a.node(i).parent;
                if p == NONE {
                    -1
                } else {
                    i64::from(p)
                }
            })
            .collect())
    }

    /// Indices of the entries of type `type_name`, in file order.
    fn find(&self, py: Python<'_>, type_name: &str) -> PyResult<Vec<u32>> {
        self.check(py)?;
        Ok(self.store.arena().find(type_name))
    }

    /// Indices in file order (or newest first), optionally of one type, after `since`.
    #[pyo3(signature = (type_name=None, since=None, limit=None, reverse=false))]
    fn select(
        &self,
        py: Python<'_>,
        type_name: Option<&str>,
        since: Option<&str>,
        limit: Option<usize>,
        reverse: bool,
    ) -> PyResult<Vec<u32>> {
        self.check(py)?;
        let a = self.store.arena();
        let start = match since {
            None => 0,
            Some(id) => self.idx(py, id)? + 1,
        };
        let kind = type_name.map(Kind::from_type);
        let keep = |i: &u32| match (type_name, kind) {
            (None, _) => true,
            (Some(t), Some(Kind::Unknown)) => a.unknown_type(*i) == Some(t),
            (Some(_), Some(k)) => a.node(*i).kind == k,
            (Some(_), None) => false,
        };
        let limit = limit.unwrap_or(usize::MAX);
        let range = start..a.len() as u32;
        Ok(if reverse {
            range.rev().filter(keep).take(limit).collect()
        } else {
            range.filter(keep).take(limit).collect()
        })
    }

    /// The label on `id`.
    fn label(&self, py: Python<'_>, id: &str) -> PyResult<Option<String>> {
        self.check(py)?;
        let a = self.store.arena();
        Ok(a.lookup(id).and_then(|i| a.label(i)).map(str::to_owned))
    }

    /// Every label as {entry id: label}.
    fn labels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.check(py)?;
        let a = self.store.arena();
        let d = PyDict::new(py);
        for (i, label) in a.labels() {
            d.set_item(a.id(i), label)?;
        }
        Ok(d)
    }

    /// The session name.
    fn name(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.check(py)?;
        Ok(self.store.arena().name().map(str::to_owned))
    }

    /// The newest entry timestamp.
    fn newest_timestamp(&self) -> Option<String> {
        self.store.arena().newest_timestamp().map(str::to_owned)
    }

    /// (entry, message, user, assistant, tool_result counts, input, output, cache_read,
    /// cache_write, total_tokens, cost_total).
    #[allow(clippy::type_complexity)]
    fn stats(
        &self,
        py: Python<'_>,
    ) -> PyResult<(u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, f64)> {
        self.check(py)?;
        let s = self.store.arena().stats();
        let u = s.usage;
        Ok((
            s.entry_count,
            s.message_count,
            s.user_message_count,
            s.assistant_message_count,
            s.tool_result_count,
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            u.total_tokens,
            u.cost_total,
        ))
    }

    /// A fresh unused 8-hex-digit id.
    fn create_entry_id(&self, py: Python<'_>) -> PyResult<String> {
        self.check(py)?;
        Ok(self.store.create_entry_id())
    }

    /// Appends one entry line; returns its index.
    fn append(&mut self, py: Python<'_>, line: &[u8]) -> PyResult<u32> {
        let store = &mut self.store;
        py.detach(|| store.append(line))
            .map_err(|e| to_py_err(py, e))
    }

    /// Appends an entry object: its line is encoded from the model (`encode.rs`), then
    /// checked and written as `append` does; returns its index.
    fn append_entry(&mut self, py: Python<'_>, entry: &Bound<'_, PyAny>) -> PyResult<u32> {
        encode::append_entry(py, &mut self.store, entry)
    }

    /// Appends `message` in a new message entry under the leaf (a fresh id, the time now)
    /// and returns the `MessageEntry`; None, appending nothing, when `message` is not
    /// exactly one of the model's message classes.
    fn append_message<'py>(
        &mut self,
        py: Python<'py>,
        message: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        encode::append_message(py, &mut self.store, message)
    }

    /// Writes a new session file at `path`: `header`, entries `kept` of this engine, entry
    /// `kept[i]` under entry `parents[i]` (an earlier kept one, or -1 for a root), then the
    /// `extras` lines (`engine/fork.rs`). Returns the new file's engine, open for writing.
    #[pyo3(signature = (path, header, kept, parents, extras, durability="group", max_line_bytes=None, max_depth=None, max_id_bytes=None, index=true, index_min_bytes=None))]
    #[allow(clippy::too_many_arguments)]
    fn fork_to(
        &self,
        py: Python<'_>,
        path: PathBuf,
        header: Vec<u8>,
        kept: Vec<u32>,
        parents: Vec<i64>,
        extras: Vec<Vec<u8>>,
        durability: &str,
        max_line_bytes: Option<usize>,
        max_depth: Option<usize>,
        max_id_bytes: Option<usize>,
        index: bool,
        index_min_bytes: Option<u64>,
    ) -> PyResult<PyEngine> {
        let opts = crate::engine::ForkOptions {
            durability: Durability::parse(durability).map_err(|e| to_py_err(py, e))?,
            limits: limits(max_line_bytes, max_depth, max_id_bytes),
            index_min_bytes: index.then(|| index_min_bytes.unwrap_or(DEFAULT_INDEX_MIN_BYTES)),
        };
        let parents: Vec<u32> = parents
            .iter()
            .map(|&p| u32::try_from(p).unwrap_or(NONE))
            .collect();
        let store = &self.store;
        let store = py
            .detach(|| store.fork_to(&path, &header, &kept, &parents, &extras, opts))
            .map_err(|e| to_py_err(py, e))?;
        Ok(PyEngine { store })
    }

    /// Writes buffered appends and syncs.
    fn flush(&mut self, py: Python<'_>) -> PyResult<()> {
        let store = &mut self.store;
        py.detach(|| store.flush()).map_err(|e| to_py_err(py, e))
    }

    /// Picks up lines appended by another writer (read-only engines).
    fn refresh(&mut self, py: Python<'_>) -> PyResult<usize> {
        let store = &mut self.store;
        py.detach(|| store.refresh()).map_err(|e| to_py_err(py, e))
    }

    /// Test hook: the next write ("write") or sync ("sync") fails with `errno`; None clears.
    ///
    /// Present only in builds with the `test-hooks` feature (the dev build).
    #[cfg(feature = "test-hooks")]
    #[pyo3(signature = (kind=None, errno=5))]
    fn inject_fault(&mut self, kind: Option<&str>, errno: i32) -> PyResult<()> {
        let fault = match kind {
            None => None,
            Some("write") => Some(Fault::Write(errno)),
            Some("sync") => Some(Fault::Sync(errno)),
            Some(other) => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "unknown fault kind {other:?}"
                )))
            }
        };
        self.store.inject_fault(fault);
        Ok(())
    }

    /// Flushes and releases the file. Idempotent.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        let store = &mut self.store;
        py.detach(|| store.close()).map_err(|e| to_py_err(py, e))
    }
}

/// The format and API constants Python shares with the engine, as module attributes:
/// `sessiontree` reads them from here rather than writing them again (ints for numbers,
/// tuples of `str` for sets, in the engine's order).
fn add_constants(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let strs = |names: &[&str]| PyTuple::new(py, names);
    m.add("FORMAT_VERSION", FORMAT_VERSION)?;
    m.add("MAX_ID_BYTES", MAX_ID_BYTES)?;
    m.add("MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES)?;
    m.add("MAX_DEPTH", DEFAULT_MAX_DEPTH)?;
    m.add("ENTRY_TYPES", strs(&ENTRY_TYPES)?)?;
    m.add("MESSAGE_ROLES", strs(&MESSAGE_ROLES)?)?;
    m.add("THINKING_LEVELS", strs(THINKING_LEVELS)?)?;
    m.add("STOP_REASONS", strs(STOP_REASONS)?)?;
    m.add("ERROR_CODES", strs(&ERROR_CODES)?)?;
    m.add("DURABILITY_MODES", strs(&DURABILITY_MODES)?)?;
    m.add("MODEL", model_table(py)?)?;
    Ok(())
}

/// The model table (`engine::model`) as plain tuples: one
/// `(class, tag_key, tag_value, fields)` per type, each field
/// `(key, attr, kind, required, nullable, omit_if_default, arg, default)` where `arg` is
/// the allowed values (`one_of`, `blocks`, `str_or_blocks`) or the nested class name, and
/// `default` the JSON text a missing optional field reads as (`None` when required).
fn model_table(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    use crate::engine::model::{DefaultValue, FieldDef, FieldKind, Presence, TypeDef, Write};

    fn field<'py>(py: Python<'py>, f: &FieldDef) -> PyResult<Bound<'py, PyTuple>> {
        let arg = match f.kind {
            FieldKind::OneOf(names) | FieldKind::Blocks(names) | FieldKind::StrOrBlocks(names) => {
                PyTuple::new(py, names)?.into_any()
            }
            FieldKind::Nested(def) => def.class.into_pyobject(py)?.into_any(),
            _ => py.None().into_bound(py),
        };
        let default = match f.presence {
            Presence::Required => None,
            Presence::Optional(d) => Some(match d {
                DefaultValue::Null => "null".to_owned(),
                DefaultValue::False => "false".to_owned(),
                DefaultValue::True => "true".to_owned(),
                DefaultValue::Zero if matches!(f.kind, FieldKind::Number) => "0.0".to_owned(),
                DefaultValue::Zero => "0".to_owned(),
                DefaultValue::Str(s) => format!("{s:?}"),
                DefaultValue::Empty => "{}".to_owned(),
            }),
        };
        (
            f.key,
            f.attr(),
            f.kind.name(),
            f.required(),
            f.nullable,
            f.write == Write::OmitDefault,
            arg,
            default,
        )
            .into_pyobject(py)
    }

    fn type_def<'py>(py: Python<'py>, def: &TypeDef) -> PyResult<Bound<'py, PyTuple>> {
        let fields = def
            .fields
            .iter()
            .map(|f| field(py, f))
            .collect::<PyResult<Vec<_>>>()?;
        (
            def.class,
            def.tag.map(|(k, _)| k),
            def.tag_value(),
            PyTuple::new(py, fields)?,
        )
            .into_pyobject(py)
    }

    let types = crate::engine::model::MODEL
        .iter()
        .map(|def| type_def(py, def))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, types)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEngine>()?;
    m.add_class::<lazy::LineRef>()?;
    m.add_function(wrap_pyfunction!(_register_error_classes, m)?)?;
    m.add_function(wrap_pyfunction!(build::_register_model, m)?)?;
    m.add_function(wrap_pyfunction!(encode::_register_encoder, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    add_constants(m)
}
