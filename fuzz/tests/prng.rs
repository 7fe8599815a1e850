//! A libFuzzer-free harness: mutates the seed corpus with a deterministic PRNG and runs
//! the same checks as the fuzz targets. For machines where `cargo fuzz` cannot build.
//!
//! `FUZZ_ITERS` (default 20000 per target) and `FUZZ_SEED` (default 1) size and pick the
//! run; a failing input is written to `fuzz/artifacts/prng/<target>-<iteration>` first.

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::Instant;

/// splitmix64: tiny, deterministic and good enough to drive mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Fragments that steer mutations towards the parser's interesting corners.
const TOKENS: &[&[u8]] = &[
    b"\n",
    b"\r\n",
    b"\0",
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"null",
    b"true",
    b"1e999",
    b"-0",
    b"\"id\":",
    b"\"parent_id\":",
    b"\"type\":",
    b"\"leaf\"",
    b"\"label\"",
    b"\"message\"",
    b"\"session\"",
    b"\"target_id\":",
    b"\"role\":",
    b"\"usage\":",
    b"\"version\":4",
    b"\xff",
    b"\xc3",
    b"\xe2\x82",
    b"\xf0\x9f\x98\x80",
];

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], keep_first_byte: bool) -> Vec<u8> {
    let mut data = seeds[rng.below(seeds.len())].clone();
    let rounds = 1 + rng.below(8);
    for _ in 0..rounds {
        let lo = usize::from(keep_first_byte && !data.is_empty());
        let at = lo + rng.below(data.len().saturating_sub(lo) + 1);
        match rng.below(10) {
            0 => {
                if at < data.len() {
                    data[at] ^= 1 << rng.below(8);
                }
            }
            1 => {
                if at < data.len() {
                    data[at] = rng.next() as u8;
                }
            }
            2 => {
                let n = rng.below(16).min(data.len() - at);
                data.drain(at..at + n);
            }
            3 | 4 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                data.splice(at..at, t.iter().copied());
            }
            5 => data.truncate(at),
            6 => {
                // Splice in a slice of another seed (lines from elsewhere, duplicates).
                let other = &seeds[rng.below(seeds.len())];
                let s = rng.below(other.len() + 1);
                let e = s + rng.below(other.len() - s + 1);
                data.splice(at..at, other[s..e].iter().copied());
            }
            7 => {
                // Deep nesting: a JSON bomb of random depth.
                let depth = 1 + rng.below(4000);
                let open = if rng.below(2) == 0 { b'[' } else { b'{' };
                data.splice(at..at, std::iter::repeat_n(open, depth));
            }
            8 => {
                // Duplicate a stretch (repeated lines, repeated ids).
                let n = rng.below(256).min(data.len() - at);
                let copy = data[at..at + n].to_vec();
                data.splice(at..at, copy);
            }
            _ => {
                if !data.is_empty() && keep_first_byte {
                    data[0] = rng.next() as u8;
                }
            }
        }
    }
    data
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target);
    let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run fuzz/make_seeds.py)", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths.iter().map(|p| fs::read(p).unwrap()).collect()
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run(target: &str, check: fn(&[u8])) {
    let iters = env_num("FUZZ_ITERS", 20_000);
    let mut rng = Rng(env_num("FUZZ_SEED", 1) ^ target.len() as u64);
    let corpus = seeds(target);
    let start = Instant::now();
    for i in 0..iters {
        let input = mutate(&mut rng, &corpus, target == "load");
        if catch_unwind(AssertUnwindSafe(|| check(&input))).is_err() {
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("artifacts/prng");
            fs::create_dir_all(&dir).unwrap();
            let path = dir.join(format!("{target}-{i}"));
            fs::write(&path, &input).unwrap();
            panic!("{target}: input {i} failed; saved to {}", path.display());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "prng {target}: {iters} runs in {secs:.1} s ({:.0} exec/s), 0 failures",
        iters as f64 / secs
    );
}

#[test]
fn prng_parse_line() {
    run("line", sessiontree_fuzz::check_line);
}

#[test]
fn prng_load() {
    run("load", sessiontree_fuzz::check_load);
}
