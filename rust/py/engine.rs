//! `_core.Engine`: one session's engine (its `Store`) as a Python object, shareable
//! between threads; every method converts engine errors at one point (`to_py_err`),
//! releases the GIL around file work and hands out entries (`build.rs`), dicts or raw
//! lines.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::errors::{changed_line, to_py_err, LineFailure};
use super::shared::Shared;
use super::{build, encode, pyjson, tree};
use crate::engine::arena::{Kind, Role, NONE};
use crate::engine::jsonl::IssueKind;
#[cfg(feature = "test-hooks")]
use crate::engine::store::Fault;
use crate::engine::store::{OpenOptions, DEFAULT_INDEX_MIN_BYTES};
use crate::engine::{Durability, EngineError, ErrorCode, Limits, Store};

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
///
/// Frozen and shareable between threads: the store sits behind a mutex that a call waits
/// for with the GIL released (`shared.rs`), so threads sharing a storage take turns.
#[pyclass(module = "sessiontree._core", name = "Engine", frozen)]
pub struct PyEngine {
    store: Shared<Store>,
    /// Mirrors the store's `closed`, so the check Python makes before every call needs no
    /// lock (and does not wait behind a long append).
    closed: AtomicBool,
}

impl PyEngine {
    fn new(store: Store) -> Self {
        PyEngine {
            closed: AtomicBool::new(store.is_closed()),
            store: Shared::new(store),
        }
    }

    fn idx(store: &Store, py: Python<'_>, id: &str) -> PyResult<u32> {
        store.arena().lookup(id).ok_or_else(|| {
            to_py_err(
                py,
                EngineError::new(
                    crate::engine::ErrorCode::NotFound,
                    format!("entry {id:?} not found"),
                ),
            )
        })
    }

    fn lines_of<'py>(store: &Store, py: Python<'py>, idxs: &[u32]) -> PyResult<Bound<'py, PyList>> {
        let len = store.arena().len();
        if let Some(bad) = idxs.iter().find(|&&i| i as usize >= len) {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "entry index {bad} out of range (0..{len})"
            )));
        }
        let mut out = Vec::with_capacity(idxs.len());
        store
            .for_each_line(idxs, |_, line| -> Result<(), LineFailure> {
                out.push(PyBytes::new(py, line));
                Ok(())
            })
            .map_err(|e| e.into_py(py))?;
        PyList::new(py, out)
    }

    /// Entry `i`'s line as a dict for Python's readers (`line_dict`). The engine checked
    /// this line when it read it: one that no longer parses was rewritten under the store
    /// by another program.
    fn dict_of<'py>(
        store: &Store,
        py: Python<'py>,
        i: u32,
        line: &[u8],
    ) -> PyResult<Bound<'py, PyAny>> {
        line_dict(py, line, store.arena().node(i).parent == NONE).map_err(|e| {
            let what = store
                .path()
                .map_or_else(|| "the session".to_owned(), |p| p.display().to_string());
            changed_line(py, &what, store.arena().id(i), &e)
        })
    }

    fn check_idxs(store: &Store, idxs: &[u32]) -> PyResult<()> {
        let len = store.arena().len();
        match idxs.iter().find(|&&i| i as usize >= len) {
            Some(bad) => Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "entry index {bad} out of range (0..{len})"
            ))),
            None => Ok(()),
        }
    }

    fn objects_of<'py>(
        store: &Store,
        py: Python<'py>,
        idxs: &[u32],
    ) -> PyResult<Bound<'py, PyList>> {
        Self::check_idxs(store, idxs)?;
        let out = PyList::empty(py);
        for &i in idxs {
            let line = store.line(i).map_err(|e| to_py_err(py, e))?;
            out.append(Self::dict_of(store, py, i, &line)?)?;
        }
        Ok(out)
    }

    /// Entries `idxs` as complete entry objects, built by the binding from their lines
    /// (`build.rs`: every type and role of the model table); an entry it cannot build
    /// (an unknown type, a value of the wrong kind) is handed out as the dict of
    /// `objects_of`, for Python's validating reader, and its position listed.
    fn entries_of<'py>(store: &Store, py: Python<'py>, idxs: &[u32]) -> PyResult<Entries<'py>> {
        Self::check_idxs(store, idxs)?;
        let Some(registry) = build::registry() else {
            return Ok((
                Self::objects_of(store, py, idxs)?,
                (0..idxs.len()).collect(),
            ));
        };
        let arena = store.arena();
        let out = PyList::empty(py);
        let mut dicts = Vec::new();
        store
            .for_each_line(idxs, |i, line| -> Result<(), LineFailure> {
                let node = arena.node(i);
                match registry.entry(py, line, node.kind, node.role, node.parent == NONE) {
                    Some(entry) => out.append(entry)?,
                    None => {
                        dicts.push(out.len());
                        out.append(Self::dict_of(store, py, i, line)?)?;
                    }
                }
                Ok(())
            })
            .map_err(|e| e.into_py(py))?;
        Ok((out, dicts))
    }

    /// Indices of the path from the root to `id` (`to_compaction`: cut at the compaction).
    fn path_of(
        store: &Store,
        py: Python<'_>,
        id: Option<&str>,
        to_compaction: bool,
    ) -> PyResult<Vec<u32>> {
        Self::check(store, py)?;
        Ok(match id {
            None => Vec::new(),
            Some(id) => {
                let i = Self::idx(store, py, id)?;
                if to_compaction {
                    store.arena().path_to_root_or_compaction(i)
                } else {
                    store.arena().path_to_root(i)
                }
            }
        })
    }

    /// `closed` after close, `io` once a failed write or sync poisoned the store.
    fn check(store: &Store, py: Python<'_>) -> PyResult<()> {
        store.check_open().map_err(|e| to_py_err(py, e))
    }

    /// `f` on the id and raw line of each entry of `idxs`, in order, as `lines` reads
    /// them but with no `bytes` object per line: for the adapters' bulk readers
    /// (`items_read.rs`), which build their objects straight from the line.
    pub(crate) fn each_line(
        &self,
        py: Python<'_>,
        idxs: &[u32],
        mut f: impl FnMut(&str, &[u8]) -> PyResult<()>,
    ) -> PyResult<()> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        Self::check_idxs(&store, idxs)?;
        let arena = store.arena();
        store
            .for_each_line(idxs, |i, line| -> Result<(), LineFailure> {
                Ok(f(arena.id(i), line)?)
            })
            .map_err(|e| e.into_py(py))
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
        Ok(PyEngine::new(store))
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
        Ok(PyEngine::new(store))
    }

    /// Creates a session file (exclusive, 0600) holding `header` (a sessiontree header; in
    /// `dialect="pi"` it is written as pi's, and so is every entry).
    #[staticmethod]
    #[pyo3(signature = (path, header, durability="group", max_line_bytes=None, max_depth=None, max_id_bytes=None, index=true, index_min_bytes=None, dialect="sessiontree"))]
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
        dialect: &str,
    ) -> PyResult<Self> {
        let dur = Durability::parse(durability).map_err(|e| to_py_err(py, e))?;
        let lim = limits(max_line_bytes, max_depth, max_id_bytes);
        let dialect = match dialect {
            "sessiontree" => crate::engine::Dialect::Native,
            "pi" => crate::engine::Dialect::Pi(3),
            other => {
                return Err(to_py_err(
                    py,
                    EngineError::new(
                        ErrorCode::InvalidArgument,
                        format!("dialect must be \"sessiontree\" or \"pi\", not {other:?}"),
                    ),
                ))
            }
        };
        let mut store = py
            .detach(|| Store::create_in(&path, &header, dur, lim, dialect))
            .map_err(|e| to_py_err(py, e))?;
        store
            .set_index_min_bytes(index.then(|| index_min_bytes.unwrap_or(DEFAULT_INDEX_MIN_BYTES)));
        Ok(PyEngine::new(store))
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
        Ok(PyEngine::new(store))
    }

    /// The header line, in the sessiontree dialect (a pi header translated).
    fn header<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let store = self.store.lock(py)?;
        let header = store.native_header().map_err(|e| to_py_err(py, e))?;
        Ok(PyBytes::new(py, &header))
    }

    /// The header line as the file holds it.
    fn raw_header<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let store = self.store.lock(py)?;
        Ok(PyBytes::new(py, store.header()))
    }

    /// The file's dialect and its format version: `("sessiontree", 3)`, `("pi", 1)`, ...
    #[getter]
    fn dialect(&self, py: Python<'_>) -> PyResult<(&'static str, u8)> {
        let store = self.store.lock(py)?;
        let d = store.dialect();
        Ok((d.name(), d.version()))
    }

    /// Entry `idx`'s line as the file holds it (in the file's dialect).
    fn raw_line<'py>(&self, py: Python<'py>, idx: u32) -> PyResult<Bound<'py, PyBytes>> {
        let store = self.store.lock(py)?;
        if idx as usize >= store.arena().len() {
            return Err(PyIndexError::new_err("index out of range"));
        }
        let line = store.raw_line(idx).map_err(|e| to_py_err(py, e))?;
        Ok(PyBytes::new(py, &line))
    }

    /// The session id.
    #[getter]
    fn session_id(&self, py: Python<'_>) -> PyResult<String> {
        let store = self.store.lock(py)?;
        Ok(store.session_id().to_owned())
    }

    /// The file path, or None for memory engines.
    #[getter]
    fn path(&self, py: Python<'_>) -> PyResult<Option<PathBuf>> {
        let store = self.store.lock(py)?;
        Ok(store.path().map(PathBuf::from))
    }

    /// True after close().
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// True for a read-only file engine.
    #[getter]
    fn readonly(&self, py: Python<'_>) -> PyResult<bool> {
        let store = self.store.lock(py)?;
        Ok(store.is_readonly())
    }

    /// Bytes of the session document.
    #[getter]
    fn byte_len(&self, py: Python<'_>) -> PyResult<u64> {
        let store = self.store.lock(py)?;
        Ok(store.byte_len())
    }

    /// What happened to the persisted index at open: unused, loaded, created or rebuilt.
    #[getter]
    fn index_status(&self, py: Python<'_>) -> PyResult<&'static str> {
        let store = self.store.lock(py)?;
        Ok(store.index_status().as_str())
    }

    /// Where a writer open saved a torn tail.
    #[getter]
    fn torn_path(&self, py: Python<'_>) -> PyResult<Option<PathBuf>> {
        let store = self.store.lock(py)?;
        Ok(store.torn_path().map(PathBuf::from))
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        Ok(store.arena().len())
    }

    /// The whole document of a memory engine.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let store = self.store.lock(py)?;
        Ok(store.memory_bytes().map(|b| PyBytes::new(py, b)))
    }

    /// (issues as (line, offset, kind, message) tuples, torn_tail_bytes, (kind, count)
    /// of every issue found, kept or not; kinds never found left out).
    #[allow(clippy::type_complexity)]
    fn report(
        &self,
        py: Python<'_>,
    ) -> PyResult<(
        Vec<(u64, u64, &'static str, String)>,
        u64,
        Vec<(&'static str, u64)>,
    )> {
        let store = self.store.lock(py)?;
        let r = store.report();
        let issues = r
            .issues
            .iter()
            .map(|i| (i.line, i.offset, i.kind.as_str(), i.message.clone()))
            .collect();
        let counts = IssueKind::ALL
            .iter()
            .map(|k| (k.as_str(), r.counts[*k as usize]))
            .filter(|(_, n)| *n > 0)
            .collect();
        Ok((issues, r.torn_tail_bytes, counts))
    }

    /// The current leaf's index, or None.
    fn leaf(&self, py: Python<'_>) -> PyResult<Option<u32>> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        Ok(opt_idx(store.arena().leaf()))
    }

    /// The index of `id`, or None.
    fn lookup(&self, py: Python<'_>, id: &str) -> PyResult<Option<u32>> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        Ok(store.arena().lookup(id))
    }

    /// The id of entry `idx`.
    fn id_of(&self, py: Python<'_>, idx: u32) -> PyResult<String> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        if idx as usize >= store.arena().len() {
            return Err(PyRuntimeError::new_err("index out of range"));
        }
        Ok(store.arena().id(idx).to_owned())
    }

    /// (type, role, parent index, target index, line number) of entry `idx`.
    #[allow(clippy::type_complexity)]
    fn info(
        &self,
        py: Python<'_>,
        idx: u32,
    ) -> PyResult<(
        &'static str,
        Option<&'static str>,
        Option<u32>,
        Option<u32>,
        u64,
    )> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        if idx as usize >= store.arena().len() {
            return Err(PyRuntimeError::new_err("index out of range"));
        }
        let n = store.arena().node(idx);
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
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        match store.arena().lookup(id) {
            None => Ok(None),
            Some(i) => {
                let line = store.line(i).map_err(|e| to_py_err(py, e))?;
                Ok(Some(PyBytes::new(py, &line)))
            }
        }
    }

    /// Entries `idxs` as objects built by the binding, or dicts where Python builds them.
    fn entries<'py>(&self, py: Python<'py>, idxs: Vec<u32>) -> PyResult<Entries<'py>> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        Self::entries_of(&store, py, &idxs)
    }

    /// The path from the root to `id` as `entries` gives them (`to_compaction`: cut at the
    /// compaction).
    fn path_entries<'py>(
        &self,
        py: Python<'py>,
        id: Option<&str>,
        to_compaction: bool,
    ) -> PyResult<Entries<'py>> {
        let store = self.store.lock(py)?;
        let idxs = Self::path_of(&store, py, id, to_compaction)?;
        Self::entries_of(&store, py, &idxs)
    }

    /// The raw lines of entries `idxs`.
    fn lines<'py>(&self, py: Python<'py>, idxs: Vec<u32>) -> PyResult<Bound<'py, PyList>> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        Self::lines_of(&store, py, &idxs)
    }

    /// Raw lines of the path from the root to `id` (empty for None).
    fn path_to_root<'py>(&self, py: Python<'py>, id: Option<&str>) -> PyResult<Bound<'py, PyList>> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        let path = match id {
            None => Vec::new(),
            Some(id) => store.arena().path_to_root(Self::idx(&store, py, id)?),
        };
        Self::lines_of(&store, py, &path)
    }

    /// Raw lines of the path to the root or the nearest compaction's cut (FORMAT.md).
    fn path_to_root_or_compaction<'py>(
        &self,
        py: Python<'py>,
        id: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        let path = match id {
            None => Vec::new(),
            Some(id) => store
                .arena()
                .path_to_root_or_compaction(Self::idx(&store, py, id)?),
        };
        Self::lines_of(&store, py, &path)
    }

    /// Indices of the path to the root or compaction cut.
    fn path_indices(
        &self,
        py: Python<'_>,
        id: Option<&str>,
        to_compaction: bool,
    ) -> PyResult<Vec<u32>> {
        let store = self.store.lock(py)?;
        Self::path_of(&store, py, id, to_compaction)
    }

    /// The entries that set thinking level, model and active tools on the path to `id`:
    /// raw lines of the nearest of each (None where absent).
    fn state_lines<'py>(&self, py: Python<'py>, id: Option<&str>) -> PyResult<Bound<'py, PyList>> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        let arena = store.arena();
        let mut found = [NONE; 3];
        let mut cur = match id {
            None => NONE,
            Some(id) => Self::idx(&store, py, id)?,
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
                    &store.line(f).map_err(|e| to_py_err(py, e))?,
                ))
            });
        }
        PyList::new(py, out)
    }

    /// Child indices of `id` in file order (roots for None).
    fn children(&self, py: Python<'_>, id: Option<&str>) -> PyResult<Vec<u32>> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        let parent = match id {
            None => NONE,
            Some(id) => Self::idx(&store, py, id)?,
        };
        Ok(store.arena().children(parent).collect())
    }

    /// The tree's root `TreeNode`s (file order), made from `entries` (every entry, in file
    /// order, as `entries` handed them out and Python's readers finished them).
    fn tree<'py>(
        &self,
        py: Python<'py>,
        entries: &Bound<'py, PyList>,
    ) -> PyResult<Bound<'py, PyList>> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        let registry = build::registry();
        let class = registry
            .as_ref()
            .and_then(|r| r.tree_node.as_ref())
            .ok_or_else(|| PyTypeError::new_err("TreeNode is not registered"))?;
        tree::build(py, class, store.arena(), entries)
    }

    /// Parent index of every entry (-1 for roots), in file order.
    fn parents(&self, py: Python<'_>) -> PyResult<Vec<i64>> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        let a = store.arena();
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
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        Ok(store.arena().find(type_name))
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
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        let a = store.arena();
        let start = match since {
            None => 0,
            Some(id) => Self::idx(&store, py, id)? + 1,
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
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        let a = store.arena();
        Ok(a.lookup(id).and_then(|i| a.label(i)).map(str::to_owned))
    }

    /// Every label as {entry id: label}.
    fn labels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        let a = store.arena();
        let d = PyDict::new(py);
        for (i, label) in a.labels() {
            d.set_item(a.id(i), label)?;
        }
        Ok(d)
    }

    /// The session name.
    fn name(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        Ok(store.arena().name().map(str::to_owned))
    }

    /// The newest entry timestamp.
    fn newest_timestamp(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        Ok(store.arena().newest_timestamp().map(str::to_owned))
    }

    /// (entry, message, user, assistant, tool_result counts, input, output, cache_read,
    /// cache_write, total_tokens, cost_total).
    #[allow(clippy::type_complexity)]
    fn stats(
        &self,
        py: Python<'_>,
    ) -> PyResult<(u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, f64)> {
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        let s = store.arena().stats();
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
        let store = self.store.lock(py)?;
        Self::check(&store, py)?;
        Ok(store.create_entry_id())
    }

    /// Appends one entry line; returns its index.
    fn append(&self, py: Python<'_>, line: &[u8]) -> PyResult<u32> {
        let mut held = self.store.lock(py)?;
        let store: &mut Store = &mut held;
        py.detach(|| store.append(line))
            .map_err(|e| to_py_err(py, e))
    }

    /// Appends entry lines as one unit (`Store::append_batch`): every line checked, its
    /// references resolved against the arena and the batch's earlier lines, before any is
    /// written; then one write; returns their indices. Nothing is written on an error.
    fn append_lines(&self, py: Python<'_>, lines: Vec<Bound<'_, PyBytes>>) -> PyResult<Vec<u32>> {
        let lines: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
        let mut held = self.store.lock(py)?;
        let store: &mut Store = &mut held;
        py.detach(|| store.append_batch(&lines))
            .map_err(|e| to_py_err(py, e))
    }

    /// Appends an entry object: its line is encoded from the model (`encode.rs`), then
    /// checked and written as `append` does; returns its index.
    fn append_entry(&self, py: Python<'_>, entry: &Bound<'_, PyAny>) -> PyResult<u32> {
        let mut held = self.store.lock(py)?;
        encode::append_entry(py, &mut held, entry)
    }

    /// Appends `message` in a new message entry under the leaf (a fresh id, the time now)
    /// and returns the `MessageEntry`; None, appending nothing, when `message` is not
    /// exactly one of the model's message classes.
    fn append_message<'py>(
        &self,
        py: Python<'py>,
        message: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut held = self.store.lock(py)?;
        encode::append_message(py, &mut held, message)
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
        let held = self.store.lock(py)?;
        let source: &Store = &held;
        let store = py
            .detach(|| source.fork_to(&path, &header, &kept, &parents, &extras, opts))
            .map_err(|e| to_py_err(py, e))?;
        Ok(PyEngine::new(store))
    }

    /// Writes buffered appends and syncs.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let mut held = self.store.lock(py)?;
        let store: &mut Store = &mut held;
        py.detach(|| store.flush()).map_err(|e| to_py_err(py, e))
    }

    /// Picks up lines appended by another writer (read-only engines).
    fn refresh(&self, py: Python<'_>) -> PyResult<usize> {
        let mut held = self.store.lock(py)?;
        let store: &mut Store = &mut held;
        py.detach(|| store.refresh()).map_err(|e| to_py_err(py, e))
    }

    /// Test hook: the next write ("write") or sync ("sync") fails with `errno`; None clears.
    ///
    /// Present only in builds with the `test-hooks` feature (the dev build).
    #[cfg(feature = "test-hooks")]
    #[pyo3(signature = (kind=None, errno=5))]
    fn inject_fault(&self, py: Python<'_>, kind: Option<&str>, errno: i32) -> PyResult<()> {
        let mut store = self.store.lock(py)?;
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
        store.inject_fault(fault);
        Ok(())
    }

    /// Test hook: whether the writer has its change watch; `keep=False` drops it first.
    ///
    /// Present only in builds with the `test-hooks` feature (the dev build).
    #[cfg(feature = "test-hooks")]
    #[pyo3(signature = (keep=true))]
    fn change_watch(&self, py: Python<'_>, keep: bool) -> PyResult<bool> {
        Ok(self.store.lock(py)?.change_watch(keep))
    }

    /// Flushes and releases the file. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let mut held = self.store.lock(py)?;
        let store: &mut Store = &mut held;
        let result = py.detach(|| store.close());
        self.closed.store(store.is_closed(), Ordering::Release);
        result.map_err(|e| to_py_err(py, e))
    }
}
