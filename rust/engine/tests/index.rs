//! The persisted index: created, loaded, extended, rebuilt when stale, torn or foreign, written at close.

use super::*;

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

#[test]
fn an_index_is_only_used_under_its_limits() {
    use crate::engine::jsonl::Limits;
    use crate::engine::store::IndexStatus;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    chain_file(&path, 20, false);
    let open = |max_line_bytes: usize| {
        Store::open(
            &path,
            OpenOptions {
                readonly: true,
                limits: Limits {
                    max_line_bytes,
                    ..Limits::default()
                },
                index_min_bytes: Some(0),
                ..OpenOptions::default()
            },
        )
        .unwrap()
    };
    // Every entry line is longer than the header: skipped under a limit of the header's
    // length, and indexed so.
    assert!(user("e10", Some("e9")).len() > HEADER.len());
    let small = open(HEADER.len());
    assert_eq!(small.index_status(), IndexStatus::Created);
    assert_eq!(small.arena().len(), 0);
    drop(small);
    let default = open(Limits::default().max_line_bytes);
    assert_eq!(default.index_status(), IndexStatus::Rebuilt);
    assert_eq!(default.arena().len(), 20);
    drop(default);
    let again = open(Limits::default().max_line_bytes);
    assert_eq!(again.index_status(), IndexStatus::Loaded);
    assert_eq!(again.arena().len(), 20);
}
