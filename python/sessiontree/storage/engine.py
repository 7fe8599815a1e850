"""What both engine-backed storages share: the Rust engine handle, limits and argument checks."""

from __future__ import annotations

import _thread
from typing import TYPE_CHECKING

from .. import _core
from .._gc import paused_gc
from .._util import check_text, now_iso
from ..errors import SessionError
from ..model.entries import (
    _KNOWN_ENTRY_CLASSES,
    MAX_ID_BYTES,
    LeafEntry,
    MessageEntry,
    SessionHeader,
    SessionTreeEntry,
    entry_from_dict,
    entry_from_json,
    entry_to_json,
    header_from_dict,
    header_to_json,
)
from ..model.messages import (
    _ASSISTANT_BLOCKS,
    _MESSAGE_CLASSES,
    _USER_BLOCKS,
    _ZERO_COST,
    _ZERO_USAGE,
    AgentMessage,
    Cost,
    Usage,
)
from ..model.types import LoadIssue, LoadReport, SessionStats, TreeNode
from .base import (
    DURABILITY_MODES,
    FORK_NULL_TARGET,
    FORK_OUTSIDE,
    ForkSource,
    SessionStorage,
    fork_target_error,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, ClassVar, Final

__all__ = ["Limits"]


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
        if max_id_bytes is not None and max_id_bytes > MAX_ID_BYTES:
            # Readers accept ids up to MAX_ID_BYTES (FORMAT.md); the limit only tightens it.
            raise SessionError("invalid_argument", f"max_id_bytes must be at most {MAX_ID_BYTES}")
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
    """The gate every text argument of an engine storage's methods passes before the
    engine sees it: a ``str`` (or ``None`` when ``optional``) that UTF-8 can encode.

    Text with a lone surrogate is refused with ``invalid_argument`` like a value of the
    wrong type, by lookups too (``get_entry`` included): no id in a session can hold it,
    and the binding would raise a bare ``UnicodeEncodeError`` taking it. Checked here,
    not by catching that error around each engine call: the check costs one
    ``isascii()`` for ASCII text, a wrapper around ``get_entry`` an eighth of its time.
    """
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise SessionError("invalid_argument", f"{name} must be a str, not {type(value).__name__}")
    if not value.isascii():
        check_text(name, value)


# The binding builds the commonest entries (messages of the user, assistant and tool-result
# roles) itself, straight from their lines; which types it builds is its own choice
# (`DIRECT` in rust/py/build.rs), so it is handed every model class by name, and the shared
# zero usage and cost that missing ones read as. The lines of appended entries are written
# by the engine's one writer (rust/py/encode.rs), which ``sessiontree.model`` registers.
_MODEL_CLASSES: Final = {
    cls.__name__: cls
    for cls in (
        *_USER_BLOCKS,
        *_ASSISTANT_BLOCKS,
        Cost,
        Usage,
        *_MESSAGE_CLASSES,
        *_KNOWN_ENTRY_CLASSES,
        TreeNode,
    )
}
_core._register_model(_MODEL_CLASSES, {"Usage": _ZERO_USAGE, "Cost": _ZERO_COST})

# What the engine stands in for when it stamps and writes a message in one call
# (``append_message``): a subclass that overrides any of these appends the generic way.
_STAMPING: Final = ("append_entry", "create_entry_id", "get_leaf_id")


def _read_entries(fetch: Callable[[], tuple[list[Any], list[int]]]) -> list[SessionTreeEntry]:
    """Entries from ``Engine.entries``/``path_entries``, with no second JSON parse in Python.

    The engine validated every line's fields when it loaded or appended it. It hands the
    entries out as complete objects, built from their lines by ``rust/py/build.rs`` for
    every type and role of the model table; the few it does not
    vouch for (an integer wider than 64 bits, a long id, an unknown type or role) come as
    dicts, at the positions it names, and are built here by the validating reader,
    :func:`~sessiontree.model.entries.entry_from_dict`.

    The cyclic garbage collector is paused for the call (:mod:`sessiontree._gc`): building
    thousands of (acyclic) objects otherwise triggers repeated full collections that cost
    about a third of the time.
    """
    with paused_gc():
        entries, dicts = fetch()
        for i in dicts:
            entries[i] = entry_from_dict(entries[i])
        return entries


class _EngineStorage(SessionStorage):
    """The engine-backed implementation shared by both storages."""

    _engine: _core.Engine
    _header: SessionHeader | None
    # Whether ``append_message`` is one engine call (see ``_STAMPING``).
    _stamp_in_engine: ClassVar[bool] = True
    # False while this handle refuses appends before the engine sees them (a read-only
    # file, a released share): ``_refuse_append`` raises why. The engine refuses a closed
    # or read-only store itself.
    _may_append: bool = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._stamp_in_engine = not any(
            name in vars(k)
            for k in cls.__mro__
            if not k.__module__.startswith(__package__ + ".")
            for name in _STAMPING
        )

    def __init__(self, engine: _core.Engine, atomic: _thread.RLock | None = None) -> None:
        self._engine = engine
        self._header = None
        # Shared by every handle on one engine (see ``InMemorySessionStorage.share``).
        self._atomic_lock = _thread.RLock() if atomic is None else atomic

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._engine.closed

    def atomic(self) -> _thread.RLock:
        return self._atomic_lock

    def _check(self) -> None:
        if self._engine.closed:
            raise SessionError("closed", "the session storage is closed")

    def get_metadata(self) -> SessionHeader:
        self._check()
        if self._header is None:
            self._header = header_from_dict(_core.json_loads(self._engine.header()))
        return self._header

    @property
    def session_id(self) -> str:
        """The session id from the header."""
        return self._engine.session_id

    @property
    def dialect(self) -> str:
        """``"sessiontree"``, or ``"pi"`` for a file written by pi (told by the engine from
        the header and the first entries; see ``docs/pi.md``)."""
        return self._engine.dialect[0]

    @property
    def format_version(self) -> int:
        """The file-format version the file is written in (pi's v1 and v2 files are read
        as if migrated to v3, and only read)."""
        return self._engine.dialect[1]

    def get_leaf_id(self) -> str | None:
        self._check()
        leaf = self._engine.leaf()
        return None if leaf is None else self._engine.id_of(leaf)

    def set_leaf_id(self, entry_id: str | None) -> None:
        _check_id_arg("entry_id", entry_id, optional=True)
        self._check()
        if not self._may_append:
            self._refuse_append()
        with self._atomic_lock:
            entry = LeafEntry(
                id=self._engine.create_entry_id(),
                parent_id=self.get_leaf_id(),
                timestamp=now_iso(),
                target_id=entry_id,
            )
            self._engine.append_entry(entry)

    def create_entry_id(self) -> str:
        self._check()
        return self._engine.create_entry_id()

    def _refuse_append(self) -> None:
        self._check()

    def append_entry(self, entry: SessionTreeEntry) -> None:
        if not self._may_append:
            self._refuse_append()
        if not isinstance(entry, SessionTreeEntry):
            raise SessionError(
                "invalid_argument", f"expected a session entry, not {type(entry).__name__}"
            )
        # Encoded from the entry's slots, checked and written in one engine call.
        self._engine.append_entry(entry)

    def append_entries(self, entries: Sequence[SessionTreeEntry]) -> None:
        """Appends ``entries`` (in order) as one unit: every entry is encoded and checked —
        as :meth:`append_entry` checks one, its references against the session and the
        batch's earlier entries — before any is written; then all of them are written with
        one write (a PostgreSQL storage: one transaction) and only then indexed. When one
        is refused, nothing is written and the error names it (``line N of the batch``).

        Raises:
            SessionError: what :meth:`append_entry` raises for the entry refused.
        """
        if not self._may_append:
            self._refuse_append()
        self._check()
        entries = list(entries)
        for entry in entries:
            if not isinstance(entry, SessionTreeEntry):
                raise SessionError(
                    "invalid_argument", f"expected a session entry, not {type(entry).__name__}"
                )
        if entries:
            self._append_lines(_entry_lines(entries))

    def _append_lines(self, lines: list[bytes]) -> None:
        """Appends entry lines as one unit (``Engine.append_lines``): what
        :meth:`append_entries` and the framework adapters' batches end in."""
        if not self._may_append:
            self._refuse_append()
        self._check()
        self._engine.append_lines(lines)

    def append_message(self, message: AgentMessage) -> MessageEntry:
        if self._stamp_in_engine:
            if not self._may_append:
                self._refuse_append()
            # Id, parent, time, encoding, checks and the write in one engine call; None
            # when the message is not exactly a model class (a subclass, a wrong type).
            entry = self._engine.append_message(message)
            if entry is not None:
                return entry  # type: ignore[no-any-return]
        return super().append_message(message)

    def get_entry(self, entry_id: str) -> SessionTreeEntry | None:
        _check_id_arg("entry_id", entry_id, optional=False)
        self._check()
        idx = self._engine.lookup(entry_id)
        engine = self._engine
        return None if idx is None else _read_entries(lambda: engine.entries([idx]))[0]

    def find_entries(self, type: str) -> list[SessionTreeEntry]:
        _check_id_arg("type", type, optional=False)
        self._check()
        engine = self._engine
        return _read_entries(lambda: engine.entries(engine.find(type)))

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
        return _read_entries(lambda: engine.path_entries(leaf_id, True))

    def get_path_to_root(self, entry_id: str | None) -> list[SessionTreeEntry]:
        _check_id_arg("entry_id", entry_id, optional=True)
        self._check()
        engine = self._engine
        return _read_entries(lambda: engine.path_entries(entry_id, False))

    def get_children(self, entry_id: str | None) -> list[SessionTreeEntry]:
        _check_id_arg("entry_id", entry_id, optional=True)
        self._check()
        engine = self._engine
        return _read_entries(lambda: engine.entries(engine.children(entry_id)))

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
        return _read_entries(lambda: engine.entries(idxs))

    def get_session_stats(self) -> SessionStats:
        self._check()
        return SessionStats(*self._engine.stats())

    def __len__(self) -> int:
        self._check()
        return len(self._engine)

    @property
    def load_report(self) -> LoadReport:
        """What loading found: skipped lines and the size of a torn tail."""
        issues, torn, counts = self._engine.report()
        return LoadReport(tuple(LoadIssue(*i) for i in issues), torn, tuple(counts))

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
        made = iter(_read_entries(lambda: engine.entries(missing)))
        return [known[entry_id] if entry_id in known else next(made) for entry_id in ids]

    def get_entries_with_parents(self) -> tuple[list[SessionTreeEntry], list[int]]:
        self._check()
        engine = self._engine
        return _read_entries(lambda: engine.entries(range(len(engine)))), engine.parents()

    def get_parent_positions(self) -> list[int]:
        self._check()
        return self._engine.parents()

    def get_entries_at(self, positions: Sequence[int]) -> list[SessionTreeEntry]:
        self._check()
        engine = self._engine
        n = len(engine)
        idxs: list[int] = []
        for p in positions:
            if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < n:
                raise SessionError("invalid_argument", f"no entry at position {p!r}")
            idxs.append(p)
        return _read_entries(lambda: engine.entries(idxs))

    def get_positions(self, entry_ids: Sequence[str]) -> list[int | None]:
        self._check()
        lookup = self._engine.lookup
        out: list[int | None] = []
        for entry_id in entry_ids:
            _check_id_arg("entry_id", entry_id, optional=False)
            out.append(lookup(entry_id))
        return out

    def get_line(self, entry_id: str) -> bytes:
        self._check()
        _check_id_arg("entry_id", entry_id, optional=False)
        pos = self._engine.lookup(entry_id)
        if pos is None:
            raise SessionError("not_found", f"entry {entry_id!r} not found")
        return self._engine.raw_line(pos)

    def get_tree(self) -> list[TreeNode]:
        self._check()
        engine = self._engine
        with paused_gc():
            return engine.tree(_read_entries(lambda: engine.entries(range(len(engine)))))

    def get_newest_timestamp(self) -> str | None:
        self._check()
        return self._engine.newest_timestamp()

    def get_first_message(self, role: str) -> MessageEntry | None:
        _check_id_arg("role", role, optional=False)
        self._check()
        engine = self._engine
        first = next((i for i in engine.select("message") if engine.info(i)[1] == role), None)
        if first is None:
            return None
        entry = _read_entries(lambda: engine.entries([first]))[0]
        assert isinstance(entry, MessageEntry)
        return entry

    def get_fork_source(self, entry_id: str | None, position: str) -> ForkSource:
        # Works on engine indices and raw lines: no entry objects are built, and lines are
        # copied byte for byte unless their parent changes.
        _check_id_arg("entry_id", entry_id, optional=True)
        self._check()
        engine = self._engine
        where: dict[int, int] | None = None
        parents_of_all: list[int] = []

        def all_parents() -> list[int]:
            if not parents_of_all:
                parents_of_all.extend(engine.parents())
            return parents_of_all

        def pos_of_key(k: int) -> int:
            return k if where is None else where.get(k, FORK_OUTSIDE)

        keys: Sequence[int]
        if entry_id is None:
            keys = range(len(engine))
            parent: Sequence[int] = all_parents()
            source_leaf = engine.leaf()
            leaf_pos: int | None = FORK_OUTSIDE if source_leaf is None else source_leaf
        else:
            target = engine.lookup(entry_id)
            if target is None:
                raise SessionError("not_found", f"entry {entry_id!r} not found")
            kind, role, target_parent, _, _ = engine.info(target)
            if position == "at":
                keys = engine.path_indices(entry_id, True)
            else:
                if kind == "message" and role != "user":
                    raise fork_target_error(entry_id, role or "")
                keys = (
                    []
                    if target_parent is None
                    else engine.path_indices(engine.id_of(target_parent), True)
                )
            where = {k: i for i, k in enumerate(keys)}
            # A path runs root first, each entry the child of the one before it (across a
            # compaction's cut too): the first is a root of the copy.
            parent = [FORK_OUTSIDE, *range(len(keys) - 1)] if keys else []
            leaf_pos = None

        special: dict[int, tuple[str, int, str | None]] = {}
        for type_name in ("label", "leaf", "session_info"):
            idxs = [k for k in engine.find(type_name) if pos_of_key(k) >= 0]
            if not idxs:
                continue
            for k, raw in zip(idxs, engine.lines(idxs), strict=True):
                tgt = engine.info(k)[3]
                if type_name == "session_info":
                    name = _core.json_loads(raw).get("name")
                    special[pos_of_key(k)] = (
                        type_name,
                        FORK_OUTSIDE,
                        name if isinstance(name, str) else None,
                    )
                elif type_name == "label":
                    text = _core.json_loads(raw).get("label")
                    tpos = FORK_OUTSIDE if tgt is None else pos_of_key(tgt)
                    special[pos_of_key(k)] = (
                        type_name,
                        tpos,
                        text if isinstance(text, str) else None,
                    )
                else:
                    if tgt is not None:
                        tpos = pos_of_key(tgt)
                    elif _core.json_loads(raw).get("target_id") is not None:
                        # A target the reader could not find (the load report says so, but
                        # keeps only the first issues): the move is dropped.
                        tpos = FORK_OUTSIDE
                    else:
                        tpos = FORK_NULL_TARGET
                    special[pos_of_key(k)] = (type_name, tpos, None)

        def position_of(eid: str) -> int | None:
            k = engine.lookup(eid)
            if k is None:
                return None
            p = pos_of_key(k)
            return None if p < 0 else p

        def write_lines(kept: Sequence[int], new_parent: Sequence[int]) -> list[bytes]:
            self._check()
            src_keys = [keys[i] for i in kept]
            lines = engine.lines(src_keys)
            parents = all_parents()
            for j, (k, np) in enumerate(zip(src_keys, new_parent, strict=True)):
                new_key = FORK_OUTSIDE if np < 0 else keys[np]
                # A root of the engine whose line names a parent the reader could not find
                # (a dangling parent) is written with ``parent_id`` null too.
                if parents[k] != new_key or (
                    new_key < 0 and _core.json_loads(lines[j]).get("parent_id") is not None
                ):
                    # Every other byte of the line is kept (rust/engine/fork.rs).
                    lines[j] = _core.reparent_line(
                        lines[j], None if new_key < 0 else engine.id_of(new_key)
                    )
            return lines

        def write_file(
            path: str,
            header: bytes,
            kept: Sequence[int],
            new_parent: Sequence[int],
            extras: list[bytes],
            *,
            durability: str = "group",
            limits: Limits | None = None,
        ) -> _core.Engine:
            # The lines' bytes are copied by the kernel and the new file's arena is built
            # from this one's, so the fork is not scanned again (rust/engine/fork.rs).
            self._check()
            mode = _check_durability(durability)
            # Positions to engine indices; a parent outside the copy (-1) stays -1.
            index = [*keys, -1]
            forked = engine.fork_to(
                path,
                header,
                list(map(index.__getitem__, kept)),
                list(map(index.__getitem__, new_parent)),
                extras,
                mode,
                **_limits(limits),
            )
            return forked

        return ForkSource(
            id_of=lambda i: engine.id_of(keys[i]),
            parent=parent,
            special=special,
            labels=engine.labels(),
            name=engine.name(),
            leaf=leaf_pos,
            position_of=position_of,
            write_lines=write_lines,
            write_file=write_file,
        )

    def get_context_state_entries(self, leaf_id: str | None) -> list[SessionTreeEntry]:
        _check_id_arg("leaf_id", leaf_id, optional=True)
        self._check()
        return [entry_from_json(line) for line in self._engine.state_lines(leaf_id) if line]


_SCRATCH_HEADER: list[bytes] = []


def _scratch_header() -> bytes:
    """The header of the scratch engines batches are encoded on (made once)."""
    if not _SCRATCH_HEADER:
        _SCRATCH_HEADER.append(_make_header(None))
    return _SCRATCH_HEADER[0]


def _entry_lines(entries: Sequence[SessionTreeEntry]) -> list[bytes]:
    """The lines of ``entries``, as the engine's writer writes them (``entry_to_json``);
    the engine checks every line again before it writes the batch."""
    return [entry_to_json(entry) for entry in entries]


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
