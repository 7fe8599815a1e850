"""Closing happens whatever cancels the block (issue 28, item 6).

anyio's cancel scopes (``move_on_after``, ``fail_after``, a cancelled task group) cancel
every checkpoint inside them until the scope is left, so the ``close()`` that
``AsyncSession.__aexit__`` awaits runs in an already cancelled scope. It must still close
the file: the writer's lock is free when the block is left, and the appends a
``durability="none"`` session buffered are on disk. Likewise for an ``open`` cancelled
after its worker thread opened the file, and for a plain ``await session.close()`` in a
``finally`` of a cancelled scope. On asyncio and trio, through anyio.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

import sessiontree as st

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    return request.param


def _repo(root: Path, durability: str = "none") -> st.AsyncSessionRepo:
    return st.AsyncSessionRepo(st.JsonlSessionRepo(root, durability=durability))  # type: ignore[arg-type]


async def _new_session(root: Path) -> str:
    async with await _repo(root).create(cwd="/w") as session:
        return session.id


def _on_disk(root: Path, sid: str) -> list[str]:
    """The user messages in the file, read by a *writer* (so no lock may be held)."""
    with st.JsonlSessionRepo(root).open(sid) as session:
        return [e.message.content for e in session.storage.get_entries("message")]  # type: ignore[attr-defined]


async def test_a_cancel_scope_around_async_with_closes_the_session(
    tmp_path: Path, anyio_backend: str
) -> None:
    sid = await _new_session(tmp_path)
    repo = _repo(tmp_path)
    with anyio.move_on_after(0.05) as scope:
        async with await repo.open(sid) as session:
            await session.append_message(st.UserMessage("one"))
            await session.append_message(st.UserMessage("two"))
            await anyio.sleep(10)
    assert scope.cancelled_caught
    assert session.storage.closed  # type: ignore[attr-defined]
    # No garbage collection needed: the lock is free and the buffered appends written.
    assert _on_disk(tmp_path, sid) == ["one", "two"]


async def test_fail_after_around_async_with_closes_the_session(
    tmp_path: Path, anyio_backend: str
) -> None:
    sid = await _new_session(tmp_path)
    repo = _repo(tmp_path)
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.05):
            async with await repo.open(sid) as session:
                await session.append_message(st.UserMessage("kept"))
                await anyio.sleep(10)
    assert _on_disk(tmp_path, sid) == ["kept"]


async def test_a_cancelled_task_group_closes_its_sessions(
    tmp_path: Path, anyio_backend: str
) -> None:
    sids = [await _new_session(tmp_path) for _ in range(4)]
    repo = _repo(tmp_path)
    opened = 0

    async def agent(sid: str) -> None:
        nonlocal opened
        async with await repo.open(sid) as session:
            await session.append_message(st.UserMessage(sid))
            opened += 1
            await anyio.sleep(10)

    async with anyio.create_task_group() as tg:
        for sid in sids:
            tg.start_soon(agent, sid)
        while opened < len(sids):
            await anyio.sleep(0.001)
        tg.cancel_scope.cancel()
    for sid in sids:
        assert _on_disk(tmp_path, sid) == [sid]


async def test_close_in_a_finally_of_a_cancelled_scope(tmp_path: Path, anyio_backend: str) -> None:
    sid = await _new_session(tmp_path)
    session = await _repo(tmp_path).open(sid)
    with anyio.move_on_after(0.02):
        try:
            await session.append_message(st.UserMessage("a"))
            await anyio.sleep(10)
        finally:
            await session.close()
    assert _on_disk(tmp_path, sid) == ["a"]


async def test_a_close_cancelled_by_its_scope_still_delivers_the_cancellation(
    tmp_path: Path, anyio_backend: str
) -> None:
    """The close happens, and the cancellation is not swallowed: the code after the
    ``await close()`` inside the cancelled scope does not run."""
    sid = await _new_session(tmp_path)
    session = await _repo(tmp_path).open(sid)
    after: list[str] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        await session.close()
        after.append("ran")
    assert after == []
    assert session.storage.closed  # type: ignore[attr-defined]
    assert _on_disk(tmp_path, sid) == []


class _GatedOpen(st.JsonlSessionRepo):
    """A repository whose ``open`` (in the worker thread) opens the file, then waits for
    the test's go-ahead before handing the session out."""

    opened: threading.Event
    proceed: threading.Event

    def open(self, ref: Any) -> st.Session:
        session = super().open(ref)
        self.opened.set()
        self.proceed.wait(10)
        return session


async def test_an_open_cancelled_after_the_file_was_opened_closes_it(
    tmp_path: Path, anyio_backend: str
) -> None:
    sid = await _new_session(tmp_path)
    sync = _GatedOpen(tmp_path, durability="none")
    sync.opened, sync.proceed = threading.Event(), threading.Event()
    repo = st.AsyncSessionRepo(sync)
    reached: list[str] = []

    async def release() -> None:
        while not sync.opened.is_set():
            await anyio.sleep(0.001)
        scope.cancel()  # the worker holds the open file (and its lock) now
        await anyio.sleep(0.01)
        sync.proceed.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(release)
        with anyio.CancelScope() as scope:
            async with await repo.open(sid):
                reached.append("body")
    assert reached == []
    assert scope.cancelled_caught
    assert _on_disk(tmp_path, sid) == []  # a writer opens it: the handle was closed


async def test_a_cancelled_scope_around_many_sessions_of_one_repo(
    tmp_path: Path, anyio_backend: str
) -> None:
    """Random points of cancellation: whatever happened, every session can be opened by
    a writer at once, and holds what its awaited appends returned."""
    sids = [await _new_session(tmp_path) for _ in range(6)]
    repo = _repo(tmp_path)
    returned: dict[str, list[str]] = {sid: [] for sid in sids}

    async def agent(sid: str, delay: float) -> None:
        with anyio.move_on_after(delay):
            async with await repo.open(sid) as session:
                for i in range(1000):
                    await session.append_message(st.UserMessage(f"{i}"))
                    returned[sid].append(f"{i}")
                    await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        for k, sid in enumerate(sids):
            tg.start_soon(agent, sid, [0, 0.0005, 0.002, 0.005, 0.01, 0.02][k])
    for sid in sids:
        on_disk = _on_disk(tmp_path, sid)
        assert on_disk[: len(returned[sid])] == returned[sid]
