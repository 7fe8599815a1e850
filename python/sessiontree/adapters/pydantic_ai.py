"""pydantic-ai's ``ConversationStore`` over a sessiontree session, and converters between
its ``ModelMessage`` and sessiontree's messages.

pydantic-ai keeps a conversation as a log of entries, each one message pointing at the
entry before it, plus a record per conversation (its head, branches, usage, revision) —
a tree, whose only backend it ships keeps it in memory. :class:`PydanticAIConversationStore`
keeps it in one sessiontree session: every conversation of the store shares the session's
tree, as pydantic-ai's entries are shared between a conversation and its forks::

    from pydantic_ai import Agent
    from sessiontree import AsyncSessionRepo, JsonlSessionRepo
    from sessiontree.adapters.pydantic_ai import PydanticAIConversationStore

    store = await PydanticAIConversationStore.open(
        AsyncSessionRepo(JsonlSessionRepo("sessions")), "support-bot"
    )
    conversation = await store.load("chat-1") or Conversation(conversation_id="chat-1")
    result = await agent.run("Hello", conversation=conversation)
    await store.save(result)

How pydantic-ai's names map to ours:

- a ``ConversationEntry`` is an entry with the same ``id`` and ``parent_id``: a message
  entry when one of our messages holds the ``ModelMessage`` exactly
  (:func:`model_message_to_message`), else a custom entry of type
  :data:`MESSAGE_CUSTOM_TYPE` holding the message's JSON;
- a ``ConversationRecord`` is a custom entry of type :data:`RECORD_CUSTOM_TYPE` holding the
  record's JSON, hung under the conversation's head entry (so ``sessiontree tree`` shows
  where each conversation ends); the newest one of a conversation is its record. A
  ``delete_record`` appends one of type :data:`DELETED_CUSTOM_TYPE`;
- ``read_history`` is one walk of the engine (``get_path_to_root``).

The session is append-only: ``delete`` makes a conversation unloadable and unlisted, but
its entries stay in the file (pydantic-ai lets a backend say so). Every store object on
one session shares, in this process, its writer and an index of the records and the JSON
of the messages written or read, in memory; a save (the new entries and the record) is
checked whole before any of it is written, and a store loads whatever it saved. A bad
argument (text UTF-8 cannot encode among them) raises
:class:`StoreArgumentError`: pydantic-ai's ``UserError`` and sessiontree's
``invalid_argument``.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal

from .._util import check_text, iso_to_datetime, iso_to_ms, ms_to_iso, now_iso
from ..errors import InvalidArgumentError, SessionError
from ..model.entries import CustomEntry, MessageEntry, SessionTreeEntry
from ..model.messages import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_from_dict,
)
from ..model.types import SessionContext
from ._common import (
    DEFAULT_LOCK_TIMEOUT,
    SharedSession,
    append_batch,
    as_async_session,
    check_entries,
    import_framework,
    in_lane,
    limits_of,
    paused_gc,
    residual_of,
    same_json,
    to_json,
)

import_framework("pydantic_ai", "pydantic-ai", "sessiontree.adapters.pydantic_ai")

from pydantic import TypeAdapter, ValidationError  # noqa: E402
from pydantic_ai.conversation_store import (  # noqa: E402
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.exceptions import UserError  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_core import PydanticSerializationError  # noqa: E402

if TYPE_CHECKING:
    from ..aio import AsyncSession, AsyncSessionRepo
    from ..repo import SessionRepo
    from ..session import Session
    from ..storage import Limits, SessionStorage

__all__ = [
    "DELETED_CUSTOM_TYPE",
    "MESSAGE_CUSTOM_TYPE",
    "RECORD_CUSTOM_TYPE",
    "RESIDUAL_KEY",
    "PydanticAIConversationStore",
    "StoreArgumentError",
    "context_to_model_messages",
    "message_to_model_message",
    "model_message_to_message",
]

MESSAGE_CUSTOM_TYPE: Final = "pydantic_ai.message"
"""The ``custom_type`` of the entries holding a ``ModelMessage`` no message holds exactly."""
RECORD_CUSTOM_TYPE: Final = "pydantic_ai.record"
"""The ``custom_type`` of the entries holding a ``ConversationRecord``."""
DELETED_CUSTOM_TYPE: Final = "pydantic_ai.deleted"
"""The ``custom_type`` of the entries that delete a conversation's record."""
RESIDUAL_KEY: Final = "pydantic_ai"
"""The extra message field holding what of the ``ModelMessage`` the message does not."""

_UNKNOWN: Final = "unknown"
_MESSAGE: TypeAdapter[Any] = TypeAdapter(ModelMessage)
_RECORD: TypeAdapter[ConversationRecord] = TypeAdapter(ConversationRecord)
_FINISH_TO_STOP: Final = {"length": "length", "error": "error", "tool_call": "tool_use"}
_MAPPED_PARTS: Final = frozenset({"text", "thinking", "tool-call"})


# ------------------------------------------------------------ ModelMessage -> message


def _ms(iso: Any) -> int | None:
    if not isinstance(iso, str):
        return None
    try:
        return iso_to_ms(iso)
    except SessionError:
        return None


def _request(d: dict[str, Any]) -> dict[str, Any] | None:
    parts = d["parts"]
    for n, part in enumerate(parts):
        kind = part.get("part_kind")
        if kind == "user-prompt":
            content = part.get("content")
            if isinstance(content, str):
                ours: Any = content
            elif isinstance(content, list) and all(isinstance(c, str) for c in content):
                ours = [{"type": "text", "text": c} for c in content]
            else:
                return None
            rest = [*parts[:n], {**part, "content": None}, *parts[n + 1 :]]
            return {
                "role": "user",
                "content": ours,
                "timestamp": _ms(part.get("timestamp")),
                RESIDUAL_KEY: {**d, "parts": rest},
            }
    for n, part in enumerate(parts):
        if part.get("part_kind") == "tool-return":
            content = part.get("content")
            text, marker = (content, None) if isinstance(content, str) else (json.dumps(content), 1)
            rest = [*parts[:n], {**part, "content": marker}, *parts[n + 1 :]]
            return {
                "role": "tool_result",
                "tool_call_id": part["tool_call_id"],
                "tool_name": part["tool_name"],
                "content": [{"type": "text", "text": text}],
                "is_error": part.get("outcome", "success") != "success",
                "timestamp": _ms(part.get("timestamp")),
                RESIDUAL_KEY: {**d, "parts": rest},
            }
    if len(parts) == 1 and parts[0].get("part_kind") == "compaction":
        part = parts[0]
        if isinstance(part.get("content"), str):
            return {
                "role": "compaction_summary",
                "summary": part["content"],
                "tokens_before": 0,
                "timestamp": None,
                RESIDUAL_KEY: {**d, "parts": [{**part, "content": None}]},
            }
    return None


def _response(d: dict[str, Any]) -> dict[str, Any] | None:
    blocks: list[dict[str, Any]] = []
    rest: list[Any] = []
    for part in d["parts"]:
        kind = part.get("part_kind")
        if kind == "text":
            blocks.append({"type": "text", "text": part["content"]})
            rest.append({**part, "content": None})
        elif kind == "thinking":
            blocks.append({"type": "thinking", "thinking": part["content"]})
            rest.append({**part, "content": None})
        elif kind == "tool-call":
            args = part.get("args")
            if isinstance(args, dict):
                arguments, marker = args, None
            else:
                try:
                    parsed = json.loads(args) if isinstance(args, str) else None
                except ValueError:
                    parsed = None
                arguments, marker = (parsed if isinstance(parsed, dict) else {}), [args]
            blocks.append(
                {
                    "type": "tool_call",
                    "id": part["tool_call_id"],
                    "name": part["tool_name"],
                    "arguments": arguments,
                }
            )
            rest.append({**part, "tool_call_id": None, "tool_name": None, "args": marker})
        else:
            rest.append(part)  # kept whole (native tools, files, compaction, ...)
    usage = d.get("usage") or {}
    n_in, n_out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    has_call = any(b["type"] == "tool_call" for b in blocks)
    stop = _FINISH_TO_STOP.get(d.get("finish_reason") or "", "tool_use" if has_call else "stop")
    return {
        "role": "assistant",
        "content": blocks,
        "provider": d.get("provider_name") or _UNKNOWN,
        "model": d.get("model_name") or _UNKNOWN,
        "usage": {
            "input": n_in,
            "output": n_out,
            "cache_read": usage.get("cache_read_tokens", 0),
            "cache_write": usage.get("cache_write_tokens", 0),
            "total_tokens": n_in + n_out,
        },
        "stop_reason": stop,
        "timestamp": _ms(d.get("timestamp")),
        RESIDUAL_KEY: {**d, "parts": rest},
    }


def model_message_to_message(message: ModelMessage) -> AgentMessage | None:
    """The sessiontree message that holds ``message`` exactly, or ``None`` when none can.

    A ``ModelRequest`` with a user prompt (text) gives a :class:`UserMessage`, one with a
    tool return a :class:`ToolResultMessage`, one holding only a written compaction summary
    a :class:`CompactionSummaryMessage`; a ``ModelResponse`` gives an
    :class:`AssistantMessage` with its text, thinking and tool calls. Whatever else the
    message has (system prompts, other parts, ids, provider details) is kept on ours, so
    :func:`message_to_model_message` gives back an equal message. The mapping is checked:
    a message that would not come back exactly gives ``None``.

    >>> from pydantic_ai.messages import ModelRequest, UserPromptPart
    >>> request = ModelRequest(parts=[UserPromptPart("Hi")])
    >>> ours = model_message_to_message(request)
    >>> ours.content, message_to_model_message(ours) == request
    ('Hi', True)
    """
    d = _MESSAGE.dump_python(message, mode="json")
    fields = _request(d) if d.get("kind") == "request" else _response(d)
    if fields is None:
        return None
    if fields.get("timestamp") is None:
        fields["timestamp"] = 0  # the residual holds pydantic-ai's own timestamps
    try:
        ours = message_from_dict(fields)
    except SessionError:
        return None
    back = _rebuilt(ours)
    if back is None or not same_json(back, d):
        return None
    return ours


# ------------------------------------------------------------ message -> ModelMessage


def _rebuilt(message: AgentMessage) -> dict[str, Any] | None:
    """The ``ModelMessage`` JSON a mapped message came from, or ``None`` if it has none."""
    residual = residual_of(message, RESIDUAL_KEY)
    if not isinstance(residual, dict):
        return None
    parts = list(residual["parts"])
    if isinstance(message, UserMessage):
        n = next(i for i, p in enumerate(parts) if p.get("part_kind") == "user-prompt")
        content = message.content
        text: Any = (
            content
            if isinstance(content, str)
            else [b.text for b in content if isinstance(b, TextContent)]
        )
        parts[n] = {**parts[n], "content": text}
    elif isinstance(message, ToolResultMessage):
        n = next(i for i, p in enumerate(parts) if p.get("part_kind") == "tool-return")
        text = "".join(b.text for b in message.content if isinstance(b, TextContent))
        value = text if parts[n]["content"] is None else json.loads(text)
        parts[n] = {**parts[n], "content": value}
    elif isinstance(message, CompactionSummaryMessage):
        parts[0] = {**parts[0], "content": message.summary}
    elif isinstance(message, AssistantMessage):
        blocks = iter(message.content)
        for n, part in enumerate(parts):
            if part.get("part_kind") not in _MAPPED_PARTS:
                continue
            block = next(blocks)
            if isinstance(block, TextContent):
                parts[n] = {**part, "content": block.text}
            elif isinstance(block, ThinkingContent):
                parts[n] = {**part, "content": block.thinking}
            elif isinstance(block, ToolCall):
                marker = part.get("args")
                parts[n] = {
                    **part,
                    "tool_call_id": block.id,
                    "tool_name": block.name,
                    "args": block.arguments if marker is None else marker[0],
                }
    else:
        return None
    return {**residual, "parts": parts}


def message_to_model_message(message: AgentMessage) -> ModelMessage | None:
    """The ``ModelMessage`` a sessiontree message stands for.

    A message :func:`model_message_to_message` made gives back an equal message. Any other
    message (one written by other sessiontree code) gives the ``ModelMessage`` that says
    the same: a user, custom, compaction-summary or branch-summary message a request with a
    user prompt (a written compaction summary as a ``CompactionPart``), a tool result a
    request with a tool return, an assistant message a response with its text, thinking and
    tool calls. Messages of unknown roles give ``None``.
    """
    rebuilt = _rebuilt(message)
    if rebuilt is not None:
        result: ModelMessage = _MESSAGE.validate_python(rebuilt)
        return result
    when = _when(getattr(message, "timestamp", None))
    if isinstance(message, (UserMessage, CustomMessage)):
        # Text, or the text blocks (a custom message may hold blocks, as pi writes them).
        content = message.content
        prompt: Any = (
            content
            if isinstance(content, str)
            else [b.text for b in content if isinstance(b, TextContent)]
        )
        return ModelRequest(parts=[UserPromptPart(prompt, timestamp=when)])
    if isinstance(message, BranchSummaryMessage):
        return ModelRequest(parts=[UserPromptPart(message.summary, timestamp=when)])
    if isinstance(message, CompactionSummaryMessage):
        return ModelRequest(parts=[CompactionPart(content=message.summary)])
    if isinstance(message, ToolResultMessage):
        text = "".join(b.text for b in message.content if isinstance(b, TextContent))
        return ModelRequest(
            parts=[
                ToolReturnPart(
                    message.tool_name,
                    text,
                    message.tool_call_id,
                    timestamp=when,
                    outcome="failed" if message.is_error else "success",
                )
            ]
        )
    if isinstance(message, AssistantMessage):
        parts: list[Any] = []
        for b in message.content:
            if isinstance(b, TextContent):
                parts.append(TextPart(b.text))
            elif isinstance(b, ThinkingContent):
                parts.append(ThinkingPart(b.thinking, signature=b.signature))
            else:
                parts.append(ToolCallPart(b.name, b.arguments, b.id))
        return ModelResponse(
            parts=parts, model_name=message.model, provider_name=message.provider, timestamp=when
        )
    return None


def _when(ms: Any) -> datetime:
    return iso_to_datetime(ms_to_iso(ms) if isinstance(ms, int) else now_iso())


def context_to_model_messages(
    context: SessionContext | Sequence[AgentMessage],
) -> list[ModelMessage]:
    """A session's context (or any messages) as the ``ModelMessage`` list pydantic-ai runs
    on (``agent.run(message_history=...)``); messages without a counterpart are left out.

    >>> from sessiontree import UserMessage
    >>> [type(m).__name__ for m in context_to_model_messages([UserMessage("Hi")])]
    ['ModelRequest']
    """
    messages = context.messages if isinstance(context, SessionContext) else context
    out = []
    for message in messages:
        converted = message_to_model_message(message)
        if converted is not None:
            out.append(converted)
    return out


# ------------------------------------------------------------------------- the store


class StoreArgumentError(InvalidArgumentError, UserError):
    """A bad argument to :class:`PydanticAIConversationStore`: pydantic-ai's ``UserError``
    (what its stores raise for a usage mistake) that is also sessiontree's
    :class:`~sessiontree.SessionError` with code ``invalid_argument`` (a ``ValueError``),
    the error it comes from as its ``__cause__``. Among them: text UTF-8 cannot encode (a
    lone surrogate) in an id, a conversation id, a scope, a record or a message, which no
    session can hold; a write is refused before anything of it is written.
    """


def _message_json(entry: ConversationEntry) -> bytes:
    """The JSON of an entry's ``ModelMessage``, or ``invalid_argument``."""
    try:
        return _MESSAGE.dump_json(entry.message)
    except PydanticSerializationError as exc:
        raise SessionError(
            "invalid_argument", f"the message of entry {entry.id!r} is not JSON: {exc}"
        ) from exc


def _check_ids(entries: Sequence[ConversationEntry]) -> None:
    for e in entries:
        for name, value in (("an entry id", e.id), ("an entry's parent_id", e.parent_id)):
            if isinstance(value, str):
                check_text(name, value)


def _entry_of(entry: SessionTreeEntry) -> ConversationEntry | None:
    if isinstance(entry, MessageEntry):
        message = message_to_model_message(entry.message)
    elif isinstance(entry, CustomEntry) and entry.custom_type == MESSAGE_CUSTOM_TYPE:
        message = _MESSAGE.validate_python(entry.data)
    else:
        return None
    if message is None:
        return None
    return ConversationEntry(id=entry.id, parent_id=entry.parent_id, message=message)


def _stored(entry: ConversationEntry) -> SessionTreeEntry:
    message = model_message_to_message(entry.message)
    base: dict[str, Any] = {"id": entry.id, "parent_id": entry.parent_id, "timestamp": now_iso()}
    if message is not None:
        return MessageEntry(**base, message=message)
    return CustomEntry(
        **base,
        custom_type=MESSAGE_CUSTOM_TYPE,
        data=_MESSAGE.dump_python(entry.message, mode="json"),
    )


class _Index:
    """What a store knows of its session: conversation id -> the newest record's JSON (or
    ``None`` once deleted), read from the file once; and entry id -> the JSON of its
    ``ModelMessage``, for every entry written or read (entries never change), so a load
    decodes JSON instead of reading and converting each entry again."""

    def __init__(self, storage: SessionStorage) -> None:
        self.records: dict[str, dict[str, Any] | None] = {}
        self.messages: dict[str, bytes] = {}
        # For stores with message_copies="shared": entry id -> the ConversationEntry
        # handed out (built once), and the histories of the last few heads read, so a
        # turn's load converts only what is new.
        self.shared: dict[str, ConversationEntry] = {}
        self.histories: dict[str, list[ConversationEntry]] = {}
        for e in storage.get_entries("custom"):
            if not isinstance(e, CustomEntry):
                continue
            if e.custom_type == RECORD_CUSTOM_TYPE:
                self.records[e.data["conversation_id"]] = e.data
            elif e.custom_type == DELETED_CUSTOM_TYPE:
                self.records[e.data["conversation_id"]] = None

    def entry(self, entry: SessionTreeEntry | ConversationEntry) -> ConversationEntry | None:
        """The ``ConversationEntry`` an entry holds (``None`` for other entries): new
        objects, decoded from the JSON kept of its message (read from the entry the first
        time). A ``ConversationEntry`` whose JSON is kept gives a fresh copy of it."""
        known = self.messages.get(entry.id)
        if known is not None:
            try:
                message = _MESSAGE.validate_json(known)
            except ValidationError:
                # pydantic's JSON parser stops at 200 levels of nesting (a tool's deeply
                # nested return value), where its Python validation, what reading the
                # entry uses, does not: decode with ``json`` and validate that instead.
                message = _MESSAGE.validate_python(json.loads(known))
            return ConversationEntry(id=entry.id, parent_id=entry.parent_id, message=message)
        if isinstance(entry, ConversationEntry):
            return None
        found = _entry_of(entry)
        if found is not None:
            self.messages[entry.id] = _MESSAGE.dump_json(found.message)
        return found

    def tail_history(self, storage: SessionStorage, head_id: str) -> list[ConversationEntry]:
        """The entries up to ``head_id`` for ``message_copies="tail"``: the shared ones
        (:meth:`shared_history`) up to the history's last ``ModelRequest``, fresh copies
        from there on (the messages an agent run changes in place; see the store's
        docs). A new list."""
        history = list(self.shared_history(storage, head_id))
        at = len(history)
        while at > 0:
            at -= 1
            if isinstance(history[at].message, ModelRequest):
                break
        for k in range(at, len(history)):
            fresh = self.entry(history[k])
            if fresh is not None:
                history[k] = fresh
        return history

    def shared_history(self, storage: SessionStorage, head_id: str) -> list[ConversationEntry]:
        """The entries up to ``head_id`` as shared objects (``message_copies="shared"``):
        walked up from the head through the entries already built to the nearest history
        kept, so a turn builds only its new entries; a first read takes the path in one
        engine walk. The list is the index's: callers copy it."""
        shared = self.shared
        histories = self.histories
        new: list[ConversationEntry] = []
        base: list[ConversationEntry] = []
        entry_id: str | None = head_id
        while entry_id is not None:
            kept = histories.get(entry_id)
            if kept is not None:
                base = kept
                break
            found = shared.get(entry_id)
            if found is None:
                # Not built yet (a first read): the whole path, in one walk.
                base, new = [], []
                for entry in reversed(storage.get_path_to_root(head_id)):
                    made = shared.get(entry.id)
                    if made is None:
                        made = self.entry(entry)
                        if made is None:
                            continue
                        shared[entry.id] = made
                    new.append(made)
                break
            new.append(found)
            entry_id = found.parent_id
        new.reverse()
        history = [*base, *new] if new else base
        if head_id not in histories:
            if len(histories) >= _HISTORIES_KEPT:
                del histories[next(iter(histories))]
            histories[head_id] = history
        return history


# How many histories (by head) an index keeps for shared stores: a store's conversations
# each have one head at a time.
_HISTORIES_KEPT: Final = 16


# The index of each session, shared by every store over it (so a record one store writes
# is the record another one checks a revision against); used under the storage's lock.
_indexes: weakref.WeakKeyDictionary[Session, _Index] = weakref.WeakKeyDictionary()
_indexes_lock = threading.Lock()


def _index_of(session: Session) -> _Index:
    with _indexes_lock:
        index = _indexes.get(session)
    if index is None:
        index = _Index(session.storage)
        with _indexes_lock:
            index = _indexes.setdefault(session, index)
    return index


class PydanticAIConversationStore(ConversationStore):
    """A pydantic-ai ``ConversationStore`` keeping every conversation in one sessiontree
    session (see the module's docs for the mapping).

    Stores opened on one session (:meth:`open`) in this process share it, and its index
    of records, so a revision one of them writes is the one the others check against.

    Args:
        session: the store's session (an :class:`~sessiontree.AsyncSession`; a sync
            :class:`~sessiontree.Session` is wrapped). ``close()`` closes it.
        message_copies: what ``read_history`` (so ``load``) hands out:

            - ``"tail"`` (the default): the history's messages up to its last
              ``ModelRequest`` are the store's own objects, built once (from the JSON
              kept of each message, never the objects a save was given) and handed out
              again by later loads; from the last request on they are new objects each
              load. An agent run changes in place only that tail of the history it is
              given (pydantic-ai 2.68 fills ``timestamp``/``run_id``/``conversation_id``
              and appends capability-load and tool-reveal parts on the history's last
              request, its "persisted tail", and nothing older; see docs/adapters.md),
              so a turn's load costs what the tail is long, not the history: flat.
              Code of yours that changes an older loaded message in place must copy it
              first, or later loads in this process return the change (the file never
              changes).
            - ``"fresh"``: new message objects each load, every one decoded from its
              JSON, as pydantic-ai's ``InMemoryConversationStore`` hands out deep copies
              (about 12 µs a message: a load costs what the history is long).
            - ``"shared"``: the same objects every time, the tail too (and those a save
              was given kept as they are): read-only; an agent run that changes the
              tail's request changes what later loads return.
    """

    def __init__(
        self,
        session: AsyncSession | Session,
        *,
        message_copies: Literal["tail", "fresh", "shared"] = "tail",
    ) -> None:
        if message_copies not in ("tail", "fresh", "shared"):
            raise SessionError(
                "invalid_argument", "message_copies must be 'tail', 'fresh' or 'shared'"
            )
        self._copies = message_copies
        self._shared_messages = message_copies == "shared"
        self._session = as_async_session(session)
        # The registry hold when opened by ``open`` (else ``close`` closes the session).
        self._shared: SharedSession | None = None
        self._limits: Limits | None = None
        self._closed = False

    @classmethod
    async def open(
        cls,
        repo: AsyncSessionRepo | SessionRepo,
        store_id: str,
        *,
        cwd: str | None = None,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        message_copies: Literal["tail", "fresh", "shared"] = "tail",
    ) -> PydanticAIConversationStore:
        """The store kept in session ``store_id`` of ``repo`` (an ``AsyncSessionRepo`` or
        any ``SessionRepo``), created if it does not exist. Stores opened on one session
        in this process share its writer; while another process writes it, this waits up
        to ``lock_timeout`` seconds, then raises ``locked``. ``message_copies``: see the
        class."""
        shared = await SharedSession.acquire(
            repo,
            store_id,
            create={"cwd": cwd, "name": "pydantic-ai store"},
            lock_timeout=lock_timeout,
        )
        self = cls(shared.session, message_copies=message_copies)
        self._shared = shared
        self._limits = limits_of(repo)
        return self

    @property
    def session(self) -> AsyncSession:
        """The sessiontree session behind the store."""
        return self._session

    async def _run(self, fn: Any, /, **args: Any) -> Any:
        """``fn(storage, index, **args)`` in the session's lane, under the storage's atomic
        lock. Every ``str`` argument is checked first (text UTF-8 cannot encode is refused),
        and an ``invalid_argument`` error, from that or from the session, is raised as a
        :class:`StoreArgumentError`."""

        def call() -> Any:
            storage = self._session.storage
            with storage.atomic():
                return fn(storage, _index_of(self._session.session), **args)

        if self._closed:
            raise SessionError("closed", "the store is closed")
        try:
            for name, value in args.items():
                if isinstance(value, str):
                    check_text(name, value)
            return await in_lane(self._session, call)
        except SessionError as exc:
            if exc.code != "invalid_argument" or isinstance(exc, StoreArgumentError):
                raise
            raise StoreArgumentError(exc.code, exc.message) from exc

    # -- the five primitives -----------------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """The conversation's newest record, or ``None``."""

        def read(storage: SessionStorage, index: _Index, conversation_id: str) -> Any:
            data = index.records.get(conversation_id)
            return None if data is None else _RECORD.validate_python(data)

        record: ConversationRecord | None = await self._run(read, conversation_id=conversation_id)
        return record

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        """The records (of ``scope``), newest ``updated_at`` first, at most ``limit``."""

        def read(storage: SessionStorage, index: _Index, scope: str | None) -> Any:
            records = [
                _RECORD.validate_python(d)
                for d in index.records.values()
                if d is not None and (scope is None or d.get("scope") == scope)
            ]
            records.sort(key=lambda r: r.updated_at, reverse=True)
            return records[:limit]

        records: list[ConversationRecord] = await self._run(read, scope=scope)
        return records

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Appends the new entries, then the record, unless the stored revision is not
        ``expected_revision`` (``ConversationConflict``, nothing written) or something to
        write is not JSON sessiontree can hold (:class:`StoreArgumentError`, nothing
        written)."""

        limits = self._limits

        def write(storage: SessionStorage, index: _Index) -> None:
            data = _RECORD.dump_python(record, mode="json")
            stored = [_stored(e) for e in new_entries]
            # Checked before anything is written, so a bad one leaves no entry behind.
            to_json(data, "the record")
            _check_ids(new_entries)
            messages = [_message_json(e) for e in new_entries]
            current = index.records.get(record.conversation_id)
            if (current["revision"] if current is not None else None) != expected_revision:
                raise ConversationConflict(record.conversation_id)
            new_ids = {e.id for e in stored}
            head = record.head_id
            if head is not None and head not in new_ids and storage.get_entry(head) is None:
                raise ConversationConflict(record.conversation_id)
            new = [
                (e, message)
                for e, message in zip(stored, messages, strict=True)
                if storage.get_entry(e.id) is None
            ]
            record_entry = CustomEntry(
                id=storage.create_entry_id(),
                parent_id=head,
                timestamp=now_iso(),
                custom_type=RECORD_CUSTOM_TYPE,
                data=data,
            )
            # All or nothing: the entries and the record are one batch, every entry checked
            # (the engine's checks, the repository's limits) before one write. A storage
            # that cannot: tried on a scratch session first, then written with no call
            # between; the record is the commit there (entries written before a failing
            # record, an I/O error, are in no conversation's history).
            batch = [*(e for e, _ in new), record_entry]
            if not append_batch(self._session.session, batch):
                check_entries(limits, batch)
                for e in batch:
                    storage.append_entry(e)
            for e, message in new:
                index.messages[e.id] = message
            if self._shared_messages:
                written = {e.id for e, _ in new}
                for given in new_entries:
                    if given.id in written:
                        index.shared[given.id] = given
            elif self._copies == "tail":
                # The store's own objects, decoded from the JSON just kept, never the ones
                # it was given: so the next load walks up to them, not the whole path.
                for e, _ in new:
                    made = index.entry(e)
                    if made is not None:
                        index.shared[e.id] = made
            index.records[record.conversation_id] = data

        await self._run(write)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Appends a deletion of the conversation's record (its entries stay in the file)."""

        def delete(
            storage: SessionStorage, index: _Index, conversation_id: str, expected_revision: str
        ) -> None:
            current = index.records.get(conversation_id)
            if current is None or current["revision"] != expected_revision:
                raise ConversationConflict(conversation_id)
            storage.append_entry(
                CustomEntry(
                    id=storage.create_entry_id(),
                    parent_id=current.get("head_id"),
                    timestamp=now_iso(),
                    custom_type=DELETED_CUSTOM_TYPE,
                    data={"conversation_id": conversation_id},
                )
            )
            index.records[conversation_id] = None

        await self._run(
            delete, conversation_id=conversation_id, expected_revision=expected_revision
        )

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id (``KeyError`` if there is none)."""

        def read(storage: SessionStorage, index: _Index, entry_id: str) -> Any:
            entry = storage.get_entry(entry_id)
            found = None if entry is None else index.entry(entry)
            if found is None:
                raise KeyError(entry_id)
            return found

        entry: ConversationEntry = await self._run(read, entry_id=entry_id)
        return entry

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        """The entries from the first up to ``head_id`` (the last ``limit``), in one walk
        of the engine (``get_path_to_root``)."""

        def read(storage: SessionStorage, index: _Index, head_id: str | None) -> Any:
            if head_id is None:
                return []
            if storage.get_entry(head_id) is None:
                raise KeyError(head_id)
            path = storage.get_path_to_root(head_id)
            if limit is not None:
                path = path[max(0, len(path) - limit) :]
            with paused_gc():  # a message's objects each: see paused_gc
                return [e for e in map(index.entry, path) if e is not None]

        def read_kept(
            storage: SessionStorage, index: _Index, head_id: str | None, tail: bool
        ) -> Any:
            # The history from the index's kept objects: all shared, or ("tail") fresh
            # copies from the last request on.
            if head_id is None:
                return []
            known = head_id in index.shared or head_id in index.histories
            if not known and storage.get_entry(head_id) is None:
                raise KeyError(head_id)
            with paused_gc():
                history = (index.tail_history if tail else index.shared_history)(storage, head_id)
            if limit is not None:
                return history[max(0, len(history) - limit) :] if limit else []
            return history if tail else list(history)

        if self._copies != "fresh":
            shared: list[ConversationEntry] = await self._run(
                read_kept, head_id=head_id, tail=not self._shared_messages
            )
            return shared

        history: list[ConversationEntry] = await self._run(read, head_id=head_id)
        return history

    async def close(self) -> None:
        """Closes the store (idempotent): the session closes with the last store sharing it
        (the only one, when the store was made from a session)."""
        if self._closed:
            return
        self._closed = True
        if self._shared is not None:
            await self._shared.release()
        else:
            await self._session.close()

    def __repr__(self) -> str:
        return f"<PydanticAIConversationStore over {self._session!r}>"
