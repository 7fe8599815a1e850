//! The line reader's checks: headers, base fields, the model's type-specific rules, limits.

use super::*;

fn lim(max_id_bytes: usize) -> ReadLimits {
    ReadLimits {
        max_id_bytes,
        ..ReadLimits::default()
    }
}

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
    let bad_time = r#"{"type":"session","version":3,"id":"s","timestamp":"not a time","cwd":"/"}"#;
    assert!(parse_header(bad_time)
        .unwrap_err()
        .message
        .contains("ISO-8601"));
}

#[test]
fn parses_base_fields_and_borrows() {
    let e = parse_entry(
        r#"{"type":"message","id":"a1","parent_id":null,"timestamp":"t","message":{"role":"user","content":"hi","timestamp":1}}"#,
        lim(256),
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
        lim(256),
    )
    .unwrap();
    assert_eq!(e.id, "ab");
    assert_eq!(e.parent_id.as_deref(), Some("p\"q"));
}

#[test]
fn assistant_usage_is_summed() {
    let e = parse_entry(
        r#"{"type":"message","id":"a","parent_id":null,"timestamp":"t","message":{"role":"assistant","content":[],"provider":"p","model":"m","timestamp":1,"usage":{"input":10,"output":5,"cache_read":1,"cache_write":2,"total_tokens":18,"cost":{"total":0.5}}}}"#,
        lim(256),
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
        lim(256),
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
        let got = parse_entry(line, lim(256)).unwrap_err().message;
        assert!(got.contains(want), "{line}: {got}");
    }
    let long = format!(
        r#"{{"type":"custom","id":"{}","parent_id":null,"timestamp":"t"}}"#,
        "x".repeat(300)
    );
    assert!(parse_entry(&long, lim(256))
        .unwrap_err()
        .message
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
    for field in ["data", "message", "usage", "content"] {
        let e = parse_entry(&wrap(field), lim(256)).unwrap_err();
        assert_eq!(e.refusal, Refusal::TooDeep, "{field}");
        assert_eq!(e.message, "JSON nested deeper than the limit of 128");
        // Unlimited, the reader still returns (raw values are skipped without recursion).
        let _ = parse_entry(&wrap(field), ReadLimits::NONE);
    }
}

#[test]
fn the_depth_limit_counts_every_level_once() {
    let at = |max_depth| ReadLimits {
        max_depth,
        ..ReadLimits::default()
    };
    // Level 1 the line, 2 the message, 3 the content, 4 a block, 5 its arguments, 6 `[1]`.
    let line = r#"{"type":"message","id":"a","parent_id":null,"timestamp":"t","message":{"role":"assistant","content":[{"type":"tool_call","id":"c","name":"n","arguments":{"x":[1],"s":"[[[[{{{{"}}],"provider":"p","model":"m","timestamp":1}}"#;
    assert!(parse_entry(line, at(6)).is_ok());
    for max in 1..6 {
        let e = parse_entry(line, at(max)).unwrap_err();
        assert_eq!(e.refusal, Refusal::TooDeep, "{max}");
    }
    let data = r#"{"type":"custom","id":"a","parent_id":null,"timestamp":"t","custom_type":"c","data":{"a":[{"b":[1]}]}}"#;
    assert!(parse_entry(data, at(5)).is_ok());
    assert_eq!(
        parse_entry(data, at(4)).unwrap_err().refusal,
        Refusal::TooDeep
    );
}

#[test]
fn json_errors_carry_their_column_and_the_caller_places_the_line() {
    let line = r#"{"type":"custom","id":"a","parent_id":null,"timestamp":"t",}"#;
    let e = parse_entry(line, lim(256)).unwrap_err();
    assert_eq!(e.refusal, Refusal::Malformed);
    assert!(
        e.message.starts_with("invalid JSON entry: "),
        "{}",
        e.message
    );
    assert!(!e.message.contains("line 1"), "{}", e.message);
    assert_eq!(e.column, Some(line.len()));
    let placed = e.at(7, 1234);
    let shown = placed.to_string();
    assert!(
        shown.starts_with("line 7 (byte 1234): invalid JSON entry: ")
            && shown.ends_with(&format!("(column {})", line.len())),
        "{shown}"
    );
    let dup = r#"{"type":"custom","id":"a","id":"b","parent_id":null,"timestamp":"t"}"#;
    let e = parse_entry(dup, lim(256)).unwrap_err();
    assert!(e.message.contains("duplicate field `id`"), "{}", e.message);
    assert!(e.column.is_some());
    // The model's checks have no column: they are about a field, not a place.
    let bad =
        r#"{"type":"label","id":"a","parent_id":null,"timestamp":"t","target_id":"x","label":3}"#;
    assert_eq!(parse_entry(bad, lim(256)).unwrap_err().column, None);
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
        let got = parse_entry(&line, lim(256)).unwrap_err().message;
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
        assert!(parse_entry(&line, lim(256)).is_ok(), "{line}");
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
            let Ok(Captured::Entry(raw)) = capture(&line, false, 10) else {
                panic!("{line}");
            };
            assert!(raw.field(field.key).is_some(), "{}", field.key);
        }
    }
}

#[test]
fn the_visited_fields_are_the_models_nested_ones() {
    // The reader visits exactly the fields whose insides the checks read; every other
    // field is captured raw (and would be parsed again if it were one of them).
    let line = r#"{"type":"x","id":"a","parent_id":null,"timestamp":"t","message":{"role":"r","content":[],"usage":{"cost":{}}},"usage":{"cost":{}},"content":[],"retained_tail":[]}"#;
    let Ok(Captured::Entry(raw)) = capture(line, false, 10) else {
        panic!()
    };
    for def in model::ENTRIES.iter().chain(model::MESSAGES.iter()) {
        for f in def.fields {
            let visited = matches!(
                f.kind,
                model::FieldKind::Nested(_)
                    | model::FieldKind::Blocks(_)
                    | model::FieldKind::StrOrBlocks(_)
                    | model::FieldKind::Message
                    | model::FieldKind::Messages
            );
            let part = if model::MESSAGES.iter().any(|m| std::ptr::eq(*m, *def)) {
                match raw.field("message") {
                    Some(Part::Object(m)) => get(m, f.key),
                    _ => None,
                }
            } else {
                raw.field(f.key)
            };
            if visited {
                assert!(
                    matches!(part, Some(Part::Object(_) | Part::Array(_))),
                    "{}",
                    f.key
                );
            }
        }
    }
    let Some(Part::Object(usage)) = raw.field("usage") else {
        panic!()
    };
    assert!(matches!(get(usage, "cost"), Some(Part::Object(_))));
}

#[test]
fn usage_token_names_are_the_models() {
    let ints: Vec<&str> = model::USAGE
        .fields
        .iter()
        .filter(|f| matches!(f.kind, model::FieldKind::Int))
        .map(|f| f.key)
        .collect();
    assert_eq!(ints, USAGE_TOKENS);
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
        assert_eq!(
            parse_entry(&line, lim(256)).unwrap_err().message,
            want,
            "{line}"
        );
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
            .message
            .contains("newer")
    );
    assert!(parse_header(r#"{"type":"session","id":"s","timestamp":"t"}"#).is_err());
    assert!(parse_header(r#"{"type":"message","version":3,"id":"s","timestamp":"t"}"#).is_err());
    assert!(parse_header("garbage").is_err());
}
