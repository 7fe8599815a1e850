"""``PostgresSessionStorage``: a session in PostgreSQL rows, on the engine."""

from __future__ import annotations

import contextlib
import select
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from .. import _core
from ..errors import SessionError
from ..model.entries import MessageEntry, SessionHeader, SessionTreeEntry
from ..model.messages import AgentMessage
from ..model.types import SessionMetadata
from ..repo.metadata import metadata_of
from ..storage.base import Durability
from ..storage.engine import Limits, _check_durability, _EngineStorage, _limits, _make_header
from ._connect import (
    Source,
    channel,
    check_pg_text,
    check_schema,
    check_shared,
    holder_of,
    ident,
    lock_key,
    psycopg_module,
    raise_pg,
)
from ._connect import try_lock as _try_lock
from ._connect import unlock as _unlock
from ._schema import is_missing, migrate, recover

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresSessionStorage"]

# Rows fetched per round trip when a session is loaded: each batch arrives as one bytea
# (the lines joined by newlines on the server), so no Python object is made per row. A
# batch is at most FETCH_ROWS rows and FETCH_BYTES bytes (or one row, if larger): the
# server builds it in memory whole, and PostgreSQL caps one value at 1 GB, so a row count
# alone would fail (for good) on a session of many large entries (256 MiB lines are legal).
FETCH_ROWS: Final = 8192
FETCH_BYTES: Final = 64 * 1024 * 1024

# ``durability="none"``: appends wait in the engine's buffer until ``flush()``/``close()``
# or until this many bytes are waiting, then go to the server in one transaction.
NONE_BATCH_BYTES: Final = 64 * 1024

# synchronous_commit per durability mode (see docs/postgres.md's guarantee table): ``fsync``
# waits for the server's WAL flush; the others return once the commit is in the server's
# memory, and its WAL writer flushes within three wal_writer_delay (0.6 s by default).
_SYNCHRONOUS_COMMIT: Final = {"none": "off", "flush": "off", "group": "off", "fsync": "on"}


def _channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel of a schema's appends (the payload is the session id)."""
    return channel(schema)


def _gone(schema: str, sid: str, what: str) -> SessionError:
    """The error of an operation that found the schema's tables gone under an open handle."""
    return SessionError(
        "modified_externally",
        f"{what}: session {sid!r} is gone, and so are schema {schema!r}'s tables (dropped, or "
        "the database reset or restored); nothing was written. Create or open it again",
    )


class PostgresSessionStorage(_EngineStorage):
    """A session stored in PostgreSQL: the header and one row per entry, each row its
    exact JSONL line, so a session moves between a file and the server byte for byte.

    The engine builds its arena from the rows (fetched in large batches, joined on the
    server), exactly as it does from a file, so every read behaves as
    :class:`~sessiontree.JsonlSessionStorage`'s. A writer holds a session-level advisory
    lock on its own connection until :meth:`close`; every append names the sequence
    number it expects, so a writer that lost its lock gets ``modified_externally``.

    Use :meth:`create` and :meth:`open`; the target is a conninfo string (``"host=...
    dbname=..."`` or ``"postgresql://..."``), a ``psycopg.Connection`` in autocommit mode
    and outside any transaction block (used as it is, never closed here; anything else is
    ``invalid_argument``: each write commits on its own) or a
    ``psycopg_pool.ConnectionPool`` (a writer opens its own connection with the pool's
    settings: a lock never travels back into the pool).
    """

    _source: Source
    _own_source: bool
    _conn: psycopg.Connection[Any] | None
    _conn_owned: bool
    _schema: str
    _sid: str
    _key: str
    _readonly: bool
    _durability: str
    _next_seq: int
    _saved: int
    _saved_bytes: int
    _failed: SessionError | None
    _first_user: MessageEntry | None
    _first_scanned: int
    _notify: bool
    _listener: psycopg.Connection[Any] | None
    _io_lock: threading.Lock

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise SessionError(
            "invalid_argument",
            "use PostgresSessionStorage.create(conninfo) or "
            "PostgresSessionStorage.open(conninfo, session_id)",
        )

    # -- construction ----------------------------------------------------------------

    @classmethod
    def _new(
        cls,
        engine: _core.Engine,
        *,
        source: Source,
        own_source: bool,
        conn: psycopg.Connection[Any] | None,
        conn_owned: bool,
        schema: str,
        readonly: bool,
        durability: str,
        next_seq: int,
        notify: bool,
    ) -> PostgresSessionStorage:
        self = cls.__new__(cls)
        _EngineStorage.__init__(self, engine)
        self._source = source
        self._own_source = own_source
        self._conn = conn
        self._conn_owned = conn_owned
        self._schema = schema
        self._sid = engine.session_id
        self._key = lock_key(schema, self._sid)
        self._readonly = readonly
        self._may_append = not readonly
        self._durability = durability
        self._next_seq = next_seq
        # Engine entries [0, _saved) are on the server; later ones wait (``none``).
        self._saved = len(engine)
        self._saved_bytes = engine.byte_len
        self._failed = None
        self._first_user = None
        self._first_scanned = 0
        self._notify = notify
        self._listener = None
        self._io_lock = threading.Lock()
        return self

    @staticmethod
    def _source_of(target: object) -> tuple[Source, bool]:
        if isinstance(target, Source):
            return target, False
        return Source(target), True

    @classmethod
    def _writer_connection(
        cls,
        source: Source,
        schema: str,
        session_id: str,
        durability: str,
        *,
        creating: bool = False,
    ) -> tuple[psycopg.Connection[Any], bool]:
        """A writer's connection, migrated, holding the session's lock; or ``locked``
        (``exists`` when ``creating``: a session someone holds is there already)."""
        psycopg = psycopg_module()
        check_pg_text("session id", session_id)  # PostgreSQL's text holds no NUL
        conn, owned = source.dedicated()
        try:
            migrate(conn, schema)
            key = lock_key(schema, session_id)
            try:
                if owned:
                    conn.execute(
                        "SELECT set_config('synchronous_commit', %s, false)",
                        (_SYNCHRONOUS_COMMIT[durability],),
                    )
                won = _try_lock(conn, owned, key)
                holder = None if won else holder_of(conn, key)
            except psycopg.Error as exc:
                raise_pg(f"locking session {session_id!r}", exc)
            if holder is not None and creating:
                raise SessionError(
                    "exists", f"session {session_id!r} already exists (open by {holder})"
                )
            if holder is not None:
                raise SessionError(
                    "locked", f"session {session_id!r} is open for writing by {holder}"
                )
        except BaseException:
            if owned:
                conn.close()
            raise
        return conn, owned

    @classmethod
    def create(
        cls,
        target: object,
        header: SessionHeader | None = None,
        *,
        schema: str = "sessiontree",
        durability: Durability = "group",
        limits: Limits | None = None,
        notify: bool = True,
    ) -> PostgresSessionStorage:
        """Creates a new session (its header row) and opens it for writing.

        Args:
            target: a conninfo string, a ``psycopg.Connection`` or a
                ``psycopg_pool.ConnectionPool``.
            header: the header to write (a new one by default).
            schema: the schema holding the tables (created and migrated if needed).
            durability: ``none``, ``flush``, ``group`` or ``fsync`` (see ``docs/postgres.md``).
            limits: size limits.
            notify: send a NOTIFY after each commit, for :meth:`wait_for_entries`.

        Raises:
            SessionError: ``exists`` if the session id is taken, ``io`` if the server
                cannot be reached, ``invalid_argument`` for a bad argument.
        """
        schema = check_schema(schema)
        mode = _check_durability(durability)
        head = _make_header(header)
        engine = _core.Engine.memory(head, **_limits(limits))
        source, own = cls._source_of(target)
        try:
            conn, owned = cls._writer_connection(
                source, schema, engine.session_id, mode, creating=True
            )
        except BaseException:
            if own:
                source.close()
            raise
        self = cls._new(
            engine,
            source=source,
            own_source=own,
            conn=conn,
            conn_owned=owned,
            schema=schema,
            readonly=False,
            durability=mode,
            next_seq=0,
            notify=notify,
        )
        try:
            self._insert_session_row(engine.header())
        except BaseException:
            self._release()
            raise
        return self

    def _insert_session_row(self, header_line: bytes, *, in_transaction: bool = False) -> None:
        """Inserts the sessions row; ``exists`` if the id is taken. Outside a transaction,
        tables found gone (a database reset or restored) are made again and the insert
        retried; inside one, the caller retries."""
        psycopg = psycopg_module()
        conn = self._conn
        assert conn is not None
        try:
            try:
                cur = self._insert_session_row_once(conn, header_line)
            except psycopg.Error as exc:
                if in_transaction or not is_missing(exc):
                    raise
                # The tables are gone (a reset or restored database): make them again.
                recover(conn, self._schema)
                cur = self._insert_session_row_once(conn, header_line)
        except psycopg.Error as exc:
            if in_transaction and is_missing(exc):
                raise
            raise_pg(f"creating session {self._sid!r}", exc)
        if cur.rowcount != 1:
            raise SessionError("exists", f"session {self._sid!r} already exists")

    def _insert_session_row_once(
        self, conn: psycopg.Connection[Any], header_line: bytes
    ) -> psycopg.Cursor[Any]:
        meta = self.session_metadata()
        return conn.execute(
            f"INSERT INTO {ident(self._schema)}.sessions (id, header, cwd, cwd_key, name, "
            "parent_session, created, modified, entry_count, message_count, "
            "first_message, size_bytes, next_seq, dialect) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING",
            (
                self._sid,
                header_line,
                _text(meta.cwd),
                _text(_cwd_key(meta.cwd)),
                _text(meta.name),
                _text(meta.parent_session),
                meta.created,
                meta.modified,
                meta.entry_count,
                meta.message_count,
                _text(meta.first_message),
                meta.size_bytes,
                self._next_seq,
                meta.dialect,
            ),
        )

    @classmethod
    def open(
        cls,
        target: object,
        session_id: str,
        *,
        schema: str = "sessiontree",
        readonly: bool = False,
        strict: bool = False,
        durability: Durability = "group",
        limits: Limits | None = None,
        notify: bool = True,
    ) -> PostgresSessionStorage:
        """Opens a session: as its writer (holding its lock), or ``readonly``.

        Args:
            target: a conninfo string, a ``psycopg.Connection`` or a
                ``psycopg_pool.ConnectionPool``.
            session_id: the session.
            schema: the schema holding the tables.
            readonly: take no lock, hold no connection, never write (see :meth:`refresh`).
            strict: raise ``corrupt`` on a row that is not a valid line instead of
                skipping and reporting it (``load_report``: line ``n`` is the row of
                sequence number ``n - 2``; the header is line 1).
            durability: ``none``, ``flush``, ``group`` or ``fsync`` (writers).
            limits: size limits.
            notify: writers send a NOTIFY after each commit.

        Raises:
            SessionError: ``not_found``, ``locked`` (naming the holder's host and pid),
                ``corrupt``, ``io``, ...
        """
        schema = check_schema(schema)
        mode = _check_durability(durability)
        if not isinstance(session_id, str):
            raise SessionError(
                "invalid_argument", f"session_id must be a str, not {type(session_id).__name__}"
            )
        check_pg_text("session_id", session_id)
        source, own = cls._source_of(target)
        conn: psycopg.Connection[Any] | None = None
        owned = False
        try:
            if readonly:
                with source.borrow() as c:
                    migrate(c, schema)
                    next_seq, doc = _fetch_document(c, schema, session_id)
            else:
                conn, owned = cls._writer_connection(source, schema, session_id, mode)
                next_seq, doc = _fetch_document(conn, schema, session_id)
            engine = _core.Engine.from_bytes(doc, bool(strict), **_limits(limits))
            if engine.session_id != session_id:
                raise SessionError(
                    "corrupt",
                    f"the header row of session {session_id!r} names session {engine.session_id!r}",
                )
        except BaseException:
            if conn is not None:
                _unlock(conn, owned, lock_key(schema, session_id))
                if owned:
                    conn.close()
            if own:
                source.close()
            raise
        return cls._new(
            engine,
            source=source,
            own_source=own,
            conn=conn,
            conn_owned=owned,
            schema=schema,
            readonly=bool(readonly),
            durability=mode,
            next_seq=next_seq,
            notify=notify,
        )

    # -- properties ------------------------------------------------------------------

    @property
    def schema(self) -> str:
        """The schema holding the session's rows."""
        return self._schema

    @property
    def readonly(self) -> bool:
        """True when opened read-only."""
        return self._readonly

    @property
    def durability(self) -> str:
        """The durability mode of appends."""
        return self._durability

    @property
    def next_seq(self) -> int:
        """The sequence number the next appended entry gets (rows on the server, plus
        appends still buffered with ``durability="none"``)."""
        return self._next_seq + (len(self._engine) - self._saved)

    def _check(self) -> None:
        super()._check()
        if self._failed is not None:
            err = SessionError(self._failed.code, self._failed.message)
            raise err from self._failed.__cause__

    def _refuse_append(self) -> None:
        self._check()
        raise SessionError("readonly", f"session {self._sid!r} is open read-only")

    # -- appends ---------------------------------------------------------------------

    def append_entry(self, entry: SessionTreeEntry) -> None:
        with self._atomic_lock:
            self._check()
            self._check_connection()
            super().append_entry(entry)
            self._persist_after_append()

    def _append_lines(self, lines: list[bytes]) -> None:
        """A batch of entry lines as one unit (``append_entries``, the adapters' batches):
        checked whole by the engine, then sent to the server in one transaction (with
        ``durability="none"``, buffered as any append is)."""
        with self._atomic_lock:
            self._check()
            self._check_connection()
            super()._append_lines(lines)
            self._persist_after_append()

    def append_message(self, message: AgentMessage) -> MessageEntry:
        with self._atomic_lock:
            self._check()
            self._check_connection()
            out = super().append_message(message)
            self._persist_after_append()
            return out

    def set_leaf_id(self, entry_id: str | None) -> None:
        with self._atomic_lock:
            self._check()
            self._check_connection()
            super().set_leaf_id(entry_id)
            self._persist_after_append()

    def _check_connection(self) -> None:
        """``invalid_argument`` before a write over the user's connection, if that one no
        longer commits each statement (autocommit turned off, a transaction opened)."""
        if self._conn is not None and not self._conn_owned:
            check_shared(self._conn)

    def _persist_after_append(self) -> None:
        if self._durability == "none" and (
            self._engine.byte_len - self._saved_bytes < NONE_BATCH_BYTES
        ):
            return
        self._persist()

    def _persist(self) -> None:
        """Sends the entries not yet on the server in one transaction; a failure poisons
        the handle (the engine holds entries the server does not)."""
        engine = self._engine
        n = len(engine)
        if n == self._saved:
            return
        psycopg = psycopg_module()
        idxs = list(range(self._saved, n))
        lines = engine.lines(idxs)
        ids = [_text(engine.id_of(i)) for i in idxs]
        types = [_text(engine.info(i)[0]) for i in idxs]
        meta = self.session_metadata()
        conn = self._conn
        assert conn is not None
        if not self._conn_owned:
            try:
                check_shared(conn)
            except SessionError as exc:
                # The engine holds entries the server does not: the handle is done.
                self._failed = exc
                raise
        try:
            with self._io_lock:
                conn.execute(
                    f"SELECT {ident(self._schema)}.append_rows(%s, %s, %s, %s, %s, %s, %s, %s, %s, "
                    "%s, %s, %s, %s)",
                    (
                        self._sid,
                        self._next_seq,
                        ids,
                        types,
                        lines,
                        _text(meta.name),
                        meta.modified,
                        meta.entry_count,
                        meta.message_count,
                        _text(meta.first_message),
                        meta.size_bytes,
                        _channel(self._schema) if self._notify else None,
                        search_column(lines, self.dialect == "pi"),
                    ),
                )
        except psycopg.Error as exc:
            what = f"appending to session {self._sid!r}"
            err = _gone(self._schema, self._sid, what) if is_missing(exc) else None
            err = err or _poison_error(what, exc)
            self._failed = err
            raise err from exc
        self._next_seq += len(idxs)
        self._saved = n
        self._saved_bytes = engine.byte_len

    def flush(self) -> None:
        """Sends appends buffered with ``durability="none"`` to the server (one
        transaction); nothing to do in the other modes."""
        with self._atomic_lock:
            self._check()
            if not self._readonly:
                self._persist()

    # -- reading what others wrote ---------------------------------------------------

    def refresh(self) -> int:
        """Reads the entries another writer appended since this storage loaded
        (read-only storages; a writer is the only one appending and gets 0).

        Returns:
            the number of new entries.

        Raises:
            SessionError: ``modified_externally`` if the session was deleted or lost rows.
        """
        with self._atomic_lock:
            self._check()
            if not self._readonly:
                return 0
            psycopg = psycopg_module()
            try:
                with self._source.borrow() as conn:
                    row = conn.execute(
                        f"SELECT next_seq FROM {ident(self._schema)}.sessions WHERE id = %s",
                        (self._sid,),
                    ).fetchone()
                    if row is None or int(row[0]) < self._next_seq:
                        raise SessionError(
                            "modified_externally",
                            f"session {self._sid!r} was deleted or rewritten since it was read",
                        )
                    end = int(row[0])
                    chunks = _fetch_lines(conn, self._schema, self._sid, self._next_seq, end)
            except psycopg.Error as exc:
                if is_missing(exc):
                    raise _gone(self._schema, self._sid, "refreshing") from exc
                raise_pg(f"refreshing session {self._sid!r}", exc)
            before = len(self._engine)
            for chunk in chunks:
                for line in chunk.split(b"\n"):
                    # A bad row is skipped, as a load skips it.
                    with contextlib.suppress(SessionError):
                        self._engine.append(line)
            self._next_seq = end
            self._saved = len(self._engine)
            self._saved_bytes = self._engine.byte_len
            return len(self._engine) - before

    def wait_for_entries(self, timeout: float | None = None) -> int:
        """Waits until another writer appends (LISTEN/NOTIFY), then :meth:`refresh`.

        Returns at once if entries arrived since the last refresh. Writers opened with
        ``notify=True`` (the default) announce each commit.

        Args:
            timeout: seconds to wait at most (``None``: no limit).

        Returns:
            the number of new entries (0 after a timeout).
        """
        if timeout is not None and (isinstance(timeout, bool) or timeout < 0):
            raise SessionError("invalid_argument", "timeout must be a number >= 0 or None")
        self._check()
        if not self._readonly:
            raise SessionError("invalid_argument", "wait_for_entries is for read-only storages")
        psycopg = psycopg_module()
        try:
            if self._listener is None:
                listener = self._source.connect()
                listener.execute(f'LISTEN "{_channel(self._schema)}"')
                self._listener = listener
        except psycopg.Error as exc:
            raise_pg("listening for new entries", exc)
        got = self.refresh()
        deadline = None if timeout is None else time.monotonic() + timeout
        listener = self._listener
        while got == 0:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return 0
            try:
                ready, _, _ = select.select([listener.fileno()], [], [], left)
                if ready:
                    for _n in listener.notifies(timeout=0):
                        pass
            except psycopg.Error as exc:
                raise_pg("listening for new entries", exc)
            got = self.refresh()
        return got

    def to_jsonl(self) -> bytes:
        """The session as the JSONL document a file would hold (header row, then every
        entry row in sequence order, byte for byte; buffered ``none`` appends included)."""
        self._check()
        data = self._engine.to_bytes()
        assert data is not None
        return data

    def search_document(self) -> bytes:
        """The document (:meth:`to_jsonl`): what a search reads."""
        return self.to_jsonl()

    # -- listing ---------------------------------------------------------------------

    def get_first_message(self, role: str) -> MessageEntry | None:
        # The first user message never changes once found, so appends scan only the
        # entries added since the last look (``list`` keeps it current per append).
        if role != "user":
            return super().get_first_message(role)
        self._check()
        engine = self._engine
        if self._first_user is None:
            n = len(engine)
            for idx in range(self._first_scanned, n):
                kind, r, _, _, _ = engine.info(idx)
                if kind == "message" and r == "user":
                    entry = self.get_entries_at([idx])[0]
                    assert isinstance(entry, MessageEntry)
                    self._first_user = entry
                    break
            self._first_scanned = n
        return self._first_user

    def session_metadata(self) -> SessionMetadata:
        """What ``list`` shows for this session (``path`` is ``None``; ``size_bytes`` the
        size of the JSONL document the rows make)."""
        return metadata_of(self, self._sid, None, self._engine.byte_len)

    # -- closing ---------------------------------------------------------------------

    def close(self) -> None:
        """Sends buffered appends, releases the lock and the connection; idempotent.

        Raises:
            SessionError: ``io`` if buffered appends could not be sent (the lock and the
                connection are released all the same).
        """
        with self._atomic_lock:
            if self._engine.closed:
                return
            try:
                if not self._readonly and self._failed is None:
                    self._persist()
            finally:
                self._release()

    def _release(self) -> None:
        self._engine.close()
        self._may_append = False
        conn, self._conn = self._conn, None
        if conn is not None:
            _unlock(conn, self._conn_owned, self._key)
            if self._conn_owned:
                conn.close()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        if self._own_source:
            self._source.close()

    def __repr__(self) -> str:
        if self.closed:
            state = "closed"
        else:
            state = f"{len(self)} entries, {'read-only' if self._readonly else self._durability}"
        return f"<PostgresSessionStorage {self._schema}.{self._sid} {state}>"


# The engine stamps message entries itself (id, parent, time) in ``append_message``;
# the overrides above only add the write to the server around it.
PostgresSessionStorage._stamp_in_engine = True


def _poison_error(what: str, exc: BaseException) -> SessionError:
    from ._connect import pg_error

    err = pg_error(what, exc)
    err.__cause__ = exc
    if err.code == "io":
        err = SessionError(
            "io",
            f"{err.message}. The append may or may not be on the server; this handle is "
            "unusable, open the session again",
        )
        err.__cause__ = exc
    return err


# What one row's search column may hold: a tsvector is at most 1 MB and a lexeme under
# 2 KB; a row over either gets NULL (always a candidate, checked by the matcher).
_SEARCH_MAX_BYTES: Final = 512 * 1024
_LEXEME_MAX_BYTES: Final = 2000


def search_column(lines: Sequence[bytes | None], pi: bool) -> list[str | None]:
    """Each line's search tokens joined by spaces, as ``<schema>.search_vector`` takes
    them (``None`` for a line not sent, or one too large for a ``tsvector``)."""
    sent = [line for line in lines if line is not None]
    tokens = iter(_core.search_line_tokens(sent, pi))
    out: list[str | None] = []
    for line in lines:
        if line is None:
            out.append(None)
            continue
        toks = next(tokens)
        size = len(toks.encode("utf-8"))
        too_long = size > _LEXEME_MAX_BYTES and any(
            len(t.encode("utf-8")) > _LEXEME_MAX_BYTES for t in toks.split(" ")
        )
        if size > _SEARCH_MAX_BYTES or too_long:
            out.append(None)
        else:
            out.append(toks)
    return out


def _text(value: str | None) -> str | None:
    """``value`` for a text column: PostgreSQL's text cannot hold NUL, so each becomes
    U+FFFD there. Only the listing's columns see it; the rows' lines keep the exact bytes
    (JSON writes NUL as ``\\u0000``), and everything read back comes from the lines."""
    return None if value is None else value.replace("\x00", "\ufffd")


def _cwd_key(cwd: str) -> str:
    """The ``cwd`` a listing filters on (as ``SessionRepo.list`` compares them)."""
    import os

    return os.path.normpath(cwd) if cwd else ""


def _fetch_lines(
    conn: psycopg.Connection[Any], schema: str, session_id: str, start: int, end: int
) -> list[bytes]:
    """Rows ``start <= seq < end`` as a few byte strings, each many lines joined by
    newlines on the server (rows hold no newline: a CHECK constraint).

    A batch is at most FETCH_ROWS rows and, past its first row, FETCH_BYTES bytes: the
    running size comes from ``octet_length`` (read from the TOAST header, nothing is
    decompressed for it), so no batch nears PostgreSQL's 1 GB limit on one value."""
    chunks: list[bytes] = []
    query = (
        "SELECT string_agg(line, '\\x0a'::bytea ORDER BY seq), max(seq) FROM ("
        "SELECT seq, line, sum(octet_length(line) + 1) OVER (ORDER BY seq ROWS "
        "BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - octet_length(line) - 1 AS before "
        f"FROM {ident(schema)}.entries WHERE session_id = %s AND seq >= %s AND seq < %s "
        "ORDER BY seq LIMIT %s) b WHERE before < %s"
    )
    a = start
    while a < end:
        row = conn.execute(
            query, (session_id, a, end, FETCH_ROWS, FETCH_BYTES), binary=True
        ).fetchone()
        if row is None or row[0] is None:
            break
        chunks.append(bytes(row[0]))
        a = int(row[1]) + 1
    return chunks


def _fetch_document(
    conn: psycopg.Connection[Any], schema: str, session_id: str
) -> tuple[int, bytes]:
    """``(next_seq, the session's JSONL document)``, or ``not_found``."""
    psycopg = psycopg_module()
    query = f"SELECT header, next_seq FROM {ident(schema)}.sessions WHERE id = %s"
    try:
        try:
            row = conn.execute(query, (session_id,), binary=True).fetchone()
        except psycopg.Error as exc:
            if not is_missing(exc):
                raise
            # The tables are gone (a reset or restored database): make them again, so the
            # answer is ``not_found`` and later creates work.
            recover(conn, schema)
            row = conn.execute(query, (session_id,), binary=True).fetchone()
        if row is None:
            raise SessionError("not_found", f"session {session_id!r} not found")
        header, next_seq = bytes(row[0]), int(row[1])
        chunks = _fetch_lines(conn, schema, session_id, 0, next_seq)
    except psycopg.Error as exc:
        raise_pg(f"reading session {session_id!r}", exc)
    parts: Sequence[bytes] = [header, *chunks]
    return next_seq, b"\n".join(parts) + b"\n"


def _publish(
    source: Source,
    schema: str,
    doc: bytes,
    *,
    copy_from: str | None = None,
    copy_seqs: Sequence[int | None] = (),
    durability: str,
    limits: Limits | None,
    notify: bool,
) -> PostgresSessionStorage:
    """A new session from a whole JSONL document, written in one transaction and open
    for writing: every line after the header becomes a row, byte for byte.

    ``copy_seqs[i]``, when given and not ``None``, is the sequence number of a row of
    session ``copy_from`` holding exactly row ``i``'s bytes: the server copies it
    (``INSERT ... SELECT``) instead of receiving it again (forks).

    Raises:
        SessionError: ``exists`` if the header's session id is taken, ``corrupt`` for a
            bad header, ``io``.
    """
    psycopg = psycopg_module()
    engine = _core.Engine.from_bytes(doc, False, **_limits(limits))
    rows = doc.split(b"\n")[1:]
    if rows and rows[-1] == b"":
        rows.pop()
    header_line = doc.split(b"\n", 1)[0]
    ids: list[str | None] = [None] * len(rows)
    types: list[str | None] = [None] * len(rows)
    for idx in range(len(engine)):
        kind, _, _, _, line_no = engine.info(idx)
        ids[line_no - 2] = engine.id_of(idx)
        types[line_no - 2] = kind
    sent: list[bytes | None] = list(rows)
    seqs: list[int | None] = [None] * len(rows)
    for i, s in enumerate(copy_seqs):
        if s is not None:
            seqs[i] = s
            sent[i] = None
    conn, owned = PostgresSessionStorage._writer_connection(
        source, schema, engine.session_id, durability, creating=True
    )
    self = PostgresSessionStorage._new(
        engine,
        source=source,
        own_source=False,
        conn=conn,
        conn_owned=owned,
        schema=schema,
        readonly=False,
        durability=durability,
        next_seq=len(rows),
        notify=notify,
    )
    q = ident(schema)

    def write() -> None:
        with conn.transaction():
            self._insert_session_row(header_line, in_transaction=True)
            conn.execute(
                f"INSERT INTO {q}.entries (session_id, seq, entry_id, type, line, search) "
                "SELECT %s, u.o - 1, u.i, u.t, coalesce(u.l, e.line), "
                f"CASE WHEN u.l IS NULL THEN e.search ELSE {q}.search_vector(u.x) END "
                "FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::bytea[], %s::text[]) "
                "WITH ORDINALITY AS u (s, i, t, l, x, o) "
                f"LEFT JOIN {q}.entries e ON e.session_id = %s AND e.seq = u.s",
                (
                    engine.session_id,
                    seqs,
                    ids,
                    types,
                    sent,
                    search_column(sent, engine.dialect[0] == "pi"),
                    copy_from,
                ),
            )

    try:
        try:
            write()
        except psycopg.Error as exc:
            # Tables found gone (a reset or restored database): made again, written again
            # (a fork's source went with them: ``not_found`` came before this).
            if not is_missing(exc):
                raise
            recover(conn, schema)
            write()
    except psycopg.Error as exc:
        self._release()
        raise_pg(f"writing session {engine.session_id!r}", exc)
    except BaseException:
        self._release()
        raise
    return self
