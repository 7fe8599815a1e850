"""The search index of a file repository: SQLite FTS5 over the engine's tokens, kept
beside the sessions in ``<root>/.sessiontree-search/index.sqlite3``.

Why SQLite FTS5 and not tantivy: it ships with CPython (no new compiled dependency, no
minutes of build), its transactions make an update atomic (a killed update leaves the
index as it was), and it is a well-kept full-text engine; the tokens it indexes are the
engine's own (:func:`sessiontree.search.search_tokens`, joined by spaces: FTS5's
``ascii`` tokenizer splits them back exactly, since a token holds no ASCII punctuation
or space), so the index and the scan cannot disagree on what a word is.

It is never a source of truth:

* the index only gives *candidate* lines (every token of every positive term, prefixes
  as prefixes); the engine reads those lines from the files and matches them with the
  scan's own code, so hits, snippets and scores are the scan's;
* every search first brings it up to date from what changed (new bytes of appended
  files; a file replaced, shrunk or deleted is dropped and, if present, read again);
* a missing, locked (another process updating it) or damaged index, or a query with
  too many candidates, is answered by the scan, with the same answers; a damaged index
  is deleted.

pi v1 files (entry ids from line numbers) are left to the scan.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from .. import _core
from ..model.types import SessionMetadata

__all__ = ["INDEX_DIR", "SearchIndex"]

INDEX_DIR: Final = ".sessiontree-search"
"""The index's folder, inside the repository's root."""

_FILE: Final = "index.sqlite3"
_FORMAT: Final = "sessiontree-search 2"
# More candidate lines than this and the scan is faster: it reads every line too, but in
# the engine on every core, and tells the hits' branch from the lines it read, where the
# index hands each candidate line through Python and reads each hit's file again.
_MAX_CANDIDATES: Final = 4_000
# Row ids: the file's id in the high bits, a counter of the file's lines in the low.
_ROW_BITS: Final = 32

_SCHEMA: Final = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
    "CREATE TABLE files (id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, "
    "session_id TEXT NOT NULL, dev INTEGER, ino INTEGER, size INTEGER, mtime INTEGER, "
    "indexed_to INTEGER NOT NULL, header BLOB, legacy INTEGER NOT NULL, "
    "next_row INTEGER NOT NULL)",
    # detail=none: candidates need only which lines have every token; phrases and
    # exclusions are the matcher's. Contentless (the tokens are not stored twice): where
    # a line is lives in `lines`, and a forgotten file's rows leave `lines` only, so its
    # postings stay behind as garbage that no query returns (`garbage` counts them; the
    # index is made again when they outnumber the live rows).
    "CREATE VIRTUAL TABLE terms USING fts5(tokens, content='', columnsize=0, "
    "tokenize='ascii', detail=none)",
    "CREATE TABLE lines (id INTEGER PRIMARY KEY, off INTEGER NOT NULL, len INTEGER NOT NULL)",
    "INSERT INTO meta VALUES ('garbage', '0')",
)


class _Broken(Exception):
    """The index cannot be used for this search (the scan answers)."""


class _Reader:
    """A connection a thread keeps for searches while the index file stays the same one,
    with the ``files`` table as last read (read again when a commit changed it)."""

    __slots__ = ("conn", "file_key", "files", "version")

    def __init__(self, conn: sqlite3.Connection, file_key: tuple[int, int]) -> None:
        self.conn = conn
        self.file_key = file_key
        self.version: Any = None
        self.files: list[Any] = []

    def file_rows(self) -> list[Any]:
        """``(id, path, session_id, header, legacy, dev, ino, size, mtime)`` of every
        indexed file."""
        version = self.conn.execute("PRAGMA data_version").fetchone()
        if version != self.version:
            self.files = self.conn.execute(
                "SELECT id, path, session_id, header, legacy, dev, ino, size, mtime FROM files"
            ).fetchall()
            self.version = version
        return self.files


_LOCAL = threading.local()


class SearchIndex:
    """The index of one repository root (see the module doc)."""

    def __init__(self, root: str) -> None:
        self.folder = os.path.join(root, INDEX_DIR)
        self.path = os.path.join(self.folder, _FILE)

    def exists(self) -> bool:
        return os.path.isfile(self.path)

    def _connect(self, create: bool) -> sqlite3.Connection:
        if create:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
        elif not self.exists():
            raise _Broken("no index")
        # timeout=0: a search never waits for another process's update.
        conn = sqlite3.connect(self.path, timeout=0, isolation_level=None)
        try:
            if create:
                # Persistent in the file: readers never block the writer nor it them.
                conn.execute("PRAGMA journal_mode=WAL")
            have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            if "meta" not in have:
                if not create:
                    raise _Broken("an empty index")
                conn.execute("BEGIN IMMEDIATE")
                for stmt in _SCHEMA:
                    conn.execute(stmt)
                conn.execute("INSERT INTO meta VALUES ('format', ?)", (_FORMAT,))
                conn.execute("COMMIT")
            row = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if row is None or row[0] != _FORMAT:
                raise sqlite3.DatabaseError("not a sessiontree search index of this version")
        except BaseException:
            conn.close()
            raise
        return conn

    def drop(self) -> None:
        """Deletes the index (it is derived: nothing is lost)."""
        self._forget_reader()
        shutil.rmtree(self.folder, ignore_errors=True)

    # -- update ----------------------------------------------------------------------

    @staticmethod
    def _current(files: Sequence[Any], rows: Sequence[SessionMetadata]) -> bool:
        """Whether the index holds exactly the listed files, as they are (a read, no
        lock: the common case of a search costs no write transaction)."""
        known = {r[1]: (r[5], r[6], r[7], r[8]) for r in files}
        if len(known) != len(rows):
            return False
        for meta in rows:
            old = known.get(meta.path)
            try:
                st = os.stat(meta.path) if old is not None and meta.path is not None else None
            except OSError:
                return False
            if st is None or old != (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns):
                return False
        return True

    def _update(
        self,
        conn: sqlite3.Connection,
        rows: Sequence[SessionMetadata],
        reader: _Reader | None = None,
    ) -> None:
        """Brings the index up to date with the listed files, in one transaction."""
        files = (
            reader.file_rows()
            if reader is not None
            else conn.execute(
                "SELECT id, path, session_id, header, legacy, dev, ino, size, mtime FROM files"
            ).fetchall()
        )
        if self._current(files, rows):
            return
        if reader is not None:
            reader.version = None  # this connection's own commit: read the files again
        conn.execute("BEGIN IMMEDIATE")
        try:
            known = {
                r[1]: r
                for r in conn.execute(
                    "SELECT id, path, dev, ino, size, mtime, indexed_to, header, next_row "
                    "FROM files"
                )
            }
            work: list[tuple[SessionMetadata, os.stat_result, Any, int]] = []
            for meta in rows:
                assert meta.path is not None
                try:
                    st = os.stat(meta.path)
                except OSError:
                    continue
                old = known.pop(meta.path, None)
                if old is not None and (old[2], old[3]) == (st.st_dev, st.st_ino):
                    if (old[4], old[5]) == (st.st_size, st.st_mtime_ns):
                        continue  # unchanged
                    if st.st_size >= old[6]:
                        work.append((meta, st, old, old[6]))
                        continue
                if old is not None:
                    self._forget(conn, old[0])
                work.append((meta, st, None, 0))
            for gone in known.values():
                self._forget(conn, gone[0])
            with ThreadPoolExecutor(max_workers=min(len(work), os.cpu_count() or 1) or 1) as pool:
                # The engine reads and tokenises with the GIL released: files in parallel.
                done = pool.map(lambda w: _core.search_extract(w[0].path, w[3]), work)
                for (meta, st, old, _start), (end, header, legacy, lines) in zip(
                    work, done, strict=True
                ):
                    if old is not None and bytes(old[7] or b"") != bytes(header):
                        # Rewritten in place: read it whole again.
                        self._forget(conn, old[0])
                        end, header, legacy, lines = _core.search_extract(str(meta.path), 0)
                        old = None
                    self._store(conn, meta, st, old, end, header, legacy, lines)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _forget(conn: sqlite3.Connection, file_id: int) -> None:
        lo = file_id << _ROW_BITS
        gone = conn.execute(
            "DELETE FROM lines WHERE id BETWEEN ? AND ?", (lo, lo + (1 << _ROW_BITS) - 1)
        ).rowcount
        conn.execute("DELETE FROM files WHERE id = ?", (file_id,))
        conn.execute(
            "UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'garbage'", (gone,)
        )

    @staticmethod
    def _store(
        conn: sqlite3.Connection,
        meta: SessionMetadata,
        st: os.stat_result,
        old: Any,
        end: int,
        header: bytes,
        legacy: bool,
        lines: Sequence[tuple[int, int, str]],
    ) -> None:
        if old is None:
            cur = conn.execute(
                "INSERT INTO files (path, session_id, dev, ino, size, mtime, indexed_to, "
                "header, legacy, next_row) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                (
                    meta.path,
                    meta.id,
                    st.st_dev,
                    st.st_ino,
                    st.st_size,
                    st.st_mtime_ns,
                    end,
                    header,
                    int(legacy),
                ),
            )
            file_id, next_row = cur.lastrowid, 0
        else:
            file_id, next_row = old[0], old[8]
        assert file_id is not None
        if next_row + len(lines) >= 1 << _ROW_BITS:
            raise _Broken("a file of more than 2^32 lines")
        base = file_id << _ROW_BITS
        conn.executemany(
            "INSERT INTO terms (rowid, tokens) VALUES (?, ?)",
            ((base + next_row + i, toks) for i, (_, _, toks) in enumerate(lines)),
        )
        conn.executemany(
            "INSERT INTO lines (id, off, len) VALUES (?, ?, ?)",
            ((base + next_row + i, off, n) for i, (off, n, _) in enumerate(lines)),
        )
        conn.execute(
            "UPDATE files SET session_id = ?, size = ?, mtime = ?, indexed_to = ?, "
            "next_row = ? WHERE id = ?",
            (meta.id, st.st_size, st.st_mtime_ns, end, next_row + len(lines), file_id),
        )

    def build(self, rows: Sequence[SessionMetadata]) -> None:
        """Creates the index if missing and brings it up to date (a damaged one is
        made again)."""
        try:
            conn = self._connect(create=True)
        except sqlite3.DatabaseError:
            self.drop()
            conn = self._connect(create=True)
        with contextlib.closing(conn):
            self._update(conn, rows)
            garbage = conn.execute("SELECT value FROM meta WHERE key = 'garbage'").fetchone()
            live = conn.execute("SELECT count(*) FROM lines").fetchone()
        if garbage is not None and live is not None and int(garbage[0]) > max(live[0], 10_000):
            # More forgotten postings than live ones: made again, compact.
            self.drop()
            with contextlib.closing(self._connect(create=True)) as conn:
                self._update(conn, rows)

    # -- query -----------------------------------------------------------------------

    def sources(
        self, rows: Sequence[SessionMetadata], terms: Iterable[tuple[Sequence[str], bool, bool]]
    ) -> list[tuple[str, bytes | str]] | None:
        """The documents a search must match: for each indexed file its header and its
        candidate lines, and every file the index leaves to the scan whole. ``None``
        when the index cannot answer (the caller scans)."""
        try:
            reader = self._reader()
        except _Broken:
            return None
        except sqlite3.DatabaseError:
            self.drop()
            return None
        try:
            self._update(reader.conn, rows, reader)
            return self._candidates(reader, rows, terms)
        except (_Broken, sqlite3.OperationalError):
            with contextlib.suppress(sqlite3.Error):
                if reader.conn.in_transaction:
                    reader.conn.execute("ROLLBACK")
            return None  # locked by an update elsewhere, or too many candidates
        except sqlite3.DatabaseError:
            self._forget_reader()
            self.drop()
            return None

    def _reader(self) -> _Reader:
        """This thread's connection to the index (made, or made again when the file was
        replaced)."""
        try:
            st = os.stat(self.path)
        except OSError:
            self._forget_reader()
            raise _Broken("no index") from None
        readers: dict[str, _Reader] = _LOCAL.__dict__.setdefault("readers", {})
        key = (st.st_dev, st.st_ino)
        reader = readers.get(self.path)
        if reader is not None and reader.file_key == key:
            return reader
        self._forget_reader()
        reader = _Reader(self._connect(create=False), key)
        readers[self.path] = reader
        return reader

    def _forget_reader(self) -> None:
        reader = _LOCAL.__dict__.get("readers", {}).pop(self.path, None)
        if reader is not None:
            reader.conn.close()

    def _candidates(
        self,
        reader: _Reader,
        rows: Sequence[SessionMetadata],
        terms: Iterable[tuple[Sequence[str], bool, bool]],
    ) -> list[tuple[str, bytes | str]]:
        conn = reader.conn
        parts = []
        for tokens, prefix, negated in terms:
            if negated:
                continue
            for i, tok in enumerate(tokens):
                parts.append(f'"{tok}"' + ("*" if prefix and i == len(tokens) - 1 else ""))
        match = " AND ".join(parts)
        wanted = {m.path: m.id for m in rows if m.path is not None}
        files = {r[0]: r for r in reader.file_rows()}
        # Counted first, in the full-text index alone (its row ids come in order): a
        # common word goes to the scan without a join over its many lines.
        (many,) = conn.execute(
            "SELECT count(*) > ? FROM (SELECT rowid FROM terms WHERE terms MATCH ? LIMIT ?)",
            (_MAX_CANDIDATES, match, _MAX_CANDIDATES + 1),
        ).fetchone()
        if many:
            raise _Broken("too many candidates")
        found = conn.execute(
            "SELECT l.id, l.off, l.len FROM terms t JOIN lines l ON l.id = t.rowid "
            "WHERE terms MATCH ? ORDER BY l.id",
            (match,),
        ).fetchall()
        by_file: dict[int, list[tuple[int, int]]] = {}
        for rowid, off, n in found:
            by_file.setdefault(rowid >> _ROW_BITS, []).append((off, n))
        out: list[tuple[str, bytes | str]] = []
        for file_id, spans in by_file.items():
            f = files.get(file_id)
            if f is None or f[1] not in wanted:
                continue
            try:
                with open(f[1], "rb") as fh:
                    lines = [bytes(f[3])]
                    for off, n in spans:
                        fh.seek(off)
                        lines.append(fh.read(n))
            except OSError:
                continue
            out.append((wanted[f[1]], b"\n".join(lines) + b"\n"))
        for f in files.values():
            if f[4] and f[1] in wanted:
                out.append((wanted[f[1]], f[1]))
        indexed = {f[1] for f in files.values()}
        # Listed but not in the index (it could not be read when the index was updated).
        out.extend((sid, path) for path, sid in wanted.items() if path not in indexed)
        return out
