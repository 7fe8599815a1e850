"""Cancelling async calls at random points never leaves a partial line, a held lock or a
session in an unknown state.

Each test cancels tasks while their calls are queued, running in a worker thread, or
done, then checks the file the way a user would: every line is complete JSON, a writer
can open it at once (no lock left), it loads without issues, its entries form the chain
the calls made in the order they were made, and every call whose ``await`` returned is in
it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import threading
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st

from .aiohelp import check_file

SEEDS = range(int(os.environ.get("SESSIONTREE_AIO_CANCEL_SEEDS", "12")))


@pytest.mark.parametrize("durability", ["fsync", "flush"])
@pytest.mark.parametrize("seed", SEEDS)
def test_cancelled_appends_leave_a_whole_file(seed: int, durability: str, tmp_path: Path) -> None:
    rng = random.Random(seed)
    path = tmp_path / "s.jsonl"
    attempted: list[str] = []
    returned: set[str] = set()

    async def writer(session: st.AsyncSession, k: int) -> None:
        for j in range(rng.randrange(1, 6)):
            text = f"{k}.{j}"
            attempted.append(text)
            returned.add(await session.append_message(st.UserMessage(text)))
            if rng.random() < 0.3:
                await session.build_context()
            if rng.random() < 0.2:
                await session.get_tree()

    async def main() -> None:
        storage = st.JsonlSessionStorage.create(path, durability=durability)  # type: ignore[arg-type]
        session = st.AsyncSession(storage)
        tasks = [asyncio.create_task(writer(session, k)) for k in range(rng.randrange(4, 16))]
        for _ in range(rng.randrange(1, len(tasks) + 1)):
            await asyncio.sleep(rng.choice([0, 0, 0.0001, 0.0005, 0.002]))
            rng.choice(tasks).cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # The session is still usable after the cancellations.
        attempted.append("last")
        returned.add(await session.append_message(st.UserMessage("last")))
        context = await session.build_context()
        assert context.messages[-1].content == "last"  # type: ignore[union-attr]
        close = asyncio.create_task(session.close())
        await asyncio.sleep(rng.choice([0, 0.0001, 0.001]))
        close.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await close
        if not storage.closed:
            # Cancelled before it started: the session is untouched and closes normally.
            await session.append_message(st.UserMessage("after"))
            attempted.append("after")
            await session.close()

    asyncio.run(main())
    ids = check_file(path, returned, attempted)
    assert len(ids) >= len(returned)


@pytest.mark.parametrize("seed", SEEDS)
def test_timeouts_on_a_busy_session(seed: int, tmp_path: Path) -> None:
    """``asyncio.wait_for`` with tiny timeouts (cancellation from the library's side)."""
    rng = random.Random(seed)
    path = tmp_path / "s.jsonl"
    attempted: list[str] = []
    returned: set[str] = set()

    async def main() -> None:
        session = st.AsyncSession(st.JsonlSessionStorage.create(path, durability="fsync"))
        for i in range(30):
            attempted.append(str(i))
            try:
                entry = await asyncio.wait_for(
                    session.append_message(st.UserMessage(str(i))), rng.choice([0, 1e-5, 1e-3])
                )
            except asyncio.TimeoutError:
                continue
            returned.add(entry)
        await session.close()

    asyncio.run(main())
    check_file(path, returned, attempted)


@pytest.mark.parametrize("seed", SEEDS)
def test_cancelled_repo_calls_leave_no_session_locked(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path / "repo", durability="fsync"))
    kept: list[st.AsyncSession] = []

    async def one(k: int) -> None:
        session = await repo.create(cwd="/w", name=f"s{k}")
        kept.append(session)
        await session.append_message(st.UserMessage("hi"))
        fork = await repo.fork(session.id)
        kept.append(fork)
        reopened_list = await repo.list()
        assert reopened_list

    async def main() -> None:
        tasks = [asyncio.create_task(one(k)) for k in range(8)]
        for _ in range(6):
            await asyncio.sleep(rng.choice([0, 0.0002, 0.001, 0.003]))
            rng.choice(tasks).cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for session in kept:
            await session.close()

    asyncio.run(main())
    sync = st.JsonlSessionRepo(tmp_path / "repo")
    rows = sync.list()
    for row in rows:
        assert row.error is None
        # A session a cancelled create or fork made was closed: its lock is free.
        sync.open(row).close()
    assert sorted(os.listdir(tmp_path / "repo")) == sorted(
        [f"{r.id}.jsonl" for r in rows] + [".sessiontree-list-cache.json"]
    )


class _GatedAppends(st.JsonlSessionStorage):
    """A file storage whose appends wait for the test's go-ahead, in their worker thread."""

    started: threading.Event
    proceed: threading.Event

    def append_entry(self, entry: st.SessionTreeEntry) -> None:
        self.started.set()
        self.proceed.wait(10)
        super().append_entry(entry)


def test_a_call_cancelled_while_queued_never_runs(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    st.JsonlSessionStorage.create(path).close()
    storage = _GatedAppends.open(path, durability="fsync")
    storage.started, storage.proceed = threading.Event(), threading.Event()

    async def main() -> tuple[Any, Any]:
        session = st.AsyncSession(storage)
        first = asyncio.create_task(session.append_message(st.UserMessage("first")))
        second = asyncio.create_task(session.append_message(st.UserMessage("second")))
        third = asyncio.create_task(session.append_message(st.UserMessage("third")))
        while not storage.started.is_set():  # "first" is running; the others wait
            await asyncio.sleep(0.001)
        second.cancel()
        await asyncio.sleep(0.01)
        assert second.done()  # a queued call's cancellation arrives at once
        storage.proceed.set()
        results = await asyncio.gather(first, second, third, return_exceptions=True)
        await session.close()
        return results[1], [results[0], results[2]]

    cancelled, ids = asyncio.run(main())
    assert isinstance(cancelled, asyncio.CancelledError)
    with st.JsonlSessionStorage.open(path, readonly=True) as reader:
        entries = reader.get_entries()
        assert [e.id for e in entries] == ids
        assert [e.message.content for e in entries] == ["first", "third"]  # type: ignore[attr-defined]


class _SlowClose(st.JsonlSessionStorage):
    """A file storage whose close waits for the test's go-ahead, in its worker thread."""

    started: threading.Event
    proceed: threading.Event

    def close(self) -> None:
        self.started.set()
        self.proceed.wait(10)
        super().close()


def test_a_call_cancelled_while_running_completes_before_the_cancellation(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    st.JsonlSessionStorage.create(path).close()
    storage = _SlowClose.open(path)
    storage.started, storage.proceed = threading.Event(), threading.Event()

    async def main() -> None:
        session = st.AsyncSession(storage)
        closing = asyncio.create_task(session.close())
        while not storage.started.is_set():
            await asyncio.sleep(0.001)
        closing.cancel()
        for _ in range(20):
            await asyncio.sleep(0.001)
        assert not closing.done()  # the cancellation waits for the running close
        storage.proceed.set()
        with pytest.raises(asyncio.CancelledError):
            await closing
        # When the cancellation arrives, the close is over: a writer can open the file.
        st.JsonlSessionStorage.open(path).close()

    asyncio.run(main())
