"""The Claude Agent SDK and pydantic-ai stores write a batch all or nothing, share a
session between store objects of one process, and (pydantic-ai) load whatever they saved
(issue 27, items 2 and 3). Real frameworks, no mocks."""

from __future__ import annotations

from typing import Any

import pytest

import sessiontree as st
from sessiontree import AsyncSessionRepo

from .conftest import run


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


# ------------------------------------------------------------------- Claude Agent SDK


@pytest.fixture
def claude() -> Any:
    pytest.importorskip("claude_agent_sdk", reason="the claude-agent-sdk extra is not installed")
    from sessiontree.adapters import claude_agent_sdk

    return claude_agent_sdk


KEY: dict[str, Any] = {"project_key": "/work/p", "session_id": "s-1"}


def _entry(n: int, **extra: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": f"u{n}", "parentUuid": f"u{n - 1}" if n else None, **extra}


def test_claude_append_writes_nothing_of_a_failing_batch(claude: Any, tmp_path: Any) -> None:
    async def main() -> None:
        store = claude.ClaudeAgentSessionStore(st.JsonlSessionRepo(tmp_path))
        bad = _entry(1, message={"content": _nested(200)})
        # A first batch: no session is left behind.
        with pytest.raises(st.SessionError) as err:
            await store.append(KEY, [_entry(0), bad])
        assert err.value.code == "limit_exceeded"
        assert await store.load(KEY) is None
        assert await store.list_sessions("/work/p") == []
        # A later batch: the transcript is what it was.
        await store.append(KEY, [_entry(0)])
        with pytest.raises(st.SessionError):
            await store.append(KEY, [_entry(1), _entry(2), _entry(3, message=bad["message"])])
        assert await store.load(KEY) == [_entry(0)]
        session = store._open[claude.session_id_for(KEY)].session
        assert len(session.storage) == 3  # its name, the entry and its summary: no more
        await store.close()

    run(main())


def test_claude_append_is_checked_against_the_repositorys_limits(
    claude: Any, tmp_path: Any
) -> None:
    async def main() -> None:
        repo = st.JsonlSessionRepo(tmp_path, limits=st.Limits(max_line_bytes=4096))
        store = claude.ClaudeAgentSessionStore(repo)
        await store.append(KEY, [_entry(0)])
        with pytest.raises(st.SessionError) as err:
            await store.append(KEY, [_entry(1), _entry(2, text="x" * 5000)])
        assert err.value.code == "limit_exceeded"
        assert await store.load(KEY) == [_entry(0)]
        await store.close()

    run(main())


def test_claude_stores_of_one_process_share_a_session(claude: Any, tmp_path: Any) -> None:
    async def main() -> None:
        first = claude.ClaudeAgentSessionStore(AsyncSessionRepo(st.JsonlSessionRepo(tmp_path)))
        second = claude.ClaudeAgentSessionStore(st.JsonlSessionRepo(tmp_path))
        await first.append(KEY, [_entry(0)])
        await second.append(KEY, [_entry(1)])
        assert await first.load(KEY) == await second.load(KEY) == [_entry(0), _entry(1)]
        await first.close()
        await second.append(KEY, [_entry(2)])
        assert len(await second.load(KEY)) == 3
        await second.close()

    run(main())


# ------------------------------------------------------------------------ pydantic-ai


@pytest.fixture
def pai() -> Any:
    pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
    from sessiontree.adapters import pydantic_ai

    return pydantic_ai


def _conversation(messages: list[Any]) -> Any:
    from pydantic_ai.conversation import Conversation

    return Conversation(conversation_id="c", messages=messages)


def _tool_turn(value: Any) -> list[Any]:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    return [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[ToolCallPart("t", {}, "c1")]),
        ModelRequest(parts=[ToolReturnPart("t", value, "c1")]),
    ]


@pytest.mark.parametrize("depth", [150, 200, 250])
def test_pydantic_ai_store_loads_a_deeply_nested_tool_return_it_saved(
    pai: Any, tmp_path: Any, depth: int
) -> None:
    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        messages = _tool_turn(_nested(depth))
        store = await pai.PydanticAIConversationStore.open(repo, "store")
        await store.save(_conversation(messages))
        assert (await store.load("c")).messages == messages
        await store.close()
        fresh = await pai.PydanticAIConversationStore.open(repo, "store")
        assert (await fresh.load("c")).messages == messages
        await fresh.close()

    run(main())


def test_pydantic_ai_save_writes_nothing_of_a_failing_batch(pai: Any, tmp_path: Any) -> None:
    from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, UserPromptPart

    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        store = await pai.PydanticAIConversationStore.open(repo, "store")
        before = len(store.session.storage)  # the store's name
        messages = [
            ModelRequest(parts=[UserPromptPart("hi")]),
            ModelResponse(parts=[ToolCallPart("t", {"deep": _nested(150)}, "c1")]),
        ]
        with pytest.raises(st.SessionError) as err:
            await store.save(_conversation(messages))
        assert err.value.code == "limit_exceeded"
        assert len(store.session.storage) == before
        assert await store.load("c") is None
        await store.save(_conversation(messages[:1]))
        assert (await store.load("c")).messages == messages[:1]
        await store.close()

    run(main())


def test_pydantic_ai_stores_of_one_process_share_a_session_and_its_records(
    pai: Any, tmp_path: Any
) -> None:
    from pydantic_ai.conversation_store import ConversationConflict
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    async def main() -> None:
        repo = st.JsonlSessionRepo(tmp_path)
        first = await pai.PydanticAIConversationStore.open(repo, "store")
        second = await pai.PydanticAIConversationStore.open(AsyncSessionRepo(repo), "store")
        assert first.session is second.session
        await first.save(_conversation([ModelRequest(parts=[UserPromptPart("one")])]))
        mine = await second.load("c")
        theirs = await first.load("c")
        theirs.messages.append(ModelRequest(parts=[UserPromptPart("two")]))
        await first.save(theirs)
        # The second store checks revisions against the record the first one wrote.
        mine.messages.append(ModelRequest(parts=[UserPromptPart("stale")]))
        with pytest.raises(ConversationConflict):
            await second.save(mine)
        await first.close()
        assert len((await second.load("c")).messages) == 2
        await second.close()
        with pytest.raises(st.SessionError) as err:
            await second.load("c")
        assert err.value.code == "closed"

    run(main())
