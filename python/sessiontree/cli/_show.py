"""``sessiontree show``: the context that would go to the model, one entry, or the branch
to an entry."""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .. import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
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
from ._describe import (
    KIND_STYLES,
    bash_run,
    bash_status,
    blocks_text,
    entry_text,
    kind_of,
    tool_call_text,
)
from ._output import ROLE_STYLES, Clip, Output, clip, open_output, safe_line, safe_text
from ._target import Options, open_readonly, resolve

SCHEMA = "show"

# Folded blocks (tool output, data) show this many lines, and of them at most FOLD_CHARS
# characters, before "… N more lines (--full shows them)".
FOLD_LINES: Final = 3
FOLD_CHARS: Final = 600
# Every other text (a message, an unfolded block) is cut after this many lines or
# characters unless --full: a message of 100 MB is a screen, not 100 MB on the terminal.
TEXT_LINES: Final = 60
TEXT_CHARS: Final = 6_000
# Markdown is rendered (on a terminal) only for texts up to this many characters.
RICH_CHARS: Final = 200_000
# What the kind column calls a role (pi's shell runs are `bash`).
ROLE_NAMES: Final = {"bash_execution": "bash"}


@dataclass(frozen=True)
class _View:
    """How much is shown: ``fold`` folds thinking and tool output; ``cut`` cuts every
    other long text (both off with --full)."""

    fold: bool
    cut: bool

    def clip(self, text: str, *, foldable: bool = True) -> Clip:
        if self.fold and foldable:
            return clip(text, FOLD_LINES, FOLD_CHARS)
        if self.cut:
            return clip(text, TEXT_LINES, TEXT_CHARS)
        return Clip(text)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", nargs="?", metavar="SESSION")
    p.add_argument("entry", nargs="?", metavar="ID", help="show this entry instead")
    p.add_argument(
        "--full",
        action="store_true",
        help="unfold thinking and tool output, and never cut long texts",
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
        # One entry: thinking and tool output unfolded, long texts cut unless --full.
        _entry_block(out, entry, label, _View(fold=False, cut=not args.full))
        kids = session.storage.get_children(entry.id)
        if kids:
            children = safe_line(", ".join(c.id for c in kids))
            out.line(out.paint(f"children: {children}", "grey"))
    return 0


def _entry_block(out: Output, entry: SessionTreeEntry, label: str | None, view: _View) -> None:
    kind = kind_of(entry)
    head = f"── {ROLE_NAMES.get(kind, kind)} · {entry.id} · {entry.timestamp}"
    if label:
        head += f" · [{label}]"
    if isinstance(entry, MessageEntry):
        _message(out, entry.message, view=view, head=head)
        return
    out.line(out.paint(safe_line(head), KIND_STYLES.get(kind, "bold")))
    out.line(safe_line(entry_text(entry)))
    data = entry_to_dict(entry)
    for key in ("summary", "details", "data", "content"):
        value = data.get(key)
        if value is None or (key == "summary" and view.fold):
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
        _body(out, f"{key}:\n{text}" if key != "summary" else text, view=view, style=None)
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
        out.line(
            out.paint(
                safe_line(f"Branch to {entry.id}: {len(entries):,} entries from the root"), "bold"
            )
        )
        out.line()
        view = _View(fold=not args.full, cut=not args.full)
        for e in entries:
            _entry_block(out, e, labels.get(e.id), view)
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
                safe_line(
                    f"Context of {name + ' · ' if name else ''}session {session.id} · "
                    f"leaf {leaf or '—'}"
                ),
                "bold",
            )
        )
        out.line(
            out.paint(
                safe_line(
                    f"{count:,} messages · model {model_text} · thinking {ctx.thinking_level} · "
                    f"tools {tools}"
                ),
                "grey",
            )
        )
        out.line()
        results = _tool_results(pairs)
        paired = set(results)
        view = _View(fold=not args.full, cut=not args.full)
        for entry, msgs in pairs:
            for m in msgs:
                if isinstance(m, ToolResultMessage) and m.tool_call_id in paired:
                    continue  # shown under its call
                role = ROLE_NAMES.get(m.role, m.role)
                head = f"── {role} · {entry.id} · {entry.timestamp}"
                _message(out, m, view=view, head=head, results=results)
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
    view: _View,
    head: str,
    results: dict[str, ToolResultMessage] | None = None,
) -> None:
    """One message: its head line (``head`` plus what the message adds, every field of it
    escaped), then its text, cut or folded as ``view`` says."""
    run = bash_run(m)
    style = ROLE_STYLES.get("bash" if run is not None else m.role, "bold")
    if isinstance(m, AssistantMessage):
        extra = f" · {m.provider}/{m.model}"
        if m.usage.total_tokens:
            extra += f" · {m.usage.input:,} in / {m.usage.output:,} out"
        if m.stop_reason != "stop":
            extra += f" · {m.stop_reason}"
        out.line(out.paint(safe_line(head + extra), style))
        for block in m.content:
            if isinstance(block, TextContent):
                _text(out, block.text, view)
            elif isinstance(block, ThinkingContent):
                if block.redacted:
                    out.line(out.paint("  ▸ thinking (redacted)", "dim italic"))
                elif not view.fold:
                    out.line(out.paint("  ▾ thinking", "dim italic"))
                    _body(out, block.thinking, view=view, style="dim italic")
                else:
                    out.line(
                        out.paint(
                            f"  ▸ thinking ({len(block.thinking):,} characters; --full shows it)",
                            "dim italic",
                        )
                    )
            elif isinstance(block, ToolCall):
                limit = 160 if view.fold else TEXT_CHARS if view.cut else None
                call = tool_call_text(block, limit)
                out.line(out.paint(f"  → {safe_line(call)}", "yellow"))
                result = (results or {}).get(block.id)
                if result is not None:
                    _tool_result(out, result, view=view, nested=True)
        if m.error_message:
            _body(out, m.error_message, view=view, style="red", first="  error: ", foldable=False)
        out.line()
        return
    if isinstance(m, ToolResultMessage):
        out.line(out.paint(safe_line(head + f" · {m.tool_name} · {m.tool_call_id}"), style))
        _tool_result(out, m, view=view, nested=False)
        out.line()
        return
    if run is not None:
        _bash(out, run, view=view, head=head, style=style)
        out.line()
        return
    out.line(out.paint(safe_line(head + _role_extra(m)), style))
    if isinstance(m, (UserMessage, CustomMessage)):
        _text(out, blocks_text(m.content), view)
    elif isinstance(m, (CompactionSummaryMessage, BranchSummaryMessage)):
        _text(out, m.summary, view)
    elif isinstance(m, UnknownMessage):
        _body(out, json.dumps(m.data, ensure_ascii=False, indent=2), view=view, style="dim")
    out.line()


def _bash(out: Output, run: dict[str, Any], *, view: _View, head: str, style: str) -> None:
    """pi's shell run (``!cmd``) as one: ``$ command``, its output (folded as a tool's
    output is), and its exit code and flags in the head line."""
    status = bash_status(run)
    out.line(out.paint(safe_line(" · ".join([head, *status])), style))
    command = run.get("command")
    _body(
        out,
        command if isinstance(command, str) else json.dumps(command),
        view=view,
        style="bold",
        first="  $ ",
        indent="    ",
        foldable=False,
    )
    output = run.get("output")
    if isinstance(output, str) and output:
        _body(out, output, view=view, style=None)
    else:
        out.line(out.paint("  (no output)", "dim"))
    path = run.get("full_output_path")
    if run.get("truncated") and isinstance(path, str) and path:
        out.line(out.paint(safe_line(f"  full output: {path}"), "grey"))


def _role_extra(m: AgentMessage) -> str:
    if isinstance(m, CompactionSummaryMessage):
        return f" · {m.tokens_before:,} tokens before"
    if isinstance(m, BranchSummaryMessage):
        return f" · from {m.from_id}"
    if isinstance(m, CustomMessage):
        return f" · {m.custom_type}"
    return ""


def _tool_result(out: Output, m: ToolResultMessage, *, view: _View, nested: bool) -> None:
    text = blocks_text(m.content)
    mark = "✗ error · " if m.is_error else ""
    if nested:
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        out.line(
            out.paint(
                safe_line(f"    ↳ {mark}{m.tool_name} result · {lines:,} lines"),
                "red" if m.is_error else "grey",
            )
        )
    _body(
        out,
        text,
        view=view,
        style="red" if m.is_error else None,
        indent="      " if nested else "  ",
    )


@functools.cache
def _have_rich() -> bool:
    """Whether the ``cli`` extra is installed (Markdown is rendered with it, plain without);
    asked once (a failed import is not remembered by Python, and is asked per message)."""
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def _text(out: Output, text: str, view: _View) -> None:
    """A message's text: Markdown on a terminal with colour, else as it is; cut unless
    --full, with a line saying what was left out."""
    c = view.clip(text, foldable=False)
    if out.terminal and out.color and len(c.text) <= RICH_CHARS and _have_rich():
        from rich.console import Console
        from rich.markdown import Markdown

        console = Console(
            file=out.stream, force_terminal=True, width=out.width, highlight=False, soft_wrap=False
        )
        console.print(Markdown(safe_text(c.text), hyperlinks=False))
    else:
        out.text(c.text)
    if c.cut:
        out.line(out.paint(c.note(), "dim"))


def _body(
    out: Output,
    text: str,
    *,
    view: _View,
    style: str | None,
    indent: str = "  ",
    first: str | None = None,
    foldable: bool = True,
) -> None:
    """A block (tool output, thinking, data), each line indented: folded to a few lines
    (``foldable`` and not --full) or cut like a message's text, with a line saying what
    was left out. ``first`` replaces the indent of the first line."""
    c = view.clip(text, foldable=foldable)
    body = c.text
    if first is not None:
        nl = body.find("\n")
        head, body = (body, "") if nl < 0 else (body[:nl], body[nl + 1 :])
        out.text(head, style=style, indent=first) if head else out.line(first.rstrip())
    out.text(body, style=style, indent=indent)
    if c.cut:
        out.line(out.paint(indent + c.note(), "dim"))


def _session_json(session: Session) -> dict[str, Any]:
    storage = session.storage
    path = getattr(storage, "path", None)
    return {"id": session.id, "path": path, "name": session.get_session_name()}
