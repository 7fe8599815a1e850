"""The pydantic-ai adapter, against the real ``pydantic-ai-slim`` package: converters that
round-trip its messages, and a ``ConversationStore`` that answers as pydantic-ai's own
``InMemoryConversationStore`` does, with real agent runs (its ``TestModel``, no network)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as hs

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    InMemoryConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    BinaryImage,
    CompactionPart,
    FilePart,
    ImageUrl,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

import sessiontree as st
from sessiontree import AsyncSessionRepo
from sessiontree.adapters.pydantic_ai import (
    MESSAGE_CUSTOM_TYPE,
    RECORD_CUSTOM_TYPE,
    PydanticAIConversationStore,
    context_to_model_messages,
    message_to_model_message,
    model_message_to_message,
)

from .conftest import run

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)

MAPPED: list[Any] = [
    ModelRequest(parts=[UserPromptPart("Hello", timestamp=T0)]),
    ModelRequest(
        parts=[SystemPromptPart("Be brief.", timestamp=T0), UserPromptPart("Hi", timestamp=T0)],
        instructions="Answer in French.",
        timestamp=T0,
    ),
    ModelRequest(parts=[UserPromptPart(["part one", "part two"], timestamp=T0)]),
    ModelRequest(parts=[ToolReturnPart("add", "5", "c1", timestamp=T0)]),
    ModelRequest(
        parts=[
            ToolReturnPart("lookup", {"rows": [1, 2], "ok": True}, "c2", timestamp=T0),
            ToolReturnPart("add", 7, "c3", timestamp=T0, outcome="failed"),
        ]
    ),
    ModelRequest(parts=[CompactionPart(content="We fixed the parser.")]),
    ModelResponse(
        parts=[
            ThinkingPart("add them", signature="sig"),
            TextPart("Let me add."),
            ToolCallPart("add", {"a": 2, "b": 3}, "c1"),
            ToolCallPart("add", '{"a": 1}', "c4"),
            ToolCallPart("noop", None, "c5"),
        ],
        usage=RequestUsage(input_tokens=30, output_tokens=9, cache_read_tokens=4),
        model_name="claude-x",
        provider_name="anthropic",
        timestamp=T0,
        finish_reason="tool_call",
    ),
    ModelResponse(
        parts=[
            NativeToolCallPart("web_search", {"q": "x"}, "n1", provider_name="openai"),
            TextPart("Found it."),
            CompactionPart(content=None, provider_name="openai", provider_details={"e": "E"}),
        ],
        timestamp=T0,
    ),
]

UNMAPPED: list[Any] = [
    ModelRequest(parts=[UserPromptPart(["look", ImageUrl("https://x/y.png")], timestamp=T0)]),
    ModelRequest(parts=[SystemPromptPart("system only", timestamp=T0)]),
]


@pytest.mark.parametrize("message", MAPPED, ids=lambda m: json.dumps(str(m))[:40])
def test_messages_map_and_come_back_equal(message: Any) -> None:
    ours = model_message_to_message(message)
    assert ours is not None
    assert message_to_model_message(ours) == message
    # Through JSON too, as the file holds it.
    again = st.message_from_dict(json.loads(json.dumps(st.message_to_dict(ours))))
    assert message_to_model_message(again) == message


@pytest.mark.parametrize("message", UNMAPPED, ids=lambda m: json.dumps(str(m))[:40])
def test_other_messages_map_to_none(message: Any) -> None:
    assert model_message_to_message(message) is None


def test_mapped_messages_hold_what_a_reader_needs() -> None:
    user = model_message_to_message(MAPPED[1])
    assert isinstance(user, st.UserMessage) and user.content == "Hi"
    result = model_message_to_message(MAPPED[4])
    assert isinstance(result, st.ToolResultMessage)
    assert (result.tool_name, result.tool_call_id, result.is_error) == ("lookup", "c2", False)
    assert json.loads(result.content[0].text) == {"rows": [1, 2], "ok": True}  # type: ignore[union-attr]
    summary = model_message_to_message(MAPPED[5])
    assert isinstance(summary, st.CompactionSummaryMessage)
    assert summary.summary == "We fixed the parser."
    reply = model_message_to_message(MAPPED[6])
    assert isinstance(reply, st.AssistantMessage)
    assert (reply.provider, reply.model, reply.stop_reason) == ("anthropic", "claude-x", "tool_use")
    assert (reply.usage.input, reply.usage.output, reply.usage.cache_read) == (30, 9, 4)
    assert reply.content[:3] == (
        st.ThinkingContent("add them"),
        st.TextContent("Let me add."),
        st.ToolCall("c1", "add", {"a": 2, "b": 3}),
    )
    assert reply.content[3] == st.ToolCall("c4", "add", {"a": 1})


def test_a_context_converts_to_model_messages() -> None:
    messages = [
        st.UserMessage("What is 2 + 3?", timestamp=0),
        st.AssistantMessage(
            [st.ThinkingContent("easy"), st.ToolCall("c1", "add", {"a": 2, "b": 3})],
            "anthropic",
            "claude",
            timestamp=0,
        ),
        st.ToolResultMessage("c1", "add", [st.TextContent("5")], timestamp=0),
        st.CompactionSummaryMessage("Earlier: greetings.", 100, timestamp=0),
        st.AssistantMessage([st.TextContent("5")], "anthropic", "claude", timestamp=0),
    ]
    out = context_to_model_messages(messages)
    assert [type(m).__name__ for m in out] == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelRequest",
        "ModelResponse",
    ]
    assert out[0].parts[0].content == "What is 2 + 3?"
    assert [type(p).__name__ for p in out[1].parts] == ["ThinkingPart", "ToolCallPart"]
    assert out[1].parts[1].args == {"a": 2, "b": 3}
    assert (out[2].parts[0].tool_call_id, out[2].parts[0].content) == ("c1", "5")
    assert isinstance(out[3].parts[0], CompactionPart)
    assert out[4].model_name == "claude"


def _agent() -> Agent[None, str]:
    agent = Agent(TestModel(), instructions="Be brief.")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Adds two numbers."""
        return a + b

    return agent


async def _scenario(store: Any) -> list[Any]:
    """pydantic-ai's store operations, answered the same by every correct store."""
    agent = _agent()
    out: list[Any] = []
    conversation = await store.load("c1") or Conversation(conversation_id="c1")
    first = await agent.run("What is 2 + 3?", conversation=conversation)
    saved = await store.save(first, scope="alice")
    out.append([type(e.message).__name__ for e in saved])
    second = await agent.run("And again?", conversation=first.conversation)
    await store.save(second)
    loaded = await store.load("c1")
    out.append(loaded.messages == second.conversation.messages)
    out.append(len((await store.load("c1", limit=3)).messages))
    out.append(len((await store.load("c1", limit=100)).messages))
    out.append(len((await store.load("c1", limit=0)).messages))
    # Regenerate the second turn: a branch; the history it leaves is kept.
    branched = await store.branch("c1", at=4, expected_revision=loaded.revision)
    third = await agent.run("Something else?", conversation=branched)
    await store.save(third)
    record = await store.read_record("c1")
    out.append(len(record.branches))
    out.append(
        [
            m == n
            for m, n in zip(
                (await store.load("c1")).messages, third.conversation.messages, strict=True
            )
        ]
    )
    # Back to the branch it left.
    back = await store.branch(
        "c1", from_entry=record.branches[0], expected_revision=record.revision
    )
    out.append(back.messages == second.conversation.messages)
    # A stale revision conflicts.
    try:
        await store.save(third)
    except ConversationConflict:
        out.append("conflict")
    # A fork shares the first turn.
    fork = await store.fork("c1", at=4, new_conversation_id="c2", scope="bob")
    out.append(fork.messages == first.conversation.messages)
    out.append(sorted(r.conversation_id for r in await store.list_conversations()))
    out.append([r.conversation_id for r in await store.list_conversations(scope="bob")])
    out.append(await store.load("c2", scope="alice"))
    await store.delete("c2", scope="alice")  # another scope: left as it is
    out.append((await store.load("c2")) is not None)
    await store.delete("c2")
    out.append(await store.load("c2"))
    out.append(await store.load("never"))
    try:
        await store.load("c1", limit=-1)
    except UserError:
        out.append("negative limit")
    return out


def test_same_answers_as_pydantic_ais_in_memory_store(tmp_path: Any) -> None:
    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        ours = await PydanticAIConversationStore.open(repo, "store")
        mine = await _scenario(ours)
        theirs = await _scenario(InMemoryConversationStore())
        assert mine == theirs
        assert "conflict" in mine and None in mine
        await ours.close()

    run(main())


def test_the_file_holds_the_tree_and_reopens(tmp_path: Any) -> None:
    async def main() -> None:
        repo = AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        store = await PydanticAIConversationStore.open(repo, "store")
        agent = _agent()
        first = await agent.run("What is 2 + 3?", conversation=Conversation(conversation_id="c1"))
        await store.save(first)
        loaded = await store.load("c1")
        branched = await store.branch("c1", at=0, expected_revision=loaded.revision)
        other = await agent.run("Hi", conversation=branched)
        await store.save(other)
        # The session's context at its leaf (the last saved conversation) is its history.
        context = store.session.session.build_context()
        assert context_to_model_messages(context) == other.conversation.messages
        # A message no sessiontree message holds exactly is kept whole.
        odd = Conversation(
            conversation_id="odd",
            messages=[
                UNMAPPED[0],
                ModelResponse(
                    parts=[FilePart(BinaryImage(data=b"\x89PNG", media_type="image/png"))]
                ),
            ],
        )
        await store.save(odd)
        await store.close()

        again = await PydanticAIConversationStore.open(repo, "store")
        assert (await again.load("c1")).messages == other.conversation.messages
        assert (await again.load("odd")).messages == odd.messages
        record = await again.read_record("c1")
        old = await again.read_history(record.branches[0])
        assert [e.message for e in old] == first.conversation.messages
        session = again.session.session
        # Every record hangs under its conversation's head message.
        customs = session.storage.get_entries("custom")
        records = [e for e in customs if e.custom_type == RECORD_CUSTOM_TYPE]
        assert [session.get_entry(r.parent_id).type for r in records if r.parent_id] == [
            "message"
        ] * sum(1 for r in records if r.parent_id)
        assert {e.custom_type for e in customs} == {RECORD_CUSTOM_TYPE, MESSAGE_CUSTOM_TYPE}
        messages = session.storage.get_entries("message")
        # Both histories, and the odd response (its file part kept beside the message).
        n = len(first.conversation.messages) + len(other.conversation.messages)
        assert len(messages) == n + 1
        await again.close()

    run(main())


def test_a_sync_session_is_wrapped_and_anything_else_refused(tmp_path: Any) -> None:
    async def main() -> None:
        repo = st.JsonlSessionRepo(tmp_path)
        store = await PydanticAIConversationStore.open(repo, "store")
        saved = Conversation(conversation_id="c", messages=MAPPED[:1])
        await store.save(saved)
        await store.close()
        with repo.open("store") as sync:
            loaded = await PydanticAIConversationStore(sync).load("c")
            assert loaded is not None and loaded.messages == MAPPED[:1]

    run(main())
    with pytest.raises(st.SessionError) as err:
        PydanticAIConversationStore(st.InMemorySessionRepo())  # type: ignore[arg-type]
    assert err.value.code == "invalid_argument"


# -- property: any message comes back equal ------------------------------------------

_json = hs.recursive(
    hs.none() | hs.booleans() | hs.integers(-(2**53), 2**53) | hs.text(max_size=6),
    lambda inner: (
        hs.lists(inner, max_size=3) | hs.dictionaries(hs.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=5,
)
_text = hs.text(max_size=12)
_args = hs.none() | hs.dictionaries(hs.text(max_size=4), _json, max_size=2) | _text
_request_part = hs.one_of(
    hs.builds(lambda t: SystemPromptPart(t, timestamp=T0), _text),
    hs.builds(
        lambda c: UserPromptPart(c, timestamp=T0), _text | hs.lists(_text, min_size=1, max_size=2)
    ),
    hs.builds(
        lambda c, i, ok: ToolReturnPart(
            "tool", c, i, timestamp=T0, outcome="success" if ok else "failed"
        ),
        _json,
        _text,
        hs.booleans(),
    ),
    hs.builds(lambda c: CompactionPart(content=c), hs.none() | _text),
)
_response_part = hs.one_of(
    hs.builds(TextPart, _text),
    hs.builds(lambda t, sig: ThinkingPart(t, signature=sig), _text, hs.none() | _text),
    hs.builds(lambda n, a, i: ToolCallPart(n, a, i), _text, _args, _text),
    hs.builds(lambda c: CompactionPart(content=c, provider_name="openai"), hs.none() | _text),
)
_message = hs.one_of(
    hs.builds(
        lambda parts, ins: ModelRequest(parts=parts, instructions=ins, timestamp=T0),
        hs.lists(_request_part, min_size=1, max_size=3),
        hs.none() | _text,
    ),
    hs.builds(
        lambda parts, model, provider, finish, n: ModelResponse(
            parts=parts,
            model_name=model,
            provider_name=provider,
            finish_reason=finish,
            usage=RequestUsage(input_tokens=n, output_tokens=n // 2),
            timestamp=T0,
        ),
        hs.lists(_response_part, max_size=4),
        hs.none() | _text,
        hs.none() | _text,
        hs.sampled_from([None, "stop", "length", "tool_call", "error"]),
        hs.integers(0, 10**6),
    ),
)


@given(_message)
def test_any_message_comes_back_equal(message: Any) -> None:
    ours = model_message_to_message(message)
    if ours is None:
        return
    assert message_to_model_message(ours) == message
    again = st.message_from_dict(json.loads(json.dumps(st.message_to_dict(ours))))
    assert message_to_model_message(again) == message
