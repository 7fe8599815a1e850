//! Telling a file's dialect from its header and first lines.

use serde_json::{Map, Value};

use crate::engine::dialect_names::{Dialect, MIXED_IN_NATIVE, MIXED_IN_PI};
use crate::engine::dialect_translate::{is_object, RawObj};
use crate::engine::types::{LineError, FORMAT_VERSION};

fn bad<T>(msg: impl Into<String>) -> Result<T, LineError> {
    Err(LineError::new(msg))
}

/// True for a line of pi's: a JSON object with a top-level `parentId` and no `parent_id`.
pub fn is_pi_line(line: &str) -> bool {
    is_object(line) && RawObj::parse(line).is_ok_and(|o| o.has("parentId") && !o.has("parent_id"))
}

/// Which dialect a header says, if it says one: `Some(Pi(v))` for pi's `parentSession` or a
/// missing `version` (pi's v1), `Some(Native)` for sessiontree-only keys.
fn header_dialect(obj: &Map<String, Value>) -> Result<Option<Dialect>, LineError> {
    // (v1's `branchedFrom` needs no rule: a header without `version` is pi's v1.)
    let pi = obj.contains_key("parentSession");
    // sessiontree's writers always write `parent_session` (null included); `metadata`
    // says nothing (a converted header keeps it).
    let native = obj.contains_key("parent_session");
    let version = obj.get("version");
    if pi && native {
        return bad(
            "the session header mixes pi's and sessiontree's keys: the dialect cannot be told",
        );
    }
    let v = match version {
        None if native => return bad("session header has no valid integer `version`"),
        None => return Ok(Some(Dialect::Pi(1))),
        Some(v) => match v.as_u64() {
            Some(v) if (1..=FORMAT_VERSION).contains(&v) => v as u8,
            Some(v) => {
                return bad(format!(
                    "session format version {v} is newer than this reader (max {FORMAT_VERSION})"
                ))
            }
            None => return bad("session header has no valid integer `version`"),
        },
    };
    Ok(if pi {
        Some(Dialect::Pi(v))
    } else if native {
        Some(Dialect::Native)
    } else {
        None
    })
}

/// What one entry line says of its dialect: `parentId` is pi's, `parent_id` ours.
fn line_dialect(line: &str) -> Result<Option<bool>, LineError> {
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line.trim()) else {
        return Ok(None);
    };
    match (obj.contains_key("parentId"), obj.contains_key("parent_id")) {
        (true, true) => {
            bad("an entry has both `parentId` and `parent_id`: the dialect cannot be told")
        }
        (true, false) => Ok(Some(true)),
        (false, true) => Ok(Some(false)),
        (false, false) => Ok(None),
    }
}

/// Tells a file's dialect from its header and its first entry lines (`first_lines`, any
/// number, the first that says wins). A header that says nothing and entries that say
/// nothing read as sessiontree's (nothing in them can be misread).
pub fn detect<'a>(
    header: &str,
    first_lines: impl IntoIterator<Item = &'a str>,
) -> Result<Dialect, LineError> {
    let obj = match serde_json::from_str::<Value>(header) {
        Ok(Value::Object(o)) => o,
        // The header's own checks word this.
        _ => return Ok(Dialect::Native),
    };
    let said = header_dialect(&obj)?;
    let version = obj.get("version").and_then(Value::as_u64).unwrap_or(1) as u8;
    for line in first_lines {
        match (line_dialect(line)?, said) {
            (None, _) => continue,
            (Some(true), None) => return Ok(Dialect::Pi(version)),
            (Some(false), None) => return Ok(Dialect::Native),
            (Some(true), Some(Dialect::Native)) => return bad(MIXED_IN_NATIVE),
            (Some(false), Some(Dialect::Pi(_))) => return bad(MIXED_IN_PI),
            (Some(_), Some(d)) => return Ok(d),
        }
    }
    Ok(said.unwrap_or(Dialect::Native))
}
