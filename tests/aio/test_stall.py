"""Big calls leave the event loop free (issue 28, item 7).

What these check is where the work runs and that it is cut in chunks, never how long it
takes (``benches/test_bench_async_stall.py`` measures the loop stalls):

- an append whose message carries a lot of text is written in the worker thread, a
  small one inline;
- a whole branch, tree or cold context of a large session is built in the worker a
  chunk at a time (the GIL released between chunks), and is exactly what the sync
  ``Session`` gives, for every shape of tree (branches, labels, compactions, leaf moves).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st
from sessiontree.aio import _chunked, _policy


class _Recording(st.JsonlSessionStorage):
    """A file storage that notes the thread each append ran on."""

    threads: list[str]

    def append_message(self, message: st.AgentMessage) -> st.MessageEntry:
        self.threads.append(threading.current_thread().name)
        return super().append_message(message)


def _recording(path: Path) -> _Recording:
    st.JsonlSessionStorage.create(path).close()
    storage = _Recording.open(path, durability="flush")
    storage.threads = []
    return storage


BIG = _policy.INLINE_WRITE_BYTES + 1


@pytest.mark.parametrize(
    "message",
    [
        st.UserMessage("y" * BIG),
        st.UserMessage([st.TextContent("a"), st.ImageContent("i" * BIG, "image/png")]),
        st.AssistantMessage([st.TextContent("t" * BIG)], "anthropic", "m"),
        st.AssistantMessage([st.ThinkingContent("t" * BIG)], "anthropic", "m"),
        st.AssistantMessage([st.ToolCall("c", "write", {"text": "z" * BIG})], "anthropic", "m"),
        st.AssistantMessage(
            [st.ToolCall("c", "write", {"files": [{"path": "a", "text": "z" * BIG}]})],
            "anthropic",
            "m",
        ),
        st.AssistantMessage(
            [st.ToolCall("c", "many", {"k": list(range(10_000))})], "anthropic", "m"
        ),
        st.ToolResultMessage("c", "read", [st.TextContent("r" * BIG)]),
        st.ToolResultMessage("c", "read", [st.TextContent("r")], details={"log": "d" * BIG}),
        st.CustomMessage("note", "n" * BIG),
    ],
    ids=lambda m: type(m).__name__,
)
def test_an_append_carrying_a_lot_of_text_runs_in_the_worker(
    message: st.AgentMessage, tmp_path: Path
) -> None:
    storage = _recording(tmp_path / "s.jsonl")

    async def main() -> list[str]:
        session = st.AsyncSession(storage)
        first = await session.append_message(st.UserMessage("small"))
        big = await session.append_message(message)
        last = await session.append_message(st.UserMessage("small again"))
        assert [e.id for e in await session.get_branch()] == [first, big, last]
        await session.close()
        return storage.threads

    loop_thread = threading.current_thread().name
    threads = asyncio.run(main())
    assert threads[0] == loop_thread  # a small append: inline
    assert threads[1] != loop_thread  # the big one: in the worker
    # Queued behind it in the worker (calls of one session keep their order), or inline
    # once it is over.
    assert len(threads) == 3


@pytest.mark.parametrize(
    "message",
    [
        st.UserMessage("y" * (_policy.INLINE_WRITE_BYTES - 10)),
        st.AssistantMessage(
            [
                st.ThinkingContent("hm" * 100, signature="s" * 500),
                st.TextContent("Done."),
                st.ToolCall("c", "read", {"path": "README.md", "lines": [1, 2]}),
            ],
            "anthropic",
            "m",
            usage=st.Usage(input=10, output=20, total_tokens=30),
        ),
        st.ToolResultMessage("c", "read", [st.TextContent("r" * 8000)], details={"n": 1}),
    ],
    ids=lambda m: type(m).__name__,
)
def test_ordinary_appends_stay_inline(message: st.AgentMessage, tmp_path: Path) -> None:
    storage = _recording(tmp_path / "s.jsonl")

    async def main() -> list[str]:
        session = st.AsyncSession(storage)
        await session.append_message(message)
        await session.close()
        return storage.threads

    assert asyncio.run(main()) == [threading.current_thread().name]


def test_other_appends_carrying_a_lot_go_to_the_worker(tmp_path: Path) -> None:
    calls: list[str] = []

    class Storage(st.JsonlSessionStorage):
        def append_entry(self, entry: st.SessionTreeEntry) -> None:
            calls.append(threading.current_thread().name)
            super().append_entry(entry)

    path = tmp_path / "s.jsonl"
    st.JsonlSessionStorage.create(path).close()

    async def main() -> None:
        session = st.AsyncSession(Storage.open(path, durability="flush"))
        await session.append_custom_entry("small", {"a": 1})
        await session.append_custom_entry("big", {"blob": "b" * BIG})
        await session.append_custom_message_entry("big", "c" * BIG)
        await session.close()

    asyncio.run(main())
    loop_thread = threading.current_thread().name
    assert calls[0] == loop_thread
    assert loop_thread not in calls[1:]


# --------------------------------------------------------------------------- chunked reads


def _grow(session: st.Session, n: int) -> dict[str, Any]:
    """A session of about ``n`` entries with branches, labels, a compaction, a custom
    message and state changes; returns ids worth moving to."""
    marks: dict[str, Any] = {}
    session.append_model_change("anthropic", "m1")
    session.append_thinking_level_change("high")
    for i in range(n):
        if i % 10 == 0:
            eid = session.append_message(st.UserMessage(f"u{i}"))
        elif i % 10 == 5:
            eid = session.append_custom_message_entry("note", f"c{i}")
        else:
            eid = session.append_message(
                st.AssistantMessage([st.TextContent(f"a{i}")], "anthropic", "m1")
            )
        if i % 37 == 0:
            session.append_label(eid, f"L{i}")
        if i == n // 3:
            marks["third"] = eid
        if i == n // 2:
            session.move_to(marks["third"])  # a branch
        if i == 2 * n // 3:
            session.append_compaction("summary", marks["third"], 1000)
            marks["after_compaction"] = eid
    marks["leaf"] = session.get_leaf_id()
    return marks


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Chunks of 7 entries, and a count of the GIL releases between them."""
    monkeypatch.setattr(_chunked, "CHUNK", 7)
    steps: list[int] = []
    real = _chunked._Steps.step

    def step(self: Any) -> None:
        steps.append(1)
        real(self)

    monkeypatch.setattr(_chunked._Steps, "step", step)
    return steps


@pytest.mark.parametrize("kind", ["jsonl", "memory"])
def test_chunked_reads_give_what_the_sync_session_gives(
    kind: str, tmp_path: Path, small_chunks: list[int]
) -> None:
    n = _policy.BULK_INLINE_ENTRIES + 100  # above the inline limit: in the worker
    if kind == "jsonl":
        storage: st.SessionStorage = st.JsonlSessionStorage.create(
            tmp_path / "s.jsonl", durability="none"
        )
    else:
        storage = st.InMemorySessionStorage()
    sync = st.Session(storage)
    marks = _grow(sync, n)
    reference = st.Session(storage)  # its own context cache

    async def main() -> None:
        session = st.AsyncSession.wrap(sync)
        assert await session.get_tree() == reference.get_tree()
        assert await session.get_branch() == reference.get_branch()
        for target in (marks["third"], marks["after_compaction"], None):
            assert await session.get_branch(target) == reference.get_branch(target)
        with pytest.raises(st.SessionError) as err:
            await session.get_branch("no-such-id")
        with pytest.raises(st.SessionError) as sync_err:
            reference.get_branch("no-such-id")
        assert err.value.code == sync_err.value.code
        # A cold context, then one after leaf moves (the cache's rebuild, which reuses
        # the entries it holds), each equal to a cold sync build.
        sync.clear_context_cache()
        assert await session.build_context() == reference.build_context()
        for target in (marks["third"], marks["after_compaction"], marks["leaf"]):
            await session.move_to(target)
            reference.clear_context_cache()
            assert await session.build_context() == reference.build_context()
        await session.close()

    asyncio.run(main())
    assert len(small_chunks) > 3 * n // 7  # tree, branches and contexts were chunked


def test_a_chunked_read_of_a_closed_session_fails_as_the_sync_one(tmp_path: Path) -> None:
    storage = st.InMemorySessionStorage()
    sync = st.Session(storage)
    _grow(sync, _policy.BULK_INLINE_ENTRIES + 10)

    async def main() -> None:
        session = st.AsyncSession.wrap(sync)
        await session.close()
        for call in (session.get_tree, session.get_branch, session.build_context):
            with pytest.raises(st.SessionError) as err:
                await call()
            assert err.value.code == "closed"

    asyncio.run(main())


def test_a_subclass_with_its_own_reads_is_read_through_them(tmp_path: Path) -> None:
    seen: list[str] = []

    class Storage(st.InMemorySessionStorage):
        def get_tree(self) -> list[st.TreeNode]:
            seen.append("get_tree")
            return super().get_tree()

    storage = Storage()
    _grow(st.Session(storage), _policy.BULK_INLINE_ENTRIES + 10)

    async def main() -> None:
        await st.AsyncSession(storage).get_tree()

    asyncio.run(main())
    assert seen == ["get_tree"]


def test_the_collector_is_left_as_it_was(tmp_path: Path, small_chunks: list[int]) -> None:
    import gc

    storage = st.InMemorySessionStorage()
    _grow(st.Session(storage), _policy.BULK_INLINE_ENTRIES + 10)

    async def main() -> None:
        session = st.AsyncSession(storage)
        await session.get_tree()
        assert gc.isenabled()
        gc.disable()
        try:
            await session.get_tree()
            assert not gc.isenabled()
        finally:
            gc.enable()
        # Objects the application froze (before a fork, say) stay frozen.
        gc.freeze()
        try:
            frozen = gc.get_freeze_count()
            await session.get_tree()
            # (a few of them may have been freed meanwhile; unfrozen, none would be left)
            assert gc.get_freeze_count() > frozen * 0.9
        finally:
            gc.unfreeze()

    asyncio.run(main())


def test_a_chunked_build_leaves_no_young_objects_to_scan(small_chunks: list[int]) -> None:
    """The objects a chunked build made are not left in the young generation, where the
    next collection would scan them all at once, holding the GIL."""
    import gc

    storage = st.InMemorySessionStorage()
    _grow(st.Session(storage), _policy.BULK_INLINE_ENTRIES + 10)

    async def main() -> None:
        session = st.AsyncSession(storage)
        tree = await session.get_tree()
        young = {id(o) for o in gc.get_objects(generation=0)}
        young |= {id(o) for o in gc.get_objects(generation=1)}
        assert id(tree[0]) not in young
        assert id(tree[0].entry) not in young

    asyncio.run(main())
