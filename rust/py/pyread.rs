//! A one-pass JSON reader that builds Python objects straight from a line's bytes, for the
//! adapters' bulk reads (`items.rs`): no intermediate tree, no owned Rust string per JSON
//! string (escapes are undone into one scratch buffer the reader reuses), and short strings
//! (every key, and values such as `"role"`'s) made once per call and shared (`StrCache`,
//! after jiter's string cache). A caller reads the parts of a line it needs as Python
//! objects, the parts it decides on as Rust bytes, and skips the rest without building it.
//!
//! It reads what `json.loads` reads, or declines (`Bad`): anything it is not sure to read
//! as `json.loads` does (an integer wider than 64 bits, a lone surrogate, nesting deeper
//! than [`MOST_DEPTH`], a malformed line) is the caller's to read the slow way.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// A line (or a value in it) this reader leaves to the caller's slow path.
#[derive(Debug)]
pub struct Bad;

impl From<PyErr> for Bad {
    fn from(_: PyErr) -> Self {
        Bad
    }
}

pub type R<T> = Result<T, Bad>;

/// Deeper values are declined (the slow path applies the engine's own limit).
const MOST_DEPTH: usize = 128;

/// Strings up to this many bytes (without escapes) go through the cache.
const CACHED_BYTES: usize = 24;
const SLOTS: usize = 4096;

#[derive(Clone, Copy)]
struct Slot {
    len: u8,
    bytes: [u8; CACHED_BYTES],
    obj: *mut ffi::PyObject,
}

/// Short strings made once and shared for the rest of a call: keys (interned, as
/// `json.loads` leaves them shared too) and short values. A fixed table indexed by a
/// hash of the bytes; a collision replaces the slot, so a call's unique ids cost a
/// lookup each and never grow it.
pub struct StrCache {
    slots: Vec<Slot>,
    hasher: foldhash::fast::FixedState,
}

impl StrCache {
    pub fn new() -> Self {
        StrCache {
            slots: vec![
                Slot {
                    len: 0,
                    bytes: [0; CACHED_BYTES],
                    obj: std::ptr::null_mut(),
                };
                SLOTS
            ],
            hasher: foldhash::fast::FixedState::with_seed(0x5e55),
        }
    }

    /// A new reference to the string of `bytes` (valid UTF-8, no escapes).
    fn get(&mut self, bytes: &[u8], key: bool) -> R<*mut ffi::PyObject> {
        use std::hash::BuildHasher;
        if bytes.len() > CACHED_BYTES {
            return new_str(bytes);
        }
        let at = (self.hasher.hash_one(bytes) as usize) & (SLOTS - 1);
        let slot = &mut self.slots[at];
        if !slot.obj.is_null()
            && usize::from(slot.len) == bytes.len()
            && &slot.bytes[..bytes.len()] == bytes
        {
            // SAFETY: the GIL is held (the reader's callers hold a `Python` token); the
            // slot holds a reference of its own.
            unsafe { ffi::Py_INCREF(slot.obj) };
            return Ok(slot.obj);
        }
        let mut obj = new_str(bytes)?;
        if key {
            // SAFETY: GIL held; `obj` is a new, exact str (it may be swapped for the
            // interned one, with the references adjusted by CPython).
            unsafe { ffi::PyUnicode_InternInPlace(&mut obj) };
        }
        if !slot.obj.is_null() {
            // SAFETY: GIL held; the slot's own reference is dropped.
            unsafe { ffi::Py_DECREF(slot.obj) };
        }
        slot.len = bytes.len() as u8; // at most CACHED_BYTES
        slot.bytes[..bytes.len()].copy_from_slice(bytes);
        slot.obj = obj;
        // SAFETY: GIL held; one reference for the slot, one for the caller.
        unsafe { ffi::Py_INCREF(obj) };
        Ok(obj)
    }
}

impl Drop for StrCache {
    fn drop(&mut self) {
        for slot in &self.slots {
            if !slot.obj.is_null() {
                // SAFETY: the cache lives inside one call that holds the GIL throughout.
                unsafe { ffi::Py_DECREF(slot.obj) };
            }
        }
    }
}

/// A new str from valid UTF-8.
fn new_str(bytes: &[u8]) -> R<*mut ffi::PyObject> {
    // SAFETY: GIL held by every caller; `bytes` is valid for its length.
    let obj = unsafe {
        ffi::PyUnicode_FromStringAndSize(bytes.as_ptr().cast(), bytes.len() as ffi::Py_ssize_t)
    };
    if obj.is_null() {
        // SAFETY: GIL held; the error is dropped (the caller's slow path meets it again).
        unsafe { ffi::PyErr_Clear() };
        return Err(Bad);
    }
    Ok(obj)
}

/// An owned reference as a `Bound`, or `Bad` (with the error cleared) for NULL.
fn own<'py>(py: Python<'py>, obj: *mut ffi::PyObject) -> R<Bound<'py, PyAny>> {
    // SAFETY: `obj` is a new reference or NULL with an error set.
    Ok(unsafe { Bound::from_owned_ptr_or_err(py, obj) }?)
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `w` that is a quote, a backslash or a control character,
/// exact up to and including the lowest such byte (the borrows of the subtractions may
/// mark bytes above it): its `trailing_zeros() / 8` is the first such byte's position.
#[inline]
fn special(w: u64) -> u64 {
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let quote = zero(w ^ (ONES * u64::from(b'"')));
    let slash = zero(w ^ (ONES * u64::from(b'\\')));
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGHS;
    quote | slash | control
}

/// A string as the reader found it: its bytes, borrowed from the line when it has no
/// escapes, else undone into the reader's scratch buffer.
pub enum Text {
    Raw(usize, usize),
    Scratch,
}

pub struct Reader<'a, 'c, 'py> {
    pub py: Python<'py>,
    s: &'a [u8],
    pos: usize,
    cache: &'c mut StrCache,
    scratch: &'c mut Vec<u8>,
}

impl<'a, 'c, 'py> Reader<'a, 'c, 'py> {
    /// A reader of `line` (checked as UTF-8 here, once for all its strings).
    pub fn new(
        py: Python<'py>,
        line: &'a [u8],
        cache: &'c mut StrCache,
        scratch: &'c mut Vec<u8>,
    ) -> R<Self> {
        simdutf8::basic::from_utf8(line).map_err(|_| Bad)?;
        Ok(Reader {
            py,
            s: line,
            pos: 0,
            cache,
            scratch,
        })
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.s.get(self.pos) {
            self.pos += 1;
        }
    }

    /// The next byte after whitespace (not consumed).
    #[inline]
    pub fn peek(&mut self) -> R<u8> {
        self.ws();
        self.s.get(self.pos).copied().ok_or(Bad)
    }

    #[inline]
    fn eat(&mut self, b: u8) -> R<()> {
        if self.peek()? != b {
            return Err(Bad);
        }
        self.pos += 1;
        Ok(())
    }

    /// Whether the line ends here (whitespace aside).
    pub fn end(&mut self) -> R<()> {
        self.ws();
        if self.pos == self.s.len() {
            Ok(())
        } else {
            Err(Bad)
        }
    }

    /// Starts an object (`{`); then [`Self::next_key`] until it says none is left.
    pub fn open_object(&mut self) -> R<()> {
        self.eat(b'{')
    }

    /// The next key of an object (its text in `Text`, read with [`Self::bytes`]), or
    /// `None` at its end; `first` for the first call on the object.
    pub fn next_key(&mut self, first: bool) -> R<Option<Text>> {
        match self.peek()? {
            b'}' => {
                self.pos += 1;
                return Ok(None);
            }
            b',' if !first => {
                self.pos += 1;
                self.ws();
            }
            b'"' if first => {}
            _ => return Err(Bad),
        }
        let key = self.text()?;
        self.eat(b':')?;
        Ok(Some(key))
    }

    /// The bytes of a string the reader just read.
    pub fn bytes(&self, t: &Text) -> &[u8] {
        match *t {
            Text::Raw(a, b) => &self.s[a..b],
            Text::Scratch => self.scratch,
        }
    }

    /// Reads a string (at its opening quote); its bytes through [`Self::bytes`].
    pub fn text(&mut self) -> R<Text> {
        self.eat(b'"')?;
        let s = self.s;
        let start = self.pos;
        let mut i = start;
        let mut undone = false;
        // The first byte not yet in the scratch buffer (once an escape was undone).
        let mut run = start;
        loop {
            while i + 8 <= s.len() {
                let w = u64::from_le_bytes(s[i..i + 8].try_into().map_err(|_| Bad)?);
                let found = special(w);
                if found != 0 {
                    i += (found.trailing_zeros() / 8) as usize;
                    break;
                }
                i += 8;
            }
            match *s.get(i).ok_or(Bad)? {
                b'"' => {
                    self.pos = i + 1;
                    if undone {
                        self.scratch.extend_from_slice(&s[run..i]);
                        return Ok(Text::Scratch);
                    }
                    return Ok(Text::Raw(start, i));
                }
                b'\\' => {
                    if !undone {
                        self.scratch.clear();
                        undone = true;
                    }
                    self.scratch.extend_from_slice(&s[run..i]);
                    i = self.unescape(i)?;
                    run = i;
                }
                0..=0x1f => return Err(Bad),
                _ => i += 1,
            }
        }
    }

    /// Undoes the escape at `i` (a backslash) into the scratch buffer; the position after it.
    fn unescape(&mut self, i: usize) -> R<usize> {
        let s = self.s;
        let c = *s.get(i + 1).ok_or(Bad)?;
        let out = match c {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let hi = hex4(s, i + 2)?;
                let (code, next) = if (0xd800..0xdc00).contains(&hi) {
                    // A surrogate pair, or a lone surrogate (declined: UTF-8 cannot hold it).
                    if s.get(i + 6) != Some(&b'\\') || s.get(i + 7) != Some(&b'u') {
                        return Err(Bad);
                    }
                    let lo = hex4(s, i + 8)?;
                    if !(0xdc00..0xe000).contains(&lo) {
                        return Err(Bad);
                    }
                    (0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00), i + 12)
                } else if (0xdc00..0xe000).contains(&hi) {
                    return Err(Bad);
                } else {
                    (hi, i + 6)
                };
                let ch = char::from_u32(code).ok_or(Bad)?;
                let mut buf = [0u8; 4];
                self.scratch
                    .extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                return Ok(next);
            }
            _ => return Err(Bad),
        };
        self.scratch.push(out);
        Ok(i + 2)
    }

    /// The str of a string just read (`key`: interned, for a dict's key).
    pub fn str_of(&mut self, t: &Text, key: bool) -> R<Bound<'py, PyAny>> {
        let obj = match *t {
            Text::Raw(a, b) => self.cache.get(&self.s[a..b], key)?,
            Text::Scratch => new_str(self.scratch)?,
        };
        own(self.py, obj)
    }

    /// Reads a string as a str.
    pub fn string(&mut self) -> R<Bound<'py, PyAny>> {
        let t = self.text()?;
        self.str_of(&t, false)
    }

    /// Reads a string as a str, or `null` as `None` (the Rust `None`).
    pub fn opt_string(&mut self) -> R<Option<Bound<'py, PyAny>>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Ok(None);
        }
        self.string().map(Some)
    }

    fn literal(&mut self, word: &[u8]) -> R<()> {
        if self.s.get(self.pos..self.pos + word.len()) != Some(word) {
            return Err(Bad);
        }
        self.pos += word.len();
        Ok(())
    }

    /// The span of a number (at its first byte), checked as JSON's grammar allows.
    fn number(&mut self) -> R<(usize, usize, bool)> {
        let s = self.s;
        let start = self.pos;
        let mut i = start;
        if s.get(i) == Some(&b'-') {
            i += 1;
        }
        let digits = |i: &mut usize| {
            let from = *i;
            while s.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i - from
        };
        let whole = digits(&mut i);
        if whole == 0 || (whole > 1 && s[i - whole] == b'0') {
            return Err(Bad);
        }
        let mut float = false;
        if s.get(i) == Some(&b'.') {
            i += 1;
            float = true;
            if digits(&mut i) == 0 {
                return Err(Bad);
            }
        }
        if let Some(b'e' | b'E') = s.get(i) {
            i += 1;
            float = true;
            if let Some(b'+' | b'-') = s.get(i) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                return Err(Bad);
            }
        }
        self.pos = i;
        Ok((start, i, float))
    }

    /// Reads any value as the Python object `json.loads` makes of it.
    pub fn value(&mut self, depth: usize) -> R<Bound<'py, PyAny>> {
        let py = self.py;
        match self.peek()? {
            b'"' => self.string(),
            b'{' => {
                if depth >= MOST_DEPTH {
                    return Err(Bad);
                }
                self.open_object()?;
                let dict = PyDict::new(py);
                let mut first = true;
                while let Some(k) = self.next_key(first)? {
                    first = false;
                    let key = self.str_of(&k, true)?;
                    let value = self.value(depth + 1)?;
                    // SAFETY: GIL held; exact str keys (no Python code runs to hash them).
                    if unsafe { ffi::PyDict_SetItem(dict.as_ptr(), key.as_ptr(), value.as_ptr()) }
                        < 0
                    {
                        // SAFETY: GIL held.
                        unsafe { ffi::PyErr_Clear() };
                        return Err(Bad);
                    }
                }
                Ok(dict.into_any())
            }
            b'[' => {
                if depth >= MOST_DEPTH {
                    return Err(Bad);
                }
                self.pos += 1;
                let mut items = Vec::new();
                if self.peek()? == b']' {
                    self.pos += 1;
                } else {
                    loop {
                        items.push(self.value(depth + 1)?);
                        match self.peek()? {
                            b',' => self.pos += 1,
                            b']' => {
                                self.pos += 1;
                                break;
                            }
                            _ => return Err(Bad),
                        }
                    }
                }
                Ok(PyList::new(py, items)?.into_any())
            }
            b't' => {
                self.literal(b"true")?;
                Ok(pyo3::types::PyBool::new(py, true).to_owned().into_any())
            }
            b'f' => {
                self.literal(b"false")?;
                Ok(pyo3::types::PyBool::new(py, false).to_owned().into_any())
            }
            b'n' => {
                self.literal(b"null")?;
                Ok(py.None().into_bound(py))
            }
            b'-' | b'0'..=b'9' => {
                let (a, b, float) = self.number()?;
                // SAFETY: the span is ASCII (digits and signs).
                let text = unsafe { std::str::from_utf8_unchecked(&self.s[a..b]) };
                if float {
                    let v: f64 = text.parse().map_err(|_| Bad)?;
                    // SAFETY: GIL held.
                    own(py, unsafe { ffi::PyFloat_FromDouble(v) })
                } else {
                    // Wider than 64 bits: Python's parser keeps it exact; the slow path.
                    let v: i64 = text.parse().map_err(|_| Bad)?;
                    // SAFETY: GIL held.
                    own(py, unsafe { ffi::PyLong_FromLongLong(v) })
                }
            }
            _ => Err(Bad),
        }
    }

    /// Skips any value, checked as [`Self::value`] checks it, building nothing; its span.
    pub fn skip(&mut self, depth: usize) -> R<(usize, usize)> {
        let start = {
            self.ws();
            self.pos
        };
        match self.peek()? {
            b'"' => {
                self.text()?;
            }
            b'{' => {
                if depth >= MOST_DEPTH {
                    return Err(Bad);
                }
                self.open_object()?;
                let mut first = true;
                while self.next_key(first)?.is_some() {
                    first = false;
                    self.skip(depth + 1)?;
                }
            }
            b'[' => {
                if depth >= MOST_DEPTH {
                    return Err(Bad);
                }
                self.pos += 1;
                if self.peek()? == b']' {
                    self.pos += 1;
                } else {
                    loop {
                        self.skip(depth + 1)?;
                        match self.peek()? {
                            b',' => self.pos += 1,
                            b']' => {
                                self.pos += 1;
                                break;
                            }
                            _ => return Err(Bad),
                        }
                    }
                }
            }
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'-' | b'0'..=b'9' => {
                let (a, b, float) = self.number()?;
                if !float {
                    // SAFETY: the span is ASCII.
                    let text = unsafe { std::str::from_utf8_unchecked(&self.s[a..b]) };
                    text.parse::<i64>().map_err(|_| Bad)?;
                }
            }
            _ => return Err(Bad),
        }
        Ok((start, self.pos))
    }

    /// Steps over the value at the reader if it is exactly `value` (valid JSON the caller
    /// knows, such as the usage block sessiontree writes on every assistant message), with
    /// one comparison instead of a walk through its keys; false (nothing read) otherwise.
    pub fn skip_exactly(&mut self, value: &[u8]) -> bool {
        self.ws();
        if self.s[self.pos..].starts_with(value) {
            self.pos += value.len();
            return true;
        }
        false
    }

    /// The line's bytes in `span`.
    pub fn raw(&self, span: (usize, usize)) -> &'a [u8] {
        &self.s[span.0..span.1]
    }

    /// Starts an array (`[`); then [`Self::next_item`] until it says none is left.
    pub fn open_array(&mut self) -> R<()> {
        self.eat(b'[')
    }

    /// Whether another item follows in an array (`first` for the first call on it).
    pub fn next_item(&mut self, first: bool) -> R<bool> {
        match self.peek()? {
            b']' => {
                self.pos += 1;
                Ok(false)
            }
            b',' if !first => {
                self.pos += 1;
                Ok(true)
            }
            _ if first => Ok(true),
            _ => Err(Bad),
        }
    }
}

fn hex4(s: &[u8], at: usize) -> R<u32> {
    let digits = s.get(at..at + 4).ok_or(Bad)?;
    let mut v = 0u32;
    for &d in digits {
        v = v * 16 + char::from(d).to_digit(16).ok_or(Bad)?;
    }
    Ok(v)
}
