"""The OpenAI adapter's batch writer in Rust (issue 27, item 1: batch ``add_items`` at
``SQLiteSession``'s speed): a batch of more than 16 items is written as lines straight
from the item dicts. What a user must not be able to tell: the items come back exactly
(from the object that wrote them and from a first read of the file), the lines are the
ones the item-by-item path writes, an item the writer cannot vouch for goes the Python
path's way, and a bad item or a failing write leaves the file as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

import sessiontree as st
from sessiontree.adapters.openai_agents import (
    ItemTypeError,
    OpenAIAgentsSession,
    set_kept_bytes,
)

from .conftest import run


class _Str(str):
    pass


def _items() -> list[Any]:
    """Every shape the writer maps, and the shapes it leaves to the Python path."""
    args = {"path": "src/m.py", "line": 3, "flags": [True, None], "q": 'say "hi"\n\u00e9'}
    return [
        {"role": "user", "content": 'Hi \u00e9 \U0001f600 \x00\x1f\x7f \u2028 \\ " /'},
        {"content": "typed", "role": "user", "type": "message"},
        {"role": "user", "content": ""},
        {"id": "rs_1", "summary": [{"text": "think", "type": "summary_text"}], "type": "reasoning"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "xyz"},
        {"arguments": json.dumps(args), "call_id": "c1", "name": "read", "type": "function_call"},
        {
            "type": "function_call",
            "call_id": "c2",
            "name": "read",
            "arguments": json.dumps(args, separators=(",", ":")),
            "id": "fc_2",
            "status": "completed",
        },
        {"type": "function_call", "call_id": "c3", "name": "w", "arguments": '{"a":  1}'},
        {"type": "function_call", "call_id": "c4", "name": "w", "arguments": '{"x": 1.5e16}'},
        {"type": "function_call", "call_id": "c5", "name": "w", "arguments": '{"x": 1, "x": 2}'},
        {"type": "function_call", "call_id": "c6", "name": "w", "arguments": "[1, 2]"},
        {"type": "function_call", "call_id": "c7", "name": "w", "arguments": "not json"},
        {
            "type": "function_call",
            "call_id": "c8",
            "name": "w",
            "arguments": '{"n": 1' + "0" * 25 + "}",
        },
        {"type": "function_call_output", "call_id": "c1", "output": "file\tbody\n" * 50},
        {"type": "function_call_output", "call_id": "nobody", "output": ""},
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": [{"type": "input_text", "text": "as blocks"}],
        },
        {"role": "assistant", "content": "plain text answer"},
        {
            "id": "msg_1",
            "content": [
                {"annotations": [], "text": "a", "type": "output_text", "logprobs": [-0.25, 1e-07]},
                {"type": "refusal", "refusal": "no"},
            ],
            "role": "assistant",
            "status": "completed",
            "type": "message",
        },
        {"role": "assistant", "content": [], "type": "message"},
        {"role": "system", "content": "a system message: a custom entry"},
        {"type": "web_search_call", "id": "ws", "status": "completed", "n": [1, {"deep": [2.5]}]},
        {"role": "user", "content": "wide int", "n": 2**70},
        {"role": "user", "content": "a tuple", "t": (1, 2)},
        {"role": "user", "content": _Str("a str subclass")},
        {"role": "user", "content": "float keys", "f": -0.0, "g": 0.1},
    ]


def _same(got: list[Any], want: list[Any]) -> None:
    assert json.dumps(got) == json.dumps(want)
    assert got == want


def _normal(line: bytes) -> str:
    data = json.loads(line)
    for key in ("id", "parent_id", "timestamp"):
        data.pop(key)
    message = data.get("message")
    if isinstance(message, dict):
        message.pop("timestamp")
    return json.dumps(data)


def test_a_batch_reads_back_exactly_and_as_the_item_by_item_lines(tmp_path: Path) -> None:
    items = _items()
    # What get_items gives back: the items' JSON values (a tuple is a list there).
    want = json.loads(json.dumps(items))

    async def main() -> None:
        repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        batch = await OpenAIAgentsSession.open(repo, "batch")
        await batch.add_items(items)
        _same(await batch.get_items(), want)
        one = await OpenAIAgentsSession.open(repo, "one")
        for item in items:
            await one.add_items([item])
        _same(await one.get_items(), want)
        await batch.close()
        await one.close()
        for name in ("batch", "one"):
            set_kept_bytes(set_kept_bytes(0))  # a first read, as a new process makes it
            again = await OpenAIAgentsSession.open(repo, name)
            _same(await again.get_items(), want)
            # The tool names were learnt from the lines: a new output names its tool.
            await again.add_items(
                [{"type": "function_call_output", "call_id": "c1", "output": "x"}]
            )
            sync_session = again.session.session
            entry = sync_session.get_entry(sync_session.get_leaf_id())
            assert entry is not None and entry.message.tool_name == "read"
            await again.close()
        # The batch's lines are the item-by-item ones (ids and times aside), and every
        # entry is one the session's own reader loads.
        sync = st.JsonlSessionRepo(tmp_path)
        lines = {}
        for name in ("batch", "one"):
            session = sync.open(name)
            engine = session.storage._engine
            idxs = engine.path_indices(session.get_leaf_id(), True)
            lines[name] = [_normal(line) for line in engine.lines(idxs)]
            assert len(session.get_branch()) == len(items) + 1
            session.close()
        assert lines["batch"] == lines["one"]

    run(main())


async def _one_item_session(tmp_path: Path) -> tuple[OpenAIAgentsSession, Path, bytes]:
    """A JSONL session holding one item, its file, and the file's bytes."""
    repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
    session = await OpenAIAgentsSession.open(repo, "s")
    await session.add_items([{"role": "user", "content": "first"}])
    (path,) = tmp_path.glob("*.jsonl")
    return session, path, path.read_bytes()


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "user", "content": "\ud800 a lone surrogate"},
        {"role": "user", "content": "x", "s": {1, 2}},
        {"role": "user", "content": "x", "nan": float("nan")},
        ["not", "a", "dict"],
    ],
)
def test_a_bad_item_anywhere_in_a_batch_writes_nothing(tmp_path: Path, bad: Any) -> None:
    async def main() -> None:
        session, path, before = await _one_item_session(tmp_path)
        items = [{"role": "user", "content": f"m{n}"} for n in range(30)]
        items[20] = bad
        with pytest.raises(ItemTypeError) as err:
            await session.add_items(items)
        assert isinstance(err.value, TypeError)
        assert path.read_bytes() == before
        assert await session.get_items() == [{"role": "user", "content": "first"}]
        await session.close()

    run(main())


def test_a_failing_batch_write_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    async def main() -> None:
        session, path, before = await _one_item_session(tmp_path)
        engine = session.session.session.storage._engine
        if not hasattr(engine, "inject_fault"):
            pytest.skip("the extension was built without test hooks")
        engine.inject_fault("write", 28)  # ENOSPC
        items = [{"role": "user", "content": f"m{n}"} for n in range(30)]
        with pytest.raises(st.SessionError) as err:
            await session.add_items(items)
        assert err.value.code == "io"
        assert path.read_bytes() == before
        assert await session.get_items() == [{"role": "user", "content": "first"}]
        await session.add_items(items)
        assert await session.get_items() == [{"role": "user", "content": "first"}, *items]
        await session.close()

    run(main())


def test_a_batch_whose_new_id_is_taken_goes_the_python_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's ids are drawn at random and checked by the engine as the batch is
    written: should one be taken in the session already, nothing is written and the
    batch is appended the item-by-item way, with fresh ids, all of it."""
    from sessiontree.adapters import openai_agents

    items = [{"role": "user", "content": f"m{k}"} for k in range(40)]

    async def main() -> tuple[list[Any], list[Any], int]:
        repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        async with await OpenAIAgentsSession.open(repo, "s") as session:
            await session.add_items(items[:1])
            sync_session = session.session.session
            taken = sync_session.get_leaf_id()
            drawn = openai_agents._batch_ids
            monkeypatch.setattr(
                openai_agents, "_batch_ids", lambda count: [*drawn(count - 1), taken]
            )
            await session.add_items(items[1:])
            got = await session.get_items()
            entries = len(sync_session.get_branch())
        set_kept_bytes(set_kept_bytes(0))
        async with await OpenAIAgentsSession.open(repo, "s") as session:
            return got, await session.get_items(), entries

    got, again, entries = run(main())
    _same(got, items)
    _same(again, items)
    assert entries == len(items)
