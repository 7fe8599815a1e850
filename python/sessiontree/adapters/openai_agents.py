"""The OpenAI Agents SDK's ``Session`` over a sessiontree session.

:class:`OpenAIAgentsSession` satisfies the SDK's ``Session`` protocol (``session_id``,
``session_settings``, ``get_items``, ``add_items``, ``pop_item``, ``clear_session``), so a
``Runner`` keeps its history in a sessiontree file::

    from agents import Agent, Runner
    from sessiontree import AsyncSessionRepo, JsonlSessionRepo
    from sessiontree.adapters.openai_agents import OpenAIAgentsSession

    repo = AsyncSessionRepo(JsonlSessionRepo("sessions"))
    session = await OpenAIAgentsSession.open(repo, "support-42")
    result = await Runner.run(agent, "Hello", session=session)

Each response input item is one entry. The items our messages can hold become message
entries (a user message, an assistant message with its text, a reasoning item as thinking,
a function call as a tool call, a function call output as a tool result), with whatever
else the item carries kept beside the message, so the item comes back exactly; any other
item (hosted tool calls, compaction items, system messages, ...) is a custom entry of type
:data:`ITEM_CUSTOM_TYPE` holding the item's JSON as it is.

The tree is the point: :meth:`~OpenAIAgentsSession.pop_item` and
:meth:`~OpenAIAgentsSession.clear_session` move the leaf instead of deleting, so what they
remove from the SDK's view stays in the file, on a branch that
:meth:`~OpenAIAgentsSession.list_branches` lists and :meth:`~OpenAIAgentsSession.branch`
resumes. A retry that pops the last turn, and the SDK's compaction session (which clears the
session and adds the compacted items, or, after a turn, replaces the stored suffix the model
saw through its ``_get_compaction_snapshot`` hook), make branches instead of losing history.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, cast

from .. import _core
from .._util import now_iso, now_ms, uuid7
from ..errors import ClosedError, DuplicateIdError, InvalidArgumentError, SessionError
from ..model.entries import CompactionEntry, CustomEntry, MessageEntry, SessionTreeEntry
from ..model.messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_from_dict,
    message_to_dict,
)
from ..repo import is_valid_session_id
from ._common import (
    DEFAULT_LOCK_TIMEOUT,
    INLINE_BATCH_BYTES,
    INLINE_BATCH_ITEMS,
    SharedSession,
    append_chain,
    as_async_session,
    batch_storage,
    check_writes,
    import_framework,
    in_lane,
    json_copy,
    limits_of,
    mapped_id,
    paused_gc,
    residual_of,
    runs_inline,
    to_json,
)

import_framework("agents", "openai-agents", "sessiontree.adapters.openai_agents")

from agents.memory.session_settings import (  # noqa: E402
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

try:  # the compaction session's optional hook (openai-agents 0.24; private to the SDK)
    from agents.memory.session import _CompactionSnapshot
except ImportError:  # pragma: no cover - an SDK without it never asks for a snapshot
    _CompactionSnapshot = None  # type: ignore[assignment, misc]

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

    from ..aio import AsyncSession, AsyncSessionRepo
    from ..repo import SessionRepo
    from ..session import Session
    from ..storage import Limits
else:
    TResponseInputItem = dict

T = TypeVar("T")

__all__ = [
    "ID_PREFIX",
    "ITEM_CUSTOM_TYPE",
    "METADATA_KEY",
    "RESIDUAL_KEY",
    "Branch",
    "ItemEntry",
    "ItemTypeError",
    "OpenAIAgentsSession",
    "SessionClosedError",
    "entry_to_items",
    "item_to_message",
    "message_to_items",
    "session_id_for",
    "set_kept_bytes",
]

ITEM_CUSTOM_TYPE: Final = "openai_agents.item"
"""The ``custom_type`` of the entries that hold an item no message holds exactly."""

RESIDUAL_KEY: Final = "openai_agents"
"""The extra message field holding what of the item the message does not (see
``sessiontree.adapters._common``)."""

METADATA_KEY: Final = "openai_agents"
"""The header metadata key holding ``{"session_id": <the SDK's session id>}``."""

ID_PREFIX: Final = "openai-agents-"
"""How the sessiontree ids of the SDK ids that are not safe file names begin (see
:func:`session_id_for`)."""


class SessionClosedError(ClosedError, RuntimeError):
    """A call on an :class:`OpenAIAgentsSession` after its ``close()``: sessiontree's
    ``closed`` error that is also the ``RuntimeError`` the SDK's own sessions raise."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.message))


class ItemTypeError(InvalidArgumentError, TypeError):
    """An item :meth:`OpenAIAgentsSession.add_items` cannot store (not a dict, or not
    JSON): sessiontree's ``invalid_argument`` (a ``ValueError``) that is also the
    ``TypeError`` the SDK's own sessions raise (``json.dumps``'s). Nothing of the batch is
    written then."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.message))


def session_id_for(session_id: str) -> str:
    """The sessiontree session id (file name, database key) the SDK's ``session_id`` is
    kept under: the id itself when it is a safe file name
    (:func:`~sessiontree.is_valid_session_id`) not starting with :data:`ID_PREFIX`; else
    :data:`ID_PREFIX` and the first 32 hex digits of the SHA-256 of its UTF-8. So any
    string works as a session id (``user:42``, ``tenant/user``, ``alice@example.com``,
    a 500-character id), the same id gives the same session in every process, and a plain
    id stays readable in ``sessiontree ls``. The SDK's id is kept in the header's metadata
    (:data:`METADATA_KEY`) and checked on open, so two ids never share a session.

    >>> session_id_for("support-42"), session_id_for("user:42")
    ('support-42', 'openai-agents-ea3fd43be1e57d62e163dae19fc740bd')
    """
    if not isinstance(session_id, str):
        raise SessionError(
            "invalid_argument", f"a session id must be a str, not {type(session_id).__name__}"
        )
    if is_valid_session_id(session_id) and not session_id.startswith(ID_PREFIX):
        return session_id
    return mapped_id(ID_PREFIX, [session_id])


def _sdk_id_of(session: Session) -> str | None:
    """The SDK's session id kept in the header's metadata, if any."""
    metadata = session.storage.get_metadata().metadata
    kept = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    sdk_id = kept.get("session_id") if isinstance(kept, dict) else None
    return sdk_id if isinstance(sdk_id, str) else None


def _verifier(session_id: str) -> Callable[[Session], None]:
    def verify(session: Session) -> None:
        kept = _sdk_id_of(session)
        if kept is not None and kept != session_id:
            raise SessionError(
                "exists",
                f"session {session.id!r} holds SDK session {kept!r}, not {session_id!r}",
            )

    return verify


DEFAULT_PROVIDER: Final = "openai"
DEFAULT_MODEL: Final = "unknown"
"""Items do not say which model wrote them; assistant messages need a provider and model."""

_DATA_URL_PREFIX: Final = "data:"
_BASE64_MARK: Final = ";base64,"
# How a function call's ``arguments`` string is rebuilt from the parsed object: the
# residual holds one of these markers, or the original string when neither encoding
# reproduces it.
_ARGS_DEFAULT: Final = None
_ARGS_COMPACT: Final = 1


# ------------------------------------------------------------------ item -> message


def _kind(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind in ("function_call", "function_call_output", "reasoning"):
        return str(kind)
    if kind in (None, "message"):
        role = item.get("role")
        if role in ("user", "assistant"):
            return str(role)
    return None


def _input_blocks(content: list[Any]) -> tuple[list[dict[str, Any]], list[Any]] | None:
    """Our blocks and the residual blocks for a list of ``input_text``/``input_image``."""
    blocks: list[dict[str, Any]] = []
    residual: list[Any] = []
    for b in content:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "input_text" and isinstance(b.get("text"), str):
            blocks.append({"type": "text", "text": b["text"]})
            residual.append({**b, "text": None})
        elif kind == "input_image" and isinstance(b.get("image_url"), str):
            url: str = b["image_url"]
            mime, mark, data = url.partition(_BASE64_MARK)
            if not url.startswith(_DATA_URL_PREFIX) or not mark:
                return None
            blocks.append(
                {"type": "image", "data": data, "mime_type": mime[len(_DATA_URL_PREFIX) :]}
            )
            residual.append({**b, "image_url": None})
        else:
            return None
    return blocks, residual


def _user(item: dict[str, Any], names: dict[str, str], provider: str, model: str) -> Any:
    content = item.get("content")
    if isinstance(content, str):
        return {"role": "user", "content": content}, {**item, "content": None}
    if not isinstance(content, list):
        return None
    mapped = _input_blocks(content)
    if mapped is None:
        return None
    return {"role": "user", "content": mapped[0]}, {**item, "content": mapped[1]}


def _assistant(item: dict[str, Any], names: dict[str, str], provider: str, model: str) -> Any:
    content = item.get("content")
    residual: Any
    if isinstance(content, str):
        blocks = [{"type": "text", "text": content}]
        residual = None
    elif isinstance(content, list):
        blocks = []
        residual = []
        for b in content:
            kind = b.get("type") if isinstance(b, dict) else None
            key = "text" if kind == "output_text" else "refusal" if kind == "refusal" else None
            if key is None or not isinstance(b.get(key), str):
                return None
            blocks.append({"type": "text", "text": b[key]})
            residual.append({**b, key: None})
    else:
        return None
    message = {"role": "assistant", "content": blocks, "provider": provider, "model": model}
    return message, {**item, "content": residual}


def _reasoning(item: dict[str, Any], names: dict[str, str], provider: str, model: str) -> Any:
    summary = item.get("summary")
    if not isinstance(summary, list):
        return None
    blocks = []
    residual = []
    for part in summary:
        if not isinstance(part, dict) or not isinstance(part.get("text"), str):
            return None
        blocks.append({"type": "thinking", "thinking": part["text"]})
        residual.append({**part, "text": None})
    message = {"role": "assistant", "content": blocks, "provider": provider, "model": model}
    return message, {**item, "summary": residual}


def _function_call(item: dict[str, Any], names: dict[str, str], provider: str, model: str) -> Any:
    call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
    if not (isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, str)):
        return None
    try:
        parsed = json.loads(arguments)
    except ValueError:
        parsed = None
    marker: Any
    if not isinstance(parsed, dict):
        parsed, marker = {}, arguments
    elif json.dumps(parsed, ensure_ascii=False) == arguments:
        marker = _ARGS_DEFAULT
    elif json.dumps(parsed, ensure_ascii=False, separators=(",", ":")) == arguments:
        marker = _ARGS_COMPACT
    else:
        marker = arguments
    block = {"type": "tool_call", "id": call_id, "name": name, "arguments": parsed}
    message = {
        "role": "assistant",
        "content": [block],
        "provider": provider,
        "model": model,
        "stop_reason": "tool_use",
    }
    return message, {**item, "call_id": None, "name": None, "arguments": marker}


def _function_call_output(
    item: dict[str, Any], names: dict[str, str], provider: str, model: str
) -> Any:
    call_id, output = item.get("call_id"), item.get("output")
    if not isinstance(call_id, str):
        return None
    residual: Any
    if isinstance(output, str):
        blocks: list[dict[str, Any]] = [{"type": "text", "text": output}]
        residual = None
    elif isinstance(output, list):
        mapped = _input_blocks(output)
        if mapped is None:
            return None
        blocks, residual = mapped
    else:
        return None
    message = {
        "role": "tool_result",
        "tool_call_id": call_id,
        "tool_name": names.get(call_id, ""),
        "content": blocks,
    }
    return message, {**item, "call_id": None, "output": residual}


_TO_MESSAGE: Final = {
    "user": _user,
    "assistant": _assistant,
    "reasoning": _reasoning,
    "function_call": _function_call,
    "function_call_output": _function_call_output,
}


def item_to_message(
    item: Any,
    *,
    tool_names: dict[str, str] | None = None,
    provider: str = DEFAULT_PROVIDER,
    model: str = DEFAULT_MODEL,
) -> AgentMessage | None:
    """The message that holds ``item`` exactly, or ``None`` when no message can.

    Known items (a user or assistant message, a reasoning item, a function call, a function
    call output) map to a :class:`UserMessage`, :class:`AssistantMessage` (text, thinking
    or one tool call) or :class:`ToolResultMessage`; the rest of the item is kept on the
    message, so :func:`message_to_items` gives the item back unchanged. The mapping is
    checked: an item that would not come back exactly gives ``None`` (store it as a custom
    entry).

    Args:
        item: a response input item (a JSON object).
        tool_names: call id -> tool name, to name the tool of a function call output.
        provider: the provider written on assistant messages.
        model: the model written on assistant messages.

    >>> m = item_to_message({"role": "user", "content": "Hi"})
    >>> m.content, message_to_items(m)
    ('Hi', [{'role': 'user', 'content': 'Hi'}])
    """
    try:
        text = json.dumps(item, ensure_ascii=False)
    except (TypeError, ValueError):
        return None
    return _to_message(item, text, tool_names=tool_names, provider=provider, model=model)


def _to_message(
    item: Any,
    text: str,
    *,
    tool_names: dict[str, str] | None,
    provider: str,
    model: str,
) -> AgentMessage | None:
    """:func:`item_to_message` of an item whose JSON (``ensure_ascii=False``) is ``text``."""
    build = _TO_MESSAGE.get(_kind(item) or "")
    if build is None:
        return None
    made = build(item, tool_names or {}, provider, model)
    if made is None:
        return None
    fields, residual = made
    fields["timestamp"] = now_ms()
    fields[RESIDUAL_KEY] = residual
    try:
        message = message_from_dict(fields)
    except SessionError:
        return None
    back = message_to_items(message)
    if len(back) != 1:
        return None
    if type(item) is dict and _same_value(back[0], item):
        return message  # the same JSON, compared without writing it
    try:
        if json.dumps(back[0], ensure_ascii=False) != text:
            return None
    except (TypeError, ValueError):
        return None
    return message


def _same_value(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` (``b`` made of the types ``json.loads`` gives) are the same
    JSON: the same types, key order and values (``-0.0`` is not ``0.0``)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        if len(a) != len(b):
            return False
        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
            if ka != kb or type(ka) is not str or not (va is vb or _same_value(va, vb)):
                return False
        return True
    if kind is list:
        return len(a) == len(b) and all(
            x is y or _same_value(x, y) for x, y in zip(a, b, strict=True)
        )
    if kind is float:
        return repr(a) == repr(b)
    return kind in _SCALARS and bool(a == b)


# ------------------------------------------------------------------ message -> items


def _default_blocks(blocks: Sequence[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, ImageContent):
            url = f"data:{b.mime_type};base64,{b.data}"
            out.append({"type": "input_image", "image_url": url, "detail": "auto"})
        else:
            out.append({"type": "input_text", "text": b.text})
    return out


def _default_items(message: AgentMessage) -> list[Any]:
    """Items for a message no item was mapped to (one written by other sessiontree code)."""
    if isinstance(message, UserMessage):
        content = message.content
        return [
            {
                "role": "user",
                "content": content if isinstance(content, str) else _default_blocks(content),
            }
        ]
    if isinstance(message, ToolResultMessage):
        output: Any = (
            message.content[0].text
            if len(message.content) == 1 and isinstance(message.content[0], TextContent)
            else _default_blocks(message.content)
        )
        return [{"type": "function_call_output", "call_id": message.tool_call_id, "output": output}]
    if isinstance(message, AssistantMessage):
        items: list[Any] = []
        texts: list[dict[str, Any]] = []
        for b in message.content:
            if isinstance(b, TextContent):
                texts.append({"type": "output_text", "text": b.text, "annotations": []})
                continue
            if texts:
                items.append({"type": "message", "role": "assistant", "content": texts})
                texts = []
            if isinstance(b, ThinkingContent):
                items.append(
                    {"type": "reasoning", "summary": [{"type": "summary_text", "text": b.thinking}]}
                )
            else:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": b.id,
                        "name": b.name,
                        "arguments": json.dumps(b.arguments, ensure_ascii=False),
                    }
                )
        if texts:
            items.append({"type": "message", "role": "assistant", "content": texts})
        return items
    return []


def message_to_items(message: AgentMessage) -> list[Any]:
    """The response input items a message stands for.

    A message :func:`item_to_message` made gives back its item exactly. Any other user,
    assistant or tool-result message (one written by other sessiontree code) gives the
    items that say the same: an assistant message's text, thinking and tool calls become
    message, reasoning and function call items. Other messages give none.

    >>> from sessiontree import ToolCall
    >>> message_to_items(AssistantMessage([ToolCall("c1", "add", {"a": 1})], "x", "y"))
    [{'type': 'function_call', 'call_id': 'c1', 'name': 'add', 'arguments': '{"a": 1}'}]
    """
    residual = residual_of(message, RESIDUAL_KEY)
    if isinstance(residual, dict):
        return [_item_from_message_dict(message_to_dict(message), residual)]
    return _default_items(message)


def entry_to_items(entry: SessionTreeEntry) -> list[Any]:
    """The items an entry stands for: its message's, or a custom item entry's item, or
    none for any other entry. The items are the caller's to change."""
    if isinstance(entry, MessageEntry):
        message = entry.message
        residual = residual_of(message, RESIDUAL_KEY)
        if isinstance(residual, dict):
            # Only the residual is shared with the entry: copy it, not the whole item
            # (the message's strings are immutable).
            return [_item_from_message_dict(message_to_dict(message), json_copy(residual))]
        return _default_items(message)
    if isinstance(entry, CustomEntry) and entry.custom_type == ITEM_CUSTOM_TYPE:
        return [json_copy(entry.data)]
    return []


# ------------------------------------------------------------- items from a stored line


def _blocks_from_dicts(blocks: list[Any], residual: list[Any]) -> list[Any]:
    out = []
    for block, rest in zip(blocks, residual, strict=True):
        if block["type"] == "image":
            out.append({**rest, "image_url": f"data:{block['mime_type']};base64,{block['data']}"})
        else:
            out.append({**rest, "text": block["text"]})
    return out


def _item_from_message_dict(message: dict[str, Any], residual: dict[str, Any]) -> Any:
    """The item a mapped message stands for, from the message as a dict (its file form:
    a line just parsed, or ``message_to_dict`` of a message object) and the rest of the
    item kept beside it. The one rule for reading items back, so what the write-side
    check proves exact is what a first read from the file gives
    (``KeyError``/``TypeError``/``ValueError`` when it is not a message this module
    mapped)."""
    item = dict(residual)
    role = message["role"]
    content = message["content"]
    if role == "user":
        rest = residual.get("content")
        item["content"] = content if rest is None else _blocks_from_dicts(content, rest)
    elif role == "tool_result":
        item["call_id"] = message["tool_call_id"]
        rest = residual.get("output")
        item["output"] = (
            "".join(b["text"] for b in content if b["type"] == "text")
            if rest is None
            else _blocks_from_dicts(content, rest)
        )
    elif role == "assistant":
        kind = residual.get("type")
        if kind == "function_call":
            (call,) = content
            if call["type"] != "tool_call":
                raise ValueError("not a tool call")
            marker = residual.get("arguments")
            item["call_id"] = call["id"]
            item["name"] = call["name"]
            item["arguments"] = (
                json.dumps(call["arguments"], ensure_ascii=False)
                if marker is _ARGS_DEFAULT
                else json.dumps(call["arguments"], ensure_ascii=False, separators=(",", ":"))
                if marker == _ARGS_COMPACT
                else marker
            )
        elif kind == "reasoning":
            item["summary"] = [
                {**rest, "text": b["thinking"]}
                for b, rest in zip(content, residual["summary"], strict=True)
                if b["type"] == "thinking"
            ]
        else:
            rest = residual.get("content")
            texts = [b["text"] for b in content if b["type"] == "text"]
            if rest is None:
                item["content"] = texts[0]
            else:
                item["content"] = [
                    {**r, ("refusal" if r.get("type") == "refusal" else "text"): t}
                    for t, r in zip(texts, rest, strict=True)
                ]
    return item


def _items_from_line(line: dict[str, Any]) -> tuple[bool, list[Any]] | None:
    """(whether the entry is an item entry, its items) from its parsed line (the
    sessiontree dialect), or ``None`` when only the entry object can say (a message this
    module did not map, or one of another shape)."""
    kind = line.get("type")
    if kind == "message":
        message = line.get("message")
        if not isinstance(message, dict):
            return None
        residual = message.get(RESIDUAL_KEY)
        if not isinstance(residual, dict):
            return None
        try:
            return True, [_item_from_message_dict(message, residual)]
        except (KeyError, TypeError, ValueError, IndexError):
            return None
    if kind == "custom":
        if line.get("custom_type") != ITEM_CUSTOM_TYPE:
            return False, []
        return (True, [line["data"]]) if "data" in line else None
    return False, []


# ------------------------------------------------------------------ copies of items

_CONTAINERS: Final = (dict, list)

# Fresh copies of pristine items (never handed out): every dict and list new, strings and
# numbers shared (immutable), made in Rust with the cyclic collector paused (its passes
# over the new objects cost several times the copy on long histories).
_copy_one: Final = _core.copy_json
_copy_items: Final = _core.copy_json_items


class _NotPlain(Exception):
    pass


_SCALARS: Final = (str, int, float, bool, type(None))


def _plain_copy(value: Any, depth: int = 0) -> Any:
    """A copy of ``value`` when it is made of exactly the types ``json.loads`` gives
    (``_NotPlain`` otherwise: a tuple, a subclass, a non-str key...), sharing immutables."""
    if depth > 200:
        raise _NotPlain
    kind = type(value)
    if kind is dict:
        out = {}
        for key, inner in value.items():
            if type(key) is not str:
                raise _NotPlain
            t = type(inner)
            out[key] = _plain_copy(inner, depth + 1) if t is dict or t is list else inner
            if t not in _SCALARS and t is not dict and t is not list:
                raise _NotPlain
        return out
    if kind is list:
        out_list = []
        for inner in value:
            t = type(inner)
            if t is dict or t is list:
                out_list.append(_plain_copy(inner, depth + 1))
            elif t in _SCALARS:
                out_list.append(inner)
            else:
                raise _NotPlain
        return out_list
    if kind in _SCALARS:
        return value
    raise _NotPlain


def _pristine(item: Any, text: str) -> Any:
    """What ``json.loads(text)`` gives for ``item`` (its JSON ``text``), made cheaply."""
    try:
        return _plain_copy(item)
    except _NotPlain:
        return json.loads(text)


def _depth(value: Any) -> int:
    """The JSON nesting depth of ``value`` (a scalar: 0)."""
    kind = type(value)
    if kind is dict:
        inner = value.values()
    elif kind is list:
        inner = value
    else:
        return 0
    deepest = 0
    for v in inner:
        if type(v) in _CONTAINERS:
            d = _depth(v)
            if d > deepest:
                deepest = d
    return deepest + 1


# What an entry's line adds around an item: depth (entry, message, residual or content,
# block, arguments) and bytes (ids, timestamps, usage...), with room to spare.
_LINE_DEPTH: Final = 8
_LINE_BYTES: Final = 8192
_DEFAULT_MAX_DEPTH: Final = 128
_DEFAULT_MAX_LINE_BYTES: Final = 256 << 20


def _surely_fits(limits: Limits | None, planned: Sequence[Any], texts: Sequence[str]) -> bool:
    """Whether no entry of the batch can exceed the limits (then the scratch session
    that tries the batch first is not needed): each line holds its item's strings at most
    twice (the message's fields and the residual), in at most 4 bytes a character, and
    nests at most :data:`_LINE_DEPTH` deeper than the item or its call's arguments."""
    max_depth = _DEFAULT_MAX_DEPTH
    max_bytes = _DEFAULT_MAX_LINE_BYTES
    if limits is not None:
        if limits.max_depth is not None:
            max_depth = min(max_depth, limits.max_depth)
        if limits.max_line_bytes is not None:
            max_bytes = limits.max_line_bytes
    for (thing, pristine), text in zip(planned, texts, strict=True):
        if 12 * len(text) + _LINE_BYTES > max_bytes:
            return False
        depth = _depth(pristine)
        if isinstance(thing, AssistantMessage):
            for block in thing.content:
                if isinstance(block, ToolCall):
                    depth = max(depth, 1 + _depth(block.arguments))
        if depth + _LINE_DEPTH > max_depth:
            return False
    return True


# What an entry is, for the view: an item entry, a compaction (the branch is cut there),
# anything else.
_ITEM: Final = 1
_COMPACTION: Final = 2
_OTHER: Final = 0
# What add_items writes inline: INLINE_BATCH_ITEMS, INLINE_BATCH_BYTES (_common). get_items
# of an up-to-date view copies inline whatever the count: the copy holds the GIL throughout
# (Rust), so the lane's thread would keep the event loop waiting as long, after a hop.
_INLINE_ITEMS: Final = INLINE_BATCH_ITEMS
_INLINE_BYTES: Final = INLINE_BATCH_BYTES
# How far a walk up the tree by entry objects goes before the branch is read again.
_WALK_MOST: Final = 256


def _engine_of(storage: Any) -> Any:
    """The engine of an engine-backed storage whose lines are in the sessiontree dialect
    (what :func:`_items_from_line` reads), else ``None``."""
    from ..storage.engine import _EngineStorage

    if not isinstance(storage, _EngineStorage):
        return None
    engine = storage._engine
    return engine if engine.dialect[0] == "sessiontree" else None


class _View:
    """An :class:`OpenAIAgentsSession`'s copy of the current branch: its entries' ids,
    what each is, and their items flattened (pristine: only copies are handed out)."""

    __slots__ = ("codes", "ends", "floor", "ids", "items", "leaf", "ok", "pos")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.ok = False  # whether the view is the branch ending at ``leaf``
        self.leaf: str | None = None
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.codes: list[int] = []
        self.ends: list[int] = []  # items up to and including each entry
        self.items: list[Any] = []
        self.floor = 0  # the position of the compaction the branch is cut at (0: none)

    def push(self, entry_id: str, code: int, items: list[Any]) -> None:
        at = len(self.ids)
        self.ids.append(entry_id)
        self.pos[entry_id] = at
        self.codes.append(code)
        if items:
            self.items.extend(items)
        self.ends.append(len(self.items))
        if code == _COMPACTION:
            self.floor = at

    def push_all(self, ids: list[str], known: dict[str, tuple[int, list[Any]]]) -> None:
        """:meth:`push` of every entry of ``ids`` (their codes and items in ``known``),
        the loop in Rust."""
        if not ids:
            return
        start = len(self.ids)
        self.ids.extend(ids)
        self.pos.update(zip(ids, range(start, start + len(ids)), strict=True))
        last = _core.openai_view_extend(ids, known, self.codes, self.items, self.ends)
        if last is not None:
            self.floor = start + last

    def push_items(self, ids: list[str], items: list[Any]) -> None:
        """:meth:`push` of item entries ``ids``, one item of ``items`` each."""
        start = len(self.ids)
        self.ids.extend(ids)
        self.pos.update(zip(ids, range(start, start + len(ids)), strict=True))
        self.codes.extend([_ITEM] * len(ids))
        count = len(self.items)
        self.items.extend(items)
        self.ends.extend(range(count + 1, count + len(items) + 1))

    def truncate(self, keep: int) -> None:
        """Keeps the first ``keep`` entries."""
        if keep >= len(self.ids):
            return
        if keep == 0:
            ok, leaf = self.ok, self.leaf
            self.reset()
            self.ok, self.leaf = ok, leaf
            return
        pos = self.pos
        for entry_id in self.ids[keep:]:
            del pos[entry_id]
        del self.ids[keep:]
        del self.codes[keep:]
        del self.ends[keep:]
        count = self.ends[-1]
        del self.items[count:]
        if self.floor >= keep:
            self.floor = 0

    def entry_ids(self, first: int) -> list[str]:
        """The entry id of each item from position ``first`` on."""
        out: list[str] = []
        start = 0
        for entry_id, end in zip(self.ids, self.ends, strict=True):
            if end > first and end > start:
                out.extend([entry_id] * (end - max(start, first)))
            start = end
        return out

    def entry_of(self, position: int) -> str:
        """The id of the entry holding item ``position``."""
        return self.ids[bisect.bisect_right(self.ends, position)]


def _is_item_entry(entry: SessionTreeEntry) -> bool:
    if isinstance(entry, CustomEntry):
        return entry.custom_type == ITEM_CUSTOM_TYPE
    return isinstance(entry, MessageEntry) and isinstance(
        entry.message, (UserMessage, AssistantMessage, ToolResultMessage)
    )


# ------------------------------------------------------------------------- session


@dataclass(frozen=True)
class ItemEntry:
    """An item with the id of the entry that holds it (see
    :meth:`OpenAIAgentsSession.get_item_entries`)."""

    entry_id: str
    item: Any


@dataclass(frozen=True)
class Branch:
    """A branch of the session's tree, named by its last item's entry.

    Attributes:
        leaf_id: the entry of the branch's last item; :meth:`OpenAIAgentsSession.branch`
            with ``from_entry=leaf_id`` resumes it.
        item_count: the items on the branch (as :meth:`~OpenAIAgentsSession.get_items`
            would return them there).
        last_item: the branch's last item.
        current: whether the session's leaf is on this branch's last item.
    """

    leaf_id: str
    item_count: int
    last_item: Any
    current: bool


def _effective_limit(limit: int | None) -> int | None:
    """``get_items``' limit as ``SQLiteSession`` reads it (SQLite's ``LIMIT``): a negative
    one means every item (``None``)."""
    return None if limit is not None and limit < 0 else limit


def _check_limit(limit: object) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise SessionError("invalid_argument", f"limit must be an int or None, not {limit!r}")


class OpenAIAgentsSession:
    """An OpenAI Agents SDK ``Session`` whose history is a sessiontree session's branch.

    ``get_items`` returns the items on the current branch (root to leaf, cut at the nearest
    compaction); ``add_items`` appends them under the leaf; ``pop_item`` moves the leaf to
    the parent of the last item; ``clear_session`` moves it before the first entry, so the
    next item starts a new root. Nothing is deleted: every earlier state of the history is
    a branch of the tree (:meth:`list_branches`, :meth:`branch`).

    Open it with :meth:`open` (any string is a session id; see :func:`session_id_for`).
    Every object opened on one session of one repository in this process shares one
    writer, as the SDK's stores let one object per request work on one session; their
    calls take turns, and each of ``add_items`` (the whole batch), ``pop_item``,
    ``clear_session`` and :meth:`branch` is one step no other call comes between. Close
    each object when done (``close()`` or ``async with``): the last one to close releases
    the session, which another process waits for (``lock_timeout``).

    Args:
        session: the sessiontree session (an :class:`~sessiontree.AsyncSession`; a sync
            :class:`~sessiontree.Session` is wrapped). ``close()`` closes it.
        session_settings: the SDK's ``SessionSettings`` (or its dict), whose ``limit``
            is the default of :meth:`get_items`.
        provider: the provider written on assistant messages (items do not say).
        model: the model written on assistant messages.
        item_copies: what ``get_items`` and :meth:`get_item_entries` hand out:
            ``"deep"`` (the default), items that are wholly the caller's, as the SDK's
            ``SQLiteSession`` returns; ``"shared"``, the object's own items (a new list
            of them): read-only, what the ``Runner`` needs (it copies each history item
            before it changes it), so a turn copies nothing of the history; code that
            changes a returned item must ``copy.deepcopy`` it first, or the object's
            later calls return the change.

    The object keeps every item it wrote or read, converted (entries never change), and
    the current branch as it last saw it: a call catches up with what changed since (its
    own appends, another object's, a pop or a branch) and converts only that; the first
    read of a session reads its entries' lines from the engine. Memory: about the size of
    those items as Python objects.
    """

    def __init__(
        self,
        session: AsyncSession | Session,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        provider: str = DEFAULT_PROVIDER,
        model: str = DEFAULT_MODEL,
        item_copies: Literal["deep", "shared"] = "deep",
    ) -> None:
        session = as_async_session(session)
        if not provider or not model:
            raise SessionError("invalid_argument", "provider and model must not be empty")
        if item_copies not in ("deep", "shared"):
            raise SessionError("invalid_argument", "item_copies must be 'deep' or 'shared'")
        self._shared_items = item_copies == "shared"
        self._session = session
        self.session_settings: SessionSettings | None = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self._provider = provider
        self._model = model
        # call id -> tool name, to name the tool of a function call output (the output
        # item does not carry it); filled from every function call this object sees.
        self._tool_names: dict[str, str] = {}
        # Entry id -> (what the entry is, its items): every entry this object wrote or
        # read, converted once. Entries never change, so this is never stale. The items
        # are pristine: never handed out, only copies of them. Objects opened on one
        # session (``open``) share these, and the process keeps them a while after the
        # last one closes (see _Kept).
        self._known: dict[str, tuple[int, list[Any]]] = {}
        self._kept: _Kept | None = None
        # The current branch as this object last saw it, caught up from the leaf on each
        # call (see _sync), so a turn converts only what is new.
        self._view = _View()
        self._sdk_id = _sdk_id_of(session.session) or session.session.id
        self._closed = False
        # The registry hold when opened by ``open`` (else ``close`` closes the session).
        self._shared: SharedSession | None = None
        self._limits: Limits | None = None

    @classmethod
    async def open(
        cls,
        repo: AsyncSessionRepo | SessionRepo,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        provider: str = DEFAULT_PROVIDER,
        model: str = DEFAULT_MODEL,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        item_copies: Literal["deep", "shared"] = "deep",
    ) -> OpenAIAgentsSession:
        """Open the SDK session ``session_id`` of ``repo``, creating it if it does not
        exist (with a new id when ``session_id`` is ``None``).

        Any string is a session id: it is kept under :func:`session_id_for`'s id. Objects
        opened on one session of one repository in this process share its writer (a JSONL
        repository is named by its directory, a PostgreSQL one by its conninfo and schema,
        any other by the repository object). While another process writes the session,
        this waits for it to close the session, up to ``lock_timeout`` seconds, then raises
        ``locked``.

        Raises:
            SessionError: ``invalid_argument`` for an id that is not a ``str`` (or holds a
                lone surrogate); ``locked`` when another process kept the session for
                ``lock_timeout`` seconds; ``exists`` in the (never seen) event of a hash
                collision with another id; what :meth:`~sessiontree.SessionRepo.open`
                raises (``corrupt``...).
        """
        if session_id is None:
            sdk_id = storage_id = uuid7()
        else:
            storage_id = session_id_for(session_id)
            sdk_id = session_id
        shared = await SharedSession.acquire(
            repo,
            storage_id,
            create={"cwd": cwd, "metadata": {METADATA_KEY: {"session_id": sdk_id}}},
            lock_timeout=lock_timeout,
            verify=_verifier(sdk_id),
        )
        try:
            self = cls(
                shared.session,
                session_settings=session_settings,
                provider=provider,
                model=model,
                item_copies=item_copies,
            )
        except BaseException:
            await shared.release()
            raise
        self._sdk_id = sdk_id
        self._shared = shared
        self._limits = limits_of(repo)
        try:
            kept = _Kept.adopt(shared, shared.session.session)
        except BaseException:
            await shared.release()
            raise
        if kept is not None:
            self._kept = kept
            self._known = kept.known
            self._tool_names = kept.tool_names
        return self

    @property
    def session_id(self) -> str:
        """The SDK's ``session_id``: the id given to :meth:`open` (the header's metadata
        keeps it), or the sessiontree session's id."""
        return self._sdk_id

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError("closed", f"session {self._sdk_id!r} is closed")

    async def _in_lane(self, fn: Callable[[Session], T]) -> T:
        """``fn(session)`` in the session's lane, under the storage's atomic lock: one step
        no call of any object sharing the session (or thread using it) comes between."""
        self._check_open()

        def call() -> T:
            session = self._session.session
            with session.storage.atomic():
                return fn(session)

        return await in_lane(self._session, call)

    @property
    def session(self) -> AsyncSession:
        """The sessiontree session behind this SDK session."""
        return self._session

    # -- the SDK's Session protocol ----------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items on the current branch, oldest first; with ``limit``, only the last
        ``limit`` of them (``0`` gives ``[]``; a negative limit gives every item, as
        ``SQLiteSession``'s ``LIMIT`` does and the SDK's own tests expect). ``limit=None`` uses
        ``session_settings.limit``."""
        return await self._items(limit)

    async def get_item_entries(self, limit: int | None = None) -> list[ItemEntry]:
        """Like :meth:`get_items`, each item with the id of its entry (to branch from)."""
        return [ItemEntry(entry_id, item) for entry_id, item in await self._collect(limit)]

    async def _collect(self, limit: int | None) -> list[tuple[str, Any]]:
        self._check_open()
        _check_limit(limit)
        limit = _effective_limit(resolve_session_limit(limit, self.session_settings))
        if limit == 0:
            return []

        def collect() -> list[tuple[str, Any]]:
            session = self._session.session
            with session.storage.atomic():
                view = self._sync(session)
                count = len(view.items)
                first = 0 if limit is None else max(0, count - limit)
                items = view.items[first:]
                ids = view.entry_ids(first)
            # Copied outside the storage's lock: only this session's lane changes the view.
            return list(zip(ids, self._copies(items), strict=True))

        return await in_lane(self._session, collect)

    async def _items(self, limit: int | None) -> list[TResponseInputItem]:
        self._check_open()
        _check_limit(limit)
        limit = _effective_limit(resolve_session_limit(limit, self.session_settings))
        if limit == 0:
            return []

        def collect() -> list[TResponseInputItem]:
            session = self._session.session
            with session.storage.atomic():
                view = self._sync(session)
                count = len(view.items)
                first = 0 if limit is None else max(0, count - limit)
                items = view.items[first:] if first else list(view.items)
            return self._copies(items)

        # Inline (no thread hop) when the view is the branch already: handing it out is a
        # slice, or a copy that holds the GIL throughout wherever it runs.
        view = self._view
        if (
            view.ok
            and runs_inline(self._session, "read")
            and self._session.session.storage.get_leaf_id() == view.leaf
        ):
            return collect()
        return await in_lane(self._session, collect)

    def _copies(self, items: list[Any]) -> list[Any]:
        if self._shared_items:
            return items  # already a new list (a slice of the view's)
        if len(items) > _INLINE_ITEMS:
            # Many new dicts and lists: moved past the young collections after (paused_gc),
            # which would otherwise scan them all at the next allocation.
            with paused_gc():
                return _copy_items(items)
        return _copy_items(items)

    # -- the view of the current branch --------------------------------------------------

    def _sync(self, session: Session) -> _View:
        """The view caught up with the session's leaf: unchanged when the leaf is where the
        view ends (this object's own appends extend it); else walked up from the leaf to
        the nearest entry the view holds, so what another object appended, a pop or a
        branch costs what changed; else (another compaction on the way, a non-engine
        storage's long walk) built again from the branch."""
        view = self._view
        storage = session.storage
        leaf = storage.get_leaf_id()
        if view.ok and leaf == view.leaf:
            return view
        if not (view.ok and self._catch_up(storage, leaf)):
            self._rebuild(session, leaf)
        return view

    def _catch_up(self, storage: Any, leaf: str | None) -> bool:
        view = self._view
        engine = _engine_of(storage)
        new: list[str] = []
        entry_id = leaf
        while entry_id is not None and entry_id not in view.pos:
            if engine is not None:
                idx = engine.lookup(entry_id)
                if idx is None:
                    return False
                kind, _, parent, _, _ = engine.info(idx)
                if kind == "compaction":
                    return False
                new.append(entry_id)
                entry_id = None if parent is None else engine.id_of(parent)
            else:
                if len(new) >= _WALK_MOST:
                    return False
                entry = storage.get_entry(entry_id)
                if entry is None or isinstance(entry, CompactionEntry):
                    return False
                new.append(entry_id)
                entry_id = entry.parent_id
        if entry_id is None:
            view.truncate(0)
        else:
            at = view.pos[entry_id]
            if at < view.floor:
                return False  # above the compaction the view is cut at: not this branch
            view.truncate(at + 1)
        for entry_id in reversed(new):
            code, items = self._known_or_read(storage, engine, entry_id)
            view.push(entry_id, code, items)
        view.leaf = leaf
        return True

    def _rebuild(self, session: Session, leaf: str | None) -> None:
        view = self._view
        view.reset()
        storage = session.storage
        engine = _engine_of(storage)
        known = self._known
        if engine is not None:
            idxs = engine.path_indices(leaf, True)
            if idxs and not known and self._read_first(storage, idxs):
                view.leaf = leaf
                view.ok = True
                return
            ids = [engine.id_of(i) for i in idxs]
            missing = [k for k, entry_id in enumerate(ids) if entry_id not in known]
            if missing:
                self._read_lines(storage, [ids[k] for k in missing], [idxs[k] for k in missing])
            view.push_all(ids, known)
        else:
            for entry in session.get_branch():
                code, items = self._known_entry(entry)
                view.push(entry.id, code, items)
        view.leaf = leaf
        view.ok = True

    def _known_or_read(self, storage: Any, engine: Any, entry_id: str) -> tuple[int, list[Any]]:
        found = self._known.get(entry_id)
        if found is not None:
            return found
        if engine is not None:
            line = engine.get_line(entry_id)
            if line is not None:
                return self._learn(storage, entry_id, _core.json_loads(line))
        entry = storage.get_entry(entry_id)
        if entry is None:
            raise SessionError("not_found", f"entry {entry_id!r} not found")
        return self._known_entry(entry)

    def _read_lines(self, storage: Any, ids: list[str], idxs: list[int]) -> None:
        """Reads and converts the entries ``ids`` (at engine positions ``idxs``) from their
        lines into ``_known``: the first read of a session, in bulk."""
        with paused_gc():
            self._read_lines_now(storage, ids, idxs)

    def _read_lines_now(self, storage: Any, ids: list[str], idxs: list[int]) -> None:
        engine = storage._engine
        # In one pass in Rust: each line read by the engine and converted straight to its
        # items (no bytes object per line, no intermediate tree).
        size, left, _ = _core.openai_read_known(
            engine, idxs, ITEM_CUSTOM_TYPE, RESIDUAL_KEY, self._tool_names, self._known
        )
        if self._kept is not None:
            self._kept.size += size
        if left:
            self._read_left(storage, [ids[k] for k in left], [idxs[k] for k in left])

    def _read_first(self, storage: Any, idxs: list[int]) -> bool:
        """The first read of a session (nothing of it known): its entries ``idxs`` (the
        branch) read into ``_known`` and the view built from them in the same pass.
        False when lines were left to the Python path (read into ``_known`` too; the view
        is then the caller's to build)."""
        view = self._view
        engine = storage._engine
        with paused_gc():
            size, left, last = _core.openai_read_known(
                engine,
                idxs,
                ITEM_CUSTOM_TYPE,
                RESIDUAL_KEY,
                self._tool_names,
                self._known,
                (view.ids, view.codes, view.items, view.ends),
            )
            if self._kept is not None:
                self._kept.size += size
            if left:
                view.reset()
                self._read_left(
                    storage, [engine.id_of(idxs[k]) for k in left], [idxs[k] for k in left]
                )
                return False
            view.pos.update(zip(view.ids, range(len(view.ids)), strict=True))
            if last is not None:
                view.floor = last
        return True

    def _read_left(self, storage: Any, ids: list[str], idxs: list[int]) -> None:
        """Reads into ``_known`` the entries the Rust reader left: each line parsed, then
        its entry object where the dict cannot say."""
        known = self._known
        names = self._tool_names
        loads = _core.json_loads
        from_line = _items_from_line
        for entry_id, raw in zip(ids, storage._engine.lines(idxs), strict=True):
            line = loads(raw)
            made = from_line(line) if type(line) is dict else None
            if made is None:
                self._known_entry_id(storage, entry_id)
                continue
            is_item, items = made
            if not is_item:
                known[entry_id] = (
                    _COMPACTION if line.get("type") == "compaction" else _OTHER,
                    items,
                )
                continue
            known[entry_id] = (_ITEM, items)
            item = items[0]
            if type(item) is dict and item.get("type") == "function_call":
                call_id, name = item.get("call_id"), item.get("name")
                if isinstance(call_id, str) and isinstance(name, str):
                    names[call_id] = name

    def _known_entry_id(self, storage: Any, entry_id: str) -> tuple[int, list[Any]]:
        entry = storage.get_entry(entry_id)
        if entry is None:
            raise SessionError("not_found", f"entry {entry_id!r} not found")
        return self._known_entry(entry)

    def _learn(self, storage: Any, entry_id: str, line: Any) -> tuple[int, list[Any]]:
        """What the entry of this parsed line is and its items, kept in ``_known``."""
        made = _items_from_line(line) if isinstance(line, dict) else None
        if made is None:
            entry = storage.get_entry(entry_id)
            if entry is None:
                raise SessionError("not_found", f"entry {entry_id!r} not found")
            return self._known_entry(entry)
        is_item, items = made
        code = _ITEM if is_item else _COMPACTION if line.get("type") == "compaction" else _OTHER
        self._known[entry_id] = found = (code, items)
        self._learn_tool_names(items)
        return found

    def _known_entry(self, entry: SessionTreeEntry) -> tuple[int, list[Any]]:
        found = self._known.get(entry.id)
        if found is None:
            code = (
                _ITEM
                if _is_item_entry(entry)
                else _COMPACTION
                if isinstance(entry, CompactionEntry)
                else _OTHER
            )
            items = entry_to_items(entry)
            self._known[entry.id] = found = (code, items)
            self._learn_tool_names(items)
        return found

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Appends ``items`` under the leaf, one entry each, as one step.

        All or nothing: every item is checked before anything is written (a dict, JSON,
        and what the engine checks of its entry: text, nesting depth, line size), and the
        batch is appended with no other call between. Should a write still fail part way
        (an I/O error), the leaf is moved back, so the history is what it was before.

        Raises:
            ItemTypeError: an item that is not a dict or not JSON, text UTF-8 cannot
                encode included (``invalid_argument``, also a ``TypeError``, as the SDK's
                sessions raise).
            SessionError: ``invalid_argument`` for a non-list; ``limit_exceeded`` for an
                item deeper or longer than the limits.
            SessionClosedError: after :meth:`close` (also for ``[]``).
        """
        self._check_open()
        if not isinstance(items, list):
            raise SessionError(
                "invalid_argument", f"items must be a list, not {type(items).__name__}"
            )
        if not items:
            return
        # A big batch makes many acyclic objects (messages, pristine items): the
        # collector's passes over them would cost more than the batch (see paused_gc).
        bulk = len(items) > _INLINE_ITEMS
        if bulk:
            with paused_gc():
                lines = self._plan_lines(items)
            if lines is not None:
                await self._in_lane(lambda session: self._write_lines(session, items, *lines))
                return
        with paused_gc() if bulk else contextlib.nullcontext():
            planned, texts = self._plan(items)

        def append_all(session: Session) -> list[str]:
            if bulk:
                with paused_gc():
                    return _append_planned(session, planned)
            return _append_planned(session, planned)

        self._check_fits(planned, texts)

        def write(session: Session) -> None:
            leaf = session.get_leaf_id()
            try:
                ids = append_all(session)
            except BaseException:
                if session.get_leaf_id() != leaf:
                    with contextlib.suppress(Exception):
                        session.move_to(leaf)
                raise
            if self._kept is not None:
                self._kept.size += sum(map(len, texts))
            self._keep_appended(
                leaf,
                ids,
                [p if isinstance(t, AgentMessage) else t.item for t, p in planned],
            )

        if len(planned) <= _INLINE_ITEMS and sum(map(len, texts)) <= _INLINE_BYTES:
            # A turn's few small items: written inline when the session's lane is idle
            # and its storage writes from memory (no thread hop), as AsyncSession does.
            session = self._session
            if runs_inline(session, "write"):
                sync = session.session
                with sync.storage.atomic():
                    write(sync)
                return
        await self._in_lane(write)

    def _plan(self, items: list[Any]) -> tuple[list[_Planned], list[str]]:
        """What each item becomes (a message, or a custom entry) and its JSON: every item
        checked (a dict, JSON) before anything is written."""
        planned: list[_Planned] = []
        texts: list[str] = []
        for n, item in enumerate(items):
            if not isinstance(item, dict):
                raise ItemTypeError(
                    "invalid_argument", f"item {n} must be a dict, not {type(item).__name__}"
                )
            self._learn_tool_names([item])
            thing, text = self._plan_item(n, item)
            planned.append(thing)
            texts.append(text)
        return planned, texts

    def _plan_item(self, n: int, item: dict[str, Any]) -> tuple[_Planned, str]:
        """:meth:`_plan` of item ``n`` (a dict, its tool name learnt)."""
        try:
            text = to_json(item, f"item {n}")
        except SessionError as exc:
            raise ItemTypeError(exc.code, exc.message) from exc.__cause__
        # The item as get_items gives it back (its JSON's value), never handed out.
        pristine = _pristine(item, text)
        message = _to_message(
            pristine,
            text,
            tool_names=self._tool_names,
            provider=self._provider,
            model=self._model,
        )
        return (message if message is not None else _Custom(pristine), pristine), text

    def _plan_lines(self, items: list[Any]) -> tuple[list[str], list[bytes], list[Any]] | None:
        """A big batch's entry lines, written from the items in Rust
        (``_core.openai_item_lines``: no message objects), each item the Python path
        declines mapped and encoded as :meth:`_plan` does: (entry ids, lines, the items as
        ``get_items`` gives them back). ``None`` where the lines cannot go to the engine as
        they are (a storage without batches, another dialect, a context cache to tell).
        Every item is checked before anything is written (``ItemTypeError``)."""
        sync = self._session.session
        storage = batch_storage(sync)
        if storage is None or _engine_of(storage) is None or sync._context_cache is not None:
            return None
        for n, item in enumerate(items):
            if not isinstance(item, dict):
                raise ItemTypeError(
                    "invalid_argument", f"item {n} must be a dict, not {type(item).__name__}"
                )
        ids = _batch_ids(len(items))
        stamp = now_iso()
        lines = _core.openai_item_lines(
            items,
            ids,
            stamp,
            now_ms(),
            self._provider,
            self._model,
            self._tool_names,
            RESIDUAL_KEY,
        )
        if None not in lines:
            return ids, cast("list[bytes]", lines), _copy_items(items)
        done: list[bytes] = []
        pristines: list[Any] = []
        for n, (item, line) in enumerate(zip(items, lines, strict=True)):
            if line is not None:
                done.append(line)
                pristines.append(_copy_one(item))
                continue
            (thing, pristine), _ = self._plan_item(n, item)
            parent = ids[n - 1] if n else None
            entry: SessionTreeEntry = (
                CustomEntry(
                    id=ids[n],
                    parent_id=parent,
                    timestamp=stamp,
                    custom_type=ITEM_CUSTOM_TYPE,
                    data=thing.item,
                )
                if isinstance(thing, _Custom)
                else MessageEntry(id=ids[n], parent_id=parent, timestamp=stamp, message=thing)
            )
            done.append(_entry_json(entry))
            pristines.append(pristine)
        return ids, done, pristines

    def _write_lines(
        self,
        session: Session,
        items: list[Any],
        ids: list[str],
        lines: list[bytes],
        pristines: list[Any],
    ) -> None:
        """Appends the lines :meth:`_plan_lines` made under the leaf, as one unit, and
        keeps their items. Should an id be taken in the session by now (about one batch
        in 40,000 of 10k entries) or a context cache have appeared, the batch goes the
        Python path's way instead. The collector is paused throughout: a big batch's
        messages, lines and kept items are all acyclic."""
        with paused_gc():
            storage: Any = session.storage  # an engine storage (_plan_lines)
            leaf = storage.get_leaf_id()
            written = False
            if session._context_cache is None:
                if leaf is not None:
                    lines = [_core.reparent_line(lines[0], leaf), *lines[1:]]
                try:
                    # All or nothing: checked whole (an id taken refused before any byte is
                    # written), then one write.
                    storage._append_lines(lines)
                    written = True
                except DuplicateIdError:
                    pass
            if not written:
                planned, _ = self._plan(items)
                try:
                    ids = _append_planned(session, planned)
                except BaseException:
                    if session.get_leaf_id() != leaf:
                        with contextlib.suppress(Exception):
                            session.move_to(leaf)
                    raise
                pristines = [p if isinstance(t, AgentMessage) else t.item for t, p in planned]
            if self._kept is not None:
                self._kept.size += sum(map(len, lines))
            self._keep_appended(leaf, ids, pristines)

    def _keep_appended(self, leaf: str | None, ids: list[str], pristines: list[Any]) -> None:
        """Keeps the items just appended (entries ``ids`` under ``leaf``) as converted,
        and extends the view when it ended at ``leaf``."""
        view = self._view
        found = [(_ITEM, [pristine]) for pristine in pristines]
        self._known.update(zip(ids, found, strict=True))
        if view.ok and view.leaf == leaf:
            view.push_items(ids, pristines)
            view.leaf = ids[-1]

    def _check_fits(self, planned: list[_Planned], texts: list[str]) -> None:
        """Refuses a batch any entry of which the engine would refuse (depth, line size),
        before any of it is written: tried first on a scratch session unless it surely
        fits."""
        if (
            len(planned) > 1
            and batch_storage(self._session.session) is None
            and not _surely_fits(self._limits, planned, texts)
        ):
            check_writes(self._limits, lambda session: _append_planned(session, planned))

    async def pop_item(self) -> TResponseInputItem | None:
        """Takes the last item off the current branch: the leaf moves to the entry before
        it (the item stays in the file, on a branch of its own). ``None`` when the branch
        has no item. One step: concurrent calls take one item each."""

        def pop(session: Session) -> Any:
            entry_id = session.get_leaf_id()
            while entry_id is not None:
                entry = session.get_entry(entry_id)
                if entry is None:
                    break
                if _is_item_entry(entry):
                    items = self._items_of(entry)
                    session.move_to(entry.parent_id)
                    return _copy_one(items[-1]) if items else None
                entry_id = entry.parent_id
            return None

        item: TResponseInputItem | None = await self._in_lane(pop)
        return item

    async def clear_session(self) -> None:
        """Empties the SDK's view: the leaf moves before the first entry, so the next item
        starts a new root. The earlier history stays in the file as a branch."""
        await self._in_lane(lambda session: session.move_to(None))

    async def _get_compaction_snapshot(
        self,
        limit: int | None,
        *,
        prune_prefix: Callable[[TResponseInputItem], bool] | None = None,
    ) -> Any:
        """The SDK compaction session's optional hook (``OpenAIResponsesCompactionSession``
        looks it up on the session it wraps, as ``SQLiteSession`` has it): the last
        ``limit`` items of the current branch (whatever ``session_settings.limit`` says),
        whether they are all of it, and ``replace_suffix(start, output)``, which replaces
        the items from ``start`` of them on with ``output`` in one step.

        The tree's replacement deletes nothing: the leaf moves to the entry before the
        replaced items (the parent of the first one's entry) and ``output`` is appended
        there, so the history before the compaction stays in the file as a branch
        (:meth:`list_branches`). It returns ``False``, changing nothing, when the branch no
        longer ends with those items (another call appended, popped or branched since).
        ``prune_prefix`` (``EncryptedSession``'s test of an expired item) also drops the
        leading items of the branch that pass it, as ``SQLiteSession`` deletes them: the new
        branch then starts above the first item, and the items between the dropped and the
        replaced ones are written again on it (copies; the old branch keeps the originals).

        ``None`` (no snapshot: the compaction session reads ``get_items`` instead) for a
        subclass that changes what ``get_items`` or ``add_items`` do, which this would
        bypass.
        """
        cls = type(self)
        if _CompactionSnapshot is None or (
            cls.get_items is not OpenAIAgentsSession.get_items
            or cls.add_items is not OpenAIAgentsSession.add_items
        ):
            return None
        self._check_open()
        _check_limit(limit)

        def read(session: Session) -> tuple[list[Any], list[str], bool]:
            view = self._sync(session)
            count = len(view.items)
            first = 0 if limit is None else max(0, count - limit) if limit > 0 else count
            items = view.items[first:]
            return (
                _copy_items(items),
                view.entry_ids(first),
                first == 0,
            )

        items, ids, complete = await self._in_lane(read)

        async def replace_suffix(start: int, output: list[TResponseInputItem]) -> bool:
            if isinstance(start, bool) or not isinstance(start, int) or start < 0:
                raise SessionError("invalid_argument", f"start must be an int >= 0, not {start!r}")
            expected = ids[start:]
            if not expected:
                return False
            if not isinstance(output, list):
                raise SessionError(
                    "invalid_argument", f"output must be a list, not {type(output).__name__}"
                )
            planned, texts = self._plan(output)
            self._check_fits(planned, texts)
            replaced: bool = await self._in_lane(
                lambda session: self._replace_suffix(session, expected, planned, prune_prefix)
            )
            return replaced

        return _CompactionSnapshot(items, complete, replace_suffix)

    def _replace_suffix(
        self,
        session: Session,
        expected: list[str],
        planned: list[_Planned],
        prune_prefix: Callable[[TResponseInputItem], bool] | None,
    ) -> bool:
        """``replace_suffix``'s step (see :meth:`_get_compaction_snapshot`): ``expected``
        holds the entry id of each item to replace, ``planned`` the output's entries."""
        view = self._sync(session)
        count = len(view.items)
        first = count - len(expected)
        if first < 0 or view.entry_ids(first) != expected:
            return False
        # The leading items ``prune_prefix`` passes (expired ones, for EncryptedSession),
        # as SQLiteSession deletes them in the same step.
        pruned = 0
        if prune_prefix is not None:
            items = view.items
            while pruned < first and prune_prefix(_copy_one(items[pruned])):
                pruned += 1
        if pruned:
            # The new branch starts above the first item, with the items kept between the
            # pruned ones and the replaced ones written again.
            head = view.items[pruned:first]
            item_at = next(k for k, code in enumerate(view.codes) if code == _ITEM)
            entry = session.get_entry(view.ids[item_at])
        else:
            # Items of the first replaced item's entry that come before it (an entry other
            # code wrote can stand for several items): written again before the output.
            at = view.pos[expected[0]]
            head = view.items[view.ends[at - 1] if at else 0 : first]
            entry = session.get_entry(expected[0])
        if entry is None:
            return False
        target = entry.parent_id
        if head:
            head_planned, texts = self._plan([_copy_one(item) for item in head])
            self._check_fits(head_planned, texts)
            planned = head_planned + planned
        leaf = session.get_leaf_id()
        session.move_to(target)
        try:
            new_ids = _append_planned(session, planned)
        except BaseException:
            with contextlib.suppress(Exception):
                session.move_to(leaf)
            raise
        for entry_id, (thing, pristine) in zip(new_ids, planned, strict=True):
            self._known[entry_id] = (
                _ITEM,
                [pristine if isinstance(thing, AgentMessage) else thing.item],
            )
        return True

    # -- the tree ----------------------------------------------------------------------

    async def list_branches(self) -> list[Branch]:
        """Every branch of the tree that ends in an item, in tree order (roots and children
        in file order): the current history and every one a pop, clear or branch left."""
        branches: list[Branch] = await self._in_lane(self._branches)
        return branches

    def _branches(self, session: Session) -> list[Branch]:
        leaf = session.get_leaf_id()
        roots = session.get_tree()
        current_item: str | None = None
        # The current branch's last item: the leaf itself or its nearest item ancestor.
        entry_id = leaf
        while entry_id is not None:
            entry = session.get_entry(entry_id)
            if entry is None:
                break
            if _is_item_entry(entry):
                current_item = entry.id
                break
            entry_id = entry.parent_id
        tips: list[tuple[SessionTreeEntry, int]] = []
        # Iterative walk: (node, items above it); a node is a tip when it is an item entry
        # and no item entry is below it.
        stack: list[tuple[Any, int, bool]] = [(r, 0, False) for r in reversed(roots)]
        below: dict[int, bool] = {}
        while stack:
            node, count, done = stack.pop()
            is_item = _is_item_entry(node.entry)
            here = count + (len(self._items_of(node.entry)) if is_item else 0)
            if not done:
                stack.append((node, count, True))
                stack.extend((c, here, False) for c in reversed(node.children))
                continue
            has_item_below = any(below.pop(id(c), False) for c in node.children)
            if is_item and not has_item_below:
                tips.append((node.entry, here))
            below[id(node)] = is_item or has_item_below
        out = []
        for entry, count in tips:
            items = self._items_of(entry)
            last = _copy_one(items[-1]) if items else None
            out.append(Branch(entry.id, count, last, entry.id == current_item))
        return out

    async def branch(
        self, *, at: int | None = None, turn: int | None = None, from_entry: str | None = None
    ) -> None:
        """Moves the leaf so the history continues from an earlier point (nothing is
        deleted; what it leaves stays a branch). Pass exactly one of:

        Args:
            at: keep the first ``at`` items of the current history.
            turn: keep the first ``turn`` turns (a turn starts at a user message).
            from_entry: continue from this entry (from :meth:`get_item_entries` or a
                :class:`Branch`'s ``leaf_id``), on this branch or any other.

        Raises:
            SessionError: ``invalid_argument`` when not exactly one is given or ``at`` /
                ``turn`` is out of range; ``not_found`` for an unknown entry.
        """
        self._check_open()
        given = [x for x in (at, turn, from_entry) if x is not None]
        if len(given) != 1:
            raise SessionError("invalid_argument", "pass exactly one of at, turn, from_entry")

        def move(session: Session) -> None:
            if from_entry is not None:
                session.move_to(from_entry)
                return
            view = self._sync(session)
            items = view.items
            if at is not None:
                _check_count("at", at, len(items))
                keep = at
            else:
                assert turn is not None
                starts = [n for n, item in enumerate(items) if _kind(item) == "user"]
                _check_count("turn", turn, len(starts))
                keep = starts[turn] if turn < len(starts) else len(items)
            if keep == 0:
                first = next((k for k, code in enumerate(view.codes) if code == _ITEM), None)
                entry = None if first is None else session.get_entry(view.ids[first])
                target = None if entry is None else entry.parent_id
            else:
                target = view.entry_of(keep - 1)
            session.move_to(target)

        await self._in_lane(move)

    def _items_of(self, entry: SessionTreeEntry) -> list[Any]:
        """:func:`entry_to_items`, through the cache of converted entries: the pristine
        items, not to be handed out (copy them)."""
        return self._known_entry(entry)[1]

    def _learn_tool_names(self, items: Any) -> None:
        for item in items:
            if isinstance(item, dict) and item.get("type") == "function_call":
                call_id, name = item.get("call_id"), item.get("name")
                if isinstance(call_id, str) and isinstance(name, str):
                    self._tool_names[call_id] = name

    async def close(self) -> None:
        """Closes this object (idempotent): every later call raises
        :class:`SessionClosedError` (a ``RuntimeError``, as the SDK's sessions). The
        session itself closes with the last object sharing it (the only one, when the
        object was made from a session)."""
        if self._closed:
            return
        self._closed = True
        if self._kept is not None:
            self._kept.leave()
        if self._shared is not None:
            await self._shared.release()
        else:
            await self._session.close()

    async def __aenter__(self) -> OpenAIAgentsSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<OpenAIAgentsSession {self.session_id!r}{state} over {self._session!r}>"


class _Kept:
    """The converted items of one session, shared by every :class:`OpenAIAgentsSession`
    opened on it in this process (``open``), and kept by the process after the last one
    closes while they fit :func:`set_kept_bytes`'s budget (least recently used let go
    first): the SDK's pattern of one session object per request then converts each entry
    once, not once per request. Named by the registry's key (the repository's directory
    or conninfo and the session id) and checked against the file's identity (the header's
    timestamp and the first entry's id), so a session deleted and created again starts
    afresh. A storage without the engine's lines (PostgreSQL) shares them while open and
    keeps nothing past the last close. Only a session's lane changes ``known``, so objects
    sharing it take turns as their calls do.
    """

    __slots__ = ("identity", "known", "measured", "size", "tool_names", "users")

    def __init__(self, identity: tuple[Any, ...], measured: bool = True) -> None:
        self.identity = identity
        self.known: dict[str, tuple[int, list[Any]]] = {}
        self.tool_names: dict[str, str] = {}
        self.size = 0  # the JSON bytes of the items read or written, roughly
        # Whether ``size`` counts what is read: not for a storage without the engine's
        # lines (PostgreSQL), whose items are shared while open but not kept past that.
        self.measured = measured
        self.users = 0

    @staticmethod
    def adopt(shared: SharedSession, session: Session) -> _Kept | None:
        """The kept items of ``session`` (made now if none), one more user counted;
        ``None`` for a repository named by its object (kept there already, or not
        worth keeping: an in-memory one)."""
        key = shared.key
        if len(key) < 2 or isinstance(key[1], int):
            return None
        engine = _engine_of(session.storage)
        first = None
        if engine is not None and engine.stats()[0]:
            first = engine.id_of(0)
        header = session.storage.get_metadata()
        identity = (header.timestamp, first)
        with _kept_lock:
            kept = _kept.pop(key, None)
            if kept is None or not kept.same_file(identity):
                kept = _Kept(identity, measured=engine is not None)
            _kept[key] = kept  # the most recently used last
            kept.users += 1
        return kept

    def same_file(self, identity: tuple[Any, ...]) -> bool:
        """Whether ``identity`` (the header's timestamp, the first entry's id) is the file
        these items were read from (a file that had no entry then may have one now)."""
        stamp, first = identity
        if stamp != self.identity[0]:
            return False
        if self.identity[1] is None:
            self.identity = identity
            return True
        return bool(first == self.identity[1])

    def leave(self) -> None:
        """One user fewer; then the kept sessions beyond the budget are let go."""
        with _kept_lock:
            self.users -= 1
            _trim()


_kept: dict[tuple[Any, ...], _Kept] = {}
_kept_lock = threading.Lock()
_kept_budget = [256 << 20]
# At most this many sessions kept with no object open on them, however small.
_KEPT_MOST: Final = 1024


def _trim() -> None:
    """Lets the least recently used kept sessions no object has open go until the rest
    of those fit the budget (``_kept_lock`` held)."""
    for key in [k for k, v in _kept.items() if v.users <= 0 and not v.measured]:
        del _kept[key]
    total = sum(k.size for k in _kept.values() if k.users <= 0)
    idle = sum(1 for k in _kept.values() if k.users <= 0)
    for key in list(_kept):
        if total <= _kept_budget[0] and idle <= _KEPT_MOST:
            break
        kept = _kept[key]
        if kept.users <= 0:
            del _kept[key]
            total -= kept.size
            idle -= 1


def set_kept_bytes(budget: int) -> int:
    """Sets how much the process keeps of the sessions no :class:`OpenAIAgentsSession` has
    open (the JSON size of their items; their Python objects take about twice that), for
    the next open to reuse; returns the previous budget. ``0`` keeps nothing past the
    last close. The default is 256 MiB (and at most 1,024 sessions)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise SessionError("invalid_argument", "budget must be an int >= 0")
    with _kept_lock:
        previous = _kept_budget[0]
        _kept_budget[0] = budget
        if budget == 0:
            for key in [k for k, v in _kept.items() if v.users <= 0]:
                del _kept[key]
        _trim()
    return previous


def _batch_ids(count: int) -> list[str]:
    """``count`` distinct new entry ids (8 hex digits, as the engine makes them); whether
    the session has one already is checked when the batch is written."""
    while True:
        raw = os.urandom(4 * count).hex()
        ids = [raw[k : k + 8] for k in range(0, 8 * count, 8)]
        if len(set(ids)) == count:
            return ids


def _entry_json(entry: SessionTreeEntry) -> bytes:
    from ..storage.engine import _entry_lines

    return _entry_lines([entry])[0]


# ``get_items``' limit when every item is wanted whatever ``session_settings`` says.
_NO_LIMIT: Final = 2**62


def _check_count(name: str, value: object, most: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise SessionError("invalid_argument", f"{name} must be an int from 0 to {most}")


@dataclass(frozen=True)
class _Custom:
    item: Any


# What add_items plans for an item: the message or custom entry that holds it, and the
# item as get_items gives it back.
_Planned = tuple["AgentMessage | _Custom", Any]


def _append_planned(session: Session, planned: Sequence[_Planned]) -> list[str]:
    """Appends each planned entry under the leaf, a chain; their ids. A batch goes to the
    engine as one unit where the storage allows (:func:`._common.append_batch`): checked
    whole, then one write."""
    if len(planned) > 1:
        ids = append_chain(
            session,
            [
                (ITEM_CUSTOM_TYPE, thing.item) if isinstance(thing, _Custom) else thing
                for thing, _ in planned
            ],
        )
        if ids is not None:
            return ids
    return [
        session.append_custom_entry(ITEM_CUSTOM_TYPE, thing.item)
        if isinstance(thing, _Custom)
        else session.append_message(thing)
        for thing, _ in planned
    ]
