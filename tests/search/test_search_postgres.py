"""Search in PostgreSQL: the GIN index answers (no table scan), rows without tokens are
still found, and imports and forks carry the tokens."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import sessiontree as st
from sessiontree.testing import plant_search_corpus


@pytest.fixture
def pg_repo(pg_server: Any, pg_schema: str) -> Iterator[st.PostgresSessionRepo]:
    repo = st.PostgresSessionRepo(pg_server.dsn, schema=pg_schema)
    try:
        yield repo
    finally:
        repo.close()


def _conn(pg_server: Any) -> Any:
    import psycopg

    return psycopg.connect(pg_server.dsn, autocommit=True)


def test_a_query_uses_the_gin_index(
    pg_repo: st.PostgresSessionRepo, pg_server: Any, pg_schema: str
) -> None:
    plant_search_corpus(pg_repo.create)
    with _conn(pg_server) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                f"EXPLAIN SELECT e.line FROM {pg_schema}.entries e "
                "WHERE e.search @@ %s::tsquery OR e.search IS NULL",
                ("'qwertyuiop'",),
            )
        )
        assert "entries_search" in plan and "Seq Scan" not in plan, plan
        tokens = conn.execute(
            f"SELECT search::text FROM {pg_schema}.entries WHERE search @@ %s::tsquery",
            ("'naïve' & '🎉'",),
        ).fetchone()
    assert tokens is not None and "'東'" in tokens[0] and "'café'" in tokens[0]


def test_rows_without_tokens_are_candidates(
    pg_repo: st.PostgresSessionRepo, pg_server: Any, pg_schema: str
) -> None:
    plant_search_corpus(pg_repo.create)
    before = [(h.session_id, h.entry_id) for h in pg_repo.search("qwertyuiop")]
    with _conn(pg_server) as conn:
        conn.execute(f"UPDATE {pg_schema}.entries SET search = NULL")
    assert [(h.session_id, h.entry_id) for h in pg_repo.search("qwertyuiop")] == before
    assert pg_repo.build_search_index() > 0
    with _conn(pg_server) as conn:
        row = conn.execute(
            f"SELECT count(*) FROM {pg_schema}.entries WHERE search IS NULL"
        ).fetchone()
    assert row is not None and row[0] == 0
    assert [(h.session_id, h.entry_id) for h in pg_repo.search("qwertyuiop")] == before


def test_imports_and_forks_carry_tokens(pg_repo: st.PostgresSessionRepo) -> None:
    memory = st.InMemorySessionRepo()
    plant_search_corpus(memory.create)
    with memory.open("search-b") as b:
        data = b.storage.to_jsonl()
    with pg_repo.import_jsonl(data) as imported:
        sid = imported.id
    assert [h.session_id for h in pg_repo.search('"quoted text"')] == [sid]
    with pg_repo.fork(sid) as fork:
        fork_id = fork.id
    assert {h.session_id for h in pg_repo.search('"quoted text"')} == {sid, fork_id}
