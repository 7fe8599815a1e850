//! Replays the committed seeds and every input in `tests/fuzz_regressions/` through the
//! fuzz checks. Regression files are named after their target: `line-*` or `load-*`.

use std::fs;
use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn seeds_pass() {
    let (lines, loads) = (
        inputs(&root().join("seeds/line")),
        inputs(&root().join("seeds/load")),
    );
    assert!(
        !lines.is_empty() && !loads.is_empty(),
        "run fuzz/make_seeds.py"
    );
    for p in &lines {
        sessiontree_fuzz::check_line(&fs::read(p).unwrap());
    }
    for p in &loads {
        sessiontree_fuzz::check_load(&fs::read(p).unwrap());
    }
}

#[test]
fn regressions_pass() {
    let dir = root().join("../tests/fuzz_regressions");
    for p in inputs(&dir) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let data = fs::read(&p).unwrap();
        if name.starts_with("line-") {
            sessiontree_fuzz::check_line(&data);
        } else if name.starts_with("load-") {
            sessiontree_fuzz::check_load(&data);
        }
    }
}
