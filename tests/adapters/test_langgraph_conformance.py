"""LangGraph's own checkpointer conformance suite (``langgraph-checkpoint-conformance``,
pinned in constraints/langgraph.txt) run on :class:`SessionTreeSaver`: every capability
it knows (the five base ones and the three extended ones) must be detected and pass, over
a JSONL directory, in memory, and over PostgreSQL (the run's real server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.conformance", reason="needs sessiontree[langgraph]")

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from sessiontree import InMemorySessionRepo, JsonlSessionRepo, SessionRepo
from sessiontree.adapters.langgraph import SessionTreeSaver


def _conform(name: str, make_repo: Any) -> None:
    @checkpointer_test(name=name)
    async def saver() -> AsyncIterator[SessionTreeSaver]:
        async with SessionTreeSaver(make_repo()) as s:
            yield s

    report = asyncio.run(validate(saver))
    failures = {cap: result.failures for cap, result in report.results.items() if not result.passed}
    assert failures == {}
    detected = {cap for cap, result in report.results.items() if result.detected}
    assert detected == {cap.value for cap in ALL_CAPABILITIES}
    assert report.passed_all_base()
    passed = sum(result.tests_passed for result in report.results.values())
    assert passed >= 70  # the suite's 74 tests at 0.0.2, none skipped


def test_conformance_jsonl(tmp_path: Path) -> None:
    root = tmp_path / "threads"
    _conform("SessionTreeSaver[jsonl]", lambda: JsonlSessionRepo(root))


def test_conformance_memory() -> None:
    repo = InMemorySessionRepo()
    _conform("SessionTreeSaver[memory]", lambda: repo)


@pytest.fixture
def pg_repo(pg_server: Any, pg_schema: str) -> Iterator[SessionRepo]:
    from sessiontree.postgres import PostgresSessionRepo

    with PostgresSessionRepo(pg_server.dsn, schema=pg_schema) as repo:
        yield repo


def test_conformance_postgres(pg_repo: SessionRepo) -> None:
    _conform("SessionTreeSaver[postgres]", lambda: pg_repo)
