"""The ``sessiontree`` command on a PostgreSQL repository (``--repo postgresql://...``)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import psycopg
import pytest

import sessiontree as st
from postgres.pgserver import PgServer


def uri(server: PgServer) -> str:
    d = psycopg.conninfo.conninfo_to_dict(server.dsn)
    return f"postgresql://{d['user']}@{d['host']}:{d['port']}/{d['dbname']}"


def run(server: PgServer, schema: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SESSIONTREE_REPO"}
    env["SESSIONTREE_PG_SCHEMA"] = schema
    env["COLUMNS"] = "100"
    return subprocess.run(
        [sys.executable, "-m", "sessiontree", "--repo", uri(server), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture
def session_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "chat.jsonl"
    with st.JsonlSessionStorage.create(path, durability="flush") as storage:
        s = st.Session(storage)
        s.append_session_info("cli demo")
        s.append_message(st.UserMessage("first question", timestamp=1))
        s.append_message(
            st.AssistantMessage([st.TextContent("an answer")], "openai", "gpt-4", timestamp=1)
        )
    return path


def test_import_ls_show_tree_fork_byte_for_byte(
    pg_server: PgServer, pg_schema: str, session_file: pathlib.Path
) -> None:
    out = run(pg_server, pg_schema, "import", str(session_file), "--json")
    assert out.returncode == 0, out.stderr
    (imported,) = json.loads(out.stdout)["imported"]
    sid = imported["session"]["id"]
    with st.PostgresSessionRepo(pg_server.dsn, schema=pg_schema) as repo:
        assert repo.export_jsonl(sid) == session_file.read_bytes()
    # And out again with the command, byte for byte.
    copy = session_file.with_name("out.jsonl")
    exported = run(pg_server, pg_schema, "export", sid, "--copy", "-o", str(copy))
    assert exported.returncode == 0, exported.stderr
    assert copy.read_bytes() == session_file.read_bytes()
    twice = run(pg_server, pg_schema, "export", sid, "--copy", "-o", str(copy))
    assert twice.returncode == 2 and "exists" in twice.stderr

    ls = run(pg_server, pg_schema, "ls", "--json")
    assert ls.returncode == 0, ls.stderr
    rows = json.loads(ls.stdout)["sessions"]
    assert [r["id"] for r in rows] == [sid]

    for cmd in (["show", sid[:12]], ["tree"], ["stats", sid], ["check", sid]):
        got = run(pg_server, pg_schema, *cmd)
        assert got.returncode == 0, (cmd, got.stderr)
    assert "first question" in run(pg_server, pg_schema, "show", sid).stdout

    forked = run(pg_server, pg_schema, "fork", sid, "--json")
    assert forked.returncode == 0, forked.stderr
    new_id = json.loads(forked.stdout)["session"]["id"]
    assert len(json.loads(run(pg_server, pg_schema, "ls", "--json").stdout)["sessions"]) == 2

    # Again: the same id is taken.
    again = run(pg_server, pg_schema, "import", str(session_file))
    assert again.returncode == 2 and "exists" in again.stderr
    # repair reads the rows, and never rewrites them; a clean copy goes to a file.
    assert run(pg_server, pg_schema, "repair", new_id).returncode == 0
    repair = run(pg_server, pg_schema, "repair", new_id, "--clean", "--in-place")
    assert repair.returncode == 2 and "PostgreSQL" in repair.stderr
    copy = session_file.with_name("copy.jsonl")
    assert run(pg_server, pg_schema, "repair", sid, "--clean", "-o", str(copy)).returncode == 0
    with st.JsonlSessionStorage.open(copy, readonly=True) as clean:
        assert len(clean) == 3
    unknown = run(pg_server, pg_schema, "show", "nope")
    assert unknown.returncode == 2 and "not_found" in unknown.stderr
