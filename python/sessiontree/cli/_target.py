"""Which session a command works on, and opening it.

A ``SESSION`` argument is a path to a session file, or — with a repository (``--repo DIR``
or ``$SESSIONTREE_REPO``) — a session id, a unique prefix of one, or nothing (the newest
session). Files are opened with the public storage API only
(``JsonlSessionStorage.open(..., readonly=True)`` for every reading command), so any
dialect the storage reads, the command reads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .. import JsonlSessionRepo, JsonlSessionStorage, PiSessionRepo, SessionError
from ._output import safe_text
from ._postgres import is_postgres
from ._progress import want_progress, with_progress

SUFFIX: Final = ".jsonl"
ENV_REPO: Final = "SESSIONTREE_REPO"

# pi's name for a session file, ``<UTC time with - for : and .>_<session id>.jsonl``
# (``sessiontree.repo.pi.pi_file_name``).
_PI_FILE_RE: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z_.+\.jsonl")


class UsageError(Exception):
    """Wrong arguments: reported on one line, exit status 2."""


@dataclass(frozen=True)
class Options:
    """Settings every command shares (from the global options)."""

    repo: str | None
    color: str
    pager: bool
    progress: str


def shown(text: str) -> str:
    """A path, id or name as one line of terminal output: every control (tab and newline
    included) shown escaped as ``\\x..``, so a file or session name cannot drive the
    terminal."""
    return safe_text(text).replace("\t", "\\x09").replace("\n", "\\x0a")


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 entry``, ``2 entries``, ``1,204 problems``: a count and its noun, agreeing."""
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


def repo_dir(opts: Options, explicit: str | None = None) -> str | None:
    """The repository directory: ``explicit``, else ``--repo``, else ``$SESSIONTREE_REPO``
    (a ``postgresql://`` URI is kept as it is: see ``_postgres``)."""
    for value in (explicit, opts.repo, os.environ.get(ENV_REPO)):
        if value:
            if is_postgres(value):
                return value
            return os.path.abspath(os.path.expanduser(value))
    return None


def require_dir(path: str) -> str:
    if is_postgres(path):
        return path
    if not os.path.exists(path):
        raise SessionError("not_found", f"{path}: no such directory")
    if not os.path.isdir(path):
        raise SessionError("invalid_argument", f"{path} is not a directory")
    return path


def is_pi_file_name(name: str) -> bool:
    """True for pi's name of a session file (``2026-…Z_<uuid>.jsonl``)."""
    return _PI_FILE_RE.fullmatch(name) is not None


def is_pi_folder_name(name: str) -> bool:
    """True for the name of a folder of pi's sessions root (``--home-u-project--``)."""
    return len(name) >= 4 and name.startswith("--") and name.endswith("--")


def is_pi_dir(path: str) -> bool:
    """True when ``path`` is laid out as pi keeps its sessions: pi's sessions root (it has
    ``--<cwd>--`` folders), one such folder, or a directory of files named as pi names
    them. Its sessions are then known by their headers' ids, not their file names."""
    if is_pi_folder_name(os.path.basename(os.path.normpath(path))):
        return True
    try:
        names = os.listdir(path)
    except OSError:
        return False
    # A cheap test of every name first (a repository may hold a million files).
    for name in [n for n in names if n[4:5] == "-" or n[:2] == "--"]:
        if is_pi_file_name(name):
            return True
        if is_pi_folder_name(name):
            sub = os.path.join(path, name)
            if os.path.isdir(sub) and not os.path.islink(sub):
                return True
    return False


def repo_for(path: str) -> JsonlSessionRepo:
    """The repository that lists directory ``path``: pi's layout (:func:`is_pi_dir`) is
    read as :class:`~sessiontree.PiSessionRepo` reads it (sessions by their headers' ids,
    the ``--<cwd>--`` folders of its root included), any other directory as a
    :class:`~sessiontree.JsonlSessionRepo` (``<id>.jsonl``)."""
    if is_pi_dir(path):
        return PiSessionRepo(path)
    return JsonlSessionRepo(path)


def _session_files(root: str) -> list[str]:
    """Session files in ``root`` and in its direct subdirectories (pi keeps one directory
    per working directory under its sessions root)."""
    out: list[str] = []
    try:
        entries = list(os.scandir(root))
    except OSError as exc:
        raise SessionError("io", f"cannot read {root}: {exc.strerror}") from exc
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.name.endswith(SUFFIX) and entry.is_file(follow_symlinks=False):
            out.append(entry.path)
        elif entry.is_dir(follow_symlinks=False):
            try:
                out.extend(
                    sub.path
                    for sub in os.scandir(entry.path)
                    if sub.name.endswith(SUFFIX)
                    and not sub.name.startswith(".")
                    and sub.is_file(follow_symlinks=False)
                )
            except OSError:
                continue
    return out


def _matches(stem: str, prefix: str) -> bool:
    # pi names its files "<time>_<session id>.jsonl": match the id part too.
    return stem.startswith(prefix) or ("_" in stem and stem.split("_", 1)[1].startswith(prefix))


def resolve(opts: Options, session: str | None) -> str:
    """The session file ``session`` names (see the module docstring).

    Raises:
        SessionError: ``not_found`` when nothing matches; ``invalid_argument`` for an
            ambiguous prefix or a directory.
        UsageError: no session given and no repository to pick one from.
    """
    if session is not None:
        path = os.path.expanduser(session)
        if os.path.isdir(path):
            raise SessionError(
                "invalid_argument",
                f"{session} is a directory: give a session file, or a session id with "
                f"--repo {session}",
            )
        if os.path.lexists(path):
            return os.path.abspath(path)
    root = repo_dir(opts)
    if root is None:
        if session is None:
            raise UsageError(
                "no session given: name a session file, or a repository with --repo DIR "
                f"or ${ENV_REPO}"
            )
        raise SessionError("not_found", f"{session}: no such file (and no --repo to look in)")
    if is_postgres(root):
        from . import _postgres

        return _postgres.resolve(root, session)
    require_dir(root)
    if session is None:
        return _newest(root)
    exact = os.path.join(root, session + SUFFIX)
    if os.path.sep not in session and os.path.lexists(exact):
        return exact
    found = [p for p in _session_files(root) if _matches(os.path.basename(p)[:-6], session)]
    if not found and is_pi_dir(root):
        # pi's old (v1) files may name another id than their header's, which `ls` shows.
        found = sorted(
            {m.path for m in repo_for(root).list() if m.path and m.id.startswith(session)}
        )
    if len(found) == 1:
        return found[0]
    if not found:
        raise SessionError("not_found", f"no session {session!r} in {root}")
    shown = ", ".join(sorted(os.path.basename(p)[:-6] for p in found)[:5])
    raise SessionError(
        "invalid_argument", f"{session!r} matches {len(found)} sessions in {root}: {shown}"
    )


def _newest(root: str) -> str:
    rows = [m for m in repo_for(root).list() if m.path]
    if not rows:
        raise SessionError("not_found", f"no sessions in {root}")
    path = rows[0].path
    assert path is not None
    return path


def open_readonly(
    opts: Options,
    path: str,
    *,
    index: bool = True,
    strict: bool = False,
    color: bool = False,
) -> JsonlSessionStorage:
    """Opens ``path`` read-only: no lock, and the session file is never changed.

    With ``index=False`` nothing is written beside it either (no persisted index), as
    ``check`` promises. A progress bar is drawn on stderr for large files.
    """

    def load() -> JsonlSessionStorage:
        return JsonlSessionStorage.open(path, readonly=True, strict=strict, index=index)

    return _opened(opts, path, color, load)


def open_writer(opts: Options, path: str, *, color: bool = False) -> JsonlSessionStorage:
    """Opens ``path`` as its writer (takes the lock; cuts a torn tail into its side file)."""
    from ._postgres import is_copy

    if is_copy(path):
        raise SessionError(
            "invalid_argument",
            "repair works on session files; a PostgreSQL session's rows are never rewritten "
            "(`sessiontree check` reads them)",
        )

    def load() -> JsonlSessionStorage:
        return JsonlSessionStorage.open(path, durability="fsync")

    return _opened(opts, path, color, load)


def _opened(
    opts: Options, path: str, color: bool, load: Callable[[], JsonlSessionStorage]
) -> JsonlSessionStorage:
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    if want_progress(opts.progress, size):
        return with_progress(path, size, color, load)
    return load()
