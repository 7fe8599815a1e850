"""Session entries (the nodes of the tree) and the session header.

Every entry is an immutable value (a frozen, slotted dataclass, equal by value) with the
attributes ``type``, ``id``, ``parent_id`` and ``timestamp`` (ISO-8601 text).  Constructors
take the type's own fields by position or keyword, in the documented order, and ``id``,
``parent_id`` and ``timestamp`` by keyword only (``ModelChangeEntry("anthropic", "claude",
id=..., parent_id=..., timestamp=...)``); ``__match_args__`` is the type's own fields.
``type`` is fixed by the class.  Sequences are stored as tuples; ``details`` and ``data``
values are stored as given and must not be mutated afterwards.  As for messages, a value a
user can get wrong is refused where it is made (a negative ``tokens_before``, an empty
``provider`` or ``model_id``, a dict key that is not a ``str`` in ``data``, ``details`` or
header ``metadata``), while the readers accept what earlier versions wrote.

:func:`entry_to_json` and :func:`entry_from_json` convert one JSONL line to and from an
entry.  Fields this version does not know (from a newer or foreign writer) are kept on the
object, take no part in equality, and are written back after the known fields.

>>> e = LabelEntry(id="b2", parent_id="a1", timestamp="2026-11-30T16:48:30.123Z",
...                target_id="a1", label="checkpoint")
>>> entry_to_json(e)
b'{"type":"label","id":"b2","parent_id":"a1","timestamp":"2026-11-30T16:48:30.123Z",\
"target_id":"a1","label":"checkpoint"}'
>>> entry_from_json(entry_to_json(e)) == e
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeAlias

from .. import _core
from .._util import iso_to_datetime, now_iso, once, uuid7
from ..errors import SessionError
from . import _table
from .messages import (
    AgentMessage,
    Usage,
    UserContentBlock,
    _corrupt,
    _fmt,
    _invalid,
    _preview_text,
    _reading,
    _short,
    _Value,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "ENTRY_TYPES",
    "FORMAT_VERSION",
    "MAX_ID_BYTES",
    "THINKING_LEVELS",
    "ActiveToolsChangeEntry",
    "BranchSummaryEntry",
    "CompactionEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "LabelEntry",
    "LeafEntry",
    "MessageEntry",
    "ModelChangeEntry",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionTreeEntry",
    "ThinkingLevel",
    "ThinkingLevelChangeEntry",
    "UnknownEntry",
    "entry_from_dict",
    "entry_from_json",
    "entry_to_dict",
    "entry_to_json",
    "header_from_dict",
    "header_from_json",
    "header_to_dict",
    "header_to_json",
]

# The constants below are declared once, in the Rust engine, and read from ``_core``.

FORMAT_VERSION: Final = _core.FORMAT_VERSION
"""The file format version this package writes (and the highest it reads)."""

MAX_ID_BYTES: Final = _core.MAX_ID_BYTES
"""The longest entry id accepted, in UTF-8 bytes."""

# Type checkers need the values spelled out; tests/test_constants.py checks that they
# equal ``THINKING_LEVELS``.
ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
"""How much reasoning the model is asked for."""

THINKING_LEVELS: Final[tuple[str, ...]] = _core.THINKING_LEVELS
"""The allowed thinking levels, lowest first."""

ENTRY_TYPES: Final[tuple[str, ...]] = _core.ENTRY_TYPES
"""The entry ``type`` values this version knows; any other loads as :class:`UnknownEntry`."""


# --------------------------------------------------------------------------- entry classes


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class SessionTreeEntry(_Value):
    """The common base of every entry; not instantiated directly.

    Its fields are keyword-only (``kw_only`` here), so a concrete entry type's own fields,
    declared without ``kw_only``, are its positional parameters.

    Attributes:
        type: the entry's JSON ``type`` (fixed per class).
        id: the entry id, unique within the session (1-256 UTF-8 bytes).
        parent_id: the id of the parent entry, or ``None`` for a root.
        timestamp: when the entry was written, ISO-8601 UTC (``2026-11-30T16:48:30.123Z``).
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    id: str
    parent_id: str | None
    timestamp: str

    _REPR_SKIP: ClassVar[frozenset[str]] = frozenset({"timestamp"})

    @property
    def type(self) -> str:
        """The entry's JSON ``type``."""
        raise NotImplementedError

    def __post_init__(self) -> None:
        if self.__class__ is SessionTreeEntry:
            raise TypeError("SessionTreeEntry is abstract; build a concrete entry class")
        # Every field, the base ones first, by its kind and rule in the model table.
        _table.check(self)


@dataclass(frozen=True, slots=True, repr=False)
class MessageEntry(SessionTreeEntry):
    """An entry holding one conversation message.

    Attributes:
        message: the :data:`~sessiontree.model.messages.AgentMessage`.

    >>> from sessiontree.model.messages import UserMessage
    >>> MessageEntry(UserMessage("Hello", timestamp=0),
    ...              id="a1b2c3d4", parent_id=None, timestamp="2026-11-30T16:48:30.123Z")
    MessageEntry(id='a1b2c3d4', parent_id=None, role='user', text='Hello')
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    message: AgentMessage

    @property
    def type(self) -> Literal["message"]:
        """``"message"``, the JSON ``type`` of this class."""
        return "message"

    def __repr__(self) -> str:
        return (
            f"MessageEntry(id={self.id!r}, parent_id={self.parent_id!r}, "
            f"role={self.message.role!r}, text={_short(_preview_text(self.message))})"
        )


@dataclass(frozen=True, slots=True, repr=False)
class ThinkingLevelChangeEntry(SessionTreeEntry):
    """Sets the thinking level from here on.

    Attributes:
        thinking_level: one of :data:`THINKING_LEVELS`.
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    thinking_level: ThinkingLevel

    @property
    def type(self) -> Literal["thinking_level_change"]:
        """``"thinking_level_change"``, the JSON ``type`` of this class."""
        return "thinking_level_change"


@dataclass(frozen=True, slots=True, repr=False)
class ModelChangeEntry(SessionTreeEntry):
    """Sets the model from here on.

    Attributes:
        provider: e.g. ``"anthropic"``.
        model_id: e.g. ``"claude-sonnet-4-5"``.
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    provider: str
    model_id: str

    @property
    def type(self) -> Literal["model_change"]:
        """``"model_change"``, the JSON ``type`` of this class."""
        return "model_change"


@dataclass(frozen=True, slots=True, repr=False)
class ActiveToolsChangeEntry(SessionTreeEntry):
    """Sets the active tools from here on.

    Attributes:
        active_tool_names: the tool names (stored as a tuple).
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    active_tool_names: Sequence[str]

    @property
    def type(self) -> Literal["active_tools_change"]:
        """``"active_tools_change"``, the JSON ``type`` of this class."""
        return "active_tools_change"


@dataclass(frozen=True, slots=True, repr=False)
class CompactionEntry(SessionTreeEntry):
    """Replaces the context before it with a summary.

    Attributes:
        summary: the summary text.
        first_kept_entry_id: the first entry still sent after the summary, or ``None``.
        tokens_before: the context size in tokens before the compaction.
        retained_tail: messages kept verbatim after the summary (stored as a tuple), or
            ``None`` to keep the entries from ``first_kept_entry_id`` instead.
        details: any JSON value for the application.
        usage: the tokens and cost of producing the summary, or ``None``.
        from_hook: whether an extension rather than the agent made it.
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    summary: str
    first_kept_entry_id: str | None
    tokens_before: int
    retained_tail: Sequence[AgentMessage] | None = None
    details: Any = None
    usage: Usage | None = None
    from_hook: bool = False

    @property
    def type(self) -> Literal["compaction"]:
        """``"compaction"``, the JSON ``type`` of this class."""
        return "compaction"


@dataclass(frozen=True, slots=True, repr=False)
class BranchSummaryEntry(SessionTreeEntry):
    """Summarises the branch the session moved away from.

    Attributes:
        from_id: the entry the session moved to (this entry hangs under it).
        summary: the summary text.
        details: any JSON value for the application.
        usage: the tokens and cost of producing the summary, or ``None``.
        from_hook: whether an extension rather than the agent made it.
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    from_id: str
    summary: str
    details: Any = None
    usage: Usage | None = None
    from_hook: bool = False

    @property
    def type(self) -> Literal["branch_summary"]:
        """``"branch_summary"``, the JSON ``type`` of this class."""
        return "branch_summary"


@dataclass(frozen=True, slots=True, repr=False)
class CustomEntry(SessionTreeEntry):
    """Application data that is not sent to the model (unless a projector maps it).

    Attributes:
        custom_type: the application's name for this kind of entry.
        data: any JSON value.
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    custom_type: str
    data: Any = None

    @property
    def type(self) -> Literal["custom"]:
        """``"custom"``, the JSON ``type`` of this class."""
        return "custom"


@dataclass(frozen=True, slots=True, repr=False)
class CustomMessageEntry(SessionTreeEntry):
    """An application message that is sent to the model as a custom message.

    Attributes:
        custom_type: the application's name for this kind of message.
        content: the text, or a sequence of :class:`TextContent` / :class:`ImageContent`
            (stored as a tuple), as pi writes some.
        details: any JSON value for the application.
        display: whether a UI should show it.
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    custom_type: str
    content: str | Sequence[UserContentBlock]
    details: Any = None
    display: bool = True

    @property
    def type(self) -> Literal["custom_message"]:
        """``"custom_message"``, the JSON ``type`` of this class."""
        return "custom_message"


@dataclass(frozen=True, slots=True, repr=False)
class LabelEntry(SessionTreeEntry):
    """Sets (or with ``None`` clears) the label of another entry.

    Attributes:
        target_id: the labelled entry.
        label: the label text, or ``None`` to clear it. Never empty: ``""`` is refused
            with ``invalid_argument`` (a file that holds one still loads).
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    target_id: str
    label: str | None

    @property
    def type(self) -> Literal["label"]:
        """``"label"``, the JSON ``type`` of this class."""
        return "label"


@dataclass(frozen=True, slots=True, repr=False)
class SessionInfoEntry(SessionTreeEntry):
    """Names the session (the last one in the file wins).

    Attributes:
        name: the session name, or ``None`` to clear it.
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    name: str | None

    @property
    def type(self) -> Literal["session_info"]:
        """``"session_info"``, the JSON ``type`` of this class."""
        return "session_info"


@dataclass(frozen=True, slots=True, repr=False)
class LeafEntry(SessionTreeEntry):
    """Moves the leaf (where the next entry hangs) to ``target_id``.

    Attributes:
        target_id: the new leaf, or ``None`` for "before the first entry".
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    target_id: str | None

    @property
    def type(self) -> Literal["leaf"]:
        """``"leaf"``, the JSON ``type`` of this class."""
        return "leaf"


@dataclass(frozen=True, slots=True, repr=False)
class UnknownEntry(SessionTreeEntry):
    """An entry whose ``type`` this version does not know, kept verbatim.

    Attributes:
        type: the entry's ``type``.
        data: the whole entry object as read; written back unchanged. Its ``type``, ``id``,
            ``parent_id`` and ``timestamp`` must match the attributes. Do not mutate it.
    """

    # A field here, a fixed property on the known types; ``field()`` so the inherited
    # property is not taken for its default (the field is required and positional).
    type: str = field()
    data: dict[str, Any]

    def __post_init__(self) -> None:
        # The base fields by the model table; the rest is whatever the type's writer wrote.
        _table.check(self)
        if not isinstance(self.type, str):
            raise _invalid(self, "type", "a str", self.type)
        if self.type in ENTRY_TYPES:
            raise SessionError(
                "invalid_argument",
                f"UnknownEntry.type {self.type!r} is a known type; use its entry class",
            )
        data = self.data
        if not isinstance(data, dict):
            raise _invalid(self, "data", "a dict", data)
        _table.json_keys(self, "data", data)
        if (
            data.get("type") != self.type
            or data.get("id") != self.id
            or data.get("parent_id") != self.parent_id
            or data.get("timestamp") != self.timestamp
        ):
            raise SessionError(
                "invalid_argument",
                "UnknownEntry.data must hold the same type, id, parent_id and timestamp",
            )


_KNOWN_ENTRY_CLASSES: Final = (
    MessageEntry,
    ThinkingLevelChangeEntry,
    ModelChangeEntry,
    ActiveToolsChangeEntry,
    CompactionEntry,
    BranchSummaryEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    SessionInfoEntry,
    LeafEntry,
)
"""The classes of the entry types this version knows (``UnknownEntry`` holds the rest)."""


# --------------------------------------------------------------------------- JSON reading


def _make_decoder() -> Any:
    """``json``'s decoder, made on first use: importing ``json`` (and ``re`` under it) is a
    quarter of ``import sessiontree``, and the engine-backed storages read in Rust."""
    import json

    # ``parse_constant`` turns Python's NaN/Infinity extension back into an error.
    return json.JSONDecoder(parse_constant=_reject_constant)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_decoder: Final = once(_make_decoder)


def _loads(raw: bytes | bytearray | memoryview | str, what: str) -> Any:
    if isinstance(raw, str):
        text = raw
    elif isinstance(raw, (bytes, bytearray, memoryview)):
        try:
            text = str(raw, "utf-8")
        except UnicodeDecodeError as exc:
            raise _corrupt(f"{what} is not valid UTF-8: {exc.reason} at byte {exc.start}") from None
    else:
        raise SessionError(
            "invalid_argument", f"{what} must be bytes or str, got {type(raw).__name__}"
        )
    try:
        return _decoder().decode(text)
    except ValueError as exc:
        raise _corrupt(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise _corrupt(f"{what} is nested too deeply") from None


# --------------------------------------------------------------------------- entries: JSON
#
# Written by the engine's writer (``_core.to_json``/``to_dict``, driven by the model table)
# and read by the model table (``_table``); the classes are registered with both below the
# header.


def entry_to_dict(entry: SessionTreeEntry) -> dict[str, Any]:
    """Convert an entry to its FORMAT.md JSON object.

    Keys come out as ``type``, ``id``, ``parent_id``, ``timestamp``, then the type's fields in
    FORMAT.md order, every field written (``null`` included).  An :class:`UnknownEntry`
    returns its ``data`` as is.

    Args:
        entry: any entry.

    Returns:
        A JSON-ready dict (``details``/``data`` values are included by reference).

    Raises:
        SessionError: ``invalid_argument`` if ``entry`` is not an entry.

    >>> entry_to_dict(LeafEntry(id="c3", parent_id="b2", timestamp="T", target_id="a1"))
    {'type': 'leaf', 'id': 'c3', 'parent_id': 'b2', 'timestamp': 'T', 'target_id': 'a1'}
    """
    if not isinstance(entry, SessionTreeEntry) or entry.__class__ is SessionTreeEntry:
        raise SessionError("invalid_argument", f"not a session entry: {type(entry).__name__}")
    d: dict[str, Any] = _core.to_dict(entry)
    return d


def entry_to_json(entry: SessionTreeEntry) -> bytes:
    """Serialise an entry as one compact JSON line (UTF-8, no trailing newline).

    Args:
        entry: any entry.

    Returns:
        The JSON bytes.

    Raises:
        SessionError: ``invalid_argument`` if ``entry`` is not an entry or holds values JSON
            cannot carry (NaN or infinite floats, non-serialisable or circular ``details``;
            the message names the field); ``limit_exceeded`` if it nests deeper than a
            session file may (128 levels).

    The line is written in Rust from the model table (``rust/py/encode.rs``), byte for
    byte as earlier versions wrote it; a subclass of an entry class is written as the
    class it derives from.

    >>> entry_to_json(SessionInfoEntry(id="a1", parent_id=None, timestamp="T", name="é"))
    b'{"type":"session_info","id":"a1","parent_id":null,"timestamp":"T","name":"\\xc3\\xa9"}'
    """
    if not isinstance(entry, SessionTreeEntry) or entry.__class__ is SessionTreeEntry:
        raise SessionError("invalid_argument", f"not a session entry: {type(entry).__name__}")
    return _core.to_json(entry, "entry")


# --------------------------------------------------------------------------- entries: reading


def entry_from_dict(d: Any) -> SessionTreeEntry:
    """Build an entry from its decoded JSON object.

    An unknown ``type`` gives an :class:`UnknownEntry` holding ``d`` itself.  For a known
    type, fields with a constructor default may be missing; ``id``, ``parent_id`` and
    ``timestamp`` may not.  Unknown extra keys are kept aside and written back by
    :func:`entry_to_dict`, but take no part in equality.

    Args:
        d: the decoded JSON object.

    Returns:
        The entry.

    Raises:
        SessionError: ``corrupt`` if ``d`` is not an object, has no string ``type``, or has
            a missing or invalid field (the message names the entry and the field).

    >>> entry_from_dict({"type": "leaf", "id": "c3", "parent_id": None, "timestamp": "T",
    ...                  "target_id": None})
    LeafEntry(id='c3', parent_id=None, target_id=None)
    """
    if not isinstance(d, dict):
        raise _corrupt(f"an entry must be a JSON object, got {type(d).__name__}")
    kind = d.get("type")
    if not isinstance(kind, str):
        raise _corrupt(f"an entry needs a string 'type', got {_fmt(kind)}")
    what = f"entry {_fmt(d.get('id'))}"
    try:
        with _reading():
            if kind not in ENTRY_TYPES:
                return UnknownEntry(
                    kind, d, id=d["id"], parent_id=d["parent_id"], timestamp=d["timestamp"]
                )
            entry: SessionTreeEntry = _table.read_tagged("type", d, what)
            return entry
    except KeyError as exc:
        raise _corrupt(f"{kind} {what} is missing field {exc.args[0]!r}") from None
    except SessionError as exc:
        if exc.code == "corrupt":
            raise
        raise _corrupt(f"invalid {kind} {what}: {exc.message}") from None


def entry_from_json(raw: bytes | bytearray | memoryview | str) -> SessionTreeEntry:
    """Parse one JSONL line into an entry.

    Args:
        raw: the line as UTF-8 bytes (``bytes``, ``bytearray`` or ``memoryview``) or str;
            surrounding whitespace, including the newline, is ignored.

    Returns:
        The entry (see :func:`entry_from_dict`).

    Raises:
        SessionError: ``corrupt`` for invalid UTF-8, invalid JSON (NaN and Infinity
            included), or an invalid entry; ``invalid_argument`` if ``raw`` has another type.

    >>> entry_from_json(b'{"type":"session_info","id":"a1","parent_id":null,"timestamp":"T",'
    ...                 b'"name":"demo"}')
    SessionInfoEntry(id='a1', parent_id=None, name='demo')
    """
    return entry_from_dict(_loads(raw, "entry line"))


# --------------------------------------------------------------------------- header


@dataclass(frozen=True, slots=True, repr=False)
class SessionHeader(_Value):
    """Line 1 of a session file: the session's identity, not a tree node.

    Attributes:
        id: the session id (a UUIDv7 when generated).
        timestamp: creation time, ISO-8601 UTC with milliseconds and ``Z``.
        cwd: the working directory the session belongs to (an ``os.PathLike`` is
            converted to str).
        parent_session: the id of the session this one was forked from, or ``None``.
        metadata: application data (a JSON object), or ``None``.
        version: the file format version, 1 to :data:`FORMAT_VERSION`.

    >>> SessionHeader("s1", "2026-11-30T16:48:30.123Z", "/home/user/project")
    SessionHeader(id='s1', timestamp='2026-11-30T16:48:30.123Z', cwd='/home/user/project')
    """

    # Fields: as the model table declares them (tests/model/test_model_table.py).
    id: str
    timestamp: str
    cwd: str
    parent_session: str | None = None
    metadata: dict[str, Any] | None = None
    version: int = FORMAT_VERSION

    @property
    def type(self) -> Literal["session"]:
        """``"session"``, the JSON ``type`` of this class."""
        return "session"

    def __post_init__(self) -> None:
        if isinstance(self.cwd, os.PathLike):
            object.__setattr__(self, "cwd", os.fspath(self.cwd))
        # Every field by its kind in the model table, then the header's own rules, which
        # readers hold files to as well (the engine refuses such a header).
        _table.check(self)
        if not self.id:
            raise _invalid(self, "id", "a non-empty str", self.id)
        try:
            iso_to_datetime(self.timestamp)
        except SessionError:
            raise SessionError(
                "invalid_argument",
                f"SessionHeader.timestamp must be an ISO-8601 time, got {self.timestamp!r}",
            ) from None
        if not 1 <= self.version <= FORMAT_VERSION:
            raise SessionError(
                "invalid_argument",
                f"SessionHeader.version must be 1 to {FORMAT_VERSION}, got {self.version}",
            )

    @classmethod
    def generate(
        cls,
        *,
        cwd: str | os.PathLike[str] | None = None,
        parent_session: str | None = None,
        metadata: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> SessionHeader:
        """Make a header for a new session.

        Args:
            cwd: the working directory; defaults to ``os.getcwd()``.
            parent_session: the id of the session this one is forked from.
            metadata: application data (a JSON object).
            session_id: the id to use; defaults to a new UUIDv7.

        Returns:
            A header stamped with the current time.

        Raises:
            SessionError: ``invalid_argument`` if an argument has the wrong type.

        >>> SessionHeader.generate(cwd="/tmp").version
        3
        """
        return cls(
            id=uuid7() if session_id is None else session_id,
            timestamp=now_iso(),
            cwd=os.getcwd() if cwd is None else os.fspath(cwd),
            parent_session=parent_session,
            metadata=metadata,
        )


_table.register(
    SessionTreeEntry, *_KNOWN_ENTRY_CLASSES, SessionHeader, unknown={"type": UnknownEntry}
)


def header_to_dict(header: SessionHeader) -> dict[str, Any]:
    """Convert a header to its JSON object.

    Keys come out as ``type`` (``"session"``), ``version``, ``id``, ``timestamp``, ``cwd``,
    ``parent_session``, ``metadata``.

    Args:
        header: the header.

    Returns:
        A JSON-ready dict (``metadata`` is included by reference).

    Raises:
        SessionError: ``invalid_argument`` if ``header`` is not a :class:`SessionHeader`.

    >>> list(header_to_dict(SessionHeader("s1", "2026-11-30T16:48:30Z", "/")))
    ['type', 'version', 'id', 'timestamp', 'cwd', 'parent_session', 'metadata']
    """
    if not isinstance(header, SessionHeader):
        raise _invalid(header, "header", "a SessionHeader", header)
    d: dict[str, Any] = _core.to_dict(header)
    return d


def header_to_json(header: SessionHeader) -> bytes:
    """Serialise a header as one compact JSON line (UTF-8, no trailing newline).

    Args:
        header: the header.

    Returns:
        The JSON bytes.

    Raises:
        SessionError: ``invalid_argument`` if ``metadata`` cannot be written as JSON.

    >>> header_to_json(SessionHeader("s1", "2026-11-30T16:48:30Z", "/"))
    b'{"type":"session","version":3,"id":"s1","timestamp":"2026-11-30T16:48:30Z","cwd":"/",\
"parent_session":null,"metadata":null}'
    """
    if not isinstance(header, SessionHeader):
        raise _invalid(header, "header", "a SessionHeader", header)
    return _core.to_json(header, "header")


def header_from_dict(d: Any) -> SessionHeader:
    """Build a header from its decoded JSON object.

    Args:
        d: the decoded first line of a session file.

    Returns:
        The header.

    Raises:
        SessionError: ``corrupt`` if ``d`` is not a ``"session"`` object, lacks ``id``,
            ``timestamp``, ``cwd`` or ``version``, has a field of the wrong type or a
            ``timestamp`` that is not an ISO-8601 time, or has a ``version`` above
            :data:`FORMAT_VERSION`.

    >>> header = header_from_dict({"type": "session", "version": 3, "id": "s1",
    ...                            "timestamp": "2026-11-30T16:48:30.123Z", "cwd": "/"})
    >>> header.parent_session is None
    True
    """
    if not isinstance(d, dict) or d.get("type") != "session":
        raise _corrupt("missing session header: line 1 is not a 'session' object")
    version = d.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise _corrupt(f"session header 'version' must be an int, got {_fmt(version)}")
    if version > FORMAT_VERSION:
        raise _corrupt(
            f"session format version {version} is newer than this reader (up to {FORMAT_VERSION})"
        )
    try:
        with _reading():
            header: SessionHeader = _table.read_tagged("type", d, "session header")
            return header
    except SessionError as exc:
        if exc.code == "corrupt":
            raise
        raise _corrupt(f"invalid session header: {exc.message}") from None


def header_from_json(raw: bytes | bytearray | memoryview | str) -> SessionHeader:
    """Parse the first line of a session file into a header.

    Args:
        raw: the line as UTF-8 bytes or str.

    Returns:
        The header.

    Raises:
        SessionError: ``corrupt`` for invalid UTF-8 or JSON, or an invalid header.

    >>> header_from_json(
    ...     '{"type":"session","version":3,"id":"s1","timestamp":"2026-11-30T16:48:30Z","cwd":"/"}'
    ... ).id
    's1'
    """
    return header_from_dict(_loads(raw, "session header"))
