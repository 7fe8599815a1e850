"""Which calls of the async API run inline on the event loop and which in a worker thread.

This table is the one place that decides it; the async classes are generated from it and
from the sync classes (``_twins``), and so is their stub (``_stubgen``). The figures behind
each choice are in ``benches/RESULTS-async.md`` (measured on a 2-core machine, warm page
cache): whatever stays inline costs at most a few microseconds there, far below the
1 ms budget an event loop can spare for one call.

A call runs inline only on a storage whose costs are known (the engine-backed
:class:`~sessiontree.InMemorySessionStorage` and :class:`~sessiontree.JsonlSessionStorage`)
and only while the session has no call queued or running in its thread; on any other
storage (yours, PostgreSQL, ...) every call that reaches the storage runs in a thread,
since a network or disk round trip may hide behind any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Final

from ..model.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from . import _chunked

if TYPE_CHECKING:
    from ..repo import SessionRepo
    from ..session import Session
    from ..storage import SessionStorage

__all__ = [
    "BULK_INLINE_ENTRIES",
    "DEFER",
    "INLINE_WRITE_BYTES",
    "REPO_CALLS",
    "SESSION_CALLS",
    "Policy",
    "inline_kinds",
    "repo_inline",
]

BULK_INLINE_ENTRIES: Final = 300
"""A whole-branch or whole-tree read, or a context built from scratch, runs inline only
on a session of at most this many entries: in memory an entry costs up to ~1.3 us to read
and ~1.7 us to build a context from (1,000 entries: ``get_branch`` 1.2 ms, ``get_tree``
1.4 ms, a cold ``build_context`` 1.7 ms), so 300 stay near half a millisecond."""


INLINE_WRITE_BYTES: Final = 64 * 1024
"""An append runs inline only when the text it carries is at most about this many
characters (strings, base64 image data, tool-call arguments; estimated without encoding
anything): encoding and writing costs ~6 ns a byte (a 16 MB message: 90-120 ms), so
64 KiB stay under half a millisecond. A larger one is written in the worker thread,
where the engine's encoding and write let the loop run."""

# The estimate gives up (and the append goes to the thread) after this many values.
_SIZE_NODES: Final = 256


DEFER: Final = object()
"""What a policy's ``attempt`` returns when the call must run in the thread after all."""


class Policy:
    """How one kind of call is run.

    Attributes:
        kind: the name of the kind (``local``, ``read``, ``write``, ``bulk``, ``context``,
            ``close``; ``repo_cheap``, ``repo_heavy`` for repositories).
        doc: what the calls of this kind cost, and so where they run.
        decide: ``(session, *call arguments) -> True`` to run this call inline, given
            that the storage's profile (:func:`inline_kinds`) lets this kind run inline.
        attempt: instead of ``decide``: ``(session, *call arguments) ->`` the call's
            result when it could be had cheaply on the loop, else :data:`DEFER` (nothing
            done).
        shield: the call is never dropped by a cancellation, even one that came before
            it started (closes: they must happen however the block is left); its
            ``await`` waits for it, then delivers the cancellation.
        worker: instead of the storage's own method, the worker thread runs
            ``worker(session, *call arguments)`` (same result, built so that it lets the
            event loop's thread have the GIL often: see ``_chunked``).
    """

    __slots__ = ("attempt", "decide", "doc", "kind", "shield", "worker")

    def __init__(
        self,
        kind: str,
        doc: str,
        decide: Callable[..., bool] | None = None,
        attempt: Callable[..., Any] | None = None,
        *,
        shield: bool = False,
        worker: Callable[..., Any] | None = None,
    ) -> None:
        self.kind = kind
        self.doc = doc
        self.decide = decide
        self.attempt = attempt
        self.shield = shield
        self.worker = worker

    def __repr__(self) -> str:
        return f"<Policy {self.kind}>"


def _small(session: Session, *args: Any, **kwargs: Any) -> bool:
    return len(session.storage) <= BULK_INLINE_ENTRIES


def _value_size(value: Any, budget: int) -> int:
    """About how many characters ``value`` adds to a JSON line; more than ``budget``
    (any larger number) as soon as that is certain, or after :data:`_SIZE_NODES` values."""
    size = 0
    nodes = 0
    stack = [value]
    while stack:
        nodes += 1
        if nodes > _SIZE_NODES:
            return budget + 1
        v = stack.pop()
        cls = v.__class__
        if cls is str or cls is bytes:
            size += len(v)
            if size > budget:
                return size
        elif cls is dict:
            stack.extend(v)
            stack.extend(v.values())
        elif cls is list or cls is tuple:
            stack.extend(v)
        elif v is None or cls is int or cls is float or cls is bool:
            size += 8
        else:
            names = _field_names.get(cls)
            if names is None:
                try:
                    names = _field_names[cls] = tuple(f.name for f in fields(cls))
                except TypeError:  # not a model class: a str or list subclass, ...
                    return budget + 1
            for name in names:
                stack.append(getattr(v, name))
    return size


_field_names: dict[type, tuple[str, ...]] = {}


def _block_size(block: Any, budget: int) -> int:
    cls = block.__class__
    if cls is TextContent:
        return len(block.text) + (0 if block.signature is None else len(block.signature))
    if cls is ToolCall:
        size = 0
        for value in block.arguments.values():
            c = value.__class__
            if c is str:
                size += len(value)
            elif c is int or c is bool or c is float or value is None:
                size += 8
            else:
                size += _value_size(value, budget)
            if size > budget:
                break
        return size
    if cls is ThinkingContent:
        return len(block.thinking) + (0 if block.signature is None else len(block.signature))
    if cls is ImageContent:
        return len(block.data)
    return _value_size(block, budget)


def _small_message(session: Session, message: Any) -> bool:
    # The common messages without a walk of their fixed-size fields (usage, model, ...).
    budget = INLINE_WRITE_BYTES
    cls = message.__class__
    if cls is UserMessage and message.content.__class__ is str:
        return len(message.content) <= budget  # a user's text: the commonest append
    if cls is UserMessage or cls is ToolResultMessage or cls is AssistantMessage:
        content = message.content
        if content.__class__ is str:
            size = len(content)
        else:
            size = 0
            for block in content:
                if block.__class__ is TextContent and block.signature is None:
                    size += len(block.text)  # the common block, without a call
                else:
                    size += _block_size(block, budget)
                if size > budget:
                    return False
        if cls is ToolResultMessage:
            if message.details is not None:
                size += _value_size(message.details, budget)
        elif cls is AssistantMessage and message.error_message is not None:
            size += len(message.error_message)
        return size <= budget
    return _value_size(message, budget) <= budget


def _small_args(session: Session, *args: Any, **kwargs: Any) -> bool:
    return _value_size((args, kwargs), INLINE_WRITE_BYTES) <= INLINE_WRITE_BYTES


def _cached_context(session: Session, options: Any = None) -> Any:
    # One pass: the check and the build share their reads of the leaf and the count.
    context = session._build_context_if_cached(options)
    if context is not None:
        return context
    if len(session.storage) <= BULK_INLINE_ENTRIES:
        return session.build_context(options)
    return DEFER


LOCAL: Final = Policy(
    "local",
    "touches only the Session object (no storage call): always inline, even while a "
    "call of the session runs in its thread",
)
READ: Final = Policy(
    "read",
    "one lookup in the engine's in-memory index (0.5-3 us, 10k to 100k entries)",
)
WRITE: Final = Policy(
    "write",
    "an append: 5-15 us with durability none/flush/group (a write to the page cache; "
    "the group syncer syncs in its own thread), 0.2-10 ms with fsync, which runs in a "
    f"thread; one carrying more than {INLINE_WRITE_BYTES // 1024} KiB of text (or too many "
    "values to count cheaply) runs in a thread too (a 16 MB message: ~100 ms to encode and "
    "write)",
    _small_args,
)
WRITE_MESSAGE: Final = Policy("write", WRITE.doc, _small_message)
_BULK_DOC: Final = (
    f"builds an object per entry of the branch or tree: inline up to "
    f"{BULK_INLINE_ENTRIES} entries, else in a thread, {_chunked.CHUNK} entries at a time "
    "with the GIL released in between, so the loop runs meanwhile (100k entries: "
    "get_branch ~10 ms, get_tree ~0.2 s)"
)
BULK_BRANCH: Final = Policy("bulk", _BULK_DOC, _small, worker=_chunked.get_branch)
BULK_TREE: Final = Policy("bulk", _BULK_DOC, _small, worker=_chunked.get_tree)
CONTEXT: Final = Policy(
    "context",
    "inline when the session's cached context only needs the entries appended since "
    f"(2-3 us a turn, 24.5k messages) or the session has at most {BULK_INLINE_ENTRIES} "
    "entries; else a first build, a rebuild after a leaf move or "
    "compaction, or entry transforms run in a thread, the branch read "
    f"{_chunked.CHUNK} entries at a time (a cold build: 8 ms at 10k entries, 34 ms at 100k)",
    attempt=_cached_context,
    worker=_chunked.build_context,
)
CLOSE: Final = Policy(
    "close",
    "in memory: inline (15 us); a file: in a thread (a sync, and the persisted index of "
    "a large file: 3 ms at 10k entries, 35-70 ms at 100k); never dropped by a "
    "cancellation (shielded), so a cancelled ``async with`` still closes",
    shield=True,
)

SESSION_CALLS: Final[Mapping[str, Policy]] = {
    "append_message": WRITE_MESSAGE,
    "append_thinking_level_change": WRITE,
    "append_model_change": WRITE,
    "append_active_tools_change": WRITE,
    "append_compaction": WRITE,
    "append_custom_entry": WRITE,
    "append_custom_message_entry": WRITE,
    "append_label": WRITE,
    "append_session_info": WRITE,
    "move_to": WRITE,
    "get_entry": READ,
    "get_leaf_id": READ,
    "get_branch": BULK_BRANCH,
    "get_label": READ,
    "get_session_name": READ,
    "get_session_stats": READ,
    "get_tree": BULK_TREE,
    "merge_context_build_options": LOCAL,
    "build_context": CONTEXT,
    "clear_context_cache": LOCAL,
    "search": Policy(
        "search",
        "always in a thread: it reads the whole session (its file, or its document) and "
        "matches it in the engine with the GIL released",
    ),
    "close": CLOSE,
}
"""Every public method of :class:`~sessiontree.Session` and how its twin runs."""


REPO_CHEAP: Final = Policy(
    "repo_cheap",
    "an in-memory repository's create, open or delete: inline (about 30 us); on any other "
    "repository in a thread (a file create with its directory sync: 1-12 ms)",
)
REPO_HEAVY: Final = Policy(
    "repo_heavy",
    "always in a thread: listing reads a directory (and the files that changed), a fork "
    "copies a session",
)

REPO_CALLS: Final[Mapping[str, Policy]] = {
    "create": REPO_CHEAP,
    "open": REPO_CHEAP,
    "list": REPO_HEAVY,
    "delete": REPO_CHEAP,
    "fork": REPO_HEAVY,
    "search": REPO_HEAVY,
    "read_entry": REPO_HEAVY,
}
"""Every public method of :class:`~sessiontree.SessionRepo` and how its twin runs."""


def inline_kinds(storage: SessionStorage) -> frozenset[str]:
    """The kinds of :data:`SESSION_CALLS` that may run inline on ``storage``.

    Only the engine-backed storages are known to answer from memory; any other storage
    gets only ``local`` calls inline.
    """
    from ..storage import InMemorySessionStorage, JsonlSessionStorage

    if isinstance(storage, InMemorySessionStorage):
        return frozenset({"local", "read", "write", "bulk", "context", "close"})
    if isinstance(storage, JsonlSessionStorage):
        kinds = {"local", "read", "bulk", "context"}
        if storage.readonly or storage.durability != "fsync":
            kinds.add("write")
        return frozenset(kinds)
    return frozenset({"local"})


def repo_inline(repo: SessionRepo, policy: Policy) -> bool:
    """Whether calls of ``policy`` run inline on ``repo``."""
    from ..repo import InMemorySessionRepo

    return policy is REPO_CHEAP and isinstance(repo, InMemorySessionRepo)
