//! Traversal: the tree, leaf replay, compaction paths, deep chains, labels, names and stats.

use super::*;

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
