"""PostgreSQL: the open of the benchmark session from the server next to the open from its
file, and a fleet of worker processes appending and rebuilding contexts.

The server is ``SESSIONTREE_PG_DSN``, or a throwaway cluster (tests/postgres/pg-cluster.sh).
The fleet is 2 workers x 8 sessions x 3 rounds by default (a smoke run);
``SESSIONTREE_PG_FLEET=8x500x2`` runs the issue's 8 workers x 500 sessions (x 2 rounds).
Figures: benches/RESULTS-postgres.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pytest_benchmark.fixture import BenchmarkFixture

import sessiontree as st
from conftest import Bench

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from postgres.pgserver import PgServer, fresh_schema, pg_server_for_run

WORKER = Path(__file__).with_name("pg_fleet_worker.py")
FLEET = os.environ.get("SESSIONTREE_PG_FLEET", "2x8x3")


@pytest.fixture(scope="module")
def pg_server() -> Iterator[PgServer]:
    yield from pg_server_for_run()


@pytest.fixture(scope="module")
def imported(pg_server: PgServer, bench: Bench) -> Iterator[tuple[Any, str, str]]:
    """The "large" benchmark session, imported byte for byte into a fresh schema."""
    wl = bench.workload("large")
    for schema in fresh_schema(pg_server):
        with st.PostgresSessionRepo(pg_server.dsn, schema=schema) as repo:
            with repo.import_jsonl(wl.path.read_bytes()) as s:
                sid = s.id
            assert repo.export_jsonl(sid) == wl.path.read_bytes()
        yield wl, schema, sid


@pytest.mark.parametrize("source", ["file", "postgres"])
def test_open_large(
    benchmark: BenchmarkFixture,
    imported: tuple[Any, str, str],
    pg_server: PgServer,
    source: str,
) -> None:
    wl, schema, sid = imported
    benchmark.group = "postgres: open the large session (read-only)"
    if source == "file":

        def run() -> int:
            with st.JsonlSessionStorage.open(wl.path, readonly=True, index=False) as s:
                return len(s)
    else:

        def run() -> int:
            with st.PostgresSessionStorage.open(
                pg_server.dsn, sid, schema=schema, readonly=True
            ) as s:
                return len(s)

    n = benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1)
    assert n == wl.manifest.n


def _percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


@pytest.mark.parametrize("durability", ["none", "flush", "group", "fsync"])
def test_fleet(pg_server: PgServer, durability: str, tmp_path: Path) -> None:
    workers, sessions, rounds = (int(x) for x in FLEET.split("x"))
    for schema in fresh_schema(pg_server):
        with st.PostgresSessionRepo(pg_server.dsn, schema=schema) as repo:
            sids = []
            for _ in range(workers * sessions):
                with repo.create(cwd="/fleet") as s:
                    sids.append(s.id)
        import time

        t0 = time.perf_counter()
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(WORKER),
                    pg_server.dsn,
                    schema,
                    durability,
                    str(rounds),
                    *sids[w * sessions : (w + 1) * sessions],
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for w in range(workers)
        ]
        outs = [json.loads(p.communicate(timeout=3600)[0]) for p in procs]
        wall = time.perf_counter() - t0
        assert all(p.returncode == 0 for p in procs)
        lat = [x for o in outs for x in o["latencies"]]
        appends = sum(o["appends"] for o in outs)
        locked = sum(o["locked"] for o in outs)
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            (stored,) = conn.execute(f"SELECT count(*) FROM {schema}.entries").fetchone()  # type: ignore[misc]
            # One writer at a time: every session is a single chain (no second branch).
            (forks,) = conn.execute(  # type: ignore[misc]
                f"SELECT count(*) FROM (SELECT session_id FROM {schema}.entries "
                "GROUP BY session_id HAVING count(*) <> max(seq) + 1) g"
            ).fetchone()
        assert stored == appends == workers * sessions * rounds * 2
        assert locked == 0 and forks == 0
        with st.PostgresSessionRepo(pg_server.dsn, schema=schema) as repo:
            for sid in sids[:: max(1, len(sids) // 10)]:
                with repo.open_readonly(sid) as r:
                    ids = [e.id for e in r.storage.get_entries()]
                    path = [e.id for e in r.storage.get_path_to_root(r.get_leaf_id())]
                    assert ids == path  # one chain
        line = (
            f"fleet {FLEET} {durability}: {appends} appends in {wall:.2f} s = "
            f"{appends / wall:,.0f} appends/s (with opens, closes and context builds); "
            f"append p50 {_percentile(lat, 0.5) * 1e3:.2f} ms, "
            f"p99 {_percentile(lat, 0.99) * 1e3:.2f} ms; lost 0, double writers 0"
        )
        print(line)
        (tmp_path / "fleet.txt").write_text(line)


@pytest.mark.parametrize("durability", ["none", "flush", "group", "fsync"])
def test_one_writer_append_latency(pg_server: PgServer, durability: str) -> None:
    """One long-lived writer appending messages (its statement prepared after the first
    few): the latency of the append call itself, per durability mode."""
    import time

    n = int(os.environ.get("SESSIONTREE_PG_APPENDS", "200"))
    for schema in fresh_schema(pg_server):
        storage = st.PostgresSessionStorage.create(
            pg_server.dsn,
            schema=schema,
            durability=durability,  # type: ignore[arg-type]
        )
        with st.Session(storage) as session:
            lat = []
            t0 = time.perf_counter()
            for i in range(n):
                t = time.perf_counter()
                session.append_message(st.UserMessage(f"message {i}", timestamp=1))
                lat.append(time.perf_counter() - t)
            session.storage.flush()  # type: ignore[attr-defined]
            wall = time.perf_counter() - t0
            sid = session.id
        with st.PostgresSessionStorage.open(pg_server.dsn, sid, schema=schema, readonly=True) as r:
            assert len(r) == n
        print(
            f"one writer {durability}: {n} appends, {n / wall:,.0f} appends/s, "
            f"p50 {_percentile(lat, 0.5) * 1e3:.2f} ms, p99 {_percentile(lat, 0.99) * 1e3:.2f} ms"
        )
