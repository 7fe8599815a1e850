"""``sessiontree fork``: copy a session, or its branch at an entry, into a new session of
the same repository (``JsonlSessionRepo.fork``)."""

from __future__ import annotations

import argparse
import os

from .. import ForkPosition, JsonlSessionRepo, SessionError, is_valid_session_id
from ._output import open_output
from ._postgres import fork as pg_fork
from ._postgres import is_postgres
from ._target import SUFFIX, Options, repo_dir, resolve

SCHEMA = "fork"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="SESSION")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--at", metavar="ID", help="copy the branch up to and including ID")
    where.add_argument(
        "--before", metavar="ID", help="copy the branch before the user message ID (to retry it)"
    )


def run(args: argparse.Namespace, opts: Options) -> int:
    root = repo_dir(opts)
    if is_postgres(root) and not os.path.lexists(os.path.expanduser(args.session)):
        assert root is not None
        entry_id = args.at or args.before
        doc = pg_fork(root, args.session, entry_id, "at" if args.at else "before")
        with open_output(color_mode="never" if args.json else opts.color, pager=False) as out:
            if args.json:
                out.json(doc)
            else:
                new = doc["session"]
                out.line(
                    f"forked {args.session} into {out.paint(new['id'], 'bold')} "  # type: ignore[index]
                    f"({new['entry_count']:,} entries) in the PostgreSQL repository"  # type: ignore[index]
                )
        return 0
    path = resolve(opts, args.session)
    directory, name = os.path.split(path)
    sid = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else ""
    if not is_valid_session_id(sid):
        raise SessionError(
            "invalid_id",
            f"{name} is not named <session id>.jsonl, so it is in no repository to fork in "
            "(`sessiontree import` copies it into one)",
        )
    repo = JsonlSessionRepo(directory)
    entry_id = args.at or args.before
    position: ForkPosition = "at" if args.at else "before"
    with repo.fork(sid, entry_id=entry_id, position=position) as forked:
        new_id = forked.id
        count = len(forked)
        leaf = forked.get_leaf_id()
    new_path = repo.path_for(new_id)
    doc = {
        "source": {"id": sid, "path": path},
        "entry_id": entry_id,
        "position": position if entry_id else None,
        "session": {"id": new_id, "path": new_path, "entry_count": count, "leaf_id": leaf},
    }
    with open_output(color_mode="never" if args.json else opts.color, pager=False) as out:
        if args.json:
            out.json(doc)
        else:
            out.line(f"forked {sid} into {out.paint(new_id, 'bold')} ({count:,} entries)")
            out.line(f"  {new_path}")
    return 0
