"""The constants Python shares with the Rust engine come from one place (issue 9).

The engine declares each once; ``sessiontree._core`` exports it and the public modules
re-export that object. What Python must still spell out (``typing.Literal`` aliases for
type checkers, tables keyed by the names) is checked here against the engine's value, so
the two cannot drift apart.
"""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
import typing
from typing import Any

import pytest

import sessiontree as st
from sessiontree import _core, errors
from sessiontree.model import _table, entries, messages
from sessiontree.storage import base, engine

# (public module, public name, the `_core` attribute it re-exports)
REEXPORTS = [
    (entries, "FORMAT_VERSION", "FORMAT_VERSION"),
    (entries, "MAX_ID_BYTES", "MAX_ID_BYTES"),
    (entries, "THINKING_LEVELS", "THINKING_LEVELS"),
    (entries, "ENTRY_TYPES", "ENTRY_TYPES"),
    (messages, "STOP_REASONS", "STOP_REASONS"),
    (messages, "MESSAGE_ROLES", "MESSAGE_ROLES"),
    (errors, "ERROR_CODES", "ERROR_CODES"),
    (base, "DURABILITY_MODES", "DURABILITY_MODES"),
    (st, "THINKING_LEVELS", "THINKING_LEVELS"),
    (st, "ENTRY_TYPES", "ENTRY_TYPES"),
    (st, "ERROR_CODES", "ERROR_CODES"),
    (st, "DURABILITY_MODES", "DURABILITY_MODES"),
    (st, "MAX_REPORTED_ISSUES", "MAX_REPORTED_ISSUES"),
]

SETS = [
    "ENTRY_TYPES",
    "MESSAGE_ROLES",
    "THINKING_LEVELS",
    "STOP_REASONS",
    "ERROR_CODES",
    "DURABILITY_MODES",
]
NUMBERS = ["FORMAT_VERSION", "MAX_ID_BYTES", "MAX_LINE_BYTES", "MAX_DEPTH", "MAX_REPORTED_ISSUES"]


@pytest.mark.parametrize(("module", "name", "core_name"), REEXPORTS)
def test_public_constant_is_the_engines(module: object, name: str, core_name: str) -> None:
    assert getattr(module, name) is getattr(_core, core_name)


@pytest.mark.parametrize("name", SETS)
def test_sets_are_tuples_of_distinct_str(name: str) -> None:
    value = getattr(_core, name)
    assert type(value) is tuple
    assert value and all(type(v) is str and v for v in value)
    assert len(set(value)) == len(value)


@pytest.mark.parametrize("name", NUMBERS)
def test_numbers_are_positive_ints(name: str) -> None:
    value = getattr(_core, name)
    assert type(value) is int
    assert value > 0


def test_values() -> None:
    # The contract's values (FORMAT.md, API.md), pinned once here.
    assert _core.FORMAT_VERSION == 3
    assert _core.MAX_ID_BYTES == 256
    assert _core.MAX_LINE_BYTES == 256 << 20
    assert _core.MAX_DEPTH == 128
    assert _core.ENTRY_TYPES == (
        "message",
        "thinking_level_change",
        "model_change",
        "active_tools_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
        "leaf",
    )
    assert _core.MESSAGE_ROLES == (
        "user",
        "assistant",
        "tool_result",
        "custom",
        "compaction_summary",
        "branch_summary",
    )
    assert _core.THINKING_LEVELS == ("off", "minimal", "low", "medium", "high", "xhigh")
    assert _core.STOP_REASONS == ("stop", "length", "tool_use", "error", "aborted")
    assert _core.DURABILITY_MODES == ("none", "flush", "group", "fsync")
    assert _core.ERROR_CODES == (
        "not_found",
        "invalid_fork_target",
        "invalid_argument",
        "invalid_id",
        "corrupt",
        "duplicate_id",
        "locked",
        "readonly",
        "closed",
        "modified_externally",
        "limit_exceeded",
        "io",
        "exists",
    )


@pytest.mark.parametrize(
    ("module", "alias", "core_name"),
    [
        (entries, "ThinkingLevel", "THINKING_LEVELS"),
        (messages, "StopReason", "STOP_REASONS"),
        (base, "Durability", "DURABILITY_MODES"),
    ],
)
def test_literal_alias_matches_engine(module: Any, alias: str, core_name: str) -> None:
    # What type checkers read: the alias spelled out under `if TYPE_CHECKING:`.
    tree = ast.parse(inspect.getsource(module))
    spelled = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        and alias
        in [
            t.id
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Name)
        ]
    ]
    assert len(spelled) == 1, f"{alias} is spelled out once"
    literal = spelled[0]
    assert isinstance(literal, ast.Subscript) and ast.unparse(literal.value) == "Literal"
    assert ast.literal_eval(literal.slice) == getattr(_core, core_name)
    # What a program reads at run time: made on first use from the engine's values.
    assert typing.get_args(getattr(module, alias)) == getattr(_core, core_name)


def _loaded_after(code: str) -> set[str]:
    check = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_the_async_api_and_the_command_load_only_when_used() -> None:
    """``import sessiontree`` loads the model and the storages; ``asyncio`` (the async API),
    the command line and the adapters' frameworks load when first used."""
    loaded = _loaded_after("import sessiontree")
    assert "asyncio" not in loaded
    assert not {m for m in loaded if m.startswith(("sessiontree.aio", "sessiontree.cli"))}
    assert "asyncio" in _loaded_after("import sessiontree; sessiontree.AsyncSession")


def test_tables_keyed_by_the_names_cover_them_exactly() -> None:
    kinds = tuple(_table.spec_of(c).tag for c in entries._KNOWN_ENTRY_CLASSES)  # type: ignore[union-attr]
    assert kinds == _core.ENTRY_TYPES
    roles = tuple(_table.spec_of(c).tag for c in messages._MESSAGE_CLASSES[:-1])  # type: ignore[union-attr]
    assert roles == _core.MESSAGE_ROLES
    assert tuple(errors._BY_CODE) == _core.ERROR_CODES


def test_every_error_code_builds_its_class() -> None:
    for code in _core.ERROR_CODES:
        err = st.SessionError(code, "m")
        assert err.code == code
        assert type(err) is errors._BY_CODE[code]


def test_limits_check_and_document_the_engine_defaults() -> None:
    with pytest.raises(st.SessionError) as info:
        engine.Limits(max_id_bytes=_core.MAX_ID_BYTES + 1)
    assert info.value.code == "invalid_argument"
    engine.Limits(max_id_bytes=_core.MAX_ID_BYTES)
    doc = engine.Limits.__doc__ or ""
    assert f"default {_core.MAX_LINE_BYTES >> 20} MiB" in doc
    assert f"default and hard cap {_core.MAX_DEPTH}" in doc
    assert f"default {_core.MAX_ID_BYTES})" in doc


def test_engine_reads_ids_up_to_max_id_bytes() -> None:
    line = b'{"type":"custom","id":"%s","parent_id":null,"timestamp":"T","custom_type":"x"}'
    header = entries.header_to_json(entries.SessionHeader.generate())
    longest = line % (b"x" * _core.MAX_ID_BYTES)
    too_long = line % (b"y" * (_core.MAX_ID_BYTES + 1))
    loaded = _core.Engine.from_bytes(b"\n".join([header, longest, too_long, b""]))
    issues, _, _ = loaded.report()
    assert len(issues) == 1
    assert loaded.lookup("x" * _core.MAX_ID_BYTES) is not None


def test_python_and_engine_read_the_same_format_versions() -> None:
    header = entries.header_to_dict(entries.SessionHeader.generate())
    assert header["version"] == _core.FORMAT_VERSION
    entries.header_from_dict(header)
    _core.Engine.from_bytes(json.dumps(header).encode() + b"\n")
    newer = {**header, "version": _core.FORMAT_VERSION + 1}
    with pytest.raises(st.SessionError) as py_info:
        entries.header_from_dict(newer)
    with pytest.raises(st.SessionError) as core_info:
        _core.Engine.from_bytes(json.dumps(newer).encode() + b"\n")
    assert py_info.value.code == core_info.value.code == "corrupt"


@pytest.mark.parametrize(
    "text",
    [
        b"null",
        b"false",
        b"0",
        b"0.0",
        b'"stop"',
        b'{"a": [1, -2.5e3, "\\u00e9\\n", {}], "b": null}',
        b"123456789012345678901234567890",
        '"é"'.encode(),
    ],
)
def test_the_engines_json_reader_reads_as_json_does(text: bytes) -> None:
    """``_core.json_loads`` stands in for ``json.loads`` where the package reads small
    texts (the model table's defaults, a header, a fork's lines)."""
    got = _core.json_loads(text)
    assert got == json.loads(text)
    assert type(got) is type(json.loads(text))


@pytest.mark.parametrize("text", [b"", b"{", b"[1,]", b"\xff", b"1 2"])
def test_the_engines_json_reader_refuses_what_json_refuses(text: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        _core.json_loads(text)
