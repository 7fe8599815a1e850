"""The storage interface ``Session`` and repositories work against, with pure-Python
defaults for its optional fast paths."""

from __future__ import annotations

import _thread
import abc
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from .. import _core
from .._util import now_iso
from ..errors import SessionError
from ..model.entries import (
    ActiveToolsChangeEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    SessionTreeEntry,
    ThinkingLevelChangeEntry,
    entry_from_dict,
    entry_to_dict,
    entry_to_json,
    header_to_json,
)
from ..model.messages import AgentMessage, AssistantMessage
from ..model.types import SessionStats, TreeNode

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from contextlib import AbstractContextManager
    from types import TracebackType

__all__ = [
    "DURABILITY_MODES",
    "FORK_NULL_TARGET",
    "FORK_OUTSIDE",
    "Durability",
    "ForkSource",
    "SessionStorage",
]


# Type checkers need ``Durability`` spelled out; tests/test_constants.py checks that it
# equals ``DURABILITY_MODES``, which is declared once, in the Rust engine.
Durability: TypeAlias = Literal["none", "flush", "group", "fsync"]
"""How durable an append is when it returns (see :class:`SessionStorage`)."""
DURABILITY_MODES: Final[tuple[str, ...]] = _core.DURABILITY_MODES


FORK_OUTSIDE: Final = -1
"""In a :class:`ForkSource`: a parent or target that is not among the copied entries."""
FORK_NULL_TARGET: Final = -2
"""In a :class:`ForkSource`: a ``leaf`` entry's explicit "before the first entry" target."""


class ForkSource:
    """What a fork of a storage copies, reduced to what the fork planner needs.

    :meth:`SessionStorage.get_fork_source` makes it; the repositories' one planner
    (``sessiontree.repo.fork``) decides from it what to keep and what to append. Entries
    are named by their *position* in the copy (file order).

    Attributes:
        size: the number of entries selected.
        id_of: position -> entry id.
        parent: per position, the parent's position, or :data:`FORK_OUTSIDE` (a root, a
            parent left out of the copy, or a dangling parent).
        special: positions of ``label``, ``leaf`` and ``session_info`` entries -> (type,
            target position or :data:`FORK_OUTSIDE` / :data:`FORK_NULL_TARGET`, label or
            name text).
        labels: the source's current labels, ``{entry id: label}``.
        name: the source's session name.
        leaf: for a full copy, the position of the source's leaf (:data:`FORK_OUTSIDE`
            before the first entry); ``None`` for a path copy.
        position_of: entry id -> position, or ``None`` when it is not copied.
        write_lines: ``(kept positions, their new parent positions)`` -> the JSON lines to
            write, each with its ``parent_id`` set accordingly (an engine-backed storage
            copies the bytes of every line whose parent does not change).
        write_file: ``None``, or for a storage that writes a fork's file better than its
            lines can be written (engine storages copy the bytes in the kernel and hand the
            new file's index to its storage): ``(path, header line, kept positions, their
            new parent positions, lines to append, durability=, limits=)`` -> the new
            file, written as ``write_lines`` would give it, synced and linked into place
            (``exists`` if ``path`` exists), as the ``_core.Engine`` writing it (which
            ``JsonlSessionStorage`` wraps).
    """

    __slots__ = (
        "id_of",
        "labels",
        "leaf",
        "name",
        "parent",
        "position_of",
        "size",
        "special",
        "write_file",
        "write_lines",
    )

    def __init__(
        self,
        *,
        id_of: Callable[[int], str],
        parent: Sequence[int],
        special: Mapping[int, tuple[str, int, str | None]],
        labels: Mapping[str, str],
        name: str | None,
        leaf: int | None,
        position_of: Callable[[str], int | None],
        write_lines: Callable[[Sequence[int], Sequence[int]], list[bytes]],
        write_file: Callable[..., Any] | None = None,
    ) -> None:
        self.size = len(parent)
        self.id_of = id_of
        self.parent = parent
        self.special = special
        self.labels = labels
        self.name = name
        self.leaf = leaf
        self.position_of = position_of
        self.write_lines = write_lines
        self.write_file = write_file

    def __repr__(self) -> str:
        return f"<ForkSource: {self.size} entries, {len(self.special)} label/leaf/name entries>"


def fork_target_error(entry_id: str, role: str) -> SessionError:
    """The ``invalid_fork_target`` error of a fork "before" a non-user message."""
    return SessionError(
        "invalid_fork_target",
        f"entry {entry_id!r} is {'an' if role[:1] in 'aeiou' else 'a'} {role} message; "
        "fork before a user message",
    )


class SessionStorage(abc.ABC):
    """The storage interface ``Session`` works against.

    Implement it to keep sessions elsewhere. Contract: ``append_entry`` validates the
    entry (``duplicate_id`` for a used id, ``not_found`` for an unknown parent) and moves
    the leaf to it — or, for a ``LeafEntry``, to its ``target_id``. Unknown ids passed to
    path and children methods raise ``not_found``; ``get_entry`` returns ``None``. A text
    argument that is not a ``str``, or holds text UTF-8 cannot encode (a lone surrogate,
    which no session can hold), is ``invalid_argument`` everywhere, ``get_entry``
    included.
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

    def append_message(self, message: AgentMessage) -> MessageEntry:
        """Appends ``message`` in a new ``message`` entry under the leaf, with a fresh id
        and the current time, and returns that entry.

        ``Session.append_message`` calls this. The default builds the entry from
        :meth:`create_entry_id`, :meth:`get_leaf_id` and the clock and hands it to
        :meth:`append_entry`; the engine-backed storages do all of it in one engine call.
        """
        entry = MessageEntry(
            message, id=self.create_entry_id(), parent_id=self.get_leaf_id(), timestamp=now_iso()
        )
        self.append_entry(entry)
        return entry

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

    def get_parent_positions(self) -> list[int]:
        """For each entry in file order, the position of its parent in that order (``-1``
        for a root): the shape of the tree without building any entry.

        Tools that draw the tree of a large session (``sessiontree tree``) start from it and
        build only the entries they show, with :meth:`get_entries_at`. The default takes it
        from :meth:`get_entries_with_parents`.
        """
        return self.get_entries_with_parents()[1]

    def get_entries_at(self, positions: Sequence[int]) -> list[SessionTreeEntry]:
        """The entries at these file-order positions (as :meth:`get_entries` numbers them).

        Raises:
            SessionError: ``invalid_argument`` for a position outside ``0 <= p < len(self)``.
        """
        entries = self.get_entries()
        out: list[SessionTreeEntry] = []
        for p in positions:
            if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < len(entries):
                raise SessionError("invalid_argument", f"no entry at position {p!r}")
            out.append(entries[p])
        return out

    def get_positions(self, entry_ids: Sequence[str]) -> list[int | None]:
        """The file-order position of each id (``None`` for an unknown one)."""
        where = {e.id: i for i, e in enumerate(self.get_entries())}
        return [where.get(i) for i in entry_ids]

    def get_line(self, entry_id: str) -> bytes:
        """Entry ``entry_id``'s line as the storage holds it, in its dialect (no newline).

        The default writes the entry's JSON (:func:`~sessiontree.entry_to_json`); file
        storages give the file's own bytes (pi's camelCase in a pi file).

        Raises:
            SessionError: ``not_found`` for an unknown id.
        """
        entry = self.get_entry(entry_id)
        if entry is None:
            raise SessionError("not_found", f"entry {entry_id!r} not found")
        return entry_to_json(entry)

    def get_tree(self) -> list[TreeNode]:
        """The whole tree: root nodes (file order), each with its children and label
        (what ``Session.get_tree`` returns).

        The default builds it from :meth:`get_entries_with_parents` and
        :meth:`get_labels`, bottom-up without recursion, so any depth works.
        """
        entries, parents = self.get_entries_with_parents()
        labels = self.get_labels()
        kids: list[list[TreeNode]] = [[] for _ in entries]
        roots: list[TreeNode] = []
        for i in range(len(entries) - 1, -1, -1):
            entry = entries[i]
            kids[i].reverse()
            node = TreeNode(entry, kids[i], labels.get(entry.id))
            kids[i] = []
            p = parents[i]
            (roots if p < 0 else kids[p]).append(node)
        roots.reverse()
        return roots

    @property
    def dialect(self) -> str:
        """The dialect the session is stored in: ``"sessiontree"`` (FORMAT.md), or ``"pi"``
        for a file written by pi (camelCase keys, read and continued in pi's own dialect).
        The default is ``"sessiontree"``."""
        return "sessiontree"

    def get_newest_timestamp(self) -> str | None:
        """The latest entry timestamp (ISO text), or ``None`` without entries.

        Repositories list sessions by it. The default scans :meth:`get_entries`.
        """
        return max((e.timestamp for e in self.get_entries()), default=None)

    def get_first_message(self, role: str) -> MessageEntry | None:
        """The first ``message`` entry in file order whose message has ``role``.

        Repositories show the first user message in listings. The default scans
        :meth:`get_entries`.
        """
        for entry in self.get_entries("message"):
            if isinstance(entry, MessageEntry) and entry.message.role == role:
                return entry
        return None

    def get_fork_source(self, entry_id: str | None, position: str) -> ForkSource:
        """What a fork at ``entry_id`` copies (see ``get_entries_to_fork``).

        No ``entry_id``: every entry; ``position="at"``: the branch ending at it, cut at
        the nearest compaction; ``"before"``: that of its parent (a message target must be
        a user message). The default works from the public reading methods.

        Raises:
            SessionError: ``not_found`` for an unknown id; ``invalid_fork_target`` for
                ``"before"`` a non-user message.
        """
        if entry_id is None:
            entries = self.get_entries()
            leaf_id = self.get_leaf_id()
        else:
            target = self.get_entry(entry_id)
            if target is None:
                raise SessionError("not_found", f"entry {entry_id!r} not found")
            if position == "at":
                entries = self.get_path_to_root_or_compaction(entry_id)
            else:
                if isinstance(target, MessageEntry) and target.message.role != "user":
                    raise fork_target_error(entry_id, target.message.role)
                parent = target.parent_id
                entries = (
                    []
                    if parent is None or self.get_entry(parent) is None
                    else self.get_path_to_root_or_compaction(parent)
                )
            leaf_id = None
        where = {e.id: i for i, e in enumerate(entries)}
        special: dict[int, tuple[str, int, str | None]] = {}
        for i, e in enumerate(entries):
            if isinstance(e, LabelEntry):
                special[i] = ("label", where.get(e.target_id, FORK_OUTSIDE), e.label)
            elif isinstance(e, LeafEntry):
                target_pos = (
                    FORK_NULL_TARGET
                    if e.target_id is None
                    else where.get(e.target_id, FORK_OUTSIDE)
                )
                special[i] = ("leaf", target_pos, None)
            elif isinstance(e, SessionInfoEntry):
                special[i] = ("session_info", FORK_OUTSIDE, e.name)

        def write_lines(kept: Sequence[int], new_parent: Sequence[int]) -> list[bytes]:
            out: list[bytes] = []
            for i, np in zip(kept, new_parent, strict=True):
                e = entries[i]
                want = None if np < 0 else entries[np].id
                if e.parent_id != want:
                    d = dict(entry_to_dict(e))
                    d["parent_id"] = want
                    e = entry_from_dict(d)
                out.append(entry_to_json(e))
            return out

        return ForkSource(
            id_of=lambda i: entries[i].id,
            parent=[
                FORK_OUTSIDE if e.parent_id is None else where.get(e.parent_id, FORK_OUTSIDE)
                for e in entries
            ],
            special=special,
            labels=self.get_labels(),
            name=self.get_session_name(),
            leaf=None
            if entry_id is not None
            else (FORK_OUTSIDE if leaf_id is None else where.get(leaf_id, FORK_OUTSIDE)),
            position_of=where.get,
            write_lines=write_lines,
        )

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

    def search_document(self) -> str | bytes:
        """What a search reads for this session: the path of a file holding the whole
        session (header line first), or the document's bytes.

        The default writes the header and every entry as sessiontree's JSON lines; the
        file storage gives its path (after a flush), the engine storages their document.
        """
        lines = [header_to_json(self.get_metadata())]
        lines.extend(entry_to_json(e) for e in self.get_entries())
        return b"".join(line + b"\n" for line in lines)

    def atomic(self) -> AbstractContextManager[Any]:
        """A re-entrant lock that makes a sequence of calls atomic against other threads.

        Each call of an engine-backed storage is already serialised inside (a thread that
        finds it busy waits). An append is two steps, though: read the leaf, then write
        an entry under it. :class:`~sessiontree.Session` holds this lock across each of
        its appends, leaf moves and context builds, so threads sharing a session (or
        several sessions over one storage) append one after the other and the tree stays
        the chain they made. Take it yourself around your own read-then-write sequences.

        The default is one re-entrant lock (``threading.RLock``) per storage object.

        >>> from sessiontree import InMemorySessionStorage
        >>> storage = InMemorySessionStorage()
        >>> with storage.atomic():
        ...     leaf = storage.get_leaf_id()
        """
        lock = self.__dict__.get("_atomic_lock")
        if lock is None:
            lock = self.__dict__.setdefault("_atomic_lock", _thread.RLock())
        return lock  # type: ignore[no-any-return]

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
