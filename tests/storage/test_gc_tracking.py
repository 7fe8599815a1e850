"""Values read from a session stay out of the cyclic collector's way when they cannot be
part of a cycle (issue 26: a cold read of 100k entries otherwise leaves ~10^5 objects that
every later full collection traverses), and stay tracked when they can."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import sessiontree as st


def _session(path: Path) -> None:
    with st.Session(st.JsonlSessionStorage.create(path, durability="none")) as s:
        s.append_message(st.UserMessage("plain text é 漢"))
        s.append_message(st.UserMessage([st.TextContent("a"), st.TextContent("b")]))
        s.append_message(
            st.AssistantMessage(
                [st.TextContent("sure"), st.ToolCall("c1", "bash", {"cmd": "ls"})],
                provider="p",
                model="m",
            )
        )
        s.append_message(st.ToolResultMessage("c1", "bash", [st.TextContent("out")]))


def test_acyclic_values_are_untracked_and_free_form_ones_tracked(tmp_path: Path) -> None:
    _session(tmp_path / "s.jsonl")
    with st.JsonlSessionStorage.open(tmp_path / "s.jsonl", readonly=True) as storage:
        text, blocks, assistant, result = storage.get_entries()
    # Only strings, numbers and tuples of such values: never in a cycle.
    for value in (text, text.message, blocks, blocks.message, blocks.message.content, result):
        assert not gc.is_tracked(value), value
    # A tool call's arguments are a dict that can be changed to hold anything.
    call = assistant.message.content[1]
    assert isinstance(call.arguments, dict)
    assert gc.is_tracked(call) and gc.is_tracked(assistant.message) and gc.is_tracked(assistant)


def test_untracked_values_survive_collections_and_are_freed(tmp_path: Path) -> None:
    _session(tmp_path / "s.jsonl")
    with st.JsonlSessionStorage.open(tmp_path / "s.jsonl", readonly=True) as storage:
        entries = storage.get_entries()
        again = storage.get_entries()
    gc.collect()
    assert entries == again and entries[1].message.content[1].text == "b"


class _Marker:
    """Something a weak reference can watch."""


def test_a_cycle_through_a_free_form_dict_is_collected(tmp_path: Path) -> None:
    _session(tmp_path / "s.jsonl")
    with st.JsonlSessionStorage.open(tmp_path / "s.jsonl", readonly=True) as storage:
        assistant = storage.get_entries()[2]
    call = assistant.message.content[1]
    marker = _Marker()
    call.arguments["me"] = assistant  # a cycle made through the one mutable member
    call.arguments["marker"] = marker
    gone = weakref.ref(marker)
    del marker
    del assistant, call
    gc.collect()
    assert gone() is None
