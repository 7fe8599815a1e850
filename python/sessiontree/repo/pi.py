"""``PiSessionRepo``: pi's own session directories (``~/.pi/agent/sessions``)."""

from __future__ import annotations

import builtins
import dataclasses
import os
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any, Final

from .._util import fspath_arg, iso_to_datetime, uuid7
from ..errors import SessionError
from ..model.entries import MessageEntry, SessionHeader
from ..model.messages import AssistantMessage, UserMessage
from ..model.types import SessionMetadata
from ..session import Session
from ..storage import Durability, JsonlSessionStorage, Limits, SessionStorage
from .base import ForkPosition, SessionRef, _check_fork_args, _ref_id
from .files import _make_private_dir
from .fork import fork_file
from .jsonl import JsonlSessionRepo
from .list_cache import _row_from_json
from .metadata import metadata_of

__all__ = ["PiSessionRepo", "default_pi_sessions_dir"]

_SUFFIX: Final = ".jsonl"


def default_pi_sessions_dir() -> str:
    """Where pi keeps its sessions: ``$PI_CODING_AGENT_DIR/sessions``, by default
    ``~/.pi/agent/sessions``."""
    agent = os.environ.get("PI_CODING_AGENT_DIR") or os.path.join("~", ".pi", "agent")
    return os.path.join(os.path.expanduser(agent), "sessions")


def pi_cwd_folder(cwd: str) -> str:
    """The folder pi keeps the sessions of ``cwd`` in: ``/home/u/p`` → ``--home-u-p--``."""
    inner = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    for ch in "/\\:":
        inner = inner.replace(ch, "-")
    return f"--{inner}--"


def pi_file_name(session_id: str, created: datetime) -> str:
    """pi's name for a session file: ``<ISO time with - for : and .>_<id>.jsonl``."""
    stamp = created.astimezone(timezone.utc).strftime("%Y-%m-%dT%H-%M-%S-") + (
        f"{created.microsecond // 1000:03d}Z"
    )
    return f"{stamp}_{session_id}{_SUFFIX}"


def _pi_modified(storage: SessionStorage, created: datetime | None) -> datetime | None:
    """pi's ``modified``: the newest user or assistant message's own time (Unix ms), else
    the header's."""
    for entry in storage.get_entries(type="message", reverse=True):
        assert isinstance(entry, MessageEntry)
        if isinstance(entry.message, (UserMessage, AssistantMessage)):
            return datetime.fromtimestamp(entry.message.timestamp / 1000, timezone.utc)
    return created


class PiSessionRepo(JsonlSessionRepo):
    """pi's session directories, read and written as pi lays them out:
    ``<root>/--<cwd>--/<timestamp>_<uuid>.jsonl``, one folder per working directory.

    Sessions are known by their header's id (pi's session uuid). :meth:`list` reads every
    ``*.jsonl`` in the root and in its ``--…--`` folders (with the listing cache, in the
    root), ordered as pi orders them (newest user or assistant message first); ``name`` is
    the last ``session_info``, ``parent_session`` the header's ``parentSession`` (pi's path
    of the parent file). :meth:`open` continues a session in pi's dialect (v3 files; v1 and
    v2 files are read-only until converted), :meth:`create` and :meth:`fork` write new pi
    sessions in the folder of their cwd, and :meth:`delete` removes a file and its side
    files. pi itself can open every file this repository writes.

    Args:
        root_dir: pi's sessions directory (default :func:`default_pi_sessions_dir`).
        durability: durability of the sessions opened through this repo.
        limits: size limits applied when reading and writing.
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str] | None = None,
        *,
        durability: Durability = "group",
        limits: Limits | None = None,
    ) -> None:
        root = default_pi_sessions_dir() if root_dir is None else fspath_arg("root_dir", root_dir)
        super().__init__(root, durability=durability, limits=limits)

    # -- files -----------------------------------------------------------------------

    def _session_files(
        self, it: Iterator[os.DirEntry[str]]
    ) -> Iterator[tuple[str, str, os.DirEntry[str]]]:
        folders = []
        for de in it:
            if de.name.startswith("."):
                continue
            if de.name.endswith(_SUFFIX):
                yield de.name, "", de
            elif de.name.startswith("--") and de.is_dir(follow_symlinks=False):
                folders.append(de)
        for folder in sorted(folders, key=lambda d: d.name):
            try:
                with os.scandir(folder.path) as sub:
                    for de in sub:
                        if de.name.endswith(_SUFFIX) and not de.name.startswith("."):
                            yield f"{folder.name}/{de.name}", "", de
            except OSError:
                continue

    def _cached_row(
        self, file_name: str, raw: object, path: str
    ) -> tuple[tuple[int, int, int], SessionMetadata] | None:
        row = _row_from_json(file_name, raw, path, named_by_id=False)
        # This repository caches no row with an error (its ids are the headers'). One with
        # an error was cached by a JsonlSessionRepo listing the same folder, which takes
        # pi's file names for ids ("the header names session …"): read the file again.
        if row is None or row[1].error is not None:
            return None
        return row

    def _read_metadata(self, file_name: str, path: str, size: int) -> tuple[SessionMetadata, bool]:
        fallback = os.path.basename(file_name)[: -len(_SUFFIX)].rpartition("_")[2]
        try:
            storage = JsonlSessionStorage.open(path, readonly=True, limits=self._limits)
        except SessionError as exc:
            return self._error_row(fallback, path, size, exc.message), False
        try:
            header = storage.get_metadata()
            meta = metadata_of(storage, header.id, path, size)
            meta = _replace(meta, modified=_pi_modified(storage, meta.created))
            return meta, True
        except SessionError as exc:
            return self._error_row(fallback, path, size, exc.message), False
        finally:
            storage.close()

    def _find(self, sid: str) -> str | None:
        """The file of session ``sid``: by pi's file name, else by the listing."""
        suffix = f"_{sid}{_SUFFIX}"
        try:
            with os.scandir(self._root) as it:
                names = [(name, de.path) for name, _, de in self._session_files(it)]
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SessionError("io", f"listing {self._root}: {exc.strerror}") from exc
        for name, path in names:
            if name.endswith(suffix):
                return path
        for meta in self.list():
            if meta.id == sid and meta.error is None:
                return meta.path
        return None

    def _path(self, ref: object) -> tuple[str, str]:
        sid = _ref_id(ref)
        path = self._find(sid)
        if path is None:
            raise SessionError("not_found", f"session {sid!r} not found in {self._root}")
        return sid, path

    def path_for(self, session_id: str) -> str:
        """The file of session ``session_id``.

        Raises:
            SessionError: ``not_found`` when no file holds it.
        """
        return self._path(session_id)[1]

    def __contains__(self, ref: object) -> bool:
        try:
            self._path(ref)
        except SessionError:
            return False
        return True

    # -- create / open / fork ---------------------------------------------------------

    def _new_path(self, session_id: str, cwd: str, created: datetime) -> str:
        folder = os.path.join(self._root, pi_cwd_folder(cwd))
        _make_private_dir(folder)
        return os.path.join(folder, pi_file_name(session_id, created))

    _dialect = "pi"

    def _new_session_path(self, header: SessionHeader) -> str:
        return self._new_path(header.id, header.cwd, iso_to_datetime(header.timestamp))

    def fork(
        self,
        source: SessionRef,
        *,
        entry_id: str | None = None,
        position: ForkPosition = "before",
    ) -> Session:
        """Fork ``source`` into a new pi session beside it (see :meth:`SessionRepo.fork`);
        its header's ``parentSession`` is the source file's path, as pi writes it."""
        _check_fork_args(entry_id, position)
        _, src_path = self._path(source)
        src = JsonlSessionStorage.open(src_path, readonly=True, limits=self._limits)
        try:
            new_id = str(uuid7())
            cwd = src.get_metadata().cwd
            final = self._new_path(new_id, cwd, datetime.now(timezone.utc))
            storage = fork_file(
                src,
                final,
                new_id,
                entry_id,
                position,
                durability=self._durability,
                limits=self._limits,
                parent_session=src_path,
            )
        finally:
            src.close()
        return Session(storage)

    def delete(self, ref: SessionRef) -> None:
        """Delete a session file and its side files (see :meth:`JsonlSessionRepo.delete`)."""
        sid, path = self._path(ref)
        self._delete_path(sid, path)

    def list(
        self, *, cwd: str | os.PathLike[str] | None = None, limit: int | None = None
    ) -> builtins.list[SessionMetadata]:
        """Every session in pi's folders, newest first (pi's order; see the class)."""
        return super().list(cwd=cwd, limit=limit)

    def __repr__(self) -> str:
        return f"PiSessionRepo({self._root!r})"


def _replace(meta: SessionMetadata, **changes: Any) -> SessionMetadata:
    return dataclasses.replace(meta, **changes)
