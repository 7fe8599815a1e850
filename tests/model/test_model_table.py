"""The Python model agrees with the engine's model table (``_core.MODEL``, rust/engine/model.rs).

For every type the table declares: the class has the same fields in the same order, a field
the table requires has no default (and an optional one has the table's default), and the
JSON keys the readers know are the table's keys. Where the Python model disagrees today, the
case is an ``xfail`` (strict) naming the difference, so a fix shows up as an XPASS.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import sessiontree
from sessiontree import _core
from sessiontree._util import now_ms
from sessiontree.model import entries, messages

_TYPES = {t[0]: t for t in _core.MODEL}
_BASE = _TYPES["SessionTreeEntry"]
_BASE_ATTRS = tuple(f[1] for f in _BASE[3])


def _param(name: str, disagreement: str | None = None) -> Any:
    if disagreement is None:
        return pytest.param(name, id=name)
    return pytest.param(name, id=name, marks=pytest.mark.xfail(strict=True, reason=disagreement))


def _own_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The class's dataclass fields minus ``_extra`` (and an entry's base fields)."""
    skip = {"_extra"}
    if issubclass(cls, entries.SessionTreeEntry) and cls is not entries.SessionTreeEntry:
        skip.update(_BASE_ATTRS)
    return [f for f in dataclasses.fields(cls) if f.name not in skip]


def _class(name: str) -> type:
    cls = getattr(sessiontree, name)
    assert isinstance(cls, type)
    return cls


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


_ORDER_DIFFERS = {
    "AssistantMessage": "Python's positional order puts provider and model before api "
    "(required fields first); FORMAT.md has api first",
    "ToolResultMessage": "Python has is_error before details; FORMAT.md has details first",
    "SessionHeader": "Python has version last (it has a default); FORMAT.md has it first",
}


@pytest.mark.parametrize("name", list(_TYPES))
def test_every_type_is_a_public_dataclass(name: str) -> None:
    assert dataclasses.is_dataclass(_class(name))


@pytest.mark.parametrize("name", list(_TYPES))
def test_same_field_names(name: str) -> None:
    attrs = {f[1] for f in _TYPES[name][3]}
    assert {f.name for f in _own_fields(_class(name))} == attrs


@pytest.mark.parametrize("name", [_param(n, _ORDER_DIFFERS.get(n)) for n in _TYPES])
def test_same_field_order(name: str) -> None:
    attrs = [f[1] for f in _TYPES[name][3]]
    assert [f.name for f in _own_fields(_class(name))] == attrs


_REQUIRED_DIFFERS = {
    "SessionHeader": "readers require version, but SessionHeader() defaults it to FORMAT_VERSION",
}


@pytest.mark.parametrize("name", [_param(n, _REQUIRED_DIFFERS.get(n)) for n in _TYPES])
def test_required_fields_have_no_default(name: str) -> None:
    table = {f[1]: f for f in _TYPES[name][3]}
    for f in _own_fields(_class(name)):
        _key, _attr, kind, required, *_ = table[f.name]
        if required and kind == "timestamp_ms":
            # Readers require it; constructors stamp the current time.
            assert f.default_factory is now_ms, f.name
        else:
            assert _has_default(f) != required, f.name


def _expected_default(field: tuple[Any, ...]) -> object:
    _key, _attr, kind, _req, _null, _omit, arg, default = field
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


_BLOCK_CLASSES = {"TextContent", "ThinkingContent", "ImageContent", "ToolCall"}


def test_block_reader_keys() -> None:
    blocks = {tag: name for tag, name in _by_tag("type").items() if name in _BLOCK_CLASSES}
    assert set(messages._BLOCK_KEYS) == set(blocks)
    for tag, name in blocks.items():
        assert messages._BLOCK_KEYS[tag] == {"type", *_keys(name)}, tag


def test_usage_reader_keys() -> None:
    assert _keys("Cost") == messages._COST_KEYS
    assert _keys("Usage") == messages._USAGE_KEYS


def test_message_reader_keys() -> None:
    roles = _by_tag("role")
    assert tuple(roles) == messages.MESSAGE_ROLES
    assert set(messages._MESSAGE_KEYS) == set(roles)
    for role, name in roles.items():
        assert messages._MESSAGE_KEYS[role] == {"role", *_keys(name)}, role
        assert _class(name).role.fget(None) == role


def test_entry_reader_keys() -> None:
    base = {"type", *(f[0] for f in _BASE[3])}
    assert base == {"type", "id", "parent_id", "timestamp"}
    kinds = {tag: name for tag, name in _by_tag("type").items() if name.endswith("Entry")}
    assert tuple(kinds) == entries.ENTRY_TYPES
    assert set(entries._ENTRY_READERS) == set(kinds)
    for kind, name in kinds.items():
        _reader, keys = entries._ENTRY_READERS[kind]
        assert keys == {*base, *_keys(name)}, kind
        assert issubclass(_class(name), entries.SessionTreeEntry)


def test_header_reader_keys() -> None:
    header = _TYPES["SessionHeader"]
    assert (header[1], header[2]) == ("type", "session")
    assert {"type", *_keys("SessionHeader")} == entries._HEADER_KEYS


def test_allowed_values_are_the_public_constants() -> None:
    levels = _TYPES["ThinkingLevelChangeEntry"][3][0]
    assert levels[6] == sessiontree.THINKING_LEVELS
    stop = next(f for f in _TYPES["AssistantMessage"][3] if f[0] == "stop_reason")
    assert stop[6] == messages.STOP_REASONS
