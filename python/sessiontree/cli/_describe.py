"""Short descriptions of entries and messages: one line each, for ``tree``, ``show`` and
``ls``; and the plain text of a message, for ``show``, search and Markdown export."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any, Final

from .. import (
    BASH_EXECUTION_ROLE,
    ActiveToolsChangeEntry,
    AgentMessage,
    AssistantMessage,
    BranchSummaryEntry,
    BranchSummaryMessage,
    CompactionEntry,
    CompactionSummaryMessage,
    CustomEntry,
    CustomMessage,
    CustomMessageEntry,
    ImageContent,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    SessionTreeEntry,
    TextContent,
    ThinkingContent,
    ThinkingLevelChangeEntry,
    ToolCall,
    ToolResultMessage,
    UnknownEntry,
    UnknownMessage,
    UserMessage,
)
from ._output import one_line as _one_line

# What `tree` shows in the kind column, per entry type (messages show their role).
KIND_NAMES: Final[dict[str, str]] = {
    "thinking_level_change": "thinking",
    "model_change": "model",
    "active_tools_change": "tools",
    "compaction": "compaction",
    "branch_summary": "branch_summary",
    "custom": "custom",
    "custom_message": "custom_message",
    "label": "label",
    "session_info": "name",
    "leaf": "leaf",
}

KIND_STYLES: Final[dict[str, str]] = {
    "user": "bold cyan",
    "assistant": "green",
    "tool_result": "yellow",
    "compaction": "bold magenta",
    "branch_summary": "bold blue",
    "compaction_summary": "bold magenta",
    "custom": "magenta",
    "custom_message": "magenta",
    "label": "grey",
    "leaf": "grey",
    "name": "grey",
    "model": "grey",
    "thinking": "grey",
    "tools": "grey",
    "bash": "yellow",
    BASH_EXECUTION_ROLE: "yellow",
}


def kind_of(entry: SessionTreeEntry) -> str:
    """The kind column: the role for a message entry, else a short type name."""
    if isinstance(entry, MessageEntry):
        return entry.message.role
    return KIND_NAMES.get(entry.type, entry.type)


def bash_run(message: AgentMessage) -> dict[str, Any] | None:
    """The fields of pi's shell run (``!cmd``) when ``message`` is one (an
    :class:`UnknownMessage` of role ``bash_execution``), else None."""
    if isinstance(message, UnknownMessage) and message.role == BASH_EXECUTION_ROLE:
        return message.data
    return None


def bash_status(run: dict[str, Any]) -> list[str]:
    """What a shell run's flags say, in words: ``exit 101``, ``cancelled``, ``output
    truncated``, ``not sent to the model``."""
    parts: list[str] = []
    code = run.get("exit_code")
    if run.get("cancelled"):
        parts.append("cancelled")
    if code is not None:
        parts.append(f"exit {code}")
    if run.get("truncated"):
        parts.append("output truncated")
    if run.get("exclude_from_context"):
        parts.append("not sent to the model")
    return parts


def _str(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def blocks_text(content: str | Sequence[Any], *, images: bool = True) -> str:
    """The text of a content list (text blocks joined by newlines; ``[image]`` markers)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent) and images:
            parts.append(f"[image {block.mime_type}]")
    return "\n".join(parts)


def tool_call_text(call: ToolCall, limit: int | None = 200) -> str:
    """``name({"arg": …})``, the arguments cut to ``limit`` characters (None: all)."""
    args = json.dumps(call.arguments, ensure_ascii=False, separators=(", ", ": "))
    if limit is not None and len(args) > limit:
        args = args[: limit - 1] + "…"
    return f"{call.name}({args})"


def message_text(message: AgentMessage) -> str:
    """The readable text of a message (no thinking, tool calls as ``name(args)``)."""
    if isinstance(message, UserMessage):
        return blocks_text(message.content)
    if isinstance(message, AssistantMessage):
        parts = [b.text for b in message.content if isinstance(b, TextContent)]
        parts += [f"→ {tool_call_text(b)}" for b in message.content if isinstance(b, ToolCall)]
        if not parts and message.error_message:
            parts.append(f"error: {message.error_message}")
        return "\n".join(parts)
    if isinstance(message, ToolResultMessage):
        return blocks_text(message.content)
    if isinstance(message, CustomMessage):
        return blocks_text(message.content)
    if isinstance(message, (CompactionSummaryMessage, BranchSummaryMessage)):
        return message.summary
    run = bash_run(message)
    if run is not None:
        output = _str(run.get("output"))
        return f"$ {_str(run.get('command'))}" + (f"\n{output}" if output else "")
    return ""


def search_text(message: AgentMessage) -> str:
    """Everything searchable in a message: its text plus thinking."""
    text = message_text(message)
    if isinstance(message, AssistantMessage):
        thinking = [b.thinking for b in message.content if isinstance(b, ThinkingContent)]
        if thinking:
            text = "\n".join([text, *thinking])
    return text


def _line(text: str, limit: int) -> str:
    # Cut before cleaning: a tool result of megabytes becomes a line of ``limit``.
    return _one_line(text[: limit + 64])[:limit]


def entry_text(entry: SessionTreeEntry, limit: int = 1000) -> str:
    """One line saying what ``entry`` is about (without its kind), at most about
    ``limit`` characters, safe to print: whitespace runs are one space and controls show
    as ``\\x..`` (see :func:`~sessiontree.cli._output.one_line`)."""
    one_line = functools.partial(_line, limit=limit)
    if isinstance(entry, MessageEntry):
        m = entry.message
        text = one_line(message_text(m))
        if isinstance(m, ToolResultMessage):
            mark = "✗ " if m.is_error else ""
            name = _one_line(m.tool_name)
            return f"{mark}{name}: {text}" if text else f"{mark}{name}"
        if isinstance(m, AssistantMessage) and m.stop_reason in ("error", "aborted"):
            return f"[{m.stop_reason}] {text}".rstrip()
        run = bash_run(m)
        if run is not None:
            status = bash_status(run)
            command = one_line(_str(run.get("command")))
            output = one_line(_str(run.get("output")))
            head = " · ".join([f"$ {command}", *status])
            return f"{head}: {output}" if output else head
        if isinstance(m, UnknownMessage):
            return f"(role {_one_line(m.role)})"
        if isinstance(m, CustomMessage):
            return f"{_one_line(m.custom_type)}: {text}"
        return text
    if isinstance(entry, ModelChangeEntry):
        return _one_line(f"{entry.provider}/{entry.model_id}")
    if isinstance(entry, ThinkingLevelChangeEntry):
        return _one_line(entry.thinking_level)
    if isinstance(entry, ActiveToolsChangeEntry):
        return _one_line(", ".join(entry.active_tool_names)) or "(none)"
    if isinstance(entry, CompactionEntry):
        kept = _one_line(entry.first_kept_entry_id or "—")
        tail = ", retained tail" if entry.retained_tail is not None else ""
        return (
            f"{entry.tokens_before:,} tokens summarised, kept from {kept}{tail}: "
            f"{one_line(entry.summary)}"
        )
    if isinstance(entry, BranchSummaryEntry):
        return one_line(entry.summary)
    if isinstance(entry, CustomEntry):
        return _one_line(entry.custom_type)
    if isinstance(entry, CustomMessageEntry):
        return f"{_one_line(entry.custom_type)}: {one_line(blocks_text(entry.content))}"
    if isinstance(entry, LabelEntry):
        target = _one_line(entry.target_id)
        return f"'{one_line(entry.label)}' → {target}" if entry.label else f"cleared → {target}"
    if isinstance(entry, SessionInfoEntry):
        return one_line(entry.name) if entry.name else "(cleared)"
    if isinstance(entry, LeafEntry):
        return f"→ {_one_line(entry.target_id or '(before the first entry)')}"
    if isinstance(entry, UnknownEntry):
        return "(unknown entry type)"
    return ""
