//! Parsing one JSONL line into the few fields the engine needs, without building a DOM.
//!
//! Every line is fully validated as JSON (serde skips unknown fields by parsing them), but
//! only the base fields and the handful of type-specific fields that traversal, labels,
//! names and stats need are extracted. Type-specific fields are taken as borrowed raw JSON
//! first, so an entry of an unknown type that reuses a field name with another shape is
//! still accepted and kept byte-for-byte.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::engine::arena::{Kind, Role, HEADER_TYPE};
use crate::engine::fastline;
use crate::engine::model;
use crate::engine::schema::{self, MessageFields, Shape, Value};

/// Readers accept ids of at most this many bytes (FORMAT.md).
pub const MAX_ID_BYTES: usize = 256;

/// The token and cost totals of one `usage` object.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageSums {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Cache-read tokens.
    pub cache_read: u64,
    /// Cache-write tokens.
    pub cache_write: u64,
    /// Total tokens.
    pub total_tokens: u64,
    /// Total cost.
    pub cost_total: f64,
}

/// What the engine keeps of one entry line.
#[derive(Debug, Clone)]
pub struct ParsedEntry<'a> {
    /// The entry type.
    pub kind: Kind,
    /// The `type` string (needed for unknown types).
    pub type_name: Cow<'a, str>,
    /// The entry id.
    pub id: Cow<'a, str>,
    /// The parent id, `None` for a root.
    pub parent_id: Option<Cow<'a, str>>,
    /// The ISO timestamp.
    pub timestamp: Cow<'a, str>,
    /// `target_id` of a `leaf` or `label` entry.
    pub target_id: Option<Cow<'a, str>>,
    /// `label` of a `label` entry, or `name` of a `session_info` entry.
    pub text: Option<Cow<'a, str>>,
    /// `first_kept_entry_id` of a compaction.
    pub first_kept: Option<Cow<'a, str>>,
    /// Whether a compaction has a non-null `retained_tail`.
    pub retained_tail: bool,
    /// The role of a `message` entry.
    pub role: Role,
    /// Usage of an assistant message, a compaction or a branch summary.
    pub usage: Option<UsageSums>,
}

impl ParsedEntry<'_> {
    /// The same entry, owning its strings (a line translated from another dialect).
    pub fn into_owned(self) -> ParsedEntry<'static> {
        let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        ParsedEntry {
            kind: self.kind,
            type_name: own(self.type_name),
            id: own(self.id),
            parent_id: self.parent_id.map(own),
            timestamp: own(self.timestamp),
            target_id: self.target_id.map(own),
            text: self.text.map(own),
            first_kept: self.first_kept.map(own),
            retained_tail: self.retained_tail,
            role: self.role,
            usage: self.usage,
        }
    }
}

/// Why a line was not accepted as an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError(pub String);

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn line_err<T>(msg: impl Into<String>) -> Result<T, LineError> {
    Err(LineError(msg.into()))
}

/// An entry line's fields as captured, before any check: the top-level fields the engine
/// reads as raw JSON text (`null` included), `message` visited. `fastline` captures the
/// same from the lines it accepts; serde captures every other line.
#[derive(Deserialize, Default)]
pub(crate) struct RawEntry<'a> {
    #[serde(rename = "type", borrow)]
    pub(crate) kind: Cow<'a, str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    id: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    parent_id: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    timestamp: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    target_id: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    label: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    first_kept_entry_id: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    retained_tail: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    name: Option<&'a str>,
    #[serde(borrow, default)]
    pub(crate) message: Option<Shape<'a, MessageFields<'a>>>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    usage: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    thinking_level: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    provider: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    model_id: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    active_tool_names: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    summary: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    tokens_before: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    from_hook: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    from_id: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    custom_type: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    content: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "keep_null")]
    display: Option<&'a str>,
}

/// A present field as raw JSON, `null` included (`Option`'s own impl reads `null` as
/// absent, which would let `"from_hook": null` pass for a missing field).
fn keep_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de str>, D::Error> {
    <&'de RawValue>::deserialize(d).map(|r| Some(r.get()))
}

/// `None` for JSON `null`.
fn non_null(raw: Option<&str>) -> Option<&str> {
    raw.filter(|r| *r != "null")
}

impl<'a> RawEntry<'a> {
    /// The slot of a top-level field captured raw (every field but `type` and `message`),
    /// `None` for a key the engine does not read.
    pub(crate) fn raw_slot(&mut self, key: &str) -> Option<&mut Option<&'a str>> {
        Some(match key {
            "id" => &mut self.id,
            "parent_id" => &mut self.parent_id,
            "timestamp" => &mut self.timestamp,
            "target_id" => &mut self.target_id,
            "label" => &mut self.label,
            "first_kept_entry_id" => &mut self.first_kept_entry_id,
            "retained_tail" => &mut self.retained_tail,
            "name" => &mut self.name,
            "usage" => &mut self.usage,
            "thinking_level" => &mut self.thinking_level,
            "provider" => &mut self.provider,
            "model_id" => &mut self.model_id,
            "active_tool_names" => &mut self.active_tool_names,
            "summary" => &mut self.summary,
            "tokens_before" => &mut self.tokens_before,
            "from_hook" => &mut self.from_hook,
            "from_id" => &mut self.from_id,
            "custom_type" => &mut self.custom_type,
            "content" => &mut self.content,
            "display" => &mut self.display,
            _ => return None,
        })
    }

    /// A type-specific field by name (`null` included), as the checker reads it.
    fn field(&self, name: &str) -> Option<Value<'_>> {
        let raw = match name {
            "message" => return self.message.as_ref().map(Value::Message),
            "target_id" => self.target_id,
            "label" => self.label,
            "first_kept_entry_id" => self.first_kept_entry_id,
            "retained_tail" => self.retained_tail,
            "name" => self.name,
            "usage" => self.usage,
            "thinking_level" => self.thinking_level,
            "provider" => self.provider,
            "model_id" => self.model_id,
            "active_tool_names" => self.active_tool_names,
            "summary" => self.summary,
            "tokens_before" => self.tokens_before,
            "from_hook" => self.from_hook,
            "from_id" => self.from_id,
            "custom_type" => self.custom_type,
            "content" => self.content,
            "display" => self.display,
            // `details` and `data` hold any JSON: never captured, never checked.
            _ => None,
        };
        raw.map(Value::Raw)
    }

    /// Checks the type-specific fields of a known entry type against its model def.
    fn check_fields(&self, kind: Kind) -> Result<(), LineError> {
        let Some(def) = model::entry(kind.name()) else {
            return Ok(());
        };
        schema::check_object(&self.kind, def, |n| self.field(n)).map_err(LineError)
    }
}

/// `Some(text)` for a JSON string, `None` for null; an error for any other shape.
fn opt_str<'a>(raw: Option<&'a str>, field: &str) -> Result<Option<Cow<'a, str>>, LineError> {
    match raw {
        None => Ok(None),
        Some("null") => Ok(None),
        Some(raw) => match schema::raw_str(raw) {
            Some(s) => Ok(Some(s)),
            None => line_err(format!("`{field}` must be a string or null")),
        },
    }
}

fn req_str<'a>(raw: Option<&'a str>, field: &str) -> Result<Cow<'a, str>, LineError> {
    match opt_str(raw, field)? {
        Some(s) => Ok(s),
        None => line_err(format!("`{field}` is missing")),
    }
}

#[derive(Deserialize, Default, Debug, PartialEq)]
#[serde(default)]
pub(crate) struct RawCost {
    pub(crate) total: f64,
}

#[derive(Deserialize, Default, Debug, PartialEq)]
#[serde(default)]
pub(crate) struct RawUsage {
    pub(crate) input: f64,
    pub(crate) output: f64,
    pub(crate) cache_read: f64,
    pub(crate) cache_write: f64,
    pub(crate) total_tokens: f64,
    pub(crate) cost: Option<RawCost>,
}

impl RawUsage {
    /// The token counts, in the order of the model table's `Int` fields of `usage`
    /// (`model::USAGE`; a test holds the two together).
    pub(crate) fn tokens_mut(&mut self) -> [&mut f64; 5] {
        [
            &mut self.input,
            &mut self.output,
            &mut self.cache_read,
            &mut self.cache_write,
            &mut self.total_tokens,
        ]
    }
}

/// Usage is read leniently: a usage object of the wrong shape counts as none.
///
/// The plain objects writers write are read in one pass (`fastline::usage_numbers`);
/// serde reads the rest, so both agree on every object.
pub(crate) fn parse_usage(raw: Option<&str>) -> Option<UsageSums> {
    let raw = raw?;
    let usage = match fastline::usage_numbers(raw) {
        Some(u) => u,
        None => serde_json::from_str(raw).ok()?,
    };
    let tokens = |v: f64| {
        if v.is_finite() && v > 0.0 {
            v as u64
        } else {
            0
        }
    };
    Some(UsageSums {
        input: tokens(usage.input),
        output: tokens(usage.output),
        cache_read: tokens(usage.cache_read),
        cache_write: tokens(usage.cache_write),
        total_tokens: tokens(usage.total_tokens),
        cost_total: usage.cost.map_or(0.0, |c| c.total),
    })
}

/// Checks an entry id: non-empty, at most [`MAX_ID_BYTES`].
pub fn check_id(id: &str, max_bytes: usize) -> Result<(), LineError> {
    if id.is_empty() {
        return line_err("`id` is empty");
    }
    if id.len() > max_bytes {
        return line_err(format!(
            "`id` is {} bytes, over the limit of {max_bytes}",
            id.len()
        ));
    }
    Ok(())
}

/// Parses one entry line (without its newline).
pub fn parse_entry(line: &str, max_id_bytes: usize) -> Result<ParsedEntry<'_>, LineError> {
    match parse_entry_fast(line, max_id_bytes, fastline::MAX_DEPTH) {
        Some(result) => result,
        None => parse_entry_serde(line, max_id_bytes),
    }
}

/// [`parse_entry`] of a line that `fastline` accepts (it is then no deeper than
/// `max_depth`); `None` when it leaves the line to serde.
pub fn parse_entry_fast(
    line: &str,
    max_id_bytes: usize,
    max_depth: usize,
) -> Option<Result<ParsedEntry<'_>, LineError>> {
    fastline::capture(line, max_depth).map(|raw| check_entry(raw, max_id_bytes))
}

/// [`parse_entry_fast`] of a v2 or v3 pi line read in place (`fastline::capture_pi`):
/// `None` when the line must take `dialect::scan_to_native` or the full translation.
pub fn parse_pi_entry_fast(
    line: &str,
    max_id_bytes: usize,
    max_depth: usize,
) -> Option<Result<ParsedEntry<'_>, LineError>> {
    fastline::capture_pi(line, max_depth).map(|raw| check_entry(raw, max_id_bytes))
}

/// [`parse_entry`] through serde alone (whose messages the load report quotes).
pub fn parse_entry_serde(line: &str, max_id_bytes: usize) -> Result<ParsedEntry<'_>, LineError> {
    match serde_json::from_str(line) {
        Ok(raw) => check_entry(raw, max_id_bytes),
        Err(e) => line_err(format!("invalid JSON entry: {e}")),
    }
}

/// Checks a captured line and keeps what the engine needs.
fn check_entry(raw: RawEntry<'_>, max_id_bytes: usize) -> Result<ParsedEntry<'_>, LineError> {
    let kind = Kind::from_type(&raw.kind);
    if kind == Kind::Header {
        return line_err("a second session header");
    }
    let id = req_str(raw.id, "id")?;
    check_id(&id, max_id_bytes)?;
    if raw.parent_id.is_none() {
        return line_err("`parent_id` is missing (null for a root)");
    }
    let parent_id = opt_str(raw.parent_id, "parent_id")?;
    let timestamp = req_str(raw.timestamp, "timestamp")?;
    // Before the model's checks, which would name the entry type in this message.
    if kind == Kind::Message && !matches!(raw.message, Some(Shape::Object(_))) {
        return line_err("`message` must be an object");
    }
    raw.check_fields(kind)?;
    let mut entry = ParsedEntry {
        kind,
        type_name: raw.kind.clone(),
        id,
        parent_id,
        timestamp,
        target_id: None,
        text: None,
        first_kept: None,
        retained_tail: false,
        role: Role::None,
        usage: None,
    };
    match kind {
        Kind::Message => {
            let message: &MessageFields<'_> = match &raw.message {
                Some(Shape::Object(m)) => m,
                _ => return line_err("`message` must be an object"),
            };
            let role = req_str(message.get("role"), "message.role")?;
            entry.role = Role::from_name(&role);
            if entry.role == Role::Assistant {
                entry.usage = message.usage.or_else(|| parse_usage(message.get("usage")));
            }
        }
        Kind::Leaf => entry.target_id = opt_str(raw.target_id, "target_id")?,
        Kind::Label => {
            entry.target_id = Some(req_str(raw.target_id, "target_id")?);
            entry.text = opt_str(raw.label, "label")?;
        }
        Kind::SessionInfo => entry.text = opt_str(raw.name, "name")?,
        Kind::Compaction => {
            entry.first_kept = opt_str(raw.first_kept_entry_id, "first_kept_entry_id")?;
            entry.retained_tail = non_null(raw.retained_tail).is_some();
            entry.usage = parse_usage(raw.usage);
        }
        Kind::BranchSummary => entry.usage = parse_usage(raw.usage),
        _ => {}
    }
    Ok(entry)
}

#[derive(Deserialize)]
struct RawHeader<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    version: Option<serde_json::Value>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    timestamp: Option<&'a RawValue>,
    #[serde(borrow, default)]
    cwd: Option<&'a RawValue>,
    #[serde(borrow, default)]
    parent_session: Option<&'a RawValue>,
    #[serde(borrow, default)]
    metadata: Option<&'a RawValue>,
}

/// The newest file-format version this engine reads and writes.
pub const FORMAT_VERSION: u64 = 3;

/// Checks the header line, every field of it (FORMAT.md's header table); returns the
/// session id. A header that opens is one Python's `SessionHeader` reads back.
pub fn parse_header(line: &str) -> Result<String, LineError> {
    let raw: RawHeader<'_> = match serde_json::from_str(line) {
        Ok(raw) => raw,
        Err(e) => return line_err(format!("malformed session header: {e}")),
    };
    if raw.kind != HEADER_TYPE {
        return line_err(format!(
            "line 1 is a {:?} entry, not a session header",
            raw.kind
        ));
    }
    match raw.version.as_ref().and_then(serde_json::Value::as_u64) {
        Some(v) if (1..=FORMAT_VERSION).contains(&v) => {}
        Some(v) => {
            return line_err(format!(
                "session format version {v} is newer than this reader (max {FORMAT_VERSION})"
            ))
        }
        None => return line_err("session header has no valid integer `version`"),
    }
    let in_header = |e: LineError| LineError(format!("session header: {e}"));
    let id = req_str(raw.id.map(RawValue::get), "id").map_err(in_header)?;
    if id.is_empty() {
        return line_err("session header has an empty `id`");
    }
    let timestamp = req_str(raw.timestamp.map(RawValue::get), "timestamp").map_err(in_header)?;
    if let Err(why) = check_timestamp(&timestamp) {
        return line_err(format!(
            "session header: `timestamp` {timestamp:?} is not an ISO-8601 time ({why})"
        ));
    }
    req_str(raw.cwd.map(RawValue::get), "cwd").map_err(in_header)?;
    opt_str(raw.parent_session.map(RawValue::get), "parent_session").map_err(in_header)?;
    if let Some(m) = raw.metadata {
        if m.get() != "null" && !m.get().starts_with('{') {
            return line_err("session header: `metadata` must be an object or null");
        }
    }
    Ok(id.into_owned())
}

/// Checks an ISO-8601 date-time as sessiontree's Python reader accepts it:
/// `YYYY-MM-DD[T ]HH:MM:SS[.fraction][Z|±HH[:]MM]`, a real date and time, within years
/// 1 to 9999 once converted to UTC.
pub fn check_timestamp(s: &str) -> Result<(), &'static str> {
    let b = s.as_bytes();
    let digits = |at: usize, n: usize| -> Option<i64> {
        let part = b.get(at..at + n)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |v, d| v * 10 + i64::from(d - b'0')))
    };
    let sep = |at: usize, ok: &[u8]| b.get(at).is_some_and(|c| ok.contains(c));
    let shape = "expected YYYY-MM-DDTHH:MM:SS";
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        digits(0, 4),
        digits(5, 2),
        digits(8, 2),
        digits(11, 2),
        digits(14, 2),
        digits(17, 2),
    ) else {
        return Err(shape);
    };
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return Err(shape);
    }
    let mut at = 19;
    if sep(at, b".,") {
        let n = b[at + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if !(1..=9).contains(&n) {
            return Err("a fraction of a second has 1 to 9 digits");
        }
        at += 1 + n;
    }
    let offset_minutes = match b.get(at) {
        None => 0,
        Some(b'Z' | b'z') if at + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) => {
            let colon = usize::from(sep(at + 3, b":"));
            let (Some(h), Some(m)) = (digits(at + 1, 2), digits(at + 3 + colon, 2)) else {
                return Err("a bad UTC offset");
            };
            if at + 5 + colon != b.len() {
                return Err("text after the UTC offset");
            }
            if h > 23 || m > 59 {
                return Err("a UTC offset out of range");
            }
            if sign == b'-' {
                -(h * 60 + m)
            } else {
                h * 60 + m
            }
        }
        Some(_) => return Err("text after the time"),
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if year < 1 || !(1..=12).contains(&month) {
        return Err("no such date");
    }
    if day < 1 || day > month_days[(month - 1) as usize] {
        return Err("no such date");
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err("no such time");
    }
    let utc = days_from_civil(year, month, day) * 1440 + hour * 60 + minute - offset_minutes;
    let (first, last) = (
        days_from_civil(1, 1, 1) * 1440,
        days_from_civil(9999, 12, 31) * 1440 + 1439,
    );
    if !(first..=last).contains(&utc) {
        return Err("outside the years 1 to 9999 in UTC");
    }
    Ok(())
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_timestamps_are_checked_as_python_reads_them() {
        for ok in [
            "2026-11-30T16:48:30.123Z",
            "2026-11-30T16:48:30Z",
            "2026-11-30 16:48:30",
            "2026-11-30t16:48:30,5+01:00",
            "2024-02-29T00:00:00.123456789-0530",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59.999Z",
        ] {
            assert_eq!(check_timestamp(ok), Ok(()), "{ok}");
        }
        for bad in [
            "not a time",
            "",
            "2026-11-30",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T23:60:00Z",
            "2026-11-30T23:59:60Z",
            "2026-11-30T16:48:30.Z",
            "2026-11-30T16:48:30.1234567890Z",
            "2026-11-30T16:48:30+24:00",
            "2026-11-30T16:48:30Zjunk",
            "2026-11-30T16:48:30+01:00:00",
            "0000-01-01T00:00:00Z",
            "0001-01-01T00:00:00+00:01",
            "9999-12-31T23:59:59-00:01",
            "２０２６-11-30T16:48:30Z",
        ] {
            assert!(check_timestamp(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn headers_are_checked_field_by_field() {
        let h = |extra: &str| {
            format!(
                r#"{{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z"{extra}}}"#
            )
        };
        assert_eq!(parse_header(&h(r#","cwd":"/""#)).unwrap(), "s");
        assert!(parse_header(&h(
            r#","cwd":"/","parent_session":null,"metadata":{"a":[1]}"#
        ))
        .is_ok());
        for bad in [
            h(""),
            h(r#","cwd":5"#),
            h(r#","cwd":"/","parent_session":7"#),
            h(r#","cwd":"/","metadata":[1]"#),
            h(r#","cwd":"/","metadata":"x""#),
        ] {
            assert!(parse_header(&bad).is_err(), "{bad}");
        }
        let bad_time =
            r#"{"type":"session","version":3,"id":"s","timestamp":"not a time","cwd":"/"}"#;
        assert!(parse_header(bad_time).unwrap_err().0.contains("ISO-8601"));
    }

    #[test]
    fn parses_base_fields_and_borrows() {
        let e = parse_entry(
            r#"{"type":"message","id":"a1","parent_id":null,"timestamp":"t","message":{"role":"user","content":"hi","timestamp":1}}"#,
            256,
        )
        .unwrap();
        assert_eq!(e.kind, Kind::Message);
        assert_eq!(e.role, Role::User);
        assert!(matches!(e.id, Cow::Borrowed("a1")));
        assert_eq!(e.parent_id, None);
    }

    #[test]
    fn escaped_ids_are_decoded() {
        let e = parse_entry(
            r#"{"type":"custom","id":"a\u0062","parent_id":"p\"q","timestamp":"t","custom_type":"x"}"#,
            256,
        )
        .unwrap();
        assert_eq!(e.id, "ab");
        assert_eq!(e.parent_id.as_deref(), Some("p\"q"));
    }

    #[test]
    fn assistant_usage_is_summed() {
        let e = parse_entry(
            r#"{"type":"message","id":"a","parent_id":null,"timestamp":"t","message":{"role":"assistant","content":[],"provider":"p","model":"m","timestamp":1,"usage":{"input":10,"output":5,"cache_read":1,"cache_write":2,"total_tokens":18,"cost":{"total":0.5}}}}"#,
            256,
        )
        .unwrap();
        let u = e.usage.unwrap();
        assert_eq!((u.input, u.output, u.total_tokens), (10, 5, 18));
        assert!((u.cost_total - 0.5).abs() < 1e-12);
    }

    #[test]
    fn unknown_types_may_reuse_field_names() {
        let e = parse_entry(
            r#"{"type":"future","id":"a","parent_id":null,"timestamp":"t","message":[1,{"x":2}],"name":{"n":1},"label":7}"#,
            256,
        )
        .unwrap();
        assert_eq!(e.kind, Kind::Unknown);
        assert_eq!(e.type_name, "future");
    }

    #[test]
    fn rejects_bad_lines() {
        let cases = [
            ("{", "invalid JSON"),
            ("[]", "invalid JSON"),
            (
                r#"{"type":"custom","parent_id":null,"timestamp":"t"}"#,
                "`id` is missing",
            ),
            (
                r#"{"type":"custom","id":"","parent_id":null,"timestamp":"t"}"#,
                "empty",
            ),
            (
                r#"{"type":"custom","id":5,"parent_id":null,"timestamp":"t"}"#,
                "`id` must be",
            ),
            (
                r#"{"type":"custom","id":"a","parent_id":3,"timestamp":"t"}"#,
                "parent_id",
            ),
            (
                r#"{"type":"custom","id":"a","parent_id":null}"#,
                "timestamp",
            ),
            (
                r#"{"type":"message","id":"a","parent_id":null,"timestamp":"t","message":"x"}"#,
                "object",
            ),
            (
                r#"{"type":"label","id":"a","parent_id":null,"timestamp":"t","label":"x"}"#,
                "target_id",
            ),
            (
                r#"{"type":"custom","id":"a","id":"b","parent_id":null,"timestamp":"t"}"#,
                "duplicate",
            ),
            (
                r#"{"type":"session","version":3,"id":"s","timestamp":"t"}"#,
                "header",
            ),
        ];
        for (line, want) in cases {
            let got = parse_entry(line, 256).unwrap_err().0;
            assert!(got.contains(want), "{line}: {got}");
        }
        let long = format!(
            r#"{{"type":"custom","id":"{}","parent_id":null,"timestamp":"t"}}"#,
            "x".repeat(300)
        );
        assert!(parse_entry(&long, 256)
            .unwrap_err()
            .0
            .contains("over the limit"));
    }

    #[test]
    fn deep_nesting_never_overflows_the_stack() {
        // Skipped fields are walked without recursion; a known field past the parser's
        // recursion limit is an error. The store's depth limit refuses both earlier.
        let wrap = |field: &str| {
            format!(
                r#"{{"type":"message","id":"a","parent_id":null,"timestamp":"t","{field}":{}{}}}"#,
                "[".repeat(100_000),
                "]".repeat(100_000)
            )
        };
        // Either outcome is fine for an unknown field; what matters is returning at all.
        let _ = parse_entry(&wrap("data"), 256);
        assert!(parse_entry(&wrap("message"), 256).is_err());
    }

    #[test]
    fn type_specific_fields_are_checked() {
        let base = r#""id":"a","parent_id":null,"timestamp":"t""#;
        let bad = [
            (
                r#""type":"thinking_level_change","thinking_level":"ultra""#,
                "thinking_level",
            ),
            (
                r#""type":"model_change","provider":5,"model_id":"m""#,
                "provider",
            ),
            (
                r#""type":"active_tools_change","active_tool_names":["a",1]"#,
                "active_tool_names",
            ),
            (
                r#""type":"compaction","summary":"s","first_kept_entry_id":null,"tokens_before":1.5"#,
                "tokens_before",
            ),
            (
                r#""type":"compaction","summary":"s","first_kept_entry_id":null,"tokens_before":1,"retained_tail":[{"role":"user"}]"#,
                "timestamp",
            ),
            (r#""type":"branch_summary","summary":"s""#, "from_id"),
            (
                r#""type":"custom_message","custom_type":"c","content":["x"]"#,
                "content",
            ),
            (r#""type":"label","target_id":"x","label":3"#, "label"),
            (r#""type":"session_info","name":{}"#, "name"),
            (r#""type":"session_info""#, "`name` is missing"),
            (
                r#""type":"compaction","summary":"s","first_kept_entry_id":null,"tokens_before":1,"from_hook":null"#,
                "from_hook",
            ),
            (
                r#""type":"custom_message","custom_type":"c","content":"x","display":null"#,
                "display",
            ),
            (r#""type":"leaf""#, "target_id"),
            (
                r#""type":"custom","custom_type":"c","parent_id":null,"parent_id":null"#,
                "duplicate",
            ),
            (r#""type":"label","target_id":"x""#, "`label` is missing"),
            (
                r#""type":"message","message":{"role":"user","timestamp":1}"#,
                "content",
            ),
            (
                r#""type":"message","message":{"role":"user","content":[{"type":"tool_call"}],"timestamp":1}"#,
                "not allowed",
            ),
            (
                r#""type":"message","message":{"role":"assistant","content":[{"type":"text"}],"provider":"p","model":"m","timestamp":1}"#,
                "`text` is missing",
            ),
            (
                r#""type":"message","message":{"role":"assistant","content":[],"provider":"p","model":"m","timestamp":1,"stop_reason":"done"}"#,
                "stop_reason",
            ),
            (
                r#""type":"message","message":{"role":"assistant","content":[],"provider":"p","model":"m","timestamp":1,"usage":{"input":1.5}}"#,
                "usage",
            ),
            (
                r#""type":"message","message":{"role":"tool_result","tool_call_id":"c","tool_name":"n","content":"x","timestamp":1}"#,
                "array",
            ),
            (
                r#""type":"message","message":{"role":"user","content":"x","content":"y","timestamp":1}"#,
                "duplicate",
            ),
        ];
        for (fields, want) in bad {
            let line = format!("{{{fields},{base}}}");
            let got = parse_entry(&line, 256).unwrap_err().0;
            assert!(got.contains(want), "{line}: {got}");
        }
        let good = [
            r#""type":"message","message":{"role":"future_role","anything":[1]}"#,
            r#""type":"message","message":{"role":"user","content":[{"type":"text","text":"x","extra":1},{"type":"image","data":"b","mime_type":"image/png"}],"timestamp":1,"new_field":true}"#,
            r#""type":"message","message":{"role":"assistant","content":[{"type":"thinking","thinking":"t","redacted":true},{"type":"tool_call","id":"i","name":"n","arguments":{}}],"provider":"p","model":"m","timestamp":1,"usage":{"input":1,"cost":{"total":0.5}},"stop_reason":"tool_use"}"#,
            r#""type":"compaction","summary":"s","tokens_before":1,"retained_tail":[{"role":"user","content":"x","timestamp":2}],"first_kept_entry_id":null"#,
            r#""type":"leaf","target_id":null"#,
        ];
        for fields in good {
            let line = format!("{{{fields},{base}}}");
            assert!(parse_entry(&line, 256).is_ok(), "{line}");
        }
    }

    #[test]
    fn every_checked_entry_field_is_captured() {
        for def in model::ENTRIES {
            for field in def.fields {
                if matches!(field.kind, model::FieldKind::Any) {
                    continue;
                }
                let line = format!(
                    r#"{{"type":"x","id":"a","parent_id":null,"timestamp":"t","{}":{{}}}}"#,
                    field.key
                );
                let raw: RawEntry<'_> = serde_json::from_str(&line).unwrap();
                assert!(raw.field(field.key).is_some(), "{}", field.key);
            }
        }
    }

    #[test]
    fn the_fast_capture_takes_every_field_serde_takes() {
        let mut keys: Vec<&str> = model::ENTRY_BASE.fields.iter().map(|f| f.key).collect();
        for def in model::ENTRIES {
            for f in def.fields {
                if !matches!(f.kind, model::FieldKind::Any) && f.key != "message" {
                    keys.push(f.key);
                }
            }
        }
        keys.sort_unstable();
        keys.dedup();
        let members: Vec<String> = keys
            .iter()
            .map(|k| format!(r#""{k}":[{{"k":"{k}"}}]"#))
            .collect();
        let line = format!(
            r#"{{"type":"x",{},"message":{{"role":"r"}}}}"#,
            members.join(",")
        );
        let mut fast = fastline::capture(&line, 10).unwrap();
        let mut serde: RawEntry<'_> = serde_json::from_str(&line).unwrap();
        for key in keys {
            let want = format!(r#"[{{"k":"{key}"}}]"#);
            assert_eq!(fast.raw_slot(key).copied(), Some(Some(&*want)), "{key}");
            assert_eq!(serde.raw_slot(key).copied(), Some(Some(&*want)), "{key}");
            assert!(fast.field(key).is_some() || matches!(key, "id" | "parent_id" | "timestamp"));
        }
    }

    #[test]
    fn errors_name_the_type_and_the_path() {
        let base = r#""id":"a","parent_id":null,"timestamp":"t""#;
        let asst = r#""type":"message","message":{"role":"assistant","provider":"p","model":"m","timestamp":1"#;
        let cases = [
            (
                format!(r#"{asst},"content":[],"usage":{{"input":1.5}}}}"#),
                "assistant message.usage: `input` must be an integer",
            ),
            (
                format!(r#"{asst},"content":[],"usage":{{"cost":{{"total":"x"}}}}}}"#),
                "assistant message.usage.cost: `total` must be a number",
            ),
            (
                format!(r#"{asst},"content":[{{"type":"text"}}]}}"#),
                "assistant message text block: `text` is missing",
            ),
            (
                format!(r#"{asst},"content":[{{"type":"image","data":"d","mime_type":"m"}}]}}"#),
                r#"assistant message: content block type "image" is not allowed here"#,
            ),
            (
                format!(r#"{asst},"content":[3]}}"#),
                "assistant message: a content block must be an object",
            ),
            (
                format!(r#"{asst},"content":"x"}}"#),
                "assistant message: `content` must be an array",
            ),
            (
                r#""type":"message","message":{"role":"user","content":3,"timestamp":1}"#.into(),
                "user message: `content` must be a string or an array",
            ),
            (
                r#""type":"thinking_level_change","thinking_level":"ultra""#.into(),
                "thinking_level_change: `thinking_level` must be one of off, minimal, low, medium, high, xhigh",
            ),
            (
                r#""type":"active_tools_change","active_tool_names":[1]"#.into(),
                "`active_tool_names` must be an array of strings",
            ),
            (
                r#""type":"compaction","summary":"s","first_kept_entry_id":null,"tokens_before":1,"retained_tail":[1]"#.into(),
                "retained_tail: every item must be a message object",
            ),
            (
                r#""type":"compaction","summary":"s","first_kept_entry_id":null,"tokens_before":1,"usage":[]"#.into(),
                "compaction: `usage` must be an object or null",
            ),
            (
                r#""type":"message","message":null"#.into(),
                "`message` must be an object",
            ),
            (
                r#""type":"message","message":{"role":1}"#.into(),
                "message: `role` must be a string",
            ),
            (
                r#""type":"label","target_id":"x","label":3"#.into(),
                "label: `label` must be a string or null",
            ),
        ];
        for (fields, want) in cases {
            let line = format!("{{{fields},{base}}}");
            assert_eq!(parse_entry(&line, 256).unwrap_err().0, want, "{line}");
        }
    }

    #[test]
    fn header_rules() {
        assert_eq!(
            parse_header(
                r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00Z","cwd":"/"}"#
            )
            .unwrap(),
            "s1"
        );
        assert!(
            parse_header(r#"{"type":"session","version":4,"id":"s","timestamp":"t"}"#)
                .unwrap_err()
                .0
                .contains("newer")
        );
        assert!(parse_header(r#"{"type":"session","id":"s","timestamp":"t"}"#).is_err());
        assert!(
            parse_header(r#"{"type":"message","version":3,"id":"s","timestamp":"t"}"#).is_err()
        );
        assert!(parse_header("garbage").is_err());
    }
}
