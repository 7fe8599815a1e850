"""``sessiontree.testing``'s conformance kit on the PostgreSQL storage and repository."""

from __future__ import annotations

import sessiontree as st
from postgres.pgserver import PgServer
from sessiontree.testing import check_repo, check_storage


def test_storage_conformance(pg_server: PgServer, pg_schema: str) -> None:
    def new(header: st.SessionHeader | None = None) -> st.SessionStorage:
        return st.PostgresSessionStorage.create(
            pg_server.dsn, header, schema=pg_schema, durability="flush"
        )

    def reopen(storage: st.SessionStorage) -> st.SessionStorage:
        assert isinstance(storage, st.PostgresSessionStorage)
        sid = storage.session_id
        storage.close()
        return st.PostgresSessionStorage.open(pg_server.dsn, sid, schema=pg_schema)

    report = check_storage(new, reopen)
    assert report.ok, str(report)


def test_repo_conformance(pg_server: PgServer, pg_schema: str) -> None:
    made: list[st.PostgresSessionRepo] = []
    count = iter(range(1_000_000))

    def new() -> st.SessionRepo:
        # A fresh, empty repository for each contract: its own schema (dropped with the
        # test's schema prefix below).
        repo = st.PostgresSessionRepo(pg_server.dsn, schema=f"{pg_schema}_{next(count)}")
        made.append(repo)
        return repo

    def reopen(repo: st.SessionRepo) -> st.SessionRepo:
        assert isinstance(repo, st.PostgresSessionRepo)
        again = st.PostgresSessionRepo(pg_server.dsn, schema=repo.schema)
        made.append(again)
        return again

    try:
        report = check_repo(new, reopen)
        assert report.ok, str(report)
    finally:
        import psycopg

        schemas = {r.schema for r in made}
        for r in made:
            r.close()
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            for s in schemas:
                conn.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
