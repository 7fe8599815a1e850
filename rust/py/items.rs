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

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};
use serde_json::value::RawValue;

use crate::engine::json_text::{push_f64, push_i64, push_str};

/// An item this writer leaves to the Python path (the error, if any, is dropped: the
/// Python path meets it again and raises it as the adapter does).
struct Decline;

impl From<PyErr> for Decline {
    fn from(_: PyErr) -> Self {
        Decline
    }
}

type W = Result<(), Decline>;

/// Deeper values are left to the Python path (which applies the engine's own limit).
const MOST_DEPTH: usize = 64;

const USAGE: &[u8] = br#""usage":{"input":0,"output":0,"cache_read":0,"cache_write":0,"total_tokens":0,"cost":{"input":0.0,"output":0.0,"cache_read":0.0,"cache_write":0.0,"total":0.0}}"#;

fn text<'a>(v: &'a Bound<'_, PyAny>) -> Result<&'a str, Decline> {
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
fn python_dumps(out: &mut Vec<u8>, v: &serde_json::Value, compact: bool) -> Option<()> {
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
fn learn(item: &Bound<'_, PyDict>, names: &Bound<'_, PyDict>) -> PyResult<()> {
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

// ------------------------------------------------------------------ lines -> items

/// What the adapter's view calls an entry (`_ITEM`, `_COMPACTION`, `_OTHER`).
const ITEM: i64 = 1;
const COMPACTION: i64 = 2;
const OTHER: i64 = 0;

#[derive(serde::Deserialize)]
struct LineIn<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    message: Option<MessageIn<'a>>,
    #[serde(default, borrow)]
    custom_type: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    data: Option<&'a RawValue>,
}

#[derive(serde::Deserialize)]
struct MessageIn<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(borrow)]
    content: Content<'a>,
    #[serde(default, borrow)]
    tool_call_id: Option<Cow<'a, str>>,
    #[serde(rename = "openai_agents", default, borrow)]
    residual: Option<&'a RawValue>,
}

#[derive(serde::Deserialize)]
struct BlockIn<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
}

/// The message's content: its text, or its blocks.
enum Content<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<BlockIn<'a>>),
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Content<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Content<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or a list of blocks")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Owned(v)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut blocks = Vec::new();
                while let Some(b) = seq.next_element()? {
                    blocks.push(b);
                }
                Ok(Content::Blocks(blocks))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

fn py_json<'py>(py: Python<'py>, raw: &RawValue) -> Result<Bound<'py, PyAny>, Decline> {
    Ok(super::pyjson::loads(py, raw.get().as_bytes())?)
}

/// `{**rest, key: value}` of a freshly parsed `rest` (changed in place: it is ours).
fn with<'py>(
    rest: &Bound<'py, PyAny>,
    key: &str,
    value: &str,
) -> Result<Bound<'py, PyAny>, Decline> {
    let d = rest.cast_exact::<PyDict>().map_err(|_| Decline)?;
    d.set_item(key, value)?;
    Ok(rest.clone())
}

/// The rest of a residual's blocks (`_blocks_from_dicts`) for text blocks only.
fn text_blocks<'py>(
    py: Python<'py>,
    blocks: &[BlockIn<'_>],
    rest: &Bound<'py, PyAny>,
) -> Result<Bound<'py, PyAny>, Decline> {
    let rest = rest.cast_exact::<PyList>().map_err(|_| Decline)?;
    if rest.len() != blocks.len() {
        return Err(Decline);
    }
    let out = PyList::empty(py);
    for (b, r) in blocks.iter().zip(rest.iter()) {
        if b.kind != "text" {
            return Err(Decline);
        }
        out.append(with(&r, "text", b.text.as_deref().ok_or(Decline)?)?)?;
    }
    Ok(out.into_any())
}

/// The item a mapped message line stands for (`_item_from_message_dict`).
fn item_of<'py>(
    py: Python<'py>,
    m: MessageIn<'_>,
    names: &Bound<'py, PyDict>,
) -> Result<Bound<'py, PyAny>, Decline> {
    let residual = py_json(py, m.residual.ok_or(Decline)?)?;
    let item = residual
        .cast_exact::<PyDict>()
        .map_err(|_| Decline)?
        .clone();
    let content = m.content;
    let rest_of = |key: &str| -> Result<Option<Bound<'py, PyAny>>, Decline> {
        Ok(item.get_item(key)?.filter(|v| !v.is_none()))
    };
    match m.role.as_ref() {
        "user" => match (rest_of("content")?, content) {
            (None, Content::Text(t)) => item.set_item("content", t.as_ref())?,
            (Some(rest), Content::Blocks(blocks)) => {
                item.set_item("content", text_blocks(py, &blocks, &rest)?)?;
            }
            _ => return Err(Decline),
        },
        "tool_result" => {
            let Content::Blocks(blocks) = content else {
                return Err(Decline);
            };
            item.set_item("call_id", m.tool_call_id.as_deref().ok_or(Decline)?)?;
            match rest_of("output")? {
                None => {
                    let mut joined = String::new();
                    for b in blocks.iter().filter(|b| b.kind == "text") {
                        joined.push_str(b.text.as_deref().ok_or(Decline)?);
                    }
                    item.set_item("output", joined)?;
                }
                Some(rest) => item.set_item("output", text_blocks(py, &blocks, &rest)?)?,
            }
        }
        "assistant" => {
            let Content::Blocks(blocks) = content else {
                return Err(Decline);
            };
            let kind = item.get_item("type")?;
            let kind = match &kind {
                Some(k) if k.is_instance_of::<PyString>() => Some(text(k)?.to_owned()),
                _ => None,
            };
            match kind.as_deref() {
                Some("function_call") => {
                    let [call] = blocks.as_slice() else {
                        return Err(Decline);
                    };
                    if call.kind != "tool_call" {
                        return Err(Decline);
                    }
                    let marker = item.get_item("arguments")?;
                    let compact = match &marker {
                        None => Some(false),
                        Some(v) if v.is_none() => Some(false),
                        Some(v) if v.is_exact_instance_of::<PyInt>() => {
                            if v.extract::<i64>()? == 1 {
                                Some(true)
                            } else {
                                return Err(Decline);
                            }
                        }
                        Some(_) => None,
                    };
                    item.set_item("call_id", call.id.as_deref().ok_or(Decline)?)?;
                    let (call_id, name) = (
                        call.id.as_deref().ok_or(Decline)?,
                        call.name.as_deref().ok_or(Decline)?,
                    );
                    item.set_item("name", name)?;
                    names.set_item(call_id, name)?;
                    if let Some(compact) = compact {
                        let args: serde_json::Value =
                            serde_json::from_str(call.arguments.ok_or(Decline)?.get())
                                .map_err(|_| Decline)?;
                        let mut out = Vec::new();
                        python_dumps(&mut out, &args, compact).ok_or(Decline)?;
                        let out = String::from_utf8(out).map_err(|_| Decline)?;
                        item.set_item("arguments", out)?;
                    }
                }
                Some("reasoning") => {
                    let rest = item.get_item("summary")?.ok_or(Decline)?;
                    let rest = rest.cast_exact::<PyList>().map_err(|_| Decline)?;
                    if rest.len() != blocks.len() {
                        return Err(Decline);
                    }
                    let out = PyList::empty(py);
                    for (b, r) in blocks.iter().zip(rest.iter()) {
                        if b.kind == "thinking" {
                            out.append(with(&r, "text", b.thinking.as_deref().ok_or(Decline)?)?)?;
                        }
                    }
                    item.set_item("summary", out)?;
                }
                _ => {
                    let texts: Vec<&str> = blocks
                        .iter()
                        .filter(|b| b.kind == "text")
                        .map(|b| b.text.as_deref().ok_or(Decline))
                        .collect::<Result<_, _>>()?;
                    match rest_of("content")? {
                        None => item.set_item("content", *texts.first().ok_or(Decline)?)?,
                        Some(rest) => {
                            let rest = rest.cast_exact::<PyList>().map_err(|_| Decline)?;
                            if rest.len() != texts.len() {
                                return Err(Decline);
                            }
                            let out = PyList::empty(py);
                            for (t, r) in texts.iter().zip(rest.iter()) {
                                let d = r.cast_exact::<PyDict>().map_err(|_| Decline)?;
                                let refusal = d.get_item("type")?.is_some_and(|k| {
                                    k.cast::<PyString>()
                                        .is_ok_and(|s| s.to_str().ok() == Some("refusal"))
                                });
                                out.append(with(&r, if refusal { "refusal" } else { "text" }, t)?)?;
                            }
                            item.set_item("content", out)?;
                        }
                    }
                }
            }
        }
        _ => return Err(Decline),
    }
    Ok(item.into_any())
}

/// What one line is for the adapter's view (`_items_from_line`): `(code, items)`, or
/// `None` where only the entry object can say.
fn known_of<'py>(
    py: Python<'py>,
    line: &[u8],
    custom_type: &str,
    names: &Bound<'py, PyDict>,
) -> Result<Bound<'py, PyAny>, Decline> {
    let text = simdutf8::basic::from_utf8(line).map_err(|_| Decline)?;
    let l: LineIn<'_> = serde_json::from_str(text).map_err(|_| Decline)?;
    let (code, items) = match l.kind.as_ref() {
        "message" => (ITEM, vec![item_of(py, l.message.ok_or(Decline)?, names)?]),
        "custom" if l.custom_type.as_deref() == Some(custom_type) => {
            let data = py_json(py, l.data.ok_or(Decline)?)?;
            if let Ok(d) = data.cast_exact::<PyDict>() {
                learn(d, names)?;
            }
            (ITEM, vec![data])
        }
        "compaction" => (COMPACTION, Vec::new()),
        _ => (OTHER, Vec::new()),
    };
    Ok((code, PyList::new(py, items)?)
        .into_pyobject(py)?
        .into_any())
}

/// For each entry line, what the OpenAI adapter's view keeps of it: `(1, [item])` for an
/// item entry (a message the adapter mapped, or a custom entry of `custom_type`), `(2, [])`
/// for a compaction, `(0, [])` for any other entry, or `None` where the adapter's Python
/// path must say (a message it did not map, a shape this reader does not vouch for). The
/// same items `_items_from_line` gives, built straight from the line; `names` (call id
/// -> tool name) learns the name of every function call read.
#[pyfunction]
pub fn openai_items_of_lines<'py>(
    py: Python<'py>,
    lines: &Bound<'py, PyList>,
    custom_type: &str,
    residual_key: &str,
    names: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyList>> {
    if residual_key != "openai_agents" {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "the reader knows the residual key \"openai_agents\" only",
        ));
    }
    let out = PyList::empty(py);
    for line in lines.iter() {
        let line = line.cast::<PyBytes>()?;
        match known_of(py, line.as_bytes(), custom_type, names) {
            Ok(found) => out.append(found)?,
            Err(Decline) => out.append(py.None())?,
        }
    }
    Ok(out)
}
