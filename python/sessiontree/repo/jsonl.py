"""``JsonlSessionRepo``: one JSONL file per session in a directory."""

from __future__ import annotations

import builtins
import errno
import json
import os
import re
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from typing import Any, Final, Literal

from .. import _core
from .._util import fspath_arg, uuid7
from ..errors import SessionError
from ..model.entries import SessionHeader, SessionTreeEntry
from ..model.types import SessionMetadata
from ..search import SearchHit, SearchPlan, branch_members, search_plan
from ..search.index import SearchIndex
from ..session import Session
from ..storage import (
    DURABILITY_MODES,
    Durability,
    JsonlSessionStorage,
    Limits,
)
from .base import (
    _SESSION_ID_RE,
    _SUFFIX,
    ForkPosition,
    SessionRef,
    SessionRepo,
    _check_fork_args,
    _check_list_args,
    _check_session_id,
    _new_header,
    _ref_id,
    _select,
)
from .files import (
    _O_CLOEXEC,
    _O_NOFOLLOW,
    _O_NONBLOCK,
    _is_regular,
    _make_private_dir,
    _os_error,
    _try_writer_lock,
    _unlink_quietly,
    _write_atomically,
)
from .fork import fork_file
from .list_cache import (
    _CACHE_FORMAT,
    _CACHE_MAX_BYTES,
    _CACHE_NAME,
    _CACHE_VERSION,
    _encode_cache,
    _is_skip_row,
    _row_from_json,
)
from .metadata import metadata_of

__all__ = ["JsonlSessionRepo"]

# The side files the engine writes beside ``<file>``: ``<file>.idx`` (the persisted
# index), ``<file>.idx.tmp`` (one being written) and ``<file>.torn-<UTC stamp>[-<n>]``
# (a torn tail cut by a writer, rust/engine/torn.rs). None ends in ``.jsonl``, so no
# session file is ever one of them.
_SIDE_SUFFIX_RE: Final = re.compile(
    r"\.(?:idx|idx\.tmp|torn-[0-9]{8}T[0-9]{6}\.[0-9]{3}Z(?:-[0-9]{1,4})?)"
)


def _is_side_file(name: str, file_name: str) -> bool:
    """True when ``name`` is one of the side files of session file ``file_name``."""
    return name.startswith(file_name) and (
        _SIDE_SUFFIX_RE.fullmatch(name, len(file_name)) is not None
    )


class JsonlSessionRepo(SessionRepo):
    """Sessions as JSONL files in one directory: ``<root_dir>/<session id>.jsonl``.

    The directory is created (mode 0700) if missing; session files are created exclusively
    with mode 0600, whatever the umask. Ids given by the caller must be safe file names
    (see :func:`is_valid_session_id`); they are refused, never rewritten.

    :meth:`list` keeps a cache of what it shows per file in
    ``<root_dir>/.sessiontree-list-cache.json``, keyed by each file's size, modification
    time and inode, so unchanged files are not read again (also across processes). A
    damaged or foreign cache is ignored and rebuilt; deleting it is always safe.

    Args:
        root_dir: the directory of session files.
        durability: durability of the sessions opened through this repo (see
            :class:`~sessiontree.storage.JsonlSessionStorage`).
        limits: size limits applied when reading and writing session files.

    Raises:
        SessionError: ``io`` if the directory cannot be created or is not a directory.

    >>> import tempfile
    >>> repo = JsonlSessionRepo(tempfile.mkdtemp())
    >>> with repo.create(cwd="/w", name="first") as s:
    ...     pass
    >>> [m.name for m in repo.list()]
    ['first']
    """

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        *,
        durability: Durability = "group",
        limits: Limits | None = None,
    ) -> None:
        root = fspath_arg("root_dir", root_dir)
        if durability not in DURABILITY_MODES:
            raise SessionError(
                "invalid_argument",
                f"durability must be one of {', '.join(DURABILITY_MODES)} (got {durability!r})",
            )
        if limits is not None and not isinstance(limits, Limits):
            raise SessionError("invalid_argument", "limits must be a sessiontree.Limits")
        self._root = os.path.abspath(root)
        self._durability: Durability = durability
        self._limits = limits
        self._lock = threading.Lock()
        # file name -> (cache key, metadata) of the files this object has read or loaded.
        self._memo: dict[str, tuple[tuple[int, int, int], SessionMetadata]] = {}
        _make_private_dir(self._root)

    @property
    def root_dir(self) -> str:
        """The directory holding the session files (absolute)."""
        return self._root

    @property
    def durability(self) -> str:
        """The durability of sessions opened through this repo."""
        return self._durability

    def path_for(self, session_id: str) -> str:
        """The file of session ``session_id`` (whether or not it exists).

        Raises:
            SessionError: ``invalid_id`` for an unsafe id.
        """
        return os.path.join(self._root, _check_session_id(session_id) + _SUFFIX)

    def _path(self, ref: object) -> tuple[str, str]:
        sid = _ref_id(ref)
        return sid, os.path.join(self._root, sid + _SUFFIX)

    # The dialect new sessions are written in, and where a new session's file goes.
    _dialect: Literal["sessiontree", "pi"] = "sessiontree"

    def _new_session_path(self, header: SessionHeader) -> str:
        return os.path.join(self._root, header.id + _SUFFIX)

    # -- create / open ---------------------------------------------------------------

    def create(
        self,
        *,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        header = _new_header(cwd, name, parent_session, metadata, session_id)
        path = self._new_session_path(header)
        storage = JsonlSessionStorage.create(
            path,
            header,
            durability=self._durability,
            limits=self._limits,
            dialect=self._dialect,
        )
        session = Session(storage)
        if name is not None:
            try:
                session.append_session_info(name)
            except BaseException:
                # A session that failed to get its name must not be left half-made.
                storage.close()
                _unlink_quietly(path)
                raise
        return session

    def open(self, ref: SessionRef) -> Session:
        _, path = self._path(ref)
        storage = JsonlSessionStorage.open(path, durability=self._durability, limits=self._limits)
        return Session(storage)

    # -- list ------------------------------------------------------------------------

    def _cached_row(
        self, file_name: str, raw: object, path: str
    ) -> tuple[tuple[int, int, int], SessionMetadata] | None:
        """A row of the listing cache, checked (``None`` when it cannot be used)."""
        return _row_from_json(file_name, raw, path)

    def _read_metadata(self, file_name: str, path: str, size: int) -> tuple[SessionMetadata, bool]:
        """Reads one file's metadata; the flag says whether it may be cached."""
        sid = file_name[: -len(_SUFFIX)]
        try:
            storage = JsonlSessionStorage.open(path, readonly=True, limits=self._limits)
        except SessionError as exc:
            return self._error_row(sid, path, size, exc.message), False
        try:
            return metadata_of(storage, sid, path, size), True
        except SessionError as exc:
            return self._error_row(sid, path, size, exc.message), False
        finally:
            storage.close()

    @staticmethod
    def _error_row(
        sid: str, path: str, size: int, why: str, mtime_ns: int | None = None
    ) -> SessionMetadata:
        modified = None
        if mtime_ns is None:
            try:
                mtime_ns = os.lstat(path).st_mtime_ns
            except OSError:
                mtime_ns = None
        if mtime_ns is not None:
            # The file's own time, so a broken session still sorts by recency.
            modified = datetime.fromtimestamp(mtime_ns / 1e9, timezone.utc)
        return SessionMetadata(
            id=sid, path=path, cwd="", created=None, modified=modified, size_bytes=size, error=why
        )

    def _load_cache(self) -> dict[str, Any]:
        """The raw rows of the cache file; empty if it is missing, damaged or not ours.

        Rows are checked one by one when used (:func:`_row_from_json`), so a bad row costs
        only its own re-read.
        """
        cache_path = os.path.join(self._root, _CACHE_NAME)
        try:
            # O_NONBLOCK: a FIFO planted at the name must not hang the listing.
            fd = os.open(cache_path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK)
        except OSError:
            return {}
        try:
            st = os.fstat(fd)
            if (
                not _is_regular(st.st_mode)
                or st.st_uid != os.geteuid()
                or st.st_size > _CACHE_MAX_BYTES
            ):
                return {}
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = json.loads(f.read())
        except (OSError, ValueError, RecursionError):
            return {}
        finally:
            os.close(fd)
        if (
            not isinstance(data, dict)
            or data.get("format") != _CACHE_FORMAT
            or data.get("version") != _CACHE_VERSION
            or not isinstance(data.get("files"), dict)
        ):
            return {}
        files: dict[str, Any] = data["files"]
        return files

    def _save_cache(self, rows: dict[str, tuple[tuple[int, int, int], SessionMetadata]]) -> None:
        """Writes the cache atomically (temp file + rename); failures are ignored.

        No fsync: after a crash the cache is at worst damaged, and a damaged cache is
        rebuilt. Each row and the whole are bounded (see ``list_cache``).
        """
        data = _encode_cache(rows)
        _write_atomically(os.path.join(self._root, _CACHE_NAME), data, sync=False, replace=True)

    def list(
        self, *, cwd: str | os.PathLike[str] | None = None, limit: int | None = None
    ) -> builtins.list[SessionMetadata]:
        """Every session's metadata, newest ``modified`` first (see :class:`SessionRepo`).

        Only files named ``<valid id>.jsonl`` count. A file that cannot be read is listed
        with ``error`` set (``cwd`` is then ``""``, ``created`` ``None`` and ``modified``
        the file's modification time); such rows are kept under every ``cwd`` filter.
        """
        want_cwd = _check_list_args(cwd, limit)
        with self._lock:
            rows = self._scan()
        return _select(rows, want_cwd, limit)

    def _session_files(
        self, it: Iterator[os.DirEntry[str]]
    ) -> Iterator[tuple[str, str, os.DirEntry[str]]]:
        """The session files of the root's listing ``it``: (cache name, id, entry)."""
        for de in it:
            file_name = de.name
            if not file_name.endswith(_SUFFIX):
                continue
            sid = file_name[: -len(_SUFFIX)]
            if _SESSION_ID_RE.fullmatch(sid) is not None:
                yield file_name, sid, de

    def _scan(self) -> builtins.list[SessionMetadata]:
        try:
            it = os.scandir(self._root)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise _os_error(f"listing {self._root}", exc) from exc
        memo = self._memo
        seen: dict[str, tuple[tuple[int, int, int], SessionMetadata]] = {}
        out: builtins.list[SessionMetadata] = []
        disk: dict[str, Any] | None = None
        changed = False
        with it:
            for file_name, sid, de in self._session_files(it):
                path = de.path
                try:
                    st = de.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # deleted since the directory was read
                except OSError as exc:
                    out.append(self._error_row(sid, path, 0, f"cannot stat: {exc.strerror}"))
                    continue
                if not _is_regular(st.st_mode):
                    out.append(
                        self._error_row(sid, path, st.st_size, "not a regular file", st.st_mtime_ns)
                    )
                    continue
                key = (st.st_size, st.st_mtime_ns, st.st_ino)
                hit = memo.get(file_name)
                if hit is None or hit[0] != key:
                    if disk is None:
                        disk = self._load_cache()
                    raw = disk.get(file_name)
                    hit = None if raw is None else self._cached_row(file_name, raw, path)
                    if hit is None or hit[0] != key:
                        meta, cacheable = self._read_metadata(file_name, path, st.st_size)
                        if not cacheable:
                            out.append(meta)
                            continue
                        hit = (key, meta)
                        # A file the cache skips (its row is too large) is re-read, but
                        # the cache is not stale for it.
                        changed = changed or not _is_skip_row(raw, key)
                seen[file_name] = hit
                out.append(hit[1])
        if disk is not None and not changed:
            changed = disk.keys() != seen.keys()
        if changed or memo.keys() != seen.keys():
            self._memo = seen
        if changed:
            self._save_cache(seen)
        return out

    # -- search ----------------------------------------------------------------------

    def read_entry(self, ref: SessionRef, entry_id: str) -> SessionTreeEntry | None:
        """One entry, read from the file without a lock (see :meth:`SessionRepo.read_entry`)."""
        _check_fork_args(entry_id, "at")
        _, path = self._path(ref)
        with JsonlSessionStorage.open(path, readonly=True, limits=self._limits) as storage:
            return storage.get_entry(entry_id)

    def _search_rows(self, plan: SearchPlan) -> builtins.list[SessionMetadata]:
        """The sessions a search reads: every listed file that could be read."""
        return [
            m
            for m in self.list(cwd=plan.cwd)
            if m.error is None and m.path is not None and plan.wants(m.id)
        ]

    def _search(self, plan: SearchPlan) -> builtins.list[SearchHit]:
        """Scans the files (every core; see ``docs/search.md``), or asks the search index
        when one was built (:meth:`build_search_index`), bringing it up to date first."""
        rows = self._search_rows(plan)
        paths = {m.id: m.path for m in rows if m.path is not None}
        index = SearchIndex(self._root)
        sources: builtins.list[tuple[str, bytes | str]] | None = None
        if index.exists():
            sources = index.sources(rows, plan.terms)

        def branch_of(sid: str, ids: Sequence[str]) -> set[str]:
            try:
                storage = JsonlSessionStorage.open(paths[sid], readonly=True, limits=self._limits)
            except SessionError:
                return set()
            try:
                return branch_members(storage, ids)
            finally:
                storage.close()

        limits = self._limits

        def branches(wanted: dict[str, builtins.list[str]]) -> dict[str, set[str]]:
            # Told from the files' lines by the engine (a reader's open where they do not).
            told = _core.search_branch_members(
                [(str(paths[sid]), ids) for sid, ids in wanted.items()],
                max_line_bytes=None if limits is None else limits.max_line_bytes,
                max_id_bytes=None if limits is None else limits.max_id_bytes,
            )
            return {
                sid: {i for i, on in zip(ids, flags, strict=True) if on}
                for (sid, ids), flags in zip(wanted.items(), told, strict=True)
                if flags is not None
            }

        threads = os.cpu_count() or 1
        if sources is None:
            # Whole files: the engine tells the branch of their hits from the lines.
            sources = builtins.list(paths.items())
            return plan.scan(sources, branch_of, whole=True, limits=self._limits, threads=threads)
        return plan.scan(sources, branch_of, threads=threads, branches=branches)

    def build_search_index(self) -> None:
        """Builds (or brings up to date) the search index beside the sessions, in
        ``<root>/.sessiontree-search/``: from then on every :meth:`search` brings it up
        to date first (reading only what was appended since) and asks it for candidates
        instead of scanning every file. Deleting the folder is always safe; a search
        never waits for a build (while one runs elsewhere, searches scan).
        """
        SearchIndex(self._root).build(self._search_rows(search_plan("x")))

    def search_index_status(self) -> str:
        """``"ready"`` when a search index exists (see :meth:`build_search_index`),
        else ``"none"``."""
        return "ready" if SearchIndex(self._root).exists() else "none"

    # -- delete ----------------------------------------------------------------------

    def delete(self, ref: SessionRef) -> None:
        """Delete a session file, its torn-tail side files, persisted index and cache row.

        Side files are found by their exact names (:func:`_is_side_file`), never by a
        prefix: no other session's file can match them. A symlink or other non-regular
        file planted at the session's name is removed as a name; what it points to is
        never touched.

        Raises:
            SessionError: ``not_found`` for an unknown session, ``locked`` while a writer
                has it open, ``io`` for another OS error.
        """
        sid, path = self._path(ref)
        self._delete_path(sid, path)

    def _delete_path(self, sid: str, path: str) -> None:
        """Deletes session ``sid``'s file at ``path``, its side files and its cache row."""
        try:
            fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK)
        except FileNotFoundError:
            raise SessionError("not_found", f"session {sid!r} not found") from None
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise _os_error(f"opening {path}", exc) from exc
            fd = -1  # a symlink: removing the name touches nothing else
        try:
            # The writer lock is a flock on the file (see the engine's lock_writer): taking
            # it ourselves proves no writer holds it, and keeps a new writer out until the
            # name is gone, without reading the file.
            if fd >= 0 and not _try_writer_lock(fd):
                raise SessionError("locked", f"session {sid!r} is open for writing; close it first")
            try:
                os.unlink(path)
            except FileNotFoundError:
                raise SessionError("not_found", f"session {sid!r} not found") from None
            except OSError as exc:
                raise _os_error(f"deleting {path}", exc) from exc
        finally:
            if fd >= 0:
                os.close(fd)
        folder, file_name = os.path.split(path)
        try:
            with os.scandir(folder) as it:
                side = [de.path for de in it if _is_side_file(de.name, file_name)]
        except OSError:
            side = []
        for p in side:
            _unlink_quietly(p)
        # The cache's name of the file: relative to the root.
        cache_name = os.path.relpath(path, self._root)
        with self._lock:
            self._memo.pop(cache_name, None)
            disk = self._load_cache()
            if disk.pop(cache_name, None) is not None:
                rows = {}
                for name, raw in disk.items():
                    row = self._cached_row(name, raw, os.path.join(self._root, name))
                    if row is not None:
                        rows[name] = row
                self._save_cache(rows)

    # -- fork ------------------------------------------------------------------------

    def fork(
        self,
        source: SessionRef,
        *,
        entry_id: str | None = None,
        position: ForkPosition = "before",
    ) -> Session:
        """Fork ``source`` into a new session file (see :meth:`SessionRepo.fork`).

        The source is read without a lock, so it may be open by a writer; the fork sees
        what is in the file (a writer with ``durability="none"`` must ``flush()`` first).
        The new file is written to a temporary name in the directory, synced, then linked
        into place, so a crash never leaves a partial file under a session name.
        """
        _check_fork_args(entry_id, position)
        _, src_path = self._path(source)
        src = JsonlSessionStorage.open(src_path, readonly=True, limits=self._limits)
        try:
            new_id = uuid7()
            final = os.path.join(self._root, new_id + _SUFFIX)
            storage = fork_file(
                src,
                final,
                new_id,
                entry_id,
                position,
                durability=self._durability,
                limits=self._limits,
            )
        finally:
            src.close()
        return Session(storage)

    def __contains__(self, ref: object) -> bool:
        try:
            _, path = self._path(ref)
        except SessionError:
            return False
        return os.path.lexists(path)

    def __repr__(self) -> str:
        return f"JsonlSessionRepo({self._root!r})"
