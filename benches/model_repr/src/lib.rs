//! Issue 26, item 2: one model type built two ways from the same Rust data, measured side by
//! side: a `#[pyclass(frozen)]` holding its fields, and the project's frozen slotted
//! dataclass filled slot by slot (`tp_alloc`, then each slot descriptor's `__set__`, as
//! `rust/py/slots.rs` does).

use std::os::raw::c_void;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple, PyType};

#[pyclass(frozen, module = "model_repr", get_all)]
struct PcText {
    text: Py<PyString>,
    signature: Option<Py<PyString>>,
}

#[pyclass(frozen, module = "model_repr", get_all)]
struct PcAssistant {
    content: Py<PyTuple>,
    provider: Py<PyString>,
    model: Py<PyString>,
    api: Option<Py<PyString>>,
    usage: Py<PyAny>,
    stop_reason: Py<PyString>,
    error_message: Option<Py<PyString>>,
    timestamp: i64,
}

struct Filler {
    cls: Py<PyType>,
    alloc: ffi::allocfunc,
    setters: Vec<(Py<PyAny>, ffi::descrsetfunc)>,
}

impl Filler {
    fn new(cls: &Bound<'_, PyType>, names: &[&str]) -> PyResult<Self> {
        // SAFETY: reading the type's own slots.
        let alloc = unsafe { ffi::PyType_GetSlot(cls.as_type_ptr(), ffi::Py_tp_alloc) };
        let mut setters = Vec::new();
        for name in names {
            let descr = cls.getattr(*name)?;
            let ty = descr.get_type();
            let set = unsafe { ffi::PyType_GetSlot(ty.as_type_ptr(), ffi::Py_tp_descr_set) };
            setters.push((descr.unbind(), unsafe {
                std::mem::transmute::<*mut c_void, ffi::descrsetfunc>(set)
            }));
        }
        Ok(Filler {
            cls: cls.clone().unbind(),
            alloc: unsafe { std::mem::transmute::<*mut c_void, ffi::allocfunc>(alloc) },
            setters,
        })
    }

    fn make<'py>(
        &self,
        py: Python<'py>,
        values: &[Bound<'py, PyAny>],
    ) -> PyResult<Bound<'py, PyAny>> {
        let obj = unsafe {
            Bound::from_owned_ptr_or_err(py, (self.alloc)(self.cls.bind(py).as_type_ptr(), 0))?
        };
        for ((descr, set), v) in self.setters.iter().zip(values) {
            if unsafe { set(descr.as_ptr(), obj.as_ptr(), v.as_ptr()) } != 0 {
                return Err(PyErr::fetch(py));
            }
        }
        Ok(obj)
    }
}

fn texts(i: usize) -> (String, String) {
    (
        format!(
            "Turn {i}: the answer, with a few sentences of text about module {}.",
            i % 97
        ),
        format!("{}", i % 13),
    )
}

/// `n` assistant messages of one text block each, as `#[pyclass(frozen)]` values.
#[pyfunction]
fn build_pyclass<'py>(
    py: Python<'py>,
    n: usize,
    usage: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for i in 0..n {
        let (text, model) = texts(i);
        let block = Bound::new(
            py,
            PcText {
                text: PyString::new(py, &text).unbind(),
                signature: None,
            },
        )?;
        let msg = PcAssistant {
            content: PyTuple::new(py, [block])?.unbind(),
            provider: PyString::new(py, "anthropic").unbind(),
            model: PyString::new(py, &model).unbind(),
            api: None,
            usage: usage.clone().unbind(),
            stop_reason: PyString::new(py, "stop").unbind(),
            error_message: None,
            timestamp: 1_700_000_000_000 + i as i64,
        };
        out.append(Bound::new(py, msg)?)?;
    }
    Ok(out)
}

/// The same messages as the project's dataclasses, filled slot by slot.
#[pyfunction]
fn build_dataclass<'py>(
    py: Python<'py>,
    n: usize,
    usage: Bound<'py, PyAny>,
    text_cls: Bound<'py, PyType>,
    msg_cls: Bound<'py, PyType>,
) -> PyResult<Bound<'py, PyList>> {
    let tf = Filler::new(&text_cls, &["_extra", "text", "signature"])?;
    let mf = Filler::new(
        &msg_cls,
        &[
            "_extra",
            "content",
            "provider",
            "model",
            "api",
            "usage",
            "stop_reason",
            "error_message",
            "timestamp",
        ],
    )?;
    let none = py.None().into_bound(py);
    let out = PyList::empty(py);
    for i in 0..n {
        let (text, model) = texts(i);
        let block = tf.make(
            py,
            &[
                none.clone(),
                PyString::new(py, &text).into_any(),
                none.clone(),
            ],
        )?;
        let msg = mf.make(
            py,
            &[
                none.clone(),
                PyTuple::new(py, [block])?.into_any(),
                PyString::new(py, "anthropic").into_any(),
                PyString::new(py, &model).into_any(),
                none.clone(),
                usage.clone(),
                PyString::new(py, "stop").into_any(),
                none.clone(),
                (1_700_000_000_000 + i as i64).into_pyobject(py)?.into_any(),
            ],
        )?;
        out.append(msg)?;
    }
    Ok(out)
}

#[pymodule]
fn model_repr(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PcText>()?;
    m.add_class::<PcAssistant>()?;
    m.add_function(wrap_pyfunction!(build_pyclass, m)?)?;
    m.add_function(wrap_pyfunction!(build_dataclass, m)?)?;
    Ok(())
}
