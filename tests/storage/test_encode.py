"""The binding's entry encoder (rust/py/encode.rs) and the one-call appends built on it.

An engine-backed storage writes the line of an appended entry from the entry's slots in
Rust; it must be exactly the line ``entry_to_json`` writes, and whatever the encoder does
not write itself must reach ``entry_to_json`` (the fallback), errors included.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import sessiontree as st
from sessiontree import _core
from sessiontree.model.entries import entry_to_json
from sessiontree.storage import engine as engine_module

ROOT = b'{"type":"custom","id":"p0","parent_id":null,"timestamp":"T","custom_type":"root"}'
BASE: dict[str, Any] = {"id": "x1", "parent_id": "p0", "timestamp": "2026-11-30T16:48:30.123Z"}
USAGE = st.Usage(5, 6, 1, 2, 14, cost=st.Cost(0.25, 0.5, total=0.75))


def sample_entries() -> list[st.SessionTreeEntry]:
    """One entry of every type (and every message role and block), hanging under ``p0``."""
    messages: list[st.AgentMessage] = [
        st.UserMessage("Hello", timestamp=1),
        st.UserMessage([st.TextContent("look"), st.ImageContent("aGk=", "image/png")], 2),
        st.AssistantMessage(
            [
                st.ThinkingContent("hmm", signature="sig", redacted=True),
                st.ThinkingContent("plain"),
                st.TextContent("hi", signature="s2"),
                st.ToolCall("c1", "bash", {"cmd": "ls", "n": [1, 2.5, None, True]}),
            ],
            "anthropic",
            "claude",
            api="messages",
            usage=USAGE,
            stop_reason="error",
            error_message="boom",
            timestamp=3,
        ),
        st.AssistantMessage([], "p", "m", timestamp=4),
        st.ToolResultMessage("c1", "bash", [st.TextContent("out")], True, {"exit": 1}, 5),
        st.CustomMessage("note", "remember", False, {"d": 1}, 6),
        st.CompactionSummaryMessage("so far", 1234, 7),
        st.BranchSummaryMessage("tried", "p0", 8),
    ]
    return [
        *(st.MessageEntry(m, **BASE) for m in messages),
        st.ThinkingLevelChangeEntry("high", **BASE),
        st.ModelChangeEntry("openai", "gpt-5", **BASE),
        st.ActiveToolsChangeEntry(["read", "bash"], **BASE),
        st.ActiveToolsChangeEntry((), **BASE),
        st.CompactionEntry(
            "s", "p0", 10, [messages[0], messages[2]], {"f": ["a"]}, USAGE, True, **BASE
        ),
        st.CompactionEntry("s", None, 0, **BASE),
        st.BranchSummaryEntry("p0", "tried X", [1, 2], USAGE, True, **BASE),
        st.BranchSummaryEntry("p0", "tried Y", **BASE),
        st.CustomEntry("bookmark", {"k": [1, None, "é"]}, **BASE),
        st.CustomEntry("empty", **BASE),
        st.CustomMessageEntry("note", "remember", {"x": 1}, False, **BASE),
        st.LabelEntry("p0", "checkpoint", **BASE),
        st.LabelEntry("p0", None, **BASE),
        st.SessionInfoEntry("my session", **BASE),
        st.SessionInfoEntry(None, **BASE),
        st.LeafEntry("p0", **BASE),
        st.LeafEntry(None, **BASE),
        st.UnknownEntry("future", {"type": "future", **BASE, "payload": {"z": 1}}, **BASE),
    ]


@pytest.fixture
def fallbacks() -> Iterator[list[Any]]:
    """The entries the encoder handed to the Python writer, in order."""
    seen: list[Any] = []

    def counting(entry: Any) -> bytes:
        seen.append(entry)
        return entry_to_json(entry)

    _core._register_encoder(engine_module._MODEL_CLASSES, counting)
    try:
        yield seen
    finally:
        _core._register_encoder(engine_module._MODEL_CLASSES, entry_to_json)


def storage() -> st.InMemorySessionStorage:
    header = st.model.entries.header_to_json(st.SessionHeader("s", "2026-01-01T00:00:00.000Z", "/"))
    return st.InMemorySessionStorage.from_jsonl(header + b"\n" + ROOT + b"\n")


def last_line(s: st.InMemorySessionStorage) -> bytes:
    return s.to_jsonl().rstrip(b"\n").rsplit(b"\n", 1)[-1]


def written(entry: st.SessionTreeEntry) -> bytes:
    """The line an engine storage writes for ``entry`` (which hangs under ``p0``)."""
    s = storage()
    s.append_entry(entry)
    return last_line(s)


@pytest.mark.parametrize("entry", sample_entries(), ids=repr)
def test_every_entry_type_is_written_as_entry_to_json(
    entry: st.SessionTreeEntry, fallbacks: list[Any]
) -> None:
    assert written(entry) == entry_to_json(entry)
    # Only the unknown entry type is left to Python.
    assert fallbacks == ([entry] if isinstance(entry, st.UnknownEntry) else [])


def test_unknown_fields_are_written_back(fallbacks: list[Any]) -> None:
    line = (
        b'{"type":"message","id":"x1","parent_id":"p0","timestamp":"T","message":'
        b'{"role":"assistant","content":[{"type":"text","text":"a","z":[1,{"q":null}]},'
        b'{"type":"thinking","thinking":"t","signature":"s","redacted":true,"w":1}],'
        b'"api":"x","provider":"p","model":"m","usage":{"input":1,"output":2,"cache_read":3,'
        b'"cache_write":4,"total_tokens":10,"cost":{"input":0.5,"output":0.25,'
        b'"cache_read":0.0,"cache_write":0.0,"total":0.75,"cents":75},"tier":"gold"},'
        b'"stop_reason":"length","error_message":null,"timestamp":5,"late":"m"},'
        b'"extra":{"k":"v"}}'
    )
    entry = st.entry_from_json(line)
    assert entry_to_json(entry) == line
    assert written(entry) == line
    assert fallbacks == []


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        'quote " back\\slash \n\r\t\b\f \x00\x1f\x7f é 日本語 🎉 \u2028',
        0,
        -(2**63),
        2**63 - 1,
        1.5,
        -0.0,
        1e16,
        1e-05,
        5e-324,
        1.7976931348623157e308,
        True,
        None,
        [],
        {},
        (1, "two", [3.0, {"four": None}]),
        {"nested": {"deep": [{"x": [[[]]]}]}, "": "empty key"},
    ],
    ids=repr,
)
def test_free_form_values(value: Any, fallbacks: list[Any]) -> None:
    entry = st.CustomEntry("k", {"v": value}, id="x1", parent_id="p0", timestamp="T")
    assert written(entry) == entry_to_json(entry)
    assert fallbacks == []


class Str(str):
    pass


class Int(int):
    pass


@pytest.mark.parametrize(
    "value",
    [
        2**64,  # wider than 64 bits: exact in Python's writer
        -(2**63) - 1,
        Str("a str subclass"),
        Int(5),
        collections.OrderedDict(a=1),
        {"k": Str("nested")},
    ],
    ids=repr,
)
def test_values_left_to_python(value: Any, fallbacks: list[Any]) -> None:
    entry = st.CustomEntry("k", {"v": value}, id="x1", parent_id="p0", timestamp="T")
    assert written(entry) == entry_to_json(entry)
    assert fallbacks == [entry]


@pytest.mark.parametrize(
    "data",
    [float("nan"), {"x": float("inf")}, "\ud800", {1, 2}, object(), b"bytes"],
    ids=["nan", "inf", "surrogate", "set", "object", "bytes"],
)
def test_errors_are_python_writers(data: Any, fallbacks: list[Any]) -> None:
    entry = st.CustomEntry("k", data, id="x1", parent_id="p0", timestamp="T")
    with pytest.raises(st.SessionError) as expected:
        entry_to_json(entry)
    s = storage()
    with pytest.raises(st.SessionError) as got:
        s.append_entry(entry)
    assert (got.value.code, got.value.message) == (expected.value.code, expected.value.message)
    assert len(s) == 1
    assert fallbacks == [entry]


def test_cycles_are_left_to_python(fallbacks: list[Any]) -> None:
    loop: list[Any] = []
    loop.append(loop)
    entry = st.CustomEntry("k", None, id="x1", parent_id="p0", timestamp="T")
    object.__setattr__(entry, "data", loop)
    with pytest.raises(st.SessionError) as got:
        storage().append_entry(entry)
    assert got.value.code == "invalid_argument"
    assert fallbacks == [entry]


def test_extra_naming_a_known_key_is_left_to_python(fallbacks: list[Any]) -> None:
    entry = st.LabelEntry("p0", "a", id="x1", parent_id="p0", timestamp="T")
    object.__setattr__(entry, "_extra", {"label": "b", "new": 1})
    assert written(entry) == entry_to_json(entry)
    assert json.loads(entry_to_json(entry))["label"] == "b"
    assert fallbacks == [entry]


class Shout(st.UserMessage):
    pass


def test_subclasses_are_left_to_python(fallbacks: list[Any]) -> None:
    entry = st.MessageEntry(Shout("hey", timestamp=1), id="x1", parent_id="p0", timestamp="T")
    assert written(entry) == entry_to_json(entry)
    assert fallbacks == [entry]


finite = hs.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(
    hs.lists(finite, min_size=5, max_size=5),
    hs.text(),
    hs.integers(min_value=-(2**63), max_value=2**63 - 1),
)
def test_generated_values(costs: list[float], text: str, number: int) -> None:
    cost = st.Cost(*(abs(c) for c in costs))
    message = st.AssistantMessage(
        [st.TextContent(text), st.ToolCall("c", "t", {"n": number, "f": costs, text: text})],
        "p",
        "m",
        usage=st.Usage(1, 2, 3, 4, 10, cost),
        timestamp=number,
    )
    entry = st.MessageEntry(message, id="x1", parent_id="p0", timestamp="T")
    try:
        expected = entry_to_json(entry)
    except st.SessionError:
        return  # a lone surrogate: covered above
    assert written(entry) == expected


# --------------------------------------------------------------------------- append_message


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_append_message_stamps_writes_and_returns_the_entry(
    kind: str, tmp_path: Any, fallbacks: list[Any]
) -> None:
    s = (
        st.InMemorySessionStorage()
        if kind == "memory"
        else st.JsonlSessionStorage.create(tmp_path / "s.jsonl", durability="flush")
    )
    session = st.Session(s)
    first = session.append_message(st.UserMessage("one", timestamp=1))
    second = session.append_message(st.UserMessage("two", timestamp=2))
    entries = s.get_entries()
    assert [e.id for e in entries] == [first, second]
    assert entries[0].parent_id is None and entries[1].parent_id == first
    assert s.get_leaf_id() == second
    for e in entries:
        assert st._util.iso_to_ms(e.timestamp) > 0
        assert len(e.id) == 8 and int(e.id, 16) >= 0
    made = s.append_message(st.UserMessage("three", timestamp=3))
    assert isinstance(made, st.MessageEntry)
    assert made == s.get_entry(made.id)
    assert made.parent_id == second
    assert fallbacks == []
    s.close()
    if kind == "jsonl":
        with st.JsonlSessionStorage.open(tmp_path / "s.jsonl", readonly=True) as again:
            assert again.get_entries() == [*entries, made]
            assert again.load_report.issues == ()


def test_append_message_of_a_subclass_or_non_message(fallbacks: list[Any]) -> None:
    s = st.InMemorySessionStorage()
    entry = s.append_message(Shout("hey", timestamp=1))
    assert type(entry.message) is Shout
    assert entry_to_json(s.get_entry(entry.id)) == entry_to_json(entry)  # type: ignore[arg-type]
    with pytest.raises(st.SessionError) as got:
        s.append_message({"role": "user"})  # type: ignore[arg-type]
    assert got.value.code == "invalid_argument"
    assert len(s) == 1


def test_append_message_refusals(tmp_path: Any) -> None:
    path = tmp_path / "s.jsonl"
    st.JsonlSessionStorage.create(path).close()
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        with pytest.raises(st.SessionError) as got:
            ro.append_message(st.UserMessage("x"))
        assert got.value.code == "readonly"
    ro_closed = st.JsonlSessionStorage.open(path, readonly=True)
    ro_closed.close()
    with pytest.raises(st.SessionError) as got:
        ro_closed.append_message(st.UserMessage("x"))
    assert got.value.code == "closed"
    doc = st.InMemorySessionStorage()
    share = doc.share()
    share.close()
    for s in (share, st.JsonlSessionStorage.open(path)):
        if s is not share:
            s.close()
        with pytest.raises(st.SessionError) as got:
            s.append_message(st.UserMessage("x"))
        assert got.value.code == "closed"
    assert len(doc) == 0


class Numbered(st.InMemorySessionStorage):
    """Overrides how ids are made: ``append_message`` must use it."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def create_entry_id(self) -> str:
        self.n += 1
        return f"n{self.n}"


def test_overridden_stamping_is_honoured() -> None:
    s = Numbered()
    assert s.append_message(st.UserMessage("a")).id == "n1"
    assert st.Session(s).append_message(st.UserMessage("b")) == "n2"
    assert [e.id for e in s.get_entries()] == ["n1", "n2"]


def test_entries_read_from_a_file_are_written_back_the_same(
    tmp_path: Any, fallbacks: list[Any]
) -> None:
    """Entries a file storage hands out are written by the encoder as they were read."""
    path = tmp_path / "s.jsonl"
    known = [e for e in sample_entries() if not isinstance(e, st.UnknownEntry)]
    made = [dataclasses.replace(e, id=f"x{i}") for i, e in enumerate(known)]
    header = st.SessionHeader("s", "2026-01-01T00:00:00.000Z", "/")
    with st.JsonlSessionStorage.create(path, header, durability="none") as out:
        out.append_entry(st.entry_from_json(ROOT))
        for e in made:
            out.append_entry(e)
    with st.JsonlSessionStorage.open(path, readonly=True) as src:
        read = src.get_entries()[1:]
        target = storage()
        for e in read:
            target.append_entry(e)
    lines = target.to_jsonl().rstrip(b"\n").split(b"\n")[2:]
    assert lines == [entry_to_json(e) for e in made]
    assert fallbacks == []
