"""The pydantic-ai store's ``message_copies="shared"`` (issue 27, item 4): a load hands out
the same message objects each time, built once, so a turn (load, then save the new
messages) builds only what is new; ``"fresh"`` hands out new objects each time, as
pydantic-ai's ``InMemoryConversationStore`` does; ``"tail"`` (the default, item 3 of the
issue's closing note) shares the history up to its last request and hands out new objects
from there on, the part an agent run changes in place. All load what was saved, by this
store, another store on the session, or another process's (a new index)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

import sessiontree as st
from sessiontree import AsyncSessionRepo
from sessiontree.adapters.pydantic_ai import PydanticAIConversationStore, _indexes

from .conftest import run

WHEN = datetime(2026, 12, 1, tzinfo=timezone.utc)


def _turn(n: int, value: Any = "ok") -> list[Any]:
    return [
        ModelRequest(parts=[UserPromptPart(f"question {n}", timestamp=WHEN)]),
        ModelResponse(parts=[ToolCallPart("t", {"n": n}, f"c{n}")], timestamp=WHEN),
        ModelRequest(parts=[ToolReturnPart("t", value, f"c{n}", timestamp=WHEN)]),
        ModelResponse(parts=[TextPart(f"answer {n}")], timestamp=WHEN),
    ]


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def test_shared_loads_hand_out_the_same_objects_and_fresh_ones_new(tmp_path: Path) -> None:
    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        shared = await PydanticAIConversationStore.open(repo, "s", message_copies="shared")
        fresh = await PydanticAIConversationStore.open(repo, "s", message_copies="fresh")
        await shared.save(Conversation(conversation_id="c", messages=_turn(0)))
        a = (await shared.load("c")).messages
        b = (await shared.load("c")).messages
        assert a == b == _turn(0)
        assert all(x is y for x, y in zip(a, b, strict=True))
        c = (await fresh.load("c")).messages
        d = (await fresh.load("c")).messages
        assert c == d == _turn(0)
        assert not any(x is y for x, y in zip(c, d, strict=True))
        # Turns through either store: each sees the other's saves.
        conversation = await shared.load("c")
        conversation.messages.extend(_turn(1))
        await shared.save(conversation)
        conversation = await fresh.load("c")
        conversation.messages.extend(_turn(2))
        await fresh.save(conversation)
        want = _turn(0) + _turn(1) + _turn(2)
        assert (await shared.load("c")).messages == want
        assert (await fresh.load("c")).messages == want
        assert (await shared.load("c", limit=3)).messages == want[-3:]
        assert (await shared.load("c", limit=0)).messages == []
        await shared.close()
        await fresh.close()

    run(main())


@pytest.mark.parametrize("depth", [150, 250])
def test_a_shared_store_loads_what_any_store_saved(tmp_path: Path, depth: int) -> None:
    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        writer = await PydanticAIConversationStore.open(repo, "s")
        messages = _turn(0, _nested(depth)) + _turn(1)
        await writer.save(Conversation(conversation_id="c", messages=messages))
        await writer.close()
        _indexes.clear()  # as a new process would find it: nothing built yet
        reader = await PydanticAIConversationStore.open(repo, "s", message_copies="shared")
        assert (await reader.load("c")).messages == messages
        conversation = await reader.load("c")
        conversation.messages.extend(_turn(2))
        await reader.save(conversation)
        assert (await reader.load("c")).messages == messages + _turn(2)
        await reader.close()

    run(main())


def test_message_copies_is_checked(tmp_path: Path) -> None:
    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        with pytest.raises(st.SessionError) as err:
            await PydanticAIConversationStore.open(repo, "s", message_copies="deep")  # type: ignore[arg-type]
        assert err.value.code == "invalid_argument"

    run(main())


def test_tail_loads_share_the_history_but_not_its_tail(tmp_path: Path) -> None:
    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        store = await PydanticAIConversationStore.open(repo, "s")
        given = _turn(0) + _turn(1)
        await store.save(Conversation(conversation_id="c", messages=given))
        a = (await store.load("c")).messages
        b = (await store.load("c")).messages
        assert a == b == given
        # The last request is at -2: from there on new objects each load, before it the
        # store's own objects (never the ones the save was given).
        assert all(x is y for x, y in zip(a[:-2], b[:-2], strict=True))
        assert not any(x is y for x, y in zip(a[-2:], b[-2:], strict=True))
        assert not any(x is y for x, y in zip(a, given, strict=True))
        # What an agent run does to the tail (pydantic-ai fills the persisted request's
        # run metadata and appends parts to it) stays out of later loads.
        request = a[-2]
        assert isinstance(request, ModelRequest)
        request.run_id = "run-x"
        request.parts = [*request.parts, UserPromptPart("added", timestamp=WHEN)]
        again = (await store.load("c")).messages
        assert again == given
        # Turns keep building on the shared history.
        conversation = await store.load("c")
        conversation.messages.extend(_turn(2))
        await store.save(conversation)
        assert (await store.load("c")).messages == given + _turn(2)
        assert (await store.load("c", limit=3)).messages == (given + _turn(2))[-3:]
        await store.close()

    run(main())


def test_an_agent_run_over_a_loaded_history_leaves_later_loads_as_saved(tmp_path: Path) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def reply(messages: list[Any], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("done")])

    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        store = await PydanticAIConversationStore.open(repo, "s")
        saved = [*_turn(0), ModelRequest(parts=[UserPromptPart("next", timestamp=WHEN)])]
        await store.save(Conversation(conversation_id="c", messages=saved))
        loaded = (await store.load("c")).messages
        result = await Agent(FunctionModel(reply)).run(message_history=loaded)
        assert result.output == "done"
        assert (await store.load("c")).messages == saved
        await store.close()

    run(main())
