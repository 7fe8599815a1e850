"""The Claude Agent SDK adapter, against the real ``claude-agent-sdk`` package: the SDK's own
conformance suite for ``SessionStore`` adapters, then what the tree adds."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("claude_agent_sdk", reason="the claude-agent-sdk extra is not installed")

from claude_agent_sdk import InMemorySessionStore
from claude_agent_sdk.testing import run_session_store_conformance

import sessiontree as st
from sessiontree import AsyncSessionRepo
from sessiontree.adapters.claude_agent_sdk import (
    ENTRY_CUSTOM_TYPE,
    SUMMARY_CUSTOM_TYPE,
    ClaudeAgentSessionStore,
    session_id_for,
)

from .conftest import run

KEY: Any = {"project_key": "/home/me/project", "session_id": "5b1f0c1e-session"}


def _transcript_children(node: Any) -> list[Any]:
    return [c for c in node.children if c.entry.custom_type == ENTRY_CUSTOM_TYPE]


def _store(path: Any) -> ClaudeAgentSessionStore:
    return ClaudeAgentSessionStore(AsyncSessionRepo(st.JsonlSessionRepo(path)))


@pytest.mark.parametrize("kind", ["jsonl", "memory"])
def test_the_sdks_conformance_suite(tmp_path: Any, kind: str) -> None:
    stores: list[ClaudeAgentSessionStore] = []

    def make_store() -> ClaudeAgentSessionStore:
        repo = (
            st.JsonlSessionRepo(tmp_path / str(len(stores)))
            if kind == "jsonl"
            else st.InMemorySessionRepo()
        )
        # A plain SessionRepo is wrapped; an AsyncSessionRepo is taken as it is.
        stores.append(ClaudeAgentSessionStore(repo if kind == "memory" else AsyncSessionRepo(repo)))
        return stores[-1]

    async def main() -> None:
        try:
            await run_session_store_conformance(make_store)
        finally:
            for store in stores:
                await store.close()

    run(main())
    assert len(stores) > 10  # one fresh store per contract: the suite really ran


def _transcript() -> list[Any]:
    """A Claude Code transcript with a rewind: the second answer was regenerated, so two
    entries share a parent."""
    return [
        {"type": "summary", "summary": "Fixing tests", "leafUuid": "a2"},
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "message": {"role": "user", "content": "fix it"},
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Done"}]},
        },
        {
            "type": "user",
            "uuid": "u2",
            "parentUuid": "a1",
            "message": {"role": "user", "content": "really?"},
        },
        {"type": "assistant", "uuid": "a2", "parentUuid": "u2", "message": {"content": "yes"}},
        {
            "type": "assistant",
            "uuid": "a2b",
            "parentUuid": "u2",
            "message": {"content": "let me check"},
        },
        {"type": "custom-title", "customTitle": "tests"},
    ]


def test_the_transcript_tree_is_the_sessions_tree(tmp_path: Any) -> None:
    entries = _transcript()

    async def main() -> None:
        store = _store(tmp_path)
        await store.append(KEY, entries[:3])
        await store.append(KEY, entries[3:])
        await store.append(KEY, entries[1:3])  # the SDK retries a batch: no duplicates
        assert await store.load(KEY) == entries
        await store.close()

    run(main())
    with st.JsonlSessionRepo(tmp_path).open(session_id_for(KEY)) as session:
        assert session.get_session_name() == KEY["session_id"]
        assert session.storage.get_metadata().cwd == KEY["project_key"]
        (root,) = [r for r in session.get_tree() if r.entry.id == "u1"]
        (a1,) = _transcript_children(root)
        (u2,) = _transcript_children(a1)
        assert [c.entry.id for c in _transcript_children(u2)] == ["a2", "a2b"]
        # Each batch's running summary hangs beside the transcript, under its last entry.
        summaries = [c for c in a1.children if c.entry.custom_type == SUMMARY_CUSTOM_TYPE]
        assert len(summaries) == 1 and summaries[0].children == ()
        assert session.get_entry("a2").parent_id == "u2"
        # The title without a uuid hangs under the entry before it.
        title = next(e for e in session.storage.get_entries("custom") if "customTitle" in e.data)
        assert title.parent_id == "a2b"
        kinds = {e.custom_type for e in session.storage.get_entries("custom")}
        assert kinds == {ENTRY_CUSTOM_TYPE, SUMMARY_CUSTOM_TYPE}
        # A sessiontree fork at an answer copies its path.
    repo = st.JsonlSessionRepo(tmp_path)
    fork = repo.fork(session_id_for(KEY), entry_id="a2", position="at")
    assert [e.id for e in fork.get_branch()] == ["u1", "a1", "u2", "a2"]
    fork.close()


def test_same_answers_as_the_sdks_in_memory_store(tmp_path: Any) -> None:
    sub = {**KEY, "subpath": "subagents/agent-7"}

    async def scenario(store: Any) -> Any:
        await store.append(KEY, _transcript())
        await store.append(sub, [{"type": "user", "uuid": "s1", "parentUuid": None}])
        await store.append({**KEY, "session_id": "other"}, [{"type": "x"}])
        out = [
            await store.load(KEY),
            await store.load(sub),
            await store.load({**KEY, "session_id": "never"}),
            sorted(s["session_id"] for s in await store.list_sessions(KEY["project_key"])),
            await store.list_subkeys(KEY),
            sorted(
                (x["session_id"], json.dumps(x["data"], sort_keys=True))
                for x in await store.list_session_summaries(KEY["project_key"])
            ),
        ]
        await store.delete(KEY)
        out += [await store.load(KEY), await store.load(sub), await store.list_subkeys(KEY)]
        out.append(
            sorted(x["session_id"] for x in await store.list_session_summaries(KEY["project_key"]))
        )
        return out

    async def main() -> None:
        ours = _store(tmp_path)
        assert await scenario(ours) == await scenario(InMemorySessionStore())
        await ours.close()

    run(main())


def test_bad_input_is_refused_and_nothing_is_written(tmp_path: Any) -> None:
    async def main() -> None:
        store = _store(tmp_path)
        await store.append(KEY, [{"type": "x", "uuid": "k"}])
        for key, entries in (
            (KEY, "nope"),
            (KEY, [{"type": "x"}, 5]),
            (KEY, [{"type": "x", "v": {1, 2}}]),
            ({"project_key": 1, "session_id": "s"}, [{"type": "x"}]),
            ({**KEY, "subpath": ""}, [{"type": "x"}]),
        ):
            with pytest.raises(st.SessionError) as err:
                await store.append(key, entries)
            assert err.value.code == "invalid_argument"
        assert await store.load(KEY) == [{"type": "x", "uuid": "k"}]
        await store.close()

    run(main())
    lines = (tmp_path / f"{session_id_for(KEY)}.jsonl").read_text().splitlines()
    kinds = [json.loads(line).get("custom_type", json.loads(line)["type"]) for line in lines]
    assert kinds == ["session", "session_info", ENTRY_CUSTOM_TYPE, SUMMARY_CUSTOM_TYPE]


def test_a_small_append_to_an_open_transcript_is_written_without_a_thread_hop(
    tmp_path: Any,
) -> None:
    """A transcript mirror frame (a few small entries) is appended inline on the event loop
    once its session is open: done within the task's first step, where a worker thread's
    answer takes at least one more turn of the loop."""
    import asyncio

    async def main() -> None:
        store = _store(tmp_path)
        key: Any = {"project_key": "/p", "session_id": "s"}
        await store.append(key, [{"type": "user", "uuid": "u0"}])  # creates the session
        done: list[bool] = []

        async def frame() -> None:
            await store.append(key, [{"type": "assistant", "uuid": "a1"}])
            done.append(True)

        task = asyncio.ensure_future(frame())
        await asyncio.sleep(0)
        assert done == [True]
        await task
        loaded = await store.load(key)
        assert [e["uuid"] for e in loaded or []] == ["u0", "a1"]
        big = [{"type": "user", "uuid": f"b{i}", "text": "x" * 100} for i in range(40)]
        await store.append(key, big)  # more than a frame: in the lane, same result
        assert len(await store.load(key) or []) == 42
        await store.close()

    run(main())


def test_sessions_written_one_after_another_list_in_that_order(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK sorts sessions by ``mtime``, merging ``list_sessions``' with the summaries'
    (its own test ``test_mixed_sessions_gap_filled`` failed on a tie): appends within one
    millisecond still stamp strictly later times, and a session's summary ``mtime`` is its
    listed ``mtime``. The store's clock is held still to make every append fall in one
    millisecond; a minute ahead, so each session's header (stamped by the real clock when it
    is made) stays older than its entries, as it is when no clock is held."""
    from sessiontree.adapters import claude_agent_sdk as adapter

    frozen = adapter.now_ms() + 60_000
    monkeypatch.setattr(adapter, "now_ms", lambda: frozen)

    async def main() -> tuple[list[Any], list[Any]]:
        store = _store(tmp_path)
        for k in range(5):
            key: Any = {"project_key": "/p", "session_id": f"s{k}"}
            await store.append(key, [{"type": "user", "uuid": f"u{k}"}])
        listed = await store.list_sessions("/p")
        summaries = await store.list_session_summaries("/p")
        await store.close()
        return listed, summaries

    listed, summaries = run(main())
    mtimes = {row["session_id"]: row["mtime"] for row in listed}
    in_order = [mtimes[f"s{k}"] for k in range(5)]
    assert in_order == sorted(set(in_order)), in_order  # strictly later, write by write
    assert {s["session_id"]: s["mtime"] for s in summaries} == mtimes
