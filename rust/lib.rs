//! sessiontree: LLM-agent sessions as a tree of entries in append-only JSONL files.
//!
//! `engine` is the pure-Rust core (no PyO3): the entry arena, the id index, JSONL
//! streaming I/O and tree traversal. `py` is the thin PyO3 binding, built only with the
//! `python` feature that maturin turns on, so `cargo test` needs no Python.

pub mod engine;

#[cfg(feature = "python")]
mod py;
