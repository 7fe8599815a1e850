"""What a read returns is complete (issue 26): no attribute access, comparison, pickling or
copy of an entry or message ever reads the file or raises, whatever happens to the file or
the storage afterwards, and in whatever thread it is read."""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st


def _write_session(path: Path, n: int = 60) -> None:
    """A session of every common entry kind, messages with text, tools and thinking."""
    with st.Session(st.JsonlSessionStorage.create(path, durability="none")) as s:
        s.append_model_change("anthropic", "claude-sonnet-4-5")
        for i in range(n):
            user = s.append_message(st.UserMessage(f"question {i} é 漢 🙂"))
            s.append_message(
                st.AssistantMessage(
                    [
                        st.ThinkingContent(f"thinking {i}"),
                        st.TextContent(f'answer {i} with "quotes"\nand lines'),
                        st.ToolCall(f"c{i}", "bash", {"cmd": f"ls {i}", "deep": {"a": [i]}}),
                    ],
                    provider="anthropic",
                    model="claude-sonnet-4-5",
                    usage=st.Usage(input=i, output=2 * i),
                )
            )
            s.append_message(st.ToolResultMessage(f"c{i}", "bash", [st.TextContent("x" * 300)]))
            if i % 10 == 0:
                s.append_label(user, f"label {i}")
                s.append_custom_entry("note", {"i": i, "list": [1, 2, 3]})


def _touch(value: Any) -> list[Any]:
    """Everything a user can do with a value: every field, equality, hash where frozen,
    repr, pickle, copy, deepcopy and ``dataclasses.replace``."""
    out = [getattr(value, f.name) for f in dataclasses.fields(value)]
    assert hasattr(value, "id") or hasattr(value, "role")
    assert getattr(value, "no_such_field", None) is None
    assert value == value
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.copy(value) == value
    assert copy.deepcopy(value) == value
    assert dataclasses.replace(value) == value
    repr(value)
    message = getattr(value, "message", None)
    if message is not None:
        out.append(_touch(message))
    return out


def _snapshot(values: list[Any]) -> list[Any]:
    return [pickle.dumps(v) for v in values]


@pytest.mark.parametrize("what", ["close", "truncate", "rewrite", "delete", "append"])
@pytest.mark.parametrize("readonly", [True, False])
def test_values_survive_what_happens_to_the_file(tmp_path: Path, what: str, readonly: bool) -> None:
    path = tmp_path / "s.jsonl"
    _write_session(path)
    storage = st.JsonlSessionStorage.open(path, readonly=readonly)
    session = st.Session(storage)
    entries = storage.get_entries()
    messages = list(session.build_context().messages)
    branch = session.get_branch()
    before = _snapshot(entries + messages + branch)

    if what == "close":
        session.close()
    elif what == "truncate":
        with open(path, "r+b") as f:
            f.truncate(200)
    elif what == "rewrite":
        data = path.read_bytes()
        path.write_bytes(data.replace(b"question", b"QUESTION"))
    elif what == "delete":
        os.remove(path)
    else:
        with open(path, "ab") as f:
            f.write(b"garbage that is not json\n")

    for value in entries + messages + branch:
        _touch(value)
    assert _snapshot(entries + messages + branch) == before
    assert entries[1].message.content == "question 0 é 漢 🙂"
    session.close()


def test_a_value_read_from_another_storage_equals_the_first(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _write_session(path, n=5)
    with st.JsonlSessionStorage.open(path, readonly=True) as a:
        first = a.get_entries()
    with st.JsonlSessionStorage.open(path, readonly=True) as b:
        second = b.get_entries()
    assert first == second
    assert [hash(e.id) for e in first] == [hash(e.id) for e in second]


@pytest.mark.parametrize("threads", [2, 8])
def test_threads_reading_the_same_fresh_values(tmp_path: Path, threads: int) -> None:
    """Many threads read the fields of the same entries, just handed out, at a tiny switch
    interval: no error and the same answers (10⁵ reads and more in all)."""
    path = tmp_path / "s.jsonl"
    _write_session(path, n=100)
    errors: list[BaseException] = []
    reads = [0] * threads
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with st.JsonlSessionStorage.open(path, readonly=True) as storage:
            for _ in range(4):
                entries = storage.get_entries()  # fresh objects every round
                expected = [
                    (type(e).__name__, getattr(getattr(e, "message", None), "content", None))
                    for e in entries
                ]
                barrier = threading.Barrier(threads)

                def read(
                    k: int,
                    entries: list[Any] = entries,
                    expected: Any = expected,
                    barrier: threading.Barrier = barrier,
                ) -> None:
                    try:
                        barrier.wait()
                        for _ in range(30):
                            got = []
                            for e in entries:
                                m = getattr(e, "message", None)
                                got.append((type(e).__name__, getattr(m, "content", None)))
                                reads[k] += 2
                            assert got == expected
                    except BaseException as exc:
                        errors.append(exc)

                workers = [threading.Thread(target=read, args=(k,)) for k in range(threads)]
                for w in workers:
                    w.start()
                for w in workers:
                    w.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    assert sum(reads) >= 100_000
