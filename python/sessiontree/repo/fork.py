"""Fork planning, in one place for every storage: what a fork copies and what it appends."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Final

from .. import _core
from .._util import now_iso
from ..entries import (
    LabelEntry,
    LeafEntry,
    MessageEntry,
    SessionInfoEntry,
    SessionTreeEntry,
    entry_from_dict,
    entry_from_json,
    entry_to_dict,
    entry_to_json,
    header_from_dict,
    header_to_json,
)
from ..errors import SessionError
from ..storage import (
    SessionStorage,
)
from ..storage.engine import _EngineStorage
from .base import ForkPosition, _check_fork_args

__all__ = ["get_entries_to_fork"]


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
