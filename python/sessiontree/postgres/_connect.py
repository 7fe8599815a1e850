"""Connections: what a conninfo, a connection or a pool gives, errors, the writer lock.

psycopg is imported here, on first use, never by ``import sessiontree``.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final, NoReturn

from ..errors import SessionError

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["Source", "pg_error"]

# Schema names: plain identifiers only, so every statement can name them unquoted-safe.
_SCHEMA_RE: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")

# SQLSTATE raised by the append function when the session's next sequence number is not
# the one the writer expected (see _schema.py); 23505 is the unique key of (session, seq).
MODIFIED_SQLSTATES: Final = ("STMOD", "23505")

# The application_name a writer's lock connection carries: how a second writer names the
# holder (pg_stat_activity shows it for every session, whoever owns it).
_WRITER_TAG: Final = "sessiontree writer"


def psycopg_module() -> Any:
    """``psycopg``, or ``invalid_argument`` saying how to install it."""
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - the dev install has it
        raise SessionError(
            "invalid_argument",
            "PostgreSQL storage needs psycopg 3: pip install 'sessiontree[postgres]'",
        ) from exc
    return psycopg


def check_schema(schema: object) -> str:
    """The schema name, or ``invalid_argument`` (lowercase letters, digits, ``_``)."""
    if not isinstance(schema, str) or _SCHEMA_RE.fullmatch(schema) is None:
        raise SessionError(
            "invalid_argument",
            f"schema must be a lowercase SQL identifier ([a-z_][a-z0-9_]*, at most 63), "
            f"got {schema!r}",
        )
    return schema


def pg_error(what: str, exc: BaseException) -> SessionError:
    """The ``SessionError`` for a psycopg error raised while doing ``what``.

    A changed sequence (another writer appended) is ``modified_externally``; everything
    else the server or the network says (unreachable, refused credentials, a terminated
    connection, a restart) is ``io`` with the psycopg error as ``__cause__``.
    """
    sqlstate = getattr(exc, "sqlstate", None)
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if sqlstate in MODIFIED_SQLSTATES:
        return SessionError(
            "modified_externally",
            f"{what}: the session was changed by another writer ({detail}); reopen it",
        )
    return SessionError("io", f"{what}: {detail}")


def raise_pg(what: str, exc: BaseException) -> NoReturn:
    raise pg_error(what, exc) from exc


def writer_application_name() -> str:
    """``sessiontree writer <host> pid <pid>``, cut to PostgreSQL's 63 bytes."""
    tag = f"{_WRITER_TAG} {socket.gethostname()} pid {os.getpid()}"
    return tag.encode("utf-8")[:63].decode("utf-8", "ignore")


class Source:
    """Where connections come from: a conninfo string, a user's connection or a pool.

    ``dedicated()`` is a connection for one writer, kept for as long as it holds its
    session lock (never a pooled one: a lock must not travel back to the pool with it).
    ``borrow()`` lends a connection for one short operation.
    """

    def __init__(self, target: object) -> None:
        pg = psycopg_module()
        import psycopg_pool

        self._conninfo: str | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        self._pool_kwargs: dict[str, Any] = {}
        if isinstance(target, str):
            self._conninfo = target
        elif isinstance(target, pg.Connection):
            self._conn = target
        elif isinstance(target, psycopg_pool.ConnectionPool):
            self._pool = target
            # psycopg_pool also takes callables giving them (fresh credentials).
            conninfo = target.conninfo
            self._conninfo = conninfo() if callable(conninfo) else conninfo
            kwargs = target.kwargs
            self._pool_kwargs = dict((kwargs() if callable(kwargs) else kwargs) or {})
        else:
            raise SessionError(
                "invalid_argument",
                "expected a conninfo string, a psycopg.Connection or a "
                f"psycopg_pool.ConnectionPool, not {type(target).__name__}",
            )
        self._lock = threading.Lock()
        self._spare: psycopg.Connection[Any] | None = None

    @property
    def shared_connection(self) -> psycopg.Connection[Any] | None:
        """The user's connection, when this source is one."""
        return self._conn

    def describe(self) -> str:
        """The server as the user named it, without a password."""
        if self._conn is not None:
            info = self._conn.info
        elif self._conninfo is not None:
            return _redact(self._conninfo)
        else:  # pragma: no cover - every source has one of the two
            return "?"
        return f"host={info.host} port={info.port} dbname={info.dbname} user={info.user}"

    def connect(self, *, application_name: str | None = None) -> psycopg.Connection[Any]:
        """A new connection of this source's server (autocommit), or ``io``."""
        pg = psycopg_module()
        assert self._conninfo is not None
        kwargs = dict(self._pool_kwargs)
        kwargs["autocommit"] = True
        if application_name is not None:
            kwargs["application_name"] = application_name
        try:
            conn: psycopg.Connection[Any] = pg.connect(self._conninfo, **kwargs)
        except pg.Error as exc:
            raise SessionError(
                "io", f"cannot connect to PostgreSQL ({_redact(self._conninfo)}): {_first(exc)}"
            ) from exc
        return conn

    def dedicated(self) -> tuple[psycopg.Connection[Any], bool]:
        """``(connection, owned)``: a writer's own connection; ``owned`` is False for the
        user's connection, which is never closed here."""
        if self._conn is not None:
            return self._conn, False
        return self.connect(application_name=writer_application_name()), True

    @contextlib.contextmanager
    def borrow(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection for one short operation."""
        if self._conn is not None:
            yield self._conn
            return
        if self._pool is not None:
            pg = psycopg_module()
            try:
                cm = self._pool.connection()
                conn = cm.__enter__()
            except pg.Error as exc:
                raise SessionError("io", f"cannot get a pooled connection: {_first(exc)}") from exc
            except Exception as exc:  # PoolTimeout and friends
                raise SessionError("io", f"cannot get a pooled connection: {exc}") from exc
            try:
                yield conn
            except BaseException as exc:
                cm.__exit__(type(exc), exc, exc.__traceback__)
                raise
            else:
                cm.__exit__(None, None, None)
            return
        with self._lock:
            conn = self._spare
            self._spare = None
        if conn is None or conn.closed or conn.broken:
            conn = self.connect()
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        with self._lock:
            keep = self._spare is None and not conn.closed
            if keep:
                self._spare = conn
        if not keep:
            conn.close()

    def close(self) -> None:
        """Closes the connection this source keeps for short operations."""
        with self._lock:
            conn, self._spare = self._spare, None
        if conn is not None:
            conn.close()


# Session locks held through a user's connection, per connection: PostgreSQL's advisory
# locks are re-entrant within one backend, so a second writer over the same connection
# must be refused here.
_SHARED_HELD: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def lock_key(schema: str, session_id: str) -> str:
    """The text hashed into a session's advisory lock key."""
    return f"sessiontree:{schema}:{session_id}"


def try_lock(conn: psycopg.Connection[Any], owned: bool, key: str) -> bool:
    """Takes the session-level advisory lock ``key`` on ``conn``; False if held elsewhere."""
    if not owned:
        with _SHARED_LOCK:
            held = _SHARED_HELD.setdefault(conn, set())
            if key in held:
                return False
    row = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)).fetchone()
    won = bool(row and row[0])
    if won and not owned:
        with _SHARED_LOCK:
            _SHARED_HELD.setdefault(conn, set()).add(key)
    return won


def unlock(conn: psycopg.Connection[Any], owned: bool, key: str) -> None:
    """Releases ``key`` (a closed connection released it already)."""
    if not owned:
        with _SHARED_LOCK:
            _SHARED_HELD.get(conn, set()).discard(key)
    if conn.closed or conn.broken:
        return
    with contextlib.suppress(Exception):
        conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))


def holder_of(conn: psycopg.Connection[Any], key: str) -> str:
    """Who holds the advisory lock ``key``: its application name, address and backend."""
    row = conn.execute(
        "SELECT a.application_name, host(a.client_addr), a.pid FROM pg_locks l "
        "JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
        "AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(%s, 0) "
        "LIMIT 1",
        (key,),
    ).fetchone()
    if row is None:
        return "another writer"
    app, addr, pid = row
    where = f" from {addr}" if addr else ""
    return f"{app or 'a client'} (backend {pid}{where})"


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _redact(conninfo: str) -> str:
    """``conninfo`` without its password (key=value or URI form)."""
    out = re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", conninfo)
    return re.sub(r"(postgres(?:ql)?://[^:/@]*:)[^@]*@", r"\1***@", out)
