"""The Python model is the engine's model table (``_core.MODEL``, rust/engine/model.rs).

The classes are plain frozen, slotted dataclasses written in ``messages.py`` and
``entries.py`` (type checkers read them as they are); checks and the JSON codec are made
from the table (``sessiontree.model._table``). This test holds the classes to the table,
for every type it declares: the class has the table's fields, annotated as their kinds
say, in the constructor order the table gives; a field the table requires has no default
unless the table names a constructor default (and an optional one has the table's
default); and the JSON keys the codec knows are the table's keys.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from test_entries import sample_entries

import sessiontree
from sessiontree import _core
from sessiontree._util import now_ms
from sessiontree.model import _table, entries, messages
from sessiontree.model.entries import entry_to_json

_TYPES = {t[0]: t for t in _core.MODEL}
_BASE = _TYPES["SessionTreeEntry"]
_BASE_ATTRS = tuple(f[1] for f in _BASE[3])


def _own_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The class's dataclass fields minus ``_extra`` (and an entry's base fields)."""
    skip = {"_extra"}
    if issubclass(cls, entries.SessionTreeEntry) and cls is not entries.SessionTreeEntry:
        skip.update(_BASE_ATTRS)
    return [f for f in dataclasses.fields(cls) if f.name not in skip]


def _params(row: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """The fields of ``row`` in the constructor's order: the row's own order where it
    gives one (API.md's), else needed fields, then defaulted ones, then the ones readers
    require but constructors default (each in FORMAT.md's order)."""
    fields = row[3]
    if row[4] is not None:
        by_attr = {f[1]: f for f in fields}
        return [by_attr[a] for a in row[4]]
    needed = [f for f in fields if f[3] and f[9] is None]
    defaulted = [f for f in fields if not f[3]]
    stamped = [f for f in fields if f[3] and f[9] is not None]
    return needed + defaulted + stamped


# Python's names for the value sets and block lists the table spells out.
_ONE_OF = {_core.STOP_REASONS: "StopReason", _core.THINKING_LEVELS: "ThinkingLevel"}
_BLOCKS = {
    ("text", "image"): "UserContentBlock",
    ("text", "thinking", "tool_call"): "AssistantContentBlock",
}
_KINDS = {
    "str": "str",
    "int": "int",
    "timestamp_ms": "int",
    "number": "float",
    "bool": "bool",
    "any": "Any",
    "object": "dict[str, Any]",
    "str_list": "Sequence[str]",
    "message": "AgentMessage",
    "messages": "Sequence[AgentMessage]",
}


def _annotation(f: tuple[Any, ...]) -> str:
    """The annotation a field of the table's kind has in the class body."""
    _key, _attr, kind, required, nullable, _omit, arg, default, _rule, _ctor = f
    if kind == "one_of":
        text = _ONE_OF[arg]
    elif kind == "blocks":
        text = f"Sequence[{_BLOCKS[arg]}]"
    elif kind == "str_or_blocks":
        text = f"str | Sequence[{_BLOCKS[arg]}]"
    elif kind == "nested":
        text = arg
    else:
        text = _KINDS[kind]
    takes_none = nullable and (required or default == "null")
    return f"{text} | None" if takes_none and kind != "any" else text


def _class(name: str) -> type:
    cls = getattr(sessiontree, name)
    assert isinstance(cls, type)
    return cls


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


@pytest.mark.parametrize("name", list(_TYPES))
def test_every_type_is_a_public_dataclass(name: str) -> None:
    assert dataclasses.is_dataclass(_class(name))


@pytest.mark.parametrize("name", list(_TYPES))
def test_same_field_names(name: str) -> None:
    attrs = {f[1] for f in _TYPES[name][3]}
    assert {f.name for f in _own_fields(_class(name))} == attrs


@pytest.mark.parametrize("name", list(_TYPES))
def test_the_constructor_order_is_the_tables(name: str) -> None:
    # Needed fields, then defaulted ones, each in FORMAT.md's order, the ones readers
    # require but constructors default last; or the row's own order (API.md's).
    attrs = [f.name for f in _own_fields(_class(name))]
    assert attrs == [f[1] for f in _params(_TYPES[name])]
    row = _TYPES[name]
    if row[4] is None:
        flags = [(f[3] and f[9] is None, not f[3]) for f in _params(row)]
        assert flags == sorted(flags, reverse=True)


def test_the_orders_api_md_writes() -> None:
    # API.md's signatures, for the types whose order differs from FORMAT.md's.
    def order(name: str) -> list[str]:
        return [f.name for f in _own_fields(_class(name))]

    assert order("AssistantMessage")[:4] == ["content", "provider", "model", "api"]
    assert order("ToolResultMessage")[3:5] == ["is_error", "details"]
    assert order("SessionHeader") == [
        "id",
        "timestamp",
        "cwd",
        "parent_session",
        "metadata",
        "version",
    ]


@pytest.mark.parametrize("name", list(_TYPES))
def test_required_fields_have_no_default(name: str) -> None:
    table = {f[1]: f for f in _TYPES[name][3]}
    for f in _own_fields(_class(name)):
        _key, _attr, kind, required, *_, ctor_default = table[f.name]
        if ctor_default == "now":
            # Readers require it; constructors stamp the current time.
            assert kind == "timestamp_ms" and f.default_factory is now_ms, f.name
        elif ctor_default == "format_version":
            assert f.default == _core.FORMAT_VERSION, f.name
        else:
            assert _has_default(f) != required, f.name


@pytest.mark.parametrize("name", list(_TYPES))
def test_the_annotations_are_the_tables_kinds(name: str) -> None:
    want = {f[1]: _annotation(f) for f in _TYPES[name][3]}
    got = {f.name: f.type for f in _own_fields(_class(name))}
    assert got == want


def _expected_default(field: tuple[Any, ...]) -> object:
    _key, _attr, kind, _req, _null, _omit, arg, default, _rule, _ctor = field
    if default == "{}":
        # The nested type with every field at its default.
        assert kind == "nested"
        return _class(arg)()
    return json.loads(default)


@pytest.mark.parametrize("name", list(_TYPES))
def test_optional_fields_default_to_the_table_value(name: str) -> None:
    table = {f[1]: f for f in _TYPES[name][3]}
    for f in _own_fields(_class(name)):
        field = table[f.name]
        if field[3]:
            continue
        value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        want = _expected_default(field)
        assert value == want and type(value) is type(want), f.name


def _keys(name: str) -> set[str]:
    return {f[0] for f in _TYPES[name][3]}


def _by_tag(group: str) -> dict[str, str]:
    """tag value -> class name, for the types tagged ``group`` (``"role"``)."""
    return {t[2]: t[0] for t in _core.MODEL if t[1] == group and t[2] is not None}


def _spec(name: str) -> _table.Spec:
    spec = _table.spec_of(_class(name))
    assert spec is not None and spec.cls is _class(name)
    return spec


@pytest.mark.parametrize("name", [n for n in _TYPES if n != "SessionTreeEntry"])
def test_the_codec_knows_the_table_keys(name: str) -> None:
    tag_key = _TYPES[name][1]
    cls = _class(name)
    entry = issubclass(cls, entries.SessionTreeEntry)
    base = {f[0] for f in _BASE[3]} if entry else set()
    assert _spec(name).keys == {*_keys(name), *base, *([tag_key] if tag_key else [])}
    attrs = [f.attr for f in _spec(name).fields]
    assert attrs == [*(_BASE_ATTRS if entry else ()), *(f[1] for f in _TYPES[name][3])]


def test_tags_name_the_classes() -> None:
    roles = _by_tag("role")
    assert tuple(roles) == messages.MESSAGE_ROLES
    for role, name in roles.items():
        assert _class(name).role.fget(None) == role
        assert _table.by_tag("role", role) is _class(name)
    kinds = {tag: name for tag, name in _by_tag("type").items() if name.endswith("Entry")}
    assert tuple(kinds) == entries.ENTRY_TYPES
    for kind, name in kinds.items():
        assert issubclass(_class(name), entries.SessionTreeEntry)
        assert _table.by_tag("type", kind) is _class(name)
    header = _TYPES["SessionHeader"]
    assert (header[1], header[2]) == ("type", "session")


def test_unknown_keys_are_kept_and_known_ones_are_not() -> None:
    # Every sample entry, read back with a key of its own and one for each nested object.
    for entry in sample_entries():
        if isinstance(entry, entries.UnknownEntry):
            continue  # kept whole, in ``data``
        d = json.loads(entry_to_json(entry))
        d["x_new"] = [1]
        back = entries.entry_from_dict(d)
        assert back == entry and back._extra == {"x_new": [1]}, type(entry).__name__
        assert json.loads(entry_to_json(back)) == d


def test_allowed_values_are_the_public_constants() -> None:
    levels = _TYPES["ThinkingLevelChangeEntry"][3][0]
    assert levels[6] == sessiontree.THINKING_LEVELS
    stop = next(f for f in _TYPES["AssistantMessage"][3] if f[0] == "stop_reason")
    assert stop[6] == messages.STOP_REASONS
