"""``sessiontree repair``: cut a torn tail into its side file; on request, write a clean
copy without malformed or duplicate lines.

Nothing is ever lost or rewritten in place without a copy: a torn tail is moved into
``<file>.torn-<UTC time>`` by the storage's own writer open (its bytes are kept there); a
clean copy goes to a new file, or with ``--in-place`` over the session after the original
was kept as ``<file>.bak-<UTC time>`` (a hard link: the very same bytes).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from .. import SessionError
from ._check import check_file
from ._copy import dialect_of, header_copy, write_session
from ._output import open_output
from ._postgres import is_copy
from ._target import Options, open_readonly, open_writer, plural, resolve, shown

SCHEMA = "repair"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="SESSION")
    p.add_argument(
        "--clean",
        action="store_true",
        help="write a copy without the malformed and duplicate lines the reader skips",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="with --clean: the copy (default: <file stem>.repaired.jsonl beside it)",
    )
    p.add_argument(
        "--in-place",
        action="store_true",
        help="with --clean: replace the session by the copy, keeping the original as "
        "<file>.bak-<time>",
    )
    p.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def _default_output(path: str) -> str:
    stem = path[: -len(".jsonl")] if path.endswith(".jsonl") else path
    return stem + ".repaired.jsonl"


def run(args: argparse.Namespace, opts: Options) -> int:
    if (args.output or args.in_place) and not args.clean:
        raise SessionError("invalid_argument", "--output and --in-place go with --clean")
    if args.output and args.in_place:
        raise SessionError("invalid_argument", "--output and --in-place exclude each other")
    path = resolve(opts, args.session)
    if is_copy(path) and (args.in_place or (args.clean and not args.output)):
        raise SessionError(
            "invalid_argument",
            "a PostgreSQL session's rows are never rewritten: --clean writes its copy only "
            "with --output FILE",
        )
    color = not args.json and opts.color != "never"
    before = check_file(opts, path, strict=False, color=color)
    doc: dict[str, Any] = {
        "path": path,
        "dry_run": bool(args.dry_run),
        "before": before,
        "actions": [],
        "after": None,
        "output": None,
        "backup": None,
        "torn_path": None,
    }
    if before["status"] == "refused":
        return _report(args, opts, doc, 2)
    torn = before["torn_tail_bytes"] > 0
    dirty = any(i["kind"] != "torn_tail" for i in before["issues"])
    actions: list[str] = doc["actions"]
    if torn and not (args.clean and not args.in_place):
        actions.append("cut_torn_tail")
    if args.clean and (dirty or torn or args.output):
        actions.append("write_clean_copy")
    if args.dry_run or not actions:
        if not actions and dirty:
            doc["hint"] = (
                "the file has malformed or duplicate lines: --clean writes a copy without them"
            )
        return _report(args, opts, doc, 0 if not dirty or args.clean else 1)

    if not args.clean:
        # The storage's writer open cuts a torn tail into its side file (and takes the
        # lock, so no agent is writing meanwhile).
        storage = open_writer(opts, path, color=color)
        with storage:
            doc["torn_path"] = storage.torn_path
        doc["after"] = check_file(opts, path, strict=False, color=color)
        return _report(args, opts, doc, 0 if doc["after"]["status"] == "ok" else 1)

    if args.in_place:
        backup = f"{path}.bak-{_stamp()}"
        storage = open_writer(opts, path, color=color)
        with storage:
            doc["torn_path"] = storage.torn_path
            os.link(path, backup)
            doc["backup"] = backup
            write_session(
                path,
                header_copy(storage.get_metadata()),
                storage.get_entries(),
                leaf_id=storage.get_leaf_id(),
                replace=True,
                dialect=dialect_of(storage),
            )
        doc["output"] = path
    else:
        out = os.path.abspath(args.output or _default_output(path))
        storage = open_readonly(opts, path, color=color)
        with storage:
            write_session(
                out,
                header_copy(storage.get_metadata()),
                storage.get_entries(),
                leaf_id=storage.get_leaf_id(),
                dialect=dialect_of(storage),
            )
        doc["output"] = out
    doc["after"] = check_file(opts, doc["output"], strict=False, color=color)
    return _report(args, opts, doc, 0 if doc["after"]["status"] == "ok" else 1)


def _report(args: argparse.Namespace, opts: Options, doc: dict[str, Any], status: int) -> int:
    doc["exit_code"] = status
    if args.json:
        with open_output(color_mode="never", pager=False) as out:
            out.json(doc)
        return status
    with open_output(color_mode=opts.color, pager=False) as out:
        before = doc["before"]
        if before["status"] == "refused":
            err = before["error"]
            out.line(
                f"{shown(doc['path'])}: "
                + out.paint(f"refused: {err['code']}: {shown(err['message'])}", "bold red")
            )
            out.line("  nothing was changed")
            return status
        kinds: dict[str, int] = {}
        for i in before["issues"]:
            kinds[i["kind"]] = kinds.get(i["kind"], 0) + 1
        found = ", ".join(f"{k} {v:,}" for k, v in sorted(kinds.items())) or "no problems"
        out.line(f"{shown(doc['path'])}: {found}")
        if not doc["actions"]:
            out.line("  nothing to do")
        verb = "would " if doc["dry_run"] else ""
        for action in doc["actions"]:
            if action == "cut_torn_tail":
                where = doc["torn_path"] or f"{doc['path']}.torn-<time>"
                out.line(
                    f"  {verb}cut the torn last line ({plural(before['torn_tail_bytes'], 'byte')}) "
                    f"into {shown(where)}"
                )
            elif action == "write_clean_copy":
                target = doc["output"] or (
                    doc["path"] if args.in_place else (args.output or _default_output(doc["path"]))
                )
                out.line(f"  {verb}write a clean copy to {shown(target)}")
        if doc["backup"]:
            out.line(f"  the original is kept as {shown(doc['backup'])}")
        if doc.get("hint"):
            out.line(out.paint(f"  {doc['hint']}", "yellow"))
        after = doc["after"]
        if after is not None:
            state = (
                "clean"
                if after["status"] == "ok"
                else f"{plural(len(after['issues']), 'problem')} left"
            )
            out.line(
                f"  now: {shown(after['path'])} is "
                + out.paint(state, "bold green" if after["status"] == "ok" else "bold yellow")
                + f" ({plural(after['entry_count'], 'entry', 'entries')})"
            )
    return status
