//! The OpenAI adapter's batch writer: the SDK's response items (plain dicts) straight to
//! sessiontree entry lines, with no message objects in between.
//!
//! For each item it writes the line `sessiontree.adapters.openai_agents` would get from
//! its message (`item_to_message`, then the engine's encoder): the same fields in the same
//! order, the item's other keys kept beside the message (the residual), so the line reads
//! back as the item exactly. It writes only the shapes whose read-back it can vouch for
//! by construction (a user message with text content, an assistant message of output text
//! or refusals, a reasoning item with a summary, a function call, a function call output
//! with text output) made of exactly the types `json.loads` gives; any other item, or
//! one holding anything else (a tuple, a subclass, a wide int, NaN, a lone surrogate), is
//! declined (`None`), for the adapter's Python path to map, check and refuse as it does.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};

use crate::engine::json_text::{push_f64, push_i64, push_str};

/// An item this writer leaves to the Python path (the error, if any, is dropped: the
/// Python path meets it again and raises it as the adapter does).
pub(super) struct Decline;

impl From<PyErr> for Decline {
    fn from(_: PyErr) -> Self {
        Decline
    }
}

type W = Result<(), Decline>;

/// Deeper values are left to the Python path (which applies the engine's own limit).
const MOST_DEPTH: usize = 64;

const USAGE: &[u8] = br#""usage":{"input":0,"output":0,"cache_read":0,"cache_write":0,"total_tokens":0,"cost":{"input":0.0,"output":0.0,"cache_read":0.0,"cache_write":0.0,"total":0.0}}"#;

pub(super) fn text<'a>(v: &'a Bound<'_, PyAny>) -> Result<&'a str, Decline> {
    Ok(v.cast_exact::<PyString>().map_err(|_| Decline)?.to_str()?)
}

fn get<'py>(d: &Bound<'py, PyDict>, key: &str) -> Result<Option<Bound<'py, PyAny>>, Decline> {
    Ok(d.get_item(key)?)
}

/// A JSON value made of exactly the types `json.loads` gives, as `json.dumps` writes it.
fn value(out: &mut Vec<u8>, v: &Bound<'_, PyAny>, depth: usize) -> W {
    if v.is_none() {
        out.extend_from_slice(b"null");
    } else if let Ok(b) = v.cast_exact::<PyBool>() {
        out.extend_from_slice(if b.is_true() { b"true" } else { b"false" });
    } else if let Ok(s) = v.cast_exact::<PyString>() {
        push_str(out, s.to_str()?);
    } else if let Ok(i) = v.cast_exact::<PyInt>() {
        push_i64(out, i.extract::<i64>()?);
    } else if let Ok(f) = v.cast_exact::<PyFloat>() {
        if !push_f64(out, f.value()) {
            return Err(Decline);
        }
    } else if let Ok(l) = v.cast_exact::<PyList>() {
        if depth >= MOST_DEPTH {
            return Err(Decline);
        }
        out.push(b'[');
        for (k, x) in l.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            value(out, &x, depth + 1)?;
        }
        out.push(b']');
    } else if let Ok(d) = v.cast_exact::<PyDict>() {
        if depth >= MOST_DEPTH {
            return Err(Decline);
        }
        object(out, d, depth, &[])?;
    } else {
        return Err(Decline);
    }
    Ok(())
}

/// What a residual holds in place of a key the message holds.
enum Put<'a> {
    Null,
    Raw(&'a [u8]),
    Blocks(&'a [Vec<u8>]),
}

/// A dict as `json.dumps` writes it (exact `str` keys only), with the values of the keys
/// in `put` replaced.
fn object(out: &mut Vec<u8>, d: &Bound<'_, PyDict>, depth: usize, put: &[(&str, Put<'_>)]) -> W {
    out.push(b'{');
    for (k, (key, x)) in d.iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        let key = text(&key)?;
        push_str(out, key);
        out.push(b':');
        match put.iter().find(|(name, _)| *name == key) {
            None => value(out, &x, depth + 1)?,
            Some((_, Put::Null)) => out.extend_from_slice(b"null"),
            Some((_, Put::Raw(raw))) => out.extend_from_slice(raw),
            Some((_, Put::Blocks(blocks))) => {
                out.push(b'[');
                for (n, b) in blocks.iter().enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b);
                }
                out.push(b']');
            }
        }
    }
    out.push(b'}');
    Ok(())
}

fn push_block(out: &mut Vec<u8>, kind: &str, key: &str, s: &str) {
    out.extend_from_slice(b"{\"type\":");
    push_str(out, kind);
    out.push(b',');
    push_str(out, key);
    out.push(b':');
    push_str(out, s);
    out.push(b'}');
}

/// `json.dumps(value)` of a parsed JSON value, as Python writes it (`compact`: with
/// `separators=(",", ":")`), or None when a float or a wide integer is in it (then the
/// arguments keep their own text).
pub(super) fn python_dumps(out: &mut Vec<u8>, v: &serde_json::Value, compact: bool) -> Option<()> {
    use serde_json::Value as V;
    match v {
        V::Null => out.extend_from_slice(b"null"),
        V::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        V::Number(n) => {
            if let Some(i) = n.as_i64() {
                push_i64(out, i);
            } else if let Some(u) = n.as_u64() {
                out.extend_from_slice(itoa::Buffer::new().format(u).as_bytes());
            } else {
                return None;
            }
        }
        V::String(s) => push_str(out, s),
        V::Array(a) => {
            out.push(b'[');
            for (k, x) in a.iter().enumerate() {
                if k > 0 {
                    out.extend_from_slice(if compact { b"," } else { b", " });
                }
                python_dumps(out, x, compact)?;
            }
            out.push(b']');
        }
        V::Object(m) => {
            out.push(b'{');
            for (k, (key, x)) in m.iter().enumerate() {
                if k > 0 {
                    out.extend_from_slice(if compact { b"," } else { b", " });
                }
                push_str(out, key);
                out.extend_from_slice(if compact { b":" } else { b": " });
                python_dumps(out, x, compact)?;
            }
            out.push(b'}');
        }
    }
    Some(())
}

/// The message's tool-call arguments (compact JSON) and the residual's marker for the
/// arguments text: `null` when `json.dumps` of the parsed object gives it back, `1` when
/// the compact `json.dumps` does, else the text itself (as the Python path decides).
/// Arguments holding a float or an integer wider than 64 bits are declined: Python's
/// parser, not serde_json's, says what they are.
fn arguments(arguments: &str) -> Result<(Vec<u8>, Vec<u8>), Decline> {
    let mut marker = Vec::new();
    push_str(&mut marker, arguments);
    let parsed: serde_json::Value = match serde_json::from_str(arguments) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        _ => return Ok((b"{}".to_vec(), marker)),
    };
    let mut args = Vec::with_capacity(arguments.len());
    python_dumps(&mut args, &parsed, true).ok_or(Decline)?;
    let mut again = Vec::with_capacity(arguments.len() + 16);
    if python_dumps(&mut again, &parsed, false).is_some() && again == arguments.as_bytes() {
        return Ok((args, b"null".to_vec()));
    }
    if args == arguments.as_bytes() {
        return Ok((args, b"1".to_vec()));
    }
    Ok((args, marker))
}

/// The message fields (between `"message":{` and the residual) and the residual of one
/// item, or `Decline`.
fn item_line(
    out: &mut Vec<u8>,
    item: &Bound<'_, PyDict>,
    ms: i64,
    provider: &str,
    model: &str,
    names: &Bound<'_, PyDict>,
    residual_key: &str,
) -> W {
    let kind = match get(item, "type")? {
        None => None,
        Some(k) => Some(text(&k)?.to_owned()),
    };
    let role = match get(item, "role")? {
        Some(r) if r.is_instance_of::<PyString>() => Some(text(&r)?.to_owned()),
        _ => None,
    };
    let mut stamp = Vec::with_capacity(24);
    push_i64(&mut stamp, ms);
    let assistant_head = |out: &mut Vec<u8>, blocks: &[Vec<u8>]| {
        out.extend_from_slice(b"\"role\":\"assistant\",\"content\":[");
        for (n, b) in blocks.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b);
        }
        out.extend_from_slice(b"],\"api\":null,\"provider\":");
        push_str(out, provider);
        out.extend_from_slice(b",\"model\":");
        push_str(out, model);
        out.push(b',');
        out.extend_from_slice(USAGE);
    };
    let tail = |out: &mut Vec<u8>| {
        out.extend_from_slice(b",\"timestamp\":");
        out.extend_from_slice(&stamp);
        out.push(b',');
        push_str(out, residual_key);
        out.push(b':');
    };
    match (kind.as_deref(), role.as_deref()) {
        (None | Some("message"), Some("user")) => {
            let content = get(item, "content")?.ok_or(Decline)?;
            let content = text(&content)?;
            out.extend_from_slice(b"\"role\":\"user\",\"content\":");
            push_str(out, content);
            tail(out);
            object(out, item, 1, &[("content", Put::Null)])
        }
        (None | Some("message"), Some("assistant")) => {
            let content = get(item, "content")?.ok_or(Decline)?;
            if let Ok(s) = content.cast_exact::<PyString>() {
                let mut block = Vec::new();
                push_block(&mut block, "text", "text", s.to_str()?);
                assistant_head(out, &[block]);
                out.extend_from_slice(b",\"stop_reason\":\"stop\",\"error_message\":null");
                tail(out);
                return object(out, item, 1, &[("content", Put::Null)]);
            }
            let list = content.cast_exact::<PyList>().map_err(|_| Decline)?;
            let mut blocks = Vec::with_capacity(list.len());
            let mut rest = Vec::with_capacity(list.len());
            for b in list.iter() {
                let b = b.cast_exact::<PyDict>().map_err(|_| Decline)?;
                let key = match get(b, "type")? {
                    Some(t) if t.is_instance_of::<PyString>() => match text(&t)? {
                        "output_text" => "text",
                        "refusal" => "refusal",
                        _ => return Err(Decline),
                    },
                    _ => return Err(Decline),
                };
                let s = get(b, key)?.ok_or(Decline)?;
                let mut block = Vec::new();
                push_block(&mut block, "text", "text", text(&s)?);
                blocks.push(block);
                let mut r = Vec::new();
                object(&mut r, b, 2, &[(key, Put::Null)])?;
                rest.push(r);
            }
            assistant_head(out, &blocks);
            out.extend_from_slice(b",\"stop_reason\":\"stop\",\"error_message\":null");
            tail(out);
            object(out, item, 1, &[("content", Put::Blocks(&rest))])
        }
        (Some("reasoning"), _) => {
            let summary = get(item, "summary")?.ok_or(Decline)?;
            let list = summary.cast_exact::<PyList>().map_err(|_| Decline)?;
            if list.is_empty() {
                return Err(Decline);
            }
            let mut blocks = Vec::with_capacity(list.len());
            let mut rest = Vec::with_capacity(list.len());
            for part in list.iter() {
                let part = part.cast_exact::<PyDict>().map_err(|_| Decline)?;
                let s = get(part, "text")?.ok_or(Decline)?;
                let mut block = Vec::new();
                push_block(&mut block, "thinking", "thinking", text(&s)?);
                blocks.push(block);
                let mut r = Vec::new();
                object(&mut r, part, 2, &[("text", Put::Null)])?;
                rest.push(r);
            }
            assistant_head(out, &blocks);
            out.extend_from_slice(b",\"stop_reason\":\"stop\",\"error_message\":null");
            tail(out);
            object(out, item, 1, &[("summary", Put::Blocks(&rest))])
        }
        (Some("function_call"), _) => {
            let call_id = get(item, "call_id")?.ok_or(Decline)?;
            let name = get(item, "name")?.ok_or(Decline)?;
            let args = get(item, "arguments")?.ok_or(Decline)?;
            let (parsed, marker) = arguments(text(&args)?)?;
            let mut block = Vec::with_capacity(parsed.len() + 64);
            block.extend_from_slice(b"{\"type\":\"tool_call\",\"id\":");
            push_str(&mut block, text(&call_id)?);
            block.extend_from_slice(b",\"name\":");
            push_str(&mut block, text(&name)?);
            block.extend_from_slice(b",\"arguments\":");
            block.extend_from_slice(&parsed);
            block.push(b'}');
            assistant_head(out, &[block]);
            out.extend_from_slice(b",\"stop_reason\":\"tool_use\",\"error_message\":null");
            tail(out);
            object(
                out,
                item,
                1,
                &[
                    ("call_id", Put::Null),
                    ("name", Put::Null),
                    ("arguments", Put::Raw(&marker)),
                ],
            )
        }
        (Some("function_call_output"), _) => {
            let call_id = get(item, "call_id")?.ok_or(Decline)?;
            let output = get(item, "output")?.ok_or(Decline)?;
            let call_id = text(&call_id)?;
            let tool_name = match names.get_item(call_id)? {
                Some(n) => text(&n)?.to_owned(),
                None => String::new(),
            };
            out.extend_from_slice(b"\"role\":\"tool_result\",\"tool_call_id\":");
            push_str(out, call_id);
            out.extend_from_slice(b",\"tool_name\":");
            push_str(out, &tool_name);
            out.extend_from_slice(b",\"content\":[");
            push_block(out, "text", "text", text(&output)?);
            out.extend_from_slice(b"],\"details\":null,\"is_error\":false");
            tail(out);
            object(
                out,
                item,
                1,
                &[("call_id", Put::Null), ("output", Put::Null)],
            )
        }
        _ => Err(Decline),
    }
}

/// Learns the tool name of a function call item (as the adapter's `_learn_tool_names`).
pub(super) fn learn(item: &Bound<'_, PyDict>, names: &Bound<'_, PyDict>) -> PyResult<()> {
    let is_call = match item.get_item("type")? {
        Some(t) => t
            .cast::<PyString>()
            .is_ok_and(|s| s.to_str().ok() == Some("function_call")),
        None => false,
    };
    if is_call {
        if let (Some(c), Some(n)) = (item.get_item("call_id")?, item.get_item("name")?) {
            if c.is_instance_of::<PyString>() && n.is_instance_of::<PyString>() {
                names.set_item(c, n)?;
            }
        }
    }
    Ok(())
}

/// The entry line of each item (`ids[k]` its entry id, the one before it its parent, the
/// first a root: the caller re-parents it), or None for an item left to the Python path.
/// `stamp` is the entries' ISO time, `ms` the messages'; `names` (call id -> tool name)
/// learns each function call's name, in order, and names the outputs' tools.
#[pyfunction]
#[pyo3(signature = (items, ids, stamp, ms, provider, model, names, residual_key))]
#[allow(clippy::too_many_arguments)]
pub fn openai_item_lines<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyList>,
    ids: Vec<String>,
    stamp: &str,
    ms: i64,
    provider: &str,
    model: &str,
    names: &Bound<'py, PyDict>,
    residual_key: &str,
) -> PyResult<Bound<'py, PyList>> {
    if ids.len() != items.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "one id per item is needed",
        ));
    }
    let mut head = Vec::with_capacity(64);
    head.extend_from_slice(b",\"timestamp\":");
    push_str(&mut head, stamp);
    head.extend_from_slice(b",\"message\":{");
    let out = PyList::empty(py);
    let mut line = Vec::new();
    for (k, item) in items.iter().enumerate() {
        let Ok(item) = item.cast_exact::<PyDict>() else {
            out.append(py.None())?;
            continue;
        };
        learn(item, names)?;
        line.clear();
        line.extend_from_slice(b"{\"type\":\"message\",\"id\":");
        push_str(&mut line, &ids[k]);
        line.extend_from_slice(b",\"parent_id\":");
        if k == 0 {
            line.extend_from_slice(b"null");
        } else {
            push_str(&mut line, &ids[k - 1]);
        }
        line.extend_from_slice(&head);
        match item_line(&mut line, item, ms, provider, model, names, residual_key) {
            Ok(()) => {
                line.extend_from_slice(b"}}");
                out.append(PyBytes::new(py, &line))?;
            }
            Err(Decline) => out.append(py.None())?,
        }
    }
    Ok(out)
}
