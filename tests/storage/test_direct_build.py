"""Entries the binding builds straight from their lines (rust/py/build.rs), of every type and
role the model table declares, are the entries the validating path builds from
``json.loads`` of the same line: same types all the way down, equal values, the same unknown
fields. What the builder does not vouch for goes through the dict path and gives what it
gave before."""

from __future__ import annotations

import dataclasses
import json
import pickle
import random
from typing import Any

import pytest

import sessiontree as st
from conftest import assert_same
from sessiontree import _core
from sessiontree.model import messages
from sessiontree.model.entries import entry_from_dict

HEADER = (
    b'{"type":"session","version":3,"id":"s1","timestamp":"2026-11-30T00:00:00.000Z","cwd":"/"}\n'
)
TS = "2026-11-30T16:48:30.123Z"
# Strings that exercise the decoder: escapes, non-ASCII, astral characters, an empty one.
STRINGS = ["", "plain", 'q"uo\\te\n\t\u0001', "h\u00e9llo \u4e16\u754c", "\U0001f600 x\U0010ffff"]
EXTRAS = [{"x_future": {"k": [1, 2.5, None]}}, {"\u00fcber": "v", "x2": [True, False]}, {}]


class _Gen:
    """Random FORMAT.md message-entry objects: optional fields present, missing or null,
    unknown fields at every level, keys in any order (tags included)."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def s(self) -> str:
        return self.r.choice(STRINGS) + str(self.r.randrange(1000))

    def obj(self, fields: dict[str, Any], *, tag_first: bool = False) -> dict[str, Any]:
        fields = {k: v for k, v in fields.items() if v is not _MISSING}
        fields.update(self.r.choice(EXTRAS))
        items = list(fields.items())
        head = [items.pop(0)] if tag_first else []
        self.r.shuffle(items)
        return dict(head + items)

    def opt(self, value: Any, *, nullable: bool = True) -> Any:
        choices = [value, _MISSING] + ([None] if nullable else [])
        return self.r.choice(choices)

    def num(self) -> Any:
        return self.r.choice([0, 3, 2**63 - 1, 0.25, 1.5e-7, 12345.0])

    def block(self, kinds: list[str]) -> dict[str, Any]:
        kind = self.r.choice(kinds)
        if kind == "text":
            return self.obj({"type": "text", "text": self.s(), "signature": self.opt(self.s())})
        if kind == "thinking":
            return self.obj(
                {
                    "type": "thinking",
                    "thinking": self.s(),
                    "signature": self.opt(self.s()),
                    "redacted": self.opt(self.r.random() < 0.5, nullable=False),
                }
            )
        if kind == "image":
            return self.obj({"type": "image", "data": self.s(), "mime_type": "image/png"})
        args = self.r.choice([{}, {"path": self.s(), "n": [1, None, {"d": 2.5}]}])
        return self.obj({"type": "tool_call", "id": self.s(), "name": self.s(), "arguments": args})

    def blocks(self, kinds: list[str]) -> list[dict[str, Any]]:
        return [self.block(kinds) for _ in range(self.r.randrange(4))]

    def usage(self) -> Any:
        cost = self.obj(
            {
                k: self.opt(self.num(), nullable=False)
                for k in ("input", "output", "cache_read", "cache_write", "total")
            }
        )
        return self.obj(
            {
                **{
                    k: self.opt(self.r.randrange(10**6), nullable=False)
                    for k in ("input", "output", "cache_read", "cache_write", "total_tokens")
                },
                "cost": self.opt(cost),
            }
        )

    def message(self, *, role_first: bool = False) -> dict[str, Any]:
        ts = self.r.choice([0, -5, 1764521310123, 2**63 - 1])
        role = self.r.choice(_core.MESSAGE_ROLES)
        fields: dict[str, Any]
        if role == "user":
            content: Any = self.r.choice([self.s(), self.blocks(["text", "image"])])
            fields = {"role": role, "content": content, "timestamp": ts}
        elif role == "assistant":
            fields = {
                "role": role,
                "content": self.blocks(["text", "thinking", "tool_call"]),
                "api": self.opt(self.s()),
                "provider": self.s(),
                "model": self.s(),
                "usage": self.opt(self.usage()),
                "stop_reason": self.opt(self.r.choice(_core.STOP_REASONS), nullable=False),
                "error_message": self.opt(self.s()),
                "timestamp": ts,
            }
        elif role == "tool_result":
            fields = {
                "role": role,
                "tool_call_id": self.s(),
                "tool_name": self.s(),
                "content": self.blocks(["text", "image"]),
                "details": self.opt(self.details()),
                "is_error": self.opt(self.r.random() < 0.5, nullable=False),
                "timestamp": ts,
            }
        elif role == "custom":
            fields = {
                "role": role,
                "custom_type": self.s(),
                "content": self.r.choice([self.s(), self.blocks(["text", "image"])]),
                "display": self.opt(self.r.random() < 0.5, nullable=False),
                "details": self.opt(self.details()),
                "timestamp": ts,
            }
        elif role == "compaction_summary":
            fields = {
                "role": role,
                "summary": self.s(),
                "tokens_before": self.r.randrange(10**6),
                "timestamp": ts,
            }
        else:
            fields = {"role": role, "summary": self.s(), "from_id": self.s(), "timestamp": ts}
        return self.obj(fields, tag_first=role_first)

    def details(self) -> Any:
        return self.r.choice([1, "d", [1, {"a": None}], {"k": {}}])

    def fields(self, kind: str, parent: str) -> dict[str, Any]:
        """The fields of an entry of type ``kind`` beyond the base ones (targets are
        ``parent``)."""
        if kind == "message":
            return {"message": self.message()}
        if kind == "thinking_level_change":
            return {"thinking_level": self.r.choice(_core.THINKING_LEVELS)}
        if kind == "model_change":
            return {"provider": self.s(), "model_id": self.s()}
        if kind == "active_tools_change":
            return {"active_tool_names": [self.s() for _ in range(self.r.randrange(4))]}
        if kind == "compaction":
            tail = [self.message(role_first=True) for _ in range(self.r.randrange(3))]
            return {
                "summary": self.s(),
                "first_kept_entry_id": self.r.choice([None, self.s()]),
                "tokens_before": self.r.randrange(10**6),
                "retained_tail": self.opt(tail),
                "details": self.opt(self.details()),
                "usage": self.opt(self.usage()),
                "from_hook": self.opt(self.r.random() < 0.5, nullable=False),
            }
        if kind == "branch_summary":
            return {
                "from_id": self.s(),
                "summary": self.s(),
                "details": self.opt(self.details()),
                "usage": self.opt(self.usage()),
                "from_hook": self.opt(self.r.random() < 0.5, nullable=False),
            }
        if kind == "custom":
            return {"custom_type": self.s(), "data": self.opt(self.details())}
        if kind == "custom_message":
            return {
                "custom_type": self.s(),
                "content": self.r.choice([self.s(), self.blocks(["text", "image"])]),
                "details": self.opt(self.details()),
                "display": self.opt(self.r.random() < 0.5, nullable=False),
            }
        if kind == "label":
            return {"target_id": parent, "label": self.r.choice([None, self.s()])}
        if kind == "session_info":
            return {"name": self.r.choice([None, self.s()])}
        assert kind == "leaf"
        return {"target_id": self.r.choice([None, parent])}

    def entry(self, i: int, parent: str | None) -> dict[str, Any]:
        kind = "message" if parent is None else self.r.choice(["message"] * 4 + [*_ENTRY_TYPES])
        return self.obj(
            {
                "type": kind,
                "id": f"e{i}\u00e9",
                "parent_id": parent,
                "timestamp": TS,
                **self.fields(kind, parent or ""),
            }
        )


_MISSING = object()
_ENTRY_TYPES = _core.ENTRY_TYPES


def _engine(lines: list[str]) -> _core.Engine:
    return _core.Engine.from_bytes(HEADER + "".join(line + "\n" for line in lines).encode())


def _storage(lines: list[str]) -> st.InMemorySessionStorage:
    return st.InMemorySessionStorage.from_jsonl(
        HEADER + "".join(line + "\n" for line in lines).encode(), strict=True
    )


@pytest.mark.parametrize("seed", range(40))
def test_generated_entries_equal_the_validating_path(seed: int) -> None:
    gen = _Gen(seed)
    dicts = [gen.entry(i, None if i == 0 else f"e{i - 1}\u00e9") for i in range(25)]
    lines = [json.dumps(d, ensure_ascii=gen.r.random() < 0.5) for d in dicts]
    engine = _engine(lines)
    assert len(engine) == len(lines)
    made, dicts = engine.entries(range(len(lines)))
    assert not dicts and not any(m.__class__ is dict for m in made), "every entry is built in Rust"
    got = _storage(lines).get_entries()
    for line, direct, entry in zip(lines, made, got, strict=True):
        expected = entry_from_dict(json.loads(line))
        assert_same(direct, expected)
        assert_same(entry, expected)
        assert repr(entry) == repr(expected)
        assert st.entry_to_json(entry) == st.entry_to_json(expected)


def _line(message: str, extra: str = "", entry_id: str = "a1", parent: str = "null") -> str:
    return (
        f'{{"type":"message","id":"{entry_id}","parent_id":{parent},"timestamp":"{TS}",'
        f'"message":{message}{extra}}}'
    )


USER = '{"role":"user","content":"x","timestamp":1}'
ASSISTANT = (
    '{"role":"assistant","content":[{"type":"text","text":"t"}],"provider":"p","model":"m",'
    '"usage":@,"timestamp":1}'
)


@pytest.mark.parametrize(
    "line",
    [
        # Integers wider than 64 bits (serde reads them as floats), anywhere in the entry.
        _line('{"role":"user","content":"x","timestamp":100000000000000000000000}'),
        _line(ASSISTANT.replace("@", '{"input":100000000000000000000000}')),
        _line(ASSISTANT.replace("@", '{"cost":{"total":100000000000000000000000}}')),
        _line(USER, ',"x_wide":-9223372036854775809'),
        _line(
            '{"role":"tool_result","tool_call_id":"c","tool_name":"n","content":[],'
            '"details":[18446744073709551616],"timestamp":1}'
        ),
        # Ids the Python path measures.
        _line(USER, entry_id="a" * 65),
        _line(USER, entry_id="\u00e9" * 70),
        # Roles and types the builder leaves to Python.
        _line('{"role":"bash_execution","command":"ls"}'),
        # A retained message whose role is not its first key, or is unknown.
        '{"type":"compaction","id":"a1","parent_id":null,"timestamp":"T","summary":"s",'
        '"first_kept_entry_id":null,"tokens_before":1,'
        '"retained_tail":[{"content":"x","role":"user","timestamp":1}]}',
        '{"type":"compaction","id":"a1","parent_id":null,"timestamp":"T","summary":"s",'
        '"first_kept_entry_id":null,"tokens_before":1,"retained_tail":[{"role":"bash"}]}',
    ],
)
def test_what_the_builder_does_not_vouch_for_takes_the_dict_path(line: str) -> None:
    engine = _engine([line])
    assert len(engine) == 1, "the engine keeps the line"
    (made,), dicts = engine.entries([0])
    assert made.__class__ is dict and dicts == [0]
    (entry,) = st.InMemorySessionStorage.from_jsonl(HEADER + line.encode() + b"\n").get_entries()
    assert_same(entry, entry_from_dict(json.loads(line)))


@pytest.mark.parametrize(
    "line",
    [
        _line('{"role":"user","content":"x","timestamp":1.5}'),
        _line('{"role":"user","content":"x","timestamp":1e3}'),
        _line(ASSISTANT.replace("@", '{"input":1e3}')),
    ],
)
def test_float_literals_for_integers_never_reach_either_path(line: str) -> None:
    storage = st.InMemorySessionStorage.from_jsonl(HEADER + line.encode() + b"\n")
    assert len(storage) == 0
    assert [i.kind for i in storage.load_report.issues] == ["malformed"]
    with pytest.raises(st.SessionError):
        entry_from_dict(json.loads(line))


def test_a_dangling_parent_reads_as_none() -> None:
    lines = [_line(USER, parent='"gone"'), _line(USER, entry_id="b2", parent='"a1"')]
    engine = _engine(lines)
    made = engine.entries([0, 1])[0]
    assert [m.parent_id for m in made] == [None, "a1"]
    storage = st.InMemorySessionStorage.from_jsonl(HEADER + "\n".join(lines).encode() + b"\n")
    assert storage.get_entry("a1") == made[0]
    assert storage.get_path_to_root("b2") == made
    assert storage.get_children("a1") == [made[1]]


def test_shared_defaults_tuples_and_floats() -> None:
    lines = [
        _line(ASSISTANT.replace(',"usage":@', ""), entry_id="m1"),
        _line(ASSISTANT.replace("@", "null"), entry_id="m2"),
        _line(ASSISTANT.replace("@", '{"input":1,"cost":null}'), entry_id="m3"),
        _line(ASSISTANT.replace("@", '{"cost":{"input":2,"total":0.5}}'), entry_id="m4"),
    ]
    missing, null, no_cost, cost = _engine(lines).entries(range(4))[0]
    assert missing.message.usage is messages._ZERO_USAGE
    assert null.message.usage is messages._ZERO_USAGE
    assert no_cost.message.usage.cost is messages._ZERO_COST
    assert type(cost.message.usage.cost.input) is float
    assert cost.message.usage.cost == messages.Cost(input=2.0, total=0.5)
    assert type(cost.message.content) is tuple
    assert cost.message.content[0]._extra is None and cost._extra is None


def test_built_objects_are_immutable_and_pickle() -> None:
    line = _line(
        ASSISTANT.replace("@", '{"input":1,"cost":{"total":0.5,"x_c":1},"x_u":2}').replace(
            '"text":"t"', '"text":"t","x_b":[1]'
        ),
        ',"x_e":{"k":null}',
    )
    (entry,) = _engine([line]).entries([0])[0]
    expected = entry_from_dict(json.loads(line))
    usage = entry.message.usage
    for obj, name in [
        (entry, "id"),
        (entry.message, "model"),
        (entry.message.content[0], "text"),
        (usage, "input"),
        (usage.cost, "total"),
    ]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, "changed")
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(obj, name)
    assert entry._extra == {"x_e": {"k": None}}
    assert usage._extra == {"x_u": 2} and usage.cost._extra == {"x_c": 1}
    back = pickle.loads(pickle.dumps(entry))
    assert_same(back, pickle.loads(pickle.dumps(expected)))
    assert_same(back, entry)


def test_every_read_builds_directly() -> None:
    lines = [
        _line(USER),
        _line(USER, entry_id="b2", parent='"a1"'),
        _line(ASSISTANT.replace("@", "null"), entry_id="c3", parent='"b2"'),
    ]
    storage = _storage(lines)
    expected = [entry_from_dict(json.loads(line)) for line in lines]
    assert_same(storage.get_entry("c3"), expected[2])
    assert_same(storage.get_entries(), expected)
    assert_same(storage.get_entries(limit=2, reverse=True), expected[:0:-1])
    assert_same(storage.find_entries("message"), expected)
    assert_same(storage.get_path_to_root("c3"), expected)
    assert_same(storage.get_path_to_root_or_compaction("c3"), expected)
    assert_same(storage.get_branch_entries("c3", known={"a1": expected[0]}), expected)
    assert_same(storage.get_children("b2"), expected[2:])
    assert_same(storage.get_entries_with_parents()[0], expected)
    assert_same(storage.get_first_message("assistant"), expected[2])


def test_registration_checks_the_classes() -> None:
    with pytest.raises(TypeError):
        _core._register_model({"TextContent": dict}, {})
    with pytest.raises(TypeError):
        _core._register_model({}, {})
    # The registry is unchanged by a refused registration.
    (entry,) = _engine([_line(USER)]).entries([0])[0]
    assert type(entry) is st.MessageEntry
