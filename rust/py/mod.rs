//! The PyO3 binding: a thin wrapper exposing the engine to `sessiontree` as `_core`.
//!
//! Arguments are checked in Python; this module converts engine errors at one point
//! (`to_py_err`), releases the GIL around file work and hands out raw lines as `bytes`.
//!
//! The binding never imports the package above it: `sessiontree.errors` hands its
//! exception classes to `_register_error_classes` once, at import, and `to_py_err` only
//! looks them up.

mod build;
mod constants;
mod copy;
mod encode;
mod engine;
mod errors;
mod items;
mod items_read;
mod pyjson;
mod search;
mod shared;
mod slots;
mod tree;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

pub use engine::PyEngine;
use errors::{_register_error_classes, to_py_err};

/// pi's spelling of a sessiontree name (a key, a message role, a block type):
/// `"tool_result"` → `"toolResult"`.
#[pyfunction]
fn pi_name(name: &str) -> String {
    crate::engine::dialect::camel(name).into_owned()
}

/// Translates a whole session document (header first) into `to` (`"pi"` or
/// `"sessiontree"`), line by line; blank lines are dropped, a line that cannot be read is
/// an error (`corrupt`) naming it. `from_dialect` is the document's own dialect, told as a
/// file's would be.
#[pyfunction]
fn convert_lines<'py>(py: Python<'py>, data: &[u8], to: &str) -> PyResult<Bound<'py, PyBytes>> {
    let out = crate::engine::dialect::convert_document(data, to).map_err(|e| to_py_err(py, e))?;
    Ok(PyBytes::new(py, &out))
}

/// Parses one JSON text (what `json.loads` gives), so the package's import-time and
/// open-time reads of small JSON texts need not import Python's `json` (and `re` under it).
#[pyfunction]
fn json_loads<'py>(py: Python<'py>, text: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    pyjson::loads(py, text)
}

// The module needs the GIL (`gil_used = true`, PyO3's default, said here on purpose): the
// engine is behind a mutex, but the model objects the binding fills, the registry's class
// references and the error classes are only known safe with the GIL held, and no
// free-threaded CPython has run the thread tests here. A free-threaded interpreter
// therefore turns the GIL back on when it imports `_core`.
#[pymodule(gil_used = true)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEngine>()?;
    m.add_function(wrap_pyfunction!(_register_error_classes, m)?)?;
    m.add_function(wrap_pyfunction!(pi_name, m)?)?;
    m.add_function(wrap_pyfunction!(convert_lines, m)?)?;
    m.add_function(wrap_pyfunction!(json_loads, m)?)?;
    m.add_function(wrap_pyfunction!(copy::copy_json, m)?)?;
    m.add_function(wrap_pyfunction!(copy::copy_json_items, m)?)?;
    m.add_function(wrap_pyfunction!(items::openai_item_lines, m)?)?;
    m.add_function(wrap_pyfunction!(items_read::openai_items_of_lines, m)?)?;
    m.add_function(wrap_pyfunction!(items_read::openai_read_known, m)?)?;
    m.add_function(wrap_pyfunction!(items_read::openai_view_extend, m)?)?;
    m.add_function(wrap_pyfunction!(items_read::custom_data_of_lines, m)?)?;
    m.add_function(wrap_pyfunction!(build::_register_model, m)?)?;
    m.add_function(wrap_pyfunction!(encode::_register_writer, m)?)?;
    m.add_function(wrap_pyfunction!(encode::to_json, m)?)?;
    m.add_function(wrap_pyfunction!(encode::to_dict, m)?)?;
    m.add_function(wrap_pyfunction!(encode::reparent_line, m)?)?;
    search::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    constants::add_constants(m)
}
