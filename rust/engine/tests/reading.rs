//! The reader: lenient reports and strict refusals, headers, limits, parallel loading, pi's re-flushed ids.

use super::*;

#[test]
fn lenient_reader_reports_and_strict_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let body = [
        HEADER.to_string(),
        user("a", None),
        "{broken".to_string(),
        String::new(),
        user("a", None),
        user("b", Some("ghost")),
        entry("leaf", "l", Some("b"), r#","target_id":"ghost""#),
        format!("{}\r", user("c", Some("b"))),
    ]
    .join("\n");
    let mut bytes = body.into_bytes();
    bytes.extend_from_slice(b"\n\xff\xfe\n");
    bytes.extend_from_slice(b"{\"type\":\"message\",\"id\":\"torn");
    fs::write(&path, &bytes).unwrap();

    let s = open(&path, true, false).unwrap();
    let kinds: Vec<(u64, IssueKind)> = s.report().issues.iter().map(|i| (i.line, i.kind)).collect();
    assert_eq!(
        kinds,
        [
            (3, IssueKind::Malformed),
            (5, IssueKind::DuplicateId),
            (6, IssueKind::DanglingParent),
            (7, IssueKind::UnknownLeafTarget),
            (9, IssueKind::InvalidUtf8),
            (10, IssueKind::TornTail),
        ]
    );
    assert_eq!(
        s.report().issues[0].offset,
        (HEADER.len() + 1 + user("a", None).len() + 1) as u64
    );
    assert_eq!(s.arena().len(), 4);
    assert_eq!(leaf_id(&s).as_deref(), Some("c"));
    assert_eq!(
        fs::read(&path).unwrap(),
        bytes,
        "a read-only open changes nothing"
    );

    let e = open(&path, true, true).err().unwrap();
    assert_eq!(e.code, ErrorCode::Corrupt);
    assert!(e.message.contains("line 3"), "{}", e.message);
}

#[test]
fn corrupt_headers_are_refused_and_never_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        "",
        "no newline",
        "{}\n",
        "{\"type\":\"session\",\"version\":4,\"id\":\"s\",\"timestamp\":\"t\"}\n",
        &format!("{}\n", user("a", None)),
    ];
    for (i, body) in cases.iter().enumerate() {
        let path = dir.path().join(format!("{i}.jsonl"));
        write_file(&path, body);
        let e = open(&path, false, false).err().unwrap();
        assert_eq!(e.code, ErrorCode::Corrupt, "{body:?}");
        assert_eq!(fs::read_to_string(&path).unwrap(), *body);
    }
    let e = open(&dir.path().join("missing.jsonl"), true, false)
        .err()
        .unwrap();
    assert_eq!(e.code, ErrorCode::NotFound);
}

#[test]
fn oversize_lines_are_reported_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let big = entry(
        "custom",
        "big",
        None,
        &format!(r#","data":"{}""#, "x".repeat(5000)),
    );
    write_file(
        &path,
        &format!(
            "{HEADER}\n{}\n{big}\n{}\n",
            user("a", None),
            user("b", Some("a"))
        ),
    );
    let opts = OpenOptions {
        readonly: true,
        limits: Limits {
            max_line_bytes: 1000,
            ..Limits::default()
        },
        ..OpenOptions::default()
    };
    let s = Store::open(&path, opts).unwrap();
    assert_eq!(s.arena().len(), 2);
    assert_eq!(s.report().issues[0].kind, IssueKind::TooLarge);
    assert_eq!(s.arena().lookup("big"), None);
    assert_eq!(s.report().issues[0].line, 3);
}

#[test]
fn json_bombs_are_refused_by_the_depth_limit() {
    let bomb = entry(
        "custom",
        "bomb",
        None,
        &format!(r#","data":{}{}"#, "[".repeat(100_000), "]".repeat(100_000)),
    );
    let doc = format!("{HEADER}\n{}\n{bomb}\n", user("a", None));
    let s = Store::memory_from_bytes(doc.as_bytes(), false, Limits::default()).unwrap();
    assert_eq!(s.arena().len(), 1);
    assert_eq!(s.report().issues[0].kind, IssueKind::TooLarge);
    let mut m = memory(&[]);
    assert_eq!(
        m.append(bomb.as_bytes()).unwrap_err().code,
        ErrorCode::LimitExceeded
    );
}

#[test]
fn parallel_loading_keeps_file_order_and_line_numbers() {
    let mut doc = format!("{HEADER}\n");
    let pad = "p".repeat(400);
    let mut expected_bad = Vec::new();
    let mut offsets = Vec::new();
    for i in 0..40_000u32 {
        let line_no = u64::from(i) + 2;
        if i % 997 == 5 {
            doc.push_str("{\"broken\n");
            expected_bad.push(line_no);
            continue;
        }
        let parent = if i == 0 {
            "null".into()
        } else {
            format!("\"{:06}\"", i - 1)
        };
        offsets.push(doc.len());
        doc.push_str(&format!(
            r#"{{"type":"custom","id":"{i:06}","parent_id":{parent},"timestamp":"t","custom_type":"x","data":"{pad}"}}"#
        ));
        doc.push('\n');
    }
    assert!(doc.len() > 8 << 20, "the document must span several chunks");
    let s = Store::memory_from_bytes(doc.as_bytes(), false, Limits::default()).unwrap();
    let malformed: Vec<u64> = s
        .report()
        .issues
        .iter()
        .filter(|i| i.kind == IssueKind::Malformed)
        .map(|i| i.line)
        .collect();
    assert_eq!(malformed, expected_bad);
    let dangling = s
        .report()
        .issues
        .iter()
        .filter(|i| i.kind == IssueKind::DanglingParent)
        .count();
    assert_eq!(dangling, expected_bad.len());
    for i in 0..s.arena().len() as u32 {
        let node = s.arena().node(i);
        let line = s.line(i).unwrap();
        assert!(line.starts_with(
            format!("{{\"type\":\"custom\",\"id\":\"{}\"", s.arena().id(i)).as_bytes()
        ));
        assert_eq!(node.offset as usize, offsets[i as usize]);
    }
}

#[test]
fn reports_keep_the_first_issues_and_count_the_rest_also_through_the_index() {
    use crate::engine::jsonl::MAX_REPORTED_ISSUES;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let junk = 3 * MAX_REPORTED_ISSUES + 7;
    let mut body = format!("{HEADER}\n{}\n", user("a", None));
    body.push_str(&"x\n".repeat(junk));
    body.push_str(&format!("{}\n", user("a", None))); // a duplicate, past the cap
    body.push_str(r#"{"type":"custom","id":"torn""#);
    write_file(&path, &body);
    let check = |s: &Store| {
        let r = s.report();
        assert_eq!(r.counts[IssueKind::Malformed as usize], junk as u64);
        assert_eq!(r.counts[IssueKind::DuplicateId as usize], 1);
        assert_eq!(r.counts[IssueKind::TornTail as usize], 1);
        // The first issues in full, and the torn tail whatever the cap.
        assert_eq!(r.issues.len(), MAX_REPORTED_ISSUES + 1);
        assert_eq!(r.issues[0].line, 3);
        assert_eq!(r.issues.last().unwrap().kind, IssueKind::TornTail);
    };
    let first = open_indexed(&path, true);
    check(&first);
    drop(first);
    let again = open_indexed(&path, true);
    assert_eq!(
        again.index_status(),
        crate::engine::store::IndexStatus::Loaded
    );
    check(&again);
    // Millions of junk lines are parsed in bounded batches: the memory test is Python's
    // (tests/reliability/test_reliability_resources.py).
    let m = Store::memory_from_bytes(body.as_bytes(), false, Limits::default()).unwrap();
    check(&m);
}

#[test]
fn a_pi_file_keeps_a_re_flushed_id_as_pi_does() {
    let pi = |id: &str, parent: Option<&str>| {
        let parent = parent.map_or("null".to_string(), |p| format!("{p:?}"));
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"x","timestamp":1}}}}"#
        )
    };
    let header = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;
    let doc = [
        header.to_string(),
        pi("a", None),
        pi("b", Some("a")),
        pi("a", None),
        pi("b", Some("a")),
    ]
    .join("\n")
        + "\n";
    let s = Store::memory_from_bytes(doc.as_bytes(), false, Limits::default()).unwrap(); // lenient
    let arena = s.arena();
    assert_eq!(arena.len(), 4);
    assert!(arena.has_repeats());
    assert_eq!(arena.stats().message_count, 4);
    assert_eq!(arena.lookup("a"), Some(0));
    assert_eq!(arena.lookup("b"), Some(1));
    assert_eq!(leaf_id(&s).as_deref(), Some("b"));
    assert_eq!(arena.leaf(), 1, "the leaf's id names the first copy");
    assert_eq!(arena.children(NONE).collect::<Vec<_>>(), [0, 2]);
    assert_eq!(arena.children(0).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(arena.path_to_root(arena.leaf()), [0, 1]);
    let kinds: Vec<IssueKind> = s.report().issues.iter().map(|i| i.kind).collect();
    assert_eq!(kinds, [IssueKind::DuplicateId, IssueKind::DuplicateId]);

    // Our own dialect keeps FORMAT.md's rule: the later line is not an entry.
    let ours = [HEADER.to_string(), user("a", None), user("a", None)].join("\n") + "\n";
    let s = Store::memory_from_bytes(ours.as_bytes(), false, Limits::default()).unwrap(); // lenient
    assert_eq!(s.arena().len(), 1);
    assert!(!s.arena().has_repeats());
}

/// `for_each_line` hands out every line as `line` reads it, whatever the order asked:
/// ascending and descending runs (read with one read each), a jump back, a repeat, and
/// lines still in the write buffer.
#[test]
fn for_each_line_reads_runs_in_either_order() {
    let check = |s: &Store, order: &[u32]| {
        let mut got = Vec::new();
        s.for_each_line(order, |i, line| -> crate::engine::Result<()> {
            got.push((i, line.to_vec()));
            Ok(())
        })
        .unwrap();
        let want: Vec<(u32, Vec<u8>)> = order.iter().map(|&i| (i, s.line(i).unwrap())).collect();
        assert_eq!(got, want, "order {order:?}");
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    chain_file(&path, 40, true);
    let s = open(&path, true, false).unwrap();
    let n = s.arena().len() as u32;
    let orders: Vec<Vec<u32>> = vec![
        (0..n).collect(),
        (0..n).rev().collect(),
        vec![5, 4, 3, 10, 11, 12, 2, 2, 30, 29, 31, 0],
        vec![n - 1, 0, n - 2, 1],
    ];
    for order in &orders {
        check(&s, order);
    }
    // Buffered appends (durability `none`): lines not yet in the file, after lines that are.
    let (_dir, _path, mut s) = created(Durability::None);
    let mut parent: Option<String> = None;
    for i in 0..12 {
        let id = format!("b{i}");
        s.append(user(&id, parent.as_deref()).as_bytes()).unwrap();
        if i == 5 {
            s.flush().unwrap();
        }
        parent = Some(id);
    }
    let n = s.arena().len() as u32;
    for order in [(0..n).collect::<Vec<u32>>(), (0..n).rev().collect()] {
        check(&s, &order);
    }
}
