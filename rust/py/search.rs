//! The search binding: the tokeniser, the parsed query and the scan, for
//! `sessiontree.search` (which checks the arguments).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::engine::jsonl::DEFAULT_MAX_LINE_BYTES;
use crate::engine::search::branch::LineLimits;
use crate::engine::search::{Doc, Filters, Order, Query, Searcher, Source};
use crate::engine::types::MAX_ID_BYTES;

use super::to_py_err;

/// The tokens of `text`, lowercased, in order: what the index and PostgreSQL store.
#[pyfunction]
fn search_tokens(text: &str) -> Vec<String> {
    crate::engine::search::tokens::token_texts(text)
}

/// The terms of a query: `(tokens, prefix, negated)` each; `invalid_argument` for a bad
/// query.
#[pyfunction]
fn search_terms(py: Python<'_>, query: &str) -> PyResult<Vec<(Vec<String>, bool, bool)>> {
    let q = Query::parse(query).map_err(|e| to_py_err(py, e))?;
    Ok(q.terms
        .into_iter()
        .map(|t| (t.tokens, t.prefix, t.negated))
        .collect())
}

/// One hit: (document index, session id, entry id, entry type, role, timestamp, score,
/// snippet, marks, on its current branch (`None`: the scan could not tell)).
type HitTuple = (
    usize,
    String,
    String,
    String,
    Option<String>,
    String,
    f64,
    String,
    Vec<(usize, usize)>,
    Option<bool>,
);

/// Searches session documents: `sources` are `(session id, path or bytes)`, each a
/// session's header then its lines (all of them when `whole`: then a hit says whether it
/// is on its current branch when the lines tell it, read with the reader's limits
/// `max_line_bytes` and `max_id_bytes`). Returns the best `limit` hits (all with `None`), best
/// first.
#[pyfunction]
#[pyo3(signature = (query, sources, *, roles=None, types=None, since_ms=None, until_ms=None, newest=false, limit=None, threads=0, whole=false, max_line_bytes=None, max_id_bytes=None))]
#[allow(clippy::too_many_arguments)]
fn search_documents(
    py: Python<'_>,
    query: &str,
    sources: Vec<(String, Bound<'_, PyAny>)>,
    roles: Option<Vec<String>>,
    types: Option<Vec<String>>,
    since_ms: Option<i64>,
    until_ms: Option<i64>,
    newest: bool,
    limit: Option<usize>,
    threads: usize,
    whole: bool,
    max_line_bytes: Option<usize>,
    max_id_bytes: Option<usize>,
) -> PyResult<Vec<HitTuple>> {
    let filters = Filters {
        roles,
        types,
        since_ms,
        until_ms,
    };
    let mut searcher = Searcher::new(query, filters).map_err(|e| to_py_err(py, e))?;
    if whole {
        searcher = searcher.whole_documents(line_limits(max_line_bytes, max_id_bytes));
    }
    let mut docs = Vec::with_capacity(sources.len());
    for (session_id, src) in sources {
        let source = if let Ok(b) = src.cast::<PyBytes>() {
            Source::Bytes(b.as_bytes().to_vec())
        } else {
            Source::Path(src.extract::<PathBuf>()?)
        };
        docs.push(Doc { session_id, source });
    }
    let order = if newest {
        Order::Newest
    } else {
        Order::Relevance
    };
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    } else {
        threads
    };
    let hits = py.detach(|| searcher.run(&docs, order, limit, threads));
    Ok(hits
        .into_iter()
        .map(|h| {
            (
                h.doc,
                h.session_id,
                h.entry_id,
                h.entry_type,
                h.role,
                h.timestamp,
                h.score,
                h.snippet,
                h.marks,
                h.on_branch,
            )
        })
        .collect())
}

/// Which of the given entry ids are on their session file's current branch, for each
/// `(path, ids)`, read from the file's lines with the reader's limits (`None` where the
/// lines do not tell: the caller asks the reader).
#[pyfunction]
#[pyo3(signature = (files, *, max_line_bytes=None, max_id_bytes=None, threads=0))]
fn search_branch_members(
    py: Python<'_>,
    files: Vec<(PathBuf, Vec<String>)>,
    max_line_bytes: Option<usize>,
    max_id_bytes: Option<usize>,
    threads: usize,
) -> Vec<Option<Vec<bool>>> {
    let limits = line_limits(max_line_bytes, max_id_bytes);
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    } else {
        threads
    };
    py.detach(|| crate::engine::search::branch::files_members(&files, limits, threads))
}

fn line_limits(max_line_bytes: Option<usize>, max_id_bytes: Option<usize>) -> LineLimits {
    LineLimits {
        max_line_bytes: max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES),
        max_id_bytes: max_id_bytes.unwrap_or(MAX_ID_BYTES),
    }
}

/// Adds the search functions to `_core`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(search_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(search_terms, m)?)?;
    m.add_function(wrap_pyfunction!(search_documents, m)?)?;
    m.add_function(wrap_pyfunction!(search_entry_texts, m)?)?;
    m.add_function(wrap_pyfunction!(search_extract, m)?)?;
    m.add_function(wrap_pyfunction!(search_line_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(search_branch_members, m)?)?;
    Ok(())
}

/// `(type, id, timestamp, role, texts)` of an entry.
type EntryTexts = (String, String, String, Option<String>, Vec<String>);
/// `(end offset, header line, legacy, [(offset, length, tokens)])` of a file.
type ExtractTuple = (u64, Vec<u8>, bool, Vec<(u64, u64, String)>);

/// The searched facts of one entry line (sessiontree's dialect): `(type, id, timestamp,
/// role, texts)`, or `None` for a line that is not an entry.
#[pyfunction]
fn search_entry_texts(line: &str) -> Option<EntryTexts> {
    crate::engine::search::entry::entry_text(line).map(|e| {
        let texts = e.texts.into_iter().map(|t| t.into_owned()).collect();
        (e.entry_type, e.id, e.timestamp, e.role, texts)
    })
}

/// What the search index stores of file `path` from byte `start`: `(end offset, header
/// line, legacy, [(offset, length, tokens joined by spaces)])`.
#[pyfunction]
fn search_extract(py: Python<'_>, path: PathBuf, start: u64) -> PyResult<ExtractTuple> {
    let x = py
        .detach(|| crate::engine::search::extract::extract(&path, start))
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?;
    Ok((x.end, x.header, x.legacy, x.rows))
}

/// [`line_tokens`](crate::engine::search::extract::line_tokens) of each line: what
/// PostgreSQL's search column holds.
#[pyfunction]
fn search_line_tokens(py: Python<'_>, lines: Vec<Vec<u8>>, pi: bool) -> Vec<String> {
    py.detach(|| {
        lines
            .iter()
            .map(|l| crate::engine::search::extract::line_tokens(l, pi))
            .collect()
    })
}
