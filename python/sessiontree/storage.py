"""Session storages: the ``SessionStorage`` interface and the two engine-backed storages.

``InMemorySessionStorage`` and ``JsonlSessionStorage`` run on the same Rust engine: one
keeps its JSONL document in memory, the other in a file. Entries stay raw bytes in the
engine and become Python objects only when asked for.
"""

from __future__ import annotations

import abc
import gc
import json
import os
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

from . import _core
from ._util import fspath_arg, now_iso
from .entries import (
    ActiveToolsChangeEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionTreeEntry,
    ThinkingLevelChangeEntry,
    _trusted_entry_reader,
    entry_from_dict,
    entry_from_json,
    entry_to_json,
    header_from_dict,
    header_to_json,
)
from .errors import SessionError
from .messages import AssistantMessage
from .types import LoadIssue, LoadReport, SessionStats

__all__ = [
    "DURABILITY_MODES",
    "Durability",
    "InMemorySessionStorage",
    "JsonlSessionStorage",
    "Limits",
    "SessionStorage",
]

Durability = Literal["none", "flush", "group", "fsync"]
DURABILITY_MODES: tuple[str, ...] = ("none", "flush", "group", "fsync")


class SessionStorage(abc.ABC):
    """The storage interface ``Session`` works against.

    Implement it to keep sessions elsewhere. Contract: ``append_entry`` validates the
    entry (``duplicate_id`` for a used id, ``not_found`` for an unknown parent) and moves
    the leaf to it — or, for a ``LeafEntry``, to its ``target_id``. Unknown ids passed to
    path and children methods raise ``not_found``; ``get_entry`` returns ``None``.
    """

    @abc.abstractmethod
    def get_metadata(self) -> SessionHeader:
        """The session header."""

    @abc.abstractmethod
    def get_leaf_id(self) -> str | None:
        """The current leaf: the entry the next entry hangs under (``None`` before any)."""

    @abc.abstractmethod
    def set_leaf_id(self, entry_id: str | None) -> None:
        """Moves the leaf by appending a ``LeafEntry`` (``not_found`` for an unknown id)."""

    @abc.abstractmethod
    def create_entry_id(self) -> str:
        """A fresh id (8 lowercase hex digits) not used in this session."""

    @abc.abstractmethod
    def append_entry(self, entry: SessionTreeEntry) -> None:
        """Appends ``entry`` and moves the leaf (see the class docstring)."""

    @abc.abstractmethod
    def get_entry(self, entry_id: str) -> SessionTreeEntry | None:
        """The entry with ``entry_id``, or ``None``."""

    @abc.abstractmethod
    def find_entries(self, type: str) -> list[SessionTreeEntry]:
        """Every entry of ``type``, in file order."""

    @abc.abstractmethod
    def get_label(self, entry_id: str) -> str | None:
        """The label on ``entry_id`` (the last ``label`` entry for it wins); ``not_found``
        for an unknown id."""

    @abc.abstractmethod
    def get_session_name(self) -> str | None:
        """The name from the last ``session_info`` entry."""

    @abc.abstractmethod
    def get_path_to_root_or_compaction(self, leaf_id: str | None) -> list[SessionTreeEntry]:
        """The branch ending at ``leaf_id``, cut at the nearest compaction (root first)."""

    @abc.abstractmethod
    def get_path_to_root(self, entry_id: str | None) -> list[SessionTreeEntry]:
        """Every entry from the root down to ``entry_id``."""

    @abc.abstractmethod
    def get_children(self, entry_id: str | None) -> list[SessionTreeEntry]:
        """The children of ``entry_id`` in file order (the roots for ``None``)."""

    @abc.abstractmethod
    def get_entries(
        self,
        type: str | None = None,
        *,
        since: str | None = None,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[SessionTreeEntry]:
        """Entries in file order (newest first with ``reverse``), optionally of one
        ``type``, after the entry ``since`` (exclusive), at most ``limit`` of them."""

    @abc.abstractmethod
    def get_session_stats(self) -> SessionStats:
        """Counts and usage over the whole session."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of entries."""

    @abc.abstractmethod
    def close(self) -> None:
        """Releases the storage; idempotent."""

    def get_branch_entries(
        self, leaf_id: str | None, *, known: Mapping[str, SessionTreeEntry] | None = None
    ) -> list[SessionTreeEntry]:
        """The same list as :meth:`get_path_to_root_or_compaction`; an implementation may
        take entries from ``known`` (entries this storage returned before, by id) instead
        of building them again.

        ``Session`` calls this to refresh its cached context after a leaf move or a
        compaction. The default ignores ``known``.
        """
        return self.get_path_to_root_or_compaction(leaf_id)

    def get_context_state_entries(self, leaf_id: str | None) -> list[SessionTreeEntry]:
        """The entries on the path to the root of ``leaf_id`` that decide the context
        state: the nearest ``thinking_level_change``, the nearest ``model_change`` or
        assistant message and the nearest ``active_tools_change`` (any order).

        Replaying them gives the same :class:`ContextState` as replaying the whole path.
        The default walks :meth:`get_path_to_root`; storages that can stop early override it.
        """
        found: dict[int, SessionTreeEntry] = {}
        for entry in reversed(self.get_path_to_root(leaf_id)):
            slot = _state_slot(entry)
            if slot >= 0 and slot not in found:
                found[slot] = entry
                if len(found) == 3:
                    break
        return list(found.values())

    def get_entries_with_parents(self) -> tuple[list[SessionTreeEntry], list[int]]:
        """Every entry in file order, and for each the position of its parent in that
        list (``-1`` for a root); ``Session.get_tree`` is built from it.

        The default derives the positions from :meth:`get_entries`; a parent listed
        after its child (a custom storage may do that) counts as a root.
        """
        entries = self.get_entries()
        pos = {e.id: i for i, e in enumerate(entries)}
        parents = [-1 if e.parent_id is None else pos.get(e.parent_id, -1) for e in entries]
        return entries, [p if p < i else -1 for i, p in enumerate(parents)]

    def get_labels(self) -> dict[str, str]:
        """Every current label as ``{entry id: label}``.

        The default asks :meth:`get_label` for every entry; storages override it.
        """
        labels: dict[str, str] = {}
        for entry in self.get_entries():
            label = self.get_label(entry.id)
            if label is not None:
                labels[entry.id] = label
        return labels

    def __enter__(self) -> SessionStorage:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _state_slot(entry: SessionTreeEntry) -> int:
    """Which piece of context state ``entry`` sets: 0 thinking, 1 model, 2 tools, -1 none."""
    if isinstance(entry, ThinkingLevelChangeEntry):
        return 0
    if isinstance(entry, ModelChangeEntry) or (
        isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage)
    ):
        return 1
    if isinstance(entry, ActiveToolsChangeEntry):
        return 2
    return -1


_MAX_ID_BYTES = 256


class Limits:
    """Limits on what a session file may contain (``limit_exceeded`` when passed).

    Attributes:
        max_line_bytes: longest entry line (default 256 MiB).
        max_depth: deepest JSON nesting (default and hard cap 128).
        max_id_bytes: longest entry id (default 256).
    """

    __slots__ = ("max_depth", "max_id_bytes", "max_line_bytes")

    def __init__(
        self,
        max_line_bytes: int | None = None,
        max_depth: int | None = None,
        max_id_bytes: int | None = None,
    ) -> None:
        for name, value in (
            ("max_line_bytes", max_line_bytes),
            ("max_depth", max_depth),
            ("max_id_bytes", max_id_bytes),
        ):
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 1
            ):
                raise SessionError("invalid_argument", f"{name} must be a positive int")
        if max_id_bytes is not None and max_id_bytes > _MAX_ID_BYTES:
            # Readers accept ids up to 256 bytes (FORMAT.md); the limit only tightens it.
            raise SessionError("invalid_argument", f"max_id_bytes must be at most {_MAX_ID_BYTES}")
        self.max_line_bytes = max_line_bytes
        self.max_depth = max_depth
        self.max_id_bytes = max_id_bytes

    def kwargs(self) -> dict[str, int | None]:
        """Keyword arguments for the engine."""
        return {
            "max_line_bytes": self.max_line_bytes,
            "max_depth": self.max_depth,
            "max_id_bytes": self.max_id_bytes,
        }

    def __repr__(self) -> str:
        return (
            f"Limits(max_line_bytes={self.max_line_bytes}, max_depth={self.max_depth}, "
            f"max_id_bytes={self.max_id_bytes})"
        )


def _check_id_arg(name: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise SessionError("invalid_argument", f"{name} must be a str, not {type(value).__name__}")


def _from_dicts(fetch: Callable[[], Sequence[Any]]) -> list[SessionTreeEntry]:
    """Builds entries from the dicts the engine parses (no second JSON parse in Python).

    The engine validated every line's fields when it loaded or appended it, so the entries
    are built without a second validation (``entries._trusted_entry_reader``).
    """
    return _materialize(fetch, _trusted_entry_reader())


def _materialize(
    fetch: Callable[[], Sequence[Any]], make: Callable[[Any], SessionTreeEntry]
) -> list[SessionTreeEntry]:
    """``[make(x) for x in fetch()]`` with the cyclic garbage collector paused.

    Building thousands of (acyclic) dicts and entry objects otherwise triggers repeated
    full collections that cost about a third of the time. The pause covers one call, on
    this thread; the collector runs again as soon as it returns.
    """
    if not gc.isenabled():
        return [make(x) for x in fetch()]
    gc.disable()
    try:
        return [make(x) for x in fetch()]
    finally:
        gc.enable()


class _EngineStorage(SessionStorage):
    """The engine-backed implementation shared by both storages."""

    _engine: _core.Engine
    _header: SessionHeader | None

    def __init__(self, engine: _core.Engine) -> None:
        self._engine = engine
        self._header = None

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._engine.closed

    def _check(self) -> None:
        if self._engine.closed:
            raise SessionError("closed", "the session storage is closed")

    def get_metadata(self) -> SessionHeader:
        self._check()
        if self._header is None:
            self._header = header_from_dict(json.loads(self._engine.header()))
        return self._header

    @property
    def session_id(self) -> str:
        """The session id from the header."""
        return self._engine.session_id

    def get_leaf_id(self) -> str | None:
        self._check()
        leaf = self._engine.leaf()
        return None if leaf is None else self._engine.id_of(leaf)

    def set_leaf_id(self, entry_id: str | None) -> None:
        _check_id_arg("entry_id", entry_id, optional=True)
        self._check()
        entry = LeafEntry(
            id=self._engine.create_entry_id(),
            parent_id=self.get_leaf_id(),
            timestamp=now_iso(),
            target_id=entry_id,
        )
        self._engine.append(entry_to_json(entry))

    def create_entry_id(self) -> str:
        self._check()
        return self._engine.create_entry_id()

    def append_entry(self, entry: SessionTreeEntry) -> None:
        if not isinstance(entry, SessionTreeEntry):
            raise SessionError(
                "invalid_argument", f"expected a session entry, not {type(entry).__name__}"
            )
        self._check()
        self._engine.append(entry_to_json(entry))

    def get_entry(self, entry_id: str) -> SessionTreeEntry | None:
        _check_id_arg("entry_id", entry_id, optional=False)
        self._check()
        idx = self._engine.lookup(entry_id)
        return None if idx is None else entry_from_dict(self._engine.objects([idx])[0])

    def find_entries(self, type: str) -> list[SessionTreeEntry]:
        _check_id_arg("type", type, optional=False)
        self._check()
        engine = self._engine
        return _from_dicts(lambda: engine.objects(engine.find(type)))

    def get_label(self, entry_id: str) -> str | None:
        _check_id_arg("entry_id", entry_id, optional=False)
        self._check()
        # API.md: an unknown id is ``not_found`` everywhere but ``get_entry``; ``None``
        # would hide a typo as "no label".
        if self._engine.lookup(entry_id) is None:
            raise SessionError("not_found", f"entry {entry_id!r} not found")
        return self._engine.label(entry_id)

    def get_labels(self) -> dict[str, str]:
        self._check()
        return self._engine.labels()

    def get_session_name(self) -> str | None:
        self._check()
        return self._engine.name()

    def get_path_to_root_or_compaction(self, leaf_id: str | None) -> list[SessionTreeEntry]:
        _check_id_arg("leaf_id", leaf_id, optional=True)
        self._check()
        engine = self._engine
        return _from_dicts(lambda: engine.path_objects(leaf_id, True))

    def get_path_to_root(self, entry_id: str | None) -> list[SessionTreeEntry]:
        _check_id_arg("entry_id", entry_id, optional=True)
        self._check()
        engine = self._engine
        return _from_dicts(lambda: engine.path_objects(entry_id, False))

    def get_children(self, entry_id: str | None) -> list[SessionTreeEntry]:
        _check_id_arg("entry_id", entry_id, optional=True)
        self._check()
        engine = self._engine
        return _from_dicts(lambda: engine.objects(engine.children(entry_id)))

    def get_entries(
        self,
        type: str | None = None,
        *,
        since: str | None = None,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[SessionTreeEntry]:
        _check_id_arg("type", type, optional=True)
        _check_id_arg("since", since, optional=True)
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise SessionError("invalid_argument", "limit must be an int or None")
        if limit is not None and limit < 0:
            raise SessionError("invalid_argument", f"limit must not be negative (got {limit})")
        self._check()
        idxs = self._engine.select(type, since, limit, bool(reverse))
        engine = self._engine
        return _from_dicts(lambda: engine.objects(idxs))

    def get_session_stats(self) -> SessionStats:
        self._check()
        return SessionStats(*self._engine.stats())

    def __len__(self) -> int:
        self._check()
        return len(self._engine)

    @property
    def load_report(self) -> LoadReport:
        """What loading found: skipped lines and the size of a torn tail."""
        issues, torn = self._engine.report()
        return LoadReport(tuple(LoadIssue(*i) for i in issues), torn)

    def flush(self) -> None:
        """Writes buffered appends out (and syncs them unless durability is ``none``)."""
        self._engine.flush()

    def close(self) -> None:
        self._engine.close()

    def get_branch_entries(
        self, leaf_id: str | None, *, known: Mapping[str, SessionTreeEntry] | None = None
    ) -> list[SessionTreeEntry]:
        if not known:
            return self.get_path_to_root_or_compaction(leaf_id)
        _check_id_arg("leaf_id", leaf_id, optional=True)
        self._check()
        engine = self._engine
        idxs = engine.path_indices(leaf_id, True)
        ids = [engine.id_of(i) for i in idxs]
        missing = [i for i, entry_id in zip(idxs, ids, strict=True) if entry_id not in known]
        made = iter(_from_dicts(lambda: engine.objects(missing)))
        return [known[entry_id] if entry_id in known else next(made) for entry_id in ids]

    def get_entries_with_parents(self) -> tuple[list[SessionTreeEntry], list[int]]:
        self._check()
        engine = self._engine
        return _from_dicts(lambda: engine.objects(range(len(engine)))), engine.parents()

    def get_context_state_entries(self, leaf_id: str | None) -> list[SessionTreeEntry]:
        _check_id_arg("leaf_id", leaf_id, optional=True)
        self._check()
        return [entry_from_json(line) for line in self._engine.state_lines(leaf_id) if line]


def _make_header(header: SessionHeader | None) -> bytes:
    if header is None:
        header = SessionHeader.generate()
    elif not isinstance(header, SessionHeader):
        raise SessionError(
            "invalid_argument", f"header must be a SessionHeader, not {type(header).__name__}"
        )
    return header_to_json(header)


def _check_durability(durability: object) -> str:
    if durability not in DURABILITY_MODES:
        raise SessionError(
            "invalid_argument",
            f"durability must be one of {', '.join(DURABILITY_MODES)} (got {durability!r})",
        )
    return str(durability)


def _index(index: object) -> dict[str, Any]:
    if isinstance(index, bool):
        return {"index": index}
    if isinstance(index, int) and index >= 0:
        return {"index": True, "index_min_bytes": index}
    raise SessionError("invalid_argument", "index must be a bool or a byte count >= 0")


def _limits(limits: Limits | None) -> dict[str, Any]:
    if limits is None:
        return {}
    if not isinstance(limits, Limits):
        raise SessionError("invalid_argument", "limits must be a sessiontree.Limits")
    return limits.kwargs()


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


class JsonlSessionStorage(_EngineStorage):
    """A session in an append-only JSONL file.

    Use :meth:`create` for a new file and :meth:`open` for an existing one. A writer
    holds the file's single-writer lock until :meth:`close`.
    """

    def __init__(
        self, engine: _core.Engine, durability: str = "group", readonly: bool = False
    ) -> None:
        if not isinstance(engine, _core.Engine):
            # The seed builds this storage from a path; point such callers to the factories.
            raise SessionError(
                "invalid_argument",
                "use JsonlSessionStorage.create(path) or JsonlSessionStorage.open(path)",
            )
        super().__init__(engine)
        self._durability = durability
        self._readonly = readonly

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        header: SessionHeader | None = None,
        *,
        durability: Durability = "group",
        limits: Limits | None = None,
        index: bool | int = True,
    ) -> JsonlSessionStorage:
        """Creates a new session file (mode 0600); ``exists`` if the file is there.

        Args:
            path: the file to create.
            header: the header to write (a new one by default).
            durability: ``none``, ``flush``, ``group`` or ``fsync``.
            limits: size limits.
            index: keep a persisted index once the file is large (see :meth:`open`).
        """
        file = fspath_arg("path", path)
        mode = _check_durability(durability)
        engine = _core.Engine.create(
            file, _make_header(header), mode, **_limits(limits), **_index(index)
        )
        return cls(engine, mode, False)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        readonly: bool = False,
        strict: bool = False,
        durability: Durability = "group",
        limits: Limits | None = None,
        index: bool | int = True,
    ) -> JsonlSessionStorage:
        """Opens a session file.

        Args:
            path: the session file.
            readonly: take no lock and never change the file (see :meth:`refresh`).
            strict: raise ``corrupt`` on any problem instead of skipping and reporting it.
            durability: ``none``, ``flush``, ``group`` or ``fsync`` (writers).
            limits: size limits.
            index: use and keep a persisted index ``<file>.idx`` for files of 8 MiB or
                more (an int sets that threshold in bytes; ``False`` never reads or writes
                one). The index only saves the reopen scan: it is checked against the
                file and rebuilt when stale, torn or foreign, and the JSONL file stays the
                only source of truth. Read-only opens write it too (best effort) but never
                touch the session file.

        Raises:
            SessionError: ``not_found``, ``corrupt``, ``locked``, ``io``, ...
        """
        file = fspath_arg("path", path)
        mode = _check_durability(durability)
        engine = _core.Engine.open(
            file,
            bool(readonly),
            bool(strict),
            mode,
            **_limits(limits),
            **_index(index),
        )
        return cls(engine, mode, bool(readonly))

    @property
    def path(self) -> str:
        """The session file."""
        return str(self._engine.path)

    @property
    def readonly(self) -> bool:
        """True when opened read-only."""
        return self._readonly

    @property
    def durability(self) -> str:
        """The durability mode of appends."""
        return self._durability

    @property
    def index_status(self) -> str:
        """What the persisted index did at open: ``unused``, ``loaded``, ``created`` or
        ``rebuilt`` (one was there but stale, torn or foreign)."""
        return self._engine.index_status

    @property
    def torn_path(self) -> str | None:
        """Where a writer open saved a torn last line, if it cut one."""
        p = self._engine.torn_path
        return None if p is None else str(p)

    def refresh(self) -> int:
        """Reads lines another writer appended since opening (read-only storages).

        Returns:
            the number of new entries.
        """
        self._check()
        return self._engine.refresh()

    def _require_writable(self) -> None:
        self._check()
        if self._readonly:
            raise SessionError("readonly", f"{self.path} is open read-only")

    def set_leaf_id(self, entry_id: str | None) -> None:
        self._require_writable()
        super().set_leaf_id(entry_id)

    def append_entry(self, entry: SessionTreeEntry) -> None:
        self._require_writable()
        # The base method's checks, less its second ``_check()``.
        if not isinstance(entry, SessionTreeEntry):
            raise SessionError(
                "invalid_argument", f"expected a session entry, not {type(entry).__name__}"
            )
        self._engine.append(entry_to_json(entry))

    def __repr__(self) -> str:
        if self.closed:
            state = "closed"
        else:
            state = f"{len(self)} entries, {'read-only' if self._readonly else self._durability}"
        return f"<JsonlSessionStorage {self.path!r} {state}>"
