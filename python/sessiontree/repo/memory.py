"""``InMemorySessionRepo``: the repository API without files, for tests."""

from __future__ import annotations

import builtins
import os
import threading
import weakref
from typing import Any

from .._util import uuid7
from ..errors import SessionError
from ..model.entries import SessionTreeEntry
from ..model.types import SessionMetadata
from ..search import SearchHit, SearchPlan, branch_members
from ..session import Session
from ..storage import (
    InMemorySessionStorage,
)
from .base import (
    ForkPosition,
    SessionRef,
    SessionRepo,
    _check_fork_args,
    _check_list_args,
    _new_header,
    _ref_id,
    _select,
)
from .fork import fork_document
from .metadata import metadata_of

__all__ = ["InMemorySessionRepo"]


# --------------------------------------------------------------------------- in memory


class _MemoryRecord:
    __slots__ = ("holder", "storage")

    def __init__(self, storage: InMemorySessionStorage) -> None:
        self.storage = storage
        self.holder: weakref.ref[InMemorySessionStorage] | None = None

    def busy(self) -> bool:
        handle = None if self.holder is None else self.holder()
        return handle is not None and not handle.closed


class InMemorySessionRepo(SessionRepo):
    """Sessions kept in memory: the :class:`SessionRepo` API without files, for tests.

    It behaves like :class:`JsonlSessionRepo` where it can: ids are validated the same
    way, ``open`` gives the single writer of a session (a second ``open`` while it is open
    raises ``locked``, as a second writer of a file does; a session whose handle was closed
    or garbage-collected can be opened again), ``delete`` of an open session raises
    ``locked``. Metadata has ``path=None`` and ``size_bytes`` = the document's size.

    >>> repo = InMemorySessionRepo()
    >>> with repo.create(cwd="/w") as s:
    ...     pass
    >>> len(repo.list())
    1
    """

    def __init__(self) -> None:
        self._sessions: dict[str, _MemoryRecord] = {}
        self._lock = threading.RLock()

    def _handle(self, record: _MemoryRecord) -> Session:
        if record.busy():
            raise SessionError(
                "locked",
                f"session {record.storage.session_id!r} is already open for writing; "
                "close it first",
            )
        handle = record.storage.share()
        record.holder = weakref.ref(handle)
        return Session(handle)

    def _record(self, ref: object) -> _MemoryRecord:
        sid = _ref_id(ref)
        record = self._sessions.get(sid)
        if record is None:
            raise SessionError("not_found", f"session {sid!r} not found")
        return record

    def create(
        self,
        *,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        header = _new_header(cwd, name, parent_session, metadata, session_id)
        sid = header.id
        storage = InMemorySessionStorage(header)
        if name is not None:
            Session(storage).append_session_info(name)
        with self._lock:
            if sid in self._sessions:
                raise SessionError("exists", f"session {sid!r} already exists")
            record = self._sessions[sid] = _MemoryRecord(storage)
            return self._handle(record)

    def open(self, ref: SessionRef) -> Session:
        with self._lock:
            return self._handle(self._record(ref))

    def list(
        self, *, cwd: str | os.PathLike[str] | None = None, limit: int | None = None
    ) -> builtins.list[SessionMetadata]:
        want_cwd = _check_list_args(cwd, limit)
        with self._lock:
            rows = [
                metadata_of(r.storage, sid, None, r.storage.size_bytes)
                for sid, r in self._sessions.items()
            ]
        return _select(rows, want_cwd, limit)

    def delete(self, ref: SessionRef) -> None:
        with self._lock:
            record = self._record(ref)
            if record.busy():
                raise SessionError(
                    "locked",
                    f"session {record.storage.session_id!r} is open for writing; close it first",
                )
            del self._sessions[record.storage.session_id]
            record.storage.close()

    def fork(
        self,
        source: SessionRef,
        *,
        entry_id: str | None = None,
        position: ForkPosition = "before",
    ) -> Session:
        _check_fork_args(entry_id, position)
        with self._lock:
            record = self._record(source)
            new_id = uuid7()
            doc = fork_document(record.storage, new_id, entry_id, position)
            storage = InMemorySessionStorage.from_jsonl(doc)
            fork = self._sessions[new_id] = _MemoryRecord(storage)
            return self._handle(fork)

    def read_entry(self, ref: SessionRef, entry_id: str) -> SessionTreeEntry | None:
        """One entry, also while the session is open for writing."""
        _check_fork_args(entry_id, "at")
        with self._lock:
            return self._record(ref).storage.get_entry(entry_id)

    def _search(self, plan: SearchPlan) -> builtins.list[SearchHit]:
        wanted = {m.id for m in self.list(cwd=plan.cwd) if plan.wants(m.id)}
        with self._lock:
            storages = {sid: r.storage for sid, r in self._sessions.items() if sid in wanted}
            sources = [(sid, st.to_jsonl()) for sid, st in storages.items()]
        return plan.scan(sources, lambda sid, ids: branch_members(storages[sid], ids), whole=True)

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, ref: object) -> bool:
        try:
            return _ref_id(ref) in self._sessions
        except SessionError:
            return False

    def __repr__(self) -> str:
        return f"<InMemorySessionRepo {len(self._sessions)} sessions>"
