//! The constants and the model table Python shares with the engine, as `_core`'s module
//! attributes: `sessiontree` reads them from here rather than writing them again.

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::engine::arena::{ENTRY_TYPES, MESSAGE_ROLES};
use crate::engine::error::ERROR_CODES;
use crate::engine::jsonl::{
    DEFAULT_MAX_DEPTH, DEFAULT_MAX_LINE_BYTES, DURABILITY_MODES, MAX_REPORTED_ISSUES,
};
use crate::engine::line::{FORMAT_VERSION, MAX_ID_BYTES};
use crate::engine::model::{STOP_REASONS, THINKING_LEVELS};

/// The format and API constants Python shares with the engine, as module attributes:
/// `sessiontree` reads them from here rather than writing them again (ints for numbers,
/// tuples of `str` for sets, in the engine's order).
pub(super) fn add_constants(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let strs = |names: &[&str]| PyTuple::new(py, names);
    m.add("FORMAT_VERSION", FORMAT_VERSION)?;
    m.add("MAX_ID_BYTES", MAX_ID_BYTES)?;
    m.add("MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES)?;
    m.add("MAX_DEPTH", DEFAULT_MAX_DEPTH)?;
    m.add("MAX_REPORTED_ISSUES", MAX_REPORTED_ISSUES)?;
    m.add("ENTRY_TYPES", strs(&ENTRY_TYPES)?)?;
    m.add("MESSAGE_ROLES", strs(&MESSAGE_ROLES)?)?;
    m.add("THINKING_LEVELS", strs(THINKING_LEVELS)?)?;
    m.add("STOP_REASONS", strs(STOP_REASONS)?)?;
    m.add("ERROR_CODES", strs(&ERROR_CODES)?)?;
    m.add("DURABILITY_MODES", strs(&DURABILITY_MODES)?)?;
    m.add("MODEL", model_table(py)?)?;
    m.add("PI_LEAF_MARKER", crate::engine::dialect::LEAF_MARKER)?;
    // Whether this build uses the OS layer's Linux-only speed-ups (false: the portable
    // path, as on macOS and Windows or with the `portable` feature).
    m.add("LINUX_FAST", crate::engine::sys::LINUX_FAST)?;
    Ok(())
}

/// The model table (`engine::model`) as plain tuples: one
/// `(class, tag_key, tag_value, fields, params)` per type (`params`: the constructor's
/// positional order where it is not the rule, else `None`), each field
/// `(key, attr, kind, required, nullable, omit_if_default, arg, default, rule, ctor_default)`
/// where `arg` is the allowed values (`one_of`, `blocks`, `str_or_blocks`) or the nested
/// class name, `default` the JSON text a missing optional field reads as (`None` when
/// required), `rule` what a constructor refuses beyond the kind (`model::Rule`) and
/// `ctor_default` what a constructor gives a required field (`model::CtorDefault`).
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
            f.rule.name(),
            f.ctor_default.name(),
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
            def.params.map(|p| PyTuple::new(py, p)).transpose()?,
        )
            .into_pyobject(py)
    }

    let types = crate::engine::model::MODEL
        .iter()
        .map(|def| type_def(py, def))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, types)
}
