"""The OpenAI adapter's one-pass reader in Rust (issue 27, item 1: a first read at twice
``SQLiteSession``'s speed): each stored line becomes its items straight from the line's
bytes, parsed once by serde_json (``rust/py/items_read.rs``). What a user must not be able to
tell: a line it reads gives exactly the items the adapter's Python path gives (the same
values, the same types, the same key order), and a line it is not sure of (a wide integer,
a lone surrogate, a key given twice or deep nesting in what the items hold, a malformed
line) is left to the Python path, so a first read of a session written any way gives back
the items written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

pytest.importorskip("agents")

import sessiontree as st
from sessiontree import _core
from sessiontree.adapters.openai_agents import (
    ITEM_CUSTOM_TYPE,
    RESIDUAL_KEY,
    OpenAIAgentsSession,
    _items_from_line,
    set_kept_bytes,
)

from .conftest import run
from .test_openai_batch_lines import _items


def _lines(items: list[Any]) -> list[bytes]:
    """The entry lines the batch writer makes of ``items`` (those it maps)."""
    ids = [f"e{k:07d}" for k in range(len(items))]
    made = _core.openai_item_lines(
        items, ids, "2026-01-01T00:00:00.000Z", 0, "p", "m", {}, RESIDUAL_KEY
    )
    return [line for line in made if line is not None]


def _python_path(line: bytes) -> tuple[int, list[Any]] | None:
    """What the adapter's Python path makes of ``line`` (None: the entry object says)."""
    parsed = json.loads(line)
    made = _items_from_line(parsed) if type(parsed) is dict else None
    if made is None:
        return None
    is_item, items = made
    return (1 if is_item else 2 if parsed.get("type") == "compaction" else 0), items


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same exact types, with keys in the same order."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is float:
        return repr(a) == repr(b)
    return bool(a == b)


def _read(line: bytes) -> tuple[tuple[int, list[Any]] | None, dict[str, str]]:
    names: dict[str, str] = {}
    (got,) = _core.openai_items_of_lines([line], ITEM_CUSTOM_TYPE, RESIDUAL_KEY, names)
    return got, names


def _check(line: bytes, must_read: bool = False) -> None:
    """The reader gives what the Python path gives, or leaves the line to it."""
    got, _ = _read(line)
    try:
        want = _python_path(line)
    except ValueError:  # not JSON: the engine's reader reports such a line
        assert got is None
        return
    if got is None:
        assert not must_read, f"declined {line[:200]!r}"
        return
    assert want is not None, f"read a line the Python path leaves: {line[:200]!r}"
    assert _same(got, want), (got, want)


def _variants(line: bytes) -> list[bytes]:
    """The same entry written other ways a JSON writer may write it."""
    obj = json.loads(line)
    out = [
        json.dumps(obj, ensure_ascii=True).encode(),  # every non-ASCII character escaped
        json.dumps(obj, ensure_ascii=False, separators=(" , ", " : ")).encode(),
        b"  " + json.dumps(obj, ensure_ascii=False).encode() + b" \t",
    ]
    # The message before the type (sessiontree writes the type first).
    moved = {k: obj[k] for k in obj if k != "type"} | {"type": obj["type"]}
    out.append(json.dumps(moved, ensure_ascii=False).encode())
    return out


def test_every_shape_reads_as_the_python_path_reads_it() -> None:
    items = _items()
    lines = _lines(items)
    assert len(lines) > 10
    for line in lines:
        _check(line, must_read=True)
        for variant in _variants(line):
            _check(variant, must_read=True)


def test_the_benchmark_items_read_back_exactly() -> None:
    """User messages, reasoning, function calls, 1-8 KB outputs with escapes and
    non-ASCII text, assistant answers: all read in Rust, each the item written, and the
    function calls' tool names learnt."""
    items: list[Any] = []
    for turn in range(20):
        line = f"line {turn}: def f(x):\\n    return {{'x': x}}  # \u00e9\t\n"
        output = (line * 200)[: 1024 * (1 + turn % 8)]
        items += [
            {"content": f"Turn {turn}: fix the test.", "role": "user"},
            {
                "id": f"rs_{turn}",
                "summary": [{"text": f"Look at m{turn}.", "type": "summary_text"}],
                "type": "reasoning",
            },
            {
                "arguments": json.dumps({"path": f"src/m{turn}.py", "line": turn}),
                "call_id": f"call_{turn}",
                "name": "read_file",
                "type": "function_call",
                "id": f"fc_{turn}",
                "status": "completed",
            },
            {"call_id": f"call_{turn}", "output": output, "type": "function_call_output"},
            {
                "id": f"msg_{turn}",
                "content": [
                    {"annotations": [], "text": "Fixed.", "type": "output_text", "logprobs": []}
                ],
                "role": "assistant",
                "status": "completed",
                "type": "message",
            },
        ]
    lines = _lines(items)
    assert len(lines) == len(items)
    names: dict[str, str] = {}
    got = _core.openai_items_of_lines(lines, ITEM_CUSTOM_TYPE, RESIDUAL_KEY, names)
    assert None not in got
    assert _same([found[1][0] for found in got if found is not None], items)
    assert names == {f"call_{t}": "read_file" for t in range(20)}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # A lone surrogate (a str json.loads makes; UTF-8 cannot hold it).
        (b'"content":"hi"', b'"content":"hi \\ud800"'),
        # A key the reader reads given twice (json.loads keeps the last).
        (b'"role":"user"', b'"role":"assistant","role":"user"'),
        # In the item kept beside the message (which the reader builds): an integer wider
        # than 64 bits (only Python's parser reads it exactly), a lone surrogate, nesting
        # deeper than serde_json goes.
        (b'{"role":"user","content":null', b'{"w":' + str(2**70).encode() + b',"role":"user"'),
        (b'{"role":"user","content":null', b'{"s":"\\udc00","role":"user"'),
        (b'{"role":"user","content":null', b'{"d":' + b"[" * 200 + b"]" * 200 + b","),
    ],
)
def test_what_the_reader_is_not_sure_of_goes_the_python_path(old: bytes, new: bytes) -> None:
    (line,) = _lines([{"role": "user", "content": "hi"}])
    assert old in line
    changed = line.replace(old, new, 1)
    got, _ = _read(changed)
    assert got is None
    _check(changed)


@pytest.mark.parametrize(
    "new",
    [
        b'"wide":' + str(2**70).encode() + b',"role":"user"',
        b'"odd":"\\ud800","role":"user"',
        b'"deep":' + b"[" * 200 + b"]" * 200 + b',"role":"user"',
    ],
)
def test_a_message_field_the_items_do_not_hold_is_stepped_over(new: bytes) -> None:
    """A wide integer, a lone surrogate or deep nesting in a message field no item holds
    changes nothing the reader builds: the line reads, as the Python path reads it."""
    (line,) = _lines([{"role": "user", "content": "hi"}])
    changed = line.replace(b'"role":"user"', new, 1)
    assert changed != line
    _check(changed, must_read=True)


def test_a_key_given_twice_in_the_kept_item_reads_as_json_loads_reads_it() -> None:
    (line,) = _lines([{"role": "user", "content": "hi", "k": 1}])
    changed = line.replace(b',"k":1}', b',"k":1,"k":2}', 1)
    assert changed != line
    got, _ = _read(changed)
    assert got is not None
    assert got[1][0] == {"role": "user", "content": "hi", "k": 2}
    _check(changed, must_read=True)


@pytest.mark.parametrize(
    "bad",
    [
        lambda line: line[:-3],  # cut short
        lambda line: line.replace(b'"hi"', b'"h\ti"'),  # a raw control character
        lambda line: line.replace(b'"hi"', b'"h\xffi"'),  # not UTF-8
        lambda line: line.replace(b'"hi"', b'"h\\qi"'),  # an unknown escape
        lambda line: line + b"x",  # something after the value
        lambda line: line.replace(b"null", b"nul", 1),
        lambda line: line.replace(b":0,", b":01,", 1),  # a leading zero
    ],
)
def test_a_malformed_line_is_left_to_the_python_path(bad: Any) -> None:
    (line,) = _lines([{"role": "user", "content": "hi"}])
    changed = bad(line)
    assert changed != line
    got, _ = _read(changed)
    assert got is None


@pytest.mark.parametrize(
    "value",
    [1.5, -0.0, 1e308, 5e-324, 123456789.123, -(2**63), 2**63 - 1, 0, True, None, ""],
)
def test_numbers_and_literals_read_as_json_loads_reads_them(value: Any) -> None:
    (line,) = _lines([{"role": "user", "content": "hi", "x": [value, {"v": value}]}])
    # serde_json hands over a float, not its text: a whole float past 2**63 (1e308) could
    # have been a wider integer, so that line is the Python path's (read the same).
    must = not (type(value) is float and value.is_integer() and abs(value) >= 2**63)
    _check(line, must_read=must)
    _check(line.replace(b"e+", b"E+").replace(b"e-", b"E-"), must_read=must)
    if not must:
        assert _read(line)[0] is None


_json = hs.recursive(
    hs.none() | hs.booleans() | hs.integers(-(2**63), 2**63 - 1) | hs.text(),
    lambda inner: hs.lists(inner, max_size=4) | hs.dictionaries(hs.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(content=hs.text(), extra=_json, key=hs.text(min_size=1))
def test_any_text_and_extra_fields_read_back(content: str, extra: Any, key: str) -> None:
    item = {"role": "user", "content": content, key: extra}
    if key in ("role", "content"):
        item = {"role": "user", "content": content}
    lines = _lines([item])
    if not lines:  # an item the writer leaves to the Python path (lone surrogates)
        return
    (line,) = lines
    _check(line)
    got, _ = _read(line)
    if got is not None:
        assert _same(got[1][0], item)
    for variant in _variants(line):
        _check(variant)


def test_a_first_read_of_a_session_gives_back_every_item(tmp_path: Path) -> None:
    """Written item by item and as one batch, read by a new object with nothing kept by
    the process: the same items, with the lines the reader leaves read the Python way."""
    items = [*_items(), {"role": "user", "content": "wide", "n": 2**70}]
    repo = st.JsonlSessionRepo(tmp_path)

    async def main() -> list[Any]:
        async with await OpenAIAgentsSession.open(repo, "s") as session:
            await session.add_items(items)
            for item in items[:5]:
                await session.add_items([item])
        set_kept_bytes(set_kept_bytes(0))
        async with await OpenAIAgentsSession.open(repo, "s") as session:
            return await session.get_items()

    got = run(main())
    assert json.dumps(got) == json.dumps([*items, *items[:5]])


def test_a_lone_surrogate_another_program_wrote_reads_as_json_loads_reads_it(
    tmp_path: Path,
) -> None:
    """A lone surrogate escape (which JavaScript's ``JSON.stringify`` writes) in what an
    item holds: the Rust reader leaves the line, and the Python path reads it as
    ``json.loads`` does (it raised ``ValueError`` from serde_json before)."""
    repo = st.JsonlSessionRepo(tmp_path)
    items = [
        {"role": "user", "content": "hello"},
        {"id": "rs_1", "summary": [{"text": "think", "type": "summary_text"}], "type": "reasoning"},
    ]

    async def write() -> None:
        async with await OpenAIAgentsSession.open(repo, "s") as session:
            await session.add_items(items)

    async def read() -> list[Any]:
        set_kept_bytes(set_kept_bytes(0))
        async with await OpenAIAgentsSession.open(repo, "s") as session:
            return await session.get_items()

    run(write())
    path = tmp_path / "s.jsonl"
    text = path.read_text(encoding="utf-8")
    marked = text.replace('"type":"reasoning"}', '"type":"reasoning","x":"\\ud800"}', 1)
    assert marked != text
    path.write_text(marked, encoding="utf-8")
    assert run(read()) == [items[0], {**items[1], "x": "\ud800"}]
