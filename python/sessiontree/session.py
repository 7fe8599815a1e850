"""``Session``: the agent-facing API over any :class:`SessionStorage`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ._util import now_iso
from .context import ContextCache, SessionContextBuildOptions, merge_context_build_options
from .errors import SessionError
from .model.entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    SessionTreeEntry,
    ThinkingLevelChangeEntry,
    entry_to_json,
)
from .model.messages import AgentMessage, Usage, UserContentBlock
from .model.types import SessionContext, SessionStats, TreeNode
from .storage import SessionStorage

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from datetime import datetime
    from types import TracebackType
    from typing import Any

    from .model.entries import ThinkingLevel
    from .search import SearchHit, SearchOrder

__all__ = ["Session"]


def _require_str(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise SessionError("invalid_argument", f"{name} must be a str, not {type(value).__name__}")


class Session:
    """A session: a tree of entries with a leaf, over a storage.

    Every ``append_*`` method returns the new entry's id and moves the leaf to it.

    Args:
        storage: where the entries live (any :class:`SessionStorage`).
        context_build_options: transforms and projectors used by :meth:`build_context`.

    >>> from sessiontree import InMemorySessionStorage, UserMessage
    >>> session = Session(InMemorySessionStorage())
    >>> first = session.append_message(UserMessage("Hello"))
    >>> session.get_leaf_id() == first
    True
    """

    def __init__(
        self,
        storage: SessionStorage,
        context_build_options: SessionContextBuildOptions | None = None,
    ) -> None:
        if not isinstance(storage, SessionStorage):
            raise SessionError(
                "invalid_argument",
                f"storage must be a SessionStorage, not {type(storage).__name__}",
            )
        if context_build_options is not None and not isinstance(
            context_build_options, SessionContextBuildOptions
        ):
            raise SessionError(
                "invalid_argument", "context_build_options must be SessionContextBuildOptions"
            )
        self._storage = storage
        # Held across every read-the-leaf-then-append and every context build, so threads
        # sharing this session (or its storage) take turns (``SessionStorage.atomic``).
        self._atomic = storage.atomic()
        self._context_cache: ContextCache | None = None
        self.context_build_options = context_build_options or SessionContextBuildOptions()

    @property
    def storage(self) -> SessionStorage:
        """The storage behind this session."""
        return self._storage

    @property
    def id(self) -> str:
        """The session id (from the header)."""
        return self._storage.get_metadata().id

    # -- appending ---------------------------------------------------------------------

    def _base(self) -> dict[str, Any]:
        return {
            "id": self._storage.create_entry_id(),
            "parent_id": self._storage.get_leaf_id(),
            "timestamp": now_iso(),
        }

    def _append(self, entry: SessionTreeEntry) -> str:
        storage = self._storage
        storage.append_entry(entry)
        cache = self._context_cache
        if cache is not None:
            cache.appended(entry, len(storage))
        return entry.id

    def _add(self, cls: Callable[..., SessionTreeEntry], **fields: Any) -> str:
        """Builds an entry under the current leaf (``cls(**fields, **base)``) and appends
        it, with no other thread's append in between."""
        with self._atomic:
            return self._append(cls(**fields, **self._base()))

    def append_message(self, message: AgentMessage) -> str:
        """Appends a message (user, assistant, tool result, ...)."""
        # The storage stamps, writes and returns the entry (the engine-backed ones in one
        # engine call).
        with self._atomic:
            entry = self._storage.append_message(message)
            cache = self._context_cache
            if cache is not None:
                cache.appended(entry, len(self._storage))
            return entry.id

    def append_thinking_level_change(self, level: ThinkingLevel) -> str:
        """Records a thinking-level change (``off minimal low medium high xhigh``)."""
        return self._add(ThinkingLevelChangeEntry, thinking_level=level)

    def append_model_change(self, provider: str, model_id: str) -> str:
        """Records a model change."""
        return self._add(ModelChangeEntry, provider=provider, model_id=model_id)

    def append_active_tools_change(self, names: Sequence[str]) -> str:
        """Records the set of active tools."""
        if isinstance(names, str):
            raise SessionError("invalid_argument", "names must be a sequence of str, not a str")
        return self._add(ActiveToolsChangeEntry, active_tool_names=names)

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        details: Any = None,
        from_hook: bool = False,
        usage: Usage | None = None,
        retained_tail: Sequence[AgentMessage] | None = None,
    ) -> str:
        """Appends a compaction: ``summary`` replaces the path before ``first_kept_entry_id``
        (or, with ``retained_tail``, the whole path, followed by those messages)."""
        _require_str("first_kept_entry_id", first_kept_entry_id, optional=True)
        if first_kept_entry_id is not None and self._storage.get_entry(first_kept_entry_id) is None:
            raise SessionError("not_found", f"entry {first_kept_entry_id!r} not found")
        return self._add(
            CompactionEntry,
            summary=summary,
            first_kept_entry_id=first_kept_entry_id,
            tokens_before=tokens_before,
            retained_tail=retained_tail,
            details=details,
            usage=usage,
            from_hook=from_hook,
        )

    def append_custom_entry(self, custom_type: str, data: Any = None) -> str:
        """Appends application data (no context messages unless a projector is given)."""
        return self._add(CustomEntry, custom_type=custom_type, data=data)

    def append_custom_message_entry(
        self,
        custom_type: str,
        content: str | Sequence[UserContentBlock],
        display: bool = True,
        details: Any = None,
    ) -> str:
        """Appends a custom message that goes into the context (``content``: text, or text
        and image blocks)."""
        return self._add(
            CustomMessageEntry,
            custom_type=custom_type,
            content=content,
            details=details,
            display=display,
        )

    def append_label(self, target_id: str, label: str | None) -> str:
        """Labels ``target_id`` (``None`` clears its label); the target must exist.

        Raises:
            SessionError: ``invalid_argument`` for an empty label (use ``None`` to clear);
                ``not_found`` for an unknown target.
        """
        _require_str("target_id", target_id)
        _require_str("label", label, optional=True)
        if self._storage.get_entry(target_id) is None:
            raise SessionError("not_found", f"entry {target_id!r} not found")
        return self._add(LabelEntry, target_id=target_id, label=label)

    def append_session_info(self, name: str | None) -> str:
        """Names the session (``None`` clears the name)."""
        _require_str("name", name, optional=True)
        return self._add(SessionInfoEntry, name=name)

    def move_to(self, entry_id: str | None, summary: Mapping[str, Any] | None = None) -> str | None:
        """Moves the leaf to ``entry_id`` (``None``: before the first entry).

        With ``summary={"summary": ..., "details"?: ..., "usage"?: ..., "from_hook"?: ...}``
        a ``BranchSummaryEntry`` is appended under the target and its id returned.

        Raises:
            SessionError: ``not_found`` for an unknown id; ``invalid_argument`` for a
                summary with ``entry_id=None`` or a malformed summary.
        """
        _require_str("entry_id", entry_id, optional=True)
        if summary is not None:
            if entry_id is None:
                raise SessionError(
                    "invalid_argument", "a branch summary needs a target entry (entry_id is None)"
                )
            if not isinstance(summary, Mapping) or not isinstance(summary.get("summary"), str):
                raise SessionError(
                    "invalid_argument", "summary must be a mapping with a str 'summary'"
                )
            unknown = set(summary) - {"summary", "details", "usage", "from_hook"}
            if unknown:
                raise SessionError(
                    "invalid_argument", f"unknown summary keys: {', '.join(sorted(unknown))}"
                )
        if entry_id is not None and self._storage.get_entry(entry_id) is None:
            raise SessionError("not_found", f"entry {entry_id!r} not found")
        if summary is not None:
            assert entry_id is not None
            # Build (and so validate) the summary entry before anything is written.
            with self._atomic:
                branch = BranchSummaryEntry(
                    id=self._storage.create_entry_id(),
                    parent_id=entry_id,
                    timestamp=now_iso(),
                    from_id=entry_id,
                    summary=summary["summary"],
                    details=summary.get("details"),
                    usage=summary.get("usage"),
                    from_hook=summary.get("from_hook", False),
                )
                # Serialise it too (``details`` may not be JSON), so a bad summary cannot
                # leave the leaf moved without its summary.
                entry_to_json(branch)
                self._storage.set_leaf_id(entry_id)
                return self._append(branch)
        with self._atomic:
            self._storage.set_leaf_id(entry_id)
        return None

    # -- reading -----------------------------------------------------------------------

    def get_entry(self, entry_id: str) -> SessionTreeEntry | None:
        """The entry with ``entry_id``, or ``None``."""
        return self._storage.get_entry(entry_id)

    def get_leaf_id(self) -> str | None:
        """The current leaf."""
        return self._storage.get_leaf_id()

    def get_branch(self, leaf_id: str | None = None) -> list[SessionTreeEntry]:
        """The current branch (or the one ending at ``leaf_id``), root first, cut at the
        nearest compaction."""
        _require_str("leaf_id", leaf_id, optional=True)
        leaf = self._storage.get_leaf_id() if leaf_id is None else leaf_id
        return self._storage.get_path_to_root_or_compaction(leaf)

    def get_label(self, entry_id: str) -> str | None:
        """The label on ``entry_id`` (``None`` if it has none).

        Raises:
            SessionError: ``not_found`` for an unknown id.
        """
        return self._storage.get_label(entry_id)

    def get_session_name(self) -> str | None:
        """The session name."""
        return self._storage.get_session_name()

    def get_session_stats(self) -> SessionStats:
        """Counts and usage over the whole session (every branch)."""
        return self._storage.get_session_stats()

    def get_tree(self) -> list[TreeNode]:
        """The whole tree: root nodes (file order), each with children and label.

        Built bottom-up without recursion, so any depth works (the storage's
        :meth:`~SessionStorage.get_tree`; engine storages make the nodes in Rust).
        """
        return self._storage.get_tree()

    def merge_context_build_options(
        self, options: SessionContextBuildOptions | None
    ) -> SessionContextBuildOptions:
        """This session's options merged with ``options`` (theirs run/win second)."""
        return merge_context_build_options(self.context_build_options, options)

    def build_context(self, options: SessionContextBuildOptions | None = None) -> SessionContext:
        """The context for the model at the current leaf.

        Messages come from :meth:`get_branch`; thinking level, model and active tools from
        the whole path to the root, so state set before a compaction survives it.

        The session keeps the context it built last and extends it as entries are
        appended, so a turn costs what it adds, not the length of the branch; a leaf
        move or compaction rebuilds only what changed. The cache holds a reference to
        every entry and message of the current branch (no copies); drop it with
        :meth:`clear_context_cache`. Projector output is cached per entry and index, so
        a projector must depend only on those and the entries before it.
        """
        options = self.merge_context_build_options(options)
        with self._atomic:
            cache = self._context_cache
            if cache is None:
                cache = self._context_cache = ContextCache()
            context = cache.build(self._storage, options)
            assert context is not None
            return context

    def _build_context_if_cached(
        self, options: SessionContextBuildOptions | None = None
    ) -> SessionContext | None:
        # For ``AsyncSession``: build_context(options) when that only extends the cached
        # context (cheap enough for an event loop), else None with nothing done.
        options = self.merge_context_build_options(options)
        with self._atomic:
            cache = self._context_cache
            return None if cache is None else cache.build(self._storage, options, cheap=True)

    def clear_context_cache(self) -> None:
        """Forgets the cached context (and the memory it holds); the next
        :meth:`build_context` builds it again from the storage."""
        self._context_cache = None

    # -- search ------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        roles: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        branch_only: bool = False,
        order: SearchOrder = "relevance",
        limit: int = 50,
    ) -> list[SearchHit]:
        """Find the entries of this session (every branch) that match ``query``.

        The query language and the arguments are those of
        :meth:`SessionRepo.search <sessiontree.SessionRepo.search>` (no ``cwd``).

        Returns:
            The hits, best first; ``hit.on_branch`` says whether the entry is on the
            current branch.

        Raises:
            SessionError: ``invalid_argument`` for a bad query or argument.

        >>> import sessiontree as st
        >>> s = st.Session(st.InMemorySessionStorage())
        >>> _ = s.append_message(st.UserMessage('It said "connection refused" twice.'))
        >>> [h.snippet for h in s.search('"Connection refused"')]
        ['It said "**connection refused**" twice.']
        """
        from .search import branch_members, search_plan

        plan = search_plan(
            query,
            roles=roles,
            types=types,
            since=since,
            until=until,
            branch_only=branch_only,
            order=order,
            limit=limit,
        )
        storage = self._storage
        with self._atomic:
            doc = storage.search_document()
            sid = storage.get_metadata().id
            return plan.scan([(sid, doc)], lambda _sid, ids: branch_members(storage, ids))

    # -- lifecycle ---------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._storage)

    def close(self) -> None:
        """Closes the storage (idempotent)."""
        self._storage.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Session over {self._storage!r}>"
