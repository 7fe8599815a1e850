//! JSON text straight to Python objects (dict, list, str, int, float, bool, None), without
//! an intermediate tree: what `json.loads` gives, at a fraction of its cost.

use std::cell::Cell;
use std::fmt;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Builds the Python value of one JSON document.
#[derive(Clone, Copy)]
pub struct Seed<'py, 'f> {
    pub py: Python<'py>,
    /// Set when a number may have been an integer too large for 64 bits: serde_json
    /// reads those as `f64`, while Python's `json` keeps them exact.
    pub inexact: &'f Cell<bool>,
    /// How its strings are made ([`PLAIN`]: each one anew, keys interned).
    pub strings: &'f dyn Strings<'py>,
}

/// How a [`Seed`] makes its strings: a reader of many lines may share the short ones.
pub trait Strings<'py> {
    /// A string value; `borrowed` when it is the text's own bytes (it had no escapes).
    fn value(&self, py: Python<'py>, s: &str, borrowed: bool) -> Bound<'py, PyAny>;
    /// An object key (likewise).
    fn key(&self, py: Python<'py>, s: &str, borrowed: bool) -> Bound<'py, PyString>;
}

/// Each string made anew; keys interned (they repeat on every line: "type", "id", ...,
/// and interned they are shared and compare by pointer in the dict lookups that follow).
pub struct Plain;

/// The [`Strings`] of a plain [`Seed`].
pub const PLAIN: &Plain = &Plain;

impl<'py> Strings<'py> for Plain {
    fn value(&self, py: Python<'py>, s: &str, _borrowed: bool) -> Bound<'py, PyAny> {
        PyString::new(py, s).into_any()
    }
    fn key(&self, py: Python<'py>, s: &str, _borrowed: bool) -> Bound<'py, PyString> {
        PyString::intern(py, s)
    }
}

/// A key of an object a [`Seed`] reads, made by its [`Strings`].
struct KeySeed<'py, 'f>(Python<'py>, &'f dyn Strings<'py>);

impl<'de, 'py> DeserializeSeed<'de> for KeySeed<'py, '_> {
    type Value = Bound<'py, PyString>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, 'py> Visitor<'de> for KeySeed<'py, '_> {
    type Value = Bound<'py, PyString>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(self.1.key(self.0, v, true))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.1.key(self.0, v, false))
    }
}

/// The smallest magnitude at which an integral `f64` may stand for a wider integer.
pub(crate) const WIDE_INT: f64 = 9.223_372_036_854_775e18;

pub fn py_err<E: de::Error>(e: PyErr) -> E {
    E::custom(e.to_string())
}

impl<'de, 'py> DeserializeSeed<'de> for Seed<'py, '_> {
    type Value = Bound<'py, PyAny>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 'py> Visitor<'de> for Seed<'py, '_> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(PyBool::new(self.py, v).to_owned().into_any())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        let Ok(int) = v.into_pyobject(self.py);
        Ok(int.into_any())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        let Ok(int) = v.into_pyobject(self.py);
        Ok(int.into_any())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if v.fract() == 0.0 && v.abs() >= WIDE_INT {
            self.inexact.set(true);
        }
        Ok(PyFloat::new(self.py, v).into_any())
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(self.strings.value(self.py, v, true))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.strings.value(self.py, v, false))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(self.py.None().into_bound(self.py))
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(self.py.None().into_bound(self.py))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let list = PyList::empty(self.py);
        while let Some(item) = seq.next_element_seed(self)? {
            list.append(item).map_err(py_err)?;
        }
        Ok(list.into_any())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let dict = PyDict::new(self.py);
        while let Some(key) = map.next_key_seed(KeySeed(self.py, self.strings))? {
            let value = map.next_value_seed(self)?;
            dict.set_item(key, value).map_err(py_err)?;
        }
        Ok(dict.into_any())
    }
}

/// Parses one JSON text into a Python value, as `json.loads` parses it.
///
/// serde_json reads almost every text; the rare ones it reads otherwise than Python's
/// `json` go to `json.loads` itself: a number that may be an integer wider than 64 bits
/// (serde reads it as a float), and what serde refuses but `json.loads` reads — a lone
/// surrogate escape (`"\ud800"`, which JavaScript's `JSON.stringify` writes), a number
/// past a float's range (`1e400`, infinite) — or refuses too, with its own error (a
/// `ValueError`).
pub fn loads<'py>(py: Python<'py>, text: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    // One UTF-8 check for the whole line, instead of one per string inside it.
    let text = simdutf8::basic::from_utf8(text)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("invalid UTF-8: {e}")))?;
    let inexact = Cell::new(false);
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Seed {
        py,
        inexact: &inexact,
        strings: PLAIN,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    match value {
        Ok(value) if !inexact.get() => Ok(value),
        _ => py.import("json")?.getattr("loads")?.call1((text,)),
    }
}
