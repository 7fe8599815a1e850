"""``sessiontree check``: every problem the reader finds in session files, read-only.

Files are opened read-only *without* the persisted index (``index=False``): the whole file
is scanned, so every problem is reported, and nothing is written beside it — the session
file and its directory are left exactly as they were.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .. import JsonlSessionStorage, SessionError
from ._output import Output, open_output
from ._target import SUFFIX, Options, open_readonly, plural, repo_dir, resolve, shown

SCHEMA = "check"

STATUS_EXIT = {"ok": 0, "problems": 1, "refused": 2}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths",
        nargs="*",
        metavar="SESSION",
        help="session files, session ids, or directories (every *.jsonl in them); "
        "default: every session of the repository",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="a file with any problem counts as refused (exit 2), as a strict open refuses it",
    )


def dialect_of(storage: JsonlSessionStorage) -> str:
    # Storages that read other dialects say which one they read (pi's, issue 11).
    value = getattr(storage, "dialect", None)
    return value if isinstance(value, str) else "sessiontree"


def _files(opts: Options, names: list[str]) -> list[str]:
    if not names:
        root = repo_dir(opts)
        if root is None:
            from ._target import UsageError

            raise UsageError("no session given: name files or directories, or use --repo DIR")
        names = [root]
    out: list[str] = []
    for name in names:
        path = os.path.expanduser(name)
        if os.path.isdir(path):
            found: list[str] = []
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                found.extend(
                    os.path.join(dirpath, f)
                    for f in filenames
                    if f.endswith(SUFFIX) and not f.startswith(".")
                )
                if dirpath != path:
                    dirnames[:] = []  # one level down is enough (pi: one folder per cwd)
            out.extend(sorted(found))
        else:
            out.append(resolve(opts, name))
    return out


def check_file(opts: Options, path: str, *, strict: bool, color: bool) -> dict[str, Any]:
    """One file's report (a row of ``--json``'s ``files``)."""
    row: dict[str, Any] = {
        "path": path,
        "status": "ok",
        "dialect": None,
        "session_id": None,
        "entry_count": None,
        "issues": [],
        "torn_tail_bytes": 0,
        "error": None,
    }
    try:
        storage = open_readonly(opts, path, index=False, color=color)
    except SessionError as exc:
        row["status"] = "refused"
        row["error"] = {"code": exc.code, "message": exc.message}
        return row
    with storage:
        report = storage.load_report
        row["dialect"] = dialect_of(storage)
        row["session_id"] = storage.get_metadata().id
        row["entry_count"] = len(storage)
        row["issues"] = [
            {"line": i.line, "offset": i.offset, "kind": i.kind, "message": i.message}
            for i in report.issues
        ]
        row["torn_tail_bytes"] = report.torn_tail_bytes
    if not report.ok:
        row["status"] = "problems"
        if strict:
            row["status"] = "refused"
            try:
                JsonlSessionStorage.open(path, readonly=True, strict=True, index=False).close()
                row["error"] = {"code": "corrupt", "message": "strict mode refuses the problems"}
            except SessionError as exc:
                row["error"] = {"code": exc.code, "message": exc.message}
    return row


def run(args: argparse.Namespace, opts: Options) -> int:
    files = _files(opts, args.paths)
    color = not args.json and opts.color != "never"
    rows = [check_file(opts, f, strict=args.strict, color=color) for f in files]
    status = max((STATUS_EXIT[r["status"]] for r in rows), default=0)
    if args.json:
        with open_output(color_mode="never", pager=False) as out:
            out.json({"exit_code": status, "strict": bool(args.strict), "files": rows})
        return status
    with open_output(color_mode=opts.color, pager=opts.pager) as out:
        for row in rows:
            _text(out, row)
        if len(rows) > 1:
            counts = {s: sum(r["status"] == s for r in rows) for s in STATUS_EXIT}
            out.line(
                out.paint(
                    f"{plural(len(rows), 'file')}: {counts['ok']:,} ok, "
                    f"{counts['problems']:,} with problems, {counts['refused']:,} refused",
                    "bold",
                )
            )
        if not rows:
            out.line(out.paint("no session files", "dim"))
    return status


def _text(out: Output, row: dict[str, Any]) -> None:
    name = shown(row["path"])
    if row["status"] == "refused" and row["entry_count"] is None:
        err = row["error"]
        out.line(
            f"{name}: " + out.paint(f"refused: {err['code']}: {shown(err['message'])}", "bold red")
        )
        return
    n = row["entry_count"]
    dialect = "" if row["dialect"] == "sessiontree" else f", {row['dialect']} dialect"
    issues = row["issues"]
    if row["status"] == "ok":
        out.line(
            f"{name}: "
            + out.paint("ok", "bold green")
            + f" ({plural(n, 'entry', 'entries')}{dialect})"
        )
        return
    verdict = "refused (strict)" if row["status"] == "refused" else plural(len(issues), "problem")
    out.line(
        f"{name}: "
        + out.paint(verdict, "bold red" if row["status"] == "refused" else "bold yellow")
        + f" ({plural(n, 'entry', 'entries')} read{dialect})"
    )
    for i in issues:
        out.line(
            f"  line {i['line']:,} (byte {i['offset']:,}): "
            + out.paint(i["kind"], "yellow")
            + f" — {shown(i['message'])}"
        )
    if row["torn_tail_bytes"]:
        out.line(
            out.paint(
                f"  a torn last line of {plural(row['torn_tail_bytes'], 'byte')}: "
                "`sessiontree repair` "
                "cuts it into a side file",
                "grey",
            )
        )
    if row["error"] is not None:
        out.line(
            out.paint(f"  strict: {row['error']['code']}: {shown(row['error']['message'])}", "red")
        )
