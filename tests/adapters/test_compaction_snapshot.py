"""The SDK compaction session's snapshot hook (``_get_compaction_snapshot``) on
:class:`OpenAIAgentsSession`: a compaction rewrites only the suffix it summarized, by
moving the leaf and appending, so the history before it stays in the file as a branch.

The ``Runner`` runs with the SDK's scripted model and the compaction session with a stub
client (no network).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock, MagicMock

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from agents import Agent, RunConfig, Runner, set_tracing_disabled
from agents.memory import OpenAIResponsesCompactionSession
from agents.testing import ScriptedModel, assistant_message

import sessiontree as st
from sessiontree import AsyncSessionRepo
from sessiontree.adapters.openai_agents import OpenAIAgentsSession

from .conftest import run

SUMMARY = {"type": "compaction", "id": "cmp_1", "encrypted_content": "SUMMARY"}


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)


@pytest.fixture
def repo(tmp_path: Any) -> AsyncSessionRepo:
    return AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))


def _stub_client() -> Any:
    client = MagicMock()
    client.responses.compact = AsyncMock(return_value=SimpleNamespace(output=[SUMMARY]))
    return client


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_automatic_compaction_under_a_read_limit_keeps_the_old_suffix_as_a_branch(
    repo: AsyncSessionRepo, tmp_path: Any
) -> None:
    answer = assistant_message("ok", item_id="msg_1").model_dump(exclude_unset=True)
    client = _stub_client()

    async def main() -> None:
        # The model sees one stored item (session_settings.limit=1): the compaction may
        # summarize only what it saw, so it replaces the stored suffix, not the history.
        session = await OpenAIAgentsSession.open(repo, "chat", session_settings={"limit": 1})
        await session.add_items([_user("early"), _user("tail")])
        compaction = OpenAIResponsesCompactionSession(
            "chat",
            session,
            client=client,
            compaction_mode="input",
            should_trigger_compaction=lambda _: True,
        )
        model = ScriptedModel([[assistant_message("ok", item_id="msg_1")]])
        result = await Runner.run(Agent(name="a", model=model), "next", session=compaction)
        assert result.final_output == "ok"
        assert model.calls[0].input == [_user("tail"), _user("next")]
        client.responses.compact.assert_awaited_once_with(
            model="gpt-4.1", input=[_user("tail"), _user("next"), answer]
        )
        assert await session.get_items(limit=100) == [_user("early"), SUMMARY]
        await session.close()

    run(main())

    async def check() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        assert await session.get_items() == [_user("early"), SUMMARY]
        branches = await session.list_branches()
        assert [(b.item_count, b.current) for b in branches] == [(4, False), (2, True)]
        # The history before the compaction is all there, on its branch.
        await session.branch(from_entry=branches[0].leaf_id)
        assert await session.get_items() == [_user("early"), _user("tail"), _user("next"), answer]
        # One tree: the kept item is shared, nothing was written twice.
        assert len(session.session.session.get_tree()) == 1
        await session.close()

    run(check())
    lines = [json.loads(line) for line in (tmp_path / "chat.jsonl").read_text().splitlines()]
    assert len([line for line in lines if line.get("type") == "message"]) == 4
    assert [line["data"] for line in lines if line.get("type") == "custom"] == [SUMMARY]


def test_a_full_snapshot_replaces_the_whole_branch(repo: AsyncSessionRepo) -> None:
    client = _stub_client()

    async def main() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        compaction = OpenAIResponsesCompactionSession(
            "chat",
            session,
            client=client,
            compaction_mode="input",
            should_trigger_compaction=lambda _: True,
        )
        model = ScriptedModel([[assistant_message("one")], [assistant_message("two")]])
        agent = Agent(name="a", model=model)
        await Runner.run(agent, "first", session=compaction)
        assert await session.get_items() == [SUMMARY]
        await Runner.run(agent, "second", session=compaction, run_config=RunConfig())
        assert model.calls[1].input == [SUMMARY, _user("second")]
        assert await session.get_items() == [SUMMARY]
        branches = await session.list_branches()
        # Each compaction left the history it replaced as a branch.
        assert [(b.item_count, b.current) for b in branches] == [(2, False), (3, False), (1, True)]
        await session.close()

    run(main())


def test_a_stale_snapshot_changes_nothing(repo: AsyncSessionRepo) -> None:
    async def main() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        await session.add_items([_user("a"), _user("b"), _user("c")])
        snapshot = await session._get_compaction_snapshot(2)
        assert (snapshot.items, snapshot.complete) == ([_user("b"), _user("c")], False)
        whole = await session._get_compaction_snapshot(3)
        assert whole.complete
        await session.add_items([_user("d")])  # the branch no longer ends with b, c
        assert not await snapshot.replace_suffix(0, [SUMMARY])
        assert await session.get_items() == [_user(x) for x in "abcd"]
        assert len(await session.list_branches()) == 1
        # A fresh one replaces from its start on.
        snapshot = await session._get_compaction_snapshot(2)
        assert await snapshot.replace_suffix(1, [SUMMARY])
        assert await session.get_items() == [_user("a"), _user("b"), _user("c"), SUMMARY]
        assert not await snapshot.replace_suffix(1, [SUMMARY])  # used: stale now
        await session.close()

    run(main())


def test_prune_prefix_starts_a_new_branch_without_the_pruned_items(repo: AsyncSessionRepo) -> None:
    async def main() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        items = [_user("expired 1"), _user("expired 2"), _user("kept"), _user("s1"), _user("s2")]
        await session.add_items(items)

        def expired(item: Any) -> bool:
            return str(item["content"]).startswith("expired")

        snapshot = await session._get_compaction_snapshot(2, prune_prefix=expired)
        assert await snapshot.replace_suffix(0, [SUMMARY])
        assert await session.get_items() == [_user("kept"), SUMMARY]
        branches = await session.list_branches()
        assert [(b.item_count, b.current) for b in branches] == [(5, False), (2, True)]
        await session.branch(from_entry=branches[0].leaf_id)
        assert await session.get_items() == items
        await session.close()

    run(main())


def test_a_subclass_that_changes_reads_or_writes_gets_no_snapshot(
    repo: AsyncSessionRepo,
) -> None:
    class Filtering(OpenAIAgentsSession):
        async def get_items(self, limit: int | None = None) -> list[Any]:
            return [i for i in await super().get_items(limit) if i.get("role") != "system"]

    async def main() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        assert await Filtering(session.session)._get_compaction_snapshot(5) is None
        assert await session._get_compaction_snapshot(5) is not None
        await session.close()

    run(main())
