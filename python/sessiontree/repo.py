"""Session repositories: many sessions under one roof, with create, open, list, delete, fork.

:class:`JsonlSessionRepo` keeps one file per session (``<root>/<session id>.jsonl``) and
caches what :meth:`~SessionRepo.list` needs per file, so listing thousands of sessions does
not re-read unchanged files. :class:`InMemorySessionRepo` has the same API without files,
for tests. Both implement :class:`SessionRepo`; :func:`get_entries_to_fork` is the fork
selection on its own, for any :class:`~sessiontree.storage.SessionStorage`.

>>> repo = InMemorySessionRepo()
>>> session = repo.create(cwd="/tmp/project", name="demo")
>>> [m.name for m in repo.list(cwd="/tmp/project")]
['demo']
>>> session.close()
"""

from __future__ import annotations

import abc
import builtins
import contextlib
import errno
import fcntl
import json
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any, Final, Literal, TypeAlias

from . import _core
from ._util import fspath_arg, iso_to_datetime, now_iso, uuid7
from .entries import (
    LabelEntry,
    LeafEntry,
    MessageEntry,
    SessionHeader,
    SessionInfoEntry,
    SessionTreeEntry,
    entry_from_dict,
    entry_from_json,
    entry_to_dict,
    entry_to_json,
    header_from_dict,
    header_to_json,
)
from .errors import SessionError
from .session import Session
from .storage import (
    DURABILITY_MODES,
    Durability,
    InMemorySessionStorage,
    JsonlSessionStorage,
    Limits,
    SessionStorage,
)
from .storage.engine import _EngineStorage
from .types import SessionMetadata

__all__ = [
    "FORK_POSITIONS",
    "ForkPosition",
    "InMemorySessionRepo",
    "JsonlSessionRepo",
    "SessionRef",
    "SessionRepo",
    "get_entries_to_fork",
    "is_valid_session_id",
]

ForkPosition: TypeAlias = Literal["before", "at"]
"""Where a fork starts relative to its target entry."""

FORK_POSITIONS: Final[tuple[str, ...]] = ("before", "at")
"""The allowed values of ``position`` in :meth:`SessionRepo.fork`."""

SessionRef: TypeAlias = SessionMetadata | str
"""A session named by its :class:`SessionMetadata` (from ``list``) or by its id."""

# ``fullmatch`` rather than ``$``: ``$`` also matches before a trailing newline.
_SESSION_ID_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_SUFFIX: Final = ".jsonl"
_CACHE_NAME: Final = ".sessiontree-list-cache.json"
_CACHE_FORMAT: Final = "sessiontree-list-cache"
# 2: ``modified`` is no earlier than ``created`` (version 1 rows may be).
_CACHE_VERSION: Final = 2
# A cache bigger than this is not ours (a row is a few hundred bytes).
_CACHE_MAX_BYTES: Final = 256 << 20
_MIN_TIME: Final = datetime.min.replace(tzinfo=timezone.utc)

_O_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)


# --------------------------------------------------------------------------- argument checks


def is_valid_session_id(session_id: object) -> bool:
    """Tell whether ``session_id`` is usable as a session id (and so as a file name).

    A session id is 1-128 ASCII letters, digits, ``.``, ``_`` or ``-``, starting with a
    letter or digit: ``^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$``. That rules out path
    separators, ``..``, hidden names and names too long for a file system.

    Args:
        session_id: the candidate.

    Returns:
        True if it is a ``str`` matching the pattern.

    >>> is_valid_session_id("0192f3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b"), is_valid_session_id("../x")
    (True, False)
    """
    return isinstance(session_id, str) and _SESSION_ID_RE.fullmatch(session_id) is not None


def _check_session_id(session_id: object) -> str:
    if not isinstance(session_id, str):
        raise SessionError(
            "invalid_argument", f"a session id must be a str, not {type(session_id).__name__}"
        )
    if _SESSION_ID_RE.fullmatch(session_id) is None:
        shown = session_id if len(session_id) <= 60 else session_id[:57] + "..."
        raise SessionError(
            "invalid_id",
            f"{shown!r} is not a valid session id (1-128 characters of A-Z a-z 0-9 . _ -, "
            "starting with a letter or digit)",
        )
    return session_id


def _ref_id(ref: object) -> str:
    if isinstance(ref, SessionMetadata):
        return _check_session_id(ref.id)
    if isinstance(ref, str):
        return _check_session_id(ref)
    raise SessionError(
        "invalid_argument",
        f"a session reference must be a SessionMetadata or a session id, not {type(ref).__name__}",
    )


def _new_header(
    cwd: object, name: object, parent_session: object, metadata: object, session_id: object
) -> SessionHeader:
    """Checks ``create``'s arguments and builds the new session's header."""
    if cwd is None:
        cwd_text = os.getcwd()
    elif isinstance(cwd, (str, os.PathLike)):
        cwd_text = os.fspath(cwd)
        if not isinstance(cwd_text, str):
            raise SessionError("invalid_argument", "cwd must be a str path, not bytes")
    else:
        raise SessionError(
            "invalid_argument", f"cwd must be a str or os.PathLike, not {type(cwd).__name__}"
        )
    if name is not None and not isinstance(name, str):
        raise SessionError(
            "invalid_argument", f"name must be a str or None, not {type(name).__name__}"
        )
    if parent_session is not None and not isinstance(parent_session, str):
        raise SessionError(
            "invalid_argument",
            f"parent_session must be a str or None, not {type(parent_session).__name__}",
        )
    sid = uuid7() if session_id is None else _check_session_id(session_id)
    return SessionHeader.generate(
        cwd=cwd_text,
        parent_session=parent_session,
        metadata=metadata,  # type: ignore[arg-type]  # SessionHeader validates it
        session_id=sid,
    )


def _check_list_args(cwd: object, limit: object) -> str | None:
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise SessionError(
                "invalid_argument", f"limit must be an int or None, not {type(limit).__name__}"
            )
        if limit < 0:
            raise SessionError("invalid_argument", f"limit must not be negative (got {limit})")
    if cwd is None:
        return None
    if isinstance(cwd, (str, os.PathLike)):
        text = os.fspath(cwd)
        if isinstance(text, str):
            return os.path.normpath(text)
    raise SessionError(
        "invalid_argument", f"cwd must be a str, os.PathLike or None, not {type(cwd).__name__}"
    )


def _check_fork_args(entry_id: object, position: object) -> None:
    if position not in FORK_POSITIONS:
        raise SessionError(
            "invalid_argument", f"position must be 'before' or 'at' (got {position!r})"
        )
    if entry_id is not None and not isinstance(entry_id, str):
        raise SessionError(
            "invalid_argument", f"entry_id must be a str or None, not {type(entry_id).__name__}"
        )


def _select(
    rows: Iterable[SessionMetadata], cwd: str | None, limit: int | None
) -> list[SessionMetadata]:
    if cwd is not None:
        # A file whose header could not be read has no known cwd ("") and is kept in
        # every filtered listing, so a broken session is never hidden.
        rows = [m for m in rows if not m.cwd or os.path.normpath(m.cwd) == cwd]
    out = sorted(
        rows,
        key=lambda m: (m.modified or _MIN_TIME, m.created or _MIN_TIME, m.id),
        reverse=True,
    )
    return out if limit is None else out[:limit]


# --------------------------------------------------------------------------- metadata


def _user_text(line: bytes) -> str | None:
    """The text of a user message entry line: the string content, or text blocks joined."""
    try:
        d = json.loads(line)
    except ValueError:
        return None
    message = d.get("message") if isinstance(d, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return None


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return iso_to_datetime(value)
    except SessionError:
        return None


def _metadata_from_engine(
    engine: _core.Engine, session_id: str, path: str | None, size: int
) -> SessionMetadata:
    """What ``list`` shows for one session, from its engine (no entry objects built)."""
    header = json.loads(engine.header())
    cwd = header.get("cwd")
    parent = header.get("parent_session")
    created = _parse_time(header.get("timestamp"))
    newest = engine.newest_timestamp()
    newest_time = None if newest is None else _parse_time(newest)
    # API.md: the later of the header's time and the newest entry's, so a fresh fork (its
    # copied entries are older than its header) lists first.
    modified = (
        newest_time
        if created is None or (newest_time is not None and newest_time > created)
        else created
    )
    entry_count, message_count, user_count = engine.stats()[:3]
    first_message: str | None = None
    if user_count:
        for idx in engine.select("message"):
            if engine.info(idx)[1] == "user":
                first_message = _user_text(engine.lines([idx])[0])
                break
    error = None
    if engine.session_id != session_id:
        error = f"the header names session {engine.session_id!r}, not {session_id!r}"
    return SessionMetadata(
        id=session_id,
        path=path,
        cwd=cwd if isinstance(cwd, str) else "",
        created=created,
        modified=modified,
        name=engine.name(),
        parent_session=parent if isinstance(parent, str) else None,
        entry_count=entry_count,
        message_count=message_count,
        first_message=first_message,
        size_bytes=size,
        error=error,
    )


# --------------------------------------------------------------------------- fork selection

# Positions in a fork plan's copy table: an entry's parent (or a label/leaf target) that is
# not among the copied entries, and a leaf entry's explicit "before the first entry" target.
_OUTSIDE: Final = -1
_NULL_TARGET: Final = -2


class _CopyTable:
    """The entries a fork copies, in file order, reduced to what the plan needs.

    ``parent[i]`` is the position of entry ``i``'s parent in the table, or ``_OUTSIDE``
    (a root, a parent left out of the copy, or a dangling parent). ``special`` maps the
    positions of ``label``, ``leaf`` and ``session_info`` entries to (type, target
    position, label or name text).
    """

    __slots__ = ("ids", "parent", "special")

    def __init__(
        self,
        ids: Callable[[int], str],
        parent: Sequence[int],
        special: dict[int, tuple[str, int, str | None]],
    ) -> None:
        self.ids = ids
        self.parent = parent
        self.special = special


class _ForkPlan:
    """What to write: the kept positions, their new parents, and entries to append."""

    __slots__ = ("extras", "kept", "new_parent")

    def __init__(self, kept: list[int], new_parent: list[int], extras: list[SessionTreeEntry]):
        self.kept = kept
        self.new_parent = new_parent
        self.extras = extras


def _plan_fork(
    table: _CopyTable,
    *,
    position_of: Callable[[str], int | None],
    source_labels: dict[str, str],
    source_name: str | None,
    source_leaf: int | None,
    new_id: Callable[[], str],
) -> _ForkPlan:
    """Decide what a fork keeps, how it is re-parented and what it appends.

    ``source_leaf`` is the position the fork's leaf must end on for a full copy (``None``
    for a path copy, whose leaf is its last kept entry); ``position_of`` maps a source entry
    id to its table position (``None`` when it is not copied).

    A ``label`` entry whose target is not copied, and a ``leaf`` entry whose target is not
    copied, are dropped: they would be dangling references. Entries under a dropped entry
    hang from its nearest kept ancestor instead. Labels and the name are then made equal to
    the source's (for the copied entries) by appending ``label``/``session_info`` entries,
    and a final ``leaf`` entry puts the leaf where it belongs.
    """
    parent = table.parent
    special = table.special
    n = len(parent)
    dropped = bytearray(n)
    # For a dropped position: the kept ancestor its children re-attach to.
    lifted: dict[int, int] = {}
    kept: list[int] = []
    new_parent: list[int] = []
    fork_labels: dict[int, str] = {}
    fork_name: str | None = None
    leaf = _OUTSIDE
    for i in range(n):
        p = parent[i]
        np = _OUTSIDE if p < 0 else (lifted[p] if dropped[p] else p)
        sp = special.get(i)
        if sp is not None:
            kind, target, text = sp
            if kind == "label":
                if target < 0 or dropped[target]:
                    dropped[i] = 1
                    lifted[i] = np
                    continue
                if text is None:
                    fork_labels.pop(target, None)
                else:
                    fork_labels[target] = text
            elif kind == "leaf":
                if target == _OUTSIDE or (target >= 0 and dropped[target]):
                    dropped[i] = 1
                    lifted[i] = np
                    continue
                kept.append(i)
                new_parent.append(np)
                leaf = _OUTSIDE if target == _NULL_TARGET else target
                continue
            else:
                fork_name = text
        kept.append(i)
        new_parent.append(np)
        leaf = i

    if source_leaf is None:
        want_leaf = kept[-1] if kept else _OUTSIDE
    elif source_leaf < 0:
        want_leaf = _OUTSIDE
    else:
        want_leaf = lifted[source_leaf] if dropped[source_leaf] else source_leaf

    if not kept:
        # Nothing copied: the fork is empty, with nothing for a label or name to apply to.
        return _ForkPlan(kept, new_parent, [])

    ids = table.ids
    want_labels: dict[int, str] = {}
    for entry_id, label in source_labels.items():
        pos = position_of(entry_id)
        if pos is not None and not dropped[pos]:
            want_labels[pos] = label

    extras: list[SessionTreeEntry] = []
    used: set[str] = set()

    def fresh() -> str:
        while True:
            candidate = new_id()
            if candidate not in used:
                used.add(candidate)
                return candidate

    cur: str | None = None if leaf < 0 else ids(leaf)
    stamp = now_iso()
    for pos in sorted(want_labels.keys() | fork_labels.keys()):
        want = want_labels.get(pos)
        if fork_labels.get(pos) != want:
            extra: SessionTreeEntry = LabelEntry(
                id=fresh(), parent_id=cur, timestamp=stamp, target_id=ids(pos), label=want
            )
            extras.append(extra)
            cur = extra.id
    if fork_name != source_name:
        extra = SessionInfoEntry(id=fresh(), parent_id=cur, timestamp=stamp, name=source_name)
        extras.append(extra)
        cur = extra.id
    if extras or leaf != want_leaf:
        extras.append(
            LeafEntry(
                id=fresh(),
                parent_id=cur,
                timestamp=stamp,
                target_id=None if want_leaf < 0 else ids(want_leaf),
            )
        )
    return _ForkPlan(kept, new_parent, extras)


def _reparent_line(line: bytes, parent_id: str | None) -> bytes:
    """The same entry line with ``parent_id`` replaced; every other field is kept."""
    d = json.loads(line)
    d["parent_id"] = parent_id
    return json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _engine_fork_lines(
    engine: _core.Engine, entry_id: str | None, position: str
) -> tuple[list[bytes], list[SessionTreeEntry]]:
    """Raw lines to copy (parents already rewritten) and entries to append after them.

    Lines are copied byte-for-byte; only a line whose parent changes is re-encoded.
    """
    if engine.closed:
        raise SessionError("closed", "the session storage is closed")
    n = len(engine)
    all_parents = engine.parents()
    where: dict[int, int] | None = None

    def pos_of_key(k: int) -> int:
        return k if where is None else where.get(k, _OUTSIDE)

    if entry_id is None:
        keys: Sequence[int] = range(n)
        parent = all_parents
        source_leaf = engine.leaf()
        leaf_pos: int | None = _OUTSIDE if source_leaf is None else source_leaf
    else:
        target = engine.lookup(entry_id)
        if target is None:
            raise SessionError("not_found", f"entry {entry_id!r} not found")
        kind, role, target_parent, _, _ = engine.info(target)
        if position == "at":
            keys = engine.path_indices(entry_id, True)
        else:
            if kind == "message" and role != "user":
                raise SessionError(
                    "invalid_fork_target",
                    f"entry {entry_id!r} is a {role} message; fork before a user message",
                )
            keys = (
                []
                if target_parent is None
                else engine.path_indices(engine.id_of(target_parent), True)
            )
        where = {k: i for i, k in enumerate(keys)}
        parent = [_OUTSIDE if all_parents[k] < 0 else pos_of_key(all_parents[k]) for k in keys]
        leaf_pos = None

    # Lines that name a parent the reader could not find: the engine made them roots.
    dangling_lines: set[int] = set()
    unknown_leaf_lines: set[int] = set()
    for line_no, _, kind_name, _ in engine.report()[0]:
        if kind_name == "dangling_parent":
            dangling_lines.add(line_no)
        elif kind_name == "unknown_leaf_target":
            unknown_leaf_lines.add(line_no)

    special: dict[int, tuple[str, int, str | None]] = {}
    for type_name in ("label", "leaf", "session_info"):
        idxs = [k for k in engine.find(type_name) if pos_of_key(k) >= 0]
        if not idxs:
            continue
        for k, raw in zip(idxs, engine.lines(idxs), strict=True):
            _, _, _, tgt, line_no = engine.info(k)
            if type_name == "session_info":
                name = json.loads(raw).get("name")
                special[pos_of_key(k)] = (
                    type_name,
                    _OUTSIDE,
                    name if isinstance(name, str) else None,
                )
            elif type_name == "label":
                text = json.loads(raw).get("label")
                tpos = _OUTSIDE if tgt is None else pos_of_key(tgt)
                special[pos_of_key(k)] = (type_name, tpos, text if isinstance(text, str) else None)
            else:
                if tgt is not None:
                    tpos = pos_of_key(tgt)
                elif line_no in unknown_leaf_lines:
                    tpos = _OUTSIDE
                else:
                    tpos = _NULL_TARGET
                special[pos_of_key(k)] = (type_name, tpos, None)

    key_list = keys

    def position_of(eid: str) -> int | None:
        k = engine.lookup(eid)
        if k is None:
            return None
        p = pos_of_key(k)
        return None if p < 0 else p

    table = _CopyTable(lambda i: engine.id_of(key_list[i]), parent, special)
    plan = _plan_fork(
        table,
        position_of=position_of,
        source_labels=engine.labels(),
        source_name=engine.name(),
        source_leaf=leaf_pos,
        new_id=engine.create_entry_id,
    )
    src_keys = [keys[i] for i in plan.kept]
    lines = engine.lines(src_keys)
    check_dangling = bool(dangling_lines)
    for j, (k, np) in enumerate(zip(src_keys, plan.new_parent, strict=True)):
        old = all_parents[k]
        new_key = _OUTSIDE if np < 0 else keys[np]
        if old != new_key or (
            check_dangling and new_key < 0 and engine.info(k)[4] in dangling_lines
        ):
            lines[j] = _reparent_line(lines[j], None if new_key < 0 else engine.id_of(new_key))
    return lines, plan.extras


def _storage_fork_entries(
    storage: SessionStorage, entry_id: str | None, position: str
) -> list[SessionTreeEntry]:
    """The fork selection for any :class:`SessionStorage`, through its public methods."""
    if entry_id is None:
        entries = storage.get_entries()
        leaf_id = storage.get_leaf_id()
    else:
        target = storage.get_entry(entry_id)
        if target is None:
            raise SessionError("not_found", f"entry {entry_id!r} not found")
        if position == "at":
            entries = storage.get_path_to_root_or_compaction(entry_id)
        else:
            if isinstance(target, MessageEntry) and target.message.role != "user":
                raise SessionError(
                    "invalid_fork_target",
                    f"entry {entry_id!r} is a {target.message.role} message; "
                    "fork before a user message",
                )
            entries = (
                []
                if target.parent_id is None or storage.get_entry(target.parent_id) is None
                else storage.get_path_to_root_or_compaction(target.parent_id)
            )
        leaf_id = None
    where = {e.id: i for i, e in enumerate(entries)}
    parent = [
        _OUTSIDE if e.parent_id is None else where.get(e.parent_id, _OUTSIDE) for e in entries
    ]
    special: dict[int, tuple[str, int, str | None]] = {}
    for i, e in enumerate(entries):
        if isinstance(e, LabelEntry):
            special[i] = ("label", where.get(e.target_id, _OUTSIDE), e.label)
        elif isinstance(e, LeafEntry):
            tpos = _NULL_TARGET if e.target_id is None else where.get(e.target_id, _OUTSIDE)
            special[i] = ("leaf", tpos, None)
        elif isinstance(e, SessionInfoEntry):
            special[i] = ("session_info", _OUTSIDE, e.name)
    if entry_id is None:
        source_leaf: int | None = _OUTSIDE if leaf_id is None else where.get(leaf_id, _OUTSIDE)
    else:
        source_leaf = None
    plan = _plan_fork(
        _CopyTable(lambda i: entries[i].id, parent, special),
        position_of=where.get,
        source_labels=storage.get_labels(),
        source_name=storage.get_session_name(),
        source_leaf=source_leaf,
        new_id=storage.create_entry_id,
    )
    out: list[SessionTreeEntry] = []
    for i, np in zip(plan.kept, plan.new_parent, strict=True):
        e = entries[i]
        want = None if np < 0 else entries[np].id
        if e.parent_id != want:
            d = dict(entry_to_dict(e))
            d["parent_id"] = want
            e = entry_from_dict(d)
        out.append(e)
    # Only source entries: the label/name/leaf entries of ``plan.extras`` are fork()'s.
    return out


def get_entries_to_fork(
    storage: SessionStorage,
    entry_id: str | None = None,
    position: ForkPosition = "before",
) -> list[SessionTreeEntry]:
    """The source entries a fork of ``storage`` copies, in the order they are written.

    - No ``entry_id``: every entry (a full copy).
    - ``position="at"``: ``get_path_to_root_or_compaction(entry_id)``.
    - ``position="before"``: the same path for the target's parent (nothing when it has
      none); a target that is a message must be a user message.

    Only entries of the source are returned, with their ids and timestamps. The result is
    self-contained: the first copied entry is a root and no ``parent_id`` points outside
    the copy; a ``label`` or ``leaf`` entry whose target is not copied is left out and
    what hung under it is re-attached to its nearest copied ancestor. Labels and the
    session name are *not* reconciled here: :meth:`SessionRepo.fork` appends the
    ``label``/``session_info``/``leaf`` entries that do that after these.

    Args:
        storage: the source session.
        entry_id: the fork target, or ``None`` for a full copy.
        position: ``"before"`` (default) or ``"at"``.

    Returns:
        The entries, parents first.

    Raises:
        SessionError: ``not_found`` for an unknown ``entry_id``; ``invalid_fork_target``
            for ``"before"`` a non-user message; ``invalid_argument`` for another
            ``position``; ``closed`` if the storage is closed.

    >>> from sessiontree import InMemorySessionStorage, Session, UserMessage
    >>> s = Session(InMemorySessionStorage())
    >>> first = s.append_message(UserMessage("one"))
    >>> second = s.append_message(UserMessage("two"))
    >>> [e.id for e in get_entries_to_fork(s.storage, second)] == [first]
    True
    """
    _check_fork_args(entry_id, position)
    if not isinstance(storage, SessionStorage):
        raise SessionError(
            "invalid_argument", f"storage must be a SessionStorage, not {type(storage).__name__}"
        )
    if isinstance(storage, _EngineStorage):
        storage._check()
        lines, _ = _engine_fork_lines(storage._engine, entry_id, position)
        return [entry_from_json(line) for line in lines]
    return _storage_fork_entries(storage, entry_id, position)


def _fork_document(engine: _core.Engine, new_id: str, entry_id: str | None, position: str) -> bytes:
    """The whole JSONL document of a fork of ``engine``'s session."""
    lines, extras = _engine_fork_lines(engine, entry_id, position)
    header = json.loads(engine.header())
    header["id"] = new_id
    header["timestamp"] = now_iso()
    header["parent_session"] = engine.session_id
    # Validating through SessionHeader keeps unknown header fields and refuses nonsense.
    head = header_to_json(header_from_dict(header))
    parts = [head, *lines, *(entry_to_json(e) for e in extras)]
    parts.append(b"")
    return b"\n".join(parts)


# --------------------------------------------------------------------------- the interface


class SessionRepo(abc.ABC):
    """Many sessions: create, open, list, delete and fork them.

    ``open`` (and the session returned by ``create`` and ``fork``) is a writer: while it is
    open, a second ``open`` of the same session raises ``locked``, and so does ``delete``.
    Close sessions (or use them as context managers) when done.
    """

    @abc.abstractmethod
    def create(
        self,
        *,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a new, empty session and open it.

        Args:
            cwd: the working directory the session belongs to; defaults to ``os.getcwd()``.
            name: an initial name, written as a ``session_info`` entry.
            parent_session: the id of the session this one derives from.
            metadata: application data for the header (a JSON object).
            session_id: the id to use; a new UUIDv7 by default.

        Returns:
            The open session.

        Raises:
            SessionError: ``invalid_id`` for an unsafe ``session_id`` (nothing is created),
                ``exists`` if the id is taken, ``invalid_argument`` for a bad value.
        """

    @abc.abstractmethod
    def open(self, ref: SessionRef) -> Session:
        """Open a session as its writer.

        Args:
            ref: a :class:`SessionMetadata` from :meth:`list`, or a session id.

        Raises:
            SessionError: ``not_found`` for an unknown session, ``locked`` if it is already
                open for writing, ``invalid_id`` for an unsafe id.
        """

    @abc.abstractmethod
    def list(
        self, *, cwd: str | os.PathLike[str] | None = None, limit: int | None = None
    ) -> builtins.list[SessionMetadata]:
        """Every session's metadata, newest ``modified`` first.

        Args:
            cwd: keep only the sessions of this working directory.
            limit: return at most this many.

        Raises:
            SessionError: ``invalid_argument`` for a negative ``limit``.
        """

    @abc.abstractmethod
    def delete(self, ref: SessionRef) -> None:
        """Delete a session and everything derived from it.

        Raises:
            SessionError: ``not_found`` for an unknown session, ``locked`` while a writer
                has it open.
        """

    @abc.abstractmethod
    def fork(
        self,
        source: SessionRef,
        *,
        entry_id: str | None = None,
        position: ForkPosition = "before",
    ) -> Session:
        """Copy a session (or one branch of it) into a new session and open that.

        The entries are chosen by :func:`get_entries_to_fork` and copied first, with their
        ids and timestamps. Then, so the fork shows the source's labels (for the copied
        entries) and session name, ``label`` and ``session_info`` entries are appended
        after the copied entries wherever the copied ones do not already say so (new
        ids, the current time), followed by a ``leaf`` entry if the leaf would otherwise
        not be where it belongs: the source's leaf for a full copy, else the last copied
        entry. The new header gets a new id, the current time, ``parent_session`` = the
        source id, and the source's ``cwd`` and ``metadata``. The source may be open,
        even by a writer.

        Args:
            source: the session to fork.
            entry_id: the fork target; ``None`` copies everything.
            position: ``"before"`` or ``"at"`` the target.

        Raises:
            SessionError: ``not_found`` (unknown session or entry), ``invalid_fork_target``,
                ``invalid_argument``.
        """


# --------------------------------------------------------------------------- in memory


class _MemoryRecord:
    __slots__ = ("holder", "storage")

    def __init__(self, storage: InMemorySessionStorage) -> None:
        self.storage = storage
        self.holder: weakref.ref[_MemoryHandle] | None = None

    def busy(self) -> bool:
        handle = None if self.holder is None else self.holder()
        return handle is not None and not handle.closed


class _MemoryHandle(InMemorySessionStorage):
    """A writer's view of a session kept by an :class:`InMemorySessionRepo`.

    It shares the repo's engine; closing it ends this handle only, the session stays.
    """

    def __init__(self, engine: _core.Engine) -> None:
        _EngineStorage.__init__(self, engine)
        self._released = False

    @property
    def closed(self) -> bool:
        """True after :meth:`close` (the session itself stays in the repo)."""
        return self._released or self._engine.closed

    def _check(self) -> None:
        if self._released:
            raise SessionError("closed", "the session storage is closed")
        super()._check()

    def flush(self) -> None:
        self._check()

    def close(self) -> None:
        self._released = True

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self)} entries"
        return f"<InMemorySessionRepo session {self.session_id!r} {state}>"


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
        handle = _MemoryHandle(record.storage._engine)
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
                _metadata_from_engine(r.storage._engine, sid, None, r.storage._engine.byte_len)
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
            doc = _fork_document(record.storage._engine, new_id, entry_id, position)
            storage = InMemorySessionStorage.from_jsonl(doc)
            fork = self._sessions[new_id] = _MemoryRecord(storage)
            return self._handle(fork)

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, ref: object) -> bool:
        try:
            return _ref_id(ref) in self._sessions
        except SessionError:
            return False

    def __repr__(self) -> str:
        return f"<InMemorySessionRepo {len(self._sessions)} sessions>"


# --------------------------------------------------------------------------- JSONL files


def _os_error(what: str, exc: OSError) -> SessionError:
    code = "not_found" if isinstance(exc, FileNotFoundError) else "io"
    err = SessionError(code, f"{what}: {exc.strerror or exc}")
    err.__cause__ = exc
    return err


def _row_to_json(meta: SessionMetadata, key: tuple[int, int, int]) -> dict[str, Any]:
    return {
        "key": list(key),
        "id": meta.id,
        "cwd": meta.cwd,
        "created": None if meta.created is None else meta.created.isoformat(),
        "modified": None if meta.modified is None else meta.modified.isoformat(),
        "name": meta.name,
        "parent_session": meta.parent_session,
        "entry_count": meta.entry_count,
        "message_count": meta.message_count,
        "first_message": meta.first_message,
        "error": meta.error,
    }


def _opt_str(d: dict[str, Any], key: str) -> str | None:
    value = d[key]
    if value is not None and not isinstance(value, str):
        raise TypeError(key)
    return value


def _count(d: dict[str, Any], key: str) -> int:
    value = d[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(key)
    return value


def _cached_time(value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError("time")
    dt = datetime.fromisoformat(value)
    if dt.utcoffset() is None or dt.utcoffset():
        raise ValueError("not UTC")
    return dt.astimezone(timezone.utc)


def _row_from_json(
    file_name: str, value: object, path: str
) -> tuple[tuple[int, int, int], SessionMetadata] | None:
    """A cache row, checked field by field; ``None`` if anything about it is off."""
    try:
        if not isinstance(value, dict):
            return None
        raw_key = value["key"]
        if not isinstance(raw_key, list) or len(raw_key) != 3:
            return None
        size, mtime, ino = raw_key
        for part in raw_key:
            if isinstance(part, bool) or not isinstance(part, int) or part < 0:
                return None
        sid = value["id"]
        if not isinstance(sid, str) or file_name != sid + _SUFFIX or not is_valid_session_id(sid):
            return None
        cwd = value["cwd"]
        if not isinstance(cwd, str):
            return None
        meta = SessionMetadata(
            id=sid,
            path=path,
            cwd=cwd,
            created=_cached_time(value["created"]),
            modified=_cached_time(value["modified"]),
            name=_opt_str(value, "name"),
            parent_session=_opt_str(value, "parent_session"),
            entry_count=_count(value, "entry_count"),
            message_count=_count(value, "message_count"),
            first_message=_opt_str(value, "first_message"),
            size_bytes=size,
            error=_opt_str(value, "error"),
        )
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    return (size, mtime, ino), meta


class JsonlSessionRepo(SessionRepo):
    """Sessions as JSONL files in one directory: ``<root_dir>/<session id>.jsonl``.

    The directory is created (mode 0700) if missing; session files are created exclusively
    with mode 0600, whatever the umask. Ids given by the caller must be safe file names
    (see :func:`is_valid_session_id`); they are refused, never rewritten.

    :meth:`list` keeps a cache of what it shows per file in
    ``<root_dir>/.sessiontree-list-cache.json``, keyed by each file's size, modification
    time and inode, so unchanged files are not read again (also across processes). A
    damaged or foreign cache is ignored and rebuilt; deleting it is always safe.

    Args:
        root_dir: the directory of session files.
        durability: durability of the sessions opened through this repo (see
            :class:`~sessiontree.storage.JsonlSessionStorage`).
        limits: size limits applied when reading and writing session files.

    Raises:
        SessionError: ``io`` if the directory cannot be created or is not a directory.

    >>> import tempfile
    >>> repo = JsonlSessionRepo(tempfile.mkdtemp())
    >>> with repo.create(cwd="/w", name="first") as s:
    ...     pass
    >>> [m.name for m in repo.list()]
    ['first']
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        *,
        durability: Durability = "group",
        limits: Limits | None = None,
    ) -> None:
        root = fspath_arg("root_dir", root_dir)
        if durability not in DURABILITY_MODES:
            raise SessionError(
                "invalid_argument",
                f"durability must be one of {', '.join(DURABILITY_MODES)} (got {durability!r})",
            )
        if limits is not None and not isinstance(limits, Limits):
            raise SessionError("invalid_argument", "limits must be a sessiontree.Limits")
        self._root = os.path.abspath(root)
        self._durability: Durability = durability
        self._limits = limits
        self._lock = threading.Lock()
        # file name -> (cache key, metadata) of the files this object has read or loaded.
        self._memo: dict[str, tuple[tuple[int, int, int], SessionMetadata]] = {}
        _make_private_dir(self._root)

    @property
    def root_dir(self) -> str:
        """The directory holding the session files (absolute)."""
        return self._root

    @property
    def durability(self) -> str:
        """The durability of sessions opened through this repo."""
        return self._durability

    def path_for(self, session_id: str) -> str:
        """The file of session ``session_id`` (whether or not it exists).

        Raises:
            SessionError: ``invalid_id`` for an unsafe id.
        """
        return os.path.join(self._root, _check_session_id(session_id) + _SUFFIX)

    def _path(self, ref: object) -> tuple[str, str]:
        sid = _ref_id(ref)
        return sid, os.path.join(self._root, sid + _SUFFIX)

    # -- create / open ---------------------------------------------------------------

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
        path = os.path.join(self._root, sid + _SUFFIX)
        storage = JsonlSessionStorage.create(
            path, header, durability=self._durability, limits=self._limits
        )
        session = Session(storage)
        if name is not None:
            try:
                session.append_session_info(name)
            except BaseException:
                # A session that failed to get its name must not be left half-made.
                storage.close()
                _unlink_quietly(path)
                raise
        return session

    def open(self, ref: SessionRef) -> Session:
        _, path = self._path(ref)
        storage = JsonlSessionStorage.open(path, durability=self._durability, limits=self._limits)
        return Session(storage)

    # -- list ------------------------------------------------------------------------

    def _read_metadata(self, file_name: str, path: str, size: int) -> tuple[SessionMetadata, bool]:
        """Reads one file's metadata; the flag says whether it may be cached."""
        sid = file_name[: -len(_SUFFIX)]
        try:
            storage = JsonlSessionStorage.open(path, readonly=True, limits=self._limits)
        except SessionError as exc:
            return self._error_row(sid, path, size, exc.message), False
        try:
            return _metadata_from_engine(storage._engine, sid, path, size), True
        except SessionError as exc:
            return self._error_row(sid, path, size, exc.message), False
        finally:
            storage.close()

    @staticmethod
    def _error_row(
        sid: str, path: str, size: int, why: str, mtime_ns: int | None = None
    ) -> SessionMetadata:
        modified = None
        if mtime_ns is None:
            try:
                mtime_ns = os.lstat(path).st_mtime_ns
            except OSError:
                mtime_ns = None
        if mtime_ns is not None:
            # The file's own time, so a broken session still sorts by recency.
            modified = datetime.fromtimestamp(mtime_ns / 1e9, timezone.utc)
        return SessionMetadata(
            id=sid, path=path, cwd="", created=None, modified=modified, size_bytes=size, error=why
        )

    def _load_cache(self) -> dict[str, Any]:
        """The raw rows of the cache file; empty if it is missing, damaged or not ours.

        Rows are checked one by one when used (:func:`_row_from_json`), so a bad row costs
        only its own re-read.
        """
        cache_path = os.path.join(self._root, _CACHE_NAME)
        try:
            fd = os.open(cache_path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC)
        except OSError:
            return {}
        try:
            st = os.fstat(fd)
            if (
                not _is_regular(st.st_mode)
                or st.st_uid != os.geteuid()
                or st.st_size > _CACHE_MAX_BYTES
            ):
                return {}
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = json.loads(f.read())
        except (OSError, ValueError, RecursionError):
            return {}
        finally:
            os.close(fd)
        if (
            not isinstance(data, dict)
            or data.get("format") != _CACHE_FORMAT
            or data.get("version") != _CACHE_VERSION
            or not isinstance(data.get("files"), dict)
        ):
            return {}
        files: dict[str, Any] = data["files"]
        return files

    def _save_cache(self, rows: dict[str, tuple[tuple[int, int, int], SessionMetadata]]) -> None:
        """Writes the cache atomically (temp file + rename); failures are ignored.

        No fsync: after a crash the cache is at worst damaged, and a damaged cache is
        rebuilt.
        """
        doc = {
            "format": _CACHE_FORMAT,
            "version": _CACHE_VERSION,
            "files": {name: _row_to_json(meta, key) for name, (key, meta) in rows.items()},
        }
        data = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        _write_atomically(os.path.join(self._root, _CACHE_NAME), data, sync=False, replace=True)

    def list(
        self, *, cwd: str | os.PathLike[str] | None = None, limit: int | None = None
    ) -> builtins.list[SessionMetadata]:
        """Every session's metadata, newest ``modified`` first (see :class:`SessionRepo`).

        Only files named ``<valid id>.jsonl`` count. A file that cannot be read is listed
        with ``error`` set (``cwd`` is then ``""``, ``created`` ``None`` and ``modified``
        the file's modification time); such rows are kept under every ``cwd`` filter.
        """
        want_cwd = _check_list_args(cwd, limit)
        with self._lock:
            rows = self._scan()
        return _select(rows, want_cwd, limit)

    def _scan(self) -> builtins.list[SessionMetadata]:
        try:
            it = os.scandir(self._root)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise _os_error(f"listing {self._root}", exc) from exc
        memo = self._memo
        seen: dict[str, tuple[tuple[int, int, int], SessionMetadata]] = {}
        out: builtins.list[SessionMetadata] = []
        disk: dict[str, Any] | None = None
        changed = False
        with it:
            for de in it:
                file_name = de.name
                if not file_name.endswith(_SUFFIX):
                    continue
                sid = file_name[: -len(_SUFFIX)]
                if _SESSION_ID_RE.fullmatch(sid) is None:
                    continue
                path = de.path
                try:
                    st = de.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # deleted since the directory was read
                except OSError as exc:
                    out.append(self._error_row(sid, path, 0, f"cannot stat: {exc.strerror}"))
                    continue
                if not _is_regular(st.st_mode):
                    out.append(
                        self._error_row(sid, path, st.st_size, "not a regular file", st.st_mtime_ns)
                    )
                    continue
                key = (st.st_size, st.st_mtime_ns, st.st_ino)
                hit = memo.get(file_name)
                if hit is None or hit[0] != key:
                    if disk is None:
                        disk = self._load_cache()
                    raw = disk.get(file_name)
                    hit = None if raw is None else _row_from_json(file_name, raw, path)
                    if hit is None or hit[0] != key:
                        meta, cacheable = self._read_metadata(file_name, path, st.st_size)
                        if not cacheable:
                            out.append(meta)
                            continue
                        hit = (key, meta)
                        changed = True
                seen[file_name] = hit
                out.append(hit[1])
        if disk is not None and not changed:
            changed = disk.keys() != seen.keys()
        if changed or memo.keys() != seen.keys():
            self._memo = seen
        if changed:
            self._save_cache(seen)
        return out

    # -- delete ----------------------------------------------------------------------

    def delete(self, ref: SessionRef) -> None:
        """Delete a session file, its torn-tail side files, persisted index and cache row.

        Raises:
            SessionError: ``not_found`` for an unknown session, ``locked`` while a writer
                has it open, ``io`` for another OS error.
        """
        sid, path = self._path(ref)
        try:
            fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            raise SessionError("not_found", f"session {sid!r} not found") from None
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise _os_error(f"opening {path}", exc) from exc
            fd = -1  # a symlink: removing the name touches nothing else
        try:
            if fd >= 0:
                # The writer lock is a flock on the file (see the engine's lock_writer):
                # taking it ourselves proves no writer holds it, and keeps a new writer out
                # until the name is gone, without reading the file.
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise SessionError(
                        "locked", f"session {sid!r} is open for writing; close it first"
                    ) from None
            try:
                os.unlink(path)
            except FileNotFoundError:
                raise SessionError("not_found", f"session {sid!r} not found") from None
            except OSError as exc:
                raise _os_error(f"deleting {path}", exc) from exc
        finally:
            if fd >= 0:
                os.close(fd)
        file_name = sid + _SUFFIX
        prefixes = (file_name + ".torn-", file_name + ".idx")
        try:
            with os.scandir(self._root) as it:
                side = [de.path for de in it if de.name.startswith(prefixes)]
        except OSError:
            side = []
        for p in side:
            _unlink_quietly(p)
        with self._lock:
            self._memo.pop(file_name, None)
            disk = self._load_cache()
            if disk.pop(file_name, None) is not None:
                rows = {}
                for name, raw in disk.items():
                    row = _row_from_json(name, raw, os.path.join(self._root, name))
                    if row is not None:
                        rows[name] = row
                self._save_cache(rows)

    # -- fork ------------------------------------------------------------------------

    def fork(
        self,
        source: SessionRef,
        *,
        entry_id: str | None = None,
        position: ForkPosition = "before",
    ) -> Session:
        """Fork ``source`` into a new session file (see :meth:`SessionRepo.fork`).

        The source is read without a lock, so it may be open by a writer; the fork sees
        what is in the file (a writer with ``durability="none"`` must ``flush()`` first).
        The new file is written to a temporary name in the directory, synced, then linked
        into place, so a crash never leaves a partial file under a session name.
        """
        _check_fork_args(entry_id, position)
        _, src_path = self._path(source)
        src = JsonlSessionStorage.open(src_path, readonly=True, limits=self._limits)
        try:
            new_id = uuid7()
            doc = _fork_document(src._engine, new_id, entry_id, position)
        finally:
            src.close()
        final = os.path.join(self._root, new_id + _SUFFIX)
        _write_atomically(final, doc, sync=True, replace=False)
        storage = JsonlSessionStorage.open(final, durability=self._durability, limits=self._limits)
        return Session(storage)

    def __contains__(self, ref: object) -> bool:
        try:
            _, path = self._path(ref)
        except SessionError:
            return False
        return os.path.lexists(path)

    def __repr__(self) -> str:
        return f"JsonlSessionRepo({self._root!r})"


# --------------------------------------------------------------------------- file helpers


def _is_regular(mode: int) -> bool:
    return (mode & 0o170000) == 0o100000


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _make_private_dir(root: str) -> None:
    """Creates ``root`` with mode 0700 (whatever the umask) unless it exists."""
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        if not os.path.isdir(root):
            raise SessionError("io", f"{root} exists and is not a directory") from None
        return
    except FileNotFoundError:
        try:
            os.makedirs(os.path.dirname(root), exist_ok=True)
            os.mkdir(root, 0o700)
        except FileExistsError:
            return
        except OSError as exc:
            raise _os_error(f"creating {root}", exc) from exc
    except OSError as exc:
        raise _os_error(f"creating {root}", exc) from exc
    try:
        os.chmod(root, 0o700)
    except OSError as exc:
        raise _os_error(f"creating {root}", exc) from exc


def _sync_dir(folder: str) -> None:
    """Syncs a directory so a new name in it survives a crash; best effort.

    The file is already in place: failing now would only make a caller retry and leave a
    second copy, and some file systems refuse to sync directories at all.
    """
    try:
        dfd = os.open(folder, os.O_RDONLY | _O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _publish(tmp: str, final: str, replace: bool) -> None:
    """Puts ``tmp`` in place under ``final``; without ``replace`` never overwrites."""
    if replace:
        os.replace(tmp, final)
        return
    try:
        # link() fails if ``final`` exists, which rename() would silently overwrite.
        os.link(tmp, final)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        # A file system without hard links: check, then rename (a small race remains).
        if os.path.lexists(final):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), final) from None
        os.rename(tmp, final)


def _write_atomically(path: str, data: bytes, *, sync: bool, replace: bool) -> None:
    """Writes ``data`` to ``path`` through a temporary file in the same directory.

    The temporary file is created exclusively with mode 0600 and a name no listing picks
    up. With ``sync`` the data and the directory are synced so the new name never points
    at a partial file after a crash. Cache writes (``replace=True``) fail silently.
    """
    folder, base = os.path.split(path)
    tmp = os.path.join(folder, f".{base}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o600)
    except OSError as exc:
        if replace:
            return
        raise _os_error(f"creating a file in {folder}", exc) from exc
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        _publish(tmp, path, replace)
        if sync:
            _sync_dir(folder)
    except OSError as exc:
        if replace:
            return
        if isinstance(exc, FileExistsError):
            raise SessionError("exists", f"{path} already exists") from None
        raise _os_error(f"writing {path}", exc) from exc
    finally:
        _unlink_quietly(tmp)
