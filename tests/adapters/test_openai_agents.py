"""The OpenAI Agents SDK adapter, against the real ``openai-agents`` package.

The SDK's ``Runner`` runs with the SDK's own scripted model (no network); its compaction
session's one API call goes to a local HTTP server (``openai_api`` in conftest).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as hs

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from agents import (
    Agent,
    ModelRetrySettings,
    ModelSettings,
    Runner,
    function_tool,
    retry_policies,
    set_tracing_disabled,
)
from agents.memory import OpenAIResponsesCompactionSession, Session
from agents.retry import ModelRetryAdvice
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from openai import AsyncOpenAI
from openai.types.responses import ResponseReasoningItem
from openai.types.responses.response_reasoning_item import Summary

import sessiontree as st
from sessiontree import AsyncSessionRepo
from sessiontree.adapters.openai_agents import (
    ITEM_CUSTOM_TYPE,
    OpenAIAgentsSession,
    item_to_message,
    message_to_items,
    session_id_for,
)

from .conftest import FakeOpenAIAPI, run


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    # The SDK exports traces to OpenAI by default: no network in tests.
    set_tracing_disabled(True)


@function_tool
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


def _dump(model: Any) -> Any:
    return model.model_dump(exclude_unset=True)


# Items as the SDK and the Responses API write them; the first ones map to messages.
KNOWN_ITEMS: list[Any] = [
    {"role": "user", "content": "What is 2 + 3?"},
    {"type": "message", "role": "user", "content": "typed"},
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is this?"},
            {
                "type": "input_image",
                "image_url": "data:image/png;base64,iVBORw0KGgo=",
                "detail": "low",
            },
        ],
    },
    _dump(assistant_message("2 + 3 = 5", item_id="msg_1")),
    assistant_message("with logprobs", item_id="msg_2").model_dump(),
    {"role": "assistant", "content": "plain assistant text"},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_3",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "I can't."}],
    },
    _dump(function_call("add", {"a": 2, "b": "é"}, call_id="call_1")),
    {"type": "function_call", "call_id": "call_2", "name": "add", "arguments": '{"a": 1}'},
    {"type": "function_call", "call_id": "call_3", "name": "add", "arguments": "{ odd  }"},
    {"type": "function_call_output", "call_id": "call_1", "output": "5"},
    {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": [{"type": "input_text", "text": "part"}],
    },
    _dump(
        ResponseReasoningItem(
            id="rs_1",
            type="reasoning",
            summary=[Summary(text="add them", type="summary_text")],
            encrypted_content="opaque",
        )
    ),
]

# Items no message holds: they are kept as custom entries, JSON intact.
OTHER_ITEMS: list[Any] = [
    {"role": "system", "content": "Be brief."},
    {"role": "developer", "content": "Use tools."},
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "x"}},
    {"type": "item_reference", "id": "msg_0"},
    {"role": "user", "content": [{"type": "input_file", "file_id": "file_1"}]},
    {"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]},
    {"type": "mystery", "nested": {"z": [1, 2.5, None, True]}, "a": "b"},
]


@pytest.mark.parametrize("item", KNOWN_ITEMS, ids=lambda i: json.dumps(i)[:40])
def test_known_items_map_to_messages_and_come_back_exactly(item: Any) -> None:
    message = item_to_message(item, tool_names={"call_1": "add"})
    assert message is not None
    assert message.role in ("user", "assistant", "tool_result")
    back = message_to_items(message)
    assert json.dumps(back) == json.dumps([item])  # same keys, order and values


@pytest.mark.parametrize("item", OTHER_ITEMS, ids=lambda i: json.dumps(i)[:40])
def test_other_items_map_to_no_message(item: Any) -> None:
    assert item_to_message(item) is None


def test_messages_hold_what_a_reader_needs() -> None:
    call = item_to_message(KNOWN_ITEMS[7])
    assert isinstance(call, st.AssistantMessage) and call.stop_reason == "tool_use"
    assert call.content == (st.ToolCall("call_1", "add", {"a": 2, "b": "é"}),)
    result = item_to_message(KNOWN_ITEMS[10], tool_names={"call_1": "add"})
    assert isinstance(result, st.ToolResultMessage)
    assert (result.tool_name, result.content) == ("add", (st.TextContent("5"),))
    thinking = item_to_message(KNOWN_ITEMS[-1])
    assert isinstance(thinking, st.AssistantMessage)
    assert thinking.content == (st.ThinkingContent("add them"),)
    image = item_to_message(KNOWN_ITEMS[2])
    assert isinstance(image, st.UserMessage)
    assert image.content[1] == st.ImageContent("iVBORw0KGgo=", "image/png")  # type: ignore[index]


def test_messages_from_other_writers_read_as_items() -> None:
    message = st.AssistantMessage(
        [
            st.ThinkingContent("hmm"),
            st.TextContent("Let me add."),
            st.ToolCall("c9", "add", {"a": 1, "b": 2}),
        ],
        "anthropic",
        "claude",
    )
    assert message_to_items(message) == [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hmm"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Let me add.", "annotations": []}],
        },
        {"type": "function_call", "call_id": "c9", "name": "add", "arguments": '{"a": 1, "b": 2}'},
    ]
    assert message_to_items(st.UserMessage("hi")) == [{"role": "user", "content": "hi"}]
    assert message_to_items(st.CompactionSummaryMessage("s", 1)) == []


@pytest.fixture
def repo(tmp_path: Any) -> AsyncSessionRepo:
    return AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))


def test_every_item_round_trips_through_the_file(repo: AsyncSessionRepo, tmp_path: Any) -> None:
    items = KNOWN_ITEMS + OTHER_ITEMS

    async def main() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        assert isinstance(session, Session)  # the SDK's runtime-checkable protocol
        await session.add_items(items)
        assert json.dumps(await session.get_items()) == json.dumps(items)
        await session.close()
        again = await OpenAIAgentsSession.open(repo, "chat")
        assert json.dumps(await again.get_items()) == json.dumps(items)
        await again.close()

    run(main())
    lines = [json.loads(line) for line in (tmp_path / "chat.jsonl").read_text().splitlines()]
    entries = lines[1:]
    assert len(entries) == len(items)
    messages = [e for e in entries if e["type"] == "message"]
    customs = [e for e in entries if e["type"] == "custom"]
    assert len(messages) == len(KNOWN_ITEMS)
    assert [e["custom_type"] for e in customs] == [ITEM_CUSTOM_TYPE] * len(OTHER_ITEMS)
    assert [e["data"] for e in customs] == OTHER_ITEMS
    # The function call output is named after the call the session saw before it.
    results = [e["message"] for e in messages if e["message"]["role"] == "tool_result"]
    assert [r["tool_name"] for r in results] == ["add", "add"]


def test_items_returned_are_the_callers_to_change(repo: AsyncSessionRepo) -> None:
    async def main() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        await session.add_items([KNOWN_ITEMS[3], OTHER_ITEMS[3]])
        first = await session.get_items()
        first[0]["content"][0]["annotations"].append("changed")
        first[1]["action"]["query"] = "changed"
        assert await session.get_items() == [KNOWN_ITEMS[3], OTHER_ITEMS[3]]
        # The same from an object that reads the entries from the file.
        fresh = OpenAIAgentsSession(session.session)
        read = await fresh.get_items()
        read[0]["content"][0]["annotations"].append("changed")
        read[1]["action"]["query"] = "changed"
        assert await fresh.get_items() == [KNOWN_ITEMS[3], OTHER_ITEMS[3]]
        assert await OpenAIAgentsSession(session.session).get_items() == [
            KNOWN_ITEMS[3],
            OTHER_ITEMS[3],
        ]

    run(main())


def test_open_maps_an_unsafe_id_and_creates_a_missing_session(repo: AsyncSessionRepo) -> None:
    async def main() -> None:
        escape = await OpenAIAgentsSession.open(repo, "../escape")
        assert escape.session_id == "../escape"
        mapped = escape.session.id
        assert mapped == session_id_for("../escape") != "../escape"
        await escape.close()
        fresh = await OpenAIAgentsSession.open(repo)
        assert await fresh.get_items() == []
        assert {m.id for m in await repo.list()} == {fresh.session_id, mapped}
        await fresh.close()
        with pytest.raises(st.SessionError) as err:
            OpenAIAgentsSession("chat")  # type: ignore[arg-type]
        assert err.value.code == "invalid_argument"
        with pytest.raises(st.SessionError) as err:
            await OpenAIAgentsSession.open("sessions")  # type: ignore[arg-type]
        assert err.value.code == "invalid_argument"

    run(main())


def test_sync_sessions_and_repositories_are_wrapped(tmp_path: Any) -> None:
    async def main() -> None:
        repo = st.JsonlSessionRepo(tmp_path)
        session = await OpenAIAgentsSession.open(repo, "chat")
        await session.add_items([{"role": "user", "content": "hi"}])
        await session.close()
        with repo.open("chat") as sync:
            assert await OpenAIAgentsSession(sync).get_items() == [
                {"role": "user", "content": "hi"}
            ]

    run(main())


def test_limit_follows_the_sdk(repo: AsyncSessionRepo) -> None:
    items = [{"role": "user", "content": str(n)} for n in range(5)]

    async def main() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        await session.add_items(items)
        assert await session.get_items(2) == items[3:]
        assert await session.get_items(9) == items
        assert await session.get_items(0) == []
        # Negative: every item, as SQLiteSession's LIMIT -1 gives.
        assert await session.get_items(-1) == await session.get_items()
        assert len(await session.get_items(-5)) == len(await session.get_items())
        limited = OpenAIAgentsSession(session.session, session_settings={"limit": 3})
        assert await limited.get_items() == items[2:]
        assert await limited.get_items(1) == items[4:]
        with pytest.raises(st.SessionError) as err:
            await session.get_items("2")  # type: ignore[arg-type]
        assert err.value.code == "invalid_argument"

    run(main())


def test_bad_items_are_refused_and_nothing_is_written(repo: AsyncSessionRepo) -> None:
    async def main() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        await session.add_items([{"role": "user", "content": "kept"}])
        for bad in (
            "not a list",
            [{"role": "user", "content": "x"}, 3],
            [{"role": "user", "content": "x"}, {"type": "x", "v": object()}],
            [{"type": "x", "v": float("nan")}],
        ):
            with pytest.raises(st.SessionError) as err:
                await session.add_items(bad)  # type: ignore[arg-type]
            assert err.value.code == "invalid_argument"
        assert await session.get_items() == [{"role": "user", "content": "kept"}]
        assert len(session.session) == 1

    run(main())


def test_pop_and_clear_move_the_leaf_and_keep_history(repo: AsyncSessionRepo) -> None:
    a, b, c = ({"role": "user", "content": x} for x in "abc")

    async def main() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        assert await session.pop_item() is None
        await session.add_items([a, b])
        assert await session.pop_item() == b
        assert await session.get_items() == [a]
        await session.add_items([c])
        assert await session.get_items() == [a, c]
        branches = await session.list_branches()
        assert [(x.last_item, x.item_count, x.current) for x in branches] == [
            (b, 2, False),
            (c, 2, True),
        ]
        # The popped item is still in the tree, and its branch can be resumed.
        await session.branch(from_entry=branches[0].leaf_id)
        assert await session.get_items() == [a, b]
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None
        await session.add_items([c])
        assert await session.get_items() == [c]
        assert len(await session.list_branches()) == 3
        await session.close()
        # Reopened: the leaf and all three branches are as they were.
        again = await OpenAIAgentsSession.open(repo, "chat")
        assert await again.get_items() == [c]
        assert [x.last_item for x in await again.list_branches()] == [b, c, c]
        stats = again.session.session.get_session_stats()
        assert stats.user_message_count == 4  # a, b, c, c: nothing was deleted

    run(main())


def test_branch_at_an_item_or_a_turn(repo: AsyncSessionRepo) -> None:
    turn1 = [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}]
    turn2 = [{"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}]

    async def main() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        await session.add_items(turn1 + turn2)
        await session.branch(turn=1)
        assert await session.get_items() == turn1
        await session.branch(from_entry=(await session.list_branches())[0].leaf_id)
        await session.branch(at=3)
        assert await session.get_items() == [*turn1, turn2[0]]
        await session.branch(at=0)
        assert await session.get_items() == []
        for bad in ({"at": 9}, {"turn": 3}, {"at": 1, "turn": 1}, {}, {"at": -1}):
            with pytest.raises(st.SessionError) as err:
                await session.branch(**bad)
            assert err.value.code == "invalid_argument"
        with pytest.raises(st.SessionError) as err:
            await session.branch(from_entry="nope")
        assert err.value.code == "not_found"

    run(main())


def _compacted(body: Any) -> Any:
    """The OpenAI API's answer to /responses/compact: the user messages, then one
    compaction item (as the API documents it)."""
    users = [i for i in body["input"] if i.get("role") == "user"]
    output = [
        {
            "type": "message",
            "role": "user",
            "id": f"cu_{n}",
            "status": "completed",
            "content": [{"type": "input_text", "text": u["content"]}],
        }
        for n, u in enumerate(users)
    ]
    output.append({"type": "compaction", "id": "cmp_1", "encrypted_content": "SUMMARY"})
    usage = {
        "input_tokens": 40,
        "output_tokens": 5,
        "total_tokens": 45,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    return {
        "id": "resp_cmp",
        "created_at": 1,
        "object": "response.compaction",
        "output": output,
        "usage": usage,
    }


def test_the_runner_over_several_turns_a_retry_and_a_compaction(
    repo: AsyncSessionRepo, tmp_path: Any, openai_api: FakeOpenAIAPI
) -> None:
    openai_api.routes["/v1/responses/compact"] = _compacted
    model = ScriptedModel(
        [
            # Turn 1: a tool call, then the answer.
            [function_call("add", {"a": 2, "b": 3}, call_id="call_1")],
            [assistant_message("2 + 3 = 5", item_id="msg_1")],
            # Turn 2: the model call fails once and the runner retries it.
            ModelStep.raise_error(
                ConnectionError("reset"), retry_advice=ModelRetryAdvice(suggested=True)
            ),
            [assistant_message("Lyon", item_id="msg_2")],
            # The user retries turn 2 (pop its answer and question, ask again).
            [assistant_message("Paris", item_id="msg_3")],
            # Turn 3, after the compaction.
            [function_call("add", {"a": 5, "b": 5}, call_id="call_2")],
            [assistant_message("10", item_id="msg_4")],
        ]
    )
    agent = Agent(
        name="calc",
        instructions="Be brief.",
        tools=[add],
        model=model,
        model_settings=ModelSettings(
            retry=ModelRetrySettings(max_retries=2, policy=retry_policies.provider_suggested())
        ),
    )

    async def main() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        result = await Runner.run(agent, "What is 2 + 3?", session=session)
        assert result.final_output == "2 + 3 = 5"
        result = await Runner.run(agent, "Capital of France?", session=session)
        assert result.final_output == "Lyon"
        assert len(await session.get_items()) == 6  # the failed call added nothing
        # The retry: take the wrong answer and its question off, ask again.
        assert (await session.pop_item())["content"][0]["text"] == "Lyon"  # type: ignore[index]
        assert (await session.pop_item())["content"] == "Capital of France?"  # type: ignore[index]
        result = await Runner.run(agent, "Capital of France?", session=session)
        assert result.final_output == "Paris"
        # The SDK's compaction session clears the session and adds the compacted items.
        client = AsyncOpenAI(api_key="test", base_url=openai_api.base_url, max_retries=0)
        compaction = OpenAIResponsesCompactionSession("chat", session, client=client)
        await compaction.run_compaction({"force": True, "compaction_mode": "input"})
        items = await session.get_items()
        assert [i.get("type") for i in items] == ["message", "message", "compaction"]
        result = await Runner.run(agent, "5 + 5?", session=compaction)
        assert result.final_output == "10"
        await session.close()
        model.assert_complete()

    run(main())

    # Reopen the file and check the tree.
    async def check() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        items = await session.get_items()
        assert [i.get("type", i.get("role")) for i in items] == [
            "message",
            "message",
            "compaction",
            "user",
            "function_call",
            "function_call_output",
            "message",
        ]
        branches = await session.list_branches()
        last = [b.last_item["content"][0]["text"] for b in branches]
        # The retried answer, the history before the compaction, the compacted history.
        assert last == ["Lyon", "Paris", "10"]
        assert [b.current for b in branches] == [False, False, True]
        assert [b.item_count for b in branches] == [6, 6, 7]
        # Resume the history from before the compaction: all of it is there.
        await session.branch(from_entry=branches[1].leaf_id)
        before = await session.get_items()
        assert [i.get("content") for i in before if i.get("role") == "user"] == [
            "What is 2 + 3?",
            "Capital of France?",
        ]
        roots = session.session.session.get_tree()
        assert len(roots) == 2  # the original history and the compacted one
        context = session.session.session.build_context()
        assert context.messages[-1].content == (st.TextContent("Paris"),)  # type: ignore[union-attr]
        await session.close()

    run(check())
    customs = [
        json.loads(line)
        for line in (tmp_path / "chat.jsonl").read_text().splitlines()
        if '"custom"' in line
    ]
    assert [c["data"]["type"] for c in customs] == ["compaction"]
    assert customs[0]["data"]["encrypted_content"] == "SUMMARY"


# -- property: any item comes back exactly --------------------------------------------

_json = hs.recursive(
    hs.none() | hs.booleans() | hs.integers(-(2**53), 2**53) | hs.text(max_size=8),
    lambda inner: (
        hs.lists(inner, max_size=3) | hs.dictionaries(hs.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
_extra = hs.dictionaries(hs.sampled_from(["id", "status", "x", "provider_data"]), _json, max_size=2)
_text = hs.text(max_size=20)


@hs.composite
def _block(draw: Any, kinds: list[str]) -> Any:
    kind = draw(hs.sampled_from(kinds))
    if kind == "input_image":
        url = draw(hs.sampled_from(["data:image/png;base64,AAAA", "https://x/y.png", "data:x"]))
        block = {"type": kind, "image_url": url}
    elif kind == "refusal":
        block = {"type": kind, "refusal": draw(_text)}
    else:
        block = {"type": kind, "text": draw(_text)}
    return {
        **block,
        **draw(hs.dictionaries(hs.sampled_from(["annotations", "detail"]), _json, max_size=1)),
    }


@hs.composite
def _item(draw: Any) -> Any:
    kind = draw(hs.sampled_from(["user", "assistant", "reasoning", "call", "output", "other"]))
    if kind == "user":
        content = draw(
            _text | hs.lists(_block(["input_text", "input_image", "input_file"]), max_size=3)
        )
        item: dict[str, Any] = {"role": "user", "content": content}
    elif kind == "assistant":
        content = draw(_text | hs.lists(_block(["output_text", "refusal"]), max_size=3))
        item = {"type": "message", "role": "assistant", "content": content}
    elif kind == "reasoning":
        parts = draw(
            hs.lists(hs.builds(lambda t: {"type": "summary_text", "text": t}, _text), max_size=2)
        )
        item = {"type": "reasoning", "summary": parts}
    elif kind == "call":
        args = draw(
            hs.dictionaries(hs.text(max_size=4), _json, max_size=3).map(json.dumps)
            | hs.dictionaries(hs.text(max_size=4), _json, max_size=3).map(
                lambda d: json.dumps(d, separators=(",", ":"), ensure_ascii=False)
            )
            | _text
        )
        item = {
            "type": "function_call",
            "call_id": draw(_text),
            "name": draw(_text),
            "arguments": args,
        }
    elif kind == "output":
        output = draw(_text | hs.lists(_block(["input_text"]), max_size=2))
        item = {"type": "function_call_output", "call_id": draw(_text), "output": output}
    else:
        item = {"type": draw(hs.sampled_from(["compaction", "web_search_call", "mystery"]))}
    return {**item, **draw(_extra)}


@given(hs.lists(_item(), max_size=6))
def test_any_items_come_back_exactly(items: list[Any]) -> None:
    for item in items:
        message = item_to_message(item)
        if message is not None:
            assert json.dumps(message_to_items(message)) == json.dumps([item])

    async def main() -> list[Any]:
        session = OpenAIAgentsSession(st.Session(st.InMemorySessionStorage()))
        await session.add_items(items)
        # A second object reads the entries themselves, not the first one's cache.
        return await OpenAIAgentsSession(session.session).get_items()

    assert json.dumps(run(main())) == json.dumps(items)
