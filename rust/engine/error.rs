//! Engine errors: one code per cause, mirrored 1:1 by Python's `SessionError.code`.

use std::fmt;
use std::io;

use crate::engine::names::names;

/// What went wrong; the string form is the Python `SessionError.code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// An unknown entry id, or a missing session file.
    NotFound,
    /// A fork `before` something that is not a user message.
    InvalidForkTarget,
    /// A value of the wrong type or outside its set.
    InvalidArgument,
    /// An id that is not a safe file name.
    InvalidId,
    /// A malformed header, unsupported version, or a problem found in strict mode.
    Corrupt,
    /// An entry id that is already in the session.
    DuplicateId,
    /// Another writer holds the file.
    Locked,
    /// A write through a read-only handle.
    Readonly,
    /// A call after `close()`.
    Closed,
    /// The file was changed or replaced behind the writer's back.
    ModifiedExternally,
    /// A configured limit was passed.
    LimitExceeded,
    /// Any other OS error.
    Io,
    /// The file already exists.
    Exists,
}

/// Every code with its string, in declaration order (`code as usize` indexes it): the one
/// place the codes are written ([`ErrorCode::ALL`], [`ERROR_CODES`] and
/// [`ErrorCode::as_str`] read it).
const CODE_NAMES: [(ErrorCode, &str); 13] = [
    (ErrorCode::NotFound, "not_found"),
    (ErrorCode::InvalidForkTarget, "invalid_fork_target"),
    (ErrorCode::InvalidArgument, "invalid_argument"),
    (ErrorCode::InvalidId, "invalid_id"),
    (ErrorCode::Corrupt, "corrupt"),
    (ErrorCode::DuplicateId, "duplicate_id"),
    (ErrorCode::Locked, "locked"),
    (ErrorCode::Readonly, "readonly"),
    (ErrorCode::Closed, "closed"),
    (ErrorCode::ModifiedExternally, "modified_externally"),
    (ErrorCode::LimitExceeded, "limit_exceeded"),
    (ErrorCode::Io, "io"),
    (ErrorCode::Exists, "exists"),
];

// `as_str` indexes the table by discriminant: a variant out of place fails the build.
const _: () = {
    let mut i = 0;
    while i < CODE_NAMES.len() {
        assert!(
            CODE_NAMES[i].0 as usize == i,
            "CODE_NAMES out of declaration order"
        );
        i += 1;
    }
};

/// The stable string codes shared with Python (its `ERROR_CODES`), in declaration order.
pub const ERROR_CODES: [&str; CODE_NAMES.len()] = names(&CODE_NAMES);

impl ErrorCode {
    /// Every code, in declaration order (`code as usize` indexes it).
    pub const ALL: [ErrorCode; CODE_NAMES.len()] = {
        let mut out = [ErrorCode::NotFound; CODE_NAMES.len()];
        let mut i = 0;
        while i < out.len() {
            out[i] = CODE_NAMES[i].0;
            i += 1;
        }
        out
    };

    /// The stable string code shared with Python.
    pub fn as_str(self) -> &'static str {
        ERROR_CODES[self as usize]
    }
}

/// An engine failure: a code, a message for humans, and the OS error number if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineError {
    /// The cause.
    pub code: ErrorCode,
    /// What happened, naming the file, line or id involved.
    pub message: String,
    /// The OS `errno` behind an `Io` error.
    pub errno: Option<i32>,
}

/// The engine's result type.
pub type Result<T> = std::result::Result<T, EngineError>;

impl EngineError {
    /// An error with a code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        EngineError {
            code,
            message: message.into(),
            errno: None,
        }
    }

    /// An `Io` error (or `NotFound`/`Exists` where the OS says so) with context.
    pub fn io(context: impl fmt::Display, err: &io::Error) -> Self {
        let code = match err.kind() {
            io::ErrorKind::NotFound => ErrorCode::NotFound,
            io::ErrorKind::AlreadyExists => ErrorCode::Exists,
            _ => ErrorCode::Io,
        };
        EngineError {
            code,
            message: format!("{context}: {err}"),
            errno: err.raw_os_error(),
        }
    }
}

impl EngineError {
    /// An `Io` error whatever the OS error's kind: where a missing file is not the
    /// caller's "not found" (a create in a directory that does not exist).
    pub fn os(context: impl fmt::Display, err: &io::Error) -> Self {
        EngineError {
            code: ErrorCode::Io,
            ..EngineError::io(context, err)
        }
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for EngineError {}

/// Shorthand for building an error in a `return Err(...)`.
pub fn err<T>(code: ErrorCode, message: impl Into<String>) -> Result<T> {
    Err(EngineError::new(code, message))
}
