"""``sessiontree search``: find what was said in any session of a repository.

One line per hit: time, session, entry, role and the snippet with the match highlighted
(bold yellow on a colour terminal; between ``**`` marks otherwise). ``--json`` gives the
hits as ``SearchHit.to_json`` shapes them (``sessiontree schema search``). The exit status
is 1 when nothing matched, as grep's. Snippets come from session data: every terminal
control in them is shown escaped, never written.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .. import SessionError
from ..search import SearchHit
from ._output import Output, open_output, safe_line
from ._postgres import display, is_postgres, open_repo
from ._target import Options, UsageError, repo_dir, repo_for, require_dir

SCHEMA = "search"

# A first scan of more than this many bytes says so on stderr (``--progress auto``).
_BIG_SCAN_BYTES = 50_000_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", metavar="QUERY", help='what to find: words, "phrases", -not, prefix*')
    p.add_argument("dir", nargs="?", metavar="DIR", help="the repository (default: --repo)")
    p.add_argument(
        "--role",
        action="append",
        metavar="ROLE",
        help="only messages of this role (user, assistant, tool_result, ...; repeatable)",
    )
    p.add_argument(
        "--type",
        action="append",
        metavar="TYPE",
        help="only entries of this type (message, compaction, label, ...; repeatable)",
    )
    p.add_argument("--since", metavar="TIME", help="only entries at or after TIME (ISO 8601)")
    p.add_argument("--until", metavar="TIME", help="only entries before TIME (ISO 8601)")
    p.add_argument("--cwd", metavar="PATH", help="only sessions of this working directory")
    p.add_argument("--limit", type=int, default=50, metavar="N", help="at most N hits (50)")
    p.add_argument("--newest", action="store_true", help="newest first (default: best first)")
    p.add_argument(
        "--branch-only", action="store_true", help="only entries on their session's branch"
    )


def _when(hit: SearchHit) -> str:
    if hit.timestamp is None:
        return "—".ljust(16)
    return hit.timestamp.astimezone().strftime("%Y-%m-%d %H:%M")


def highlighted(out: Output, hit: SearchHit) -> str:
    """The snippet, every piece escaped (:func:`safe_line`), the marked matches painted
    (their ``**`` marks dropped) when colour is on."""
    if not out.color:
        return safe_line(hit.snippet)
    parts = []
    at = 0
    for start, end in hit.marks:
        parts.append(safe_line(hit.snippet[at : start - 2]))
        parts.append(out.paint(safe_line(hit.snippet[start:end]), "bold yellow"))
        at = end + 2
    parts.append(safe_line(hit.snippet[at:]))
    return "".join(parts)


def _scan_note(opts: Options, root: str) -> None:
    """Says on stderr that a large first scan is under way (no index, ``--progress``)."""
    if opts.progress == "never" or is_postgres(root):
        return
    if opts.progress == "auto" and not sys.stderr.isatty():
        return
    repo = repo_for(root)
    if getattr(repo, "search_index_status", lambda: "none")() == "ready":
        return
    total = sum(m.size_bytes for m in repo.list())
    if opts.progress == "always" or total > _BIG_SCAN_BYTES:
        sys.stderr.write(f"searching {total / 1e6:,.0f} MB of sessions (no index: a scan)…\n")
        sys.stderr.flush()


def run(args: argparse.Namespace, opts: Options) -> int:
    root = repo_dir(opts, args.dir)
    if root is None:
        raise UsageError("no repository: give DIR, --repo DIR or $SESSIONTREE_REPO")
    require_dir(root)
    kwargs: dict[str, Any] = {
        "roles": args.role,
        "types": args.type,
        "since": args.since,
        "until": args.until,
        "cwd": os.path.abspath(os.path.expanduser(args.cwd)) if args.cwd else None,
        "branch_only": args.branch_only,
        "order": "newest" if args.newest else "relevance",
        "limit": args.limit,
    }
    if args.limit is not None and not 1 <= args.limit <= 10_000:
        raise SessionError("invalid_argument", f"--limit must be 1 to 10000 (got {args.limit})")
    if is_postgres(root):
        with open_repo(root) as pg:
            hits = pg.search(args.query, **kwargs)
        shown = display(root)
    else:
        _scan_note(opts, root)
        hits = repo_for(root).search(args.query, **kwargs)
        shown = root
    if args.json:
        with open_output(color_mode="never", pager=False) as out:
            out.json({"repo": shown, "query": args.query, "hits": [h.to_json() for h in hits]})
        return 0 if hits else 1
    with open_output(color_mode=opts.color, pager=opts.pager) as out:
        for h in hits:
            where = f"{_when(h)}  {safe_line(h.session_id)}  {safe_line(h.entry_id)}"
            role = h.role or h.entry_type
            branch = "" if h.on_branch else out.paint(" (off branch)", "dim")
            out.line(
                f"{out.paint(where, 'grey')}  {out.paint(safe_line(role), 'bold')}{branch}  "
                f"{highlighted(out, h)}"
            )
    return 0 if hits else 1
