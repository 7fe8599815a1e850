//! Other programs' changes to a writer's file: refused before writing, with and without the change watch.

use super::*;

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
