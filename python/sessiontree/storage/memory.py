"""``InMemorySessionStorage``: a session document in memory, on the engine."""

from __future__ import annotations

import _thread

from .. import _core
from ..errors import SessionError
from ..model.entries import (
    SessionHeader,
)
from .engine import Limits, _EngineStorage, _limits, _make_header

__all__ = ["InMemorySessionStorage"]


class InMemorySessionStorage(_EngineStorage):
    """A session kept in memory: no I/O; for tests and temporary sessions.

    It runs on the same engine as :class:`JsonlSessionStorage`, so it behaves the same;
    :meth:`to_jsonl` returns the document a file would hold.

    >>> storage = InMemorySessionStorage()
    >>> len(storage)
    0
    """

    def __init__(self, header: SessionHeader | None = None, *, limits: Limits | None = None):
        super().__init__(_core.Engine.memory(_make_header(header), **_limits(limits)))

    @classmethod
    def from_jsonl(
        cls, data: bytes, *, strict: bool = False, limits: Limits | None = None
    ) -> InMemorySessionStorage:
        """Loads a JSONL session document (header line first) into memory."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise SessionError("invalid_argument", "data must be bytes")
        self = cls.__new__(cls)
        _EngineStorage.__init__(
            self, _core.Engine.from_bytes(bytes(data), bool(strict), **_limits(limits))
        )
        return self

    def to_jsonl(self) -> bytes:
        """The session as a JSONL document (what a file would hold)."""
        self._check()
        data = self._engine.to_bytes()
        assert data is not None
        return data

    def search_document(self) -> bytes:
        """The document (:meth:`to_jsonl`): what a search reads."""
        return self.to_jsonl()

    @property
    def size_bytes(self) -> int:
        """The size of the document in bytes (what :meth:`to_jsonl` would return)."""
        self._check()
        return self._engine.byte_len

    def share(self) -> InMemorySessionStorage:
        """A second storage over this same document.

        Appends through either are seen by both. Closing the share ends only the share;
        closing this storage ends the document (and so every share). ``InMemorySessionRepo``
        hands shares to the sessions it opens and keeps the document.

        >>> doc = InMemorySessionStorage()
        >>> view = doc.share()
        >>> view.close()
        >>> doc.closed, view.closed
        (False, True)
        """
        self._check()
        return _SharedMemoryStorage(self._engine, self._atomic_lock)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self)} entries"
        return f"<{type(self).__name__} {self.session_id!r} {state}>"


class _SharedMemoryStorage(InMemorySessionStorage):
    """A share of another :class:`InMemorySessionStorage`'s document (see ``share``)."""

    def __init__(self, engine: _core.Engine, atomic: _thread.RLock) -> None:
        _EngineStorage.__init__(self, engine, atomic)
        self._released = False

    @property
    def closed(self) -> bool:
        """True after :meth:`close`, or once the shared document was closed."""
        return self._released or self._engine.closed

    def _check(self) -> None:
        if self._released:
            raise SessionError("closed", "the session storage is closed")
        super()._check()

    def _refuse_append(self) -> None:
        raise SessionError("closed", "the session storage is closed")

    def flush(self) -> None:
        self._check()

    def close(self) -> None:
        self._released = True
        self._may_append = False
