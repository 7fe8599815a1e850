"""The Claude store's load in Rust (issue 27, item 1): each transcript entry's data built
straight from its line (``_core.custom_data_of_lines``, ``rust/py/items_read.rs``). What a
user must not be able to tell: a load gives exactly what ``json.loads`` of each line gives
(the same values, the same types, the same key order), and a session holding a line the
Rust reader is not sure of (a wide integer, a lone surrogate, a number past a float, a key
of the entry given twice) still loads, through the Python path, to the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

pytest.importorskip("claude_agent_sdk", reason="the claude-agent-sdk extra is not installed")

import sessiontree as st
from sessiontree import _core
from sessiontree.adapters.claude_agent_sdk import (
    ENTRY_CUSTOM_TYPE,
    SUMMARY_CUSTOM_TYPE,
    ClaudeAgentSessionStore,
    _load_entries,
)

from .conftest import run
from .test_openai_reader import _same

HEADER = {
    "type": "session",
    "version": 3,
    "id": "s",
    "timestamp": "2026-01-01T00:00:00.000Z",
    "cwd": "/",
    "parent_session": None,
}


def _line(k: int, data: Any, custom_type: str = ENTRY_CUSTOM_TYPE, **dumps: Any) -> bytes:
    entry = {
        "type": "custom",
        "id": f"e{k:05d}",
        "parent_id": None if k == 0 else f"e{k - 1:05d}",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "custom_type": custom_type,
        "data": data,
    }
    return json.dumps(entry, **dumps).encode()


def _session(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join([json.dumps(HEADER).encode(), *lines]) + b"\n")
    return path


def _loads_of_each_line(storage: Any) -> list[Any]:
    """What ``json.loads`` makes of the data of each transcript line (the oracle)."""
    engine = storage._engine
    out = []
    for raw in engine.lines(engine.select("custom", None, None, False)):
        line = json.loads(raw)
        if line.get("custom_type") == ENTRY_CUSTOM_TYPE:
            out.append(line["data"])
    return out


def _load(path: Path) -> tuple[Any, list[Any] | None, list[Any]]:
    storage = st.JsonlSessionStorage.open(path, readonly=True)
    try:
        engine = storage._engine
        fast = _core.custom_data_of_lines(
            engine, engine.select("custom", None, None, False), ENTRY_CUSTOM_TYPE
        )
        return _load_entries(storage), fast, _loads_of_each_line(storage)
    finally:
        storage.close()


ODD_TEXTS = [
    "plain",
    "é, ß and 日本語, 🙂",
    'quotes " and \\ backslashes',
    "control \t\n\r\b\f\x01 characters",
    "",
    "x" * 40,  # past the reader's shared short strings
]


def test_a_transcript_loads_as_json_loads_reads_each_line(tmp_path: Path) -> None:
    lines = []
    for k, text in enumerate(ODD_TEXTS * 3):
        data = {
            "type": "user" if k % 2 else "assistant",
            "uuid": f"u{k}",
            "message": {"role": "user", "content": [{"type": "text", "text": text}]},
            "n": [0, -1, 2**63 - 1, -(2**63), 1.5, 1.5e-300, 0.1 + 0.2, -0.0, True, False, None],
            "nested": {"a": {"b": [[], {}, [{"c": text}]]}},
        }
        # Every non-ASCII character escaped on some lines, kept on others; other
        # separators; entries of another type in between, which the load leaves out.
        lines.append(_line(len(lines), data, ensure_ascii=bool(k % 2)))
        lines.append(_line(len(lines), {"other": k}, SUMMARY_CUSTOM_TYPE, separators=(" ,", ": ")))
    loaded, fast, want = _load(_session(tmp_path, lines))
    assert fast is not None, "the Rust reader declined ordinary lines"
    assert len(want) == len(ODD_TEXTS) * 3
    assert _same(fast, want)
    assert _same(loaded, want)


@pytest.mark.parametrize(
    "odd",
    [
        '{"n": 123456789012345678901234567890}',  # wider than 64 bits
        '{"t": "\\ud800 alone"}',  # a lone surrogate
        '{"big": 1e400}',  # past a float
        '{"f": 1e300}',  # a whole float that may have been a wide integer
    ],
)
def test_a_line_the_rust_reader_is_not_sure_of_loads_through_python(
    tmp_path: Path, odd: str
) -> None:
    good = _line(0, {"uuid": "a"})
    entry = json.loads(_line(1, None))
    text = json.dumps(entry).replace('"data": null', f'"data": {odd}')
    path = _session(tmp_path, [good, text.encode(), _line(2, {"uuid": "c"})])
    loaded, fast, want = _load(path)
    assert fast is None
    assert [d.get("uuid") for d in loaded] == ["a", None, "c"]
    assert _same(loaded, want)


def test_the_store_loads_what_it_appended(tmp_path: Path) -> None:
    """Through the store: a new store object loads each entry as appended."""
    key: Any = {"project_key": "/p", "session_id": "s1"}
    entries = [
        {"type": "user", "uuid": f"u{k}", "message": {"content": ODD_TEXTS[k % len(ODD_TEXTS)]}}
        for k in range(50)
    ]

    async def go() -> Any:
        repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        writer = ClaudeAgentSessionStore(repo)
        for k in range(0, 50, 7):
            await writer.append(key, entries[k : k + 7])
        await writer.close()
        reader = ClaudeAgentSessionStore(st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path)))
        try:
            return await reader.load(key)
        finally:
            await reader.close()

    assert _same(run(go()), entries)


JSON = hs.recursive(
    hs.none()
    | hs.booleans()
    | hs.integers(min_value=-(2**63), max_value=2**64 - 1)
    | hs.floats(allow_nan=False, allow_infinity=False)
    | hs.text(),
    lambda inner: hs.lists(inner, max_size=4) | hs.dictionaries(hs.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None)
@given(values=hs.lists(JSON, min_size=1, max_size=5), ascii=hs.booleans())
def test_random_data_loads_as_json_loads_reads_it(
    tmp_path_factory: pytest.TempPathFactory, values: list[Any], ascii: bool
) -> None:
    tmp = tmp_path_factory.mktemp("claude-reader")
    lines = [_line(k, v, ensure_ascii=ascii) for k, v in enumerate(values)]
    loaded, fast, want = _load(_session(tmp, lines))
    assert fast is None or _same(fast, want)
    assert _same(loaded, want)
