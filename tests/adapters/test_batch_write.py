"""A batch goes to the session as one unit (issue 27, item 3): the OpenAI adapter's
``add_items``, the Claude store's ``append`` and the pydantic-ai store's ``save`` are
checked whole and written with one write, so a write that fails (a full disk, here the
engine's injected fault) leaves nothing of the batch in the file, and the storage's
``append_entries`` refuses a batch with a bad entry anywhere before writing any of it.
Real frameworks, real files and a real PostgreSQL server; no mocks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import sessiontree as st
from sessiontree import AsyncSessionRepo
from sessiontree.model.entries import CustomEntry, MessageEntry
from sessiontree.model.messages import UserMessage

from .conftest import run


def _fail_next_write(session: Any) -> None:
    engine = session.storage._engine
    if not hasattr(engine, "inject_fault"):
        pytest.skip("the extension was built without test hooks")
    engine.inject_fault("write", 28)  # ENOSPC


def _file_of(root: Path) -> bytes:
    (path,) = root.glob("*.jsonl")
    return path.read_bytes()


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# ---------------------------------------------------------------------- the storage


def _chain(parent: str | None, ids: list[str]) -> list[Any]:
    out = []
    for entry_id in ids:
        out.append(
            MessageEntry(
                id=entry_id,
                parent_id=parent,
                timestamp="2026-01-01T00:00:00.000Z",
                message=UserMessage(content=entry_id, timestamp=1),
            )
        )
        parent = entry_id
    return out


def test_append_entries_refuses_a_bad_entry_anywhere_before_writing(tmp_path: Path) -> None:
    repo = st.JsonlSessionRepo(tmp_path)
    with repo.create(session_id="s") as session:
        root = session.append_message(UserMessage(content="root", timestamp=1))
        before = _file_of(tmp_path)
        good = _chain(root, ["a0000001", "a0000002", "a0000003"])
        dangling = CustomEntry(
            id="a0000004", parent_id="nowhere0", timestamp="T", custom_type="k", data=None
        )
        for bad, code in [(dangling, "not_found"), (good[0], "duplicate_id")]:
            with pytest.raises(st.SessionError) as err:
                session.storage.append_entries([*good, bad])
            assert err.value.code == code
            assert "line 3 of the batch" in err.value.message
            assert _file_of(tmp_path) == before
            assert len(session.storage) == 1
        session.storage.append_entries(good)
        assert [e.id for e in session.get_branch()] == [root, *(e.id for e in good)]
        # The context cache of the session follows (the adapters tell it).
        assert len(session.build_context().messages) == 4
    with repo.open("s") as again:
        assert [e.id for e in again.get_branch()][1:] == [e.id for e in good]


def test_append_entries_on_postgres_is_one_transaction(pg_server: Any, pg_schema: str) -> None:
    with st.PostgresSessionRepo(pg_server.dsn, schema=pg_schema) as repo:
        with repo.create(session_id="batch") as session:
            root = session.append_message(UserMessage(content="root", timestamp=1))
            good = _chain(root, ["b0000001", "b0000002"])
            with pytest.raises(st.SessionError):
                session.storage.append_entries([*good, good[0]])
            session.storage.append_entries(good)
        with repo.open("batch") as again:
            assert [e.id for e in again.get_branch()] == [root, "b0000001", "b0000002"]


# ------------------------------------------------------------------- the adapters


def test_openai_add_items_failing_write_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    pytest.importorskip("agents", reason="the openai-agents extra is not installed")
    from sessiontree.adapters.openai_agents import OpenAIAgentsSession

    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        session = await OpenAIAgentsSession.open(repo, "user:1")
        await session.add_items([_user("first")])
        before = _file_of(tmp_path)
        _fail_next_write(session.session.session)
        with pytest.raises(st.SessionError) as err:
            await session.add_items([_user("one"), _user("two"), _user("three")])
        assert err.value.code == "io"
        assert _file_of(tmp_path) == before
        assert await session.get_items() == [_user("first")]
        await session.add_items([_user("after"), _user("again")])
        want = [_user("first"), _user("after"), _user("again")]
        assert await session.get_items() == want
        await session.close()
        reopened = await OpenAIAgentsSession.open(repo, "user:1")
        assert await reopened.get_items() == want
        await reopened.close()

    run(main())


def test_openai_add_items_on_postgres_writes_the_batch(pg_server: Any, pg_schema: str) -> None:
    pytest.importorskip("agents", reason="the openai-agents extra is not installed")
    from sessiontree.adapters.openai_agents import OpenAIAgentsSession

    async def main() -> None:
        with st.PostgresSessionRepo(pg_server.dsn, schema=pg_schema) as sync:
            repo = AsyncSessionRepo(sync)
            session = await OpenAIAgentsSession.open(repo, "user:pg-batch")
            items = [_user(f"m{n}") for n in range(40)]
            await session.add_items(items)
            await session.close()
            again = await OpenAIAgentsSession.open(repo, "user:pg-batch")
            assert await again.get_items() == items
            await again.close()

    run(main())


def test_claude_append_failing_write_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    pytest.importorskip("claude_agent_sdk", reason="the claude-agent-sdk extra is not installed")
    from sessiontree.adapters import claude_agent_sdk as claude

    key: Any = {"project_key": "/work/p", "session_id": "s-1"}

    def entry(n: int) -> dict[str, Any]:
        return {"type": "user", "uuid": f"u{n}", "parentUuid": f"u{n - 1}" if n else None}

    async def main() -> None:
        store = claude.ClaudeAgentSessionStore(st.JsonlSessionRepo(tmp_path))
        await store.append(key, [entry(0)])
        before = _file_of(tmp_path)
        _fail_next_write(store._open[claude.session_id_for(key)].session.session)
        with pytest.raises(st.SessionError) as err:
            await store.append(key, [entry(1), entry(2)])
        assert err.value.code == "io"
        assert _file_of(tmp_path) == before
        assert await store.load(key) == [entry(0)]
        await store.append(key, [entry(1), entry(2)])
        assert await store.load(key) == [entry(0), entry(1), entry(2)]
        await store.close()

    run(main())


def test_pydantic_ai_save_failing_write_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    from sessiontree.adapters import pydantic_ai as pai

    messages = [ModelRequest(parts=[UserPromptPart("hi")]), ModelResponse(parts=[TextPart("yo")])]

    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        store = await pai.PydanticAIConversationStore.open(repo, "store")
        await store.save(Conversation(conversation_id="other", messages=messages[:1]))
        before = _file_of(tmp_path)
        _fail_next_write(store.session.session)
        with pytest.raises(st.SessionError) as err:
            await store.save(Conversation(conversation_id="c", messages=messages))
        assert err.value.code == "io"
        assert _file_of(tmp_path) == before
        assert await store.load("c") is None
        await store.save(Conversation(conversation_id="c", messages=messages))
        assert (await store.load("c")).messages == messages
        await store.close()

    run(main())


def test_openai_batch_in_a_pi_file_reads_back(tmp_path: Path) -> None:
    pytest.importorskip("agents", reason="the openai-agents extra is not installed")
    from sessiontree.adapters.openai_agents import OpenAIAgentsSession
    from sessiontree.repo.pi import PiSessionRepo

    items = [
        _user("a"),
        {"type": "function_call", "call_id": "c", "name": "t", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "x"},
        {"type": "web_search_call", "id": "w", "status": "completed"},  # a custom entry
    ]

    async def main() -> None:
        repo = PiSessionRepo(tmp_path)
        session = await OpenAIAgentsSession.open(repo, "pi-1", cwd="/w")
        await session.add_items(items)
        assert session.session.storage.dialect == "pi"
        await session.close()
        again = await OpenAIAgentsSession.open(repo, "pi-1")
        assert await again.get_items() == items
        await again.close()

    run(main())
