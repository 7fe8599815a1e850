"""A branch of a session as Markdown (``sessiontree export --markdown``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence

from .. import (
    AssistantMessage,
    BranchSummaryEntry,
    CompactionEntry,
    ImageContent,
    MessageEntry,
    SessionHeader,
    SessionTreeEntry,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)
from ._describe import blocks_text, entry_text, kind_of, message_text

_TICKS = re.compile(r"`{3,}")


def fence(text: str, lang: str = "") -> str:
    """``text`` in a fenced code block whose fence no backtick run inside can close."""
    longest = max((len(m.group()) for m in _TICKS.finditer(text)), default=2)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def render(
    header: SessionHeader,
    name: str | None,
    entries: Sequence[SessionTreeEntry],
    labels: dict[str, str],
    leaf_id: str | None,
) -> Iterator[str]:
    """The Markdown of the branch ``entries`` (root first), chunk by chunk."""
    yield f"# {name or 'Session ' + header.id}\n\n"
    yield f"- session: `{header.id}`\n- cwd: `{header.cwd}`\n- created: {header.timestamp}\n"
    yield f"- branch: {len(entries):,} entries, leaf `{leaf_id}`\n\n"
    results: dict[str, ToolResultMessage] = {}
    for e in entries:
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage):
            results.setdefault(e.message.tool_call_id, e.message)
    calls = {
        b.id
        for e in entries
        if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
        for b in e.message.content
        if isinstance(b, ToolCall)
    }
    for e in entries:
        label = f" · **[{labels[e.id]}]**" if e.id in labels else ""
        if isinstance(e, MessageEntry):
            m = e.message
            if isinstance(m, ToolResultMessage) and m.tool_call_id in calls:
                continue  # written under its call
            who = m.role.replace("_", " ")
            extra = f" · {m.provider}/{m.model}" if isinstance(m, AssistantMessage) else ""
            yield f"## {who}{extra} · `{e.id}` · {e.timestamp}{label}\n\n"
            if isinstance(m, AssistantMessage):
                for b in m.content:
                    if isinstance(b, TextContent):
                        yield b.text + "\n\n"
                    elif isinstance(b, ThinkingContent) and not b.redacted:
                        yield "<details><summary>thinking</summary>\n\n"
                        yield fence(b.thinking) + "\n\n</details>\n\n"
                    elif isinstance(b, ToolCall):
                        yield f"<details><summary>tool call: {b.name}</summary>\n\n"
                        yield fence(json.dumps(b.arguments, ensure_ascii=False, indent=2), "json")
                        yield "\n\n"
                        r = results.get(b.id)
                        if r is not None:
                            state = " (error)" if r.is_error else ""
                            yield f"result{state}:\n\n" + fence(blocks_text(r.content)) + "\n\n"
                        yield "</details>\n\n"
                if m.error_message:
                    yield f"> error: {m.error_message}\n\n"
            elif isinstance(m, ToolResultMessage):
                yield fence(blocks_text(m.content)) + "\n\n"
            else:
                content = getattr(m, "content", None)
                if isinstance(content, (list, tuple)):
                    for b in content:
                        if isinstance(b, ImageContent):
                            yield f"![image](data:{b.mime_type};base64,{b.data})\n\n"
                yield message_text(m) + "\n\n"
        elif isinstance(e, CompactionEntry):
            yield f"## compaction · `{e.id}` · {e.tokens_before:,} tokens before{label}\n\n"
            yield "> " + e.summary.replace("\n", "\n> ") + "\n\n"
        elif isinstance(e, BranchSummaryEntry):
            yield f"## branch summary · `{e.id}`{label}\n\n"
            yield "> " + e.summary.replace("\n", "\n> ") + "\n\n"
        else:
            yield f"*{kind_of(e)}: {entry_text(e)}*{label}\n\n"
