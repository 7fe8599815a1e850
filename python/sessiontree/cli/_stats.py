"""``sessiontree stats``: counts, tokens and cost of a session, in all and per model."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from .. import (
    AssistantMessage,
    BranchSummaryEntry,
    CompactionEntry,
    JsonlSessionStorage,
    MessageEntry,
)
from ._output import Output, open_output, safe_line
from ._target import Options, open_readonly, resolve

SCHEMA = "stats"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", nargs="?", metavar="SESSION")


def _zero() -> dict[str, Any]:
    return {
        "messages": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "total_tokens": 0,
        "cost_total": 0.0,
    }


def collect(storage: JsonlSessionStorage) -> dict[str, Any]:
    """Everything ``stats`` shows, as its ``--json`` document (without ``session``)."""
    st = storage.get_session_stats()
    types: Counter[str] = Counter()
    roles: Counter[str] = Counter()
    per_model: dict[tuple[str, str], dict[str, Any]] = {}
    first = last = None
    for entry in storage.get_entries():
        types[entry.type] += 1
        if first is None:
            first = entry.timestamp
        last = entry.timestamp
        usage = None
        key = None
        if isinstance(entry, MessageEntry):
            m = entry.message
            roles[m.role] += 1
            if isinstance(m, AssistantMessage):
                usage, key = m.usage, (m.provider, m.model)
        elif isinstance(entry, (CompactionEntry, BranchSummaryEntry)) and entry.usage is not None:
            usage, key = entry.usage, ("(summaries)", entry.type)
        if key is None:
            continue
        row = per_model.setdefault(key, _zero())
        if isinstance(entry, MessageEntry):
            row["messages"] += 1
        if usage is not None:
            row["input_tokens"] += usage.input
            row["output_tokens"] += usage.output
            row["cache_read_tokens"] += usage.cache_read
            row["cache_write_tokens"] += usage.cache_write
            row["total_tokens"] += usage.total_tokens
            row["cost_total"] += usage.cost.total
    models = [
        {"provider": p, "model": m, **row}
        for (p, m), row in sorted(per_model.items(), key=lambda kv: -kv[1]["total_tokens"])
    ]
    return {
        "entry_count": st.entry_count,
        "message_count": st.message_count,
        "user_message_count": st.user_message_count,
        "assistant_message_count": st.assistant_message_count,
        "tool_result_count": st.tool_result_count,
        "input_tokens": st.input_tokens,
        "output_tokens": st.output_tokens,
        "cache_read_tokens": st.cache_read_tokens,
        "cache_write_tokens": st.cache_write_tokens,
        "total_tokens": st.total_tokens,
        "cost_total": st.cost_total,
        "entry_types": dict(sorted(types.items())),
        "message_roles": dict(sorted(roles.items())),
        "first_timestamp": first,
        "last_timestamp": last,
        "models": models,
        "labels": len(storage.get_labels()),
        "size_bytes": _size(storage),
    }


def _size(storage: JsonlSessionStorage) -> int:
    import os

    try:
        return os.stat(storage.path).st_size
    except OSError:
        return 0


def run(args: argparse.Namespace, opts: Options) -> int:
    path = resolve(opts, args.session)
    storage = open_readonly(opts, path, color=not args.json and opts.color != "never")
    with storage:
        doc = collect(storage)
        session = {
            "id": storage.get_metadata().id,
            "path": path,
            "name": storage.get_session_name(),
        }
    if args.json:
        with open_output(color_mode="never", pager=False) as out:
            out.json({"session": session, **doc})
        return 0
    with open_output(color_mode=opts.color, pager=opts.pager) as out:
        _text(out, session, doc)
    return 0


def _text(out: Output, session: dict[str, Any], d: dict[str, Any]) -> None:
    # Names, paths, times, types and models come from the file: every control in them
    # is shown as \x.. (safe_line), never written to the terminal.
    title = f"{session['name']} · " if session["name"] else ""
    out.line(out.paint(safe_line(f"{title}session {session['id']}"), "bold"))
    out.line(safe_line(f"  file        {session['path']} ({d['size_bytes']:,} bytes)"))
    out.line(
        safe_line(f"  time        {d['first_timestamp'] or '—'} → {d['last_timestamp'] or '—'}")
    )
    out.line(
        safe_line(
            f"  entries     {d['entry_count']:,}  ("
            + ", ".join(f"{k} {v:,}" for k, v in d["entry_types"].items())
            + ")"
        )
    )
    out.line(
        f"  messages    {d['message_count']:,}  (user {d['user_message_count']:,}, assistant "
        f"{d['assistant_message_count']:,}, tool results {d['tool_result_count']:,})"
    )
    out.line(f"  labels      {d['labels']:,}")
    out.line(
        f"  tokens      {d['total_tokens']:,}  (input {d['input_tokens']:,}, output "
        f"{d['output_tokens']:,}, cache read {d['cache_read_tokens']:,}, cache write "
        f"{d['cache_write_tokens']:,})"
    )
    out.line(f"  cost        ${d['cost_total']:,.4f}")
    if d["models"]:
        out.line()
        head = (
            f"  {'model':<40} {'msgs':>7} {'input':>12} {'output':>10} {'total':>12} {'cost':>10}"
        )
        out.line(out.paint(head, "bold"))
        for r in d["models"]:
            name = safe_line(f"{r['provider']}/{r['model']}")
            out.line(
                f"  {name:<40} {r['messages']:>7,} {r['input_tokens']:>12,} "
                f"{r['output_tokens']:>10,} {r['total_tokens']:>12,} {r['cost_total']:>10,.4f}"
            )
