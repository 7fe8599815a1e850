"""Entries a file storage hands out before reading their lines (``messages._Lazy``).

A file storage gives out entries with only ``id``, ``parent_id``, ``timestamp`` and a
message entry's ``message`` filled in; the first look at any other field reads the line.
To a user such an entry must be indistinguishable from one read at once: equal, same
types all the way down, same repr, picklable, copyable, matchable — before and after its
storage closes — and a file rewritten behind the storage's back must give a clear error.
"""

from __future__ import annotations

import copy
import gc
import os
import pathlib
import pickle
import weakref
from typing import Any

import pytest
from tests.conftest import assert_same, entry_line, header_line, user_line

import sessiontree as st
from sessiontree import _core
from sessiontree.model.entries import _is_unread


def _session_bytes() -> bytes:
    assistant = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "x_b": 1},
            {"type": "text", "text": "hi ✓"},
            {"type": "tool_call", "id": "t1", "name": "ls", "arguments": {"p": "/"}},
        ],
        "api": "messages",
        "provider": "anthropic",
        "model": "claude",
        "usage": {"input": 3, "output": 4, "cost": {"input": 0.5, "total": 0.5}},
        "stop_reason": "tool_use",
        "timestamp": 2,
    }
    tool = {
        "role": "tool_result",
        "tool_call_id": "t1",
        "tool_name": "ls",
        "content": [{"type": "text", "text": "a b"}],
        "is_error": False,
        "timestamp": 3,
    }
    return b"".join(
        [
            header_line(),
            user_line("a", None, "hello"),
            entry_line("b", "a", "message", message=assistant, x_entry=[1, 2]),
            entry_line("c", "b", "message", message=tool),
            entry_line("d", "c", "model_change", provider="openai", model_id="gpt"),
            entry_line("e", "d", "label", target_id="a", label="start"),
            entry_line(
                "f",
                "e",
                "message",
                message={
                    "role": "custom",
                    "custom_type": "n",
                    "content": "x",
                    "display": True,
                    "timestamp": 4,
                },
            ),
            entry_line("g", "f", "brand_new_type", anything={"k": 1}),
            entry_line("h", "a", "custom", custom_type="note", data={"n": 1}),
            user_line("i", "gone", "a dangling parent"),
        ]
    )


@pytest.fixture
def session_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_session_bytes())
    return path


def _expected() -> list[st.SessionTreeEntry]:
    return st.InMemorySessionStorage.from_jsonl(_session_bytes()).get_entries()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_entries_are_unread_until_looked_at(session_file: pathlib.Path) -> None:
    with st.JsonlSessionStorage.open(session_file, readonly=True) as storage:
        entries = storage.get_entries()
        known = [e for e in entries if not isinstance(e, st.UnknownEntry)]
        assert all(_is_unread(e) for e in known)
        # What the tree knows costs no read.
        assert [(e.id, e.parent_id) for e in entries][-1] == ("i", None)
        assert all(_is_unread(e) for e in known)
        message = entries[1].message
        assert type(message) is st.AssistantMessage and _is_unread(message)
        assert message.content[1].text == "hi ✓"
        assert not _is_unread(message)
        assert _is_unread(entries[1]), "the entry itself is read on its own first use"
        assert entries[1]._extra == {"x_entry": [1, 2]}
        assert not _is_unread(entries[1])


def test_unread_objects_cost_the_cyclic_gc_nothing_until_filled(
    session_file: pathlib.Path,
) -> None:
    """A collection walks only tracked objects: an unread message, an unread entry of
    another type and the reference to their line hold nothing that could be in a cycle,
    so they are not tracked until they are filled."""
    with st.JsonlSessionStorage.open(session_file, readonly=True) as storage:
        entries = storage.get_entries()
        message_entry, label = entries[1], entries[4]
        assert isinstance(message_entry, st.MessageEntry) and isinstance(label, st.LabelEntry)
        assert _is_unread(message_entry.message) and _is_unread(label)
        assert not gc.is_tracked(message_entry.message)
        assert not gc.is_tracked(label)
        # The entry holds its message, which may come to hold dicts on its own.
        assert gc.is_tracked(message_entry)
        assert label.label == "start" and gc.is_tracked(label)
        assert message_entry.message.content[2].arguments == {"p": "/"}
        assert gc.is_tracked(message_entry.message)
    with pytest.raises(TypeError):
        _core.gc_track(1)  # an int is not collected by the cyclic GC


class _Sentinel:
    pass


def test_a_cycle_through_a_filled_entry_is_collected(session_file: pathlib.Path) -> None:
    """A program can make a cycle through a dict inside an entry it was handed unread
    (a tool call's arguments pointing back to the entry): the collector frees it."""
    with st.JsonlSessionStorage.open(session_file, readonly=True) as storage:
        entry = storage.get_entries()[1]
        assert isinstance(entry, st.MessageEntry)
        message = entry.message
        assert isinstance(message, st.AssistantMessage)
        call = message.content[2]
        assert isinstance(call, st.ToolCall)
        sentinel = _Sentinel()
        alive = weakref.ref(sentinel)
        call.arguments["back"] = entry
        call.arguments["sentinel"] = sentinel
        del entry, message, call, sentinel
        gc.collect()
        # The storage's own objects hold none of them.
        assert alive() is None, "the cycle through the entry was not collected"


def test_unread_entries_equal_entries_read_at_once(session_file: pathlib.Path) -> None:
    expected = _expected()
    with st.JsonlSessionStorage.open(session_file, readonly=True) as storage:
        assert_same(storage.get_entries(), expected)
        # repr, equality, hashing-free containers and match read the fields too.
        for got, want in zip(storage.get_entries(), expected, strict=True):
            assert repr(got) == repr(want)
        for got, want in zip(storage.get_entries(), expected, strict=True):
            assert got == want
        match storage.get_entry("d"):
            case st.ModelChangeEntry(provider, model_id):
                assert (provider, model_id) == ("openai", "gpt")
            case other:
                pytest.fail(f"no match: {other!r}")


def test_unread_entries_pickle_and_copy(session_file: pathlib.Path) -> None:
    expected = _expected()
    with st.JsonlSessionStorage.open(session_file, readonly=True) as storage:
        for make in (
            lambda e: pickle.loads(pickle.dumps(e)),
            copy.copy,
            copy.deepcopy,
        ):
            got = [make(e) for e in storage.get_entries()]
            assert_same(got, expected)
            assert not any(_is_unread(e) for e in got)


def test_entries_stay_readable_after_close_and_the_file_is_released(
    session_file: pathlib.Path,
) -> None:
    before = _open_fds()
    storage = st.JsonlSessionStorage.open(session_file, readonly=True)
    entries = storage.get_entries()
    tree = st.Session(storage).get_tree()
    assert _open_fds() > before
    storage.close()
    assert _open_fds() == before, "close() releases every descriptor at once"
    # The file may even go away: what was handed out was read at close.
    session_file.unlink()
    assert_same(entries, _expected())
    assert tree[0].entry == entries[0]


def test_a_rewritten_file_is_modified_externally(session_file: pathlib.Path) -> None:
    with st.JsonlSessionStorage.open(session_file, readonly=True) as storage:
        entries = storage.get_entries()
        assert entries[0].message.content == "hello"
        data = session_file.read_bytes()
        # Same length, other ids: another program rewrote the file in place.
        with open(session_file, "r+b") as f:
            f.write(data.replace(b'"id":"d"', b'"id":"z"'))
        with pytest.raises(st.SessionError) as exc:
            _ = entries[3].provider
        assert exc.value.code == "modified_externally"
        # Shorter: the line is gone.
        os.truncate(session_file, len(header_line()) + 10)
        with pytest.raises(st.SessionError) as exc:
            _ = entries[2].message.content
        assert exc.value.code == "modified_externally"
    # Entries read before keep their fields; one whose line was gone at close says so.
    assert entries[0] == _expected()[0]
    with pytest.raises(st.SessionError) as exc:
        _ = entries[2].message.content
    assert exc.value.code == "io"


def test_pending_lines_are_read_at_once(tmp_path: pathlib.Path, msgs: Any) -> None:
    # With `none` durability appended lines are not in the file yet: their entries are
    # built from memory, and equal what the file holds after a flush.
    with st.JsonlSessionStorage.create(tmp_path / "n.jsonl", durability="none") as storage:
        session = st.Session(storage)
        session.append_message(msgs.user("one"))
        (entry,) = storage.get_entries()
        assert not _is_unread(entry)
        storage.flush()
        (again,) = storage.get_entries()
        assert _is_unread(again) and again == entry


def test_missing_attributes_are_attribute_errors(session_file: pathlib.Path) -> None:
    with st.JsonlSessionStorage.open(session_file, readonly=True) as storage:
        entry = storage.get_entry("d")
        assert not hasattr(entry, "no_such_field")
        assert not _is_unread(entry), "looking for a missing attribute reads the line"
        with pytest.raises(AttributeError, match="no_such_field"):
            _ = entry.no_such_field
    with pytest.raises(AttributeError, match="no_such_field"):
        _ = st.UserMessage("x").no_such_field  # type: ignore[attr-defined]


def test_the_engine_tree_equals_the_interface_default(session_file: pathlib.Path) -> None:
    with st.JsonlSessionStorage.open(session_file, readonly=True) as storage:
        fast = storage.get_tree()
        slow = st.SessionStorage.get_tree(storage)
        assert fast == slow
        assert [n.entry.id for n in fast] == ["a", "i"]
        (a, _) = fast
        assert a.label == "start"
        assert [n.entry.id for n in a.children] == ["b", "h"]
        assert type(a.children) is tuple
