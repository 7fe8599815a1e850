"""The async API under anyio, on its asyncio and its trio backend (the real packages,
pinned in constraints/async.txt), with anyio's own cancellation: cancel scopes and
``move_on_after``, which deliver a cancellation again and again until it is taken."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import anyio
import pytest

import sessiontree as st

from .aiohelp import check_file

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    return request.param


async def test_a_session_and_a_repo(tmp_path: Path, anyio_backend: str) -> None:
    repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path / "repo", durability="fsync"))
    session = await repo.create(cwd="/w", name=anyio_backend)
    async with session:
        first = await session.append_message(st.UserMessage("hi"))
        await session.append_label(first, "start")
        context = await session.build_context()
        assert [m.role for m in context.messages] == ["user"]
        with pytest.raises(st.SessionError) as err:
            await session.get_label("missing")
        assert err.value.code == "not_found"
    rows = await repo.list()
    assert [r.name for r in rows] == [anyio_backend]
    fork = await repo.fork(rows[0])
    assert await fork.get_label(first) == "start"
    await fork.close()


async def test_many_sessions_in_one_task_group(tmp_path: Path, anyio_backend: str) -> None:
    repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path / "repo", durability="flush"))
    done: list[str] = []

    async def agent(k: int) -> None:
        async with await repo.create(cwd="/w", session_id=f"a{k}") as session:
            for t in range(10):
                await session.append_message(st.UserMessage(f"{k}.{t}"))
                await anyio.sleep(0)
            assert len((await session.build_context()).messages) == 10
        done.append(f"a{k}")

    async with anyio.create_task_group() as tg:
        for k in range(100):
            tg.start_soon(agent, k)
    assert len(done) == 100
    assert {r.message_count for r in await repo.list()} == {10}


@pytest.mark.parametrize("seed", range(6))
async def test_cancel_scopes_at_random_points(
    tmp_path: Path, anyio_backend: str, seed: int
) -> None:
    rng = random.Random(seed)
    path = tmp_path / "s.jsonl"
    session = st.AsyncSession(st.JsonlSessionStorage.create(path, durability="fsync"))
    attempted: list[str] = []
    returned: set[str] = set()

    async def writer(k: int) -> None:
        with anyio.move_on_after(rng.choice([0, 0.0002, 0.001, 0.004, 1])):
            for j in range(5):
                attempted.append(f"{k}.{j}")
                returned.add(await session.append_message(st.UserMessage(f"{k}.{j}")))
                if j == 2:
                    await session.get_tree()

    async with anyio.create_task_group() as tg:
        for k in range(8):
            tg.start_soon(writer, k)
        await anyio.sleep(rng.choice([0, 0.001]))
        if rng.random() < 0.5:
            tg.cancel_scope.cancel()
    attempted.append("end")
    returned.add(await session.append_message(st.UserMessage("end")))
    await session.close()
    check_file(path, returned, attempted)
