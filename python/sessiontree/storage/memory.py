"""``InMemorySessionStorage``: a session document in memory, on the engine."""

from __future__ import annotations

from .. import _core
from ..entries import (
    SessionHeader,
)
from ..errors import SessionError
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

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self)} entries"
        return f"<InMemorySessionStorage {self.session_id!r} {state}>"
