//! Engine errors as Python exceptions: the `SessionError` subclass of each code, which
//! `sessiontree.errors` registers once (the binding never imports the package), and the
//! one conversion every call goes through (`to_py_err`).

use std::sync::Mutex;

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyMapping, PyType};

use crate::engine::{EngineError, ErrorCode};

/// The `SessionError` subclass of each code, in `ErrorCode::ALL` order; registered once by
/// `sessiontree.errors` (a reload registers again and replaces them).
static ERROR_CLASSES: Mutex<Vec<Py<PyType>>> = Mutex::new(Vec::new());

/// Stores the exception class of every error code: `base` is `SessionError`, `by_code`
/// maps each code to its subclass (a missing code falls back to `base`).
#[pyfunction]
pub(super) fn _register_error_classes(
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
pub(super) fn to_py_err(py: Python<'_>, e: EngineError) -> PyErr {
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

/// The error for a line that no longer parses as it did when the engine read it.
pub(super) fn changed_line(py: Python<'_>, what: &str, id: &str, e: &PyErr) -> PyErr {
    to_py_err(
        py,
        EngineError::new(
            ErrorCode::ModifiedExternally,
            format!(
                "{what} was changed by another program since it was read: the line of \
                 entry {id:?} no longer parses ({e}); reopen it"
            ),
        ),
    )
}

/// What a callback over the engine's lines may fail with: the engine's error (reading a
/// line) or a Python exception (building its value).
pub(super) enum LineFailure {
    Engine(EngineError),
    Py(PyErr),
}

impl From<EngineError> for LineFailure {
    fn from(e: EngineError) -> Self {
        LineFailure::Engine(e)
    }
}

impl From<PyErr> for LineFailure {
    fn from(e: PyErr) -> Self {
        LineFailure::Py(e)
    }
}

impl LineFailure {
    pub(super) fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            LineFailure::Engine(e) => to_py_err(py, e),
            LineFailure::Py(e) => e,
        }
    }
}
