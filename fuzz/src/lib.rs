//! Properties the fuzz targets check, shared by the libFuzzer binaries (`fuzz_targets/`),
//! the deterministic harness and the regression replay (`tests/`).
//!
//! Each check panics when the engine breaks a promise; returning normally means the input
//! was handled (accepted, reported or refused with an error). A panic, abort, hang or stack
//! overflow is a finding.

use _core::engine::dialect::{entry_to_native, Dialect};
use _core::engine::jsonl::DEFAULT_MAX_DEPTH;
use _core::engine::line::{parse_entry, parse_header, read_entry, MAX_ID_BYTES};
use _core::engine::types::{ReadLimits, Refusal};
use _core::engine::{ErrorCode, Limits, Store};

/// The JSON nesting depth of `text`, ignoring brackets inside strings.
pub fn json_depth(text: &[u8]) -> usize {
    let (mut depth, mut max, mut in_str, mut escaped) = (0usize, 0usize, false, false);
    for &b in text {
        if in_str {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// A valid header line, used to wrap single lines into a document.
pub const HEADER: &str = r#"{"type":"session","version":3,"id":"fuzz","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/","parent_session":null,"metadata":null}"#;

/// The line reader: never panics; an accepted entry has a valid id and is not a header;
/// its depth limit is the whole line's nesting; a pi line read through pi's names reads
/// as its translation does; the loader accepts exactly the lines the reader accepts.
pub fn check_line(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        check_line_in_document(data, false);
        return;
    };
    let _ = parse_header(text);
    check_pi_line(text);
    let parsed = parse_entry(text, ReadLimits::default());
    // The reader checks depth on the parts it visits and on the raw values it skips: the
    // limit it enforces is the whole line's nesting.
    match &parsed {
        Err(e) if e.refusal == Refusal::TooDeep => assert!(
            json_depth(data) > DEFAULT_MAX_DEPTH,
            "refused as too deep a line within the limit"
        ),
        _ => assert!(
            json_depth(data) <= DEFAULT_MAX_DEPTH || parsed.is_err(),
            "accepted a line deeper than the limit"
        ),
    }
    let parsed_ok = match parsed {
        Ok(e) => {
            assert!(!e.id.is_empty(), "accepted an empty id");
            assert!(
                e.id.len() <= MAX_ID_BYTES,
                "accepted an id of {} bytes",
                e.id.len()
            );
            assert_ne!(
                e.kind,
                _core::engine::Kind::Header,
                "accepted a header as an entry"
            );
            true
        }
        Err(e) => {
            assert!(!e.message.is_empty(), "an empty error message");
            false
        }
    };
    check_line_in_document(data, parsed_ok);
}

/// A line read as a v3 pi line (through pi's names, or translated) reads as its translation
/// read as ours: the same entry, or a refusal.
fn check_pi_line(text: &str) {
    let limits = ReadLimits::default();
    let read = read_entry(text, Dialect::Pi(3), None, limits).map(|e| format!("{e:?}"));
    let translated = entry_to_native(text, Dialect::Pi(3), None)
        .and_then(|native| parse_entry(&native, limits).map(|e| format!("{e:?}")));
    match (&read, &translated) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "pi's names and the translation disagree"),
        (Err(e), Ok(_)) => assert_eq!(
            e.refusal,
            Refusal::TooDeep,
            "refused a pi line its translation reads"
        ),
        (Ok(_), Err(_)) => panic!("read a pi line its translation refuses"),
        (Err(_), Err(_)) => {}
    }
}

/// Wraps one line in a document and checks the loader agrees with the parser about it.
fn check_line_in_document(line: &[u8], parsed_ok: bool) {
    // The scanner owns newlines, `\r` and blank lines: only plain one-line inputs compare.
    if line.contains(&b'\n') || line.ends_with(b"\r") || line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let mut doc = Vec::with_capacity(HEADER.len() + line.len() + 2);
    doc.extend_from_slice(HEADER.as_bytes());
    doc.push(b'\n');
    doc.extend_from_slice(line);
    doc.push(b'\n');
    let store = Store::memory_from_bytes(&doc, false, Limits::default())
        .expect("a document with a valid header must load leniently");
    let n = store.arena().len();
    let issues = store.report().issues.len();
    if parsed_ok {
        // Reference problems (dangling parent, unknown leaf target) are reported but kept.
        assert_eq!(n, 1, "the loader dropped a line the parser accepted");
    } else {
        assert_eq!(n, 0, "the loader indexed a line the parser refused");
        assert_eq!(issues, 1, "a refused line must be reported exactly once");
    }
    let strict = Store::memory_from_bytes(&doc, true, Limits::default());
    assert_eq!(
        strict.is_ok(),
        n == 1 && issues == 0,
        "strict and lenient disagree"
    );
}

/// Picks limits from a selector byte so the small-limit paths are fuzzed too.
pub fn limits_for(selector: u8) -> Limits {
    let d = Limits::default();
    Limits {
        max_line_bytes: if selector & 0b0010 != 0 {
            96
        } else {
            d.max_line_bytes
        },
        max_depth: if selector & 0b0100 != 0 {
            3
        } else {
            d.max_depth
        },
        max_id_bytes: if selector & 0b1000 != 0 {
            8
        } else {
            d.max_id_bytes
        },
    }
}

/// The loader: never panics; lenient loads accept whatever strict loads accept and report
/// the torn tail exactly; what a lenient load keeps reloads the same; an entry appended
/// after any content is there on reload and is the leaf.
pub fn check_load(data: &[u8]) {
    let Some((&selector, doc)) = data.split_first() else {
        return;
    };
    let limits = limits_for(selector);
    let lenient = Store::memory_from_bytes(doc, false, limits);
    let strict = Store::memory_from_bytes(doc, true, limits);
    let mut store = match lenient {
        Ok(s) => s,
        Err(e) => {
            assert_eq!(e.code, ErrorCode::Corrupt, "a lenient load failed with {e}");
            assert!(strict.is_err(), "strict accepted what lenient refused");
            return;
        }
    };
    if let Ok(s) = &strict {
        assert!(
            store.report().issues.is_empty(),
            "strict accepted a file with issues"
        );
        assert_eq!(s.arena().len(), store.arena().len());
    } else if let Err(e) = &strict {
        assert_eq!(e.code, ErrorCode::Corrupt, "strict failed with {e}");
    }

    let tail = doc.len() - doc.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    assert_eq!(
        store.report().torn_tail_bytes,
        tail as u64,
        "torn tail miscounted"
    );
    let newlines = doc.iter().filter(|&&b| b == b'\n').count();
    assert!(
        store.arena().len() < newlines.max(1),
        "more entries than lines"
    );
    let a = store.arena();
    for i in 0..a.len() as u32 {
        let node = a.node(i);
        let (start, len) = (node.offset as usize, node.len as usize);
        let depth = json_depth(&doc[start..start + len]);
        assert!(
            depth <= limits.max_depth,
            "indexed a line nested {depth} deep"
        );
        assert!(
            len <= limits.max_line_bytes,
            "indexed a {len}-byte line over the limit"
        );
    }

    // What was kept reloads to the same entries, in the same order.
    let kept = store.memory_bytes().expect("a memory store").to_vec();
    let again = Store::memory_from_bytes(&kept, false, limits).expect("kept bytes must reload");
    assert_eq!(ids(&again), ids(&store), "reload changed the entries");
    assert_eq!(again.report().torn_tail_bytes, 0);
    let torn_issues = usize::from(tail > 0);
    assert_eq!(
        again.report().issues.len() + torn_issues,
        store.report().issues.len(),
        "reload changed the issues"
    );

    // An append after anything (garbage, torn tail, duplicates) is never lost.
    let id = store.create_entry_id();
    let leaf = store.arena().leaf();
    let parent = if leaf == _core::engine::NONE {
        "null".to_string()
    } else {
        serde_json::to_string(store.arena().id(leaf)).expect("ids serialize")
    };
    let line = format!(
        r#"{{"type":"custom","id":"{id}","parent_id":{parent},"timestamp":"2026-01-01T00:00:00.000Z","custom_type":"fuzz","data":null}}"#
    );
    if line.len() > limits.max_line_bytes {
        return;
    }
    store
        .append(line.as_bytes())
        .expect("appending a valid entry must work");
    let after = Store::memory_from_bytes(store.memory_bytes().expect("memory"), false, limits)
        .expect("the appended document must reload");
    assert_eq!(
        after.arena().len(),
        store.arena().len(),
        "the appended entry was lost"
    );
    let new_leaf = after.arena().leaf();
    assert!(
        new_leaf != _core::engine::NONE && after.arena().id(new_leaf) == id,
        "leaf lost"
    );
}

fn ids(store: &Store) -> Vec<String> {
    let a = store.arena();
    (0..a.len() as u32).map(|i| a.id(i).to_string()).collect()
}
