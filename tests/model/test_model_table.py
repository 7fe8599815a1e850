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
from test_entries import sample_entries

import sessiontree
from sessiontree import _core
from sessiontree._util import now_ms
from sessiontree.model import _table, entries, messages
from sessiontree.model.entries import entry_to_json

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
    _key, _attr, kind, _req, _null, _omit, arg, default, _rule = field
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
