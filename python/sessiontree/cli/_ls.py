"""``sessiontree ls``: the sessions of a repository, newest first.

A directory laid out as pi keeps its sessions (``~/.pi/agent/sessions``, one of its
``--<cwd>--`` folders, or files under pi's names) is listed as ``PiSessionRepo`` lists it:
every session by its header's id, the root's folders included. Everything printed from
session data (ids, cwd, names, first messages, errors) has its terminal controls escaped.
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime, timezone

from .. import PiSessionRepo, SessionError, SessionMetadata
from ._output import Output, cell_width, fit, one_line, open_output, safe_text
from ._postgres import display, is_postgres, open_repo
from ._target import Options, UsageError, repo_dir, repo_for, require_dir

SCHEMA = "ls"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", nargs="?", metavar="DIR", help="the repository (default: --repo)")
    p.add_argument("--cwd", metavar="PATH", help="only sessions of this working directory")
    p.add_argument("--limit", type=int, metavar="N", help="at most N sessions")
    p.add_argument(
        "-r",
        "--recursive",
        action="store_true",
        help="also list the repositories in DIR's subdirectories (pi's sessions folder "
        "lists its --<cwd>-- folders without it)",
    )


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def row_json(m: SessionMetadata) -> dict[str, object]:
    return {
        "id": m.id,
        "path": m.path,
        "name": m.name,
        "first_message": m.first_message,
        "cwd": m.cwd,
        "created": iso(m.created),
        "modified": iso(m.modified),
        "parent_session": m.parent_session,
        "entry_count": m.entry_count,
        "message_count": m.message_count,
        "size_bytes": m.size_bytes,
        "error": m.error,
    }


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"


def _when(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone().strftime("%Y-%m-%d %H:%M")


def _text(value: str) -> str:
    """A cell from session data: one line, every terminal control shown escaped."""
    return one_line(safe_text(value))


def _listed(directory: str, recursive: bool, cwd: str | None) -> list[SessionMetadata]:
    """The sessions of ``directory`` (see ``repo_for``: pi's sessions root lists its
    ``--<cwd>--`` folders too) and, if ``recursive``, of every directory under it."""
    repo = repo_for(directory)
    rows = repo.list(cwd=cwd)
    if recursive:
        try:
            with os.scandir(directory) as it:
                subdirs = sorted(
                    de.path
                    for de in it
                    if not de.name.startswith(".") and de.is_dir(follow_symlinks=False)
                )
        except OSError:
            subdirs = []
        for sub in subdirs:
            if isinstance(repo, PiSessionRepo) and os.path.basename(sub).startswith("--"):
                continue  # listed with the root (PiSessionRepo reads its "--…" folders)
            rows.extend(_listed(sub, recursive, cwd))
    return rows


def collect(
    root: str, *, cwd: str | None, limit: int | None, recursive: bool
) -> list[SessionMetadata]:
    rows = _listed(root, recursive, cwd)
    if recursive:
        rows.sort(
            key=lambda m: (m.modified or datetime.min.replace(tzinfo=timezone.utc), m.id),
            reverse=True,
        )
    return rows if limit is None else rows[:limit]


def run(args: argparse.Namespace, opts: Options) -> int:
    root = repo_dir(opts, args.dir)
    if root is None:
        raise UsageError(f"no repository: give DIR, --repo DIR or ${'SESSIONTREE_REPO'}")
    require_dir(root)
    if args.limit is not None and args.limit < 0:
        raise SessionError("invalid_argument", f"--limit must not be negative (got {args.limit})")
    cwd = os.path.abspath(os.path.expanduser(args.cwd)) if args.cwd else None
    if is_postgres(root):
        with open_repo(root) as pg:
            rows = pg.list(cwd=cwd, limit=args.limit)
    else:
        rows = collect(root, cwd=cwd, limit=args.limit, recursive=args.recursive)
    if args.json:
        with open_output(color_mode="never", pager=False) as out:
            shown = display(root) if is_postgres(root) else root
            out.json({"repo": shown, "sessions": [row_json(m) for m in rows]})
        return 0
    with open_output(color_mode=opts.color, pager=opts.pager) as out:
        table(out, rows)
    return 0


def table(out: Output, rows: list[SessionMetadata]) -> None:
    if not rows:
        out.line(out.paint("no sessions", "dim"))
        return
    cols = [
        ("modified", [_when(m.modified) for m in rows], "left"),
        ("id", [_text(m.id) for m in rows], "left"),
        ("msgs", [f"{m.message_count:,}" for m in rows], "right"),
        ("size", [human_size(m.size_bytes) for m in rows], "right"),
        ("cwd", [_text(m.cwd) or "—" for m in rows], "left"),
    ]
    widths = [max(len(title), *(cell_width(v) for v in values)) for title, values, _ in cols]
    # The id and cwd columns give way first on a narrow terminal; the title takes the rest.
    fixed = sum(widths) + 2 * len(cols)
    title_room = max(out.width - fixed, 24)
    if fixed + title_room > out.width:
        widths[4] = max(8, widths[4] - (fixed + title_room - out.width))
        fixed = sum(widths) + 2 * len(cols)
        title_room = max(out.width - fixed, 16)
    head = "  ".join(
        (title.rjust(w) if align == "right" else title.ljust(w))
        for (title, _, align), w in zip(cols, widths, strict=True)
    )
    out.line(out.paint(f"{head}  session", "bold"))
    for i, m in enumerate(rows):
        cells = []
        for (_, values, align), w in zip(cols, widths, strict=True):
            v = fit(values[i], w)
            pad = " " * (w - cell_width(v))
            cells.append(pad + v if align == "right" else v + pad)
        if m.error:
            title = out.paint(fit(f"error: {_text(m.error)}", title_room), "red")
        elif m.name:
            title = out.paint(fit(_text(m.name), title_room), "bold")
        elif m.first_message:
            title = fit(_text(m.first_message), title_room)
        else:
            title = out.paint("(no messages)", "dim")
        line = "  ".join(cells)
        out.line(f"{out.paint(line[: len(cells[0])], 'grey')}{line[len(cells[0]) :]}  {title}")
