"""``sessiontree import``: copy a session file (a branch exported as JSONL, a file from
elsewhere, or — once the storage reads pi's dialect — a pi session) into a repository.

The file is read with ``JsonlSessionStorage.open(..., readonly=True)``, so whatever that
reads is imported, and written in this library's format as ``<repo>/<id>.jsonl``: the
source's header id when it is a valid id not taken yet, else a new UUIDv7. The copy is
what the reader kept (entries in file order, ids and timestamps preserved), written
atomically (see ``_copy``); the source is not changed.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .. import JsonlSessionRepo, SessionHeader, is_valid_session_id
from ._check import dialect_of
from ._copy import header_copy, write_session
from ._output import open_output
from ._postgres import display, import_files, is_postgres
from ._target import Options, UsageError, open_readonly, repo_dir, require_dir

SCHEMA = "import"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="session files to import")
    p.add_argument("--id", dest="new_id", metavar="ID", help="the new session's id (one FILE)")


def run(args: argparse.Namespace, opts: Options) -> int:
    root = repo_dir(opts)
    if root is None:
        raise UsageError(f"import needs a repository: --repo DIR or ${'SESSIONTREE_REPO'}")
    if args.new_id is not None and len(args.files) != 1:
        raise UsageError("--id goes with one FILE")
    require_dir(root)
    if is_postgres(root):
        if args.new_id is not None:
            raise UsageError("--id is for directories: PostgreSQL keeps the file's own id")
        return _report(args, opts, display(root), import_files(root, args.files))
    repo = JsonlSessionRepo(root)
    done: list[dict[str, Any]] = []
    for name in args.files:
        path = os.path.abspath(os.path.expanduser(name))
        source = open_readonly(opts, path, color=not args.json and opts.color != "never")
        with source:
            header = source.get_metadata()
            sid = args.new_id or header.id
            if not is_valid_session_id(sid) or os.path.lexists(repo.path_for(sid)):
                if args.new_id is not None:
                    repo.path_for(sid)  # raises invalid_id for a bad --id
                    from .. import SessionError

                    raise SessionError("exists", f"session {sid!r} already exists in {root}")
                sid = SessionHeader.generate(cwd=header.cwd).id
            dest = repo.path_for(sid)
            n = write_session(
                dest,
                header_copy(header, session_id=sid),
                source.get_entries(),
                leaf_id=source.get_leaf_id(),
            )
            done.append(
                {
                    "source": path,
                    "dialect": dialect_of(source),
                    "session": {"id": sid, "path": dest, "entry_count": n},
                    "skipped_lines": len(source.load_report.issues),
                }
            )
    return _report(args, opts, root, done)


def _report(args: argparse.Namespace, opts: Options, root: str, done: list[dict[str, Any]]) -> int:
    with open_output(color_mode="never" if args.json else opts.color, pager=False) as out:
        if args.json:
            out.json({"repo": root, "imported": done})
        else:
            for d in done:
                skipped = (
                    f", {d['skipped_lines']} problem lines left out" if d["skipped_lines"] else ""
                )
                out.line(
                    f"imported {d['source']} as {out.paint(d['session']['id'], 'bold')} "
                    f"({d['session']['entry_count']:,} entries{skipped})"
                )
    return 0
