//! libFuzzer target: one JSONL line through the entry parser (and the loader, to compare).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sessiontree_fuzz::check_line(data));
