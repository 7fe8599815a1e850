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

import itertools
import reprlib
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeAlias

from .. import _core
from .._util import iso_to_ms, now_ms
from ..errors import SessionError
from . import _table

if TYPE_CHECKING:
    from collections.abc import Sequence

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

_REPR_LIMIT: Final = _table.REPR_LIMIT
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


_short = _table.short_repr


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


# Constructor checks, the rules a user is held to and the JSON codec are made from the
# engine's model table (``_table``); the names below are what the model's modules use.
_invalid = _table.invalid
_corrupt = _table.corrupt
_reading = _table.reading
_check_json_keys = _table.json_keys

BASH_EXECUTION_ROLE: Final = "bash_execution"
"""The role pi's shell runs (``!cmd``) read as: an :class:`UnknownMessage` whose ``data``
has ``command``, ``output``, ``exit_code``, ``cancelled``, ``truncated``,
``full_output_path`` and ``exclude_from_context`` (see ``sessiontree.dialects.pi``)."""


def _content_text(content: str | Sequence[ContentBlock]) -> str:
    """The text of a message's content: the str itself, or its text blocks joined by
    newlines (images and other blocks left out)."""
    if isinstance(content, str):
        return content
    return "\n".join(b.text for b in content if isinstance(b, TextContent))


@dataclass(frozen=True, slots=True, repr=False)
class _Value:
    """Shared base: checks its fields by the model table, keeps unknown JSON fields and
    gives a short, default-skipping repr."""

    # Fields read from JSON that this version does not know; written back unchanged.
    _extra: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    # Field names the repr leaves out (entries omit their timestamp).
    _REPR_SKIP: ClassVar[frozenset[str]] = frozenset()

    def __repr__(self) -> str:
        parts = []
        skip = self._REPR_SKIP
        for f in fields(self):
            if not f.repr or f.name in skip:
                continue
            value = getattr(self, f.name)
            if f.default is not MISSING and _table.is_default(value, f.default):
                continue
            parts.append(f"{f.name}={_fmt(value)}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def __post_init__(self) -> None:
        # Every field by its kind and rule in the model table (``_table.check``).
        _table.check(self)


# --------------------------------------------------------------------------- content blocks


@dataclass(frozen=True, slots=True, repr=False)
class TextContent(_Value):
    """A block of text.

    Attributes:
        text: the text.
        signature: an opaque provider signature, or ``None``.

    >>> TextContent("Hello")
    TextContent(text='Hello')
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    text: str
    signature: str | None = None

    @property
    def type(self) -> Literal["text"]:
        """``"text"``, the JSON ``type`` of this class."""
        return "text"


@dataclass(frozen=True, slots=True, repr=False)
class ThinkingContent(_Value):
    """A block of model reasoning.

    Attributes:
        thinking: the reasoning text (may be empty when ``redacted``).
        signature: an opaque provider signature, or ``None``.
        redacted: whether the provider redacted the reasoning.

    >>> ThinkingContent("Let me think", redacted=True)
    ThinkingContent(thinking='Let me think', redacted=True)
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    thinking: str
    signature: str | None = None
    redacted: bool = False

    @property
    def type(self) -> Literal["thinking"]:
        """``"thinking"``, the JSON ``type`` of this class."""
        return "thinking"


@dataclass(frozen=True, slots=True, repr=False)
class ImageContent(_Value):
    """An image, base64-encoded.

    Attributes:
        data: the base64 text of the image bytes.
        mime_type: e.g. ``"image/png"``.

    >>> ImageContent("iVBORw0KGgo=", "image/png")
    ImageContent(mime_type='image/png', data=<12 chars>)
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    data: str
    mime_type: str

    @property
    def type(self) -> Literal["image"]:
        """``"image"``, the JSON ``type`` of this class."""
        return "image"

    def __repr__(self) -> str:
        # The payload is base64 and often megabytes long; its size is what is useful here.
        return f"ImageContent(mime_type={self.mime_type!r}, data=<{len(self.data)} chars>)"


@dataclass(frozen=True, slots=True, repr=False)
class ToolCall(_Value):
    """A tool invocation requested by the assistant.

    Attributes:
        id: the provider's tool-call id, echoed by the matching :class:`ToolResultMessage`.
        name: the tool name.
        arguments: the JSON arguments object (kept as given; do not mutate it).

    >>> ToolCall("call_1", "read", {"path": "README.md"})
    ToolCall(id='call_1', name='read', arguments={'path': 'README.md'})
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    id: str
    name: str
    arguments: dict[str, Any]

    @property
    def type(self) -> Literal["tool_call"]:
        """``"tool_call"``, the JSON ``type`` of this class."""
        return "tool_call"


ContentBlock: TypeAlias = TextContent | ThinkingContent | ImageContent | ToolCall
"""Any content block."""
UserContentBlock: TypeAlias = TextContent | ImageContent
"""A block allowed in user and tool-result content."""
AssistantContentBlock: TypeAlias = TextContent | ThinkingContent | ToolCall
"""A block allowed in assistant content."""

_USER_BLOCKS: Final = (TextContent, ImageContent)
_ASSISTANT_BLOCKS: Final = (TextContent, ThinkingContent, ToolCall)


# --------------------------------------------------------------------------- usage


@dataclass(frozen=True, slots=True, repr=False)
class Cost(_Value):
    """Money spent on one call, per token class (ints are stored as floats).

    >>> Cost(input=0.25, total=0.25)
    Cost(input=0.25, total=0.25)
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0


def _at_defaults(cls: type) -> Any:
    """An instance of ``cls`` with every field at its default, made without ``__init__``
    (the model's checks are registered at the end of the module)."""
    obj: Any = object.__new__(cls)
    for f in fields(cls):
        object.__setattr__(obj, f.name, f.default)
    return obj


# The zero usage and cost: defaults, and what a missing or null one reads as.
_ZERO_COST: Final = _at_defaults(Cost)


@dataclass(frozen=True, slots=True, repr=False)
class Usage(_Value):
    """Token counts and cost of one model call.

    >>> Usage(input=10, output=5, total_tokens=15)
    Usage(input=10, output=5, total_tokens=15)
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: Cost = _ZERO_COST


_ZERO_USAGE: Final = _at_defaults(Usage)


# --------------------------------------------------------------------------- messages


@dataclass(frozen=True, slots=True, repr=False)
class UserMessage(_Value):
    """A message from the user.

    Attributes:
        content: a str, or a sequence of :class:`TextContent` / :class:`ImageContent`
            (stored as a tuple).
        timestamp: Unix milliseconds; defaults to now.

    >>> UserMessage("Fix the tests", timestamp=1764521310123)
    UserMessage(content='Fix the tests', timestamp=1764521310123)
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    content: str | Sequence[UserContentBlock]
    timestamp: int = field(default_factory=now_ms)

    @property
    def role(self) -> Literal["user"]:
        """``"user"``, the JSON ``role`` of this class."""
        return "user"


@dataclass(frozen=True, slots=True, repr=False)
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

    # Fields: as the model table declares them (tests/model/test_model_table.py).
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
        """``"assistant"``, the JSON ``role`` of this class."""
        return "assistant"


@dataclass(frozen=True, slots=True, repr=False)
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

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    tool_call_id: str
    tool_name: str
    content: Sequence[UserContentBlock]
    is_error: bool = False
    details: Any = None
    timestamp: int = field(default_factory=now_ms)

    @property
    def role(self) -> Literal["tool_result"]:
        """``"tool_result"``, the JSON ``role`` of this class."""
        return "tool_result"


@dataclass(frozen=True, slots=True, repr=False)
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

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    custom_type: str
    content: str | Sequence[UserContentBlock]
    display: bool = True
    details: Any = None
    timestamp: int = field(default_factory=now_ms)

    @property
    def role(self) -> Literal["custom"]:
        """``"custom"``, the JSON ``role`` of this class."""
        return "custom"


@dataclass(frozen=True, slots=True, repr=False)
class CompactionSummaryMessage(_Value):
    """The summary that stands in for the entries a compaction dropped.

    Attributes:
        summary: the summary text.
        tokens_before: the context size in tokens before the compaction.
        timestamp: Unix milliseconds; defaults to now.

    >>> CompactionSummaryMessage("We fixed the parser.", 12000, timestamp=0)
    CompactionSummaryMessage(summary='We fixed the parser.', tokens_before=12000, timestamp=0)
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    summary: str
    tokens_before: int
    timestamp: int = field(default_factory=now_ms)

    @property
    def role(self) -> Literal["compaction_summary"]:
        """``"compaction_summary"``, the JSON ``role`` of this class."""
        return "compaction_summary"


@dataclass(frozen=True, slots=True, repr=False)
class BranchSummaryMessage(_Value):
    """The summary of a branch the session moved away from.

    Attributes:
        summary: the summary text.
        from_id: the entry the branch was left from.
        timestamp: Unix milliseconds; defaults to now.

    >>> BranchSummaryMessage("Tried a regex; abandoned.", "a1b2c3d4", timestamp=0)
    BranchSummaryMessage(summary='Tried a regex; abandoned.', from_id='a1b2c3d4', timestamp=0)
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    summary: str
    from_id: str
    timestamp: int = field(default_factory=now_ms)

    @property
    def role(self) -> Literal["branch_summary"]:
        """``"branch_summary"``, the JSON ``role`` of this class."""
        return "branch_summary"


@dataclass(frozen=True, slots=True, repr=False)
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
        # Not in the model table (its fields are whatever the role's writer wrote).
        if not isinstance(self.role, str):
            raise _invalid(self, "role", "a str", self.role)
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


# --------------------------------------------------------------------------- JSON

_table.register(
    TextContent,
    ThinkingContent,
    ImageContent,
    ToolCall,
    Cost,
    Usage,
    *_MESSAGE_CLASSES[:-1],
    unknown={"role": UnknownMessage},
)


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
    if not isinstance(message, _MESSAGE_CLASSES):
        raise SessionError("invalid_argument", f"not a message: {type(message).__name__}")
    d: dict[str, Any] = _core.to_dict(message)
    return d


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
    try:
        with _reading():
            message: AgentMessage | None = _table.read_tagged("role", d, "message")
            return UnknownMessage(role, d) if message is None else message
    except SessionError as exc:
        if exc.code == "corrupt":
            raise
        raise _corrupt(f"invalid {role} message: {exc.message}") from None


_table.set_message_reader(message_from_dict)


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
