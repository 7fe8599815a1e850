"""``PostgresSessionRepo``: many sessions in one PostgreSQL schema."""

from __future__ import annotations

import builtins
import contextlib
import os
from collections.abc import Callable, Sequence
from datetime import timezone
from typing import Any, TypeVar

from .._util import uuid7
from ..errors import SessionError
from ..model.entries import SessionTreeEntry, entry_to_json
from ..model.types import SessionMetadata
from ..repo.base import (
    ForkPosition,
    SessionRef,
    SessionRepo,
    _check_fork_args,
    _check_list_args,
    _new_header,
    _ref_id,
)
from ..repo.fork import _prepare
from ..search import SearchHit, SearchPlan, branch_members
from ..session import Session
from ..storage import DURABILITY_MODES, Durability, Limits
from ._connect import (
    Source,
    check_schema,
    ident,
    lock_key,
    psycopg_module,
    raise_pg,
)
from ._schema import is_missing, migrate, recover
from .storage import PostgresSessionStorage, _publish, _text, search_column

_T = TypeVar("_T")

__all__ = ["PostgresSessionRepo"]

_COLUMNS = (
    "id, cwd, created, modified, name, parent_session, entry_count, message_count, "
    "first_message, size_bytes, dialect"
)


class PostgresSessionRepo(SessionRepo):
    """Sessions in PostgreSQL: the :class:`~sessiontree.SessionRepo` API over one schema.

    ``open`` (and the sessions ``create`` and ``fork`` return) is the session's single
    writer across every host: a second ``open`` anywhere raises ``locked`` naming the
    holder. ``list`` reads the sessions table, kept current in the same transaction as
    every append and indexed for ``list(cwd=..., limit=...)``; ``fork`` copies the rows
    inside the server. Metadata has ``path=None`` and ``size_bytes`` = the size of the
    session's JSONL document.

    Args:
        target: a conninfo string (``"postgresql://..."`` or ``"host=... dbname=..."``), a
            ``psycopg.Connection`` in autocommit mode (used as it is, never closed here;
            each write is its own transaction, committed before the call returns, so a
            connection with autocommit off, or inside a transaction block, is refused
            with ``invalid_argument``) or a ``psycopg_pool.ConnectionPool`` (short
            operations borrow from it; each writer opens its own connection with the
            pool's settings).
        schema: the schema of the tables, created and migrated on first use, and checked
            again by every new repo (a schema dropped since is made again): 1 to 63
            lowercase letters, digits and ``_``, not starting with a digit, not ``pg_...``
            nor ``information_schema`` (reserved words such as ``user`` are fine).
        durability: durability of the sessions opened through this repo.
        limits: size limits applied when reading and writing.

    Raises:
        SessionError: ``io`` if the server cannot be reached, ``corrupt`` if the schema is
            of a newer version, ``invalid_argument`` for a bad schema name, a conninfo
            libpq cannot parse or a connection not in autocommit mode. No message, cause
            or repr holds the conninfo's password.
    """

    def __init__(
        self,
        target: object,
        *,
        schema: str = "sessiontree",
        durability: Durability = "group",
        limits: Limits | None = None,
    ) -> None:
        self._schema = check_schema(schema)
        if durability not in DURABILITY_MODES:
            raise SessionError(
                "invalid_argument",
                f"durability must be one of {', '.join(DURABILITY_MODES)} (got {durability!r})",
            )
        if limits is not None and not isinstance(limits, Limits):
            raise SessionError("invalid_argument", "limits must be a sessiontree.Limits")
        self._durability: Durability = durability
        self._limits = limits
        self._source = Source(target)
        with self._source.borrow() as conn:
            # Checked on the server again, whatever this process saw before: the schema may
            # have been dropped since (a database reset or restored).
            migrate(conn, self._schema, recheck=True)

    @property
    def schema(self) -> str:
        """The schema holding the tables."""
        return self._schema

    @property
    def durability(self) -> str:
        """The durability of sessions opened through this repo."""
        return self._durability

    def close(self) -> None:
        """Closes the connection kept for short operations (sessions stay open)."""
        self._source.close()

    def __enter__(self) -> PostgresSessionRepo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, what: str, work: Callable[[Any], _T]) -> _T:
        """``work(conn)`` on the repository's short-operation connection; a schema that is
        missing (a reset or restored database) is made again and ``work`` retried once;
        a database error is ``SessionError`` naming ``what``."""
        psycopg = psycopg_module()
        try:
            with self._source.borrow() as conn:
                try:
                    return work(conn)
                except psycopg.Error as exc:
                    if not is_missing(exc):
                        raise
                    recover(conn, self._schema)
                    return work(conn)
        except psycopg.Error as exc:
            raise_pg(what, exc)

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
        storage = PostgresSessionStorage.create(
            self._source,
            header,
            schema=self._schema,
            durability=self._durability,
            limits=self._limits,
        )
        session = Session(storage)
        if name is not None:
            try:
                session.append_session_info(name)
                storage.flush()
            except BaseException:
                # A session that failed to get its name must not be left half-made.
                storage.close()
                self._delete_row(header.id)
                raise
        return session

    def open(self, ref: SessionRef) -> Session:
        sid = _ref_id(ref)
        storage = PostgresSessionStorage.open(
            self._source,
            sid,
            schema=self._schema,
            durability=self._durability,
            limits=self._limits,
        )
        return Session(storage)

    def open_readonly(self, ref: SessionRef, *, strict: bool = False) -> Session:
        """Opens a session without its lock, to read (``refresh()`` picks up appends).

        Raises:
            SessionError: ``not_found``, ``corrupt`` (``strict``), ``io``.
        """
        sid = _ref_id(ref)
        storage = PostgresSessionStorage.open(
            self._source,
            sid,
            schema=self._schema,
            readonly=True,
            strict=strict,
            limits=self._limits,
        )
        return Session(storage)

    def read_entry(self, ref: SessionRef, entry_id: str) -> SessionTreeEntry | None:
        """One entry, read without the session's lock (see ``SessionRepo.read_entry``)."""
        if not isinstance(entry_id, str):
            raise SessionError("invalid_argument", "entry_id must be a str")
        with self.open_readonly(ref) as session:
            return session.get_entry(entry_id)

    # -- search ----------------------------------------------------------------------

    def _search(self, plan: SearchPlan) -> builtins.list[SearchHit]:
        """Candidates from the GIN index on ``entries.search`` (every positive term's
        tokens; rows of unknown tokens too), checked by the engine's matcher exactly as
        the file repositories check theirs."""
        q = ident(self._schema)
        where = ["(e.search @@ %s::tsquery OR e.search IS NULL)"]
        params: builtins.list[Any] = [_tsquery(plan)]
        if plan.cwd is not None or plan.session_id is not None:
            wanted = [m.id for m in self.list(cwd=plan.cwd) if plan.wants(m.id)]
            if not wanted:
                return []
            where.append("e.session_id = ANY(%s)")
            params.append(wanted)
        if plan.types is not None:
            where.append("e.type = ANY(%s)")
            params.append(builtins.list(plan.types))
        query = (
            f"SELECT e.session_id, s.header, e.line FROM {q}.entries e "
            f"JOIN {q}.sessions s ON s.id = e.session_id WHERE {' AND '.join(where)} "
            "ORDER BY e.session_id, e.seq"
        )
        rows = self._run("searching sessions", lambda conn: conn.execute(query, params).fetchall())
        docs: dict[str, builtins.list[bytes]] = {}
        for sid, header, line in rows:
            docs.setdefault(sid, [bytes(header)]).append(bytes(line))

        def branch_of(sid: str, ids: Sequence[str]) -> set[str]:
            try:
                session = self.open_readonly(sid)
            except SessionError:
                return set()
            with session:
                return branch_members(session.storage, ids)

        sources = [(sid, b"\n".join(lines) + b"\n") for sid, lines in docs.items()]
        return plan.scan(sources, branch_of)

    def build_search_index(self) -> int:
        """Fills the search column of rows written before it existed (schema version 1),
        so they stop being candidates of every search. Searches are right without it.

        Returns:
            The number of rows filled.
        """
        psycopg = psycopg_module()
        q = ident(self._schema)
        filled = 0
        try:
            with self._source.borrow() as conn:
                rows = conn.execute(
                    f"SELECT e.session_id, e.seq, e.line, s.dialect FROM {q}.entries e "
                    f"JOIN {q}.sessions s ON s.id = e.session_id WHERE e.search IS NULL"
                ).fetchall()
                for sid, seq, line, dialect in rows:
                    (tokens,) = search_column([bytes(line)], dialect == "pi")
                    if tokens is None:
                        continue
                    conn.execute(
                        f"UPDATE {q}.entries SET search = {q}.search_vector(%s) "
                        "WHERE session_id = %s AND seq = %s",
                        (tokens, sid, seq),
                    )
                    filled += 1
                conn.commit()
        except psycopg.Error as exc:
            raise_pg("building the search column", exc)
        return filled

    # -- list ------------------------------------------------------------------------

    def list(
        self, *, cwd: str | os.PathLike[str] | None = None, limit: int | None = None
    ) -> builtins.list[SessionMetadata]:
        """Every session's metadata, newest ``modified`` first (see :class:`SessionRepo`),
        read from the sessions table through its indexes."""
        want_cwd = _check_list_args(cwd, limit)
        where, params = "", list[Any]()
        if want_cwd is not None:
            where = "WHERE cwd_key = %s OR cwd_key = ''"
            params.append(_text(want_cwd))
        query = (
            f"SELECT {_COLUMNS} FROM {ident(self._schema)}.sessions {where} "
            'ORDER BY modified DESC NULLS LAST, created DESC NULLS LAST, (id COLLATE "C") DESC'
        )
        if limit is not None:
            query += " LIMIT %s"
            params.append(limit)
        rows = self._run("listing sessions", lambda conn: conn.execute(query, params).fetchall())
        return [_metadata_row(r) for r in rows]

    # -- delete ----------------------------------------------------------------------

    def delete(self, ref: SessionRef) -> None:
        """Deletes a session's rows.

        Raises:
            SessionError: ``not_found`` for an unknown session, ``locked`` while a writer
                (on any host) has it open, ``io``.
        """
        sid = _ref_id(ref)

        def delete(conn: Any) -> None:
            with conn.transaction():
                # A transaction-level lock: proves no writer holds the session lock, keeps
                # a new writer out until the rows are gone, and ends with the transaction.
                row = conn.execute(
                    "SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))",
                    (lock_key(self._schema, sid),),
                ).fetchone()
                if not (row and row[0]):
                    raise SessionError(
                        "locked", f"session {sid!r} is open for writing; close it first"
                    )
                cur = conn.execute(
                    f"DELETE FROM {ident(self._schema)}.sessions WHERE id = %s", (sid,)
                )
                if cur.rowcount == 0:
                    raise SessionError("not_found", f"session {sid!r} not found")

        self._run(f"deleting session {sid!r}", delete)

    def _delete_row(self, sid: str) -> None:
        with contextlib.suppress(SessionError):
            self.delete(sid)

    # -- fork ------------------------------------------------------------------------

    def fork(
        self,
        source: SessionRef,
        *,
        entry_id: str | None = None,
        position: ForkPosition = "before",
    ) -> Session:
        """Forks ``source`` into a new session (see :meth:`SessionRepo.fork`).

        The source is read without its lock (it may be open by a writer; one with
        ``durability="none"`` must ``flush()`` first). The copied rows whose bytes do not
        change are copied by the server (``INSERT ... SELECT``); the new session's rows
        and its sessions row are written in one transaction.
        """
        _check_fork_args(entry_id, position)
        sid = _ref_id(source)
        src = PostgresSessionStorage.open(
            self._source, sid, schema=self._schema, readonly=True, limits=self._limits
        )
        try:
            new_id = uuid7()
            fsrc, plan, header = _prepare(src, new_id, entry_id, position)
            lines = fsrc.write_lines(plan.kept, plan.new_parent)
            engine = src._engine
            positions = [_known(engine.lookup(fsrc.id_of(p))) for p in plan.kept]
            originals = engine.lines(positions)
            # Each copied row the fork keeps byte for byte is copied by the server: its
            # sequence number is its line number less the header's line and one.
            copy_seqs = [
                engine.info(idx)[4] - 2 if line == orig else None
                for idx, line, orig in zip(positions, lines, originals, strict=True)
            ]
            extras = [entry_to_json(e) for e in plan.extras]
            doc = b"\n".join([header, *lines, *extras, b""])
            storage = _publish(
                self._source,
                self._schema,
                doc,
                copy_from=sid,
                copy_seqs=copy_seqs,
                durability=self._durability,
                limits=self._limits,
                notify=True,
            )
        finally:
            src.close()
        return Session(storage)

    # -- moving sessions between files and the server --------------------------------

    def import_jsonl(self, data: bytes) -> Session:
        """Stores a whole JSONL session document (a session file's bytes) as a new
        session, byte for byte, and opens it for writing; its id is the header's.

        Raises:
            SessionError: ``exists`` if that id is taken, ``corrupt`` for a bad header,
                ``invalid_argument`` for an id that is not a valid session id.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise SessionError("invalid_argument", "data must be bytes")
        doc = bytes(data)
        if not doc.endswith(b"\n"):
            doc += b"\n"
        storage = _publish(
            self._source,
            self._schema,
            doc,
            durability=self._durability,
            limits=self._limits,
            notify=True,
        )
        try:
            _ref_id(storage.session_id)
        except SessionError:
            storage.close()
            self._delete_row(storage.session_id)
            raise
        return Session(storage)

    def export_jsonl(self, ref: SessionRef) -> bytes:
        """The session as the JSONL document a file would hold: its header row and every
        entry row, byte for byte, in sequence order (read without the lock).

        Raises:
            SessionError: ``not_found``, ``io``.
        """
        sid = _ref_id(ref)
        storage = PostgresSessionStorage.open(
            self._source, sid, schema=self._schema, readonly=True, limits=self._limits
        )
        try:
            return storage.to_jsonl()
        finally:
            storage.close()

    def __contains__(self, ref: object) -> bool:
        try:
            sid = _ref_id(ref)
        except SessionError:
            return False
        query = f"SELECT 1 FROM {ident(self._schema)}.sessions WHERE id = %s"
        row = self._run(
            f"looking up session {sid!r}", lambda conn: conn.execute(query, (sid,)).fetchone()
        )
        return row is not None

    def __repr__(self) -> str:
        return f"PostgresSessionRepo({self._source.describe()!r}, schema={self._schema!r})"


def _tsquery(plan: SearchPlan) -> str:
    """The positive terms as a ``tsquery`` of verbatim lexemes: every token of every
    term (a phrase's order and an exclusion are left to the matcher), a prefix as
    ``:*``."""
    parts = []
    for tokens, prefix, negated in plan.terms:
        if negated:
            continue
        for i, tok in enumerate(tokens):
            lexeme = "'" + tok.replace("\\", "\\\\").replace("'", "''") + "'"
            parts.append(lexeme + (":*" if prefix and i == len(tokens) - 1 else ""))
    return " & ".join(parts)


def _known(idx: int | None) -> int:
    assert idx is not None  # every position of a fork source names an entry of it
    return idx


def _metadata_row(r: tuple[Any, ...]) -> SessionMetadata:
    sid, cwd, created, modified, name, parent, entries, messages, first, size, dialect = r
    return SessionMetadata(
        id=sid,
        path=None,
        cwd=cwd,
        created=None if created is None else created.astimezone(timezone.utc),
        modified=None if modified is None else modified.astimezone(timezone.utc),
        name=name,
        parent_session=parent,
        entry_count=entries,
        message_count=messages,
        first_message=first,
        size_bytes=size,
        dialect=dialect,
    )
