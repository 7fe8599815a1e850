"""The context a :class:`~sessiontree.Session` keeps between turns and extends as it grows.

An agent appends one or two entries per turn and asks for the context again; building it
from nothing each time costs a walk of the whole branch and an object per entry.  The
cache here holds the branch it last built (the entries of
``get_path_to_root_or_compaction(leaf)``), the default-transformed context entries, their
messages and the derived state, and:

- extends all of them in O(1) when the session appends an ordinary entry at the leaf;
- after a leaf move, a compaction, a branch summary or a change made behind the session's
  back (another handle, ``refresh()``), asks the storage for the new branch — handing it
  the entries it already holds so an engine-backed storage builds only the new ones — and
  keeps the messages of the common prefix of the old and new branch;
- with user transforms, hands the cached default-transformed entries to the transforms on
  every build (their cost is the user's) and reuses the messages made for each entry
  object; projector output is cached per entry (and its index), so a projector must depend
  only on the entry, its index and the entries before it.

Validity is checked on every build against the storage's leaf and entry count (storages
are append-only, so the count changes with every write), so results are always those of a
cold :func:`~sessiontree.build_session_context`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionTreeEntry,
    ThinkingLevelChangeEntry,
)
from ..model.messages import AgentMessage, AssistantMessage
from ..model.types import MessageSequence, ModelRef, SessionContext
from .build import (
    SessionContextBuildOptions,
    apply_entry_transforms,
    derive_session_context_state,
    session_entry_to_context_messages,
    split_at_latest_compaction,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ..storage import SessionStorage

__all__ = ["ContextCache"]

_NO_LEAF: Any = object()
"""The leaf of a cache that describes nothing yet (``None`` is a real leaf)."""

# Entries whose context messages are made (not just passed through): their messages are
# kept per entry so a rebuild hands back the same objects without making them again.
_MADE = (CustomMessageEntry, CompactionEntry, BranchSummaryEntry, CustomEntry)
# Their exact classes, for pruning (a subclass instance missed there is only made again).
_MADE_CLASSES = frozenset(_MADE)


def _options_key(options: SessionContextBuildOptions) -> tuple[Any, ...]:
    # Callables compare by identity, so equal keys mean the same hooks.
    return (options.entry_transforms, tuple(sorted(options.entry_projectors.items())))


class ContextCache:
    """One session's last context and what it was built from (see the module docstring)."""

    __slots__ = (
        "_branch",
        "_context",
        "_count",
        "_ends",
        "_entries",
        "_key",
        "_leaf",
        "_made",
        "_messages",
        "_model",
        "_options",
        "_thinking_level",
        "_tools",
    )

    def __init__(self) -> None:
        self._leaf: Any = _NO_LEAF
        self._count = -1
        # The raw branch, root first, and the default-transformed entries: the compaction's
        # head, then the branch from just after the compaction (``_entries`` shares that
        # tail with ``_branch`` entry for entry).
        self._branch: list[SessionTreeEntry] = []
        self._entries: list[SessionTreeEntry] = []
        # The messages of ``_entries`` in order; ``_ends[i]`` counts those of ``_entries[:i+1]``.
        self._messages: list[AgentMessage] = []
        self._ends: list[int] = []
        # Entry id -> (entry object, its index, its messages) for entries whose messages
        # are made; reused only for the same object at the same index.
        self._made: dict[str, tuple[SessionTreeEntry, int, list[AgentMessage]]] = {}
        self._key: tuple[Any, ...] | None = None
        self._options = SessionContextBuildOptions()
        self._thinking_level = "off"
        self._model: ModelRef | None = None
        self._tools: tuple[str, ...] | None = None
        self._context: SessionContext | None = None

    def __repr__(self) -> str:
        return (
            f"<ContextCache: {len(self._branch)} branch entries, "
            f"{len(self._messages)} messages, leaf={self._leaf!r}>"
        )

    # -- the hot path ------------------------------------------------------------------

    def appended(self, entry: SessionTreeEntry, count: int) -> None:
        """Notes that ``entry`` was appended, leaving the storage with ``count`` entries.

        An ordinary entry hung under the cached leaf extends the cache in place; anything
        else is left for :meth:`build` to notice (the leaf or count will not match).
        """
        if (
            entry.parent_id != self._leaf
            or count != self._count + 1
            or isinstance(entry, CompactionEntry)
        ):
            return
        self._branch.append(entry)
        self._entries.append(entry)
        self._leaf = entry.id
        self._count = count
        self._context = None
        if isinstance(entry, MessageEntry):
            message = entry.message
            if isinstance(message, AssistantMessage):
                self._use_model(message.provider, message.model)
        elif isinstance(entry, ThinkingLevelChangeEntry):
            self._thinking_level = entry.thinking_level
        elif isinstance(entry, ModelChangeEntry):
            self._use_model(entry.provider, entry.model_id)
        elif isinstance(entry, ActiveToolsChangeEntry):
            self._tools = tuple(entry.active_tool_names)

    def _use_model(self, provider: str, model_id: str) -> None:
        # Almost every reply is from the model of the one before: keep its ``ModelRef``.
        model = self._model
        if model is None or model.model_id != model_id or model.provider != provider:
            self._model = ModelRef(provider, model_id)

    def build(
        self, storage: SessionStorage, options: SessionContextBuildOptions, *, cheap: bool = False
    ) -> SessionContext | None:
        """The context at the storage's current leaf with ``options``.

        With ``cheap=True``, only if that extends what is cached (no branch read, no
        entry transforms, so it costs the entries appended since the last build); else
        ``None``, with nothing done (``AsyncSession`` then builds in a thread instead).
        """
        leaf = storage.get_leaf_id()
        count = len(storage)
        # Options are frozen: the same object has the same key (and is the common case).
        key = self._key if options is self._options else _options_key(options)
        remake = key != self._key
        if cheap and (
            remake or leaf != self._leaf or count != self._count or options.entry_transforms
        ):
            return None
        if remake:
            self._key = key
            self._options = options
            # Projectors may have changed: forget what they made (other made messages do
            # not depend on the options and stay).
            self._made = {k: v for k, v in self._made.items() if not isinstance(v[0], CustomEntry)}
        if leaf != self._leaf or count != self._count:
            self._rebuild(storage, leaf, count, remake)
        elif remake:
            self._remake_messages()
        if options.entry_transforms:
            return self._transformed(options)
        if len(self._ends) < len(self._entries):
            self._catch_up()
            self._context = None
        context = self._context
        if context is None:
            # A view of the list, not a copy: the list only grows while views of it exist
            # (a rebuild starts a new one), so the view stays what it was.
            messages = MessageSequence._view(self._messages, len(self._messages))
            context = self._context = SessionContext(
                messages, self._thinking_level, self._model, self._tools
            )
        return context

    # -- building blocks ---------------------------------------------------------------

    def _messages_of(
        self, entry: SessionTreeEntry, index: int, entries: list[SessionTreeEntry]
    ) -> list[AgentMessage]:
        if isinstance(entry, MessageEntry):
            return [entry.message]
        if not isinstance(entry, _MADE):
            return []
        seen = self._made.get(entry.id)
        if seen is not None and seen[0] is entry and seen[1] == index:
            return seen[2]
        messages = session_entry_to_context_messages(entry, index, entries, self._options)
        self._made[entry.id] = (entry, index, messages)
        return messages

    def _catch_up(self) -> None:
        # Messages are made at build time, not on append, so a projector sees every
        # context entry up to the leaf, as in a cold build.
        entries = self._entries
        messages = self._messages
        ends = self._ends
        add, extend, end, messages_of = (
            messages.append,
            messages.extend,
            ends.append,
            self._messages_of,
        )
        for i in range(len(ends), len(entries)):
            entry = entries[i]
            if entry.__class__ is MessageEntry:  # the common case, inline
                add(entry.message)
            else:
                extend(messages_of(entry, i, entries))
            end(len(messages))

    def _remake_messages(self) -> None:
        self._messages = []
        self._ends = []
        self._context = None

    def _rebuild(self, storage: SessionStorage, leaf: str | None, count: int, remake: bool) -> None:
        old_branch = self._branch
        old_head = len(self._entries) - (len(old_branch) - self._tail_start(old_branch))
        branch = storage.get_branch_entries(leaf, known={e.id: e for e in old_branch})
        head, tail_start = split_at_latest_compaction(branch)
        keep = 0
        if old_branch and not remake and _same_ids(head, self._entries[:old_head]):
            # Same compaction (or none): keep the head and the common start of the tails.
            old_tail_start = self._tail_start(old_branch)
            keep = len(head) + _common_prefix(old_branch, old_tail_start, branch, tail_start)
        if keep:
            del self._entries[keep:]
            del self._ends[keep:]
            # A new list: contexts handed out before view the old one.
            self._messages = self._messages[: self._ends[-1] if self._ends else 0]
            self._entries.extend(branch[tail_start + keep - len(head) :])
        else:
            self._entries = [*head, *branch[tail_start:]]
            self._ends = []
            self._messages = []
        self._branch = branch
        state = derive_session_context_state(storage.get_context_state_entries(leaf))
        self._thinking_level = state.thinking_level
        self._model = state.model
        self._tools = state.active_tool_names
        self._leaf = leaf
        self._count = count
        self._context = None
        # Made messages of entries no longer on the branch would only hold memory.
        if not self._made:
            return
        live = {e.id for e in self._entries if e.__class__ in _MADE_CLASSES}
        if len(self._made) > len(live):
            self._made = {k: v for k, v in self._made.items() if k in live}

    def _tail_start(self, branch: list[SessionTreeEntry]) -> int:
        # The compaction that cut the branch is the last one on it; the tail follows it.
        for i in range(len(branch) - 1, -1, -1):
            if isinstance(branch[i], CompactionEntry):
                return i + 1
        return 0

    def _transformed(self, options: SessionContextBuildOptions) -> SessionContext:
        entries = apply_entry_transforms(list(self._entries), options)
        messages: list[AgentMessage] = []
        for i, entry in enumerate(entries):
            messages.extend(self._messages_of(entry, i, entries))
        return SessionContext(tuple(messages), self._thinking_level, self._model, self._tools)


def _same_ids(a: Sequence[SessionTreeEntry], b: Sequence[SessionTreeEntry]) -> bool:
    return len(a) == len(b) and all(x.id == y.id for x, y in zip(a, b, strict=True))


def _common_prefix(
    a: Sequence[SessionTreeEntry], a_start: int, b: Sequence[SessionTreeEntry], b_start: int
) -> int:
    n = min(len(a) - a_start, len(b) - b_start)
    i = 0
    while i < n and a[a_start + i].id == b[b_start + i].id:
        i += 1
    return i
