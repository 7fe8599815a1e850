"""Tests for sessiontree.model.entries (entries, header, JSON lines) and uuid7."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import pathlib
import pickle
import re
import threading
import time
from typing import Any

import pytest

from sessiontree._util import iso_to_ms, now_ms, uuid7
from sessiontree.errors import SessionError
from sessiontree.model.entries import (
    ENTRY_TYPES,
    FORMAT_VERSION,
    THINKING_LEVELS,
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    SessionTreeEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
    entry_from_dict,
    entry_from_json,
    entry_to_dict,
    entry_to_json,
    header_from_dict,
    header_from_json,
    header_to_dict,
    header_to_json,
)
from sessiontree.model.messages import (
    AssistantMessage,
    Cost,
    TextContent,
    ToolCall,
    UnknownMessage,
    Usage,
    UserMessage,
)

T = "2026-11-30T16:48:30.123Z"
BASE: dict[str, Any] = {"id": "e1", "parent_id": "e0", "timestamp": T}
USAGE = Usage(input=5, output=6, total_tokens=11, cost=Cost(total=0.5))


def sample_entries() -> list[SessionTreeEntry]:
    """One entry of every type, with non-default values where possible."""
    return [
        MessageEntry(**BASE, message=UserMessage("Hello", timestamp=1)),
        MessageEntry(
            id="e2",
            parent_id=None,
            timestamp=T,
            message=AssistantMessage(
                [TextContent("hi"), ToolCall("c1", "bash", {"cmd": "ls"})],
                "anthropic",
                "claude",
                usage=USAGE,
                stop_reason="tool_use",
                timestamp=2,
            ),
        ),
        ThinkingLevelChangeEntry(**BASE, thinking_level="high"),
        ModelChangeEntry(**BASE, provider="openai", model_id="gpt-5"),
        ActiveToolsChangeEntry(**BASE, active_tool_names=["read", "bash"]),
        CompactionEntry(
            **BASE,
            summary="so far",
            first_kept_entry_id="e0",
            tokens_before=1234,
            retained_tail=[UserMessage("kept", timestamp=3)],
            details={"files": ["a.py"]},
            usage=USAGE,
            from_hook=True,
        ),
        CompactionEntry(**BASE, summary="s", first_kept_entry_id=None, tokens_before=0),
        BranchSummaryEntry(
            **BASE, from_id="e0", summary="tried X", details=[1, 2], usage=USAGE, from_hook=True
        ),
        CustomEntry(**BASE, custom_type="bookmark", data={"k": [1, None, "é"]}),
        CustomEntry(**BASE, custom_type="empty"),
        CustomMessageEntry(
            **BASE, custom_type="note", content="remember", details={"x": 1}, display=False
        ),
        LabelEntry(**BASE, target_id="e0", label="checkpoint"),
        LabelEntry(**BASE, target_id="e0", label=None),
        SessionInfoEntry(**BASE, name="my session"),
        SessionInfoEntry(**BASE, name=None),
        LeafEntry(**BASE, target_id="e0"),
        LeafEntry(id="e9", parent_id="e1", timestamp=T, target_id=None),
        UnknownEntry(
            **BASE,
            type="future_thing",
            data={"type": "future_thing", **BASE, "payload": {"z": 1, "a": 2}},
        ),
    ]


def assert_code(exc_info: pytest.ExceptionInfo[SessionError], code: str) -> None:
    assert exc_info.value.code == code, exc_info.value


# --------------------------------------------------------------------------- construction


def test_type_attribute_per_class() -> None:
    types = {type(e).__name__: e.type for e in sample_entries()}
    assert types == {
        "MessageEntry": "message",
        "ThinkingLevelChangeEntry": "thinking_level_change",
        "ModelChangeEntry": "model_change",
        "ActiveToolsChangeEntry": "active_tools_change",
        "CompactionEntry": "compaction",
        "BranchSummaryEntry": "branch_summary",
        "CustomEntry": "custom",
        "CustomMessageEntry": "custom_message",
        "LabelEntry": "label",
        "SessionInfoEntry": "session_info",
        "LeafEntry": "leaf",
        "UnknownEntry": "future_thing",
    }
    assert set(types.values()) - {"future_thing"} == set(ENTRY_TYPES)
    assert len(ENTRY_TYPES) == 11


def test_common_attributes() -> None:
    for e in sample_entries():
        assert isinstance(e, SessionTreeEntry)
        assert isinstance(e.id, str) and e.timestamp == T
        assert e.parent_id in ("e0", None, "e1")


def test_type_is_not_settable() -> None:
    e = LeafEntry(**BASE, target_id=None)
    # A field and a name that is not a field (``type`` is a property) alike.
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.target_id = "e9"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.type = "label"  # type: ignore[misc]
    assert e.type == "leaf" and e.target_id is None


def test_base_fields_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        LeafEntry("e1", None, T, "e0")  # type: ignore[misc]
    with pytest.raises(TypeError):
        LabelEntry("e0", "x", "e1", None, T)  # type: ignore[misc]


def positional_pairs() -> list[tuple[SessionTreeEntry, SessionTreeEntry]]:
    """Each type built with its own fields by position (API.md's order) and by keyword."""
    return [
        (
            MessageEntry(UserMessage("Hello", timestamp=1), **BASE),
            MessageEntry(message=UserMessage("Hello", timestamp=1), **BASE),
        ),
        (
            ThinkingLevelChangeEntry("high", **BASE),
            ThinkingLevelChangeEntry(thinking_level="high", **BASE),
        ),
        (
            ModelChangeEntry("anthropic", "claude", **BASE),
            ModelChangeEntry(provider="anthropic", model_id="claude", **BASE),
        ),
        (
            ActiveToolsChangeEntry(["read"], **BASE),
            ActiveToolsChangeEntry(active_tool_names=["read"], **BASE),
        ),
        (
            CompactionEntry("sum", "e0", 12, None, {"d": 1}, USAGE, True, **BASE),
            CompactionEntry(
                summary="sum",
                first_kept_entry_id="e0",
                tokens_before=12,
                retained_tail=None,
                details={"d": 1},
                usage=USAGE,
                from_hook=True,
                **BASE,
            ),
        ),
        (
            BranchSummaryEntry("e0", "tried", [1], USAGE, True, **BASE),
            BranchSummaryEntry(
                from_id="e0", summary="tried", details=[1], usage=USAGE, from_hook=True, **BASE
            ),
        ),
        (
            CustomEntry("bookmark", {"k": 1}, **BASE),
            CustomEntry(custom_type="bookmark", data={"k": 1}, **BASE),
        ),
        (
            CustomMessageEntry("note", "text", {"x": 1}, False, **BASE),
            CustomMessageEntry(
                custom_type="note", content="text", details={"x": 1}, display=False, **BASE
            ),
        ),
        (LabelEntry("e0", "mark", **BASE), LabelEntry(target_id="e0", label="mark", **BASE)),
        (SessionInfoEntry("name", **BASE), SessionInfoEntry(name="name", **BASE)),
        (LeafEntry("e0", **BASE), LeafEntry(target_id="e0", **BASE)),
        (
            UnknownEntry("future", {"type": "future", **BASE}, **BASE),
            UnknownEntry(type="future", data={"type": "future", **BASE}, **BASE),
        ),
    ]


def test_own_fields_are_positional() -> None:
    pairs = positional_pairs()
    assert {type(p[0]) for p in pairs} == {type(e) for e in sample_entries()}
    for by_position, by_keyword in pairs:
        check_positional(by_position, by_keyword)


def check_positional(by_position: SessionTreeEntry, by_keyword: SessionTreeEntry) -> None:
    assert by_position == by_keyword
    assert entry_to_json(by_position) == entry_to_json(by_keyword)
    own = [f.name for f in dataclasses.fields(by_position) if f.init and not f.kw_only]
    assert type(by_position).__match_args__ == tuple(own)
    assert not {"id", "parent_id", "timestamp"} & set(own)
    assert pickle.loads(pickle.dumps(by_position)) == by_position
    assert copy.copy(by_position) == by_position
    assert copy.deepcopy(by_position) == by_position
    if not isinstance(by_position, UnknownEntry):  # its data must carry the same id
        assert dataclasses.replace(by_position, id="e7") == dataclasses.replace(by_keyword, id="e7")


def test_match_by_position() -> None:
    entry: SessionTreeEntry = ModelChangeEntry("anthropic", "claude", **BASE)
    match entry:
        case ModelChangeEntry(provider, model_id):
            assert (provider, model_id) == ("anthropic", "claude")
        case _:
            pytest.fail("ModelChangeEntry did not match by position")
    match LabelEntry("e0", None, **BASE):
        case LabelEntry(target, None):
            assert target == "e0"
        case _:
            pytest.fail("LabelEntry did not match by position")
    assert ModelChangeEntry.__match_args__ == ("provider", "model_id")
    assert MessageEntry.__match_args__ == ("message",)
    assert CompactionEntry.__match_args__[:3] == ("summary", "first_kept_entry_id", "tokens_before")


def test_base_class_is_abstract() -> None:
    with pytest.raises(TypeError):
        SessionTreeEntry(**BASE)


def test_defaults() -> None:
    c = CompactionEntry(**BASE, summary="s", first_kept_entry_id=None, tokens_before=1)
    assert (c.retained_tail, c.details, c.usage, c.from_hook) == (None, None, None, False)
    b = BranchSummaryEntry(**BASE, from_id="x", summary="s")
    assert (b.details, b.usage, b.from_hook) == (None, None, False)
    assert CustomEntry(**BASE, custom_type="k").data is None
    m = CustomMessageEntry(**BASE, custom_type="k", content="c")
    assert (m.details, m.display) == (None, True)


def test_sequences_become_tuples() -> None:
    names = ["a", "b"]
    e = ActiveToolsChangeEntry(**BASE, active_tool_names=names)
    names.append("c")
    assert e.active_tool_names == ("a", "b")
    tail = [UserMessage("x", timestamp=1)]
    c = CompactionEntry(
        **BASE, summary="s", first_kept_entry_id=None, tokens_before=1, retained_tail=tail
    )
    assert isinstance(c.retained_tail, tuple)


def test_every_thinking_level_accepted() -> None:
    assert THINKING_LEVELS == ("off", "minimal", "low", "medium", "high", "xhigh")
    for level in THINKING_LEVELS:
        ThinkingLevelChangeEntry(**BASE, thinking_level=level)


@pytest.mark.parametrize(
    "build",
    [
        lambda: LeafEntry(id="", parent_id=None, timestamp=T, target_id=None),
        lambda: LeafEntry(id=5, parent_id=None, timestamp=T, target_id=None),
        lambda: LeafEntry(id=None, parent_id=None, timestamp=T, target_id=None),
        lambda: LeafEntry(id="a", parent_id=5, timestamp=T, target_id=None),
        lambda: LeafEntry(id="a", parent_id=None, timestamp=1, target_id=None),
        lambda: LeafEntry(id="a", parent_id=None, timestamp=T, target_id=7),
        lambda: ThinkingLevelChangeEntry(**BASE, thinking_level="extreme"),
        lambda: ThinkingLevelChangeEntry(**BASE, thinking_level=None),
        lambda: ThinkingLevelChangeEntry(**BASE, thinking_level=["high"]),
        lambda: MessageEntry(**BASE, message={"role": "user", "content": "x"}),
        lambda: MessageEntry(**BASE, message=TextContent("x")),
        lambda: ModelChangeEntry(**BASE, provider="p", model_id=None),
        lambda: ActiveToolsChangeEntry(**BASE, active_tool_names="read"),
        lambda: ActiveToolsChangeEntry(**BASE, active_tool_names=["read", 1]),
        lambda: ActiveToolsChangeEntry(**BASE, active_tool_names={"read"}),
        lambda: CompactionEntry(**BASE, summary="s", first_kept_entry_id=None, tokens_before=True),
        lambda: CompactionEntry(**BASE, summary="s", first_kept_entry_id=None, tokens_before="1"),
        lambda: CompactionEntry(**BASE, summary=None, first_kept_entry_id=None, tokens_before=1),
        lambda: CompactionEntry(**BASE, summary="s", first_kept_entry_id=3, tokens_before=1),
        lambda: CompactionEntry(
            **BASE, summary="s", first_kept_entry_id=None, tokens_before=1, retained_tail=["x"]
        ),
        lambda: CompactionEntry(
            **BASE, summary="s", first_kept_entry_id=None, tokens_before=1, retained_tail="x"
        ),
        lambda: CompactionEntry(
            **BASE, summary="s", first_kept_entry_id=None, tokens_before=1, usage={"input": 1}
        ),
        lambda: CompactionEntry(
            **BASE, summary="s", first_kept_entry_id=None, tokens_before=1, from_hook=None
        ),
        lambda: BranchSummaryEntry(**BASE, from_id=None, summary="s"),
        lambda: BranchSummaryEntry(**BASE, from_id="a", summary="s", usage=Cost()),
        lambda: CustomEntry(**BASE, custom_type=None),
        lambda: CustomMessageEntry(**BASE, custom_type="k", content=None),
        lambda: CustomMessageEntry(**BASE, custom_type="k", content="c", display=0),
        lambda: LabelEntry(**BASE, target_id="a", label=5),
        lambda: LabelEntry(**BASE, target_id=None, label="x"),
        lambda: SessionInfoEntry(**BASE, name=1),
        lambda: UnknownEntry(**BASE, type="message", data={"type": "message", **BASE}),
        lambda: UnknownEntry(**BASE, type="x", data=[1]),
        lambda: UnknownEntry(**BASE, type="x", data={"type": "y", **BASE}),
        lambda: UnknownEntry(**BASE, type="x", data={"type": "x", **BASE, "id": "other"}),
        lambda: UnknownEntry(**BASE, type=None, data={"type": None, **BASE}),
    ],
)
def test_invalid_arguments(build: Any) -> None:
    with pytest.raises(SessionError) as exc_info:
        build()
    assert_code(exc_info, "invalid_argument")


def test_id_length_limit() -> None:
    LeafEntry(id="x" * 256, parent_id=None, timestamp=T, target_id=None)
    LeafEntry(id="é" * 128, parent_id=None, timestamp=T, target_id=None)
    with pytest.raises(SessionError) as exc_info:
        LeafEntry(id="x" * 257, parent_id=None, timestamp=T, target_id=None)
    assert_code(exc_info, "limit_exceeded")
    with pytest.raises(SessionError) as exc_info:
        LeafEntry(id="é" * 129, parent_id=None, timestamp=T, target_id=None)
    assert_code(exc_info, "limit_exceeded")


# --------------------------------------------------------------------------- value semantics


def test_immutable() -> None:
    for e in sample_entries():
        with pytest.raises(dataclasses.FrozenInstanceError):
            e.id = "other"
        with pytest.raises(dataclasses.FrozenInstanceError):
            del e.parent_id
        with pytest.raises(AttributeError):
            e.new_attribute = 1


def test_equality_by_value() -> None:
    assert sample_entries() == sample_entries()
    a = LabelEntry(**BASE, target_id="e0", label="x")
    assert a != LabelEntry(**BASE, target_id="e0", label="y")
    assert a != dataclasses.replace(a, timestamp="2026-11-30T16:48:30.124Z")
    assert LeafEntry(**BASE, target_id=None) != SessionInfoEntry(**BASE, name=None)
    assert hash(a) == hash(LabelEntry(**BASE, target_id="e0", label="x"))


def test_replace_builds_a_validated_copy() -> None:
    a = LabelEntry(**BASE, target_id="e0", label="x")
    assert dataclasses.replace(a, label="y").label == "y"
    with pytest.raises(SessionError):
        dataclasses.replace(a, label=3)


def test_pickle_round_trip() -> None:
    for e in sample_entries():
        assert pickle.loads(pickle.dumps(e)) == e


# --------------------------------------------------------------------------- JSON round trips


@pytest.mark.parametrize("entry", sample_entries(), ids=lambda e: f"{e.type}")
def test_round_trip_through_json(entry: SessionTreeEntry) -> None:
    raw = entry_to_json(entry)
    assert isinstance(raw, bytes)
    assert not raw.endswith(b"\n")
    back = entry_from_json(raw)
    assert back == entry
    assert type(back) is type(entry)
    assert entry_to_json(back) == raw
    assert entry_from_json(raw.decode("utf-8")) == entry
    assert entry_from_dict(json.loads(raw)) == entry


def test_json_is_compact_utf8() -> None:
    e = SessionInfoEntry(id="a", parent_id=None, timestamp=T, name="héllo ✓")
    raw = entry_to_json(e)
    assert (
        raw
        == (
            '{"type":"session_info","id":"a","parent_id":null,'
            f'"timestamp":"{T}","name":"héllo ✓"}}'
        ).encode()
    )


EXPECTED_KEYS = {
    "message": ["message"],
    "thinking_level_change": ["thinking_level"],
    "model_change": ["provider", "model_id"],
    "active_tools_change": ["active_tool_names"],
    "compaction": [
        "summary",
        "first_kept_entry_id",
        "tokens_before",
        "retained_tail",
        "details",
        "usage",
        "from_hook",
    ],
    "branch_summary": ["from_id", "summary", "details", "usage", "from_hook"],
    "custom": ["custom_type", "data"],
    "custom_message": ["custom_type", "content", "details", "display"],
    "label": ["target_id", "label"],
    "session_info": ["name"],
    "leaf": ["target_id"],
}


@pytest.mark.parametrize("entry", sample_entries()[:-1], ids=lambda e: f"{e.type}")
def test_key_order(entry: SessionTreeEntry) -> None:
    keys = list(entry_to_dict(entry))
    assert keys == ["type", "id", "parent_id", "timestamp", *EXPECTED_KEYS[entry.type]]
    assert list(json.loads(entry_to_json(entry))) == keys


def test_nulls_are_written() -> None:
    c = CompactionEntry(
        id="a", parent_id=None, timestamp=T, summary="s", first_kept_entry_id=None, tokens_before=0
    )
    d = entry_to_dict(c)
    assert d["parent_id"] is None
    assert d["first_kept_entry_id"] is None
    assert d["retained_tail"] is None and d["details"] is None and d["usage"] is None
    assert d["from_hook"] is False


def test_compaction_dict_shape() -> None:
    d = entry_to_dict(sample_entries()[5])
    assert d["retained_tail"] == [{"role": "user", "content": "kept", "timestamp": 3}]
    assert d["usage"]["cost"]["total"] == 0.5
    d = entry_to_dict(sample_entries()[4])
    assert d["active_tool_names"] == ["read", "bash"]


def test_unknown_entry_round_trips_unchanged() -> None:
    line = (
        b'{"type":"bookmark_v2","id":"u1","parent_id":null,"timestamp":"T",'
        b'"z":{"b":1,"a":[true,null,1.5]},"a":"\xc3\xa9"}'
    )
    e = entry_from_json(line)
    assert isinstance(e, UnknownEntry)
    assert (e.type, e.id, e.parent_id, e.timestamp) == ("bookmark_v2", "u1", None, "T")
    assert entry_to_dict(e) == json.loads(line)
    assert entry_to_json(e) == line


def test_unknown_message_role_inside_entry_round_trips() -> None:
    line = (
        b'{"type":"message","id":"m1","parent_id":null,"timestamp":"T",'
        b'"message":{"role":"bash_execution","command":"ls","exit_code":0}}'
    )
    e = entry_from_json(line)
    assert isinstance(e, MessageEntry)
    assert isinstance(e.message, UnknownMessage)
    assert e.message.role == "bash_execution"
    assert entry_to_json(e) == line


def test_unknown_fields_on_known_types_are_preserved() -> None:
    line = (
        b'{"type":"label","id":"l1","parent_id":"e0","timestamp":"T","target_id":"e0",'
        b'"label":"x","color":"red"}'
    )
    e = entry_from_json(line)
    assert e == LabelEntry(id="l1", parent_id="e0", timestamp="T", target_id="e0", label="x")
    assert entry_to_json(e) == line
    assert "color" not in repr(e)


def test_missing_optional_fields_use_defaults() -> None:
    e = entry_from_dict(
        {
            "type": "compaction",
            **BASE,
            "summary": "s",
            "first_kept_entry_id": None,
            "tokens_before": 3,
        }
    )
    assert e == CompactionEntry(**BASE, summary="s", first_kept_entry_id=None, tokens_before=3)
    e = entry_from_dict({"type": "custom", **BASE, "custom_type": "k"})
    assert e == CustomEntry(**BASE, custom_type="k")
    e = entry_from_dict({"type": "custom_message", **BASE, "custom_type": "k", "content": "c"})
    assert e == CustomMessageEntry(**BASE, custom_type="k", content="c")


def test_trailing_newline_and_crlf_tolerated() -> None:
    raw = entry_to_json(LeafEntry(**BASE, target_id=None))
    assert entry_from_json(raw + b"\r\n") == LeafEntry(**BASE, target_id=None)
    assert entry_from_json(bytearray(raw)) == LeafEntry(**BASE, target_id=None)
    assert entry_from_json(memoryview(raw)) == LeafEntry(**BASE, target_id=None)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "details",
    [float("nan"), float("inf"), {"x": -float("inf")}, {1, 2}, object(), b"bytes"],
    ids=["nan", "inf", "nested-inf", "set", "object", "bytes"],
)
def test_unserialisable_values_refused(details: Any) -> None:
    e = CustomEntry(**BASE, custom_type="k", data=details)
    with pytest.raises(SessionError) as exc_info:
        entry_to_json(e)
    assert_code(exc_info, "invalid_argument")


def test_circular_details_refused() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(SessionError) as exc_info:
        entry_to_json(CustomEntry(**BASE, custom_type="k", data=loop))
    assert_code(exc_info, "invalid_argument")


def test_lone_surrogate_refused() -> None:
    with pytest.raises(SessionError) as exc_info:
        entry_to_json(SessionInfoEntry(**BASE, name="\ud800"))
    assert_code(exc_info, "invalid_argument")


def test_entry_to_dict_rejects_non_entries() -> None:
    with pytest.raises(SessionError) as exc_info:
        entry_to_dict({"type": "leaf"})
    assert_code(exc_info, "invalid_argument")


def test_entry_from_json_rejects_other_types() -> None:
    with pytest.raises(SessionError) as exc_info:
        entry_from_json(123)
    assert_code(exc_info, "invalid_argument")


def line(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"", "JSON"),
        (b"{not json", "JSON"),
        (b'{"type":"leaf","id":"a"', "JSON"),
        (b"[1,2]", "object"),
        (b'"leaf"', "object"),
        (b"\xff\xfe{}", "UTF-8"),
        (
            b'{"type":"custom","id":"a","parent_id":null,"timestamp":"T","custom_type":"k","data":NaN}',
            "NaN",
        ),
        (
            b'{"type":"custom","id":"a","parent_id":null,"timestamp":"T","custom_type":"k","data":-Infinity}',
            "Infinity",
        ),
        (b'{"id":"a","parent_id":null,"timestamp":"T"}', "type"),
        (line(type=3, id="a", parent_id=None, timestamp="T"), "type"),
        (line(type="leaf", parent_id=None, timestamp="T", target_id=None), "'id'"),
        (line(type="leaf", id="a", timestamp="T", target_id=None), "'parent_id'"),
        (line(type="leaf", id="a", parent_id=None, target_id=None), "'timestamp'"),
        (line(type="leaf", id="a", parent_id=None, timestamp="T"), "'target_id'"),
        (line(type="leaf", id="", parent_id=None, timestamp="T", target_id=None), "id"),
        (line(type="leaf", id="x" * 300, parent_id=None, timestamp="T", target_id=None), "256"),
        (line(type="leaf", id=1, parent_id=None, timestamp="T", target_id=None), "id"),
        (line(type="future", parent_id=None, timestamp="T"), "'id'"),
        (line(type="future", id=7, parent_id=None, timestamp="T"), "id"),
        (line(type="thinking_level_change", **BASE, thinking_level="max"), "thinking_level"),
        (line(type="model_change", **BASE, provider="p"), "model_id"),
        (line(type="active_tools_change", **BASE, active_tool_names="bash"), "active_tool_names"),
        (line(type="active_tools_change", **BASE, active_tool_names=[1]), "active_tool_names"),
        (line(type="message", **BASE), "'message'"),
        (line(type="message", **BASE, message="hi"), "message"),
        (line(type="message", **BASE, message={"role": "user", "content": "x"}), "timestamp"),
        (line(type="message", **BASE, message={"content": "x", "timestamp": 1}), "role"),
        (
            line(
                type="compaction", **BASE, summary="s", first_kept_entry_id=None, tokens_before=1.5
            ),
            "tokens_before",
        ),
        (line(type="compaction", **BASE, summary="s", tokens_before=1), "first_kept_entry_id"),
        (
            line(
                type="compaction",
                **BASE,
                summary="s",
                first_kept_entry_id=None,
                tokens_before=1,
                retained_tail={},
            ),
            "retained_tail",
        ),
        (
            line(
                type="compaction",
                **BASE,
                summary="s",
                first_kept_entry_id=None,
                tokens_before=1,
                retained_tail=[{"role": "user"}],
            ),
            "content",
        ),
        (
            line(
                type="compaction",
                **BASE,
                summary="s",
                first_kept_entry_id=None,
                tokens_before=1,
                usage=3,
            ),
            "usage",
        ),
        (line(type="branch_summary", **BASE, summary="s"), "from_id"),
        (
            line(type="branch_summary", **BASE, summary="s", from_id="x", from_hook="yes"),
            "from_hook",
        ),
        (line(type="custom", **BASE), "custom_type"),
        (line(type="custom_message", **BASE, custom_type="k", content=["x"]), "content"),
        (line(type="label", **BASE, target_id="x"), "'label'"),
        (line(type="session_info", **BASE), "'name'"),
        (line(type="session_info", **BASE, name=3), "name"),
    ],
)
def test_corrupt_lines(raw: bytes, needle: str) -> None:
    with pytest.raises(SessionError) as exc_info:
        entry_from_json(raw)
    assert_code(exc_info, "corrupt")
    assert isinstance(exc_info.value, ValueError)
    assert needle in exc_info.value.message


def test_corrupt_message_names_entry_and_field() -> None:
    with pytest.raises(SessionError, match=r"thinking_level_change entry 'e1'.*thinking_level"):
        entry_from_dict({"type": "thinking_level_change", **BASE, "thinking_level": 3})


def test_deeply_nested_json_is_corrupt_not_a_crash() -> None:
    raw = (
        b'{"type":"custom","id":"a","parent_id":null,"timestamp":"T","custom_type":"k","data":'
        + (b"[" * 100_000)
        + (b"]" * 100_000)
        + b"}"
    )
    with pytest.raises(SessionError) as exc_info:
        entry_from_json(raw)
    assert_code(exc_info, "corrupt")


# --------------------------------------------------------------------------- reprs


def test_message_entry_repr() -> None:
    e = MessageEntry(
        id="a1b2c3d4", parent_id=None, timestamp=T, message=UserMessage("Hello", timestamp=1)
    )
    assert repr(e) == "MessageEntry(id='a1b2c3d4', parent_id=None, role='user', text='Hello')"
    long = MessageEntry(
        id="a", parent_id="p", timestamp=T, message=UserMessage("w " * 500, timestamp=1)
    )
    assert len(repr(long)) < 140 and "…" in repr(long)
    tool = MessageEntry(
        id="a",
        parent_id="p",
        timestamp=T,
        message=AssistantMessage(
            [TextContent("Let me look."), ToolCall("c", "read", {})], "p", "m"
        ),
    )
    assert "Let me look. read(…)" in repr(tool)


def test_other_reprs_are_bounded_and_skip_defaults() -> None:
    e = CustomEntry(**BASE, custom_type="k", data={"big": "x" * 10_000})
    assert len(repr(e)) < 200
    assert repr(LabelEntry(**BASE, target_id="e0", label="x")) == (
        "LabelEntry(id='e1', parent_id='e0', target_id='e0', label='x')"
    )
    c = CompactionEntry(**BASE, summary="s", first_kept_entry_id=None, tokens_before=1)
    assert "details" not in repr(c) and "from_hook" not in repr(c)


# --------------------------------------------------------------------------- header


def test_header_generate() -> None:
    before = now_ms()
    h = SessionHeader.generate()
    after = now_ms()
    assert h.cwd == os.getcwd()
    assert h.version == FORMAT_VERSION == 3
    assert h.parent_session is None and h.metadata is None
    assert before <= iso_to_ms(h.timestamp) <= after
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", h.id
    )
    h2 = SessionHeader.generate(
        cwd=pathlib.Path("/srv/app"), parent_session="p1", metadata={"k": 1}, session_id="s-1"
    )
    assert (h2.id, h2.cwd, h2.parent_session, h2.metadata) == ("s-1", "/srv/app", "p1", {"k": 1})
    assert h2.type == "session"


def test_header_accepts_pathlike_cwd() -> None:
    assert SessionHeader("s", T, pathlib.PurePosixPath("/a/b")).cwd == "/a/b"


def test_header_dict_and_json() -> None:
    h = SessionHeader("s1", T, "/home/user/project", parent_session="p0", metadata={"tag": "é"})
    d = header_to_dict(h)
    assert list(d) == ["type", "version", "id", "timestamp", "cwd", "parent_session", "metadata"]
    assert d["type"] == "session" and d["version"] == 3
    raw = header_to_json(h)
    assert (
        raw
        == (
            '{"type":"session","version":3,"id":"s1","timestamp":"' + T + '",'
            '"cwd":"/home/user/project","parent_session":"p0","metadata":{"tag":"é"}}'
        ).encode()
    )
    assert header_from_dict(json.loads(raw)) == h
    assert header_from_json(raw) == h
    plain = SessionHeader("s2", T, "/")
    assert header_to_dict(plain)["parent_session"] is None
    assert header_from_json(header_to_json(plain)) == plain


def test_header_from_dict_defaults_and_extras() -> None:
    d = {"type": "session", "version": 3, "id": "s", "timestamp": T, "cwd": "/", "app": {"v": 2}}
    h = header_from_dict(d)
    assert h == SessionHeader("s", T, "/")
    assert header_to_dict(h) == {**d, "parent_session": None, "metadata": None}


@pytest.mark.parametrize(
    "build",
    [
        lambda: SessionHeader("", T, "/"),
        lambda: SessionHeader(1, T, "/"),
        lambda: SessionHeader("s", None, "/"),
        lambda: SessionHeader("s", T, None),
        lambda: SessionHeader("s", T, b"/bytes"),
        lambda: SessionHeader("s", T, "/", parent_session=1),
        lambda: SessionHeader("s", T, "/", metadata=[1]),
        lambda: SessionHeader("s", T, "/", version=4),
        lambda: SessionHeader("s", T, "/", version=0),
        lambda: SessionHeader("s", T, "/", version="3"),
        lambda: SessionHeader.generate(metadata="x"),
    ],
)
def test_header_invalid_arguments(build: Any) -> None:
    with pytest.raises(SessionError) as exc_info:
        build()
    assert_code(exc_info, "invalid_argument")


@pytest.mark.parametrize(
    "d",
    [
        None,
        [1],
        {"type": "message", "version": 3, "id": "s", "timestamp": T, "cwd": "/"},
        {"version": 3, "id": "s", "timestamp": T, "cwd": "/"},
        {"type": "session", "id": "s", "timestamp": T, "cwd": "/"},
        {"type": "session", "version": "3", "id": "s", "timestamp": T, "cwd": "/"},
        {"type": "session", "version": True, "id": "s", "timestamp": T, "cwd": "/"},
        {"type": "session", "version": 4, "id": "s", "timestamp": T, "cwd": "/"},
        {"type": "session", "version": 0, "id": "s", "timestamp": T, "cwd": "/"},
        {"type": "session", "version": 3, "timestamp": T, "cwd": "/"},
        {"type": "session", "version": 3, "id": "s", "cwd": "/"},
        {"type": "session", "version": 3, "id": "s", "timestamp": T},
        {"type": "session", "version": 3, "id": "s", "timestamp": T, "cwd": 1},
        {"type": "session", "version": 3, "id": "s", "timestamp": T, "cwd": "/", "metadata": "m"},
    ],
)
def test_header_corrupt(d: Any) -> None:
    with pytest.raises(SessionError) as exc_info:
        header_from_dict(d)
    assert_code(exc_info, "corrupt")


def test_header_version_above_3_message() -> None:
    with pytest.raises(SessionError, match="version 4"):
        header_from_json(b'{"type":"session","version":4,"id":"s","timestamp":"T","cwd":"/"}')


def test_header_from_json_bad_bytes() -> None:
    with pytest.raises(SessionError) as exc_info:
        header_from_json(b"\xc3")
    assert_code(exc_info, "corrupt")


# --------------------------------------------------------------------------- uuid7

UUID7_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def test_uuid7_format_and_bits() -> None:
    before = now_ms()
    u = uuid7()
    after = now_ms()
    assert UUID7_RE.fullmatch(u), u
    value = int(u.replace("-", ""), 16)
    assert (value >> 76) & 0xF == 7  # version
    assert (value >> 62) & 0b11 == 0b10  # RFC 9562 variant
    assert before <= value >> 80 <= after + 1


def test_uuid7_is_stdlib_compatible() -> None:
    import uuid

    parsed = uuid.UUID(uuid7())
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122


def test_uuid7_sorts_by_creation_and_is_unique() -> None:
    ids = [uuid7() for _ in range(20_000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    first = uuid7()
    time.sleep(0.003)
    assert uuid7() > first


def test_uuid7_unique_across_threads() -> None:
    out: list[list[str]] = [[] for _ in range(4)]

    def work(bucket: list[str]) -> None:
        bucket.extend(uuid7() for _ in range(2000))

    threads = [threading.Thread(target=work, args=(b,)) for b in out]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [u for b in out for u in b]
    assert len(set(every)) == len(every)
    for bucket in out:
        assert bucket == sorted(bucket)


# --------------------------------------------------------------------------- values refused


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (
            lambda: CompactionEntry("s", None, -1, **BASE),
            "CompactionEntry.tokens_before",
        ),
        (lambda: ModelChangeEntry("", "claude", **BASE), "ModelChangeEntry.provider"),
        (lambda: ModelChangeEntry("anthropic", "", **BASE), "ModelChangeEntry.model_id"),
        (lambda: CustomEntry("k", {1: "x"}, **BASE), "CustomEntry.data"),
        (lambda: CustomEntry("k", [{"a": {(1, 2): 3}}], **BASE), "CustomEntry.data"),
        (
            lambda: CustomMessageEntry("k", "text", {"a": {2: 1}}, **BASE),
            "CustomMessageEntry.details",
        ),
        (
            lambda: CompactionEntry("s", None, 1, details={1: 1}, **BASE),
            "CompactionEntry.details",
        ),
        (
            lambda: BranchSummaryEntry("e0", "s", details={None: 1}, **BASE),
            "BranchSummaryEntry.details",
        ),
        (
            lambda: UnknownEntry("future", {"type": "future", **BASE, "x": {3: 4}}, **BASE),
            "UnknownEntry.data",
        ),
        (lambda: SessionHeader("s1", T, "/", metadata={"a": {1: 2}}), "SessionHeader.metadata"),
    ],
)
def test_wrong_values_are_refused_where_made(build: Any, field: str) -> None:
    with pytest.raises(SessionError, match=re.escape(field)) as exc_info:
        build()
    assert_code(exc_info, "invalid_argument")


def test_old_lines_with_such_values_still_load() -> None:
    line = {
        "type": "compaction",
        **BASE,
        "summary": "s",
        "first_kept_entry_id": None,
        "tokens_before": -5,
        "usage": {"input": -1, "cost": {"total": -0.25}},
    }
    c = entry_from_json(json.dumps(line))
    assert isinstance(c, CompactionEntry) and c.tokens_before == -5
    assert c.usage is not None and (c.usage.input, c.usage.cost.total) == (-1, -0.25)
    assert json.loads(entry_to_json(c))["tokens_before"] == -5
    m = entry_from_dict({"type": "model_change", **BASE, "provider": "", "model_id": ""})
    assert isinstance(m, ModelChangeEntry) and (m.provider, m.model_id) == ("", "")
    # Leniency is for reading only.
    with pytest.raises(SessionError):
        ModelChangeEntry("", "", **BASE)
