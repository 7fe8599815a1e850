"""The OpenAI adapter's cached view of the branch against the branch itself: whatever moves
the leaf (its own appends, another object's, pops, clears, branches, a compaction written
by other code), ``get_items`` is what converting the current branch gives, and the items
it returns are the caller's to change."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

import sessiontree as st
from sessiontree.adapters.openai_agents import OpenAIAgentsSession, entry_to_items

from .conftest import run


def _item(rng: random.Random, n: int) -> Any:
    kind = rng.randrange(6)
    if kind == 0:
        return {"role": "user", "content": f"question {n}"}
    if kind == 1:
        return {
            "id": f"rs_{n}",
            "summary": [{"text": f"think {n}", "type": "summary_text"}],
            "type": "reasoning",
        }
    if kind == 2:
        return {
            "arguments": json.dumps({"n": n, "deep": {"list": [1, 2, {"x": n}]}}),
            "call_id": f"call_{n}",
            "name": "tool",
            "type": "function_call",
        }
    if kind == 3:
        return {"call_id": f"call_{n}", "output": f"out {n}\n" * 3, "type": "function_call_output"}
    if kind == 4:
        return {
            "id": f"msg_{n}",
            "content": [{"annotations": [], "text": f"answer {n}", "type": "output_text"}],
            "role": "assistant",
            "status": "completed",
            "type": "message",
        }
    return {"type": "web_search_call", "id": f"ws_{n}", "status": "completed", "n": [n]}


def _expected(obj: OpenAIAgentsSession) -> list[Any]:
    branch = obj.session.session.get_branch()
    return [item for entry in branch for item in entry_to_items(entry)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("where", ["jsonl", "memory", "no-engine"])
def test_view_follows_every_leaf_move(
    tmp_path: Path, seed: int, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if where == "no-engine":
        # What a storage without the engine's lines (PostgreSQL, a pi file, one's own)
        # goes through: entry objects, walks by get_entry.
        from sessiontree.adapters import openai_agents

        monkeypatch.setattr(openai_agents, "_engine_of", lambda storage: None)
        monkeypatch.setattr(openai_agents, "_WALK_MOST", 3)
    run(_follow(tmp_path, seed, where))


async def _follow(tmp_path: Path, seed: int, where: str) -> None:
    rng = random.Random(seed)
    if where == "jsonl":
        repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        a = await OpenAIAgentsSession.open(repo, "s")
        b = await OpenAIAgentsSession.open(repo, "s")  # shares a's session
    else:
        a = OpenAIAgentsSession(st.Session(st.InMemorySessionStorage()))
        b = OpenAIAgentsSession(a.session)
    count = 0
    marks: list[str] = []
    for _ in range(60):
        op = rng.randrange(10)
        obj = a if rng.random() < 0.6 else b
        if op <= 3:
            batch = [_item(rng, count + k) for k in range(rng.randrange(1, 4))]
            count += len(batch)
            await obj.add_items(batch)
        elif op == 4:
            await obj.pop_item()
        elif op == 5 and rng.random() < 0.3:
            await obj.clear_session()
        elif op == 6:
            entries = await obj.get_item_entries()
            if entries:
                marks.append(rng.choice(entries).entry_id)
                await obj.branch(at=rng.randrange(len(entries) + 1))
        elif op == 7 and marks:
            await obj.branch(from_entry=rng.choice(marks))
        elif op == 8:
            # Other code writes on the session: a model change, now and then a compaction.
            sync = obj.session.session
            if rng.random() < 0.5 and sync.get_leaf_id() is not None:
                sync.append_compaction("summary", sync.get_leaf_id(), 100)
            else:
                sync.append_model_change("openai", "gpt-x")
        else:
            turns = sum(1 for item in await obj.get_items() if item.get("role") == "user")
            if turns:
                await obj.branch(turn=rng.randrange(turns + 1))
        for checked in (a, b):
            want = _expected(checked)
            got = await checked.get_items()
            assert json.dumps(got) == json.dumps(want)
            entries = await checked.get_item_entries()
            assert [e.item for e in entries] == got
            branch = checked.session.session.get_branch()
            assert [e.entry_id for e in entries] == [
                entry.id for entry in branch for _ in entry_to_items(entry)
            ]
            if got:
                limit = rng.randrange(1, len(got) + 1)
                assert await checked.get_items(limit=limit) == got[-limit:]
    await a.close()
    await b.close()


def test_returned_items_are_the_callers(tmp_path: Path) -> None:
    run(_callers(tmp_path))


async def _callers(tmp_path: Path) -> None:
    repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
    session = await OpenAIAgentsSession.open(repo, "s")
    items = [_item(random.Random(k), k) for k in range(12)]
    await session.add_items(items)
    snapshot = json.dumps(items)
    for item in items:  # the caller's own objects, changed after adding
        item.clear()
    got = await session.get_items()
    assert json.dumps(got) == snapshot
    for item in got:
        for value in item.values():
            if isinstance(value, list):
                value.append("changed")
                for inner in value:
                    if isinstance(inner, dict):
                        inner["changed"] = True
        item["changed"] = True
    assert json.dumps(await session.get_items()) == snapshot
    popped = await session.pop_item()
    assert popped is not None
    popped["changed"] = True
    await session.add_items([json.loads(snapshot)[-1]])
    assert json.dumps(await session.get_items()) == snapshot
    await session.close()


def test_shared_items_are_the_objects_own(tmp_path: Path) -> None:
    async def main() -> None:
        repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        session = await OpenAIAgentsSession.open(repo, "s", item_copies="shared")
        items = [_item(random.Random(k), k) for k in range(12)]
        await session.add_items(items)
        first = await session.get_items()
        assert json.dumps(first) == json.dumps(items)
        second = await session.get_items()
        assert second is not first
        assert all(a is b for a, b in zip(first, second, strict=True))
        popped = await session.pop_item()  # pop_item still hands out a copy
        assert popped == items[-1]
        assert popped is not first[-1]
        await session.close()
        with pytest.raises(st.SessionError):
            OpenAIAgentsSession(st.Session(st.InMemorySessionStorage()), item_copies="x")  # type: ignore[arg-type]

    run(main())
