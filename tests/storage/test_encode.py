"""The model's one writer (rust/py/encode.rs) and the one-call appends built on it.

Every line the package writes (appends, forks, conversion, ``entry_to_json``) and every
dict it hands out (``entry_to_dict``, ``message_to_dict``) comes from one walk of the model
table in Rust. Lines must stay byte for byte what earlier versions wrote: they are held to
golden lines written once by the Python writer this one replaced
(``tests/fixtures/writer/golden.jsonl``), and free-form values to Python's ``json`` with the
settings that writer used.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import sessiontree as st
from sessiontree import _core
from sessiontree.model.entries import entry_to_json, header_to_dict, header_to_json

FIXTURES = Path(__file__).parent.parent / "fixtures" / "writer"
ROOT = b'{"type":"custom","id":"p0","parent_id":null,"timestamp":"T","custom_type":"root"}'
BASE: dict[str, Any] = {"id": "x1", "parent_id": "p0", "timestamp": "2026-11-30T16:48:30.123Z"}


def _golden_module() -> Any:
    spec = importlib.util.spec_from_file_location("writer_golden", FIXTURES / "golden.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


golden = _golden_module()
GOLDEN_VALUES: list[Any] = golden.values()
GOLDEN_LINES = (FIXTURES / "golden.jsonl").read_bytes().splitlines()


def dumps(value: Any) -> bytes:
    """What the Python writer this one replaced wrote for a free-form value."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def storage() -> st.InMemorySessionStorage:
    header = header_to_json(st.SessionHeader("s", "2026-01-01T00:00:00.000Z", "/"))
    return st.InMemorySessionStorage.from_jsonl(header + b"\n" + ROOT + b"\n")


def last_line(s: st.InMemorySessionStorage) -> bytes:
    return s.to_jsonl().rstrip(b"\n").rsplit(b"\n", 1)[-1]


def written(entry: st.SessionTreeEntry) -> bytes:
    """The line an engine storage writes for ``entry`` (which hangs under ``p0``)."""
    s = storage()
    s.append_entry(entry)
    return last_line(s)


def custom(data: Any) -> st.CustomEntry:
    """A custom entry holding ``data``, set past the constructor (which refuses dict keys
    that are not str): the writer must write, or refuse, whatever a value holds."""
    entry = st.CustomEntry("k", None, **BASE)
    object.__setattr__(entry, "data", data)
    return entry


# --------------------------------------------------------------------------- golden lines


def test_golden_fixture_covers_every_type() -> None:
    assert len(GOLDEN_LINES) == len(GOLDEN_VALUES)
    written_types = {type(v).__name__ for v in GOLDEN_VALUES}
    roles = {type(v.message).__name__ for v in GOLDEN_VALUES if isinstance(v, st.MessageEntry)}
    model = {row[0] for row in _core.MODEL}
    blocks_and_usage = {"TextContent", "ThinkingContent", "ImageContent", "ToolCall", "Usage"}
    assert model - written_types - roles - blocks_and_usage == {"SessionTreeEntry", "Cost"}
    assert "UnknownMessage" in roles and "UnknownEntry" in written_types


@pytest.mark.parametrize("n", range(len(GOLDEN_VALUES)), ids=lambda n: f"line{n + 1}")
def test_lines_are_the_golden_lines(n: int) -> None:
    value, line = GOLDEN_VALUES[n], GOLDEN_LINES[n]
    assert golden.line(value) == line
    if isinstance(value, st.SessionHeader):
        assert header_to_json(st.model.entries.header_from_json(line)) == line
        return
    # Appended through an engine storage, and read back then written again.
    assert written(value) == line
    assert entry_to_json(st.entry_from_json(line)) == line


@pytest.mark.parametrize("n", range(len(GOLDEN_VALUES)), ids=lambda n: f"line{n + 1}")
def test_dicts_are_the_golden_objects(n: int) -> None:
    value, line = GOLDEN_VALUES[n], GOLDEN_LINES[n]
    d = header_to_dict(value) if isinstance(value, st.SessionHeader) else st.entry_to_dict(value)
    # Key order included: the dict is the line's object.
    assert dumps(d) == line
    if isinstance(value, st.MessageEntry):
        assert dumps(st.message_to_dict(value.message)) == dumps(json.loads(line)["message"])


def test_entries_read_from_a_file_are_written_back_the_same(tmp_path: Path) -> None:
    """Entries a file storage hands out are written as they were read."""
    path = tmp_path / "s.jsonl"
    entries = [v for v in GOLDEN_VALUES if isinstance(v, st.SessionTreeEntry)]
    made = [
        dataclasses.replace(e, id=f"x{i}") if not isinstance(e, st.UnknownEntry) else e
        for i, e in enumerate(entries)
    ]
    made = [e for e in made if e.id != "x1"]  # the unknown entry keeps its id
    header = st.SessionHeader("s", "2026-01-01T00:00:00.000Z", "/")
    with st.JsonlSessionStorage.create(path, header, durability="none") as out:
        out.append_entry(st.entry_from_json(ROOT))
        for e in made:
            out.append_entry(e)
    with st.JsonlSessionStorage.open(path, readonly=True) as src:
        read = src.get_entries()[1:]
    assert [entry_to_json(e) for e in read] == [entry_to_json(e) for e in made]
    lines = path.read_bytes().splitlines()[2:]
    assert lines == [entry_to_json(e) for e in made]


# --------------------------------------------------------------------------- free-form values


class Str(str):
    pass


class Int(int):
    pass


class Float(float):
    pass


class Color(enum.IntEnum):
    RED = 1


class Items(dict):  # type: ignore[type-arg]
    """A dict subclass whose ``items()`` differ from its contents: ``json`` writes these."""

    def items(self) -> Any:
        return [("from_items", 1)]


FREE_FORM = [
    "plain",
    golden.ESCAPES,
    0,
    -(2**63),
    2**63 - 1,
    2**64,
    -(10**40),
    True,
    False,
    None,
    *golden.FLOATS,
    [],
    {},
    (1, "two", [3.0, {"four": None}]),
    {"nested": {"deep": [{"x": [[[]]]}]}, "": "empty key"},
    Str("a str subclass"),
    Int(5),
    Float(2.5),
    Color.RED,
    collections.OrderedDict(a=1, b=[2]),
    Items(ignored=True),
    {1: "int key", 2.5: "float key", None: "none key", Str("s"): 1},
    {True: "bool key", False: "other bool key"},
    {-0.0: 1, 10**30: 2},
]


@pytest.mark.parametrize("value", FREE_FORM, ids=repr)
def test_free_form_values_are_written_as_json_writes_them(value: Any) -> None:
    entry = custom({"v": value})
    line = dumps(st.entry_to_dict(entry))
    assert entry_to_json(entry) == line
    assert written(entry) == line


@settings(max_examples=200, deadline=None)
@given(
    hs.recursive(
        hs.none()
        | hs.booleans()
        | hs.integers()
        | hs.floats(allow_nan=False, allow_infinity=False)
        | hs.text(hs.characters(exclude_categories=["Cs"])),
        lambda inner: (
            hs.lists(inner, max_size=4)
            | hs.dictionaries(hs.text(hs.characters(exclude_categories=["Cs"])), inner, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_generated_values(value: Any) -> None:
    entry = custom(value)
    assert entry_to_json(entry) == dumps(st.entry_to_dict(entry))


def test_message_fields_are_strings_and_numbers_as_json_writes_them() -> None:
    cost = st.Cost(1e-7, 0.1, 1e16, 5e-324, total=1.7976931348623157e308)
    m = st.AssistantMessage(
        [st.TextContent(golden.ESCAPES)], "p", "m", usage=st.Usage(1, 2, 3, 4, 2**62, cost)
    )
    entry = st.MessageEntry(m, **BASE)
    assert entry_to_json(entry) == dumps(st.entry_to_dict(entry))


# --------------------------------------------------------------------------- refusals


def python_reason(value: Any) -> str:
    """Python's own message for a value its ``json`` writer refuses."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except (TypeError, ValueError) as exc:
        return str(exc)
    raise AssertionError(f"{value!r} is valid JSON")


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (float("nan"), ""),
        ({"x": float("inf")}, "['x']"),
        ({"x": [1, float("-inf")]}, "['x'][1]"),
        ({1, 2}, ""),
        (object(), ""),
        (b"bytes", ""),
        ({"k": [{"deep": {1, 2}}]}, "['k'][0]['deep']"),
        # A refused key is named as the item it keys.
        ({(1, 2): "tuple key"}, "[(1, 2)]"),
        ({float("nan"): "nan key"}, "[nan]"),
    ],
    ids=["nan", "inf", "-inf", "set", "object", "bytes", "nested-set", "tuple-key", "nan-key"],
)
def test_values_json_cannot_hold_are_refused_naming_the_field(data: Any, where: str) -> None:
    entry = custom(data)
    expected = f"entry is not valid JSON: {python_reason(data)} (at CustomEntry.data{where})"
    with pytest.raises(st.SessionError) as got:
        entry_to_json(entry)
    assert (got.value.code, got.value.message) == ("invalid_argument", expected)
    s = storage()
    with pytest.raises(st.SessionError) as appended:
        s.append_entry(entry)
    assert (appended.value.code, appended.value.message) == ("invalid_argument", expected)
    assert len(s) == 1
    # Dicts hold free-form values as they are: nothing to refuse.
    assert st.entry_to_dict(entry)["data"] is data


def test_lone_surrogates_are_refused_with_pythons_message() -> None:
    for text, where in [("\ud800", "data"), ("ab\udfff\ud800c", "data['k']")]:
        data: Any = text if where == "data" else {"k": text}
        reason = ""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            reason = str(exc)
        with pytest.raises(st.SessionError) as got:
            entry_to_json(custom(data))
        assert got.value.code == "invalid_argument"
        assert got.value.message == f"entry is not valid JSON: {reason} (at CustomEntry.{where})"
    # In a key, and in a field of the table.
    with pytest.raises(st.SessionError, match="surrogates not allowed"):
        entry_to_json(custom({"\ud800": 1}))
    entry = st.LabelEntry("p0", "ok", **BASE)
    object.__setattr__(entry, "label", "\ud800")
    with pytest.raises(st.SessionError, match=r"\(at LabelEntry\.label\)$"):
        entry_to_json(entry)


def test_cycles_are_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    looped: dict[str, Any] = {"a": [1]}
    looped["a"].append(looped)
    for data in (loop, looped):
        entry = custom(data)
        for write in (entry_to_json, written):
            with pytest.raises(st.SessionError) as got:
                write(entry)
            assert got.value.code == "invalid_argument"
            assert got.value.message.startswith(
                "entry is not valid JSON: Circular reference detected (at CustomEntry.data"
            )
    # The same (acyclic) value twice is no cycle.
    shared = [1, 2]
    assert entry_to_json(custom({"a": shared, "b": shared})).endswith(b'{"a":[1,2],"b":[1,2]}}')


def nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def test_depth_is_limited_as_the_engine_limits_it() -> None:
    # The entry is depth 1 and ``data`` opens at depth 2: 127 levels fill the 128 allowed.
    deepest = custom(nested(127))
    line = entry_to_json(deepest)
    assert line == dumps(st.entry_to_dict(deepest))
    assert written(deepest) == line
    too_deep = custom(nested(128))
    for write in (entry_to_json, written):
        with pytest.raises(st.SessionError) as got:
            write(too_deep)
        assert got.value.code == "limit_exceeded"
        assert got.value.message.startswith(
            "entry nests deeper than the limit of 128 (at CustomEntry.data[0][0]"
        )
    # A lower limit of a storage is the storage's to apply.
    with st.JsonlSessionStorage.create(
        Path(__import__("tempfile").mkdtemp()) / "s.jsonl", limits=st.Limits(max_depth=10)
    ) as s:
        with pytest.raises(st.SessionError) as got:
            s.append_entry(st.CustomEntry("k", nested(20), id="a", parent_id=None, timestamp="T"))
        assert got.value.code == "limit_exceeded"
        assert "limit of 10" in got.value.message


def test_values_that_are_not_model_values() -> None:
    for bad in (object(), {"type": "leaf"}, st.SessionTreeEntry):
        with pytest.raises(st.SessionError) as got:
            _core.to_dict(bad)
        assert got.value.code == "invalid_argument"
        assert got.value.message == f"not a model value: {type(bad).__name__}"
    entry = st.MessageEntry(st.UserMessage("x", timestamp=1), **BASE)
    object.__setattr__(entry, "message", {"role": "user"})
    with pytest.raises(st.SessionError, match="not a model value: dict"):
        entry_to_json(entry)
    with pytest.raises(st.SessionError) as got:
        storage().append_entry(entry)
    assert got.value.code == "invalid_argument"


# --------------------------------------------------------------------------- classes


class Shout(st.UserMessage):
    pass


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class Bookmark(st.CustomEntry):
    """A subclass with a field of its own: written as the CustomEntry it derives from."""

    note: str = "mine"


def test_subclasses_are_written_as_the_class_they_derive_from() -> None:
    plain = st.MessageEntry(st.UserMessage("hey", timestamp=1), **BASE)
    shouted = st.MessageEntry(Shout("hey", timestamp=1), **BASE)
    assert entry_to_json(shouted) == entry_to_json(plain) == written(shouted)
    assert st.entry_to_dict(shouted) == st.entry_to_dict(plain)
    assert st.message_to_dict(Shout("hey", timestamp=1)) == st.message_to_dict(plain.message)
    mine = Bookmark("k", {"x": 1}, **BASE)
    assert entry_to_json(mine) == entry_to_json(st.CustomEntry("k", {"x": 1}, **BASE))
    assert written(mine) == entry_to_json(mine)


def test_unknown_entries_and_messages_write_their_data() -> None:
    data = {"type": "future", **BASE, "payload": {"z": [1, 2.5]}}
    entry = st.UnknownEntry("future", data, **BASE)
    assert entry_to_json(entry) == dumps(data) == written(entry)
    assert st.entry_to_dict(entry) is data
    message = st.UnknownMessage("bash", {"role": "bash", "cmd": "ls"})
    assert st.message_to_dict(message) is message.data
    line = entry_to_json(st.MessageEntry(message, **BASE))
    assert json.loads(line)["message"] == message.data


def test_unknown_fields_naming_known_keys_replace_them_in_place() -> None:
    """As ``dict.update`` does: a written key keeps its place, an omitted one comes last."""
    entry = st.LabelEntry("p0", "a", **BASE)
    object.__setattr__(entry, "_extra", {"new": 1, "label": "b", "type": "label"})
    expected = dumps({**st.entry_to_dict(st.LabelEntry("p0", "a", **BASE)), **entry._extra})
    assert entry_to_json(entry) == expected == written(entry)
    assert st.entry_to_dict(entry)["label"] == "b"
    block = st.ThinkingContent("t")
    object.__setattr__(block, "_extra", {"signature": "late", "z": 0})
    assert st.message_to_dict(st.AssistantMessage([block], "p", "m", timestamp=1))["content"] == [
        {"type": "thinking", "thinking": "t", "signature": "late", "z": 0}
    ]


def test_dicts_hold_free_form_values_by_reference() -> None:
    args = {"cmd": "ls"}
    details = {"exit": [0]}
    call = st.ToolCall("c1", "bash", args)
    message = st.ToolResultMessage("c1", "bash", [st.TextContent("out")], False, details, 5)
    d = st.message_to_dict(message)
    assert d["details"] is details
    assert (
        st.message_to_dict(st.AssistantMessage([call], "p", "m"))["content"][0]["arguments"] is args
    )
    # Sequences stored as tuples come out as lists, as before.
    assert type(d["content"]) is list
    assert st.entry_to_dict(st.ActiveToolsChangeEntry(["a"], **BASE))["active_tool_names"] == ["a"]


# --------------------------------------------------------------------------- append_message


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_append_message_stamps_writes_and_returns_the_entry(kind: str, tmp_path: Path) -> None:
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
    assert last_line(s) == entry_to_json(made) if kind == "memory" else True
    s.close()
    if kind == "jsonl":
        assert (tmp_path / "s.jsonl").read_bytes().splitlines()[-1] == entry_to_json(made)
        with st.JsonlSessionStorage.open(tmp_path / "s.jsonl", readonly=True) as again:
            assert again.get_entries() == [*entries, made]
            assert again.load_report.issues == ()


def test_append_message_refuses_what_json_cannot_hold() -> None:
    s = st.InMemorySessionStorage()
    message = st.ToolResultMessage("c", "t", [], False, {"x": float("nan")}, 1)
    with pytest.raises(st.SessionError) as got:
        s.append_message(message)
    assert got.value.code == "invalid_argument"
    assert got.value.message == (
        "entry is not valid JSON: Out of range float values are not JSON compliant "
        "(at MessageEntry.message.details['x'])"
    )
    assert len(s) == 0


def test_append_message_of_a_subclass_or_non_message() -> None:
    s = st.InMemorySessionStorage()
    entry = s.append_message(Shout("hey", timestamp=1))
    assert type(entry.message) is Shout
    assert entry_to_json(s.get_entry(entry.id)) == entry_to_json(entry)  # type: ignore[arg-type]
    with pytest.raises(st.SessionError) as got:
        s.append_message({"role": "user"})  # type: ignore[arg-type]
    assert got.value.code == "invalid_argument"
    assert len(s) == 1


def test_append_message_refusals(tmp_path: Path) -> None:
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
