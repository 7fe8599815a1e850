//! The session engine: everything that must be fast and never wrong, free of PyO3.

pub mod arena;
mod backing;
mod capture;
pub mod dialect;
mod dialect_detect;
mod dialect_names;
mod dialect_translate;
pub mod error;
mod fork;
mod hooks;
pub mod index;
mod index_codec;
mod ingest;
pub mod json_text;
pub mod jsonl;
pub mod line;
pub mod model;
pub mod names;
mod open;
pub mod schema;
pub mod search;
pub mod store;
mod syncer;
pub mod sys;
mod torn;
pub mod types;
mod watch;
mod writer;

#[cfg(test)]
mod tests;

pub use arena::{Arena, Kind, Role, Stats, NONE};
pub use dialect::Dialect;
pub use error::{EngineError, ErrorCode, Result};
pub use fork::{replace_parent, ForkOptions};
pub use jsonl::{Durability, Limits, LoadIssue, LoadReport};
pub use store::Store;
pub use writer::Stamp;
