"""Messages and content blocks: the conversation carried by ``message`` entries.

Every class here is an immutable value: a frozen, slotted dataclass, equal by value,
keyword-constructible.  List arguments (content blocks) are stored as tuples; dict arguments
(``ToolCall.arguments``, ``details``) are stored as given and must not be mutated afterwards.
``timestamp`` is Unix milliseconds and defaults to now.

Constructors refuse, with ``SessionError("invalid_argument")`` naming the field, a value of
the wrong type and a value a user can get wrong: a negative token count or cost (or a NaN
or infinite cost), an empty ``provider`` or ``model``, an :class:`ImageContent` whose
``mime_type`` is not ``image/...``, and a dict key that is not a ``str`` anywhere in tool
arguments or ``details`` (JSON would silently turn ``1`` into ``"1"``).  Reading is more
lenient: a file written by an earlier version may hold such values, and they load.

:func:`message_to_dict` and :func:`message_from_dict` convert to and from the JSON shapes of
FORMAT.md.  Fields this version does not know (written by a newer or foreign writer) are kept
on the object, take no part in equality, and are written back after the known fields.

>>> m = UserMessage("Hello", timestamp=0)
>>> m.role, message_to_dict(m)
('user', {'role': 'user', 'content': 'Hello', 'timestamp': 0})
>>> message_from_dict(message_to_dict(m)) == m
True
"""

from __future__ import annotations

import dataclasses
import itertools
import reprlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import field
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeAlias, TypeVar

from .. import _core
from .._frozen import at_defaults, frozen
from .._util import iso_to_ms, model_keys, now_ms
from ..errors import SessionError

__all__ = [
    "BASH_EXECUTION_ROLE",
    "MESSAGE_ROLES",
    "STOP_REASONS",
    "AgentMessage",
    "AssistantContentBlock",
    "AssistantMessage",
    "BranchSummaryMessage",
    "CompactionSummaryMessage",
    "ContentBlock",
    "Cost",
    "CustomMessage",
    "ImageContent",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolResultMessage",
    "UnknownMessage",
    "Usage",
    "UserContentBlock",
    "UserMessage",
    "create_branch_summary_message",
    "create_compaction_summary_message",
    "create_custom_message",
    "message_from_dict",
    "message_to_dict",
]

# The sets below are declared once, in the Rust engine, and read from ``_core``. Type
# checkers need ``StopReason`` spelled out; tests/test_constants.py checks that it equals
# ``STOP_REASONS``.
StopReason: TypeAlias = Literal["stop", "length", "tool_use", "error", "aborted"]
"""Why an assistant turn ended."""

STOP_REASONS: Final[tuple[str, ...]] = _core.STOP_REASONS
"""The allowed values of :attr:`AssistantMessage.stop_reason`."""

MESSAGE_ROLES: Final[tuple[str, ...]] = _core.MESSAGE_ROLES
"""The roles this version knows; any other role loads as :class:`UnknownMessage`."""


# --------------------------------------------------------------------------- helpers

_REPR_LIMIT: Final = 60
_REPR_ITEMS: Final = 3


class _NestedRepr(reprlib.Repr):
    """``reprlib`` bounds, but dicts keep their insertion order (reprlib sorts keys)."""

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{…}"
        items = [
            f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
            for k, v in itertools.islice(x.items(), self.maxdict)
        ]
        if len(x) > self.maxdict:
            items.append("…")
        return "{" + ", ".join(items) + "}"


_nested_repr = _NestedRepr()
_nested_repr.maxstring = _REPR_LIMIT
_nested_repr.maxother = _REPR_LIMIT
_nested_repr.maxdict = 4
_nested_repr.maxlist = 4
_nested_repr.maxtuple = 4
_nested_repr.maxlevel = 3


def _short(text: str, limit: int = _REPR_LIMIT) -> str:
    """``repr`` of ``text`` cut to about ``limit`` characters."""
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return repr(text)


def _fmt(value: object) -> str:
    """A bounded repr of one field value."""
    if isinstance(value, str):
        return _short(value)
    if isinstance(value, tuple):
        shown = [_fmt(v) for v in value[:_REPR_ITEMS]]
        if len(value) > _REPR_ITEMS:
            shown.append(f"… {len(value) - _REPR_ITEMS} more")
        return "[" + ", ".join(shown) + "]"
    if isinstance(value, _Value):
        return repr(value)
    return _nested_repr.repr(value)


def _is_default(value: object, default: object) -> bool:
    # Same type as well as equal, so ``1`` does not pass for a default of ``True``.
    return value is default or (type(value) is type(default) and value == default)


def _invalid(obj: object, name: str, expected: str, value: object) -> SessionError:
    return SessionError(
        "invalid_argument",
        f"{type(obj).__name__}.{name} must be {expected}, got {type(value).__name__}",
    )


def _corrupt(message: str) -> SessionError:
    return SessionError("corrupt", message)


def _check_str(obj: object, name: str, value: object) -> None:
    if not isinstance(value, str):
        raise _invalid(obj, name, "a str", value)


def _check_opt_str(obj: object, name: str, value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise _invalid(obj, name, "a str or None", value)


def _check_int(obj: object, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(obj, name, "an int", value)


def _check_bool(obj: object, name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise _invalid(obj, name, "a bool", value)


# --- values a user can get wrong -------------------------------------------------------
#
# Beyond its type, a value a user constructs is refused if it is wrong in a way FORMAT.md's
# types do not say (a negative token count, an empty provider, an image that is not an
# image, a dict key JSON would rewrite). A file may hold such values, though: earlier
# versions wrote them and FORMAT.md only asks for the types, so the readers
# (``message_from_dict``, ``entry_from_dict``, ``header_from_dict`` and the ``create_*``
# helpers, which build from an entry) construct under ``_reading()``, which lets them
# through. The engine builds the objects it reads without the constructors
# (rust/py/build.rs), so it is lenient too.

_READING: Final[ContextVar[bool]] = ContextVar("sessiontree_reading", default=False)
_MAX_FLOAT: Final = sys.float_info.max


@contextmanager
def _reading() -> Iterator[None]:
    """Construct values from a file: only types are checked (see above)."""
    token = _READING.set(True)
    try:
        yield
    finally:
        _READING.reset(token)


def _check_count(obj: object, name: str, value: int) -> None:
    """``value`` (already an int) must not be negative."""
    if value < 0 and not _READING.get():
        raise SessionError(
            "invalid_argument", f"{type(obj).__name__}.{name} must not be negative, got {value}"
        )


def _check_not_empty(obj: object, name: str, value: str) -> None:
    """``value`` (already a str) must not be empty."""
    if not value and not _READING.get():
        raise SessionError("invalid_argument", f"{type(obj).__name__}.{name} must not be empty")


_CONTAINERS: Final = (dict, list, tuple)


def _check_json_keys(obj: object, name: str, value: object) -> None:
    """Refuse a dict key that is not a str, at any depth.

    ``json`` writes ``{1: "x"}`` as ``{"1": "x"}`` (and ``True`` as ``"true"``), so the value
    would silently read back different; a tuple key fails only at the append. Only the
    containers are walked (iteratively, each once, so shared or circular data ends), and
    only for values a user constructs: keys read from JSON are always strings.
    """
    if value.__class__ is dict:
        # The common case, a flat dict of str keys, without the walk's allocations.
        for k, item in value.items():
            if k.__class__ is not str or isinstance(item, _CONTAINERS):
                break
        else:
            return
    elif not isinstance(value, _CONTAINERS):
        return
    if _READING.get():
        return
    stack: list[Any] = [value]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, dict):
            for k, item in v.items():
                if not isinstance(k, str):
                    raise SessionError(
                        "invalid_argument",
                        f"{type(obj).__name__}.{name} has a dict key {_nested_repr.repr(k)} "
                        f"of type {type(k).__name__}; JSON object keys must be str",
                    )
                if isinstance(item, _CONTAINERS):
                    stack.append(item)
        else:
            stack.extend([item for item in v if isinstance(item, _CONTAINERS)])


def _as_tuple(
    obj: object, name: str, value: object, allowed: tuple[type, ...], expected: str
) -> tuple[Any, ...]:
    """Check a list/tuple of ``allowed`` items and return it as a tuple."""
    if isinstance(value, tuple):
        items = value
    elif isinstance(value, list):
        items = tuple(value)
    else:
        raise _invalid(obj, name, f"a list of {expected}", value)
    for item in items:
        if not isinstance(item, allowed):
            raise SessionError(
                "invalid_argument",
                f"{type(obj).__name__}.{name} items must be {expected}, got {type(item).__name__}",
            )
    return items


BASH_EXECUTION_ROLE: Final = "bash_execution"
"""The role pi's shell runs (``!cmd``) read as: an :class:`UnknownMessage` whose ``data``
has ``command``, ``output``, ``exit_code``, ``cancelled``, ``truncated``,
``full_output_path`` and ``exclude_from_context`` (see ``sessiontree.dialects.pi``)."""


def _check_user_content(obj: Any) -> None:
    """Checks ``obj.content``: a str, or text and image blocks (stored as a tuple)."""
    content = obj.content
    if not isinstance(content, str):
        if not isinstance(content, (list, tuple)):
            raise _invalid(obj, "content", f"a str or a list of {_USER_BLOCKS_TEXT}", content)
        blocks = _as_tuple(obj, "content", content, _USER_BLOCKS, _USER_BLOCKS_TEXT)
        if blocks is not content:
            object.__setattr__(obj, "content", blocks)


def _content_text(content: str | Sequence[ContentBlock]) -> str:
    """The text of a message's content: the str itself, or its text blocks joined by
    newlines (images and other blocks left out)."""
    if isinstance(content, str):
        return content
    return "\n".join(b.text for b in content if isinstance(b, TextContent))


class _Lazy:
    """The root of every model class: an instance may be handed out before it is read.

    A file storage hands out entries whose fields (beyond ``id``, ``parent_id``,
    ``timestamp`` and a message entry's ``message``) are not read yet: the hidden slot
    ``_src`` holds where the entry's line lives (a ``_core.LineRef``). Reading any unset
    field reaches :meth:`__getattr__`, which reads the line and fills every field
    (``entries._fill``) — once; the object then is like any other. Equality, ``repr``,
    pickling and copying read fields, so they see the filled object.
    """

    __slots__ = ("_src",)

    # Hidden from type checkers, which would otherwise accept any attribute name.
    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            # Only reached when normal lookup failed: an unset slot or a missing attribute.
            try:
                src = _SRC.__get__(self)
            except AttributeError:
                raise AttributeError(
                    f"{type(self).__name__!r} object has no attribute {name!r}"
                ) from None
            from .entries import _fill

            _fill(self, src)
            return object.__getattribute__(self, name)


_SRC: Any = _Lazy.__dict__["_src"]


@frozen(repr=False)
class _Value(_Lazy):
    """Shared base: keeps unknown JSON fields and gives a short, default-skipping repr."""

    # Fields read from JSON that this version does not know; written back unchanged.
    _extra: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    # Field names the repr leaves out (entries omit their timestamp).
    _REPR_SKIP: ClassVar[frozenset[str]] = frozenset()

    def __repr__(self) -> str:
        parts = []
        skip = self._REPR_SKIP
        for f in dataclasses.fields(self):
            if not f.repr or f.name in skip:
                continue
            value = getattr(self, f.name)
            if f.default is not dataclasses.MISSING and _is_default(value, f.default):
                continue
            parts.append(f"{f.name}={_fmt(value)}")
        return f"{type(self).__name__}({', '.join(parts)})"


_V = TypeVar("_V", bound=_Value)


def _keep_extra(obj: _V, data: dict[str, Any], known: frozenset[str]) -> _V:
    """Attach the keys of ``data`` outside ``known`` to ``obj`` (rare; callers pre-check)."""
    object.__setattr__(obj, "_extra", {k: v for k, v in data.items() if k not in known})
    return obj


# --------------------------------------------------------------------------- content blocks


@frozen(repr=False)
class TextContent(_Value):
    """A block of text.

    Attributes:
        text: the text.
        signature: an opaque provider signature, or ``None``.

    >>> TextContent("Hello")
    TextContent(text='Hello')
    """

    text: str
    signature: str | None = None

    @property
    def type(self) -> Literal["text"]:
        """The block's JSON ``type``: ``"text"``."""
        return "text"

    def __post_init__(self) -> None:
        _check_str(self, "text", self.text)
        _check_opt_str(self, "signature", self.signature)


@frozen(repr=False)
class ThinkingContent(_Value):
    """A block of model reasoning.

    Attributes:
        thinking: the reasoning text (may be empty when ``redacted``).
        signature: an opaque provider signature, or ``None``.
        redacted: whether the provider redacted the reasoning.

    >>> ThinkingContent("Let me think", redacted=True)
    ThinkingContent(thinking='Let me think', redacted=True)
    """

    thinking: str
    signature: str | None = None
    redacted: bool = False

    @property
    def type(self) -> Literal["thinking"]:
        """The block's JSON ``type``: ``"thinking"``."""
        return "thinking"

    def __post_init__(self) -> None:
        _check_str(self, "thinking", self.thinking)
        _check_opt_str(self, "signature", self.signature)
        _check_bool(self, "redacted", self.redacted)


@frozen(repr=False)
class ImageContent(_Value):
    """An image, base64-encoded.

    Attributes:
        data: the base64 text of the image bytes.
        mime_type: e.g. ``"image/png"``.

    >>> ImageContent("iVBORw0KGgo=", "image/png")
    ImageContent(mime_type='image/png', data=<12 chars>)
    """

    data: str
    mime_type: str

    @property
    def type(self) -> Literal["image"]:
        """The block's JSON ``type``: ``"image"``."""
        return "image"

    def __post_init__(self) -> None:
        _check_str(self, "data", self.data)
        _check_str(self, "mime_type", self.mime_type)
        if self.mime_type[:6].lower() != "image/" and not _READING.get():
            raise SessionError(
                "invalid_argument",
                f"ImageContent.mime_type must be an image type (image/...), "
                f"got {_fmt(self.mime_type)}",
            )

    def __repr__(self) -> str:
        # The payload is base64 and often megabytes long; its size is what is useful here.
        return f"ImageContent(mime_type={self.mime_type!r}, data=<{len(self.data)} chars>)"


@frozen(repr=False)
class ToolCall(_Value):
    """A tool invocation requested by the assistant.

    Attributes:
        id: the provider's tool-call id, echoed by the matching :class:`ToolResultMessage`.
        name: the tool name.
        arguments: the JSON arguments object (kept as given; do not mutate it).

    >>> ToolCall("call_1", "read", {"path": "README.md"})
    ToolCall(id='call_1', name='read', arguments={'path': 'README.md'})
    """

    id: str
    name: str
    arguments: dict[str, Any]

    @property
    def type(self) -> Literal["tool_call"]:
        """The block's JSON ``type``: ``"tool_call"``."""
        return "tool_call"

    def __post_init__(self) -> None:
        _check_str(self, "id", self.id)
        _check_str(self, "name", self.name)
        if not isinstance(self.arguments, dict):
            raise _invalid(self, "arguments", "a dict", self.arguments)
        _check_json_keys(self, "arguments", self.arguments)


ContentBlock: TypeAlias = TextContent | ThinkingContent | ImageContent | ToolCall
"""Any content block."""
UserContentBlock: TypeAlias = TextContent | ImageContent
"""A block allowed in user and tool-result content."""
AssistantContentBlock: TypeAlias = TextContent | ThinkingContent | ToolCall
"""A block allowed in assistant content."""

_USER_BLOCKS: Final = (TextContent, ImageContent)
_ASSISTANT_BLOCKS: Final = (TextContent, ThinkingContent, ToolCall)
_USER_BLOCKS_TEXT: Final = "TextContent or ImageContent"
_ASSISTANT_BLOCKS_TEXT: Final = "TextContent, ThinkingContent or ToolCall"


# --------------------------------------------------------------------------- usage


@frozen(repr=False)
class Cost(_Value):
    """Money spent on one call, per token class (ints are stored as floats).

    >>> Cost(input=0.25, total=0.25)
    Cost(input=0.25, total=0.25)
    """

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_read", "cache_write", "total"):
            value = getattr(self, name)
            if type(value) is not float:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise _invalid(self, name, "a float", value)
                try:
                    value = float(value)
                except OverflowError:
                    raise _invalid(self, name, "a float in range", value) from None
                object.__setattr__(self, name, value)
            # Also refuses NaN and infinities, which JSON cannot carry.
            if not 0.0 <= value <= _MAX_FLOAT and not _READING.get():
                raise SessionError(
                    "invalid_argument",
                    f"Cost.{name} must be a finite number >= 0, got {value!r}",
                )


# The zero usage and cost: defaults, and what a missing or null one reads as.
_ZERO_COST: Final = at_defaults(Cost)


@frozen(repr=False)
class Usage(_Value):
    """Token counts and cost of one model call.

    >>> Usage(input=10, output=5, total_tokens=15)
    Usage(input=10, output=5, total_tokens=15)
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: Cost = _ZERO_COST

    def __post_init__(self) -> None:
        _check_int(self, "input", self.input)
        _check_int(self, "output", self.output)
        _check_int(self, "cache_read", self.cache_read)
        _check_int(self, "cache_write", self.cache_write)
        _check_int(self, "total_tokens", self.total_tokens)
        if (
            self.input < 0
            or self.output < 0
            or self.cache_read < 0
            or self.cache_write < 0
            or self.total_tokens < 0
        ):
            for name in ("input", "output", "cache_read", "cache_write", "total_tokens"):
                _check_count(self, name, getattr(self, name))
        if not isinstance(self.cost, Cost):
            raise _invalid(self, "cost", "a Cost", self.cost)


_ZERO_USAGE: Final = at_defaults(Usage)


# --------------------------------------------------------------------------- messages


@frozen(repr=False)
class UserMessage(_Value):
    """A message from the user.

    Attributes:
        content: a str, or a sequence of :class:`TextContent` / :class:`ImageContent`
            (stored as a tuple).
        timestamp: Unix milliseconds; defaults to now.

    >>> UserMessage("Fix the tests", timestamp=1764521310123)
    UserMessage(content='Fix the tests', timestamp=1764521310123)
    """

    content: str | Sequence[UserContentBlock]
    timestamp: int = field(default_factory=now_ms)

    @property
    def role(self) -> Literal["user"]:
        """``"user"``."""
        return "user"

    def __post_init__(self) -> None:
        _check_user_content(self)
        _check_int(self, "timestamp", self.timestamp)


@frozen(repr=False)
class AssistantMessage(_Value):
    """A model reply.

    Attributes:
        content: :class:`TextContent`, :class:`ThinkingContent` and :class:`ToolCall`
            blocks (stored as a tuple).
        provider: e.g. ``"anthropic"``.
        model: the model id, e.g. ``"claude-sonnet-4-5"``.
        api: the API flavour used, or ``None``.
        usage: tokens and cost of the call.
        stop_reason: one of :data:`STOP_REASONS`.
        error_message: the provider's error when ``stop_reason`` is ``"error"``.
        timestamp: Unix milliseconds; defaults to now.

    >>> AssistantMessage([TextContent("Done.")], "anthropic", "claude", timestamp=0)
    AssistantMessage(content=[TextContent(text='Done.')], provider='anthropic', model='claude', \
timestamp=0)
    """

    content: Sequence[AssistantContentBlock]
    provider: str
    model: str
    api: str | None = None
    usage: Usage = _ZERO_USAGE
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    timestamp: int = field(default_factory=now_ms)

    @property
    def role(self) -> Literal["assistant"]:
        """``"assistant"``."""
        return "assistant"

    def __post_init__(self) -> None:
        blocks = _as_tuple(self, "content", self.content, _ASSISTANT_BLOCKS, _ASSISTANT_BLOCKS_TEXT)
        if blocks is not self.content:
            object.__setattr__(self, "content", blocks)
        _check_str(self, "provider", self.provider)
        _check_not_empty(self, "provider", self.provider)
        _check_str(self, "model", self.model)
        _check_not_empty(self, "model", self.model)
        _check_opt_str(self, "api", self.api)
        if not isinstance(self.usage, Usage):
            raise _invalid(self, "usage", "a Usage", self.usage)
        if self.stop_reason not in STOP_REASONS:
            raise SessionError(
                "invalid_argument",
                f"AssistantMessage.stop_reason must be one of {', '.join(STOP_REASONS)}, "
                f"got {self.stop_reason!r}",
            )
        _check_opt_str(self, "error_message", self.error_message)
        _check_int(self, "timestamp", self.timestamp)


@frozen(repr=False)
class ToolResultMessage(_Value):
    """The result of running a tool call.

    Attributes:
        tool_call_id: the :attr:`ToolCall.id` this answers.
        tool_name: the tool name.
        content: :class:`TextContent` / :class:`ImageContent` blocks (stored as a tuple).
        is_error: whether the tool failed.
        details: any JSON value for the application (kept as given; do not mutate it).
        timestamp: Unix milliseconds; defaults to now.

    >>> ToolResultMessage("call_1", "read", [TextContent("# README")], timestamp=0)
    ToolResultMessage(tool_call_id='call_1', tool_name='read', \
content=[TextContent(text='# README')], timestamp=0)
    """

    tool_call_id: str
    tool_name: str
    content: Sequence[UserContentBlock]
    is_error: bool = False
    details: Any = None
    timestamp: int = field(default_factory=now_ms)

    @property
    def role(self) -> Literal["tool_result"]:
        """``"tool_result"``."""
        return "tool_result"

    def __post_init__(self) -> None:
        _check_str(self, "tool_call_id", self.tool_call_id)
        _check_str(self, "tool_name", self.tool_name)
        blocks = _as_tuple(self, "content", self.content, _USER_BLOCKS, _USER_BLOCKS_TEXT)
        if blocks is not self.content:
            object.__setattr__(self, "content", blocks)
        _check_bool(self, "is_error", self.is_error)
        _check_json_keys(self, "details", self.details)
        _check_int(self, "timestamp", self.timestamp)


@frozen(repr=False)
class CustomMessage(_Value):
    """An application-defined message that takes part in the context.

    Attributes:
        custom_type: the application's name for this kind of message.
        content: the text, or a sequence of :class:`TextContent` / :class:`ImageContent`
            (stored as a tuple), as pi writes some.
        display: whether a UI should show it.
        details: any JSON value for the application (kept as given; do not mutate it).
        timestamp: Unix milliseconds; defaults to now.

    >>> CustomMessage("note", "remember this", timestamp=0)
    CustomMessage(custom_type='note', content='remember this', timestamp=0)
    """

    custom_type: str
    content: str | Sequence[UserContentBlock]
    display: bool = True
    details: Any = None
    timestamp: int = field(default_factory=now_ms)

    @property
    def role(self) -> Literal["custom"]:
        """``"custom"``."""
        return "custom"

    def __post_init__(self) -> None:
        _check_str(self, "custom_type", self.custom_type)
        _check_user_content(self)
        _check_bool(self, "display", self.display)
        _check_json_keys(self, "details", self.details)
        _check_int(self, "timestamp", self.timestamp)


@frozen(repr=False)
class CompactionSummaryMessage(_Value):
    """The summary that stands in for the entries a compaction dropped.

    Attributes:
        summary: the summary text.
        tokens_before: the context size in tokens before the compaction.
        timestamp: Unix milliseconds; defaults to now.

    >>> CompactionSummaryMessage("We fixed the parser.", 12000, timestamp=0)
    CompactionSummaryMessage(summary='We fixed the parser.', tokens_before=12000, timestamp=0)
    """

    summary: str
    tokens_before: int
    timestamp: int = field(default_factory=now_ms)

    @property
    def role(self) -> Literal["compaction_summary"]:
        """``"compaction_summary"``."""
        return "compaction_summary"

    def __post_init__(self) -> None:
        _check_str(self, "summary", self.summary)
        _check_int(self, "tokens_before", self.tokens_before)
        _check_count(self, "tokens_before", self.tokens_before)
        _check_int(self, "timestamp", self.timestamp)


@frozen(repr=False)
class BranchSummaryMessage(_Value):
    """The summary of a branch the session moved away from.

    Attributes:
        summary: the summary text.
        from_id: the entry the branch was left from.
        timestamp: Unix milliseconds; defaults to now.

    >>> BranchSummaryMessage("Tried a regex; abandoned.", "a1b2c3d4", timestamp=0)
    BranchSummaryMessage(summary='Tried a regex; abandoned.', from_id='a1b2c3d4', timestamp=0)
    """

    summary: str
    from_id: str
    timestamp: int = field(default_factory=now_ms)

    @property
    def role(self) -> Literal["branch_summary"]:
        """``"branch_summary"``."""
        return "branch_summary"

    def __post_init__(self) -> None:
        _check_str(self, "summary", self.summary)
        _check_str(self, "from_id", self.from_id)
        _check_int(self, "timestamp", self.timestamp)


@frozen(repr=False)
class UnknownMessage(_Value):
    """A message whose ``role`` this version does not know, kept verbatim.

    Attributes:
        role: the message's role.
        data: the whole message object as read (including ``role``); written back
            unchanged by :func:`message_to_dict`. Do not mutate it.

    >>> UnknownMessage("bash_execution", {"role": "bash_execution", "command": "ls"})
    UnknownMessage(role='bash_execution', data={'role': 'bash_execution', 'command': 'ls'})
    """

    role: str
    data: dict[str, Any]

    def __post_init__(self) -> None:
        _check_str(self, "role", self.role)
        if self.role in MESSAGE_ROLES:
            raise SessionError(
                "invalid_argument",
                f"UnknownMessage.role {self.role!r} is a known role; use its message class",
            )
        if not isinstance(self.data, dict):
            raise _invalid(self, "data", "a dict", self.data)
        _check_json_keys(self, "data", self.data)
        if self.data.get("role") != self.role:
            raise SessionError(
                "invalid_argument",
                f"UnknownMessage.data['role'] must equal role {self.role!r}, "
                f"got {self.data.get('role')!r}",
            )


AgentMessage: TypeAlias = (
    UserMessage
    | AssistantMessage
    | ToolResultMessage
    | CustomMessage
    | CompactionSummaryMessage
    | BranchSummaryMessage
    | UnknownMessage
)
"""Any message that a ``message`` entry can hold."""

_MESSAGE_CLASSES: Final = (
    UserMessage,
    AssistantMessage,
    ToolResultMessage,
    CustomMessage,
    CompactionSummaryMessage,
    BranchSummaryMessage,
    UnknownMessage,
)


def _preview_text(message: AgentMessage) -> str:
    """The readable text of a message, for reprs (text blocks joined, tool calls named)."""
    if isinstance(message, (CompactionSummaryMessage, BranchSummaryMessage)):
        return message.summary
    if isinstance(message, UnknownMessage):
        return ""
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ToolCall):
            parts.append(f"{block.name}(…)")
        elif isinstance(block, ImageContent):
            parts.append("[image]")
    return " ".join(parts)


# --------------------------------------------------------------------------- JSON: writing

_Writer = Callable[[Any], dict[str, Any]]


def _lookup(table: dict[type, _Writer], cls: type) -> _Writer | None:
    """Find the writer of ``cls`` or of its nearest registered base (for user subclasses)."""
    for base in cls.__mro__:
        writer = table.get(base)
        if writer is not None:
            return writer
    return None


def _text_to_json(b: TextContent) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "text", "text": b.text}
    if b.signature is not None:
        d["signature"] = b.signature
    return d


def _thinking_to_json(b: ThinkingContent) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "thinking", "thinking": b.thinking}
    if b.signature is not None:
        d["signature"] = b.signature
    if b.redacted:
        d["redacted"] = True
    return d


def _image_to_json(b: ImageContent) -> dict[str, Any]:
    return {"type": "image", "data": b.data, "mime_type": b.mime_type}


def _tool_call_to_json(b: ToolCall) -> dict[str, Any]:
    return {"type": "tool_call", "id": b.id, "name": b.name, "arguments": b.arguments}


_BLOCK_WRITERS: Final[dict[type, _Writer]] = {
    TextContent: _text_to_json,
    ThinkingContent: _thinking_to_json,
    ImageContent: _image_to_json,
    ToolCall: _tool_call_to_json,
}


def _block_to_json(block: ContentBlock) -> dict[str, Any]:
    writer = _BLOCK_WRITERS.get(type(block)) or _lookup(_BLOCK_WRITERS, type(block))
    if writer is None:
        raise SessionError("invalid_argument", f"not a content block: {type(block).__name__}")
    d = writer(block)
    if block._extra:
        d.update(block._extra)
    return d


def _blocks_to_json(blocks: Sequence[ContentBlock]) -> list[dict[str, Any]]:
    return [_block_to_json(b) for b in blocks]


def _cost_to_json(c: Cost) -> dict[str, Any]:
    d: dict[str, Any] = {
        "input": c.input,
        "output": c.output,
        "cache_read": c.cache_read,
        "cache_write": c.cache_write,
        "total": c.total,
    }
    if c._extra:
        d.update(c._extra)
    return d


def _usage_to_json(u: Usage) -> dict[str, Any]:
    d: dict[str, Any] = {
        "input": u.input,
        "output": u.output,
        "cache_read": u.cache_read,
        "cache_write": u.cache_write,
        "total_tokens": u.total_tokens,
        "cost": _cost_to_json(u.cost),
    }
    if u._extra:
        d.update(u._extra)
    return d


def _content_to_json(c: str | Sequence[ContentBlock]) -> Any:
    """A str-or-blocks content as JSON."""
    return c if isinstance(c, str) else _blocks_to_json(c)


def _content_from_json(c: Any) -> Any:
    """A str-or-blocks content from JSON."""
    return c if isinstance(c, str) else _blocks_from_json(c)


def _user_to_json(m: UserMessage) -> dict[str, Any]:
    return {
        "role": "user",
        "content": _content_to_json(m.content),
        "timestamp": m.timestamp,
    }


def _assistant_to_json(m: AssistantMessage) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": _blocks_to_json(m.content),
        "api": m.api,
        "provider": m.provider,
        "model": m.model,
        "usage": _usage_to_json(m.usage),
        "stop_reason": m.stop_reason,
        "error_message": m.error_message,
        "timestamp": m.timestamp,
    }


def _tool_result_to_json(m: ToolResultMessage) -> dict[str, Any]:
    return {
        "role": "tool_result",
        "tool_call_id": m.tool_call_id,
        "tool_name": m.tool_name,
        "content": _blocks_to_json(m.content),
        "details": m.details,
        "is_error": m.is_error,
        "timestamp": m.timestamp,
    }


def _custom_to_json(m: CustomMessage) -> dict[str, Any]:
    return {
        "role": "custom",
        "custom_type": m.custom_type,
        "content": _content_to_json(m.content),
        "display": m.display,
        "details": m.details,
        "timestamp": m.timestamp,
    }


def _compaction_summary_to_json(m: CompactionSummaryMessage) -> dict[str, Any]:
    return {
        "role": "compaction_summary",
        "summary": m.summary,
        "tokens_before": m.tokens_before,
        "timestamp": m.timestamp,
    }


def _branch_summary_to_json(m: BranchSummaryMessage) -> dict[str, Any]:
    return {
        "role": "branch_summary",
        "summary": m.summary,
        "from_id": m.from_id,
        "timestamp": m.timestamp,
    }


def _unknown_to_json(m: UnknownMessage) -> dict[str, Any]:
    return m.data


_MESSAGE_WRITERS: Final[dict[type, _Writer]] = {
    UserMessage: _user_to_json,
    AssistantMessage: _assistant_to_json,
    ToolResultMessage: _tool_result_to_json,
    CustomMessage: _custom_to_json,
    CompactionSummaryMessage: _compaction_summary_to_json,
    BranchSummaryMessage: _branch_summary_to_json,
    UnknownMessage: _unknown_to_json,
}


def message_to_dict(message: AgentMessage) -> dict[str, Any]:
    """Convert a message to its FORMAT.md JSON object.

    Keys come out as ``role`` first, then the role's fields in FORMAT.md order, every field
    written (``null`` included); content blocks omit ``signature`` when ``None`` and
    ``redacted`` when false.  An :class:`UnknownMessage` returns its ``data`` as is.

    Args:
        message: any :data:`AgentMessage`.

    Returns:
        A JSON-ready dict (``details`` and tool arguments are included by reference).

    Raises:
        SessionError: ``invalid_argument`` if ``message`` is not a message.

    >>> message_to_dict(CompactionSummaryMessage("S", 10, timestamp=5))
    {'role': 'compaction_summary', 'summary': 'S', 'tokens_before': 10, 'timestamp': 5}
    """
    cls = type(message)
    writer = _MESSAGE_WRITERS.get(cls) or _lookup(_MESSAGE_WRITERS, cls)
    if writer is None:
        raise SessionError("invalid_argument", f"not a message: {cls.__name__}")
    d = writer(message)
    if message._extra:
        d.update(message._extra)
    return d


# --------------------------------------------------------------------------- JSON: reading

_Reader = Callable[[dict[str, Any]], Any]


def _text_from_json(b: dict[str, Any]) -> TextContent:
    return TextContent(b["text"], b.get("signature"))


def _thinking_from_json(b: dict[str, Any]) -> ThinkingContent:
    return ThinkingContent(b["thinking"], b.get("signature"), b.get("redacted", False))


def _image_from_json(b: dict[str, Any]) -> ImageContent:
    return ImageContent(b["data"], b["mime_type"])


def _tool_call_from_json(b: dict[str, Any]) -> ToolCall:
    return ToolCall(b["id"], b["name"], b["arguments"])


_BLOCK_READERS: Final[dict[str, _Reader]] = {
    "text": _text_from_json,
    "thinking": _thinking_from_json,
    "image": _image_from_json,
    "tool_call": _tool_call_from_json,
}
# Known keys per type come from the engine's model table: declared once, in Rust.
_BLOCK_KEYS: Final = model_keys(TextContent, ThinkingContent, ImageContent, ToolCall)
_COST_KEYS: Final = model_keys(Cost)["Cost"]
_USAGE_KEYS: Final = model_keys(Usage)["Usage"]


def _block_from_json(b: Any) -> ContentBlock:
    if not isinstance(b, dict):
        raise _corrupt(f"a content block must be an object, got {type(b).__name__}")
    kind = b.get("type")
    if not isinstance(kind, str) or kind not in _BLOCK_READERS:
        raise _corrupt(f"unknown content block type {kind!r}")
    try:
        block: ContentBlock = _BLOCK_READERS[kind](b)
    except KeyError as exc:
        raise _corrupt(f"{kind} content block is missing field {exc.args[0]!r}") from None
    keys = _BLOCK_KEYS[kind]
    if not b.keys() <= keys:
        _keep_extra(block, b, keys)
    return block


def _blocks_from_json(value: Any) -> Any:
    """Parse a list of blocks; anything else is returned for the constructor to reject."""
    if isinstance(value, list):
        return tuple([_block_from_json(b) for b in value])
    return value


def _cost_from_json(c: Any) -> Cost:
    if c is None:
        return _ZERO_COST
    if not isinstance(c, dict):
        raise _corrupt(f"usage.cost must be an object, got {type(c).__name__}")
    cost = Cost(
        c.get("input", 0.0),
        c.get("output", 0.0),
        c.get("cache_read", 0.0),
        c.get("cache_write", 0.0),
        c.get("total", 0.0),
    )
    if not c.keys() <= _COST_KEYS:
        _keep_extra(cost, c, _COST_KEYS)
    return cost


def _usage_from_json(u: Any) -> Usage:
    """Parse a usage object; missing counts are 0, a missing ``cost`` is all zeros."""
    if not isinstance(u, dict):
        raise _corrupt(f"usage must be an object, got {type(u).__name__}")
    usage = Usage(
        u.get("input", 0),
        u.get("output", 0),
        u.get("cache_read", 0),
        u.get("cache_write", 0),
        u.get("total_tokens", 0),
        _cost_from_json(u.get("cost")),
    )
    if not u.keys() <= _USAGE_KEYS:
        _keep_extra(usage, u, _USAGE_KEYS)
    return usage


def _user_from_json(d: dict[str, Any]) -> UserMessage:
    return UserMessage(_content_from_json(d["content"]), d["timestamp"])


def _assistant_from_json(d: dict[str, Any]) -> AssistantMessage:
    usage = d.get("usage")
    return AssistantMessage(
        _blocks_from_json(d["content"]),
        d["provider"],
        d["model"],
        d.get("api"),
        _ZERO_USAGE if usage is None else _usage_from_json(usage),
        d.get("stop_reason", "stop"),
        d.get("error_message"),
        d["timestamp"],
    )


def _tool_result_from_json(d: dict[str, Any]) -> ToolResultMessage:
    return ToolResultMessage(
        d["tool_call_id"],
        d["tool_name"],
        _blocks_from_json(d["content"]),
        d.get("is_error", False),
        d.get("details"),
        d["timestamp"],
    )


def _custom_from_json(d: dict[str, Any]) -> CustomMessage:
    return CustomMessage(
        d["custom_type"],
        _content_from_json(d["content"]),
        d.get("display", True),
        d.get("details"),
        d["timestamp"],
    )


def _compaction_summary_from_json(d: dict[str, Any]) -> CompactionSummaryMessage:
    return CompactionSummaryMessage(d["summary"], d["tokens_before"], d["timestamp"])


def _branch_summary_from_json(d: dict[str, Any]) -> BranchSummaryMessage:
    return BranchSummaryMessage(d["summary"], d["from_id"], d["timestamp"])


_MESSAGE_READERS: Final[dict[str, _Reader]] = {
    "user": _user_from_json,
    "assistant": _assistant_from_json,
    "tool_result": _tool_result_from_json,
    "custom": _custom_from_json,
    "compaction_summary": _compaction_summary_from_json,
    "branch_summary": _branch_summary_from_json,
}
_MESSAGE_KEYS: Final = model_keys(*(c for c in _MESSAGE_CLASSES if c is not UnknownMessage))


def message_from_dict(d: Any) -> AgentMessage:
    """Build a message from its FORMAT.md JSON object.

    An unknown ``role`` gives an :class:`UnknownMessage` holding ``d`` itself.  For a known
    role, fields with a constructor default may be missing (``timestamp`` may not: reading
    must not depend on the clock); unknown extra keys are kept aside and written back by
    :func:`message_to_dict`, but take no part in equality.

    Args:
        d: the decoded JSON object.

    Returns:
        The message.

    Raises:
        SessionError: ``corrupt`` if ``d`` is not an object, has no string ``role``, or a
            known role has a missing or invalid field (the message names it).

    >>> message_from_dict({"role": "user", "content": "Hi", "timestamp": 0})
    UserMessage(content='Hi', timestamp=0)
    """
    if not isinstance(d, dict):
        raise _corrupt(f"a message must be an object, got {type(d).__name__}")
    role = d.get("role")
    if not isinstance(role, str):
        raise _corrupt(f"a message needs a string 'role', got {role!r}")
    reader = _MESSAGE_READERS.get(role)
    try:
        with _reading():
            if reader is None:
                return UnknownMessage(role, d)
            message: AgentMessage = reader(d)
    except KeyError as exc:
        raise _corrupt(f"{role} message is missing field {exc.args[0]!r}") from None
    except SessionError as exc:
        raise _corrupt(f"invalid {role} message: {exc.message}") from None
    keys = _MESSAGE_KEYS[role]
    if not d.keys() <= keys:
        _keep_extra(message, d, keys)
    return message


# --------------------------------------------------------------------------- entry helpers


def create_custom_message(
    custom_type: str,
    content: str | Sequence[UserContentBlock],
    display: bool,
    details: Any,
    timestamp: str,
) -> CustomMessage:
    """Build the :class:`CustomMessage` of a ``custom_message`` entry.

    Args:
        custom_type: the application's message kind.
        content: the text (or text and image blocks).
        display: whether a UI should show it.
        details: any JSON value for the application.
        timestamp: the entry's ISO-8601 timestamp (converted to Unix ms).

    Returns:
        The message.

    Raises:
        SessionError: ``invalid_argument`` on a bad timestamp or field.

    >>> create_custom_message("note", "hi", True, None, "1970-01-01T00:00:01.000Z").timestamp
    1000
    """
    return CustomMessage(custom_type, content, display, details, iso_to_ms(timestamp))


def create_compaction_summary_message(
    summary: str, tokens_before: int, timestamp: str
) -> CompactionSummaryMessage:
    """Build the :class:`CompactionSummaryMessage` of a ``compaction`` entry.

    Args:
        summary: the summary text.
        tokens_before: the context size before the compaction.
        timestamp: the entry's ISO-8601 timestamp (converted to Unix ms).

    Returns:
        The message.

    Raises:
        SessionError: ``invalid_argument`` on a bad timestamp or field.

    >>> create_compaction_summary_message("S", 9, "1970-01-01T00:00:00.002Z").timestamp
    2
    """
    ms = iso_to_ms(timestamp)
    # The values come from an entry, checked when it was made; one read from an older
    # file may hold a negative count, and its context must still build.
    with _reading():
        return CompactionSummaryMessage(summary, tokens_before, ms)


def create_branch_summary_message(
    summary: str, from_id: str, timestamp: str
) -> BranchSummaryMessage:
    """Build the :class:`BranchSummaryMessage` of a ``branch_summary`` entry.

    Args:
        summary: the summary text.
        from_id: the entry the branch was left from.
        timestamp: the entry's ISO-8601 timestamp (converted to Unix ms).

    Returns:
        The message.

    Raises:
        SessionError: ``invalid_argument`` on a bad timestamp or field.

    >>> create_branch_summary_message("S", "a1b2c3d4", "1970-01-01T00:00:00Z").timestamp
    0
    """
    return BranchSummaryMessage(summary, from_id, iso_to_ms(timestamp))
