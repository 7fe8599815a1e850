"""Issue 28, PostgreSQL: what the storage accepts it can use, and what it refuses it refuses
up front, with the error code the API promises, on a real server.

- a user's connection must commit each statement itself (autocommit, no open transaction);
- every schema name ``check_schema`` accepts works (reserved words, 63 bytes, NOTIFY);
- a schema dropped under a process (a database reset or restored) is made again;
- no password reaches an error's text, its cause or context chain, a repr or the CLI;
- text PostgreSQL cannot hold (lone surrogates, NUL) is ``invalid_argument``/``invalid_id``
  as in a JSONL repository, never a bare ``UnicodeEncodeError`` or ``io``.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading
import traceback
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import sessiontree as st
from postgres.pgserver import PgServer
from sessiontree.postgres import PostgresSessionRepo, PostgresSessionStorage
from sessiontree.postgres._connect import channel, scrub
from sessiontree.postgres._schema import forget_migrations


def user(text: str = "hello") -> st.UserMessage:
    return st.UserMessage(text, timestamp=1_767_225_600_000)


def count_rows(server: PgServer, schema: str) -> tuple[int, int]:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        row = conn.execute(
            f'SELECT (SELECT count(*) FROM "{schema}".sessions), '
            f'(SELECT count(*) FROM "{schema}".entries)'
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def drop(server: PgServer, schema: str) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def full_text(err: BaseException) -> str:
    """Everything an error shows: message, repr, and the whole formatted chain (causes and
    contexts, with their reprs)."""
    parts = [str(err), repr(err), "".join(traceback.format_exception(err))]
    seen: set[int] = set()
    todo: list[BaseException | None] = [err]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        parts += [str(e), repr(e), repr(e.args)]
        todo += [e.__cause__, e.__context__]
    return "\n".join(parts)


# --------------------------------------------------------------------------- 1. connections


def test_a_connection_with_autocommit_off_is_refused(pg_server: PgServer, pg_schema: str) -> None:
    # Before: appends returned, close() succeeded, and the server held nothing.
    PostgresSessionRepo(pg_server.dsn, schema=pg_schema).close()
    with psycopg.connect(pg_server.dsn) as conn:
        assert not conn.autocommit
        with pytest.raises(st.SessionError) as err:
            PostgresSessionRepo(conn, schema=pg_schema)
        assert err.value.code == "invalid_argument" and "autocommit" in err.value.message
        with pytest.raises(st.SessionError) as err:
            PostgresSessionStorage.create(conn, schema=pg_schema)
        assert err.value.code == "invalid_argument"
        with pytest.raises(st.SessionError) as err:
            PostgresSessionStorage.open(conn, "some-id", schema=pg_schema)
        assert err.value.code == "invalid_argument"
    assert count_rows(pg_server, pg_schema) == (0, 0)


def test_an_autocommit_connection_keeps_every_acknowledged_append(
    pg_server: PgServer, pg_schema: str
) -> None:
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        repo = PostgresSessionRepo(conn, schema=pg_schema)
        with repo.create(cwd="/w") as s:
            s.append_message(user("one"))
            s.append_message(user("two"))
        repo.close()
    assert count_rows(pg_server, pg_schema) == (1, 2)


def test_live_readers_over_a_users_connection(pg_server: PgServer, pg_schema: str) -> None:
    # Before: wait_for_entries failed with a bare AssertionError (no conninfo to open its
    # listening connection from); it opens one like the user's.
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        repo = PostgresSessionRepo(conn, schema=pg_schema)
        with repo.create(cwd="/w") as w:
            reader = repo.open_readonly(w.id)
            assert reader.storage.wait_for_entries(timeout=0.05) == 0  # type: ignore[attr-defined]
            t = threading.Timer(0.2, lambda: w.append_message(user("one")))
            t.start()
            try:
                got = reader.storage.wait_for_entries(timeout=30)  # type: ignore[attr-defined]
            finally:
                t.join()
            assert got == 1
            reader.close()
        assert not conn.closed


@pytest.fixture
def password_role(pg_server: PgServer) -> Iterator[tuple[str, str]]:
    """A role that logs in with a password (the test cluster's pg_hba asks every role but
    ``sessiontree`` for one), without CREATE on the database."""
    name, password = "st_pw_" + uuid.uuid4().hex[:10], "pw-" + uuid.uuid4().hex
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
    yield name, password
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(f"DROP OWNED BY {name}")
        admin.execute(f"DROP ROLE {name}")


def test_a_role_without_create_uses_a_schema_made_for_it(
    pg_server: PgServer, pg_schema: str, password_role: tuple[str, str]
) -> None:
    # Before: every new process ran CREATE SCHEMA IF NOT EXISTS, which PostgreSQL checks
    # against CREATE on the database even when the schema exists; and the listener of a
    # user's connection could not be opened (no conninfo; the password only in info).
    PostgresSessionRepo(pg_server.dsn, schema=pg_schema).close()
    role, password = password_role
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(f"GRANT USAGE ON SCHEMA {pg_schema} TO {role}")
        admin.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {pg_schema} TO {role}"
        )
        admin.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {pg_schema} TO {role}")
    d = psycopg.conninfo.conninfo_to_dict(pg_server.dsn)
    dsn = f"host={d['host']} port={d['port']} dbname={d['dbname']} user={role}"
    with psycopg.connect(dsn, password=password, autocommit=True) as conn:
        forget_migrations()  # as in a new process
        repo = PostgresSessionRepo(conn, schema=pg_schema)
        with repo.create(cwd="/w") as w:
            reader = repo.open_readonly(w.id)
            t = threading.Timer(0.2, lambda: w.append_message(user("one")))
            t.start()
            try:
                got = reader.storage.wait_for_entries(timeout=30)  # type: ignore[attr-defined]
            finally:
                t.join()
            assert got == 1
            reader.close()
    assert count_rows(pg_server, pg_schema) == (1, 1)


def test_a_connection_that_stops_committing_is_refused_before_the_append(
    pg_server: PgServer, pg_schema: str
) -> None:
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        repo = PostgresSessionRepo(conn, schema=pg_schema)
        s = repo.create(cwd="/w")
        s.append_message(user("kept"))
        # A transaction block opened by the user: a write inside it is not committed by us.
        with conn.transaction():
            with pytest.raises(st.SessionError) as err:
                s.append_message(user("inside a transaction"))
            assert err.value.code == "invalid_argument" and "transaction" in err.value.message
            with pytest.raises(st.SessionError) as err:
                repo.create(cwd="/w")
            assert err.value.code == "invalid_argument"
        conn.autocommit = False
        with pytest.raises(st.SessionError) as err:
            s.append_message(user("autocommit off"))
        assert err.value.code == "invalid_argument" and "autocommit" in err.value.message
        with pytest.raises(st.SessionError) as err:
            repo.list()
        assert err.value.code == "invalid_argument"
        # Nothing refused was taken: the handle holds what the server holds, and goes on.
        assert len(s) == 1
        conn.autocommit = True
        s.append_message(user("after"))
        sid = s.id
        s.close()
        with repo.open_readonly(sid) as r:
            got = [e.message.content for e in r.storage.get_entries()]  # type: ignore[attr-defined]
        assert got == ["kept", "after"]
    assert count_rows(pg_server, pg_schema) == (1, 2)


def test_buffered_appends_are_not_sent_over_a_connection_that_stopped_committing(
    pg_server: PgServer, pg_schema: str
) -> None:
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        storage = PostgresSessionStorage.create(conn, schema=pg_schema, durability="none")
        st.Session(storage).append_message(user("buffered"))
        conn.autocommit = False
        with pytest.raises(st.SessionError) as err:
            storage.flush()
        assert err.value.code == "invalid_argument"
        conn.autocommit = True
        # The handle is unusable (it holds an entry the server does not), and says so.
        with pytest.raises(st.SessionError) as err:
            storage.flush()
        assert err.value.code == "invalid_argument"
        storage.close()
    assert count_rows(pg_server, pg_schema) == (1, 0)


def test_a_pool_with_autocommit_off_commits_its_short_operations(
    pg_server: PgServer, pg_schema: str
) -> None:
    from psycopg_pool import ConnectionPool

    with ConnectionPool(pg_server.dsn, min_size=1, max_size=2, open=True) as pool:
        repo = PostgresSessionRepo(pool, schema=pg_schema)
        with repo.create(cwd="/w") as s:
            s.append_message(user())
            sid = s.id
        assert [m.id for m in repo.list()] == [sid]
        repo.delete(sid)
        assert repo.list() == []
    assert count_rows(pg_server, pg_schema) == (0, 0)


# --------------------------------------------------------------------------- 2. schema names


@pytest.fixture
def odd_schema(pg_server: PgServer, request: pytest.FixtureRequest) -> Iterator[str]:
    name = request.param
    drop(pg_server, name)
    yield name
    drop(pg_server, name)


def _long_name(n: int) -> str:
    return ("t_" + uuid.uuid4().hex + "x" * 63)[:n]


@pytest.mark.parametrize(
    "odd_schema",
    ["user", "select", "order", "table", _long_name(52), _long_name(63)],
    indirect=True,
)
def test_every_accepted_schema_name_works(pg_server: PgServer, odd_schema: str) -> None:
    # Before: reserved words failed with io "syntax error"; 52+ characters failed every
    # append with io "may or may not be on the server" (the NOTIFY channel's 63 bytes).
    assert len(channel(odd_schema).encode()) <= 63
    with PostgresSessionRepo(pg_server.dsn, schema=odd_schema) as repo:
        with repo.create(cwd="/w", name="n") as s:
            sid = s.id
            reader = repo.open_readonly(sid)
            t = threading.Timer(0.2, lambda: s.append_message(user("one")))
            t.start()
            try:
                got = reader.storage.wait_for_entries(timeout=30)  # type: ignore[attr-defined]
            finally:
                t.join()
            assert got == 1
            reader.close()
        assert [m.id for m in repo.list(cwd="/w")] == [sid]
        forked = repo.fork(sid)
        fid = forked.id
        forked.close()
        assert sid in repo
        repo.delete(fid)
        with repo.open(sid) as again:
            assert len(again) == 2
    assert count_rows(pg_server, odd_schema) == (1, 2)


def test_long_schema_names_get_distinct_channels() -> None:
    a, b = "a" * 60 + "xyz", "a" * 60 + "xyw"
    assert channel(a) != channel(b)
    assert channel("sessiontree") == "sessiontree_sessiontree"  # unchanged for short names
    assert len(channel(a)) == 63


@pytest.mark.parametrize(
    "schema", ["pg_sessions", "pg_catalog", "pg_temp", "information_schema", "Sel", "x" * 64]
)
def test_schema_names_that_cannot_work_are_refused_up_front(schema: str) -> None:
    # No server needed: refused before connecting (the conninfo points nowhere).
    with pytest.raises(st.SessionError) as err:
        PostgresSessionRepo("host=127.0.0.1 port=1 connect_timeout=1", schema=schema)
    assert err.value.code == "invalid_argument"
    with pytest.raises(st.SessionError) as err:
        PostgresSessionStorage.create("host=127.0.0.1 port=1", schema=schema)
    assert err.value.code == "invalid_argument"


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "SESSIONTREE_REPO"}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "sessiontree", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
    )


def uri(server: PgServer, password: str | None = None) -> str:
    d = psycopg.conninfo.conninfo_to_dict(server.dsn)
    cred = d["user"] if password is None else f"{d['user']}:{password}"
    return f"postgresql://{cred}@{d['host']}:{d['port']}/{d['dbname']}"


@pytest.mark.parametrize("odd_schema", ["user"], indirect=True)
def test_cli_schema_from_the_environment(pg_server: PgServer, odd_schema: str) -> None:
    bad = cli("ls", "--repo", uri(pg_server), env={"SESSIONTREE_PG_SCHEMA": "pg_x"})
    assert bad.returncode == 2, bad.stderr
    assert "SESSIONTREE_PG_SCHEMA" in bad.stderr and "invalid_argument" in bad.stderr
    ok = cli("ls", "--json", "--repo", uri(pg_server), env={"SESSIONTREE_PG_SCHEMA": odd_schema})
    assert ok.returncode == 0, ok.stderr


# --------------------------------------------------------------------------- 3. a reset database


def test_a_dropped_schema_is_made_again(pg_server: PgServer, pg_schema: str) -> None:
    # Before: a new repo built fine but every create() failed with io "relation does not
    # exist" until the process restarted (a process-wide "already migrated" memo).
    repo = PostgresSessionRepo(pg_server.dsn, schema=pg_schema)
    with repo.create(cwd="/w") as s:
        s.append_message(user())
    drop(pg_server, pg_schema)
    with PostgresSessionRepo(pg_server.dsn, schema=pg_schema) as fresh:
        with fresh.create(cwd="/w") as s:
            s.append_message(user())
        assert len(fresh.list()) == 1
    # The existing repo recovers too, on every kind of call.
    for call in (
        lambda: repo.list(),
        lambda: "x" in repo,
        lambda: repo.delete("nope"),
        lambda: repo.open("nope"),
        lambda: repo.open_readonly("nope"),
        lambda: repo.create(cwd="/w").close(),
        lambda: PostgresSessionStorage.create(pg_server.dsn, schema=pg_schema).close(),
        lambda: PostgresSessionStorage.open(pg_server.dsn, "nope", schema=pg_schema),
    ):
        drop(pg_server, pg_schema)
        try:
            call()
        except st.SessionError as exc:
            assert exc.code == "not_found", exc
    drop(pg_server, pg_schema)
    doc = (
        b'{"type":"session","version":3,"id":"imported-1",'
        b'"timestamp":"2026-01-01T00:00:00Z","cwd":"/w"}\n'
    )
    with repo.import_jsonl(doc) as imported:
        imported.append_message(user())
    assert [m.id for m in repo.list()] == ["imported-1"]
    repo.close()


def test_an_open_writer_whose_tables_vanished_says_so(pg_server: PgServer, pg_schema: str) -> None:
    repo = PostgresSessionRepo(pg_server.dsn, schema=pg_schema, durability="flush")
    w = repo.create(cwd="/w")
    w.append_message(user("one"))
    reader = repo.open_readonly(w.id)
    drop(pg_server, pg_schema)
    with pytest.raises(st.SessionError) as err:
        w.append_message(user("two"))
    assert err.value.code == "modified_externally"
    assert "nothing was written" in err.value.message and "reset" in err.value.message
    with pytest.raises(st.SessionError) as err:
        reader.storage.refresh()  # type: ignore[attr-defined]
    assert err.value.code == "modified_externally"
    w.close()
    reader.close()
    # And the repo goes on: the next create makes the tables again.
    with repo.create(cwd="/w") as s:
        s.append_message(user())
    assert count_rows(pg_server, pg_schema) == (1, 1)
    repo.close()


# --------------------------------------------------------------------------- 4. passwords

SECRET = "Zq9Sekr1t"


def _expect_no_secret(fn: Callable[[], Any], *secrets: str) -> st.SessionError:
    with pytest.raises(st.SessionError) as info:
        fn()
    text = full_text(info.value)
    for secret in secrets:
        assert secret not in text, text
    return info.value


@pytest.mark.parametrize(
    "conninfo, secrets",
    [
        # Malformed URIs libpq quotes back whole.
        (f"postgresql://agent:{SECRET}@[::1/db", [SECRET]),
        ("postgresql://agent:Zq%39Sekr1t@[::1/db", ["Zq%39Sekr1t", SECRET]),
        (f"postgres://agent:{SECRET}@host/db?sslmode=bogus&x=[", [SECRET]),
        (f"postgresql://host/db?password={SECRET}&port=bad", [SECRET]),
        (f"postgresql://host/db?pass%77ord={SECRET}&port=bad", [SECRET]),
        # An unencoded '/' splits the password into a host and a port.
        ("postgresql://agent:Zq9/Sekr1t@127.0.0.1/db", ["Zq9", "Sekr1t"]),
        # key=value, well-formed and not.
        (f"host=127.0.0.1 port=1 user=x password={SECRET} connect_timeout=5", [SECRET]),
        (f"host=127.0.0.1 port=1 password='{SECRET} two' connect_timeout=5", [SECRET, "two"]),
        (f"host=127.0.0.1 password={SECRET} Qx7two user=x", [SECRET, "Qx7two"]),
        (f"host=127.0.0.1 password='{SECRET}", [SECRET]),
        (f"host=127.0.0.1 PASSWORD={SECRET}", [SECRET]),
        (f"host=127.0.0.1 port=x{SECRET} password={SECRET}", [SECRET]),
    ],
)
def test_no_password_in_errors(conninfo: str, secrets: list[str]) -> None:
    err = _expect_no_secret(lambda: PostgresSessionRepo(conninfo), *secrets)
    assert err.code in ("invalid_argument", "io")
    _expect_no_secret(lambda: PostgresSessionStorage.create(conninfo), *secrets)
    _expect_no_secret(lambda: PostgresSessionStorage.open(conninfo, "s1"), *secrets)


def test_a_malformed_conninfo_is_invalid_argument_without_the_password() -> None:
    with pytest.raises(st.SessionError) as err:
        PostgresSessionRepo(f"postgresql://agent:{SECRET}@[::1/db")
    assert err.value.code == "invalid_argument"
    assert "postgresql://agent:***@[::1/db" in err.value.message
    assert 'matching "]" in IPv6 host address' in err.value.message
    # The cause is a scrubbed copy of psycopg's error; no context carries the original.
    assert isinstance(err.value.__cause__, psycopg.ProgrammingError)
    assert err.value.__context__ is None or SECRET not in full_text(err.value.__context__)


def test_no_password_in_reprs_and_a_wrong_password_error(
    pg_server: PgServer, pg_schema: str
) -> None:
    d = psycopg.conninfo.conninfo_to_dict(pg_server.dsn)
    for target in (f"{pg_server.dsn} password={SECRET}", uri(pg_server, SECRET)):
        with PostgresSessionRepo(target, schema=pg_schema) as repo:
            assert SECRET not in repr(repo)
            with repo.create() as s:
                assert SECRET not in repr(s.storage)
    # A role that needs a password, and the wrong one: the server refuses, we say so.
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS sessiontree_pw2")
        admin.execute("CREATE ROLE sessiontree_pw2 LOGIN PASSWORD 'right-one'")
    try:
        wrong = f"postgresql://sessiontree_pw2:{SECRET}@{d['host']}:{d['port']}/{d['dbname']}"
        err = _expect_no_secret(lambda: PostgresSessionRepo(wrong), SECRET)
        assert err.code == "io"
    finally:
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            admin.execute("DROP ROLE IF EXISTS sessiontree_pw2")


def test_no_password_from_a_pool() -> None:
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(f"postgresql://agent:{SECRET}@127.0.0.1:1/db", open=False)
    repo_err = _expect_no_secret(lambda: PostgresSessionRepo(pool), SECRET)
    assert repo_err.code == "io"


def test_cli_never_prints_the_password() -> None:
    for target in (
        f"postgresql://agent:{SECRET}@[::1/db",
        f"postgresql://agent:{SECRET}@127.0.0.1:1/db?connect_timeout=5",
    ):
        for args in (["ls", "--repo", target], ["ls", "--json", "--repo", target]):
            out = cli(*args, env={})
            assert out.returncode != 0
            assert SECRET not in out.stdout + out.stderr, out.stderr


def test_scrub_keeps_what_is_not_secret() -> None:
    msg = 'connection to server at "127.0.0.1", port 1 failed: Connection refused'
    assert scrub(msg, f"host=127.0.0.1 port=1 password={SECRET}") == msg
    got = scrub(f'bad value "{SECRET}" in "x={SECRET}"', f"password={SECRET}")
    assert SECRET not in got


# --------------------------------------------------------------------------- 5. text PG cannot hold


@pytest.fixture
def both(
    pg_server: PgServer, pg_schema: str, tmp_path: pathlib.Path
) -> Iterator[tuple[st.SessionRepo, st.SessionRepo]]:
    pg = PostgresSessionRepo(pg_server.dsn, schema=pg_schema)
    jl = st.JsonlSessionRepo(tmp_path / "repo")
    yield pg, jl
    pg.close()


LONE = "\ud800"


@pytest.mark.parametrize(
    "call",
    [
        "open",
        "delete",
        "fork_entry",
        "fork_source",
        "list_cwd",
        "create_id",
        "create_cwd",
        "create_name",
        "create_parent",
        "contains",
    ],
)
@pytest.mark.parametrize("bad", [LONE, "a\x00b"])
def test_bad_text_is_refused_as_jsonl_refuses_it(
    both: tuple[st.SessionRepo, st.SessionRepo], call: str, bad: str
) -> None:
    outcomes = []
    for repo in both:
        with repo.create(cwd="/w") as s:
            s.append_message(user())
            sid = s.id
        calls: dict[str, Callable[[], Any]] = {
            "open": lambda r=repo: r.open(bad),
            "delete": lambda r=repo: r.delete(bad),
            "fork_entry": lambda r=repo, sid=sid: r.fork(sid, entry_id=bad),
            "fork_source": lambda r=repo: r.fork(bad),
            "list_cwd": lambda r=repo: [m.id for m in r.list(cwd=bad)],
            "create_id": lambda r=repo: r.create(session_id=bad),
            "create_cwd": lambda r=repo: r.create(cwd=bad),
            "create_name": lambda r=repo: r.create(name=bad),
            "create_parent": lambda r=repo: r.create(parent_session=bad),
            "contains": lambda r=repo: bad in r,
        }
        try:
            got = calls[call]()
        except st.SessionError as exc:
            outcomes.append(("error", exc.code))
        else:
            if isinstance(got, st.Session):
                got.close()
                got = "session"
            outcomes.append(("ok", got))
    pg, jl = outcomes
    assert pg == jl, (pg, jl)
    if pg[0] == "error":
        assert pg[1] in ("invalid_argument", "invalid_id", "not_found"), pg


@pytest.mark.parametrize("bad", [LONE, "a\x00b", "x" + LONE])
@pytest.mark.parametrize("readonly", [False, True])
def test_storage_open_refuses_bad_text(
    pg_server: PgServer, pg_schema: str, bad: str, readonly: bool
) -> None:
    # Before: a bare UnicodeEncodeError (surrogates) or io (NUL).
    with pytest.raises(st.SessionError) as err:
        PostgresSessionStorage.open(pg_server.dsn, bad, schema=pg_schema, readonly=readonly)
    assert err.value.code == "invalid_argument"


def test_storage_create_refuses_a_nul_in_the_header_id(pg_server: PgServer, pg_schema: str) -> None:
    header = st.SessionHeader(id="a\x00b", cwd="/", timestamp="2026-01-01T00:00:00Z")
    with pytest.raises(st.SessionError) as err:
        PostgresSessionStorage.create(pg_server.dsn, header, schema=pg_schema)
    assert err.value.code == "invalid_argument"


# --------------------------------------------------------------------------- 6. fetch batches


@pytest.mark.parametrize("rows_cap, bytes_cap", [(3, 1 << 30), (1 << 20, 700), (4, 1)])
def test_opens_read_in_batches_bounded_by_rows_and_bytes(
    pg_server: PgServer,
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    rows_cap: int,
    bytes_cap: int,
) -> None:
    import sessiontree.postgres.storage as pgs

    # Small caps stand in for the real ones (8,192 rows, 64 MiB: a batch of 1 GB is a
    # value PostgreSQL cannot build); the server and the rows are real.
    monkeypatch.setattr(pgs, "FETCH_ROWS", rows_cap)
    monkeypatch.setattr(pgs, "FETCH_BYTES", bytes_cap)
    batches: list[list[bytes]] = []
    fetch = pgs._fetch_lines

    def spy(*args: Any) -> list[bytes]:
        got = fetch(*args)
        batches.append(got)
        return got

    monkeypatch.setattr(pgs, "_fetch_lines", spy)
    sizes = [10, 2000, 5, 900, 1, 1, 3000, 50, 50, 50, 4000, 7]
    with PostgresSessionRepo(pg_server.dsn, schema=pg_schema) as repo:
        with repo.create(cwd="/w") as w:
            reader = repo.open_readonly(w.id)
            for n in sizes[:6]:
                w.append_message(user("x" * n))
            written = w.storage.to_jsonl()  # type: ignore[attr-defined]
            assert reader.storage.refresh() == 6  # type: ignore[attr-defined]
            for n in sizes[6:]:
                w.append_message(user("y" * n))
            assert reader.storage.refresh() == len(sizes) - 6  # type: ignore[attr-defined]
            written = w.storage.to_jsonl()  # type: ignore[attr-defined]
            assert reader.storage.to_jsonl() == written  # type: ignore[attr-defined]
            reader.close()
            sid = w.id
        assert repo.export_jsonl(sid) == written
        with repo.open(sid) as again:
            assert again.storage.to_jsonl() == written  # type: ignore[attr-defined]
            assert [len(e.message.content) for e in again.storage.get_entries()] == sizes  # type: ignore[attr-defined]
    # Every batch kept to its caps: at most rows_cap lines, and past its first line at
    # most bytes_cap bytes (newlines counted).
    assert batches and max(len(b) for b in batches) > 1
    for chunk in (c for b in batches for c in b):
        lines = chunk.split(b"\n")
        assert len(lines) <= rows_cap
        assert len(chunk) - len(lines[-1]) <= bytes_cap
