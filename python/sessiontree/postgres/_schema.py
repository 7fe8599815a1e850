"""The tables, as versioned migrations run under an advisory lock.

Version 1:

- ``<schema>.schema_version(version)``: one row, the version the schema is at.
- ``<schema>.sessions``: one row a session, its header line's exact bytes and what
  ``list`` shows (cwd, name, counts, first message, modified), kept current in the same
  transaction as every append; ``next_seq`` is the sequence number of the next entry.
- ``<schema>.entries``: one row an entry, its exact JSONL line (no newline) plus the
  columns needed to find it: session, sequence number (0, 1, ... in file order), entry id
  and type. The primary key (session, seq) is what makes a writer that lost its lock fail
  with ``modified_externally`` instead of writing a second branch.
- ``<schema>.append_rows(...)``: appends a batch of lines and updates the session row, or
  raises SQLSTATE ``STMOD`` if the session is not at the expected sequence number.

Version 2 (search):

- ``entries.search``: the entry's search tokens (``sessiontree.search``'s tokeniser, the
  one the file backends use) as a ``tsvector`` of lexemes taken verbatim
  (``array_to_tsvector``), written with the row; NULL when not known (rows written before
  version 2, or too large for a ``tsvector``), and such rows are always candidates.
  A GIN index on it, and a partial index on the NULL rows, so a search never scans the
  table; ``append_rows`` takes each line's tokens (``p_search``).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Final

from ..errors import SessionError
from ._connect import ident, raise_pg

if TYPE_CHECKING:
    import psycopg

__all__ = ["SCHEMA_VERSION", "is_missing", "migrate", "recover"]

# Each migration takes the schema from version i to i + 1; ``{s}`` is the schema name,
# quoted (checked by ``check_schema``: a plain lowercase identifier).
_MIGRATIONS: Final[tuple[str, ...]] = (
    """
    CREATE TABLE {s}.sessions (
        id text PRIMARY KEY,
        header bytea NOT NULL,
        cwd text NOT NULL,
        cwd_key text NOT NULL,
        name text,
        parent_session text,
        created timestamptz,
        modified timestamptz,
        entry_count integer NOT NULL DEFAULT 0,
        message_count integer NOT NULL DEFAULT 0,
        first_message text,
        size_bytes bigint NOT NULL,
        next_seq bigint NOT NULL DEFAULT 0,
        dialect text NOT NULL DEFAULT 'sessiontree'
    );
    CREATE INDEX sessions_by_cwd ON {s}.sessions
        (cwd_key, modified DESC NULLS LAST, created DESC NULLS LAST, (id COLLATE "C") DESC);
    CREATE INDEX sessions_by_modified ON {s}.sessions
        (modified DESC NULLS LAST, created DESC NULLS LAST, (id COLLATE "C") DESC);
    CREATE TABLE {s}.entries (
        session_id text NOT NULL REFERENCES {s}.sessions (id) ON DELETE CASCADE,
        seq bigint NOT NULL,
        entry_id text,
        type text,
        line bytea NOT NULL
            CHECK (length(line) > 0 AND position('\\x0a'::bytea IN line) = 0),
        PRIMARY KEY (session_id, seq)
    );
    CREATE FUNCTION {s}.append_rows(
        p_session text, p_seq bigint, p_ids text[], p_types text[], p_lines bytea[],
        p_name text, p_modified timestamptz, p_entry_count integer,
        p_message_count integer, p_first_message text, p_size bigint, p_notify text
    ) RETURNS void LANGUAGE plpgsql AS $fn$
    BEGIN
        UPDATE {s}.sessions SET
            next_seq = p_seq + cardinality(p_lines), name = p_name, modified = p_modified,
            entry_count = p_entry_count, message_count = p_message_count,
            first_message = p_first_message, size_bytes = p_size
        WHERE id = p_session AND next_seq = p_seq;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'session % is not at sequence number % (another writer, or deleted)',
                p_session, p_seq USING ERRCODE = 'STMOD';
        END IF;
        INSERT INTO {s}.entries (session_id, seq, entry_id, type, line)
        SELECT p_session, p_seq + u.o - 1, u.i, u.t, u.l
        FROM unnest(p_ids, p_types, p_lines) WITH ORDINALITY AS u (i, t, l, o);
        IF p_notify IS NOT NULL THEN
            PERFORM pg_notify(p_notify, p_session);
        END IF;
    END
    $fn$;
    """,
    """
    CREATE FUNCTION {s}.search_vector(p_tokens text) RETURNS tsvector
        LANGUAGE sql IMMUTABLE AS
        $fn$ SELECT CASE WHEN p_tokens IS NULL THEN NULL
            ELSE array_to_tsvector(string_to_array(p_tokens, ' ')) END $fn$;
    ALTER TABLE {s}.entries ADD COLUMN search tsvector;
    CREATE INDEX entries_search ON {s}.entries USING gin (search);
    CREATE INDEX entries_search_unknown ON {s}.entries (session_id, seq) WHERE search IS NULL;
    DROP FUNCTION {s}.append_rows(text, bigint, text[], text[], bytea[], text, timestamptz,
        integer, integer, text, bigint, text);
    CREATE FUNCTION {s}.append_rows(
        p_session text, p_seq bigint, p_ids text[], p_types text[], p_lines bytea[],
        p_name text, p_modified timestamptz, p_entry_count integer,
        p_message_count integer, p_first_message text, p_size bigint, p_notify text,
        p_search text[]
    ) RETURNS void LANGUAGE plpgsql AS $fn$
    BEGIN
        UPDATE {s}.sessions SET
            next_seq = p_seq + cardinality(p_lines), name = p_name, modified = p_modified,
            entry_count = p_entry_count, message_count = p_message_count,
            first_message = p_first_message, size_bytes = p_size
        WHERE id = p_session AND next_seq = p_seq;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'session % is not at sequence number % (another writer, or deleted)',
                p_session, p_seq USING ERRCODE = 'STMOD';
        END IF;
        INSERT INTO {s}.entries (session_id, seq, entry_id, type, line, search)
        SELECT p_session, p_seq + u.o - 1, u.i, u.t, u.l,
            {s}.search_vector(u.x)
        FROM unnest(p_ids, p_types, p_lines, p_search) WITH ORDINALITY AS u (i, t, l, x, o);
        IF p_notify IS NOT NULL THEN
            PERFORM pg_notify(p_notify, p_session);
        END IF;
    END
    $fn$;
    """,
)

SCHEMA_VERSION: Final = len(_MIGRATIONS)
"""The schema version this sessiontree writes (and the newest it reads)."""

# (server identity, schema) pairs this process found migrated: a writer's open checks
# each once. A repository checks again when it is made, and every operation that finds
# the tables gone (a database reset or restored) forgets its pair and migrates again.
_DONE: set[tuple[str, str]] = set()
_DONE_LOCK = threading.Lock()

# SQLSTATEs of a schema whose objects are gone: undefined_table, invalid_schema_name,
# undefined_function (append_rows).
MISSING_SQLSTATES: Final = ("42P01", "3F000", "42883")


def is_missing(exc: BaseException) -> bool:
    """True for the error of a statement naming a table, schema or function that is gone."""
    return getattr(exc, "sqlstate", None) in MISSING_SQLSTATES


def _ident(conn: psycopg.Connection[Any], schema: str) -> tuple[str, str]:
    return (f"{conn.info.host}:{conn.info.port}/{conn.info.dbname}", schema)


def migrate(conn: psycopg.Connection[Any], schema: str, *, recheck: bool = False) -> None:
    """Brings ``schema`` to :data:`SCHEMA_VERSION` (creating it), under a transaction-level
    advisory lock so two workers starting at once run each migration exactly once.

    A schema found current is remembered for the process; ``recheck`` asks the server
    again (a schema dropped since is created again).

    Raises:
        SessionError: ``corrupt`` if the schema is at a newer version than this sessiontree
            knows; ``io`` for a server error (permissions, connection).
    """
    psycopg = _psycopg()
    key = _ident(conn, schema)
    with _DONE_LOCK:
        if recheck:
            _DONE.discard(key)
        elif key in _DONE:
            return
    s = ident(schema)
    try:
        if not _is_current(conn, schema):
            with conn.transaction():
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (f"sessiontree-migrate:{schema}",),
                )
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
                conn.execute(f"CREATE TABLE IF NOT EXISTS {s}.schema_version (version integer)")
                row = conn.execute(f"SELECT max(version) FROM {s}.schema_version").fetchone()
                version = 0 if row is None or row[0] is None else int(row[0])
                if version > SCHEMA_VERSION:
                    raise SessionError(
                        "corrupt",
                        f"schema {schema!r} is at version {version}, newer than this "
                        f"sessiontree knows (up to {SCHEMA_VERSION}): upgrade sessiontree",
                    )
                for step in _MIGRATIONS[version:]:
                    conn.execute(step.format(s=s))
                if version == 0:
                    _prefer_lz4(conn, schema)
                if version < SCHEMA_VERSION:
                    conn.execute(f"DELETE FROM {s}.schema_version")
                    conn.execute(f"INSERT INTO {s}.schema_version VALUES (%s)", (SCHEMA_VERSION,))
    except psycopg.Error as exc:
        raise_pg(f"migrating schema {schema!r}", exc)
    with _DONE_LOCK:
        _DONE.add(key)


def _is_current(conn: psycopg.Connection[Any], schema: str) -> bool:
    """True if ``schema`` has its tables and function at :data:`SCHEMA_VERSION`: read
    only, so a role without CREATE on the database can use a schema made for it."""
    s = ident(schema)
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL "
        "AND to_regclass(%s) IS NOT NULL AND to_regproc(%s) IS NOT NULL",
        (f"{s}.schema_version", f"{s}.sessions", f"{s}.entries", f"{s}.append_rows"),
    ).fetchone()
    if not (row and row[0]):
        return False
    row = conn.execute(f"SELECT max(version) FROM {s}.schema_version").fetchone()
    return row is not None and row[0] == SCHEMA_VERSION


def recover(conn: psycopg.Connection[Any], schema: str) -> None:
    """After a statement found the schema's objects gone (``is_missing``): ends the failed
    transaction of a non-autocommit (pooled) connection and migrates again, so the
    statement can be retried on a freshly made schema."""
    from psycopg.pq import TransactionStatus

    if conn.info.transaction_status == TransactionStatus.INERROR:
        conn.rollback()
    migrate(conn, schema, recheck=True)


def _prefer_lz4(conn: psycopg.Connection[Any], schema: str) -> None:
    """Lines are TOASTed with lz4 where the server has it (PostgreSQL 14+ built with lz4):
    it decompresses several times faster than the default pglz, and opening a session
    reads every line. Without it the default stays (a savepoint keeps the migration)."""
    psycopg = _psycopg()
    try:
        with conn.transaction():
            conn.execute(
                f"ALTER TABLE {ident(schema)}.entries ALTER COLUMN line SET COMPRESSION lz4"
            )
    except psycopg.Error:
        pass


def forget_migrations() -> None:
    """Makes the next :func:`migrate` of every schema check the server again."""
    with _DONE_LOCK:
        _DONE.clear()


def _psycopg() -> Any:
    from ._connect import psycopg_module

    return psycopg_module()
