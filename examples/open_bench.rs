//! Times a full scan of a session file by the engine alone (no persisted index):
//! `cargo run --release --example open_bench -- FILE`.

use std::time::Instant;

use _core::engine::store::OpenOptions;
use _core::engine::Store;

fn main() {
    let path = std::env::args().nth(1).expect("usage: open_bench FILE");
    let size = std::fs::metadata(&path).expect("stat").len() as f64;
    for _ in 0..3 {
        let t = Instant::now();
        let store = Store::open(
            path.as_ref(),
            OpenOptions {
                readonly: true,
                index_min_bytes: None,
                ..OpenOptions::default()
            },
        )
        .expect("open");
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{} entries in {:.3} s = {:.0} MB/s",
            store.arena().len(),
            secs,
            size / secs / 1e6
        );
    }
}
