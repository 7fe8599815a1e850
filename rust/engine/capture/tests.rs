//! The reader against the translation: a pi line read through pi's names is what its
//! translation reads as ours.

use super::*;
use crate::engine::dialect_names::Dialect;
use crate::engine::dialect_translate::entry_to_native;
use crate::engine::line::{check_entry, parse_entry};
use crate::engine::types::ReadLimits;

/// A pi line read through the names and checked as `line::read_entry` does (every field
/// of the entry kept, for comparing); `None` when the line is left to the translation.
fn read_in_place(line: &str) -> Option<Result<String, String>> {
    match capture(line, true, 64) {
        Ok(Captured::Translate) => None,
        // `read_entry` without its fallback to the translation.
        Ok(Captured::Entry(raw)) => Some(
            check_entry(raw, 256)
                .map(|e| kept(&e))
                .map_err(|e| e.to_string()),
        ),
        Err(e) => Some(Err(e.to_string())),
    }
}

#[test]
fn a_branch_summarys_own_usage_is_read_through_the_names() {
    let line = r#"{"type":"branch_summary","id":"b","parentId":"a","timestamp":"T","fromId":"a","summary":"s","usage":{"cacheRead":1}}"#;
    let got = read_in_place(line).unwrap().unwrap();
    assert!(got.contains("cache_read: 1"), "{got}");
}

/// What the engine keeps of an entry (every field), for comparing two reads of a line.
fn kept(e: &crate::engine::types::ParsedEntry<'_>) -> String {
    format!("{e:?}")
}

#[test]
fn a_pi_line_read_through_the_names_is_read_as_its_translation() {
    let renamed = |line: &str| {
        let native = entry_to_native(line, Dialect::Pi(3), None).unwrap();
        kept(&parse_entry(&native, ReadLimits::default()).unwrap())
    };
    for line in [
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{"role":"toolResult","toolCallId":"c","toolName":"n","content":[{"type":"text","text":"a \"toolCall\" \"parentId\": x"},{"type":"image","data":"d","mimeType":"image/png"}],"isError":false,"timestamp":5}}"#,
        r#"{"type":"message","id":"e","parentId":"a","timestamp":"T","message":{"role":"assistant","content":[{"type":"thinking","thinking":"h","thinkingSignature":"s"},{"type":"toolCall","id":"c","name":"n","arguments":{"parentId":1,"role":"toolResult"}}],"api":"x","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"cost":{"input":0.1,"output":0,"cacheRead":0,"cacheWrite":0,"total":0.25}},"stopReason":"toolUse","timestamp":5}}"#,
        r#"{"type":"message","id":"n","parentId":"a","timestamp":"T","message":{"role":"assistant","content":[],"provider":"p","model":"m","usage":null,"stopReason":"stop","timestamp":1}}"#,
        r#"{"type":"model_change","id":"m","parentId":"a","timestamp":"T","provider":"p","modelId":"x"}"#,
        r#"{"type":"compaction","id":"k","parentId":"m","timestamp":"T","summary":"s","firstKeptEntryId":"a","tokensBefore":5}"#,
        r#"{"type":"custom","id":"c","parentId":"a","timestamp":"T","customType":"x","data":{"customType":"sessiontree.leaf"}}"#,
    ] {
        assert_eq!(read_in_place(line), Some(Ok(renamed(line))), "{line}");
    }
    assert!(read_in_place(r#"{"type":"message","id":"e","parentId":"a","timestamp":"T","message":{"role":"assistant","content":[],"provider":"p","model":"m","usage":{"cacheRead":3,"cost":{"total":1.5}},"stopReason":"toolUse","timestamp":5}}"#)
        .unwrap()
        .unwrap()
        .contains("cache_read: 3"));
    // What only the full translation reads is left to it (a branch summary's own usage
    // is read through the names).
    for line in [
        r#"{"type":"label","id":"b","parentId":"a","timestamp":"T","targetId":"a","label":"x"}"#,
        r#"{"type":"session_info","id":"b","parentId":"a","timestamp":"T","name":" x "}"#,
        r#"{"type":"custom","id":"c","parentId":"a","timestamp":"T","customType":"sessiontree.leaf","data":{}}"#,
        r#"{"type":"message","id":"h","parentId":"a","timestamp":"T","message":{"role":"hookMessage","content":"x","timestamp":1}}"#,
        r#"{"type":"message","id":"s","parent_id":"a","timestamp":"T","message":{"role":"user","content":"x","timestamp":1}}"#,
    ] {
        assert!(read_in_place(line).is_none(), "{line}");
    }
}

#[test]
fn mutated_pi_lines_read_through_the_names_only_as_their_translation_reads() {
    let seeds = [
        r#"{"type":"message","id":"e","parentId":"a","timestamp":"T","message":{"role":"assistant","content":[{"type":"thinking","thinking":"h","thinkingSignature":"s"},{"type":"toolCall","id":"c","name":"n","arguments":{"k":1}}],"api":"x","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"cost":{"total":0.25}},"stopReason":"toolUse","timestamp":5}}"#,
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{"role":"toolResult","toolCallId":"c","toolName":"n","content":[{"type":"text","text":"t"}],"isError":false,"timestamp":5}}"#,
        r#"{"type":"compaction","id":"k","parentId":"m","timestamp":"T","summary":"s","firstKeptEntryId":"a","tokensBefore":5}"#,
        r#"{"type":"custom_message","id":"k","parentId":"m","timestamp":"T","customType":"c","content":"x","display":true}"#,
    ];
    let pieces = [
        "null",
        "1",
        "\"s\"",
        "\"toolResult\"",
        "\"parent_id\":\"a\",",
        "\"label\"",
        "\"stopReason\":\"stop\",",
        "\"usage\":{\"cacheRead\":1},",
        "{}",
        "[]",
        ",",
        ":",
        "\"type\":\"toolCall\",",
        "\"role\":\"hookMessage\",",
        "\"cacheRead\":-1,",
        "\"cost\":{\"total\":\"x\"},",
        "\"timestamp\":1,",
        "\"parentId\":\"b\",",
    ];
    let mut rng = fastrand::Rng::with_seed(11);
    let (mut read, mut tried) = (0, 0);
    for _ in 0..40_000 {
        let mut text = seeds[rng.usize(..seeds.len())].to_string();
        for _ in 0..rng.usize(1..4) {
            let at = rng.usize(..=text.len());
            if rng.bool() {
                text.insert_str(at, pieces[rng.usize(..pieces.len())]);
            } else {
                let end = (at + rng.usize(1..6)).min(text.len());
                text.replace_range(at..end, "");
            }
        }
        if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() {
            continue;
        }
        tried += 1;
        let Some(Ok(fast)) = read_in_place(&text) else {
            continue;
        };
        read += 1;
        let native = entry_to_native(&text, Dialect::Pi(3), None).expect(&text);
        let full = parse_entry(&native, ReadLimits::default()).expect(&text);
        assert_eq!(fast, kept(&full), "{text}");
    }
    assert!(read > 1000 && tried > 5000, "{read} of {tried}");
}
