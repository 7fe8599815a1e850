//! pi's dialect: the same tree of entries, written by pi (the TypeScript coding agent this
//! format descends from) with camelCase keys and its own role and block names.
//!
//! The engine reads a pi line by mapping its keys and values to ours as it reads
//! (`capture.rs`, from [`dialect_names`]'s table; a few lines through the full translation,
//! `dialect_translate.rs`), and writes to one by translating each new line back, so the arena, the checks and the
//! Python model are the same for both. The translation is driven by the model table
//! (`model.rs`): a field's pi key is the camelCase of its key ([`pi_key`]), a message
//! role's and a block type's pi tag the camelCase of its tag, an enum value's (a stop
//! reason) the camelCase of the value; the few names pi spells otherwise are in
//! [`PI_KEYS`]. Keys the model does not know are kept as they are, in both directions, and
//! so are `details`, `data`, `arguments` and `metadata`, which hold the application's JSON.
//!
//! pi's file versions: v1 (no `version` in the header, entries without ids: ids are
//! assigned from the line number, parents as a chain, `firstKeptEntryIndex` becomes
//! `firstKeptEntryId`), v2 (ids; the message role `hookMessage` reads as `custom`) and v3.
//! pi rewrites old files when it opens them; sessiontree never does, it reads them as if
//! migrated, and only v3 files are written to.
//!
//! pi has no `leaf` entry (its leaf is the last entry of the file). A sessiontree leaf
//! move in a pi file is written as a `custom` entry of type [`LEAF_MARKER`] hung under the
//! target, which pi ignores in the context, so pi resumes at the target too; its `data`
//! names the leaf it moved from, and sessiontree reads it back as the `leaf` entry it was
//! (parent: that leaf; target: the marker's parent).
//!
//! This module gathers the parts: the names and the [`Dialect`] (`dialect_names.rs`),
//! detection (`dialect_detect.rs`), the translation both ways (`dialect_translate.rs`),
//! and converting a whole document ([`convert_document`]).

pub use crate::engine::dialect_detect::{detect, is_pi_line};
pub use crate::engine::dialect_names::{
    camel, pi_key, Dialect, LEAF_MARKER, MIXED_IN_NATIVE, MIXED_IN_PI,
};
use crate::engine::dialect_translate::v1_id;
pub use crate::engine::dialect_translate::{
    entry_to_native, entry_to_pi, header_to_native, header_to_pi, header_to_pi_new,
};
use crate::engine::types::LineError;

/// Translates a session document (header first, one entry per line) into dialect `to`
/// (`"pi"`: pi's v3; `"sessiontree"`), told the document's own dialect as a file's is.
/// Blank lines, lines that are not JSON and a torn last line (no newline) are dropped, as
/// every reader skips them; a line that cannot be translated (one of the other dialect)
/// fails with `corrupt`, naming its line.
pub fn convert_document(data: &[u8], to: &str) -> crate::engine::Result<Vec<u8>> {
    use crate::engine::error::{EngineError, ErrorCode};
    let corrupt = |line: usize, e: LineError| {
        EngineError::new(ErrorCode::Corrupt, format!("line {line}: {}", e.detail()))
    };
    let to_pi = match to {
        "pi" => true,
        "sessiontree" => false,
        other => {
            return Err(EngineError::new(
                ErrorCode::InvalidArgument,
                format!("unknown dialect {other:?} (\"pi\" or \"sessiontree\")"),
            ))
        }
    };
    let text = std::str::from_utf8(data)
        .map_err(|_| EngineError::new(ErrorCode::Corrupt, "the document is not UTF-8"))?;
    // Complete lines only: a torn tail is not an entry.
    let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    let mut lines = complete.lines();
    let header = lines
        .next()
        .ok_or_else(|| EngineError::new(ErrorCode::Corrupt, "missing session header"))?;
    let rest: Vec<&str> = lines.collect();
    let from = detect(header, rest.iter().copied().take(64)).map_err(|e| corrupt(1, e))?;
    let mut out = String::with_capacity(data.len() + data.len() / 8);
    let header = match (from.is_pi(), to_pi) {
        (true, true) => header_to_pi(&header_to_native(header).map_err(|e| corrupt(1, e))?),
        (true, false) => header_to_native(header),
        (false, true) => header_to_pi(header),
        (false, false) => Ok(header.to_owned()),
    }
    .map_err(|e| corrupt(1, e))?;
    out.push_str(&header);
    out.push('\n');
    let mut last_id: Option<String> = None;
    for (i, line) in rest.iter().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let line_no = i + 2;
        if serde_json::from_str::<serde::de::IgnoredAny>(line).is_err() {
            // Not JSON: no reader makes an entry of it (a line glued to a torn tail).
            continue;
        }
        let native = if from.is_pi() {
            let v1 = (from == Dialect::Pi(1)).then(|| ((i + 1) as u64, last_id.as_deref()));
            entry_to_native(line, from, v1).map_err(|e| corrupt(line_no, e))?
        } else {
            line.to_owned()
        };
        if from == Dialect::Pi(1) {
            last_id = Some(v1_id((i + 1) as u64));
        }
        let converted = if to_pi {
            entry_to_pi(&native).map_err(|e| corrupt(line_no, e))?
        } else {
            native
        };
        out.push_str(&converted);
        out.push('\n');
    }
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::dialect_names::camel;

    #[test]
    fn camel_case() {
        assert_eq!(camel("first_kept_entry_id"), "firstKeptEntryId");
        assert_eq!(camel("tool_result"), "toolResult");
        assert_eq!(camel("id"), "id");
    }

    #[test]
    fn a_pi_message_reads_as_ours_and_back() {
        let pi = r#"{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{"role":"assistant","content":[{"type":"thinking","thinking":"h","thinkingSignature":"s"},{"type":"toolCall","id":"c","name":"n","arguments":{"someKey":1}}],"api":"x","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"cost":{"input":0.1,"output":0,"cacheRead":0,"cacheWrite":0,"total":0.1}},"stopReason":"toolUse","timestamp":5,"piOnly":true}}"#;
        let native = entry_to_native(pi, Dialect::Pi(3), None).unwrap();
        assert_eq!(
            native,
            r#"{"type":"message","id":"a","parent_id":null,"timestamp":"T","message":{"role":"assistant","content":[{"type":"thinking","thinking":"h","signature":"s"},{"type":"tool_call","id":"c","name":"n","arguments":{"someKey":1}}],"api":"x","provider":"p","model":"m","usage":{"input":1,"output":2,"cache_read":3,"cache_write":4,"total_tokens":10,"cost":{"input":0.1,"output":0,"cache_read":0,"cache_write":0,"total":0.1}},"stop_reason":"tool_use","timestamp":5,"piOnly":true}}"#
        );
        assert_eq!(entry_to_pi(&native).unwrap(), pi);
    }

    #[test]
    fn leaf_moves_become_markers_under_the_target() {
        let native = r#"{"type":"leaf","id":"l","parent_id":"x","timestamp":"T","target_id":"t"}"#;
        let pi = entry_to_pi(native).unwrap();
        assert_eq!(
            pi,
            r#"{"type":"custom","id":"l","parentId":"t","timestamp":"T","customType":"sessiontree.leaf","data":{"parentId":"x"}}"#
        );
        let back = entry_to_native(&pi, Dialect::Pi(3), None).unwrap();
        assert_eq!(
            back,
            r#"{"type":"leaf","id":"l","parent_id":"x","timestamp":"T","target_id":"t"}"#
        );
    }

    #[test]
    fn detection() {
        let pi_header = r#"{"type":"session","version":3,"id":"s","timestamp":"T","cwd":"/"}"#;
        let pi_line = r#"{"type":"custom","id":"a","parentId":null}"#;
        let our_line = r#"{"type":"custom","id":"a","parent_id":null}"#;
        assert_eq!(detect(pi_header, [pi_line]).unwrap(), Dialect::Pi(3));
        assert_eq!(detect(pi_header, [our_line]).unwrap(), Dialect::Native);
        assert_eq!(
            detect(pi_header, ["junk", pi_line]).unwrap(),
            Dialect::Pi(3)
        );
        let v1 = r#"{"type":"session","id":"s","timestamp":"T","cwd":"/"}"#;
        assert_eq!(detect(v1, ["{}"]).unwrap(), Dialect::Pi(1));
        let ours = r#"{"type":"session","version":3,"id":"s","timestamp":"T","cwd":"/","parent_session":null,"metadata":null}"#;
        assert!(detect(ours, [pi_line]).is_err());
        let v4 = r#"{"type":"session","version":4,"id":"s","timestamp":"T","cwd":"/","parentSession":"x"}"#;
        assert!(detect(v4, [pi_line]).unwrap_err().message.contains("newer"));
        assert!(entry_to_native(our_line, Dialect::Pi(3), None).is_err());
    }

    #[test]
    fn v1_lines_get_ids_from_their_line() {
        let line = r#"{"type":"compaction","timestamp":"T","summary":"s","firstKeptEntryIndex":10,"tokensBefore":5}"#;
        let native = entry_to_native(line, Dialect::Pi(1), Some((12, None))).unwrap();
        assert_eq!(
            native,
            r#"{"type":"compaction","timestamp":"T","summary":"s","tokens_before":5,"id":"0000000c","parent_id":null,"first_kept_entry_id":"0000000a"}"#
        );
    }
}
