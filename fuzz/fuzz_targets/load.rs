//! libFuzzer target: a whole document through the loader (first byte picks the limits).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sessiontree_fuzz::check_load(data));
