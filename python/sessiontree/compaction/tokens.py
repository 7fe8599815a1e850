"""Token estimates, compaction settings and when to compact."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import SessionError
from ..model.messages import (
    BASH_EXECUTION_ROLE,
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

__all__ = [
    "IMAGE_TOKEN_ESTIMATE",
    "CompactionSettings",
    "estimate_context_tokens",
    "estimate_tokens",
    "should_compact",
]


_log = logging.getLogger(__name__)

IMAGE_TOKEN_ESTIMATE: Final = 1200
"""Tokens counted for each image block, whatever its size (providers bill images by
resolution, which the estimate does not decode; 1,200 is a typical screenshot)."""

_CHARS_PER_TOKEN: Final = 4
_DEFAULT_TOOL_RESULT_CHARS: Final = 2000

# --------------------------------------------------------------------------- token estimates


def _json_len(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


def _blocks_chars(blocks: Sequence[Any]) -> tuple[int, int]:
    """Characters of text blocks and the number of image blocks."""
    chars = images = 0
    for block in blocks:
        if isinstance(block, TextContent):
            chars += len(block.text)
        elif isinstance(block, ImageContent):
            images += 1
    return chars, images


def estimate_tokens(message: AgentMessage) -> int:
    """A fast estimate of the tokens one message takes in the context.

    Characters / 4, rounded up, over what the model reads: text; thinking; a tool call's
    name plus its arguments as compact JSON; tool-result text; custom-message content;
    summaries. Each image of a tool result counts :data:`IMAGE_TOKEN_ESTIMATE` tokens; a
    user's images are not counted. A shell run of pi
    (:data:`~sessiontree.BASH_EXECUTION_ROLE`) counts its command and output; a message of
    any other unknown role counts its JSON. These are pi's rules (``estimateTokens``,
    checked against pi's own figures). Signatures and metadata are not counted. The
    heuristic overestimates English prose a little and is meant for budgets, not billing.

    Args:
        message: any :data:`~sessiontree.AgentMessage`.

    Returns:
        The estimated token count (``>= 0``).

    Raises:
        SessionError: ``invalid_argument`` if ``message`` is not a message.

    >>> estimate_tokens(UserMessage("12345678", timestamp=0))
    2
    """
    images = 0
    if isinstance(message, UserMessage):
        # As pi counts a user message: its text (an attached image is the user's, not a
        # cost the estimate can foresee).
        chars = len(_content_text(message.content))
    elif isinstance(message, AssistantMessage):
        chars = 0
        for block in message.content:
            if isinstance(block, TextContent):
                chars += len(block.text)
            elif isinstance(block, ThinkingContent):
                chars += len(block.thinking)
            elif isinstance(block, ToolCall):
                chars += len(block.name) + _json_len(block.arguments)
    elif isinstance(message, ToolResultMessage):
        chars, images = _blocks_chars(message.content)
    elif isinstance(message, CustomMessage):
        if isinstance(message.content, str):
            chars = len(message.content)
        else:
            chars, images = _blocks_chars(message.content)
    elif isinstance(message, (CompactionSummaryMessage, BranchSummaryMessage)):
        chars = len(message.summary)
    elif isinstance(message, UnknownMessage) and message.role == BASH_EXECUTION_ROLE:
        # pi counts a shell run by its command and output.
        data = message.data
        chars = sum(len(v) for v in (data.get("command"), data.get("output")) if isinstance(v, str))
    elif isinstance(message, UnknownMessage):
        chars = _json_len(message.data)
    else:
        raise SessionError("invalid_argument", f"expected a message, not {type(message).__name__}")
    return math.ceil(chars / _CHARS_PER_TOKEN) + images * IMAGE_TOKEN_ESTIMATE


def _usage_tokens(usage: Usage) -> int:
    return usage.total_tokens or (usage.input + usage.output + usage.cache_read + usage.cache_write)


def estimate_context_tokens(messages: Iterable[AgentMessage]) -> int:
    """The size of a context in tokens, measured where possible and estimated elsewhere.

    The ``usage`` of the last assistant reply is what the provider counted for the whole
    request plus the reply, so it is taken as is (``total_tokens``, or input + output +
    cache tokens when that is 0), and only the messages after it are estimated with
    :func:`estimate_tokens`. A reply is skipped (an earlier one is used) when its usage is
    all zeros, when it ended in ``error`` or ``aborted``, or when it is not newer than the
    latest compaction summary in ``messages``: such a reply was kept through a compaction
    and its usage still counts what the compaction removed. Without a usable reply every
    message is estimated.

    Args:
        messages: the context, oldest first (e.g. ``session.build_context().messages``).

    Returns:
        The token count.

    >>> from sessiontree import AssistantMessage, TextContent, Usage, UserMessage
    >>> reply = AssistantMessage([TextContent("hi")], "p", "m", usage=Usage(total_tokens=900))
    >>> estimate_context_tokens([UserMessage("hello"), reply, UserMessage("12345678")])
    902
    """
    msgs = list(messages)
    summary_time: int | None = None
    for m in reversed(msgs):
        if isinstance(m, CompactionSummaryMessage):
            summary_time = m.timestamp
            break
    for i in range(len(msgs) - 1, -1, -1):
        m = msgs[i]
        if (
            isinstance(m, AssistantMessage)
            and m.stop_reason not in ("error", "aborted")
            and (summary_time is None or m.timestamp > summary_time)
        ):
            measured = _usage_tokens(m.usage)
            if measured > 0:
                return measured + sum(estimate_tokens(x) for x in msgs[i + 1 :])
    return sum(estimate_tokens(m) for m in msgs)


# --------------------------------------------------------------------------- settings


def _check_count(owner: str, name: str, value: object, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SessionError(
            "invalid_argument", f"{owner}{name} must be an int, not {type(value).__name__}"
        )
    if value < minimum:
        raise SessionError("invalid_argument", f"{owner}{name} must be >= {minimum}, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """When to compact and how much to keep.

    Attributes:
        enabled: whether :func:`should_compact` may say yes (automatic compaction);
            :func:`compact` itself runs either way.
        reserve_tokens: room left in the window for the model's reply (and the summary
            call's output); compaction is due above ``context_window - reserve_tokens``.
        keep_recent_tokens: about how many tokens of the most recent messages stay
            verbatim after a compaction.

    Raises:
        SessionError: ``invalid_argument`` for a non-bool ``enabled`` or a negative or
            non-int token count.

    >>> CompactionSettings(keep_recent_tokens=8000)
    CompactionSettings(enabled=True, reserve_tokens=16384, keep_recent_tokens=8000)
    """

    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise SessionError(
                "invalid_argument",
                f"CompactionSettings.enabled must be a bool, not {type(self.enabled).__name__}",
            )
        _check_count("CompactionSettings.", "reserve_tokens", self.reserve_tokens)
        _check_count("CompactionSettings.", "keep_recent_tokens", self.keep_recent_tokens)


def _settings(settings: CompactionSettings | None) -> CompactionSettings:
    if settings is None:
        return CompactionSettings()
    if not isinstance(settings, CompactionSettings):
        raise SessionError(
            "invalid_argument",
            f"settings must be CompactionSettings, not {type(settings).__name__}",
        )
    return settings


def should_compact(
    context_tokens: int, context_window: int, settings: CompactionSettings | None = None
) -> bool:
    """Whether the context is too big to leave room for the reply.

    Args:
        context_tokens: the context size (e.g. from :func:`estimate_context_tokens`).
        context_window: the model's window in tokens.
        settings: the settings (defaults when ``None``).

    Returns:
        ``settings.enabled and context_tokens > context_window - settings.reserve_tokens``.

    Raises:
        SessionError: ``invalid_argument`` for a negative or non-int count, a window of 0.

    >>> should_compact(120_000, 128_000, CompactionSettings())
    True
    >>> should_compact(100_000, 128_000, CompactionSettings())
    False
    """
    _check_count("", "context_tokens", context_tokens)
    _check_count("", "context_window", context_window, 1)
    s = _settings(settings)
    return s.enabled and context_tokens > context_window - s.reserve_tokens
