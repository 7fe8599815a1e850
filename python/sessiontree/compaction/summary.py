"""What a summarizer is given and returns, and how the conversation is serialised for it."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..errors import SessionError
from ..model.entries import SessionTreeEntry
from ..model.messages import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    Usage,
    UserMessage,
    _content_text,
)
from .plan import CompactionPlan
from .prompts import DEFAULT_TURN_PREFIX_PROMPT, SUMMARY_SYSTEM_PROMPT
from .tokens import _check_count

__all__ = [
    "AsyncSummarizer",
    "Summarizer",
    "SummaryRequest",
    "SummaryResult",
    "serialize_conversation",
]


# --------------------------------------------------------------------------- serialising


def _truncate(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters truncated]"


def _blocks_text(blocks: Sequence[Any]) -> str:
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"[image: {block.mime_type}]")
    return "\n".join(parts)


def _check_limit(value: object) -> int | None:
    if value is None:
        return None
    return _check_count("", "max_tool_result_chars", value)


def serialize_conversation(
    messages: Iterable[AgentMessage], *, max_tool_result_chars: int | None = 2000
) -> str:
    """The messages as plain text for a summarising prompt.

    Each message becomes one or more paragraphs that start with its role in brackets:
    ``[User]``, ``[Assistant]``, ``[Assistant thinking]``, ``[Assistant tool call]`` (the
    tool name and its arguments as JSON), ``[Tool result: name]`` or ``[Tool error: name]``
    (the text cut to ``max_tool_result_chars``, with a note of how much was cut),
    ``[Custom: type]``, ``[Earlier summary]``, ``[Branch summary]``, or ``[role]`` with the
    JSON of a message of unknown role (cut like a tool result). Images show as
    ``[image: mime/type]``. Serialising turns the conversation into something to read, so
    the summarising model does not take it as a dialogue to continue.

    Args:
        messages: the messages, oldest first.
        max_tool_result_chars: the longest tool result kept in full; ``None`` keeps all.

    Returns:
        The text (paragraphs separated by blank lines).

    Raises:
        SessionError: ``invalid_argument`` for a negative limit or a non-message.

    >>> from sessiontree import AssistantMessage, ToolCall
    >>> print(serialize_conversation([
    ...     UserMessage("List files", timestamp=0),
    ...     AssistantMessage([ToolCall("c1", "bash", {"cmd": "ls"})], "p", "m", timestamp=0),
    ... ]))
    [User]: List files
    <BLANKLINE>
    [Assistant tool call]: bash {"cmd":"ls"}
    """
    limit = _check_limit(max_tool_result_chars)
    out: list[str] = []
    for m in messages:
        if isinstance(m, UserMessage):
            text = m.content if isinstance(m.content, str) else _blocks_text(m.content)
            out.append(f"[User]: {text}")
        elif isinstance(m, AssistantMessage):
            for block in m.content:
                if isinstance(block, ThinkingContent):
                    if block.thinking:
                        out.append(f"[Assistant thinking]: {block.thinking}")
                elif isinstance(block, TextContent):
                    out.append(f"[Assistant]: {block.text}")
                elif isinstance(block, ToolCall):
                    args = json.dumps(
                        block.arguments, ensure_ascii=False, separators=(",", ":"), default=str
                    )
                    out.append(f"[Assistant tool call]: {block.name} {args}")
            if m.stop_reason in ("error", "aborted"):
                detail = f": {m.error_message}" if m.error_message else ""
                out.append(f"[Assistant reply {m.stop_reason}{detail}]")
        elif isinstance(m, ToolResultMessage):
            kind = "Tool error" if m.is_error else "Tool result"
            out.append(f"[{kind}: {m.tool_name}]: {_truncate(_blocks_text(m.content), limit)}")
        elif isinstance(m, CustomMessage):
            out.append(f"[Custom: {m.custom_type}]: {_content_text(m.content)}")
        elif isinstance(m, CompactionSummaryMessage):
            out.append(f"[Earlier summary]: {m.summary}")
        elif isinstance(m, BranchSummaryMessage):
            out.append(f"[Branch summary]: {m.summary}")
        elif isinstance(m, UnknownMessage):
            data = json.dumps(m.data, ensure_ascii=False, default=str)
            out.append(f"[{m.role}]: {_truncate(data, limit)}")
        else:
            raise SessionError("invalid_argument", f"expected a message, not {type(m).__name__}")
    return "\n\n".join(out)


# --------------------------------------------------------------------------- requests, results


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """What the summariser is asked to summarise; passed to your ``summarize(request)``.

    Most summarisers send :attr:`system_prompt` and :attr:`prompt` to a model and return
    the text. To write your own prompt use :attr:`conversation`, :attr:`previous_summary`,
    :attr:`turn_prefix` and :attr:`instructions` (or the messages themselves).

    Attributes:
        kind: ``"compaction"`` or ``"branch_summary"``.
        messages: the messages to summarise (for a split turn: those before the turn).
        conversation: :func:`serialize_conversation` of :attr:`messages`.
        previous_summary: the summary of the previous compaction, to be updated (its
            content is not in :attr:`messages`), or ``None``.
        turn_prefix_messages: when the cut splits a turn, the start of that turn (the rest
            of the turn is kept verbatim); else empty.
        turn_prefix: :func:`serialize_conversation` of :attr:`turn_prefix_messages`, or
            ``None`` when the turn is not split.
        instructions: extra focus from the caller (e.g. ``/compact focus on the API``).
        prompt: a complete user prompt built from the default prompts and the fields above.
        system_prompt: :data:`SUMMARY_SYSTEM_PROMPT`.
        entries: the session entries whose messages are summarised (turn prefix included).
        plan: the :class:`CompactionPlan` for a compaction; ``None`` for a branch summary.
    """

    kind: Literal["compaction", "branch_summary"]
    messages: tuple[AgentMessage, ...]
    conversation: str
    previous_summary: str | None
    turn_prefix_messages: tuple[AgentMessage, ...]
    turn_prefix: str | None
    instructions: str | None
    prompt: str
    system_prompt: str = SUMMARY_SYSTEM_PROMPT
    entries: tuple[SessionTreeEntry, ...] = ()
    plan: CompactionPlan | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return (
            f"SummaryRequest(kind={self.kind!r}, messages=<{len(self.messages)}>, "
            f"turn_prefix_messages=<{len(self.turn_prefix_messages)}>, "
            f"previous_summary={'yes' if self.previous_summary is not None else None}, "
            f"instructions={self.instructions!r}, prompt=<{len(self.prompt)} chars>)"
        )


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """A summary with extras; ``summarize`` may return this instead of a ``str``.

    Attributes:
        summary: the summary text.
        details: any JSON value stored in the entry's ``details`` (e.g. files touched).
        usage: the tokens and cost of the summarising call, stored in the entry's ``usage``.

    >>> SummaryResult("## Objective ...", usage=Usage(input=900, output=120))
    SummaryResult(summary='## Objective ...', details=None, usage=Usage(input=900, output=120))
    """

    summary: str
    details: Any = None
    usage: Usage | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.summary, str):
            raise SessionError(
                "invalid_argument",
                f"SummaryResult.summary must be a str, not {type(self.summary).__name__}",
            )
        if self.usage is not None and not isinstance(self.usage, Usage):
            raise SessionError(
                "invalid_argument",
                f"SummaryResult.usage must be a Usage or None, not {type(self.usage).__name__}",
            )


Summarizer: TypeAlias = Callable[[SummaryRequest], str | SummaryResult]
"""``summarize(request) -> str | SummaryResult``: your LLM call."""

AsyncSummarizer: TypeAlias = Callable[
    [SummaryRequest], Awaitable[str | SummaryResult] | str | SummaryResult
]
"""``async summarize(request) -> str | SummaryResult`` (a plain function works too)."""


def _result(value: object) -> SummaryResult:
    if isinstance(value, SummaryResult):
        return value
    if isinstance(value, str):
        return SummaryResult(value)
    raise SessionError(
        "invalid_argument",
        f"summarize() must return a str or a SummaryResult, not {type(value).__name__}",
    )


def _build_prompt(
    base: str,
    conversation: str,
    previous_summary: str | None,
    turn_prefix: str | None,
    instructions: str | None,
) -> str:
    # The instructions refer to <conversation>, so it is always there, even when only a
    # split turn's prefix is new.
    body = conversation or "(no messages before the current turn)"
    parts = [f"<conversation>\n{body}\n</conversation>"]
    if previous_summary is not None:
        parts.append(f"<previous-summary>\n{previous_summary}\n</previous-summary>")
    if turn_prefix is not None:
        parts.append(f"<turn-prefix>\n{turn_prefix}\n</turn-prefix>")
    task = base
    if turn_prefix is not None:
        task += "\n\n" + DEFAULT_TURN_PREFIX_PROMPT
    if instructions:
        task += f"\n\nAdditional instructions: {instructions}"
    parts.append(task)
    return "\n\n".join(parts)


def _check_instructions(instructions: object) -> str | None:
    if instructions is not None and not isinstance(instructions, str):
        raise SessionError(
            "invalid_argument",
            f"instructions must be a str or None, not {type(instructions).__name__}",
        )
    return instructions
