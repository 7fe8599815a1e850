"""Connections: what a conninfo, a connection or a pool gives, errors, the writer lock.

psycopg is imported here, on first use, never by ``import sessiontree``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import threading
import urllib.parse
import weakref
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final, NoReturn

from .._util import check_text
from ..errors import SessionError

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["Source", "pg_error"]

# Schema names: lowercase identifiers of at most 63 bytes (PostgreSQL's NAMEDATALEN - 1),
# always quoted in statements (so reserved words such as ``user`` work), never ``pg_*``
# (reserved for system schemas) nor ``information_schema``.
_SCHEMA_RE: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_SYSTEM_SCHEMAS: Final = ("information_schema",)

# PostgreSQL's longest identifier (a NOTIFY channel is one too), in bytes.
_MAX_IDENT: Final = 63

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
    """The schema name, or ``invalid_argument``: 1 to 63 lowercase letters, digits and
    ``_``, not starting with a digit, not ``pg_...`` nor ``information_schema``."""
    if not isinstance(schema, str) or _SCHEMA_RE.fullmatch(schema) is None:
        raise SessionError(
            "invalid_argument",
            f"schema must be a lowercase SQL identifier ([a-z_][a-z0-9_]*, at most 63 "
            f"characters), got {schema!r}",
        )
    if schema.startswith("pg_") or schema in _SYSTEM_SCHEMAS:
        raise SessionError(
            "invalid_argument",
            f"schema {schema!r} is reserved for PostgreSQL's system schemas; choose another name",
        )
    return schema


def ident(schema: str) -> str:
    """``schema`` quoted for a statement (a checked name: nothing in it needs escaping);
    quoted, a reserved word such as ``user`` or ``select`` is a name like any other."""
    return f'"{schema}"'


def channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel of a schema's appends: ``sessiontree_<schema>``, or, when
    that passes PostgreSQL's 63 bytes, its first part and a hash of the whole name."""
    name = f"sessiontree_{schema}"
    if len(name) <= _MAX_IDENT:
        return name
    digest = hashlib.sha256(schema.encode()).hexdigest()[:8]
    return f"{name[: _MAX_IDENT - 9]}_{digest}"


def check_pg_text(what: str, value: str) -> None:
    """``invalid_argument`` if PostgreSQL's text cannot hold ``value``: what no UTF-8 text
    can (a lone surrogate, :func:`sessiontree._util.check_text`), or a NUL."""
    check_text(what, value)
    if "\x00" in value:
        raise SessionError("invalid_argument", f"{what} {value!r} contains a NUL character")


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
            check_conninfo(target)
            self._conninfo = target
        elif isinstance(target, pg.Connection):
            check_shared(target)
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
            return shown(self._conninfo)
        else:  # pragma: no cover - every source has one of the two
            return "?"
        return f"host={info.host} port={info.port} dbname={info.dbname} user={info.user}"

    def connect(self, *, application_name: str | None = None) -> psycopg.Connection[Any]:
        """A new connection of this source's server (autocommit), or ``io``."""
        pg = psycopg_module()
        kwargs = dict(self._pool_kwargs)
        if self._conninfo is not None:
            conninfo = self._conninfo
        else:
            # The user's connection: another one like it (a listener), from its parameters
            # (``info.dsn`` leaves the password out; ``info.password`` has it).
            assert self._conn is not None
            conninfo = self._conn.info.dsn
            if self._conn.info.password:
                kwargs["password"] = self._conn.info.password
        kwargs["autocommit"] = True
        if application_name is not None:
            kwargs["application_name"] = application_name
        failed: SessionError | None = None
        try:
            conn: psycopg.Connection[Any] = pg.connect(conninfo, **kwargs)
        except pg.Error as exc:
            failed = _connect_error(
                "io",
                "cannot connect to PostgreSQL",
                conninfo,
                exc,
                parsed=True,
                extra=[str(kwargs.get("password") or "")],
            )
        if failed is not None:
            # Raised here, outside the ``except``: the original error (whose text may quote
            # the password) is neither the cause nor the context of this one.
            raise failed
        return conn

    def dedicated(self) -> tuple[psycopg.Connection[Any], bool]:
        """``(connection, owned)``: a writer's own connection; ``owned`` is False for the
        user's connection, which is never closed here."""
        if self._conn is not None:
            check_shared(self._conn)
            return self._conn, False
        return self.connect(application_name=writer_application_name()), True

    @contextlib.contextmanager
    def borrow(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection for one short operation."""
        if self._conn is not None:
            check_shared(self._conn)
            yield self._conn
            return
        if self._pool is not None:
            failed: SessionError | None = None
            try:
                cm = self._pool.connection()
                conn = cm.__enter__()
            except Exception as exc:  # psycopg errors, PoolTimeout and friends
                failed = _connect_error(
                    "io",
                    "cannot get a pooled connection",
                    self._conninfo or "",
                    exc,
                    parsed=True,
                    extra=[str(self._pool_kwargs.get("password") or "")],
                )
            if failed is not None:
                raise failed
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


# -- passwords never reach an error, a log line or a repr ----------------------------------

_URI_RE: Final = re.compile(r"(?i)(postgres(?:ql)?://)([^\s]*)")
_KV_PASSWORD_RE: Final = re.compile(r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S+)")
_QUOTED_RE: Final = re.compile(r"\"([^\"]*)\"|'([^']*)'")
# What libpq's conninfo parser quotes of its own (``missing "=" after ...``, ``matching "]"``,
# ``(expected ":" or "/")``): kept in the message of a conninfo that does not parse, where
# every other quoted part (a piece of the conninfo) is left out.
_LIBPQ_TOKENS: Final = frozenset({"=", "]", ":", "/", "@", "?", "&"})
# Shorter passwords are blotted out only where a message quotes them, not in free text
# (where they would blot out pieces of ordinary words).
_MIN_FREE_SECRET: Final = 4


def _redact(conninfo: str) -> str:
    """``conninfo`` without its password, in either form: ``password=...`` (quoted or not,
    any case), a URI's ``user:password@`` (up to the last ``@``: a password may hold an
    unencoded one) and a URI's ``?password=`` (its name percent-encoded or not)."""

    def uri(m: re.Match[str]) -> str:
        scheme, rest = m.group(1), m.group(2)
        at = rest.rfind("@")
        if at >= 0:
            userinfo = rest[:at]
            user, sep, _ = userinfo.partition(":")
            rest = f"{user}{':***' if sep else ''}{rest[at:]}"
        base, q, query = rest.partition("?")
        if q:
            params = []
            for param in query.split("&"):
                key, eq, _ = param.partition("=")
                if eq and urllib.parse.unquote(key).strip().lower() == "password":
                    param = f"{key}=***"
                params.append(param)
            rest = base + "?" + "&".join(params)
        return scheme + rest

    out = _URI_RE.sub(uri, conninfo)
    return _KV_PASSWORD_RE.sub(r"\1***", out)


def shown(conninfo: str, *, parsed: bool = True) -> str:
    """``conninfo`` as errors and reprs show it: without its password (also where a
    malformed URI put a piece of it in another field); a key=value conninfo that does not
    parse is not shown at all (where its password ends is anyone's guess)."""
    if not parsed and _URI_RE.match(conninfo.lstrip()) is None:
        return "a key=value conninfo that does not parse, not shown"
    return scrub(_redact(conninfo), conninfo)


def _secrets(conninfo: str) -> set[str]:
    """Every text that may be the password of ``conninfo``, as written and as libpq decodes
    it (generous: a malformed conninfo has no one right answer)."""
    found: set[str] = set()
    try:
        from psycopg.conninfo import conninfo_to_dict

        password = conninfo_to_dict(conninfo).get("password")
        if password:
            found.add(str(password))
    except Exception:
        pass
    for m in _KV_PASSWORD_RE.finditer(conninfo):
        value = m.group(2)
        found.add(value)
        if value.startswith("'"):
            found.add(re.sub(r"\\(.)", r"\1", value.strip("'")))
        found.add(urllib.parse.unquote(value))
    for m in _URI_RE.finditer(conninfo):
        rest = m.group(2)
        at = rest.rfind("@")
        if at >= 0 and ":" in rest[:at]:
            value = rest[:at].partition(":")[2]
            found.update((value, urllib.parse.unquote(value)))
        for param in rest.partition("?")[2].split("&"):
            key, eq, value = param.partition("=")
            if eq and urllib.parse.unquote(key).strip().lower() == "password":
                found.update((value, urllib.parse.unquote(value)))
    return {s for s in found if s}


def scrub(text: str, conninfo: str, *, parsed: bool = True, extra: Iterable[str] = ()) -> str:
    """``text`` (an error message) without any password of ``conninfo``.

    Quoted parts (libpq quotes what it echoes) that hold a password, or a piece of one,
    become ``"***"``; a password of 4 or more characters goes wherever it appears; anything
    shaped like a conninfo loses its password. When ``conninfo`` does not even parse
    (``parsed=False``), every quoted part goes: libpq quotes pieces of it, and which of them
    belongs to the password is anyone's guess.
    """
    secrets = _secrets(conninfo) | {s for s in extra if s}

    def quoted(m: re.Match[str]) -> str:
        inner = m.group(1) if m.group(1) is not None else m.group(2)
        q = '"' if m.group(1) is not None else "'"
        if not parsed and q == '"' and inner not in _LIBPQ_TOKENS:
            return f"{q}...{q}"
        if inner and any(inner in s or s in inner for s in secrets):
            return f"{q}***{q}"
        return m.group(0)

    out = _QUOTED_RE.sub(quoted, text)
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= _MIN_FREE_SECRET:
            out = out.replace(secret, "***")
    return _redact(out)


def _connect_error(
    code: str,
    what: str,
    conninfo: str,
    exc: BaseException,
    *,
    parsed: bool,
    extra: Iterable[str] = (),
) -> SessionError:
    """``code``: ``what (conninfo): the first line of exc``, without the password, with a
    copy of ``exc`` of the same class and scrubbed text as its cause."""
    detail = scrub(_first(exc), conninfo, parsed=parsed, extra=extra)
    err = SessionError(code, f"{what} ({shown(conninfo, parsed=parsed)}): {detail}")
    cause: BaseException
    try:
        cause = type(exc)(scrub(str(exc), conninfo, parsed=parsed, extra=extra))
    except Exception:
        cause = RuntimeError(detail)
    err.__cause__ = cause
    return err


def check_conninfo(conninfo: str) -> None:
    """``invalid_argument`` for a conninfo libpq cannot parse (its message without any piece
    of the conninfo: libpq quotes a malformed one whole, password included)."""
    pg = psycopg_module()
    failed: SessionError | None = None
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(conninfo)
    except pg.Error as exc:
        failed = _connect_error(
            "invalid_argument", "invalid PostgreSQL conninfo", conninfo, exc, parsed=False
        )
    if failed is not None:
        raise failed


def check_shared(conn: psycopg.Connection[Any]) -> None:
    """``invalid_argument`` unless the user's connection ``conn`` commits each statement
    itself: autocommit on, and no transaction open on it. Each of our writes is its own
    transaction, committed before the call returns; on a connection with autocommit off
    it would run inside a transaction nobody commits (and be lost when it closes)."""
    if conn.closed:
        return  # psycopg says so (``io``) on first use
    if not conn.autocommit:
        raise SessionError(
            "invalid_argument",
            "the psycopg connection must be in autocommit mode "
            "(psycopg.connect(..., autocommit=True)): sessiontree commits each write itself, "
            "and with autocommit off a write would wait for a commit that never comes",
        )
    from psycopg.pq import TransactionStatus

    if conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
        raise SessionError(
            "invalid_argument",
            "the psycopg connection is inside a transaction: sessiontree commits each write "
            "itself, so use it outside any transaction block",
        )
