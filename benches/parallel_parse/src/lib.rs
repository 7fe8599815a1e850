//! Issue 27, the first read: would parsing on other cores make it 2x `SQLiteSession`?
//!
//! Python objects can only be made under the GIL, so a parallel read splits in two: worker
//! threads parse lines (serde_json, the project's parser) into a flat tape of tokens and
//! unescaped text, with no Python; the thread holding the GIL turns tapes into objects as
//! they arrive. This scratch extension builds whole lines as `json.loads` would (dicts,
//! lists, str, int, float, bool, None; keys interned), and the share of each line the
//! OpenAI adapter's reader builds, both in one pass from the text (as the project's readers
//! do) and through tapes on `workers` threads, so that the two can be timed on the same
//! lines. Driven by `measure_parse.py`; figures in `benches/RESULTS-adapters.md`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyString};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// An object's key, borrowed from the text when it has no escapes (serde's own `Cow<str>`
/// always copies): the engine's `types::Key`, which this standalone crate cannot reach.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

// ---- one pass: text to objects -------------------------------------------------------

#[derive(Clone, Copy)]
struct Direct<'py>(Python<'py>);

fn py_err<E: de::Error>(e: PyErr) -> E {
    E::custom(e.to_string())
}

impl<'de, 'py> DeserializeSeed<'de> for Direct<'py> {
    type Value = Bound<'py, PyAny>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 'py> Visitor<'de> for Direct<'py> {
    type Value = Bound<'py, PyAny>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(self.0.None().into_bound(self.0))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(PyBool::new(self.0, v).to_owned().into_any())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into_pyobject(self.0).unwrap().into_any())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into_pyobject(self.0).unwrap().into_any())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(PyFloat::new(self.0, v).into_any())
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(PyString::new(self.0, v).into_any())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let list = PyList::empty(self.0);
        while let Some(item) = seq.next_element_seed(self)? {
            list.append(item).map_err(py_err)?;
        }
        Ok(list.into_any())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let dict = PyDict::new(self.0);
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let value = map.next_value_seed(self)?;
            dict.set_item(PyString::intern(self.0, &key), value)
                .map_err(py_err)?;
        }
        Ok(dict.into_any())
    }
}

// ---- two passes: text to tape (any thread), tape to objects (the GIL's) ---------------

/// A token of a tape: containers carry their length, strings their place in the text.
#[derive(Clone, Copy)]
enum Tok {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(u32, u32),
    List(u32),
    Dict(u32),
}

#[derive(Default)]
struct Tape {
    toks: Vec<Tok>,
    text: String,
}

impl Tape {
    fn push_str(&mut self, v: &str) -> Tok {
        let at = self.text.len() as u32;
        self.text.push_str(v);
        Tok::Str(at, v.len() as u32)
    }
}

struct ToTape<'t>(&'t mut Tape);

impl<'de> DeserializeSeed<'de> for ToTape<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ToTape<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.toks.push(Tok::Null);
        Ok(())
    }
    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0.toks.push(Tok::Bool(v));
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.0.toks.push(Tok::Int(v));
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.0.toks.push(Tok::Uint(v));
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.0.toks.push(Tok::Float(v));
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        let tok = self.0.push_str(v);
        self.0.toks.push(tok);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let at = self.0.toks.len();
        self.0.toks.push(Tok::List(0));
        let mut n = 0;
        while seq.next_element_seed(ToTape(self.0))?.is_some() {
            n += 1;
        }
        self.0.toks[at] = Tok::List(n);
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let at = self.0.toks.len();
        self.0.toks.push(Tok::Dict(0));
        let mut n = 0;
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let tok = self.0.push_str(&key);
            self.0.toks.push(tok);
            map.next_value_seed(ToTape(self.0))?;
            n += 1;
        }
        self.0.toks[at] = Tok::Dict(n);
        Ok(())
    }
}

/// The tape of `lines`, made in `tape`'s memory.
fn tape_of(lines: &[&[u8]], mut tape: Tape) -> Result<Tape, String> {
    tape.toks.clear();
    tape.text.clear();
    for line in lines {
        let mut de = serde_json::Deserializer::from_slice(line);
        ToTape(&mut tape)
            .deserialize(&mut de)
            .and_then(|()| de.end())
            .map_err(|e| e.to_string())?;
    }
    Ok(tape)
}

/// The object of the value at `at`, which moves past it.
fn build<'py>(py: Python<'py>, tape: &Tape, at: &mut usize) -> PyResult<Bound<'py, PyAny>> {
    let tok = tape.toks[*at];
    *at += 1;
    let text = |s: u32, n: u32| &tape.text[s as usize..(s + n) as usize];
    Ok(match tok {
        Tok::Null => py.None().into_bound(py),
        Tok::Bool(v) => PyBool::new(py, v).to_owned().into_any(),
        Tok::Int(v) => v.into_pyobject(py)?.into_any(),
        Tok::Uint(v) => v.into_pyobject(py)?.into_any(),
        Tok::Float(v) => PyFloat::new(py, v).into_any(),
        Tok::Str(s, n) => PyString::new(py, text(s, n)).into_any(),
        Tok::List(n) => {
            let list = PyList::empty(py);
            for _ in 0..n {
                list.append(build(py, tape, at)?)?;
            }
            list.into_any()
        }
        Tok::Dict(n) => {
            let dict = PyDict::new(py);
            for _ in 0..n {
                let Tok::Str(s, k) = tape.toks[*at] else {
                    unreachable!("a key is a string");
                };
                *at += 1;
                let value = build(py, tape, at)?;
                dict.set_item(PyString::intern(py, text(s, k)), value)?;
            }
            dict.into_any()
        }
    })
}

/// Tapes of `chunk` lines made on `workers` threads (no GIL), handed to `each` on this
/// thread in order; with `help`, this thread makes tapes too while none is ready.
fn in_parallel(
    lines: &[Bound<'_, PyBytes>],
    workers: usize,
    chunk: usize,
    help: bool,
    mut each: impl FnMut(&Tape) -> PyResult<()>,
) -> PyResult<()> {
    let raw: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
    let chunks: Vec<&[&[u8]]> = raw.chunks(chunk.max(1)).collect();
    let next = AtomicUsize::new(0);
    // Spent tapes go back to the workers: fresh memory costs a page fault a page.
    let (give, spent) = mpsc::channel::<Tape>();
    let spent = std::sync::Mutex::new(spent);
    std::thread::scope(|scope| -> PyResult<()> {
        let (send, recv) = mpsc::channel::<(usize, Result<Tape, String>)>();
        for _ in 0..workers.max(1) {
            let send = send.clone();
            let (next, chunks, spent) = (&next, &chunks, &spent);
            scope.spawn(move || loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= chunks.len() {
                    break;
                }
                let tape = spent.lock().unwrap().try_recv().unwrap_or_default();
                if send.send((k, tape_of(chunks[k], tape))).is_err() {
                    break;
                }
            });
        }
        drop(send);
        let mut waiting: BTreeMap<usize, Result<Tape, String>> = BTreeMap::new();
        let mut due = 0;
        while due < chunks.len() {
            match waiting.remove(&due) {
                Some(tape) => {
                    let tape = tape.map_err(pyo3::exceptions::PyValueError::new_err)?;
                    each(&tape)?;
                    let _ = give.send(tape);
                    due += 1;
                }
                None => match recv.try_recv() {
                    Ok((k, tape)) => {
                        waiting.insert(k, tape);
                    }
                    // Nothing ready: this thread makes a tape itself rather than wait.
                    Err(_) => {
                        let k = if help {
                            next.fetch_add(1, Ordering::Relaxed)
                        } else {
                            usize::MAX
                        };
                        if k < chunks.len() {
                            let tape = spent.lock().unwrap().try_recv().unwrap_or_default();
                            waiting.insert(k, tape_of(chunks[k], tape));
                        } else {
                            let (k, tape) = recv.recv().expect("a worker sends every chunk");
                            waiting.insert(k, tape);
                        }
                    }
                },
            }
        }
        Ok(())
    })
}

/// The tapes alone, `chunk` lines at a time in one tape's memory, on this thread (the
/// workers' share of `parallel`): the number of tokens.
#[pyfunction]
#[pyo3(signature = (lines, chunk=128))]
fn tapes_only(py: Python<'_>, lines: Vec<Bound<'_, PyBytes>>, chunk: usize) -> PyResult<usize> {
    let raw: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
    py.detach(|| {
        let (mut tape, mut tokens) = (Tape::default(), 0);
        for lines in raw.chunks(chunk.max(1)) {
            tape = tape_of(lines, tape)?;
            tokens += tape.toks.len();
        }
        Ok::<_, String>(tokens)
    })
    .map_err(pyo3::exceptions::PyValueError::new_err)
}

// ---- the adapter's share of a line: its `message`'s `content` and `openai_agents` -----

/// The depth from which a line is built whole.
const WHOLE: usize = 2;

/// Keys of a line's objects the adapter builds; everything else is stepped over.
fn wanted(depth: usize, key: &str) -> bool {
    match depth {
        0 => key == "message",
        1 => key == "content" || key == "openai_agents",
        _ => true,
    }
}

/// Builds the value at a depth of a line: below [`WHOLE`] the [`wanted`] keys of an
/// object, from [`WHOLE`] on everything (as [`Direct`]).
#[derive(Clone, Copy)]
struct Subset<'py>(Python<'py>, usize);

impl<'de, 'py> DeserializeSeed<'de> for Subset<'py> {
    type Value = Bound<'py, PyAny>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        if self.1 >= WHOLE {
            Direct(self.0).deserialize(d)
        } else {
            d.deserialize_any(self)
        }
    }
}

impl<'de, 'py> Visitor<'de> for Subset<'py> {
    type Value = Bound<'py, PyAny>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Direct(self.0).visit_str(v)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Direct(self.0).visit_unit()
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let dict = PyDict::new(self.0);
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if wanted(self.1, &key) {
                let value = map.next_value_seed(Subset(self.0, self.1 + 1))?;
                dict.set_item(PyString::intern(self.0, &key), value)
                    .map_err(py_err)?;
            } else {
                map.next_value::<de::IgnoredAny>()?;
            }
        }
        Ok(dict.into_any())
    }
}

/// The depth [`Subset`] and [`build_subset`] start at: 0 builds the adapter's share of a
/// line, [`WHOLE`] all of it.
fn depth(share: bool) -> usize {
    if share {
        0
    } else {
        WHOLE
    }
}

/// Each line (or its adapter's share) parsed and built in one pass, on this thread.
#[pyfunction]
#[pyo3(signature = (lines, share=false))]
fn direct<'py>(
    py: Python<'py>,
    lines: Vec<Bound<'py, PyBytes>>,
    share: bool,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for line in &lines {
        let mut de = serde_json::Deserializer::from_slice(line.as_bytes());
        let value = Subset(py, depth(share))
            .deserialize(&mut de)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        out.append(value)?;
    }
    Ok(out)
}

/// Steps over one value of a tape.
fn skip(tape: &Tape, at: &mut usize) {
    let tok = tape.toks[*at];
    *at += 1;
    match tok {
        Tok::List(n) => (0..n).for_each(|_| skip(tape, at)),
        Tok::Dict(n) => (0..n).for_each(|_| {
            *at += 1;
            skip(tape, at)
        }),
        _ => {}
    }
}

fn build_subset<'py>(
    py: Python<'py>,
    tape: &Tape,
    at: &mut usize,
    depth: usize,
) -> PyResult<Bound<'py, PyAny>> {
    if depth >= WHOLE {
        return build(py, tape, at);
    }
    match tape.toks[*at] {
        Tok::Dict(n) => {
            *at += 1;
            let dict = PyDict::new(py);
            for _ in 0..n {
                let Tok::Str(s, k) = tape.toks[*at] else {
                    unreachable!("a key is a string");
                };
                *at += 1;
                let key = &tape.text[s as usize..(s + k) as usize];
                if wanted(depth, key) {
                    let value = build_subset(py, tape, at, depth + 1)?;
                    dict.set_item(PyString::intern(py, key), value)?;
                } else {
                    skip(tape, at);
                }
            }
            Ok(dict.into_any())
        }
        _ => build(py, tape, at),
    }
}

/// Each line (or its adapter's share) from tapes made on `workers` threads, built into
/// objects on this one.
#[pyfunction]
#[pyo3(signature = (lines, workers, chunk=128, help=false, share=false))]
fn parallel<'py>(
    py: Python<'py>,
    lines: Vec<Bound<'py, PyBytes>>,
    workers: usize,
    chunk: usize,
    help: bool,
    share: bool,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    in_parallel(&lines, workers, chunk, help, |tape| {
        let mut at = 0;
        while at < tape.toks.len() {
            out.append(build_subset(py, tape, &mut at, depth(share))?)?;
        }
        Ok(())
    })?;
    Ok(out)
}

#[pymodule]
fn parallel_parse(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(direct, m)?)?;
    m.add_function(wrap_pyfunction!(parallel, m)?)?;
    m.add_function(wrap_pyfunction!(tapes_only, m)?)?;
    Ok(())
}
