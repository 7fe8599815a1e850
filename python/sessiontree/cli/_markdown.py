"""A branch of a session as Markdown (``sessiontree export --markdown``).

Everything from the session goes through :func:`~sessiontree.cli._output.safe_text` (or
``safe_line`` for one-line fields): a control character shows as ``\\x..``, as in every
other command's text, so neither ``export --markdown`` on a terminal nor ``cat`` of the
file can drive the terminal. Long texts are written in slices, never built whole, so
``export --markdown | head`` stops at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any, Final

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
from ._describe import bash_run, bash_status, blocks_text, entry_text, kind_of, message_text
from ._output import safe_line, safe_text

_TICKS = re.compile(r"`{3,}")
# Texts are escaped and written in slices of this many characters.
_SLICE: Final = 1 << 16


def fence(text: str, lang: str = "") -> str:
    """``text`` in a fenced code block whose fence no backtick run inside can close."""
    return "".join(_fenced(text, lang))


def _ticks(text: str) -> str:
    longest = max((len(m.group()) for m in _TICKS.finditer(text)), default=2)
    return "`" * max(3, longest + 1)


def _safe(text: str) -> Iterator[str]:
    """``text`` with its controls shown as ``\\x..``, slice by slice."""
    if len(text) <= _SLICE:
        yield safe_text(text)
        return
    for i in range(0, len(text), _SLICE):
        yield safe_text(text[i : i + _SLICE])


def _fenced(text: str, lang: str = "") -> Iterator[str]:
    ticks = _ticks(text)
    yield f"{ticks}{safe_line(lang)}\n"
    yield from _safe(text)
    yield f"\n{ticks}"


def _quoted(text: str) -> Iterator[str]:
    yield "> "
    for piece in _safe(text):
        yield piece.replace("\n", "\n> ")


def render(
    header: SessionHeader,
    name: str | None,
    entries: Sequence[SessionTreeEntry],
    labels: dict[str, str],
    leaf_id: str | None,
) -> Iterator[str]:
    """The Markdown of the branch ``entries`` (root first), chunk by chunk (none longer
    than a slice of a text)."""
    line = safe_line
    yield f"# {line(name or 'Session ' + header.id)}\n\n"
    yield (
        f"- session: `{line(header.id)}`\n- cwd: `{line(header.cwd)}`\n"
        f"- created: {line(header.timestamp)}\n"
    )
    yield f"- branch: {len(entries):,} entries, leaf `{line(leaf_id or '')}`\n\n"
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
        label = f" · **[{line(labels[e.id])}]**" if e.id in labels else ""
        where = f"`{line(e.id)}` · {line(e.timestamp)}"
        if isinstance(e, MessageEntry):
            m = e.message
            if isinstance(m, ToolResultMessage) and m.tool_call_id in calls:
                continue  # written under its call
            run = bash_run(m)
            if run is not None:
                yield from _bash(run, where, label)
                continue
            who = line(m.role.replace("_", " "))
            extra = (
                f" · {line(m.provider)}/{line(m.model)}" if isinstance(m, AssistantMessage) else ""
            )
            yield f"## {who}{extra} · {where}{label}\n\n"
            if isinstance(m, AssistantMessage):
                for b in m.content:
                    if isinstance(b, TextContent):
                        yield from _safe(b.text)
                        yield "\n\n"
                    elif isinstance(b, ThinkingContent) and not b.redacted:
                        yield "<details><summary>thinking</summary>\n\n"
                        yield from _fenced(b.thinking)
                        yield "\n\n</details>\n\n"
                    elif isinstance(b, ToolCall):
                        yield f"<details><summary>tool call: {line(b.name)}</summary>\n\n"
                        args = json.dumps(b.arguments, ensure_ascii=False, indent=2)
                        yield from _fenced(args, "json")
                        yield "\n\n"
                        r = results.get(b.id)
                        if r is not None:
                            state = " (error)" if r.is_error else ""
                            yield f"result{state}:\n\n"
                            yield from _fenced(blocks_text(r.content))
                            yield "\n\n"
                        yield "</details>\n\n"
                if m.error_message:
                    yield from _quoted(f"error: {m.error_message}")
                    yield "\n\n"
            elif isinstance(m, ToolResultMessage):
                yield from _fenced(blocks_text(m.content))
                yield "\n\n"
            else:
                content = getattr(m, "content", None)
                if isinstance(content, (list, tuple)):
                    for b in content:
                        if isinstance(b, ImageContent):
                            mime = line(b.mime_type)
                            yield f"![image](data:{mime};base64,"
                            yield from _safe(b.data)
                            yield ")\n\n"
                yield from _safe(message_text(m))
                yield "\n\n"
        elif isinstance(e, CompactionEntry):
            yield f"## compaction · `{line(e.id)}` · {e.tokens_before:,} tokens before{label}\n\n"
            yield from _quoted(e.summary)
            yield "\n\n"
        elif isinstance(e, BranchSummaryEntry):
            yield f"## branch summary · `{line(e.id)}`{label}\n\n"
            yield from _quoted(e.summary)
            yield "\n\n"
        else:
            # entry_text is one line with its controls already shown as \x..
            yield f"*{line(kind_of(e))}: {entry_text(e)}*{label}\n\n"


def _bash(run: dict[str, Any], where: str, label: str) -> Iterator[str]:
    """pi's shell run: ``$ command`` and its output in one block, its exit code and
    flags in the heading."""
    status = "".join(f" · {s}" for s in bash_status(run))
    yield f"## bash · {where}{status}{label}\n\n"
    command = run.get("command")
    output = run.get("output")
    text = f"$ {command if isinstance(command, str) else ''}"
    if isinstance(output, str) and output:
        text += "\n" + output
    yield from _fenced(text, "console")
    yield "\n\n"
    path = run.get("full_output_path")
    if run.get("truncated") and isinstance(path, str) and path:
        yield f"full output: `{safe_line(path)}`\n\n"
