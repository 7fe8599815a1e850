"""The one exception type sessiontree raises, with a code per cause.

Every failure a user can provoke surfaces as :class:`SessionError` (or one of its
subclasses).  The subclasses also derive from the natural builtin so that
``except KeyError`` keeps working for an unknown id, ``except ValueError`` for a
malformed line, ``except OSError`` for an I/O failure, and so on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _core

if TYPE_CHECKING:
    from typing import Any, Final

__all__ = [
    "ERROR_CODES",
    "ClosedError",
    "CorruptError",
    "DuplicateIdError",
    "ExistsError",
    "InvalidArgumentError",
    "InvalidForkTargetError",
    "InvalidIdError",
    "LimitExceededError",
    "LockedError",
    "ModifiedExternallyError",
    "NotFoundError",
    "ReadonlyError",
    "SessionError",
    "SessionIOError",
]

ERROR_CODES: Final[tuple[str, ...]] = _core.ERROR_CODES
"""Every :attr:`SessionError.code` (declared once, in the Rust engine)."""


class SessionError(Exception):
    """An error raised by sessiontree.

    ``SessionError(code, message)`` builds the subclass that belongs to ``code``, so
    ``SessionError("not_found", "...")`` is also a ``KeyError``.

    Attributes:
        code: one of :data:`ERROR_CODES`.
        message: a human-readable explanation.

    >>> err = SessionError("not_found", "entry 'abc' not found")
    >>> isinstance(err, KeyError), err.code
    (True, 'not_found')
    """

    code: str
    message: str

    def __new__(cls, code: str, message: str = "", *args: Any) -> SessionError:
        target = _BY_CODE.get(code, cls) if cls is SessionError else cls
        # ``super(SessionError, target)`` reaches the builtin's own ``__new__``
        # (``OSError`` insists on it).
        return super(SessionError, target).__new__(target)

    def __init__(self, code: str, message: str = "") -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown SessionError code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (SessionError, (self.code, self.message))


class NotFoundError(SessionError, KeyError):
    """An unknown entry id, session id or missing session file (``not_found``)."""


class InvalidForkTargetError(SessionError, ValueError):
    """A fork ``before`` a message that is not a user message (``invalid_fork_target``)."""


class InvalidArgumentError(SessionError, ValueError):
    """A value of the wrong type or outside its allowed set (``invalid_argument``)."""


class InvalidIdError(SessionError, ValueError):
    """An id that is not a safe file name (``invalid_id``)."""


class CorruptError(SessionError, ValueError):
    """A malformed header, unsupported version, or (strict mode) a bad line (``corrupt``)."""


class DuplicateIdError(SessionError, ValueError):
    """An entry id that already exists in the session (``duplicate_id``)."""


class LockedError(SessionError, BlockingIOError):
    """Another writer holds the session's single-writer lock (``locked``)."""


class ReadonlyError(SessionError, PermissionError):
    """A write on a storage opened read-only (``readonly``)."""


class ClosedError(SessionError, ValueError):
    """A call on a storage or session after ``close()`` (``closed``)."""


class ModifiedExternallyError(SessionError, RuntimeError):
    """The file was changed or replaced by another program (``modified_externally``)."""


class LimitExceededError(SessionError, ValueError):
    """A configured limit (line size, nesting depth, id length) was passed (``limit_exceeded``)."""


class SessionIOError(SessionError, OSError):
    """Any other OS error; the ``OSError`` is attached as ``__cause__`` (``io``)."""


class ExistsError(SessionError, FileExistsError):
    """A session file or id that already exists (``exists``)."""


_BY_CODE: Final[dict[str, type[SessionError]]] = {
    "not_found": NotFoundError,
    "invalid_fork_target": InvalidForkTargetError,
    "invalid_argument": InvalidArgumentError,
    "invalid_id": InvalidIdError,
    "corrupt": CorruptError,
    "duplicate_id": DuplicateIdError,
    "locked": LockedError,
    "readonly": ReadonlyError,
    "closed": ClosedError,
    "modified_externally": ModifiedExternallyError,
    "limit_exceeded": LimitExceededError,
    "io": SessionIOError,
    "exists": ExistsError,
}

# The binding raises these classes (an ``io`` error with its ``OSError`` as ``__cause__``).
# It is handed them here, once, so the dependency runs one way: this package imports
# ``_core``, never the reverse.
_core._register_error_classes(SessionError, _BY_CODE)
