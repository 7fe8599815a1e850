"""``sessiontree show``: the context that would go to the model, one entry, or the branch
to an entry."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any, Final

from .. import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    MessageEntry,
    Session,
    SessionError,
    SessionTreeEntry,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
    build_context_entries,
    entry_to_dict,
    message_to_dict,
    session_entry_to_context_messages,
)
from ._describe import KIND_STYLES, blocks_text, entry_text, kind_of, tool_call_text
from ._output import ROLE_STYLES, Output, open_output, safe_text
from ._target import Options, open_readonly, resolve

SCHEMA = "show"

# Folded blocks show this many lines before "… N more lines".
FOLD_LINES: Final = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", nargs="?", metavar="SESSION")
    p.add_argument("entry", nargs="?", metavar="ID", help="show this entry instead")
    p.add_argument(
        "--full", action="store_true", help="unfold thinking and tool output (never cut text)"
    )
    p.add_argument("--raw", action="store_true", help="with ID: the entry's JSON line")
    p.add_argument(
        "--branch",
        action="store_true",
        help="with ID: every entry on the path from the root to ID",
    )
    p.add_argument(
        "--leaf", metavar="ID", help="the context of the branch ending at ID (not the leaf)"
    )


def run(args: argparse.Namespace, opts: Options) -> int:
    if (args.raw or args.branch) and args.entry is None:
        raise SessionError("invalid_argument", "--raw and --branch need an entry ID")
    path = resolve(opts, args.session)
    color_mode = "never" if args.json or args.raw else opts.color
    storage = open_readonly(opts, path, color=color_mode != "never")
    with storage:
        session = Session(storage)
        if args.entry is not None:
            entry = storage.get_entry(args.entry)
            if entry is None:
                raise SessionError("not_found", f"entry {args.entry!r} not found")
            if args.branch:
                return _show_branch(args, opts, session, entry)
            return _show_entry(args, opts, session, entry)
        return _show_context(args, opts, session)


# -- one entry ---------------------------------------------------------------------------


def _show_entry(
    args: argparse.Namespace, opts: Options, session: Session, entry: SessionTreeEntry
) -> int:
    label = session.get_label(entry.id)
    if args.raw:
        with open_output(color_mode="never", pager=False) as out:
            # The line as the file holds it (pi's own bytes in a pi file).
            out.line(session.storage.get_line(entry.id).decode("utf-8", "replace"))
        return 0
    if args.json:
        with open_output(color_mode="never", pager=False) as out:
            out.json(
                {
                    "session": _session_json(session),
                    "entry": entry_to_dict(entry),
                    "label": label,
                    "children": [c.id for c in session.storage.get_children(entry.id)],
                }
            )
        return 0
    with open_output(color_mode=opts.color, pager=opts.pager) as out:
        _entry_block(out, entry, label, full=True)
        kids = session.storage.get_children(entry.id)
        if kids:
            out.line(out.paint(f"children: {', '.join(c.id for c in kids)}", "grey"))
    return 0


def _entry_block(out: Output, entry: SessionTreeEntry, label: str | None, *, full: bool) -> None:
    kind = kind_of(entry)
    head = f"── {kind} · {entry.id} · {entry.timestamp}"
    if label:
        head += f" · [{label}]"
    if isinstance(entry, MessageEntry):
        _message(out, entry.message, full=full, head=head)
        return
    out.line(out.paint(head, KIND_STYLES.get(kind, "bold")))
    out.line(safe_text(entry_text(entry)))
    data = entry_to_dict(entry)
    for key in ("summary", "details", "data", "content"):
        value = data.get(key)
        if value is None or (key == "summary" and not full):
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
        _body(out, f"{key}:\n{text}" if key != "summary" else text, fold=not full, style=None)
    out.line()


# -- the branch to an entry --------------------------------------------------------------


def _show_branch(
    args: argparse.Namespace, opts: Options, session: Session, entry: SessionTreeEntry
) -> int:
    entries = session.storage.get_path_to_root(entry.id)
    labels = session.storage.get_labels()
    if args.json:
        with open_output(color_mode="never", pager=False) as out:
            out.json(
                {
                    "session": _session_json(session),
                    "entry_id": entry.id,
                    "entries": [
                        {"entry": entry_to_dict(e), "label": labels.get(e.id)} for e in entries
                    ],
                }
            )
        return 0
    with open_output(color_mode=opts.color, pager=opts.pager) as out:
        out.line(out.paint(f"Branch to {entry.id}: {len(entries):,} entries from the root", "bold"))
        out.line()
        for e in entries:
            _entry_block(out, e, labels.get(e.id), full=args.full)
    return 0


# -- the context -------------------------------------------------------------------------


def _context_pairs(
    session: Session, leaf: str | None
) -> list[tuple[SessionTreeEntry, list[AgentMessage]]]:
    """Each entry of the context with the messages it gives (what ``build_context``
    sends, paired with the entry behind each message)."""
    entries = build_context_entries(session.get_branch(leaf))
    out = []
    for i, e in enumerate(entries):
        msgs = session_entry_to_context_messages(e, i, entries, None)
        if msgs:
            out.append((e, list(msgs)))
    return out


def _show_context(args: argparse.Namespace, opts: Options, session: Session) -> int:
    leaf = args.leaf if args.leaf is not None else session.get_leaf_id()
    if args.leaf is not None and session.get_entry(args.leaf) is None:
        raise SessionError("not_found", f"entry {args.leaf!r} not found")
    if args.leaf is None:
        ctx = session.build_context()
    else:
        from .. import build_session_context

        ctx = build_session_context(session.get_branch(leaf))
        # Thinking level, model and tools come from the whole path (as build_context does).
        from .. import derive_session_context_state

        state = derive_session_context_state(session.storage.get_path_to_root(leaf))
        ctx = type(ctx)(ctx.messages, state.thinking_level, state.model, state.active_tool_names)
    pairs = _context_pairs(session, leaf)
    model = (
        None
        if ctx.model is None
        else {"provider": ctx.model.provider, "model_id": ctx.model.model_id}
    )
    if args.json:
        with open_output(color_mode="never", pager=False) as out:
            out.json(
                {
                    "session": _session_json(session),
                    "leaf_id": leaf,
                    "model": model,
                    "thinking_level": ctx.thinking_level,
                    "active_tool_names": None
                    if ctx.active_tool_names is None
                    else list(ctx.active_tool_names),
                    "messages": [
                        {"entry_id": e.id, "message": message_to_dict(m)}
                        for e, msgs in pairs
                        for m in msgs
                    ],
                }
            )
        return 0
    count = sum(len(m) for _, m in pairs)
    with open_output(color_mode=opts.color, pager=opts.pager) as out:
        name = session.get_session_name()
        model_text = f"{ctx.model.provider}/{ctx.model.model_id}" if ctx.model else "—"
        tools = ", ".join(ctx.active_tool_names) if ctx.active_tool_names is not None else "—"
        out.line(
            out.paint(
                f"Context of {name + ' · ' if name else ''}session {session.id} · "
                f"leaf {leaf or '—'}",
                "bold",
            )
        )
        out.line(
            out.paint(
                f"{count:,} messages · model {model_text} · thinking {ctx.thinking_level} · "
                f"tools {tools}",
                "grey",
            )
        )
        out.line()
        results = _tool_results(pairs)
        paired = set(results)
        for entry, msgs in pairs:
            for m in msgs:
                if isinstance(m, ToolResultMessage) and m.tool_call_id in paired:
                    continue  # shown under its call
                head = f"── {m.role} · {entry.id} · {entry.timestamp}"
                _message(out, m, full=args.full, head=head, results=results)
    return 0


def _tool_results(
    pairs: Sequence[tuple[SessionTreeEntry, list[AgentMessage]]],
) -> dict[str, ToolResultMessage]:
    calls: set[str] = set()
    results: dict[str, ToolResultMessage] = {}
    for _, msgs in pairs:
        for m in msgs:
            if isinstance(m, AssistantMessage):
                calls.update(b.id for b in m.content if isinstance(b, ToolCall))
            elif isinstance(m, ToolResultMessage) and m.tool_call_id in calls:
                results.setdefault(m.tool_call_id, m)
    return results


def _message(
    out: Output,
    m: AgentMessage,
    *,
    full: bool,
    head: str,
    results: dict[str, ToolResultMessage] | None = None,
) -> None:
    style = ROLE_STYLES.get(m.role, "bold")
    if isinstance(m, AssistantMessage):
        extra = f" · {m.provider}/{m.model}"
        if m.usage.total_tokens:
            extra += f" · {m.usage.input:,} in / {m.usage.output:,} out"
        if m.stop_reason != "stop":
            extra += f" · {m.stop_reason}"
        out.line(out.paint(head + extra, style))
        for block in m.content:
            if isinstance(block, TextContent):
                _text(out, block.text)
            elif isinstance(block, ThinkingContent):
                if block.redacted:
                    out.line(out.paint("  ▸ thinking (redacted)", "dim italic"))
                elif full:
                    out.line(out.paint("  ▾ thinking", "dim italic"))
                    _body(out, block.thinking, fold=False, style="dim italic")
                else:
                    out.line(
                        out.paint(
                            f"  ▸ thinking ({len(block.thinking):,} characters; --full shows it)",
                            "dim italic",
                        )
                    )
            elif isinstance(block, ToolCall):
                out.line(
                    out.paint(
                        f"  → {safe_text(tool_call_text(block, 10_000 if full else 160))}", "yellow"
                    )
                )
                result = (results or {}).get(block.id)
                if result is not None:
                    _tool_result(out, result, full=full, nested=True)
        if m.error_message:
            out.line(out.paint(f"  error: {safe_text(m.error_message)}", "red"))
        out.line()
        return
    if isinstance(m, ToolResultMessage):
        out.line(out.paint(head + f" · {m.tool_name} · {m.tool_call_id}", style))
        _tool_result(out, m, full=full, nested=False)
        out.line()
        return
    out.line(out.paint(head + _role_extra(m), style))
    if isinstance(m, (UserMessage, CustomMessage)):
        _text(out, blocks_text(m.content))
    elif isinstance(m, (CompactionSummaryMessage, BranchSummaryMessage)):
        _text(out, m.summary)
    elif isinstance(m, UnknownMessage):
        _body(out, json.dumps(m.data, ensure_ascii=False, indent=2), fold=not full, style="dim")
    out.line()


def _role_extra(m: AgentMessage) -> str:
    if isinstance(m, CompactionSummaryMessage):
        return f" · {m.tokens_before:,} tokens before"
    if isinstance(m, BranchSummaryMessage):
        return f" · from {m.from_id}"
    if isinstance(m, CustomMessage):
        return f" · {m.custom_type}"
    return ""


def _tool_result(out: Output, m: ToolResultMessage, *, full: bool, nested: bool) -> None:
    text = blocks_text(m.content)
    images = [b for b in m.content if isinstance(b, ImageContent)]
    mark = "✗ error · " if m.is_error else ""
    lines = text.splitlines() or [""]
    if nested:
        out.line(
            out.paint(
                f"    ↳ {mark}{m.tool_name} result · {len(lines):,} lines",
                "red" if m.is_error else "grey",
            )
        )
    _body(
        out,
        text,
        fold=not full,
        style="red" if m.is_error else None,
        indent="      " if nested else "  ",
    )
    del images


def _have_rich() -> bool:
    """Whether the ``cli`` extra is installed (Markdown is rendered with it, plain without)."""
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def _text(out: Output, text: str) -> None:
    if out.terminal and out.color and _have_rich():
        from rich.console import Console
        from rich.markdown import Markdown

        console = Console(
            file=out.stream, force_terminal=True, width=out.width, highlight=False, soft_wrap=False
        )
        console.print(Markdown(safe_text(text)))
        return
    for line in safe_text(text).splitlines():
        out.line(line)


def _body(out: Output, text: str, *, fold: bool, style: str | None, indent: str = "  ") -> None:
    lines = safe_text(text).splitlines()
    shown = lines[:FOLD_LINES] if fold else lines
    for line in shown:
        out.line(out.paint(indent + line, style))
    if fold and len(lines) > FOLD_LINES:
        out.line(
            out.paint(
                f"{indent}… {len(lines) - FOLD_LINES:,} more lines (--full shows them)", "dim"
            )
        )


def _session_json(session: Session) -> dict[str, Any]:
    storage = session.storage
    path = getattr(storage, "path", None)
    return {"id": session.id, "path": path, "name": session.get_session_name()}
