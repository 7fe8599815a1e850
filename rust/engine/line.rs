//! Reading one JSONL line into the few fields the engine needs, without building a DOM.
//!
//! Every line is fully validated as JSON by one serde_json pass (`capture.rs`), which
//! captures the base fields and the type-specific fields that traversal, labels, names,
//! stats and the model's checks need, then checked against the model (`schema.rs`). Fields
//! are taken as borrowed raw JSON first, so an entry of an unknown type that reuses a
//! field name with another shape is still accepted and kept byte-for-byte.
//!
//! A pi line (v2, v3) is read by the same pass through pi's names; the few it cannot read
//! (and any it refuses) are translated first (`dialect_translate.rs`) and read as ours.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::engine::capture::{capture, Captured, RawEntry};
use crate::engine::dialect_names::Dialect;
use crate::engine::dialect_translate::entry_to_native;
use crate::engine::model;
use crate::engine::schema;
use crate::engine::types::{
    get, Json, Kind, LineError, ParsedEntry, Part, ReadLimits, Refusal, Role, UsageSums,
    HEADER_TYPE,
};

pub use crate::engine::types::{FORMAT_VERSION, MAX_ID_BYTES};

fn line_err<T>(msg: impl Into<String>) -> Result<T, LineError> {
    Err(LineError::new(msg))
}

/// `Some(text)` for a JSON string, `None` for null; an error for any other shape.
fn opt_str<'a>(raw: Option<&Part<'a>>, field: &str) -> Result<Option<Cow<'a, str>>, LineError> {
    match raw {
        None => Ok(None),
        Some(part) if part.json() == Json::Null => Ok(None),
        Some(part) => match part.str() {
            Some(s) => Ok(Some(s)),
            None => line_err(format!("`{field}` must be a string or null")),
        },
    }
}

fn req_str<'a>(raw: Option<&Part<'a>>, field: &str) -> Result<Cow<'a, str>, LineError> {
    match opt_str(raw, field)? {
        Some(s) => Ok(s),
        None => line_err(format!("`{field}` is missing")),
    }
}

/// The token counts of a `usage` object, in the order of the model table's `Int` fields of
/// `usage` (`model::USAGE`; a test holds the two together).
pub(crate) const USAGE_TOKENS: [&str; 5] = [
    "input",
    "output",
    "cache_read",
    "cache_write",
    "total_tokens",
];

/// Sums a `usage` object as captured. Usage is read leniently: a usage of the wrong shape
/// (a known field that is not a finite number, a `cost` that is neither an object nor
/// null) counts as none.
pub(crate) fn parse_usage(part: Option<&Part<'_>>) -> Option<UsageSums> {
    let Some(Part::Object(fields)) = part else {
        return None;
    };
    let number = |p: &Part<'_>| -> Option<f64> {
        let raw = p
            .raw()
            .filter(|_| matches!(p.json(), Json::Int | Json::Float))?;
        raw.parse::<f64>().ok().filter(|v| v.is_finite())
    };
    let mut tokens = [0u64; 5];
    for (slot, key) in tokens.iter_mut().zip(USAGE_TOKENS) {
        if let Some(p) = get(fields, key) {
            let v = number(p)?;
            *slot = if v > 0.0 { v as u64 } else { 0 };
        }
    }
    let cost_total = match get(fields, "cost") {
        None => 0.0,
        Some(p) if p.json() == Json::Null => 0.0,
        Some(Part::Object(cost)) => match get(cost, "total") {
            None => 0.0,
            Some(p) => number(p)?,
        },
        Some(_) => return None,
    };
    let [input, output, cache_read, cache_write, total_tokens] = tokens;
    Some(UsageSums {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens,
        cost_total,
    })
}

/// Checks an entry id: non-empty, at most `max_bytes`.
pub fn check_id(id: &str, max_bytes: usize) -> Result<(), LineError> {
    if id.is_empty() {
        return line_err("`id` is empty");
    }
    if id.len() > max_bytes {
        return Err(LineError {
            refusal: Refusal::IdTooLong,
            ..LineError::new(format!(
                "`id` is {} bytes, over the limit of {max_bytes}",
                id.len()
            ))
        });
    }
    Ok(())
}

/// Reads one entry line of ours (without its newline).
pub fn parse_entry(line: &str, limits: ReadLimits) -> Result<ParsedEntry<'_>, LineError> {
    match capture(line, false, limits.max_depth)? {
        Captured::Entry(raw) => check_entry(raw, limits.max_id_bytes),
        // Only a pi line is ever left to the translation.
        Captured::Translate => line_err("invalid JSON entry"),
    }
}

/// Reads one entry line of a file in `dialect` (without its newline). A pi line is read
/// through pi's names, or translated first (v1 lines; what the names leave to the
/// translation; any line they refuse, so the refusal is worded as ours). `v1` is, for a v1
/// file, the line's index (the header is 0) and its parent's id when known.
pub fn read_entry<'a>(
    line: &'a str,
    dialect: Dialect,
    v1: Option<(u64, Option<&str>)>,
    limits: ReadLimits,
) -> Result<ParsedEntry<'a>, LineError> {
    if !dialect.is_pi() {
        return parse_entry(line, limits);
    }
    if dialect != Dialect::Pi(1) {
        match capture(line, true, limits.max_depth) {
            Ok(Captured::Entry(raw)) => {
                if let Ok(entry) = check_entry(raw, limits.max_id_bytes) {
                    return Ok(entry);
                }
            }
            Err(e) if e.refusal == Refusal::TooDeep => return Err(e),
            Ok(Captured::Translate) | Err(_) => {}
        }
    }
    let native = entry_to_native(line, dialect, v1)?;
    parse_entry(&native, limits).map(ParsedEntry::into_owned)
}

/// Checks a captured line and keeps what the engine needs.
pub(crate) fn check_entry(
    raw: RawEntry<'_>,
    max_id_bytes: usize,
) -> Result<ParsedEntry<'_>, LineError> {
    let kind = Kind::from_type(&raw.kind);
    if kind == Kind::Header {
        return line_err("a second session header");
    }
    let id = req_str(raw.id.as_ref(), "id")?;
    check_id(&id, max_id_bytes)?;
    if raw.parent_id.is_none() {
        return line_err("`parent_id` is missing (null for a root)");
    }
    let parent_id = opt_str(raw.parent_id.as_ref(), "parent_id")?;
    let timestamp = req_str(raw.timestamp.as_ref(), "timestamp")?;
    // Before the model's checks, which would name the entry type in this message.
    let message = match &raw.message {
        Some(Part::Object(m)) => Some(m),
        _ if kind == Kind::Message => return line_err("`message` must be an object"),
        _ => None,
    };
    if let Some(def) = model::entry(kind.name()) {
        schema::check_object(&raw.kind, def, |n| raw.field(n)).map_err(LineError::new)?;
    }
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
            let message = message.map_or(&[][..], |m| &m[..]);
            let role = req_str(get(message, "role"), "message.role")?;
            entry.role = Role::from_name(&role);
            if entry.role == Role::Assistant {
                entry.usage = parse_usage(get(message, "usage"));
            }
        }
        Kind::Leaf => entry.target_id = opt_str(raw.target_id.as_ref(), "target_id")?,
        Kind::Label => {
            entry.target_id = Some(req_str(raw.target_id.as_ref(), "target_id")?);
            entry.text = opt_str(raw.label.as_ref(), "label")?;
        }
        Kind::SessionInfo => entry.text = opt_str(raw.name.as_ref(), "name")?,
        Kind::Compaction => {
            entry.first_kept = opt_str(raw.first_kept_entry_id.as_ref(), "first_kept_entry_id")?;
            entry.retained_tail = raw
                .retained_tail
                .as_ref()
                .is_some_and(|p| p.json() != Json::Null);
            entry.usage = parse_usage(raw.usage.as_ref());
        }
        Kind::BranchSummary => entry.usage = parse_usage(raw.usage.as_ref()),
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
    let in_header = |e: LineError| LineError::new(format!("session header: {}", e.message));
    let id = req_str(raw.id.map(|r| Part::Raw(r.get())).as_ref(), "id").map_err(in_header)?;
    if id.is_empty() {
        return line_err("session header has an empty `id`");
    }
    let timestamp = req_str(
        raw.timestamp.map(|r| Part::Raw(r.get())).as_ref(),
        "timestamp",
    )
    .map_err(in_header)?;
    if let Err(why) = check_timestamp(&timestamp) {
        return line_err(format!(
            "session header: `timestamp` {timestamp:?} is not an ISO-8601 time ({why})"
        ));
    }
    req_str(raw.cwd.map(|r| Part::Raw(r.get())).as_ref(), "cwd").map_err(in_header)?;
    opt_str(
        raw.parent_session.map(|r| Part::Raw(r.get())).as_ref(),
        "parent_session",
    )
    .map_err(in_header)?;
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
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests;
