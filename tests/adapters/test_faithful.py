"""The adapters behave as the frameworks' own stores do (issue 27, items 2 and 3).

The OpenAI Agents SDK adapter takes any session id the SDK does, lets many objects share
one session (the SDK's one object per request), raises the SDK's error types, and its
read-then-move calls are one step each; every adapter writes a batch all or nothing; a
pydantic-ai store loads whatever it saved. Real frameworks, no mocks.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

import sessiontree as st
from sessiontree import AsyncSessionRepo
from sessiontree.adapters.openai_agents import (
    ID_PREFIX,
    ItemTypeError,
    OpenAIAgentsSession,
    SessionClosedError,
    session_id_for,
)

from .conftest import run

SDK_IDS = [
    "conversation:messages",
    "user:42",
    "alice@example.com",
    "tenant/user",
    "conv 1",
    "x" * 129,
    "",
    "..",
    "../escape",
    ".hidden",
    "日本語",
    ID_PREFIX + "plain",
    "plain-id",
]


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


@pytest.fixture
def repo(tmp_path: Any) -> AsyncSessionRepo:
    return AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))


# ------------------------------------------------------------------------ session ids


def test_any_string_the_sdk_takes_is_a_session_id(tmp_path: Any) -> None:
    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        for n, sdk_id in enumerate(SDK_IDS):
            async with await OpenAIAgentsSession.open(repo, sdk_id) as session:
                assert session.session_id == sdk_id
                await session.add_items([_user(f"item {n}")])
        # Another repository object (as another process would) finds each one again.
        again = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        for n, sdk_id in enumerate(SDK_IDS):
            async with await OpenAIAgentsSession.open(again, sdk_id) as session:
                assert await session.get_items() == [_user(f"item {n}")]
        stored = {m.id for m in await again.list()}
        assert stored == {session_id_for(i) for i in SDK_IDS}
        assert len(stored) == len(SDK_IDS)  # no two ids share a session
        assert all(st.is_valid_session_id(i) for i in stored)
        assert {p.name for p in tmp_path.iterdir() if p.suffix == ".jsonl"} == {
            f"{i}.jsonl" for i in stored
        }

    run(main())


def test_the_id_mapping_is_stable_and_keeps_plain_ids() -> None:
    # Literal values: the mapping must not change between processes or releases.
    assert session_id_for("support-42") == "support-42"
    assert session_id_for("user:42") == "openai-agents-ea3fd43be1e57d62e163dae19fc740bd"
    assert session_id_for(ID_PREFIX + "plain") != ID_PREFIX + "plain"
    with pytest.raises(st.SessionError) as err:
        session_id_for(42)  # type: ignore[arg-type]
    assert err.value.code == "invalid_argument"


def test_a_session_holding_another_id_is_refused(repo: AsyncSessionRepo) -> None:
    async def main() -> None:
        # What a hash collision would look like: the mapped id holds another SDK id.
        taken = await repo.create(
            session_id=session_id_for("user:1"), metadata={"openai_agents": {"session_id": "b"}}
        )
        await taken.close()
        with pytest.raises(st.SessionError) as err:
            await OpenAIAgentsSession.open(repo, "user:1")
        assert err.value.code == "exists"
        # And the session is not left locked by the refused open.
        await (await repo.open(session_id_for("user:1"))).close()

    run(main())


# ------------------------------------------------------------ many objects, one writer


def test_objects_on_one_id_share_one_writer(tmp_path: Any) -> None:
    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        # One object per request, and another repository object over the same directory.
        first = await OpenAIAgentsSession.open(repo, "user:7")
        second = await OpenAIAgentsSession.open(st.JsonlSessionRepo(tmp_path), "user:7")
        assert first.session is second.session
        await first.add_items([_user("one")])
        await second.add_items([_user("two")])
        assert await first.get_items() == await second.get_items() == [_user("one"), _user("two")]
        await first.close()
        assert await second.pop_item() == _user("two")
        third = await OpenAIAgentsSession.open(repo, "user:7")
        assert await third.get_items() == [_user("one")]
        await second.close()
        await third.close()
        # The last close released the session.
        with st.JsonlSessionRepo(tmp_path).open(session_id_for("user:7")):
            pass

    run(main())


def test_concurrent_opens_of_a_new_id_share_one_session(repo: AsyncSessionRepo) -> None:
    async def main() -> None:
        sessions = await asyncio.gather(
            *(OpenAIAgentsSession.open(repo, "new:id") for _ in range(8))
        )
        assert len({id(s.session) for s in sessions}) == 1
        await asyncio.gather(*(s.add_items([_user(str(n))]) for n, s in enumerate(sessions)))
        assert len(await sessions[0].get_items()) == 8
        for s in sessions:
            await s.close()
        assert [m.id for m in await repo.list()] == [session_id_for("new:id")]

    run(main())


def test_threads_opening_one_id_share_one_session(tmp_path: Any) -> None:
    repo = st.JsonlSessionRepo(tmp_path)
    errors: list[BaseException] = []

    def request(n: int) -> None:
        async def main() -> None:
            async with await OpenAIAgentsSession.open(repo, "tenant/a") as session:
                await session.add_items([_user(f"t{n}")])

        try:
            asyncio.run(main())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=request, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []

    async def check() -> list[Any]:
        async with await OpenAIAgentsSession.open(repo, "tenant/a") as session:
            return await session.get_items()

    assert sorted(i["content"] for i in run(check())) == [f"t{n}" for n in range(6)]


def test_open_waits_for_another_writer_then_gives_up(tmp_path: Any) -> None:
    # Another writer (as another process would hold it: its own lock on the file).
    sync = st.JsonlSessionRepo(tmp_path)
    held = sync.create(session_id=session_id_for("busy:1"))

    async def main() -> None:
        started = time.monotonic()
        with pytest.raises(st.SessionError) as err:
            await OpenAIAgentsSession.open(sync, "busy:1", lock_timeout=0.3)
        assert err.value.code == "locked"
        assert time.monotonic() - started >= 0.3
        threading.Timer(0.3, held.close).start()
        async with await OpenAIAgentsSession.open(sync, "busy:1", lock_timeout=10) as session:
            await session.add_items([_user("after the wait")])
            assert await session.get_items() == [_user("after the wait")]

    run(main())


def test_open_waits_for_a_writer_in_another_process(tmp_path: Any) -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, sessiontree as st\n"
            "s = st.JsonlSessionRepo(sys.argv[1]).create(session_id=sys.argv[2])\n"
            "print('ready', flush=True)\n"
            "time.sleep(0.5)\n"
            "s.close()\n",
            str(tmp_path),
            session_id_for("user:proc"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"

        async def main() -> None:
            repo = st.JsonlSessionRepo(tmp_path)
            async with await OpenAIAgentsSession.open(repo, "user:proc") as session:
                await session.add_items([_user("after the other process")])
                assert await session.get_items() == [_user("after the other process")]

        run(main())
    finally:
        child.communicate(timeout=30)
    assert child.returncode == 0


def test_a_cancelled_open_leaves_the_session_free(tmp_path: Any) -> None:
    sync = st.JsonlSessionRepo(tmp_path)
    held = sync.create(session_id="slow")

    async def main() -> None:
        task = asyncio.ensure_future(OpenAIAgentsSession.open(sync, "slow", lock_timeout=10))
        await asyncio.sleep(0.1)  # waiting for the writer
        task.cancel()
        threading.Timer(0.2, held.close).start()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The open finished in its thread, then let the session go.
        with sync.open("slow"):
            pass

    run(main())


# --------------------------------------------------------------------- the SDK's errors


def test_calls_after_close_raise_runtime_error(repo: AsyncSessionRepo) -> None:
    async def main() -> None:
        session = await OpenAIAgentsSession.open(repo, "user:9")
        other = await OpenAIAgentsSession.open(repo, "user:9")
        await session.add_items([_user("kept")])
        await session.close()
        await session.close()  # idempotent
        assert session.closed
        calls = [
            session.get_items(),
            session.add_items([]),
            session.add_items([_user("x")]),
            session.pop_item(),
            session.clear_session(),
            session.list_branches(),
            session.branch(at=0),
        ]
        for call in calls:
            with pytest.raises(RuntimeError) as err:
                await call
            assert isinstance(err.value, st.SessionError)
            assert isinstance(err.value, SessionClosedError)
            assert err.value.code == "closed"
        # The other object sharing the session goes on.
        assert await other.get_items() == [_user("kept")]
        await other.close()

    run(main())


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "user", "content": object()},
        {"type": "x", "value": {1, 2}},
        {"type": "x", (1,): "tuple key"},
        "not a dict",
    ],
)
def test_an_item_that_cannot_be_serialised_raises_type_error(
    repo: AsyncSessionRepo, bad: Any
) -> None:
    async def main() -> None:
        async with await OpenAIAgentsSession.open(repo, "user:3") as session:
            with pytest.raises(TypeError) as err:
                await session.add_items([_user("good"), bad])
            assert isinstance(err.value, ItemTypeError)
            assert err.value.code == "invalid_argument"
            assert await session.get_items() == []

    run(main())


# ------------------------------------------------------------------- all or nothing


def test_a_batch_that_fails_part_way_writes_nothing(tmp_path: Any) -> None:
    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        async with await OpenAIAgentsSession.open(repo, "chat") as session:
            with pytest.raises(st.SessionError) as err:
                await session.add_items([_user("good"), {"type": "x", "deep": _nested(200)}])
            assert err.value.code == "limit_exceeded"
            assert await session.get_items() == []
            assert len(session.session.storage) == 0  # not even off the branch

    run(main())


def test_a_batch_is_checked_against_the_repositorys_limits(tmp_path: Any) -> None:
    async def main() -> None:
        limits = st.Limits(max_line_bytes=4096)
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path, limits=limits))
        async with await OpenAIAgentsSession.open(repo, "chat") as session:
            with pytest.raises(st.SessionError) as err:
                await session.add_items([_user("good"), _user("x" * 5000)])
            assert err.value.code == "limit_exceeded"
            assert len(session.session.storage) == 0
            await session.add_items([_user("good"), _user("fine")])
            assert len(await session.get_items()) == 2

    run(main())


class _FailingStorage(st.InMemorySessionStorage):
    """Fails its second message append, as a disk would (an I/O error mid-batch)."""

    appends = 0

    def append_message(self, message: Any) -> Any:
        self.appends += 1
        if self.appends == 2:
            raise st.SessionError("io", "no space left on device")
        return super().append_message(message)


def test_a_write_failing_mid_batch_leaves_the_history_as_it_was() -> None:
    async def main() -> None:
        session = OpenAIAgentsSession(st.Session(_FailingStorage()))
        with pytest.raises(OSError):
            await session.add_items([_user("one"), _user("two"), _user("three")])
        # The first entry is in the storage, off the branch: the history did not change.
        assert await session.get_items() == []
        await session.add_items([_user("after")])
        assert await session.get_items() == [_user("after")]
        await session.close()

    run(main())


# ------------------------------------------------------- concurrent read-then-move calls


N_ITEMS = 12


async def _filled(repo: Any, sdk_id: str) -> OpenAIAgentsSession:
    session = await OpenAIAgentsSession.open(repo, sdk_id)
    await session.add_items([_user(f"m{n}") for n in range(N_ITEMS)])
    return session


def _check_pops(popped: list[Any]) -> None:
    assert None not in popped
    assert sorted(i["content"] for i in popped) == sorted(f"m{n}" for n in range(N_ITEMS))


@pytest.mark.parametrize("objects", ["one object", "objects of their own"])
@pytest.mark.parametrize("durability", ["group", "fsync"])
def test_concurrent_pops_in_tasks_take_one_item_each(
    tmp_path: Any, durability: str, objects: str
) -> None:
    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path, durability=durability))  # type: ignore[arg-type]
        first = await _filled(repo, "pop-chat")
        # Every pop on one object, or half of them on objects of their own.
        others = (
            [await OpenAIAgentsSession.open(repo, "pop-chat") for _ in range(N_ITEMS // 2)]
            if objects != "one object"
            else [first] * (N_ITEMS // 2)
        )
        popped = await asyncio.gather(
            *(first.pop_item() for _ in range(N_ITEMS // 2)), *(o.pop_item() for o in others)
        )
        _check_pops(list(popped))
        assert await first.get_items() == []
        assert await first.pop_item() is None
        for o in {id(o): o for o in [first, *others]}.values():
            await o.close()

    run(main())


def test_concurrent_pops_in_threads_take_one_item_each(tmp_path: Any) -> None:
    repo = st.JsonlSessionRepo(tmp_path, durability="fsync")
    shared = run(_filled(repo, "user:threads"))
    popped: list[Any] = []
    barrier = threading.Barrier(N_ITEMS)

    def pop(n: int) -> None:
        async def main() -> Any:
            barrier.wait()
            if n % 2:
                return await shared.pop_item()
            async with await OpenAIAgentsSession.open(repo, "user:threads") as own:
                return await own.pop_item()

        popped.append(asyncio.run(main()))

    threads = [threading.Thread(target=pop, args=(n,)) for n in range(N_ITEMS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _check_pops(popped)
    assert run(shared.get_items()) == []
    run(shared.close())


def test_racing_branches_and_pops_leave_the_history_callers_were_told(
    repo: AsyncSessionRepo,
) -> None:
    async def main() -> None:
        session = await _filled(repo, "user:branch")
        other = await OpenAIAgentsSession.open(repo, "user:branch")
        # The calls take turns in the order they were made: the branch keeps 6 items,
        # then each pop takes the last of what is left.
        _, *popped = await asyncio.gather(
            other.branch(at=6), *(session.pop_item() for _ in range(3))
        )
        assert popped == [_user("m5"), _user("m4"), _user("m3")]
        assert await session.get_items() == [_user(f"m{n}") for n in range(3)]
        await asyncio.gather(session.clear_session(), other.clear_session())
        assert await session.get_items() == []
        await session.close()
        await other.close()

    run(main())


def test_concurrent_pops_on_postgres_take_one_item_each(pg_server: Any, pg_schema: str) -> None:
    async def main() -> None:
        # Two repository objects over one database and schema (one per request, say).
        with (
            st.PostgresSessionRepo(pg_server.dsn, schema=pg_schema) as sync,
            st.PostgresSessionRepo(pg_server.dsn, schema=pg_schema) as other_repo,
        ):
            first = await _filled(AsyncSessionRepo(sync), "user:pg")
            others = [
                await OpenAIAgentsSession.open(other_repo, "user:pg", lock_timeout=1)
                for _ in range(3)
            ]
            assert all(o.session is first.session for o in others)
            popped = await asyncio.gather(
                *(o.pop_item() for o in [first, *others] for _ in range(N_ITEMS // 4))
            )
            _check_pops(list(popped))
            assert await first.get_items() == []
            for o in [first, *others]:
                await o.close()
            # Released: a writer elsewhere gets it.
            sync.open(session_id_for("user:pg")).close()

    run(main())
