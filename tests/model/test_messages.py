"""Tests for sessiontree.model.messages and the time helpers in sessiontree._util."""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
from datetime import datetime, timezone
from typing import Any

import pytest

from sessiontree._util import iso_to_datetime, iso_to_ms, ms_to_iso, now_iso, now_ms
from sessiontree.errors import SessionError
from sessiontree.model.messages import (
    MESSAGE_ROLES,
    STOP_REASONS,
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Cost,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    Usage,
    UserMessage,
    create_branch_summary_message,
    create_compaction_summary_message,
    create_custom_message,
    message_from_dict,
    message_to_dict,
)

TS = 1_764_521_310_123


def sample_messages() -> list[AgentMessage]:
    """One message of every role, with non-default values where possible."""
    return [
        UserMessage("Hello", timestamp=TS),
        UserMessage(
            [TextContent("look:", signature="sig"), ImageContent("aGVsbG8=", "image/png")],
            timestamp=TS,
        ),
        AssistantMessage(
            [
                ThinkingContent("hmm", signature="s1", redacted=True),
                TextContent("Reading."),
                ToolCall("call_1", "read", {"path": "a.py", "nested": {"n": [1, 2.5, None]}}),
            ],
            "anthropic",
            "claude-sonnet-4-5",
            api="messages",
            usage=Usage(
                input=10,
                output=20,
                cache_read=3,
                cache_write=4,
                total_tokens=37,
                cost=Cost(input=0.1, output=0.2, cache_read=0.01, cache_write=0.02, total=0.33),
            ),
            stop_reason="tool_use",
            error_message=None,
            timestamp=TS,
        ),
        AssistantMessage(
            [], "openai", "gpt", stop_reason="error", error_message="overloaded", timestamp=TS
        ),
        ToolResultMessage(
            "call_1",
            "read",
            [TextContent("print('hi')")],
            is_error=True,
            details={"exit": 1},
            timestamp=TS,
        ),
        CustomMessage("note", "remember", display=False, details=["x"], timestamp=TS),
        CompactionSummaryMessage("we did things", 12345, timestamp=TS),
        BranchSummaryMessage("abandoned idea", "a1b2c3d4", timestamp=TS),
        UnknownMessage("bash_execution", {"role": "bash_execution", "command": "ls", "n": 1}),
    ]


def assert_error(exc_info: pytest.ExceptionInfo[SessionError], code: str) -> None:
    assert exc_info.value.code == code, exc_info.value


# --------------------------------------------------------------------------- construction


def test_roles() -> None:
    roles = [m.role for m in sample_messages()]
    assert roles == [
        "user",
        "user",
        "assistant",
        "assistant",
        "tool_result",
        "custom",
        "compaction_summary",
        "branch_summary",
        "bash_execution",
    ]
    assert set(roles) - {"bash_execution"} == set(MESSAGE_ROLES)


def test_role_is_not_a_field_and_is_read_only() -> None:
    m = UserMessage("x", timestamp=1)
    assert "role" not in {f.name for f in dataclasses.fields(m)}
    with pytest.raises(AttributeError):
        m.role = "assistant"


def test_defaults() -> None:
    before = now_ms()
    m = AssistantMessage([TextContent("x")], "p", "m")
    after = now_ms()
    assert before <= m.timestamp <= after
    assert m.api is None
    assert m.usage == Usage()
    assert m.usage.cost == Cost()
    assert m.stop_reason == "stop"
    assert m.error_message is None
    t = ToolResultMessage("c", "n", [])
    assert (t.is_error, t.details) == (False, None)
    c = CustomMessage("k", "v")
    assert (c.display, c.details) == (True, None)
    assert ThinkingContent("t") == ThinkingContent("t", None, False)


def test_keyword_construction() -> None:
    m = AssistantMessage(
        content=[TextContent(text="x")], provider="p", model="m", timestamp=5, stop_reason="length"
    )
    assert m == AssistantMessage([TextContent("x")], "p", "m", None, Usage(), "length", None, 5)


def test_block_type_properties() -> None:
    assert TextContent("a").type == "text"
    assert ThinkingContent("a").type == "thinking"
    assert ImageContent("a", "image/png").type == "image"
    assert ToolCall("i", "n", {}).type == "tool_call"


def test_lists_become_tuples_and_are_copied() -> None:
    blocks: list[Any] = [TextContent("a")]
    m = UserMessage(blocks, timestamp=1)
    assert isinstance(m.content, tuple)
    blocks.append(TextContent("b"))
    assert m.content == (TextContent("a"),)
    a = AssistantMessage([ToolCall("i", "n", {})], "p", "m", timestamp=1)
    assert isinstance(a.content, tuple)
    t = ToolResultMessage("c", "n", [TextContent("r")], timestamp=1)
    assert isinstance(t.content, tuple)


def test_str_content_kept_as_str() -> None:
    assert UserMessage("hi", timestamp=1).content == "hi"


def test_cost_ints_become_floats() -> None:
    c = Cost(input=1, total=2)
    assert type(c.input) is float and type(c.total) is float
    assert c == Cost(1.0, 0.0, 0.0, 0.0, 2.0)


@pytest.mark.parametrize(
    "build",
    [
        lambda: UserMessage(5),
        lambda: UserMessage(None),
        lambda: UserMessage("x", timestamp="now"),
        lambda: UserMessage("x", timestamp=True),
        lambda: UserMessage("x", timestamp=1.5),
        lambda: UserMessage(["plain string"], timestamp=1),
        lambda: UserMessage([ToolCall("i", "n", {})], timestamp=1),
        lambda: UserMessage([{"type": "text", "text": "x"}], timestamp=1),
        lambda: AssistantMessage([ImageContent("d", "m")], "p", "m"),
        lambda: AssistantMessage("text", "p", "m"),
        lambda: AssistantMessage([], "p", "m", stop_reason="done"),
        lambda: AssistantMessage([], "p", "m", stop_reason=None),
        lambda: AssistantMessage([], 1, "m"),
        lambda: AssistantMessage([], "p", None),
        lambda: AssistantMessage([], "p", "m", api=3),
        lambda: AssistantMessage([], "p", "m", usage={"input": 1}),
        lambda: AssistantMessage([], "p", "m", error_message=1),
        lambda: ToolResultMessage("c", "n", "text"),
        lambda: ToolResultMessage("c", "n", [], is_error=1),
        lambda: ToolResultMessage(1, "n", []),
        lambda: CustomMessage("k", ["not", "str"]),
        lambda: CustomMessage("k", "v", display="yes"),
        lambda: CompactionSummaryMessage("s", "100"),
        lambda: CompactionSummaryMessage("s", False),
        lambda: BranchSummaryMessage("s", None),
        lambda: TextContent(1),
        lambda: TextContent("x", signature=1),
        lambda: ThinkingContent("x", redacted=1),
        lambda: ImageContent(b"bytes", "image/png"),
        lambda: ToolCall("i", "n", '{"a":1}'),
        lambda: ToolCall("i", "n", [1]),
        lambda: Cost(input="1"),
        lambda: Cost(total=True),
        lambda: Usage(input=1.0),
        lambda: Usage(cost={"total": 1}),
        lambda: UnknownMessage("user", {"role": "user"}),
        lambda: UnknownMessage("x", {"role": "y"}),
        lambda: UnknownMessage("x", [("role", "x")]),
        lambda: UnknownMessage(1, {"role": 1}),
    ],
)
def test_invalid_arguments(build: Any) -> None:
    with pytest.raises(SessionError) as exc_info:
        build()
    assert_error(exc_info, "invalid_argument")
    assert isinstance(exc_info.value, ValueError)


def test_invalid_argument_message_names_the_field() -> None:
    with pytest.raises(SessionError, match=r"UserMessage\.content"):
        UserMessage(5)
    with pytest.raises(SessionError, match="stop_reason"):
        AssistantMessage([], "p", "m", stop_reason="nope")


def test_every_stop_reason_accepted() -> None:
    for reason in STOP_REASONS:
        assert AssistantMessage([], "p", "m", stop_reason=reason).stop_reason == reason


# --------------------------------------------------------------------------- value semantics


def test_immutable() -> None:
    for m in sample_messages():
        first = dataclasses.fields(m)[-1].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(m, first, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        TextContent("x").text = "y"
    with pytest.raises(AttributeError):
        TextContent("x").other = 1


def test_equality_by_value() -> None:
    assert sample_messages() == sample_messages()
    assert UserMessage("a", timestamp=1) != UserMessage("a", timestamp=2)
    assert UserMessage([TextContent("a")], timestamp=1) == UserMessage(
        (TextContent("a"),), timestamp=1
    )
    assert CompactionSummaryMessage("s", 1, timestamp=1) != BranchSummaryMessage(
        "s", "1", timestamp=1
    )
    assert hash(UserMessage("a", timestamp=1)) == hash(UserMessage("a", timestamp=1))


def test_pickle_round_trip() -> None:
    for m in sample_messages():
        assert pickle.loads(pickle.dumps(m)) == m


# --------------------------------------------------------------------------- serialization


@pytest.mark.parametrize("message", sample_messages(), ids=lambda m: m.role)
def test_round_trip_through_json(message: AgentMessage) -> None:
    text = json.dumps(message_to_dict(message))
    back = message_from_dict(json.loads(text))
    assert back == message
    assert type(back) is type(message)


def test_key_order() -> None:
    orders = {m.role: list(message_to_dict(m)) for m in sample_messages()[::-1]}
    assert orders["user"] == ["role", "content", "timestamp"]
    assert orders["assistant"] == [
        "role",
        "content",
        "api",
        "provider",
        "model",
        "usage",
        "stop_reason",
        "error_message",
        "timestamp",
    ]
    assert orders["tool_result"] == [
        "role",
        "tool_call_id",
        "tool_name",
        "content",
        "details",
        "is_error",
        "timestamp",
    ]
    assert orders["custom"] == ["role", "custom_type", "content", "display", "details", "timestamp"]
    assert orders["compaction_summary"] == ["role", "summary", "tokens_before", "timestamp"]
    assert orders["branch_summary"] == ["role", "summary", "from_id", "timestamp"]


def test_assistant_dict_shape() -> None:
    d = message_to_dict(sample_messages()[2])
    assert d["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "s1", "redacted": True},
        {"type": "text", "text": "Reading."},
        {
            "type": "tool_call",
            "id": "call_1",
            "name": "read",
            "arguments": {"path": "a.py", "nested": {"n": [1, 2.5, None]}},
        },
    ]
    assert d["usage"] == {
        "input": 10,
        "output": 20,
        "cache_read": 3,
        "cache_write": 4,
        "total_tokens": 37,
        "cost": {
            "input": 0.1,
            "output": 0.2,
            "cache_read": 0.01,
            "cache_write": 0.02,
            "total": 0.33,
        },
    }
    assert list(d["usage"]) == [
        "input",
        "output",
        "cache_read",
        "cache_write",
        "total_tokens",
        "cost",
    ]
    assert d["api"] == "messages" and d["error_message"] is None


def test_optional_block_fields_omitted_when_unset() -> None:
    m = AssistantMessage([TextContent("a"), ThinkingContent("b")], "p", "m", timestamp=1)
    assert message_to_dict(m)["content"] == [
        {"type": "text", "text": "a"},
        {"type": "thinking", "thinking": "b"},
    ]
    m = UserMessage([ImageContent("ZGF0YQ==", "image/jpeg")], timestamp=1)
    assert message_to_dict(m)["content"] == [
        {"type": "image", "data": "ZGF0YQ==", "mime_type": "image/jpeg"}
    ]


def test_nulls_written() -> None:
    d = message_to_dict(AssistantMessage([], "p", "m", timestamp=1))
    assert d["api"] is None and d["error_message"] is None
    d = message_to_dict(ToolResultMessage("c", "n", [], timestamp=1))
    assert "details" in d and d["details"] is None


def test_unknown_role_round_trips_unchanged() -> None:
    raw = {"role": "bash_execution", "command": "ls", "output": {"lines": [1, 2]}, "timestamp": 7}
    m = message_from_dict(raw)
    assert isinstance(m, UnknownMessage)
    assert m.role == "bash_execution"
    assert m.data == raw
    out = message_to_dict(m)
    assert out == raw and list(out) == list(raw)
    assert json.dumps(out) == json.dumps(raw)


def test_missing_optional_fields_use_defaults() -> None:
    m = message_from_dict(
        {"role": "assistant", "content": [], "provider": "p", "model": "m", "timestamp": 3}
    )
    assert m == AssistantMessage([], "p", "m", timestamp=3)
    m = message_from_dict(
        {
            "role": "tool_result",
            "tool_call_id": "c",
            "tool_name": "n",
            "content": [],
            "timestamp": 3,
        }
    )
    assert m == ToolResultMessage("c", "n", [], timestamp=3)
    m = message_from_dict({"role": "custom", "custom_type": "k", "content": "v", "timestamp": 3})
    assert m == CustomMessage("k", "v", timestamp=3)
    m = message_from_dict(
        {
            "role": "assistant",
            "content": [],
            "provider": "p",
            "model": "m",
            "timestamp": 3,
            "usage": {"input": 4},
        }
    )
    assert isinstance(m, AssistantMessage)
    assert m.usage == Usage(input=4)


def test_usage_cost_ints_read_as_floats() -> None:
    m = message_from_dict(
        {
            "role": "assistant",
            "content": [],
            "provider": "p",
            "model": "m",
            "timestamp": 3,
            "usage": {
                "cost": {"input": 0, "output": 1, "cache_read": 0, "cache_write": 0, "total": 1}
            },
        }
    )
    assert isinstance(m, AssistantMessage)
    assert m.usage.cost == Cost(output=1.0, total=1.0)


def test_unknown_extra_keys_are_preserved_but_not_compared() -> None:
    raw: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}],
        "api": None,
        "provider": "p",
        "model": "m",
        "usage": {
            "input": 1,
            "output": 2,
            "cache_read": 0,
            "cache_write": 0,
            "total_tokens": 3,
            "reasoning_tokens": 9,
            "cost": {
                "input": 0.0,
                "output": 0.0,
                "cache_read": 0.0,
                "cache_write": 0.0,
                "total": 0.0,
            },
        },
        "stop_reason": "stop",
        "error_message": None,
        "timestamp": 3,
        "response_id": "resp_1",
    }
    m = message_from_dict(raw)
    assert m == AssistantMessage(
        [TextContent("x")], "p", "m", usage=Usage(1, 2, total_tokens=3), timestamp=3
    )
    out = message_to_dict(m)
    assert out == raw
    assert list(out)[-1] == "response_id"
    assert pickle.loads(pickle.dumps(m)) == m
    assert message_to_dict(pickle.loads(pickle.dumps(m))) == raw


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ("not a dict", "object"),
        (["role", "user"], "object"),
        ({"content": "x", "timestamp": 1}, "role"),
        ({"role": 5, "content": "x"}, "role"),
        ({"role": "user", "timestamp": 1}, "'content'"),
        ({"role": "user", "content": "x"}, "'timestamp'"),
        ({"role": "user", "content": 5, "timestamp": 1}, "content"),
        ({"role": "user", "content": "x", "timestamp": "1"}, "timestamp"),
        ({"role": "user", "content": [{"type": "audio", "data": "x"}], "timestamp": 1}, "audio"),
        ({"role": "user", "content": [{"text": "x"}], "timestamp": 1}, "block type"),
        ({"role": "user", "content": ["x"], "timestamp": 1}, "content block"),
        ({"role": "user", "content": [{"type": "text"}], "timestamp": 1}, "'text'"),
        (
            {"role": "user", "content": [{"type": "image", "data": "x"}], "timestamp": 1},
            "mime_type",
        ),
        ({"role": "assistant", "content": [], "model": "m", "timestamp": 1}, "'provider'"),
        (
            {
                "role": "assistant",
                "content": [],
                "provider": "p",
                "model": "m",
                "timestamp": 1,
                "stop_reason": "x",
            },
            "stop_reason",
        ),
        (
            {
                "role": "assistant",
                "content": [],
                "provider": "p",
                "model": "m",
                "timestamp": 1,
                "usage": [1],
            },
            "usage",
        ),
        (
            {
                "role": "assistant",
                "content": [],
                "provider": "p",
                "model": "m",
                "timestamp": 1,
                "usage": {"input": "1"},
            },
            "input",
        ),
        (
            {
                "role": "assistant",
                "content": [{"type": "tool_call", "id": "i", "name": "n"}],
                "provider": "p",
                "model": "m",
                "timestamp": 1,
            },
            "arguments",
        ),
        (
            {
                "role": "assistant",
                "content": [{"type": "image", "data": "d", "mime_type": "m"}],
                "provider": "p",
                "model": "m",
                "timestamp": 1,
            },
            "content",
        ),
        ({"role": "tool_result", "tool_name": "n", "content": [], "timestamp": 1}, "tool_call_id"),
        (
            {"role": "custom", "custom_type": "k", "content": "v", "display": None, "timestamp": 1},
            "display",
        ),
        ({"role": "compaction_summary", "summary": "s", "timestamp": 1}, "tokens_before"),
        ({"role": "branch_summary", "summary": "s", "timestamp": 1}, "from_id"),
    ],
)
def test_corrupt_inputs(raw: Any, needle: str) -> None:
    with pytest.raises(SessionError) as exc_info:
        message_from_dict(raw)
    assert_error(exc_info, "corrupt")
    assert needle in exc_info.value.message


def test_message_to_dict_rejects_non_messages() -> None:
    with pytest.raises(SessionError) as exc_info:
        message_to_dict({"role": "user"})
    assert_error(exc_info, "invalid_argument")


def test_subclass_serializes_like_its_base() -> None:
    @dataclasses.dataclass(frozen=True, slots=True, repr=False)
    class Tagged(UserMessage):
        pass

    assert message_to_dict(Tagged("x", timestamp=1)) == message_to_dict(
        UserMessage("x", timestamp=1)
    )


# --------------------------------------------------------------------------- reprs


def test_repr_truncates_long_text() -> None:
    r = repr(UserMessage("x" * 500, timestamp=1))
    assert len(r) < 120
    assert r.startswith("UserMessage(content='xxx") and "…" in r
    r = repr(TextContent("y" * 500))
    assert len(r) < 100


def test_repr_skips_defaults_and_bounds_images() -> None:
    assert repr(UserMessage("hi", timestamp=1)) == "UserMessage(content='hi', timestamp=1)"
    assert repr(ImageContent("A" * 10_000, "image/png")) == (
        "ImageContent(mime_type='image/png', data=<10000 chars>)"
    )
    r = repr(AssistantMessage([TextContent(str(i)) for i in range(50)], "p", "m", timestamp=1))
    assert "47 more" in r
    assert "usage" not in r and "stop_reason" not in r


def test_repr_bounds_details() -> None:
    r = repr(CustomMessage("k", "v", details={"big": list(range(1000))}, timestamp=1))
    assert len(r) < 200


# --------------------------------------------------------------------------- create_* helpers


def test_create_helpers_convert_iso_to_ms() -> None:
    iso = "2025-11-30T16:48:30.123Z"
    ms = 1_764_521_310_123
    assert create_custom_message("k", "v", False, {"a": 1}, iso) == CustomMessage(
        "k", "v", False, {"a": 1}, ms
    )
    assert create_compaction_summary_message("s", 10, iso) == CompactionSummaryMessage("s", 10, ms)
    assert create_branch_summary_message("s", "a1", iso) == BranchSummaryMessage("s", "a1", ms)


def test_create_helpers_reject_bad_timestamps() -> None:
    with pytest.raises(SessionError) as exc_info:
        create_branch_summary_message("s", "a1", "yesterday")
    assert_error(exc_info, "invalid_argument")


# --------------------------------------------------------------------------- time helpers


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1970-01-01T00:00:00.000Z", 0),
        ("1970-01-01T00:00:00Z", 0),
        ("1970-01-01T00:00:00+00:00", 0),
        ("1970-01-01T00:00:00.5+00:00", 500),
        ("1970-01-01T00:00:00.123456789Z", 123),
        ("1970-01-01T01:00:00.000+01:00", 0),
        ("1969-12-31T19:00:00-05:00", 0),
        ("1969-12-31T23:59:59.999Z", -1),
        ("2025-11-30T16:48:30.123Z", 1_764_521_310_123),
        ("2025-11-30 16:48:30.123z", 1_764_521_310_123),
        ("2025-11-30T16:48:30.123", 1_764_521_310_123),
    ],
)
def test_iso_to_ms(text: str, ms: int) -> None:
    assert iso_to_ms(text) == ms


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yesterday",
        "2025-13-01T00:00:00Z",
        "2025-02-30T00:00:00Z",
        "2025-01-01T24:00:00Z",
        "2025-01-01T00:00:00+25:00",
        "2025-01-01T00:00:00Zjunk",
        "2025-01-01",
        "٢٠٢٥-01-01T00:00:00Z",
    ],
)
def test_iso_to_ms_rejects_garbage(text: str) -> None:
    with pytest.raises(SessionError) as exc_info:
        iso_to_ms(text)
    assert_error(exc_info, "invalid_argument")


def test_iso_to_ms_rejects_non_str() -> None:
    with pytest.raises(SessionError) as exc_info:
        iso_to_ms(0)
    assert_error(exc_info, "invalid_argument")


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (1_764_521_310_123, "2025-11-30T16:48:30.123Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (-62_135_596_800_000, "0001-01-01T00:00:00.000Z"),
    ],
)
def test_ms_to_iso(ms: int, text: str) -> None:
    assert ms_to_iso(ms) == text
    assert iso_to_ms(text) == ms


@pytest.mark.parametrize("bad", [1.5, True, "0", 10**20])
def test_ms_to_iso_rejects(bad: Any) -> None:
    with pytest.raises(SessionError) as exc_info:
        ms_to_iso(bad)
    assert_error(exc_info, "invalid_argument")


def test_iso_to_datetime_is_aware_utc() -> None:
    dt = iso_to_datetime("2025-11-30T17:48:30.123456+01:00")
    assert dt == datetime(2025, 11, 30, 16, 48, 30, 123456, tzinfo=timezone.utc)
    assert dt.tzinfo is timezone.utc


def test_now_iso_format_and_agreement() -> None:
    import re

    before = now_ms()
    text = now_iso()
    after = now_ms()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", text)
    assert before <= iso_to_ms(text) <= after


# --------------------------------------------------------------------------- values refused


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Usage(input=-1), "Usage.input"),
        (lambda: Usage(output=-1), "Usage.output"),
        (lambda: Usage(cache_read=-1), "Usage.cache_read"),
        (lambda: Usage(cache_write=-2), "Usage.cache_write"),
        (lambda: Usage(total_tokens=-10), "Usage.total_tokens"),
        (lambda: Cost(input=-0.01), "Cost.input"),
        (lambda: Cost(output=-1), "Cost.output"),
        (lambda: Cost(cache_read=-1.0), "Cost.cache_read"),
        (lambda: Cost(cache_write=-1.0), "Cost.cache_write"),
        (lambda: Cost(total=-0.5), "Cost.total"),
        (lambda: Cost(total=float("nan")), "Cost.total"),
        (lambda: Cost(input=float("inf")), "Cost.input"),
        (lambda: CompactionSummaryMessage("s", -1), "CompactionSummaryMessage.tokens_before"),
        (lambda: AssistantMessage([], "", "m"), "AssistantMessage.provider"),
        (lambda: AssistantMessage([], "p", ""), "AssistantMessage.model"),
        (lambda: ImageContent("aGk=", "text/plain"), "ImageContent.mime_type"),
        (lambda: ImageContent("aGk=", "png"), "ImageContent.mime_type"),
        (lambda: ImageContent("aGk=", ""), "ImageContent.mime_type"),
        (lambda: ToolCall("c1", "read", {1: "x"}), "ToolCall.arguments"),
        (lambda: ToolCall("c1", "read", {"a": [{"b": {2.5: 1}}]}), "ToolCall.arguments"),
        (lambda: ToolCall("c1", "read", {"a": ({(1, 2): 1},)}), "ToolCall.arguments"),
        (
            lambda: ToolResultMessage("c1", "read", [], details={None: 1}),
            "ToolResultMessage.details",
        ),
        (lambda: CustomMessage("k", "v", details=[{True: 1}]), "CustomMessage.details"),
        (lambda: UnknownMessage("x", {"role": "x", "d": {0: 0}}), "UnknownMessage.data"),
    ],
)
def test_wrong_values_are_refused_where_made(build: Any, field: str) -> None:
    with pytest.raises(SessionError, match=re.escape(field)) as exc_info:
        build()
    assert_error(exc_info, "invalid_argument")


def test_values_at_the_edges_are_accepted() -> None:
    assert Usage(0, 0, 0, 0, 0, Cost(0, 0.0, 0, 0, 0.0)) == Usage()
    assert Cost(total=-0.0).total == 0.0
    assert ImageContent("aGk=", "image/svg+xml").mime_type == "image/svg+xml"
    assert ImageContent("aGk=", "IMAGE/PNG").mime_type == "IMAGE/PNG"  # MIME is case-blind
    shared: dict[str, Any] = {"k": [1, {"deep": None}]}
    call = ToolCall("c1", "read", {"a": shared, "b": shared, "c": [shared, (shared,)]})
    assert call.arguments["b"] is shared
    loop: list[Any] = []
    loop.append(loop)  # circular: refused at the append, but the key check ends
    assert CustomMessage("k", "v", details=loop).details is loop
    assert AssistantMessage([], "p", "m").provider == "p"


def test_a_non_str_key_is_not_rewritten_into_a_str() -> None:
    # json.dumps would store {1: "x"} as {"1": "x"}: the message would not read back.
    with pytest.raises(SessionError, match=r"ToolCall\.arguments has a dict key 1 of type int"):
        ToolCall("c1", "read", {"opts": {1: "x"}})


def test_files_may_hold_values_users_may_not_construct() -> None:
    # Earlier versions wrote these and FORMAT.md only asks for the types: they still load.
    usage = {"input": -1, "output": 2, "cost": {"input": -0.5, "total": 0.0}}
    m = message_from_dict(
        {
            "role": "assistant",
            "content": [],
            "provider": "",
            "model": "",
            "usage": usage,
            "timestamp": 0,
        }
    )
    assert isinstance(m, AssistantMessage)
    assert (m.provider, m.model, m.usage.input, m.usage.cost.input) == ("", "", -1, -0.5)
    assert message_to_dict(m)["usage"]["input"] == -1
    image = message_from_dict(
        {
            "role": "user",
            "content": [{"type": "image", "data": "aGk=", "mime_type": "application/pdf"}],
            "timestamp": 0,
        }
    )
    assert isinstance(image, UserMessage)
    block = image.content[0]
    assert isinstance(block, ImageContent) and block.mime_type == "application/pdf"
    summary = message_from_dict(
        {"role": "compaction_summary", "summary": "s", "tokens_before": -3, "timestamp": 0}
    )
    assert isinstance(summary, CompactionSummaryMessage) and summary.tokens_before == -3
    # The context of such an entry still builds its summary message.
    iso = "1970-01-01T00:00:00.000Z"
    assert create_compaction_summary_message("s", -3, iso).tokens_before == -3
    # The reading leniency ends with the read.
    with pytest.raises(SessionError):
        CompactionSummaryMessage("s", -3, timestamp=0)
