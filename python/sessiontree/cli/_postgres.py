"""``--repo postgresql://...``: the commands on a PostgreSQL repository.

Reading commands get a private temporary copy of the session's exact bytes (what the rows
hold, byte for byte) and read it as they read any file; ``ls`` lists from the sessions
table; ``import`` stores files byte for byte; ``fork`` forks inside the server.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Final

from .. import SessionError

if TYPE_CHECKING:
    from ..postgres import PostgresSessionRepo

_SCHEMES: Final = ("postgresql://", "postgres://")
ENV_SCHEMA: Final = "SESSIONTREE_PG_SCHEMA"

_copies: list[str] = []


def is_postgres(target: str | None) -> bool:
    """True when ``target`` (a ``--repo`` value) is a PostgreSQL conninfo URI."""
    return target is not None and target.startswith(_SCHEMES)


def display(target: str) -> str:
    """``target`` without its password, for output."""
    from ..postgres._connect import shown

    return shown(target)


def open_repo(target: str) -> PostgresSessionRepo:
    """The repository ``target`` names (schema ``$SESSIONTREE_PG_SCHEMA`` or the default)."""
    from ..postgres import PostgresSessionRepo
    from ..postgres._connect import check_schema

    schema = os.environ.get(ENV_SCHEMA) or "sessiontree"
    try:
        check_schema(schema)
    except SessionError as exc:
        # Said before connecting, naming where the bad name came from.
        raise SessionError("invalid_argument", f"${ENV_SCHEMA}: {exc.message}") from None
    return PostgresSessionRepo(target, schema=schema)


def _cleanup() -> None:
    for d in _copies:
        shutil.rmtree(d, ignore_errors=True)
    _copies.clear()


def is_copy(path: str) -> bool:
    """True for a temporary copy made by :func:`resolve` (never written back)."""
    return any(path.startswith(d + os.sep) for d in _copies)


def session_id_of(repo: PostgresSessionRepo, session: str | None) -> str:
    """The id ``session`` names (an id, a unique prefix, or ``None`` for the newest)."""
    rows = repo.list()
    if session is None:
        if not rows:
            raise SessionError("not_found", "no sessions in the PostgreSQL repository")
        return rows[0].id
    if any(m.id == session for m in rows):
        return session
    found = [m.id for m in rows if m.id.startswith(session)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise SessionError("not_found", f"no session {session!r} in the PostgreSQL repository")
    shown = ", ".join(sorted(found)[:5])
    raise SessionError("invalid_argument", f"{session!r} matches {len(found)} sessions: {shown}")


def resolve(target: str, session: str | None) -> str:
    """A private temporary file holding the named session's exact bytes."""
    with open_repo(target) as repo:
        sid = session_id_of(repo, session)
        data = repo.export_jsonl(sid)
    if not _copies:
        atexit.register(_cleanup)
    directory = tempfile.mkdtemp(prefix="sessiontree-pg-")
    _copies.append(directory)
    path = os.path.join(directory, sid + ".jsonl")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with contextlib.closing(os.fdopen(fd, "wb")) as f:
        f.write(data)
    return path


def import_files(target: str, files: list[str]) -> list[dict[str, object]]:
    """Stores each session file in the PostgreSQL repository byte for byte (its header's
    session id; ``exists`` if taken). Returns what ``import --json`` shows per file."""
    done: list[dict[str, object]] = []
    with open_repo(target) as repo:
        for name in files:
            path = os.path.abspath(os.path.expanduser(name))
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as exc:
                raise SessionError("io", f"cannot read {path}: {exc.strerror}") from exc
            with repo.import_jsonl(data) as session:
                # Every line is stored as it is (none left out), even one the reader skips.
                done.append(
                    {
                        "source": path,
                        "dialect": session.storage.dialect,
                        "session": {"id": session.id, "path": None, "entry_count": len(session)},
                        "skipped_lines": 0,
                    }
                )
    return done


def fork(target: str, session: str, entry_id: str | None, position: str) -> dict[str, object]:
    """Forks inside the server; returns what ``fork --json`` shows."""
    with open_repo(target) as repo:
        sid = session_id_of(repo, session)
        with repo.fork(sid, entry_id=entry_id, position=position) as forked:  # type: ignore[arg-type]
            return {
                "source": {"id": sid, "path": None},
                "entry_id": entry_id,
                "position": position if entry_id else None,
                "session": {
                    "id": forked.id,
                    "path": None,
                    "entry_count": len(forked),
                    "leaf_id": forked.get_leaf_id(),
                },
            }
