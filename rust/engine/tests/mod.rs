//! Engine-level tests: stores over memory and files, one module per part (traversal,
//! reading, writing, other programs' changes, the persisted index), and the helpers they
//! share.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::engine::arena::NONE;
use crate::engine::jsonl::IssueKind;
#[cfg(feature = "test-hooks")]
use crate::engine::store::Fault;
use crate::engine::store::OpenOptions;
use crate::engine::{Durability, ErrorCode, Limits, Store};

pub(super) const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w","parent_session":null,"metadata":null}"#;

pub(super) fn entry(kind: &str, id: &str, parent: Option<&str>, extra: &str) -> String {
    let parent = parent.map_or("null".to_string(), |p| format!("{p:?}"));
    format!(
        r#"{{"type":"{kind}","id":"{id}","parent_id":{parent},"timestamp":"2026-01-01T00:00:00.000Z"{extra}}}"#
    )
}

pub(super) fn user(id: &str, parent: Option<&str>) -> String {
    entry(
        "message",
        id,
        parent,
        r#","message":{"role":"user","content":"hi","timestamp":1}"#,
    )
}

pub(super) fn compaction(id: &str, parent: &str, first_kept: Option<&str>, tail: bool) -> String {
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

pub(super) fn memory(lines: &[String]) -> Store {
    let mut s = Store::memory(HEADER.as_bytes(), Limits::default()).unwrap();
    for l in lines {
        s.append(l.as_bytes()).unwrap();
    }
    s
}

pub(super) fn ids(s: &Store, idxs: &[u32]) -> Vec<String> {
    idxs.iter().map(|&i| s.arena().id(i).to_string()).collect()
}

pub(super) fn leaf_id(s: &Store) -> Option<String> {
    let l = s.arena().leaf();
    (l != NONE).then(|| s.arena().id(l).to_string())
}

pub(super) fn write_file(path: &Path, body: &str) {
    let mut f = fs::File::create(path).unwrap();
    f.write_all(body.as_bytes()).unwrap();
}

pub(super) fn open(
    path: &Path,
    readonly: bool,
    strict: bool,
) -> Result<Store, crate::engine::EngineError> {
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
pub(super) fn created(durability: Durability) -> (tempfile::TempDir, std::path::PathBuf, Store) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let store = Store::create(&path, HEADER.as_bytes(), durability, Limits::default()).unwrap();
    (dir, path, store)
}

pub(super) fn open_indexed(path: &Path, readonly: bool) -> Store {
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

pub(super) fn chain_file(path: &Path, n: u32, with_issue: bool) {
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

mod external;
mod index;
mod reading;
mod tree;
mod writing;
