"""Fork planning, in one place for every storage: what a fork copies and what it appends."""

from __future__ import annotations

from collections.abc import Callable

from .._util import now_iso
from ..errors import SessionError
from ..model.entries import (
    LabelEntry,
    LeafEntry,
    SessionInfoEntry,
    SessionTreeEntry,
    entry_from_json,
    entry_to_json,
    header_from_dict,
    header_to_dict,
    header_to_json,
)
from ..storage import Durability, JsonlSessionStorage, Limits, SessionStorage
from ..storage.base import FORK_NULL_TARGET, FORK_OUTSIDE, ForkSource
from .base import ForkPosition, _check_fork_args
from .files import _write_atomically

__all__ = ["get_entries_to_fork"]


class _ForkPlan:
    """What to write: the kept positions, their new parents, and entries to append."""

    __slots__ = ("extras", "kept", "new_parent")

    def __init__(self, kept: list[int], new_parent: list[int], extras: list[SessionTreeEntry]):
        self.kept = kept
        self.new_parent = new_parent
        self.extras = extras


def _plan_fork(source: ForkSource, new_id: Callable[[], str]) -> _ForkPlan:
    """Decide what a fork keeps, how it is re-parented and what it appends.

    ``source.leaf`` is the position the fork's leaf must end on for a full copy (``None``
    for a path copy, whose leaf is its last kept entry).

    A ``label`` entry whose target is not copied, and a ``leaf`` entry whose target is not
    copied, are dropped: they would be dangling references. Entries under a dropped entry
    hang from its nearest kept ancestor instead. Labels and the name are then made equal to
    the source's (for the copied entries) by appending ``label``/``session_info`` entries,
    and a final ``leaf`` entry puts the leaf where it belongs.
    """
    parent = source.parent
    special = source.special
    position_of = source.position_of
    source_leaf = source.leaf
    n = len(parent)
    dropped = bytearray(n)
    # For a dropped position: the kept ancestor its children re-attach to.
    lifted: dict[int, int] = {}
    kept: list[int] = []
    new_parent: list[int] = []
    fork_labels: dict[int, str] = {}
    fork_name: str | None = None
    leaf = FORK_OUTSIDE
    # The entries between two special ones are all kept, each under its parent or, when
    # that was dropped, the kept ancestor it was lifted to: taken a run at a time.
    start = 0
    for i in [*sorted(special), n]:
        if start < i:
            kept.extend(range(start, i))
            run = parent[start:i]
            new_parent.extend([lifted.get(p, p) for p in run] if lifted else run)
            leaf = i - 1
        start = i + 1
        if i == n:
            break
        p = parent[i]
        np = lifted.get(p, p)  # FORK_OUTSIDE stays
        kind, target, text = special[i]
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
            if target == FORK_OUTSIDE or (target >= 0 and dropped[target]):
                dropped[i] = 1
                lifted[i] = np
                continue
            kept.append(i)
            new_parent.append(np)
            leaf = FORK_OUTSIDE if target == FORK_NULL_TARGET else target
            continue
        else:
            fork_name = text
        kept.append(i)
        new_parent.append(np)
        leaf = i

    if source_leaf is None:
        want_leaf = kept[-1] if kept else FORK_OUTSIDE
    elif source_leaf < 0:
        want_leaf = FORK_OUTSIDE
    else:
        want_leaf = lifted[source_leaf] if dropped[source_leaf] else source_leaf

    if not kept:
        # Nothing copied: the fork is empty, with nothing for a label or name to apply to.
        return _ForkPlan(kept, new_parent, [])

    ids = source.id_of
    want_labels: dict[int, str] = {}
    for entry_id, label in source.labels.items():
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
    if fork_name != source.name:
        extra = SessionInfoEntry(id=fresh(), parent_id=cur, timestamp=stamp, name=source.name)
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
    source = storage.get_fork_source(entry_id, position)
    plan = _plan_fork(source, storage.create_entry_id)
    return [entry_from_json(line) for line in source.write_lines(plan.kept, plan.new_parent)]


def _prepare(
    storage: SessionStorage,
    new_id: str,
    entry_id: str | None,
    position: str,
    parent_session: str | None = None,
) -> tuple[ForkSource, _ForkPlan, bytes]:
    """The source, the plan and the new header line of a fork of ``storage``'s session
    (``parent_session``: what the header names as the parent, the source's id by
    default)."""
    source = storage.get_fork_source(entry_id, position)
    plan = _plan_fork(source, storage.create_entry_id)
    source_header = storage.get_metadata()
    header = dict(header_to_dict(source_header))
    header["id"] = new_id
    header["timestamp"] = now_iso()
    header["parent_session"] = source_header.id if parent_session is None else parent_session
    # Validating through SessionHeader keeps unknown header fields and refuses nonsense.
    return source, plan, header_to_json(header_from_dict(header))


def fork_document(
    storage: SessionStorage, new_id: str, entry_id: str | None, position: str
) -> bytes:
    """The whole JSONL document of a fork of ``storage``'s session: a new header (id
    ``new_id``, ``parent_session`` the source), the copied lines, then the label, name and
    leaf entries that make the fork's labels, name and leaf the source's."""
    source, plan, header = _prepare(storage, new_id, entry_id, position)
    parts = [
        header,
        *source.write_lines(plan.kept, plan.new_parent),
        *(entry_to_json(e) for e in plan.extras),
        b"",
    ]
    return b"\n".join(parts)


def fork_file(
    storage: SessionStorage,
    path: str,
    new_id: str,
    entry_id: str | None,
    position: str,
    *,
    durability: Durability,
    limits: Limits | None,
    parent_session: str | None = None,
) -> SessionStorage:
    """Writes the document :func:`fork_document` makes to a new file at ``path`` (under a
    temporary name, synced, then linked into place: never a partial file under a session
    name) and opens it for writing. A storage that can write the file itself does
    (``ForkSource.write_file``): engine storages copy the lines' bytes in the kernel and
    hand the new file's index over instead of scanning the file again."""
    source, plan, header = _prepare(storage, new_id, entry_id, position, parent_session)
    extras = [entry_to_json(e) for e in plan.extras]
    if source.write_file is not None:
        engine = source.write_file(
            path, header, plan.kept, plan.new_parent, extras, durability=durability, limits=limits
        )
        return JsonlSessionStorage(engine, durability)
    doc = b"\n".join([header, *source.write_lines(plan.kept, plan.new_parent), *extras, b""])
    _write_atomically(path, doc, sync=True, replace=False)
    return JsonlSessionStorage.open(path, durability=durability, limits=limits)
