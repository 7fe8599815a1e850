"""Immutable result types: model references, contexts, stats, load reports and tree nodes."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from .. import _core

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from datetime import datetime
    from typing import Any, Final

    from .entries import SessionTreeEntry
    from .messages import AgentMessage

__all__ = [
    "MAX_REPORTED_ISSUES",
    "ContextState",
    "LoadIssue",
    "LoadReport",
    "MessageSequence",
    "ModelRef",
    "SessionContext",
    "SessionMetadata",
    "SessionStats",
    "TreeNode",
]


@dataclass(frozen=True, slots=True)
class ModelRef:
    """The model in effect: ``provider`` and ``model_id``."""

    provider: str
    model_id: str


@dataclass(frozen=True, slots=True)
class ContextState:
    """Thinking level, model and active tools derived from a path of entries."""

    thinking_level: str = "off"
    model: ModelRef | None = None
    active_tool_names: tuple[str, ...] | None = None


class MessageSequence(Sequence["AgentMessage"]):
    """An immutable sequence of messages: :attr:`SessionContext.messages`.

    It behaves like a tuple (indexing, slicing to a tuple, iteration, ``len``, ``in``,
    equality with tuples and other message sequences, hashing, pickling) but a session's
    context hands out views of the list it keeps and extends, so a turn costs what it adds,
    not a copy of the whole context.

    >>> MessageSequence(["a", "b"])[-1], MessageSequence(["a"]) == ("a",)
    ('b', True)
    """

    __slots__ = ("_items", "_len")

    _items: list[AgentMessage]
    _len: int

    def __init__(self, messages: Iterable[AgentMessage] = ()) -> None:
        items = list(messages)
        object.__setattr__(self, "_items", items)
        object.__setattr__(self, "_len", len(items))

    @classmethod
    def _view(cls, items: list[AgentMessage], length: int) -> MessageSequence:
        """The first ``length`` items of ``items``, which may only grow afterwards."""
        view = cls.__new__(cls)
        object.__setattr__(view, "_items", items)
        object.__setattr__(view, "_len", length)
        return view

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"MessageSequence is immutable: cannot set {name!r}")

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> AgentMessage: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[AgentMessage, ...]: ...
    def __getitem__(self, index: int | slice) -> AgentMessage | tuple[AgentMessage, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._len)
            return tuple(self._items[start:stop:step])
        n = self._len
        i = index.__index__()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("message index out of range")
        return self._items[i]

    def __iter__(self) -> Iterator[AgentMessage]:
        return itertools.islice(self._items, self._len)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (MessageSequence, tuple)):
            return NotImplemented
        if len(other) != self._len:
            return False
        if isinstance(other, MessageSequence) and other._items is self._items:
            return True
        return all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: object) -> tuple[AgentMessage, ...]:
        if not isinstance(other, (MessageSequence, tuple)):
            return NotImplemented
        return (*self, *other)

    def __radd__(self, other: object) -> tuple[AgentMessage, ...]:
        if not isinstance(other, tuple):
            return NotImplemented
        return (*other, *self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (MessageSequence, (tuple(self),))

    def __copy__(self) -> MessageSequence:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> MessageSequence:
        import copy

        return MessageSequence(copy.deepcopy(tuple(self), memo))

    def __repr__(self) -> str:
        shown = ", ".join(repr(m) for m in itertools.islice(self._items, min(self._len, 3)))
        more = f", … {self._len - 3} more" if self._len > 3 else ""
        return f"MessageSequence([{shown}{more}])"


@dataclass(frozen=True, slots=True)
class SessionContext:
    """What goes to the model: the messages plus thinking level, model and active tools."""

    messages: Sequence[AgentMessage]
    thinking_level: str = "off"
    model: ModelRef | None = None
    active_tool_names: tuple[str, ...] | None = None

    def __repr__(self) -> str:
        model = f"{self.model.provider}/{self.model.model_id}" if self.model else None
        return (
            f"SessionContext(messages=<{len(self.messages)} messages>, "
            f"thinking_level={self.thinking_level!r}, model={model!r}, "
            f"active_tool_names={self.active_tool_names!r})"
        )


@dataclass(frozen=True, slots=True)
class SessionStats:
    """Whole-session counts and usage sums (every branch).

    ``message_count`` counts ``message`` entries of any role; tokens and cost sum the
    ``usage`` of assistant messages and of compaction and branch-summary entries.
    """

    entry_count: int = 0
    message_count: int = 0
    user_message_count: int = 0
    assistant_message_count: int = 0
    tool_result_count: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    total_tokens: int = 0
    cost_total: float = 0.0


@dataclass(frozen=True, slots=True)
class LoadIssue:
    """One problem the lenient reader found and skipped.

    Attributes:
        line: 1-based line number (the header is line 1).
        offset: byte offset of the line's start.
        kind: ``torn_tail``, ``malformed``, ``invalid_utf8``, ``duplicate_id``,
            ``dangling_parent``, ``unknown_leaf_target`` or ``too_large``.
        message: details.
    """

    line: int
    offset: int
    kind: str
    message: str


MAX_REPORTED_ISSUES: Final[int] = _core.MAX_REPORTED_ISSUES
"""How many issues a :class:`LoadReport` keeps in full (1,000); past them it only counts
them by kind, so a file of millions of bad lines costs no memory for its problems."""


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What opening a file found: the issues, and the size of a torn last line.

    A file can hold millions of bad lines, so only the first
    :data:`MAX_REPORTED_ISSUES` (1,000) issues are kept in full (and a torn
    tail, always); ``counts`` counts every issue found, kept or not, by kind.

    Attributes:
        issues: the first issues, in file order.
        torn_tail_bytes: bytes after the last newline (0 when the file ends cleanly).
        counts: ``(kind, number)`` of every issue found, in the order of the kinds in
            :class:`LoadIssue` (kinds never found are left out); ``dict(report.counts)``
            maps them.

    >>> LoadReport().ok
    True
    """

    issues: tuple[LoadIssue, ...] = ()
    torn_tail_bytes: int = 0
    counts: tuple[tuple[str, int], ...] = ()

    @property
    def ok(self) -> bool:
        """True when the file had no problem at all."""
        return not self.issues and not self.torn_tail_bytes

    @property
    def issue_count(self) -> int:
        """How many issues were found in all (``len(issues)`` when no counts are given)."""
        return sum(n for _, n in self.counts) if self.counts else len(self.issues)

    @property
    def truncated(self) -> bool:
        """True when some issues are only counted, not kept in ``issues``."""
        return self.issue_count > len(self.issues)


class TreeNode:
    """One entry in :meth:`Session.get_tree`, with its children (file order) and label.

    Equality and ``repr`` never recurse, so trees 10⁶ levels deep are safe to compare
    and print.
    """

    __slots__ = ("children", "entry", "label")

    entry: SessionTreeEntry
    children: tuple[TreeNode, ...]
    label: str | None

    def __init__(
        self,
        entry: SessionTreeEntry,
        children: Sequence[TreeNode] = (),
        label: str | None = None,
    ) -> None:
        object.__setattr__(self, "entry", entry)
        object.__setattr__(self, "children", tuple(children))
        object.__setattr__(self, "label", label)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"TreeNode is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"TreeNode is immutable (cannot delete {name!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        # The default reduce restores slots through ``__setattr__``, which refuses.
        return (TreeNode, (self.entry, self.children, self.label))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TreeNode):
            return NotImplemented
        stack: list[tuple[TreeNode, TreeNode]] = [(self, other)]
        while stack:
            a, b = stack.pop()
            if a is b:
                continue
            if a.entry != b.entry or a.label != b.label or len(a.children) != len(b.children):
                return False
            stack.extend(zip(a.children, b.children, strict=True))
        return True

    __hash__ = None  # type: ignore[assignment]

    def walk(self) -> list[TreeNode]:
        """This node and every node below it, parents before children (no recursion)."""
        out: list[TreeNode] = []
        stack = [self]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(node.children))
        return out

    def __repr__(self) -> str:
        label = f", label={self.label!r}" if self.label is not None else ""
        return (
            f"TreeNode({self.entry.type} {self.entry.id!r}, children={len(self.children)}{label})"
        )


@dataclass(frozen=True, slots=True)
class SessionMetadata:
    """What a repository's ``list`` knows of one session without opening it.

    Attributes:
        id: the session id.
        path: the session file, or ``None`` for in-memory repos.
        cwd: the working directory from the header.
        created: the header's time (timezone-aware UTC).
        modified: the later of the header's time and the newest entry's (so a fresh
            fork, whose copied entries are older than its header, lists first).
        name: the session name (last ``session_info``), or ``None``.
        parent_session: the id this session was forked from, or ``None``.
        entry_count: number of entries.
        message_count: number of ``message`` entries.
        first_message: the text of the first user message, or ``None``.
        size_bytes: size of the session file (or document).
        error: ``None``, or why the file could not be read.
        dialect: ``"sessiontree"``, or ``"pi"`` for a file written by pi.
    """

    id: str
    path: str | None
    cwd: str
    created: datetime | None
    modified: datetime | None
    name: str | None = None
    parent_session: str | None = None
    entry_count: int = 0
    message_count: int = 0
    first_message: str | None = None
    size_bytes: int = 0
    error: str | None = None
    dialect: str = "sessiontree"
