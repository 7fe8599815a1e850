"""The storage interface ``Session`` and repositories work against, with pure-Python
defaults for its optional fast paths."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from types import TracebackType
from typing import Literal

from ..entries import (
    ActiveToolsChangeEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionTreeEntry,
    ThinkingLevelChangeEntry,
)
from ..messages import AssistantMessage
from ..types import SessionStats

__all__ = ["DURABILITY_MODES", "Durability", "SessionStorage"]


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
