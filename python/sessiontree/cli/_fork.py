"""``sessiontree fork``: copy a session, or its branch at an entry, into a new session of
the same repository (``JsonlSessionRepo.fork``), in the source's dialect: a pi session is
forked as ``PiSessionRepo.fork`` does it, into a pi file named as pi names them, beside the
source, whose ``parentSession`` is the source's path."""

from __future__ import annotations

import argparse
import os
from datetime import datetime, timezone
from typing import Any

from .. import (
    ForkPosition,
    JsonlSessionStorage,
    SessionError,
    is_valid_session_id,
)
from .._util import uuid7
from ..repo.base import _check_fork_args
from ..repo.fork import fork_file
from ..repo.pi import pi_file_name
from ._copy import dialect_of
from ._output import open_output
from ._postgres import fork as pg_fork
from ._postgres import is_postgres
from ._target import SUFFIX, Options, open_readonly, plural, repo_dir, resolve, shown

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
        pg_doc = pg_fork(root, args.session, entry_id, "at" if args.at else "before")
        with open_output(color_mode="never" if args.json else opts.color, pager=False) as out:
            if args.json:
                out.json(pg_doc)
            else:
                pg_new = pg_doc["session"]
                out.line(
                    f"forked {shown(args.session)} into {out.paint(pg_new['id'], 'bold')} "  # type: ignore[index]
                    f"({plural(pg_new['entry_count'], 'entry', 'entries')}) "  # type: ignore[index]
                    "in the PostgreSQL repository"
                )
        return 0
    path = resolve(opts, args.session)
    entry_id = args.at or args.before
    position: ForkPosition = "at" if args.at else "before"
    source = open_readonly(opts, path)
    with source:
        doc = _fork(source, path, entry_id, position)
    with open_output(color_mode="never" if args.json else opts.color, pager=False) as out:
        if args.json:
            out.json(doc)
        else:
            new = doc["session"]
            out.line(
                f"forked {shown(doc['source']['id'])} into {out.paint(new['id'], 'bold')} "
                f"({plural(new['entry_count'], 'entry', 'entries')})"
            )
            out.line(f"  {shown(new['path'])}")
    return 0


def _fork(
    source: JsonlSessionStorage, path: str, entry_id: str | None, position: ForkPosition
) -> dict[str, Any]:
    """A fork of ``source`` beside it (``SessionRepo.fork``'s copy): a sessiontree session
    into ``<new id>.jsonl`` of its repository (``JsonlSessionRepo.fork``), a pi session
    into a file named as pi names them whose ``parentSession`` is the source's path
    (``PiSessionRepo.fork``)."""
    _check_fork_args(entry_id, position)
    directory, name = os.path.split(path)
    new_id = str(uuid7())
    if dialect_of(source) == "pi":
        sid = source.get_metadata().id
        dest = os.path.join(directory, pi_file_name(new_id, datetime.now(timezone.utc)))
        parent: str | None = path
    else:
        sid = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else ""
        if not is_valid_session_id(sid):
            raise SessionError(
                "invalid_id",
                f"{name} is not named <session id>.jsonl, so it is in no repository to fork "
                "in (`sessiontree import` copies it into one)",
            )
        dest = os.path.join(directory, new_id + SUFFIX)
        parent = None  # the source's id
    with fork_file(
        source,
        dest,
        new_id,
        entry_id,
        position,
        durability="group",
        limits=None,
        parent_session=parent,
    ) as forked:
        count, leaf = len(forked), forked.get_leaf_id()
    return {
        "source": {"id": sid, "path": path},
        "entry_id": entry_id,
        "position": position if entry_id else None,
        "session": {"id": new_id, "path": dest, "entry_count": count, "leaf_id": leaf},
    }
