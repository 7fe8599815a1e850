"""``sessiontree import``: copy a session file (a branch exported as JSONL, a file from
elsewhere, a pi session) into a repository.

The file is read with ``JsonlSessionStorage.open(..., readonly=True)``, so whatever that
reads is imported, and written in its own dialect (a pi file stays a pi file pi can resume;
``convert`` changes dialects) as ``<repo>/<id>.jsonl``, or into pi's layout as pi names its
files (``<repo>/--<cwd>--/<time>_<id>.jsonl``, or ``<repo>/<time>_<id>.jsonl`` in one
``--<cwd>--`` folder): the source's header id when it is a valid id not taken yet, else a
new UUIDv7. The copy is what the reader kept (entries in file order, ids and timestamps
preserved), written atomically (see ``_copy``); the source is not changed.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .. import JsonlSessionRepo, SessionError, SessionHeader, is_valid_session_id
from .._util import iso_to_datetime
from ..repo.base import _check_session_id
from ..repo.files import _make_private_dir
from ..repo.pi import PiSessionRepo, pi_cwd_folder, pi_file_name
from ._copy import dialect_of, header_copy, write_session
from ._output import open_output
from ._postgres import display, import_files, is_postgres
from ._target import (
    Options,
    UsageError,
    is_pi_dir,
    is_pi_folder_name,
    open_readonly,
    plural,
    repo_dir,
    require_dir,
    shown,
)

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
    repo = PiSessionRepo(root) if is_pi_dir(root) else JsonlSessionRepo(root)
    done: list[dict[str, Any]] = []
    for name in args.files:
        path = os.path.abspath(os.path.expanduser(name))
        source = open_readonly(opts, path, color=not args.json and opts.color != "never")
        with source:
            header = source.get_metadata()
            sid = args.new_id or header.id
            if not is_valid_session_id(sid) or _taken(repo, sid):
                if args.new_id is not None:
                    _check_session_id(sid)  # raises invalid_id for a bad --id
                    raise SessionError("exists", f"session {sid!r} already exists in {root}")
                sid = SessionHeader.generate(cwd=header.cwd).id
            dest = _destination(repo, sid, header)
            n = write_session(
                dest,
                header_copy(header, session_id=sid),
                source.get_entries(),
                leaf_id=source.get_leaf_id(),
                dialect=dialect_of(source),
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


def _taken(repo: JsonlSessionRepo, sid: str) -> bool:
    if isinstance(repo, PiSessionRepo):
        return sid in repo
    return os.path.lexists(repo.path_for(sid))


def _destination(repo: JsonlSessionRepo, sid: str, header: SessionHeader) -> str:
    """Where session ``sid`` goes: ``<id>.jsonl``, or in pi's layout where pi would keep
    it (the folder of its cwd, under pi's name for the file)."""
    if not isinstance(repo, PiSessionRepo):
        return repo.path_for(sid)
    name = pi_file_name(sid, iso_to_datetime(header.timestamp))
    if is_pi_folder_name(os.path.basename(repo.root_dir)):
        return os.path.join(repo.root_dir, name)
    folder = os.path.join(repo.root_dir, pi_cwd_folder(header.cwd))
    _make_private_dir(folder)
    return os.path.join(folder, name)


def _report(args: argparse.Namespace, opts: Options, root: str, done: list[dict[str, Any]]) -> int:
    with open_output(color_mode="never" if args.json else opts.color, pager=False) as out:
        if args.json:
            out.json({"repo": root, "imported": done})
        else:
            for d in done:
                skipped = d["skipped_lines"]
                left_out = f", {plural(skipped, 'problem line')} left out" if skipped else ""
                out.line(
                    f"imported {shown(d['source'])} as {out.paint(d['session']['id'], 'bold')} "
                    f"({plural(d['session']['entry_count'], 'entry', 'entries')}{left_out})"
                )
    return 0
