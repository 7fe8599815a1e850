//! Engine-level tests: stores over memory and files, traversal, reader robustness, writer.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::engine::arena::NONE;
use crate::engine::jsonl::IssueKind;
#[cfg(feature = "test-hooks")]
use crate::engine::store::Fault;
use crate::engine::store::OpenOptions;
use crate::engine::{Durability, ErrorCode, Limits, Store};

const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w","parent_session":null,"metadata":null}"#;

fn entry(kind: &str, id: &str, parent: Option<&str>, extra: &str) -> String {
    let parent = parent.map_or("null".to_string(), |p| format!("{p:?}"));
    format!(
        r#"{{"type":"{kind}","id":"{id}","parent_id":{parent},"timestamp":"2026-01-01T00:00:00.000Z"{extra}}}"#
    )
}

fn user(id: &str, parent: Option<&str>) -> String {
    entry(
        "message",
        id,
        parent,
        r#","message":{"role":"user","content":"hi","timestamp":1}"#,
    )
}

fn compaction(id: &str, parent: &str, first_kept: Option<&str>, tail: bool) -> String {
    let fk = first_kept.map_or("null".to_string(), |f| format!("{f:?}"));
    let tail = if tail {
        r#"[{"role":"user","content":"t","timestamp":1}]"#
    } else {
        "null"
    };
    entry(
        "compaction",
        id,
        Some(parent),
        &format!(
            r#","summary":"s","first_kept_entry_id":{fk},"tokens_before":5,"retained_tail":{tail},"details":null,"usage":null,"from_hook":false"#
        ),
    )
}

fn memory(lines: &[String]) -> Store {
    let mut s = Store::memory(HEADER.as_bytes(), Limits::default()).unwrap();
    for l in lines {
        s.append(l.as_bytes()).unwrap();
    }
    s
}

fn ids(s: &Store, idxs: &[u32]) -> Vec<String> {
    idxs.iter().map(|&i| s.arena().id(i).to_string()).collect()
}

fn leaf_id(s: &Store) -> Option<String> {
    let l = s.arena().leaf();
    (l != NONE).then(|| s.arena().id(l).to_string())
}

fn write_file(path: &Path, body: &str) {
    let mut f = fs::File::create(path).unwrap();
    f.write_all(body.as_bytes()).unwrap();
}

fn open(path: &Path, readonly: bool, strict: bool) -> Result<Store, crate::engine::EngineError> {
    Store::open(
        path,
        OpenOptions {
            readonly,
            strict,
            durability: Durability::Flush,
            limits: Limits::default(),
            index_min_bytes: None,
        },
    )
}

/// A new session file `s.jsonl` in a fresh directory, open for writing.
fn created(durability: Durability) -> (tempfile::TempDir, std::path::PathBuf, Store) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let store = Store::create(&path, HEADER.as_bytes(), durability, Limits::default()).unwrap();
    (dir, path, store)
}

#[test]
fn index_children_and_paths() {
    let s = memory(&[
        user("a", None),
        user("b", Some("a")),
        user("c", Some("b")),
        user("d", Some("a")),
    ]);
    let a = s.arena();
    assert_eq!(a.len(), 4);
    assert_eq!(a.lookup("c"), Some(2));
    assert_eq!(a.lookup("zz"), None);
    assert_eq!(ids(&s, &a.children(0).collect::<Vec<_>>()), ["b", "d"]);
    assert_eq!(ids(&s, &a.children(NONE).collect::<Vec<_>>()), ["a"]);
    assert_eq!(ids(&s, &a.path_to_root(2)), ["a", "b", "c"]);
    assert_eq!(ids(&s, &a.subtree(0)), ["a", "b", "c", "d"]);
    assert_eq!(leaf_id(&s).as_deref(), Some("d"));
}

#[test]
fn leaf_entries_move_the_leaf_and_replay_the_same_way() {
    let lines = [
        user("a", None),
        user("b", Some("a")),
        entry("leaf", "l1", Some("b"), r#","target_id":"a""#),
        user("c", Some("a")),
        entry("leaf", "l2", Some("c"), r#","target_id":null"#),
    ];
    let s = memory(&lines);
    assert_eq!(leaf_id(&s), None);
    let replayed =
        Store::memory_from_bytes(s.memory_bytes().unwrap(), true, Limits::default()).unwrap();
    assert_eq!(leaf_id(&replayed), None);
    assert_eq!(replayed.memory_bytes(), s.memory_bytes());
    let mut s = s;
    s.append(entry("leaf", "l3", None, r#","target_id":"b""#).as_bytes())
        .unwrap();
    assert_eq!(leaf_id(&s).as_deref(), Some("b"));
}

#[test]
fn compaction_paths_follow_format_rules() {
    // (what the case shows, the entries, the entry to walk up from, the expected path)
    let cases: [(&str, Vec<String>, &str, &[&str]); 6] = [
        (
            "first kept is an ancestor: the path starts there",
            vec![
                user("a", None),
                user("b", Some("a")),
                user("c", Some("b")),
                compaction("k", "c", Some("b"), false),
                user("d", Some("k")),
            ],
            "d",
            &["b", "c", "k", "d"],
        ),
        (
            "retained tail: the path starts at the compaction",
            vec![
                user("a", None),
                compaction("k", "a", Some("a"), true),
                user("d", Some("k")),
            ],
            "d",
            &["k", "d"],
        ),
        (
            "null first kept: the path starts at the compaction",
            vec![
                user("a", None),
                compaction("k", "a", None, false),
                user("d", Some("k")),
            ],
            "d",
            &["k", "d"],
        ),
        (
            "first kept on another branch: the path starts at the compaction",
            vec![
                user("a", None),
                user("x", Some("a")),
                user("b", Some("a")),
                compaction("k", "b", Some("x"), false),
                user("d", Some("k")),
            ],
            "d",
            &["k", "d"],
        ),
        (
            "the nearest of two compactions wins",
            vec![
                user("a", None),
                user("b", Some("a")),
                compaction("k1", "b", Some("a"), false),
                user("c", Some("k1")),
                compaction("k2", "c", Some("c"), false),
                user("d", Some("k2")),
            ],
            "d",
            &["c", "k2", "d"],
        ),
        (
            "walking up from a compaction itself",
            vec![
                user("a", None),
                user("b", Some("a")),
                compaction("k1", "b", Some("a"), false),
                user("c", Some("k1")),
                compaction("k2", "c", Some("c"), false),
            ],
            "k2",
            &["c", "k2"],
        ),
    ];
    for (what, lines, from, expected) in cases {
        let s = memory(&lines);
        let start = s.arena().lookup(from).unwrap();
        assert_eq!(
            ids(&s, &s.arena().path_to_root_or_compaction(start)),
            expected,
            "{what}"
        );
    }
}

#[test]
fn million_deep_chain_walks_without_recursion() {
    let n = 1_000_000u32;
    let mut doc = String::with_capacity(n as usize * 100);
    doc.push_str(HEADER);
    doc.push('\n');
    for i in 0..n {
        let parent = if i == 0 {
            "null".to_string()
        } else {
            format!("\"{:08x}\"", i - 1)
        };
        doc.push_str(&format!(
            r#"{{"type":"custom","id":"{i:08x}","parent_id":{parent},"timestamp":"t","custom_type":"x","data":null}}"#
        ));
        doc.push('\n');
    }
    let s = Store::memory_from_bytes(doc.as_bytes(), true, Limits::default()).unwrap();
    assert_eq!(s.arena().len(), n as usize);
    let leaf = s.arena().leaf();
    assert_eq!(s.arena().path_to_root(leaf).len(), n as usize);
    assert_eq!(s.arena().path_to_root_or_compaction(leaf).len(), n as usize);
    assert_eq!(s.arena().subtree(0).len(), n as usize);
}

#[test]
fn labels_names_and_stats() {
    let s = memory(&[
        user("a", None),
        entry(
            "message",
            "b",
            Some("a"),
            r#","message":{"role":"assistant","content":[],"provider":"p","model":"m","timestamp":1,"usage":{"input":3,"output":4,"cache_read":1,"cache_write":2,"total_tokens":10,"cost":{"total":0.25}}}"#,
        ),
        entry(
            "label",
            "l1",
            Some("b"),
            r#","target_id":"a","label":"start""#,
        ),
        entry("label", "l2", Some("l1"), r#","target_id":"b","label":"x""#),
        entry(
            "label",
            "l3",
            Some("l2"),
            r#","target_id":"b","label":null"#,
        ),
        entry("session_info", "n1", Some("l3"), r#","name":"first""#),
        entry("session_info", "n2", Some("n1"), r#","name":"second""#),
        entry(
            "branch_summary",
            "bs",
            Some("a"),
            r#","from_id":"a","summary":"s","details":null,"usage":{"input":1,"output":1,"cache_read":0,"cache_write":0,"total_tokens":2,"cost":{"total":0.5}},"from_hook":false"#,
        ),
    ]);
    let a = s.arena();
    assert_eq!(a.label(0), Some("start"));
    assert_eq!(a.label(1), None);
    assert_eq!(a.name(), Some("second"));
    let st = a.stats();
    assert_eq!(
        (
            st.entry_count,
            st.message_count,
            st.user_message_count,
            st.assistant_message_count
        ),
        (8, 2, 1, 1)
    );
    assert_eq!(st.usage.total_tokens, 12);
    assert!((st.usage.cost_total - 0.75).abs() < 1e-9);
    assert_eq!(a.find("label").len(), 3);
}

#[test]
fn append_validates_and_writes_nothing_on_error() {
    let mut s = memory(&[user("a", None)]);
    let before = s.byte_len();
    let cases = [
        (user("a", None), ErrorCode::DuplicateId),
        (user("b", Some("nope")), ErrorCode::NotFound),
        (
            entry("leaf", "l", Some("a"), r#","target_id":"nope""#),
            ErrorCode::NotFound,
        ),
        (
            entry(
                "label",
                "l",
                Some("a"),
                r#","target_id":"nope","label":"x""#,
            ),
            ErrorCode::NotFound,
        ),
        ("{not json".to_string(), ErrorCode::InvalidArgument),
        (
            "{\"type\":\"custom\",\"id\":\"x\",\"parent_id\":null,\"timestamp\":\"t\"}\n"
                .to_string(),
            ErrorCode::InvalidArgument,
        ),
        (
            entry("custom", &"i".repeat(300), None, ""),
            ErrorCode::LimitExceeded,
        ),
    ];
    for (line, code) in cases {
        let e = s.append(line.as_bytes()).unwrap_err();
        assert_eq!(e.code, code, "{line}: {e}");
        assert_eq!(s.byte_len(), before);
        assert_eq!(s.arena().len(), 1);
    }
}

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
fn writer_open_cuts_torn_tail_into_side_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let good = format!("{HEADER}\n{}\n", user("a", None));
    write_file(&path, &format!("{good}{{\"type\":\"mess"));
    let mut s = open(&path, false, false).unwrap();
    assert_eq!(s.report().torn_tail_bytes, 13);
    let side = s.torn_path().unwrap().to_path_buf();
    assert_eq!(fs::read_to_string(&side).unwrap(), "{\"type\":\"mess");
    assert_eq!(fs::read_to_string(&path).unwrap(), good);
    s.append(user("b", Some("a")).as_bytes()).unwrap();
    s.close().unwrap();
    let r = open(&path, true, true).unwrap();
    assert_eq!(r.arena().len(), 2);
}

#[test]
fn file_round_trip_is_bit_exact_and_reopen_restores_leaf() {
    let (_dir, path, mut s) = created(Durability::Fsync);
    let lines = [
        user("a", None),
        user("b", Some("a")),
        entry(
            "future_kind",
            "u",
            Some("b"),
            r#","payload":{"z":[1,2.50,"\u00e9"]}"#,
        ),
        entry("leaf", "l", Some("u"), r#","target_id":"a""#),
    ];
    for l in &lines {
        s.append(l.as_bytes()).unwrap();
    }
    s.close().unwrap();
    let expected = format!("{HEADER}\n{}\n", lines.join("\n"));
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
    let r = open(&path, false, true).unwrap();
    assert_eq!(leaf_id(&r).as_deref(), Some("a"));
    assert_eq!(r.line(2).unwrap(), lines[2].as_bytes());
    drop(r);
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
}

#[test]
fn second_writer_is_locked_and_readers_are_not() {
    let (_dir, path, mut w) = created(Durability::Flush);
    assert_eq!(
        open(&path, false, false).err().unwrap().code,
        ErrorCode::Locked
    );
    let mut r = open(&path, true, false).unwrap();
    assert_eq!(
        r.append(user("x", None).as_bytes()).unwrap_err().code,
        ErrorCode::Readonly
    );
    w.append(user("a", None).as_bytes()).unwrap();
    assert_eq!(r.refresh().unwrap(), 1);
    w.close().unwrap();
    w.close().unwrap();
    assert_eq!(
        w.append(user("b", None).as_bytes()).unwrap_err().code,
        ErrorCode::Closed
    );
    let w2 = open(&path, false, false).unwrap();
    assert_eq!(w2.arena().len(), 1);
}

#[test]
fn external_changes_are_detected_before_writing() {
    let (dir, path, mut w) = created(Durability::Flush);
    w.append(user("a", None).as_bytes()).unwrap();
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(b"{}\n").unwrap();
    let size = fs::metadata(&path).unwrap().len();
    let e = w.append(user("b", Some("a")).as_bytes()).unwrap_err();
    assert_eq!(e.code, ErrorCode::ModifiedExternally);
    assert_eq!(fs::metadata(&path).unwrap().len(), size);

    let path2 = dir.path().join("t.jsonl");
    let mut w = Store::create(
        &path2,
        HEADER.as_bytes(),
        Durability::Flush,
        Limits::default(),
    )
    .unwrap();
    let other = dir.path().join("other.jsonl");
    fs::write(&other, format!("{HEADER}\n")).unwrap();
    fs::rename(&other, &path2).unwrap();
    assert_eq!(
        w.append(user("a", None).as_bytes()).unwrap_err().code,
        ErrorCode::ModifiedExternally
    );
}

/// What another program does to a writer's file at `<root>/a/b/s.jsonl`, and whether the
/// writer's next append must then be refused.
const CHANGES: &[(&str, bool)] = &[
    ("append", true),
    ("truncate", true),
    ("replace", true),
    ("move away", true),
    ("remove", true),
    ("rename its directory", true),
    ("rename a directory above", true),
    ("chmod", false),
    ("touch", false),
    ("hard link", false),
];

fn change(what: &str, root: &Path, path: &Path) {
    match what {
        "append" => fs::OpenOptions::new()
            .append(true)
            .open(path)
            .unwrap()
            .write_all(b"{}\n")
            .unwrap(),
        "truncate" => fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(10)
            .unwrap(),
        "replace" => {
            let other = path.with_file_name("new.jsonl");
            fs::write(&other, format!("{HEADER}\n")).unwrap();
            fs::rename(&other, path).unwrap();
        }
        "move away" => fs::rename(path, path.with_file_name("moved.jsonl")).unwrap(),
        "remove" => fs::remove_file(path).unwrap(),
        "rename its directory" => fs::rename(root.join("a/b"), root.join("a/c")).unwrap(),
        "rename a directory above" => fs::rename(root.join("a"), root.join("z")).unwrap(),
        "chmod" => crate::engine::sys::set_mode(path, 0o644).unwrap(),
        "touch" => fs::File::open(path)
            .unwrap()
            .set_modified(std::time::SystemTime::UNIX_EPOCH)
            .unwrap(),
        "hard link" => fs::hard_link(path, root.join("link.jsonl")).unwrap(),
        _ => unreachable!("{what}"),
    }
}

/// Every change of [`CHANGES`], for a writer with (`watched`) or without its change watch.
fn external_changes_refused_or_allowed(watched: bool) {
    for &(what, refused) in CHANGES {
        for durability in [Durability::Flush, Durability::None] {
            let dir = tempfile::tempdir().unwrap();
            fs::create_dir_all(dir.path().join("a/b")).unwrap();
            let path = dir.path().join("a/b/s.jsonl");
            let mut w =
                Store::create(&path, HEADER.as_bytes(), durability, Limits::default()).unwrap();
            #[cfg(feature = "test-hooks")]
            assert_eq!(
                w.change_watch(watched),
                watched && crate::engine::sys::LINUX_FAST && crate::engine::watch::local_fs(&path),
                "{what}"
            );
            #[cfg(not(feature = "test-hooks"))]
            assert!(watched);
            w.append(user("a", None).as_bytes()).unwrap();
            w.flush().unwrap();
            change(what, dir.path(), &path);
            let res = w.append(user("b", Some("a")).as_bytes());
            let res = res.and_then(|_| w.flush());
            if refused {
                let e = res.expect_err(what);
                assert_eq!(e.code, ErrorCode::ModifiedExternally, "{what}: {e}");
            } else {
                res.unwrap();
                // The change was looked at and found harmless; a replacement after it is
                // still refused.
                change("replace", dir.path(), &path);
                let e = w
                    .append(user("c", Some("b")).as_bytes())
                    .and_then(|_| w.flush());
                assert_eq!(e.unwrap_err().code, ErrorCode::ModifiedExternally, "{what}");
            }
        }
    }
}

#[test]
fn external_changes_are_refused_and_harmless_ones_allowed() {
    external_changes_refused_or_allowed(true);
}

#[cfg(feature = "test-hooks")]
#[test]
fn external_changes_are_refused_without_a_change_watch() {
    external_changes_refused_or_allowed(false);
}

#[test]
fn one_writers_read_of_the_change_queue_keeps_anothers_events() {
    // Both writers share the process's inotify instance: B's append reads the event of
    // A's replacement, which A must still see.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    let mut wa =
        Store::create(&a, HEADER.as_bytes(), Durability::Flush, Limits::default()).unwrap();
    let mut wb =
        Store::create(&b, HEADER.as_bytes(), Durability::Flush, Limits::default()).unwrap();
    change("replace", dir.path(), &a);
    wb.append(user("b1", None).as_bytes()).unwrap();
    let e = wa.append(user("a1", None).as_bytes()).unwrap_err();
    assert_eq!(e.code, ErrorCode::ModifiedExternally);
    // A watch closed with its writer leaves the others working.
    drop(wa);
    wb.append(user("b2", Some("b1")).as_bytes()).unwrap();
    change("move away", dir.path(), &b);
    assert_eq!(
        wb.append(user("b3", Some("b2")).as_bytes())
            .unwrap_err()
            .code,
        ErrorCode::ModifiedExternally
    );
}

// Fault injection exists only in test-hooks builds (`make test-rust` turns it on).
#[cfg(feature = "test-hooks")]
#[test]
fn failed_write_leaves_no_partial_line_and_failed_sync_poisons() {
    let (_dir, path, mut w) = created(Durability::Fsync);
    w.append(user("a", None).as_bytes()).unwrap();
    let size = fs::metadata(&path).unwrap().len();
    w.inject_fault(Some(Fault::Write(28)));
    let e = w.append(user("b", Some("a")).as_bytes()).unwrap_err();
    assert_eq!((e.code, e.errno), (ErrorCode::Io, Some(28)));
    assert_eq!(fs::metadata(&path).unwrap().len(), size);
    w.append(user("c", Some("a")).as_bytes()).unwrap();
    w.inject_fault(Some(Fault::Sync(5)));
    assert_eq!(
        w.append(user("d", Some("c")).as_bytes()).unwrap_err().errno,
        Some(5)
    );
    assert_eq!(
        w.append(user("e", Some("c")).as_bytes()).unwrap_err().code,
        ErrorCode::Io
    );
    drop(w);
    let r = open(&path, true, true).unwrap();
    assert!(r.arena().lookup("c").is_some());
    assert!(r.arena().lookup("b").is_none());
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
fn create_refuses_existing_files_and_sets_private_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let s = Store::create(
        &path,
        HEADER.as_bytes(),
        Durability::None,
        Limits::default(),
    )
    .unwrap();
    assert_eq!(
        crate::engine::sys::mode(&fs::metadata(&path).unwrap()).unwrap_or(0o600),
        0o600
    );
    drop(s);
    let e = Store::create(
        &path,
        HEADER.as_bytes(),
        Durability::None,
        Limits::default(),
    )
    .err()
    .unwrap();
    assert_eq!(e.code, ErrorCode::Exists);
}

#[test]
fn none_durability_buffers_until_flush() {
    let (_dir, path, mut w) = created(Durability::None);
    w.append(user("a", None).as_bytes()).unwrap();
    assert_eq!(w.line(0).unwrap(), user("a", None).as_bytes());
    assert_eq!(open(&path, true, false).unwrap().arena().len(), 0);
    w.flush().unwrap();
    assert_eq!(open(&path, true, false).unwrap().arena().len(), 1);
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

fn open_indexed(path: &Path, readonly: bool) -> Store {
    Store::open(
        path,
        OpenOptions {
            readonly,
            durability: Durability::Flush,
            index_min_bytes: Some(0),
            ..OpenOptions::default()
        },
    )
    .unwrap()
}

fn chain_file(path: &Path, n: u32, with_issue: bool) {
    let mut body = format!("{HEADER}\n");
    for i in 0..n {
        let parent = if i == 0 {
            None
        } else {
            Some(format!("e{}", i - 1))
        };
        body.push_str(&user(&format!("e{i}"), parent.as_deref()));
        body.push('\n');
        if with_issue && i == 1 {
            body.push_str("{broken\n");
        }
    }
    write_file(path, &body);
}

#[test]
fn persisted_index_is_created_loaded_and_extended() {
    use crate::engine::store::IndexStatus;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    chain_file(&path, 50, true);
    let first = open_indexed(&path, true);
    assert_eq!(first.index_status(), IndexStatus::Created);
    let leaf = leaf_id(&first);
    drop(first);
    let again = open_indexed(&path, true);
    assert_eq!(again.index_status(), IndexStatus::Loaded);
    assert_eq!(leaf_id(&again), leaf);
    assert_eq!(again.arena().len(), 50);
    assert_eq!(
        again.report().issues.len(),
        1,
        "issues survive in the index"
    );
    assert_eq!(again.line(49).unwrap(), user("e49", Some("e48")).as_bytes());
    assert_eq!(again.arena().lookup("e7"), Some(7));
    drop(again);

    // Appended after the index: the index is used and only the tail is scanned.
    let mut w = open_indexed(&path, false);
    assert_eq!(w.index_status(), IndexStatus::Loaded);
    w.append(user("tail", Some("e49")).as_bytes()).unwrap();
    w.close().unwrap();
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(format!("{}\n", user("more", Some("tail"))).as_bytes())
        .unwrap();
    let r = open_indexed(&path, true);
    assert_eq!(r.index_status(), IndexStatus::Loaded);
    assert_eq!(r.arena().len(), 52);
    assert_eq!(leaf_id(&r).as_deref(), Some("more"));
    // Strict mode still refuses the problem recorded in the index.
    let strict = Store::open(
        &path,
        OpenOptions {
            readonly: true,
            strict: true,
            index_min_bytes: Some(0),
            ..OpenOptions::default()
        },
    );
    assert_eq!(strict.err().unwrap().code, ErrorCode::Corrupt);
}

#[test]
fn stale_torn_and_foreign_indexes_are_rebuilt() {
    use crate::engine::index::index_path;
    use crate::engine::store::IndexStatus;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    chain_file(&path, 40, false);
    drop(open_indexed(&path, true));
    let good_index = fs::read(index_path(&path)).unwrap();

    // Torn index: cut short.
    fs::write(index_path(&path), &good_index[..good_index.len() / 2]).unwrap();
    assert_eq!(
        open_indexed(&path, true).index_status(),
        IndexStatus::Rebuilt
    );
    assert_eq!(
        open_indexed(&path, true).index_status(),
        IndexStatus::Loaded
    );

    // One flipped byte in the index body.
    let mut flipped = good_index.clone();
    flipped[40] ^= 1;
    fs::write(index_path(&path), &flipped).unwrap();
    assert_eq!(
        open_indexed(&path, true).index_status(),
        IndexStatus::Rebuilt
    );

    // Stale: the file was rewritten (same length, other content) behind the index.
    fs::write(index_path(&path), &good_index).unwrap();
    let text = fs::read_to_string(&path)
        .unwrap()
        .replace("\"e39\"", "\"x39\"");
    fs::write(&path, &text).unwrap();
    let s = open_indexed(&path, true);
    assert_eq!(s.index_status(), IndexStatus::Rebuilt);
    assert!(s.arena().lookup("x39").is_some());

    // Stale: the file was truncated below what the index covers.
    let lines: Vec<&str> = text.lines().collect();
    fs::write(&path, format!("{}\n", lines[..10].join("\n"))).unwrap();
    let s = open_indexed(&path, true);
    assert_eq!(s.index_status(), IndexStatus::Rebuilt);
    assert_eq!(s.arena().len(), 9);

    // Foreign: another session's index.
    let other = dir.path().join("o.jsonl");
    write_file(
        &other,
        &format!(
            "{}\n{}\n",
            HEADER.replace("\"s1\"", "\"s2\""),
            user("z", None)
        ),
    );
    drop(open_indexed(&other, true));
    fs::copy(index_path(&other), index_path(&path)).unwrap();
    let s = open_indexed(&path, true);
    assert_eq!(s.index_status(), IndexStatus::Rebuilt);
    assert_eq!(s.arena().lookup("z"), None);
    assert_eq!(s.arena().len(), 9);

    // Disabled: never read nor written.
    fs::remove_file(index_path(&path)).unwrap();
    let s = Store::open(
        &path,
        OpenOptions {
            readonly: true,
            index_min_bytes: None,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    assert_eq!(s.index_status(), IndexStatus::Unused);
    assert!(!index_path(&path).exists());
}

#[test]
fn writer_close_writes_the_index() {
    use crate::engine::index::index_path;
    use crate::engine::store::IndexStatus;
    let (_dir, path, mut w) = created(Durability::Flush);
    w.set_index_min_bytes(Some(0));
    w.append(user("a", None).as_bytes()).unwrap();
    w.close().unwrap();
    assert!(index_path(&path).exists());
    let r = open_indexed(&path, true);
    assert_eq!(r.index_status(), IndexStatus::Loaded);
    assert_eq!(r.arena().len(), 1);
}

#[cfg(feature = "test-hooks")]
#[test]
fn a_failed_group_sync_surfaces_and_the_syncer_goes_idle() {
    use std::time::{Duration, Instant};
    let (_dir, _path, mut w) = created(Durability::Group);
    w.inject_fault(Some(Fault::Sync(5)));
    w.append(user("a", None).as_bytes()).unwrap();
    // The syncer now waits ~20 ms before its (failing) sync: mark the file dirty again
    // inside that window, the race that once left the syncer spinning on its mutex.
    std::thread::sleep(Duration::from_millis(5));
    w.append(user("a2", Some("a")).as_bytes()).unwrap();
    // A spinning syncer starves every later call: make them on a thread, so a regression
    // fails here instead of hanging the suite.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut refused = None;
        while refused.is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            refused = w
                .append(user(&format!("b{}", fastrand::u32(..)), Some("a")).as_bytes())
                .err();
        }
        let later: Vec<bool> = (0..200)
            .map(|i| {
                w.append(user(&format!("c{i}"), Some("a")).as_bytes())
                    .is_err()
            })
            .collect();
        let _ = tx.send((
            refused.map(|e| (e.code, e.errno)),
            later,
            w.close().map_err(|e| e.code),
        ));
    });
    let (refused, later, closed) = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the group syncer is busy-looping: calls after a failed sync starve");
    assert_eq!(
        refused,
        Some((ErrorCode::Io, Some(5))),
        "a failed background sync must surface"
    );
    assert!(
        later.iter().all(|&e| e),
        "a poisoned store refuses every append"
    );
    assert_eq!(closed, Err(ErrorCode::Io));
}

#[test]
fn error_codes_all_is_in_declaration_order() {
    // The binding indexes its registered exception classes by `code as usize`.
    for (i, code) in ErrorCode::ALL.iter().enumerate() {
        assert_eq!(*code as usize, i, "{}", code.as_str());
    }
}

#[test]
fn create_in_a_missing_directory_is_an_io_error_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-dir").join("s.jsonl");
    let e = Store::create(
        &path,
        HEADER.as_bytes(),
        Durability::Flush,
        Limits::default(),
    )
    .err()
    .expect("create in a missing directory must fail");
    assert_eq!(e.code, ErrorCode::Io);
    assert_eq!(
        e.errno
            .map(std::io::Error::from_raw_os_error)
            .map(|e| e.kind()),
        Some(std::io::ErrorKind::NotFound)
    );
    assert!(!path.parent().unwrap().exists());
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
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
fn a_line_that_changed_under_the_store_is_modified_externally() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    chain_file(&path, 10, false);
    let r = Store::open(
        &path,
        OpenOptions {
            readonly: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let last = r.arena().len() as u32 - 1;
    let at = r.arena().node(last).offset;
    let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(at).unwrap();
    assert_eq!(
        r.line(last).unwrap_err().code,
        ErrorCode::ModifiedExternally
    );
    // Grown back with another entry at the same offset: still not the line indexed.
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(format!("{}\n", user("someone-else", Some("e8"))).as_bytes())
        .unwrap();
    assert_eq!(
        r.line(last).unwrap_err().code,
        ErrorCode::ModifiedExternally
    );
    assert!(r.line(0).is_ok());
    // An id the line spells with an escape is still recognised (the slow path).
    let escaped = format!(
        "{HEADER}\n{}\n",
        entry("custom", "a\\u0062", None, r#","custom_type":"x""#)
    );
    write_file(&path, &escaped);
    let r = Store::open(
        &path,
        OpenOptions {
            readonly: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    assert_eq!(r.arena().id(0), "ab");
    assert!(r.line(0).is_ok());
}

#[test]
fn close_releases_the_backing_and_a_closed_store_refuses_reads() {
    let (_dir, path, mut w) = created(Durability::Group);
    w.append(user("a", None).as_bytes()).unwrap();
    let len = w.byte_len();
    w.close().unwrap();
    assert!(w.is_closed());
    assert_eq!(w.path(), Some(path.as_path()));
    assert_eq!(w.byte_len(), len);
    assert_eq!(w.arena().len(), 0);
    assert_eq!(w.line(0).unwrap_err().code, ErrorCode::Closed);
    // The lock went with the descriptor: a new writer opens at once.
    let mut again = Store::open(&path, OpenOptions::default()).unwrap();
    again.append(user("b", Some("a")).as_bytes()).unwrap();
    again.close().unwrap();
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
