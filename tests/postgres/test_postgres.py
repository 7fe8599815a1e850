"""PostgreSQL-only behaviour, on a real server (the shared suites run over it through the
``backend`` and ``repo`` fixtures): rows keep the bytes, the writer lock across processes,
the sequence check, faults (SIGKILL, terminated connections, a server restart), racing
writers, migrations, live readers and bad input.

``SESSIONTREE_PG_CRASH_RUNS`` (default 24) sets how many writers are SIGKILLed.
"""

from __future__ import annotations

import os
import pathlib
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import sessiontree as st
from postgres.pgserver import PgServer
from sessiontree.postgres import SCHEMA_VERSION, PostgresSessionRepo, PostgresSessionStorage
from sessiontree.postgres._schema import forget_migrations

WRITER = pathlib.Path(__file__).with_name("pg_writer.py")
CRASH_RUNS = int(os.environ.get("SESSIONTREE_PG_CRASH_RUNS", "24"))


def user(text: str = "hello") -> st.UserMessage:
    return st.UserMessage(text, timestamp=1_767_225_600_000)


@pytest.fixture
def repo(pg_server: PgServer, pg_schema: str) -> Iterator[PostgresSessionRepo]:
    with PostgresSessionRepo(pg_server.dsn, schema=pg_schema, durability="flush") as r:
        yield r


def rows(server: PgServer, schema: str, sid: str) -> list[tuple[int, str | None, bytes]]:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        return [
            (int(s), e, bytes(line))
            for s, e, line in conn.execute(
                f"SELECT seq, entry_id, line FROM {schema}.entries WHERE session_id = %s "
                "ORDER BY seq",
                (sid,),
            )
        ]


def spawn(server: PgServer, schema: str, sid: str, durability: str, count: int) -> Any:
    return subprocess.Popen(
        [sys.executable, str(WRITER), server.dsn, schema, sid, durability, str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )


def read_until(proc: Any, word: str) -> list[str]:
    got = []
    assert proc.stdout is not None
    for line in proc.stdout:
        got.append(line.strip())
        if line.startswith(word):
            break
    return got


# --------------------------------------------------------------------------- bytes


def test_rows_keep_the_bytes_both_ways(
    repo: PostgresSessionRepo, pg_server: PgServer, tmp_path: pathlib.Path
) -> None:
    path = tmp_path / "s.jsonl"
    with st.JsonlSessionStorage.create(path, durability="flush") as f:
        s = st.Session(f)
        s.append_message(user('quotes " backslashes \\ tabs \t unicode é \u2028 end'))
        s.append_message(
            st.AssistantMessage([st.TextContent("hi")], "openai", "gpt-4", timestamp=1)
        )
        s.append_label(s.get_leaf_id(), "mark")  # type: ignore[arg-type]
    data = path.read_bytes()
    with repo.import_jsonl(data) as imported:
        sid = imported.id
        assert len(imported.storage) == 3
    assert repo.export_jsonl(sid) == data
    lines = data.split(b"\n")
    assert [r[2] for r in rows(pg_server, repo.schema, sid)] == lines[1:-1]
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        (header,) = conn.execute(
            f"SELECT header FROM {repo.schema}.sessions WHERE id = %s", (sid,)
        ).fetchone()  # type: ignore[misc]
    assert bytes(header) == lines[0]
    # And back to a file, byte for byte, through the storage.
    with repo.open(sid) as s2:
        s2.append_message(user("after the move"))
        doc = s2.storage.to_jsonl()  # type: ignore[attr-defined]
    assert doc.startswith(data) and repo.export_jsonl(sid) == doc
    assert repo.list()[0].size_bytes == len(doc)


def test_a_bad_row_is_reported_or_refused(repo: PostgresSessionRepo, pg_server: PgServer) -> None:
    with repo.create(cwd="/w") as s:
        s.append_message(user("one"))
        s.append_message(user("two"))
        sid = s.id
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {repo.schema}.entries SET line = %s WHERE session_id = %s AND seq = 0",
            (b'{"type":"message", not json', sid),
        )
        # A newline inside a row would split it into two lines: the table refuses it.
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(
                f"UPDATE {repo.schema}.entries SET line = %s WHERE session_id = %s AND seq = 1",
                (b"{}\n{}", sid),
            )
    with repo.open_readonly(sid) as r:
        report = r.storage.load_report  # type: ignore[attr-defined]
        assert [(i.line, i.kind) for i in report.issues] == [
            (2, "malformed"),
            (3, "dangling_parent"),
        ]
        assert [e.message.content for e in r.storage.get_entries()] == ["two"]  # type: ignore[attr-defined]
    with pytest.raises(st.SessionError) as err:
        PostgresSessionStorage.open(pg_server.dsn, sid, schema=repo.schema, strict=True)
    assert err.value.code == "corrupt"
    # A writer appends after the bad row without renumbering anything.
    with repo.open(sid) as w:
        w.append_message(user("three"))
    assert [r[0] for r in rows(pg_server, repo.schema, sid)] == [0, 1, 2]


def test_fork_copies_rows_inside_the_server(repo: PostgresSessionRepo, pg_server: PgServer) -> None:
    with repo.create(cwd="/w", name="src") as s:
        first = s.append_message(user("one"))
        s.append_message(user("two"))
        sid = s.id
    with repo.fork(sid) as f:
        fid = f.id
        assert f.storage.get_metadata().parent_session == sid
    src = rows(pg_server, repo.schema, sid)
    dst = rows(pg_server, repo.schema, fid)
    assert [r[2] for r in dst] == [r[2] for r in src]
    with repo.fork(sid, entry_id=first, position="at") as g:
        assert [e.id for e in g.storage.get_entries()][-1] == first
    meta = {m.id: m for m in repo.list()}
    assert meta[fid].name == "src" and meta[fid].entry_count == 3


# --------------------------------------------------------------------------- the lock


def test_second_writer_in_another_process_is_locked_naming_the_holder(
    repo: PostgresSessionRepo, pg_server: PgServer
) -> None:
    with repo.create(cwd="/w") as s:
        sid = s.id
    proc = spawn(pg_server, repo.schema, sid, "flush", 0)
    try:
        read_until(proc, "ack")
        with pytest.raises(st.SessionError) as err:
            repo.open(sid)
        assert err.value.code == "locked"
        assert f"pid {proc.pid}" in err.value.message
        assert socket.gethostname() in err.value.message
        with pytest.raises(st.SessionError) as err:
            repo.delete(sid)
        assert err.value.code == "locked"
        # Readers never need the lock.
        with repo.open_readonly(sid) as r:
            assert len(r.storage) >= 1
    finally:
        proc.kill()
        proc.communicate()
    # The server released the dead worker's lock with its connection.
    deadline = time.monotonic() + 10
    while True:
        try:
            with repo.open(sid):
                break
        except st.SessionError as exc:
            if exc.code != "locked" or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_one_connection_is_not_two_writers(pg_server: PgServer, pg_schema: str) -> None:
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        repo = PostgresSessionRepo(conn, schema=pg_schema)
        with repo.create(cwd="/w") as s:
            sid = s.id
            with pytest.raises(st.SessionError) as err:
                repo.open(sid)
            assert err.value.code == "locked"
        with repo.open(sid) as again:
            again.append_message(user())
        assert not conn.closed


def test_pool_writers_keep_their_lock_out_of_the_pool(pg_server: PgServer, pg_schema: str) -> None:
    from psycopg_pool import ConnectionPool

    with ConnectionPool(pg_server.dsn, min_size=1, max_size=2, open=True) as pool:
        repo = PostgresSessionRepo(pool, schema=pg_schema)
        with repo.create(cwd="/w") as s:
            s.append_message(user())
            with pool.connection() as c:
                held = c.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND pid = pg_backend_pid()"
                ).fetchone()
            assert held == (0,)
            assert [m.id for m in repo.list()] == [s.id]


def test_a_writer_that_lost_its_lock_gets_modified_externally(
    repo: PostgresSessionRepo, pg_server: PgServer
) -> None:
    a = repo.create(cwd="/w")
    sid = a.id
    a.append_message(user("a1"))
    # The lock is gone (as after a lost connection the server noticed), but this handle
    # does not know: another writer takes the session over and appends.
    a.storage._conn.execute("SELECT pg_advisory_unlock_all()")  # type: ignore[attr-defined]
    with repo.open(a.id) as b:
        b.append_message(user("b1"))
    with pytest.raises(st.SessionError) as err:
        a.append_message(user("a2"))
    assert err.value.code == "modified_externally"
    a.close()
    with repo.open_readonly(sid) as r:
        texts = [e.message.content for e in r.storage.get_entries()]  # type: ignore[attr-defined]
    assert texts == ["a1", "b1"]


def test_racing_writers_exactly_one_wins(repo: PostgresSessionRepo, pg_server: PgServer) -> None:
    for _ in range(5):
        with repo.create(cwd="/w") as s:
            sid = s.id
        procs = [spawn(pg_server, repo.schema, sid, "flush", 3) for _ in range(3)]
        outs = [p.communicate(timeout=60)[0].split() for p in procs]
        codes = sorted(p.returncode for p in procs)
        # A loser may find the winner already done and win after it: count overlaps.
        assert 0 in codes and all(c in (0, 3) for c in codes), outs
        texts = [r[2] for r in rows(pg_server, repo.schema, sid)]
        assert len(texts) == 3 * codes.count(0)


# --------------------------------------------------------------------------- faults


@pytest.mark.parametrize("durability", ["flush", "group", "fsync"])
def test_sigkilled_writers_lose_nothing_acknowledged(
    repo: PostgresSessionRepo, pg_server: PgServer, durability: str
) -> None:
    runs = max(1, CRASH_RUNS // 3)
    rng = random.Random(15)
    with repo.create(cwd="/w") as s:
        sid = s.id
    acked: list[str] = []
    for _ in range(runs):
        proc = spawn(pg_server, repo.schema, sid, durability, 0)
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        while first == "locked":  # the last victim's backend is still going away
            proc.communicate()
            time.sleep(0.05)
            proc = spawn(pg_server, repo.schema, sid, durability, 0)
            assert proc.stdout is not None
            first = proc.stdout.readline().strip()
        assert first == "open"
        stop = time.monotonic() + rng.uniform(0.02, 0.25)
        got: list[str] = []
        threading.Timer(
            max(0.0, stop - time.monotonic()), proc.send_signal, (signal.SIGKILL,)
        ).start()
        for line in proc.stdout:
            if line.startswith("ack "):
                got.append(line.split()[1])
        proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        acked.extend(got)
    # The last victim's backend may still be going away (on a loaded machine, a while):
    # the lock is free once it has, and the session opens and is whole.
    deadline = time.monotonic() + 30
    while True:
        try:
            session = repo.open(sid)
            break
        except st.SessionError as exc:
            if exc.code != "locked" or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with session as s:
        # Read while holding the lock: the last victim's backend has ended (it may have
        # committed an append its killed client never saw acknowledged, after the kill).
        on_server = {e for _, e, _ in rows(pg_server, repo.schema, sid)}
        assert set(acked) <= on_server
        assert s.storage.load_report.ok  # type: ignore[attr-defined]
        assert len(s.storage) == len(on_server)


def test_terminated_connection_mid_run_is_io_and_the_next_writer_takes_over(
    repo: PostgresSessionRepo, pg_server: PgServer
) -> None:
    s = repo.create(cwd="/w")
    sid = s.id
    done = [s.append_message(user(f"m{i}")) for i in range(5)]
    pid = s.storage._conn.info.backend_pid  # type: ignore[attr-defined]
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(st.SessionError) as err:
        s.append_message(user("lost"))
    assert err.value.code == "io"
    assert isinstance(err.value.__cause__, psycopg.Error)
    with pytest.raises(st.SessionError) as again:  # the handle stays poisoned
        s.get_leaf_id()
    assert again.value.code == "io"
    s.close()
    with repo.open(sid) as t:
        ids = [e.id for e in t.storage.get_entries()]
        assert ids == done
        t.append_message(user("next"))


def test_backend_terminated_mid_append_loses_nothing_acknowledged(
    repo: PostgresSessionRepo, pg_server: PgServer
) -> None:
    """A writer process appending in a loop has its connection terminated by the server
    at a random moment: it stops with ``io``, every append it acknowledged is on the
    server, the session row and the entry rows agree (nothing half-written), and the next
    writer takes over at once."""
    rng = random.Random(7)
    with repo.create(cwd="/w") as s:
        sid = s.id
    acked: list[str] = []
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        for _ in range(4):
            proc = spawn(pg_server, repo.schema, sid, "group", 0)
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "open"
            time.sleep(rng.uniform(0.01, 0.2))
            (killed,) = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name LIKE %s",
                (f"sessiontree writer % pid {proc.pid}",),
            ).fetchone()  # type: ignore[misc]
            assert killed == 1
            out = proc.communicate(timeout=60)[0].split("\n")
            acked += [line.split()[1] for line in out if line.startswith("ack ")]
            assert "error io" in out and proc.returncode == 4
            (next_seq, count) = admin.execute(  # type: ignore[misc]
                f"SELECT s.next_seq, (SELECT count(*) FROM {repo.schema}.entries e "
                f"WHERE e.session_id = s.id) FROM {repo.schema}.sessions s WHERE s.id = %s",
                (sid,),
            ).fetchone()
            assert next_seq == count
    assert set(acked) <= {e for _, e, _ in rows(pg_server, repo.schema, sid)}
    with repo.open(sid) as t:
        assert t.storage.load_report.ok  # type: ignore[attr-defined]


def test_server_restart_is_io_and_nothing_acknowledged_is_lost(
    repo: PostgresSessionRepo, pg_server: PgServer
) -> None:
    if pg_server.cluster_dir is None:
        pytest.skip("needs a cluster the tests started (SESSIONTREE_PG_DIR)")
    for durability in ("fsync", "group"):
        storage = PostgresSessionStorage.create(
            pg_server.dsn, schema=repo.schema, durability=durability
        )
        s = st.Session(storage)
        sid = s.id
        done = [s.append_message(user(f"m{i}")) for i in range(20)]
        pg_server.restart()  # fast shutdown: the server writes out what it acknowledged
        with pytest.raises(st.SessionError) as err:
            s.append_message(user("after restart"))
        assert err.value.code == "io"
        s.close()
        forget_migrations()
        with PostgresSessionRepo(pg_server.dsn, schema=repo.schema) as again, again.open(sid) as t:
            assert [e.id for e in t.storage.get_entries()] == done


# --------------------------------------------------------------------------- schema


def test_migrations_race_and_run_once(pg_server: PgServer, pg_schema: str) -> None:
    code = (
        "import sys; from sessiontree.postgres import PostgresSessionRepo; "
        "PostgresSessionRepo(sys.argv[1], schema=sys.argv[2]); print('ok')"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, pg_server.dsn, pg_schema], stdout=subprocess.PIPE
        )
        for _ in range(4)
    ]
    assert [p.communicate(timeout=60)[0].strip() for p in procs] == [b"ok"] * 4
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        assert conn.execute(f"SELECT version FROM {pg_schema}.schema_version").fetchall() == [
            (SCHEMA_VERSION,)
        ]


def test_a_newer_schema_is_refused(pg_server: PgServer, pg_schema: str) -> None:
    PostgresSessionRepo(pg_server.dsn, schema=pg_schema).close()
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE {pg_schema}.schema_version SET version = version + 1")
    forget_migrations()
    with pytest.raises(st.SessionError) as err:
        PostgresSessionRepo(pg_server.dsn, schema=pg_schema)
    assert err.value.code == "corrupt" and "newer" in err.value.message


@pytest.mark.parametrize("schema", ["Bad", "a;drop", "", "x" * 64, 3])
def test_bad_schema_names(pg_server: PgServer, schema: Any) -> None:
    with pytest.raises(st.SessionError) as err:
        PostgresSessionRepo(pg_server.dsn, schema=schema)
    assert err.value.code == "invalid_argument"


def test_unreachable_server_and_wrong_credentials(pg_server: PgServer) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(st.SessionError) as err:
        PostgresSessionRepo(f"host=127.0.0.1 port={port} dbname=x connect_timeout=5")
    assert err.value.code == "io" and "cannot connect" in err.value.message
    info = psycopg.conninfo.conninfo_to_dict(pg_server.dsn)
    wrong = (
        f"host={info['host']} port={info['port']} dbname={info['dbname']} "
        "user=sessiontree_pw password=wrong-password"
    )
    with pytest.raises(st.SessionError) as err:
        PostgresSessionStorage.create(wrong)
    assert err.value.code == "io" and "password" in err.value.message
    assert "wrong-password" not in err.value.message
    with pytest.raises(st.SessionError) as err:
        PostgresSessionRepo(3.5)
    assert err.value.code == "invalid_argument"


def test_open_of_an_unknown_session(repo: PostgresSessionRepo) -> None:
    for readonly in (False, True):
        with pytest.raises(st.SessionError) as err:
            PostgresSessionStorage.open(repo._source, "nope", schema=repo.schema, readonly=readonly)
        assert err.value.code == "not_found"
    # A failed open left no lock behind.
    with repo.create(cwd="/w", session_id="nope"):
        pass


# --------------------------------------------------------------------------- live readers


def test_refresh_and_wait_for_entries(repo: PostgresSessionRepo) -> None:
    with repo.create(cwd="/w") as w:
        reader = repo.open_readonly(w.id)
        assert reader.storage.refresh() == 0  # type: ignore[attr-defined]
        w.append_message(user("one"))
        assert reader.storage.refresh() == 1  # type: ignore[attr-defined]
        assert reader.storage.wait_for_entries(timeout=0.05) == 0  # type: ignore[attr-defined]
        t = threading.Timer(0.2, lambda: w.append_message(user("two")))
        t.start()
        started = time.monotonic()
        got = reader.storage.wait_for_entries(timeout=30)  # type: ignore[attr-defined]
        t.join()
        assert got == 1 and time.monotonic() - started < 30
        assert [e.message.content for e in reader.storage.get_entries()] == ["one", "two"]  # type: ignore[attr-defined]
        with pytest.raises(st.SessionError) as err:
            reader.append_message(user("no"))
        assert err.value.code == "readonly"
        reader.close()


def test_none_durability_buffers_until_flush(
    repo: PostgresSessionRepo, pg_server: PgServer
) -> None:
    storage = PostgresSessionStorage.create(repo._source, schema=repo.schema, durability="none")
    s = st.Session(storage)
    s.append_message(user("buffered"))
    assert rows(pg_server, repo.schema, s.id) == []
    storage.flush()
    assert len(rows(pg_server, repo.schema, s.id)) == 1
    s.append_message(user("at close"))
    sid = s.id
    storage.close()
    assert len(rows(pg_server, repo.schema, sid)) == 2


def test_list_filters_and_limits_from_the_table(repo: PostgresSessionRepo) -> None:
    for i in range(5):
        with repo.create(cwd=f"/w/{i % 2}", name=f"n{i}") as s:
            s.append_message(user(f"first {i}"))
    listed = repo.list(cwd="/w/0/", limit=2)
    assert [m.name for m in listed] == ["n4", "n2"]
    assert all(m.first_message and m.first_message.startswith("first") for m in listed)
    assert len(repo.list(cwd="/w/1")) == 2
    assert "PostgresSessionRepo(" in repr(repo) and repo.schema in repr(repo)


def test_pi_sessions_move_byte_for_byte(repo: PostgresSessionRepo) -> None:
    """pi's files (the lead's dialect) go into PostgreSQL and come back unchanged, and
    list as pi sessions."""
    fixtures = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "pi"
    files = sorted(fixtures.glob("*.jsonl"))
    assert files, f"no pi fixtures in {fixtures}"
    for path in files:
        data = path.read_bytes()
        with st.JsonlSessionStorage.open(path, readonly=True) as f:
            if f.session_id in repo:  # two fixtures may be one session at two times
                with pytest.raises(st.SessionError) as err:
                    repo.import_jsonl(data)
                assert err.value.code == "exists"
                continue
        with repo.import_jsonl(data) as s:
            sid = s.id
            dialect = s.storage.dialect  # type: ignore[attr-defined]
        assert repo.export_jsonl(sid) == data, path.name
        (meta,) = [m for m in repo.list() if m.id == sid]
        assert meta.dialect == dialect == "pi", path.name


def test_a_nul_in_a_name_or_a_message(repo: PostgresSessionRepo) -> None:
    """PostgreSQL's text holds no NUL: the listing shows U+FFFD, the rows keep the bytes
    (found by the state machine: a session named "\\x00")."""
    with repo.create(cwd="/w\x00x", name="a\x00b") as s:
        sid = s.id
        s.append_message(user("hi\x00there"))
        s.append_session_info("\x00")
    (row,) = [m for m in repo.list() if m.id == sid]
    assert row.name == "\ufffd" and row.first_message == "hi\ufffdthere"
    assert row.cwd == "/w\ufffdx"
    with repo.open(sid) as again:
        assert again.get_session_name() == "\x00"
        assert again.storage.get_metadata().cwd == "/w\x00x"
        first = again.storage.get_first_message("user")
        assert first is not None and first.message.content == "hi\x00there"  # type: ignore[attr-defined]
