"""Reading a whole session: open it and get every entry as a complete value (issue 26).

Three ways to read the same 100k-entry session (10k with ``--bench-real`` too), each
timed from nothing in memory to every entry in hand:

- ``sessiontree``: ``JsonlSessionStorage.open`` (read-only, no persisted index) and
  ``get_entries()``: every entry, message, content block and usage built whole;
- ``orjson-dicts``: what a developer writes with orjson — read the file, ``orjson.loads``
  every line into a dict;
- ``sqlite-session``: the OpenAI Agents SDK's ``SQLiteSession.get_items()`` over a
  database file holding the same entries (each line's JSON object as an item, written
  untimed beforehand), as an agent built on the SDK reads its history back. Skipped where
  the ``openai-agents`` extra is not installed.

Each implementation's answer is checked: the entry count, and the ids in file order.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from pytest_benchmark.fixture import BenchmarkFixture

import sessiontree as st
from conftest import Bench

IMPLS = ("sessiontree", "orjson-dicts", "sqlite-session")
SIZES = ("small", "large")


def _st_read(path: Path) -> list[Any]:
    with st.JsonlSessionStorage.open(path, readonly=True, index=False) as storage:
        entries = storage.get_entries()
    # Every entry's fields, as a program reading the session would use them (a build that
    # deferred them would pay for them here).
    for entry in entries:
        message = getattr(entry, "message", None)
        if message is not None:
            message.timestamp  # noqa: B018
    return entries


def _orjson_read(path: Path) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        lines = f.read().splitlines()
    return [orjson.loads(line) for line in lines[1:] if line]


@pytest.fixture(scope="module")
def sqlite_db(bench: Bench, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """One SQLite database per size, filled once with the session's entries as items."""
    made: dict[str, Path] = {}
    yield made
    for path in made.values():
        path.unlink(missing_ok=True)


def _sqlite_for(size: str, path: Path, made: dict[str, Path], folder: Path) -> Path:
    from agents import SQLiteSession

    db = made.get(size)
    if db is not None:
        return db
    db = folder / f"items-{size}.db"
    items = _orjson_read(path)

    async def fill() -> None:
        session = SQLiteSession("whole", str(db))
        for at in range(0, len(items), 5_000):
            await session.add_items(items[at : at + 5_000])  # type: ignore[arg-type]
        session.close()

    asyncio.run(fill())
    made[size] = db
    return db


def _sqlite_read(db: Path) -> list[Any]:
    from agents import SQLiteSession

    async def read() -> list[Any]:
        session = SQLiteSession("whole", str(db))
        try:
            return list(await session.get_items())
        finally:
            session.close()

    return asyncio.run(read())


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("impl", IMPLS)
def test_read_whole_session(
    benchmark: BenchmarkFixture,
    bench: Bench,
    sqlite_db: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    size: str,
    impl: str,
) -> None:
    """Open + every entry, from nothing in memory."""
    wl = bench.workload(size)
    benchmark.group = f"read-whole@{bench.label(size)}"
    if impl == "sessiontree":
        run = lambda: _st_read(wl.path)  # noqa: E731
        ids = lambda out: [e.id for e in out]  # noqa: E731
    elif impl == "orjson-dicts":
        run = lambda: _orjson_read(wl.path)  # noqa: E731
        ids = lambda out: [d.get("id") for d in out]  # noqa: E731
    else:
        pytest.importorskip("agents", reason="the openai-agents extra is not installed")
        db = _sqlite_for(size, wl.path, sqlite_db, tmp_path_factory.mktemp("sqlite"))
        run = lambda: _sqlite_read(db)  # noqa: E731
        ids = lambda out: [d.get("id") for d in out]  # noqa: E731
    gc.collect()
    out = benchmark.pedantic(run, rounds=bench.rounds("sessiontree", size), iterations=1)
    got = ids(out)
    assert len(got) == wl.manifest.n
    bench.crosscheck(benchmark.group, impl, got)
    benchmark.extra_info.update(scenario="read-whole", impl=impl, n=wl.manifest.n)
    del out
    wl.clear_side_files()
