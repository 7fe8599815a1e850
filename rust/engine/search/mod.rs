//! Full-text search over sessions: one tokeniser ([`tokens`]), one query language
//! ([`query`]), one rule for what of an entry is searched and how it is quoted
//! ([`entry`]), and the parallel scan of session documents ([`scan`]), which ranks from
//! counts ([`count`]) on texts read in place ([`inplace`]) and tells a hit's branch from
//! the lines it read ([`branch`]); the index stores the tokens [`extract`] gives. The
//! Python layer, the index and PostgreSQL all go through these, so every backend gives
//! the same answers.

pub mod branch;
pub mod count;
pub mod entry;
pub mod extract;
pub mod inplace;
pub mod query;
pub mod scan;
pub mod tokens;

pub use query::{Query, Term};
pub use scan::{Doc, Filters, Hit, Order, Searcher, Source};
