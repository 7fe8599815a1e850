"""The incremental context against a cold build, step by step.

A hypothesis state machine drives one ``Session`` through random appends, leaf moves (with
and without branch summaries), compactions (cut and retained-tail), labels, names, option
changes (transforms and projectors), appends made behind the session's back, cache drops
and reopens. After every step ``build_context()`` must equal a cold
``build_session_context`` of the same branch and state, computed from the storage alone.
"""

from __future__ import annotations

import pathlib
import shutil
import tempfile
from typing import Any

import pytest
from hypothesis import strategies as hs
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import sessiontree as st

TS = 1_767_225_600_000


def _note_projector(e: st.CustomEntry, index: int, entries: list[Any]) -> list[Any]:
    return [st.CustomMessage("note", f"{e.data}@{index}", timestamp=TS)]


def _drop_tool_results(entries: list[Any]) -> list[Any]:
    return [e for e in entries if not (e.type == "message" and e.message.role == "tool_result")]


def _reverse(entries: list[Any]) -> list[Any]:
    return list(reversed(entries))


OPTIONS = [
    None,
    st.SessionContextBuildOptions(entry_projectors={"note": _note_projector}),
    st.SessionContextBuildOptions(entry_transforms=[_drop_tool_results]),
    st.SessionContextBuildOptions(
        entry_transforms=[_reverse], entry_projectors={"note": _note_projector}
    ),
]


def cold(storage: st.SessionStorage, options: st.SessionContextBuildOptions | None) -> Any:
    """What a session with no cache builds: the branch, state from the whole path."""
    leaf = storage.get_leaf_id()
    branch = storage.get_path_to_root_or_compaction(leaf)
    state = st.derive_session_context_state(storage.get_path_to_root(leaf))
    messages = st.build_session_context(branch, options).messages
    return st.SessionContext(messages, state.thinking_level, state.model, state.active_tool_names)


class IncrementalContext(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="st-incr-"))
        self.path = self.dir / "s.jsonl"
        self.session: st.Session | None = None
        self.ids: list[str] = []
        self.options: st.SessionContextBuildOptions | None = None
        self.n = 0

    @initialize(jsonl=hs.booleans())
    def start(self, jsonl: bool) -> None:
        storage: st.SessionStorage = (
            st.JsonlSessionStorage.create(self.path, durability="none")
            if jsonl
            else st.InMemorySessionStorage()
        )
        self.session = st.Session(storage)

    def teardown(self) -> None:
        if self.session is not None:
            self.session.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def s(self) -> st.Session:
        assert self.session is not None
        return self.session

    def text(self) -> str:
        self.n += 1
        return f"t{self.n}"

    def track(self, entry_id: str | None) -> None:
        if entry_id is not None:
            self.ids.append(entry_id)

    @rule()
    def user(self) -> None:
        self.track(self.s.append_message(st.UserMessage(self.text(), timestamp=TS)))

    @rule(model=hs.sampled_from(["m1", "m2"]))
    def assistant(self, model: str) -> None:
        message = st.AssistantMessage([st.TextContent(self.text())], "p", model, timestamp=TS)
        self.track(self.s.append_message(message))

    @rule()
    def tool_result(self) -> None:
        message = st.ToolResultMessage("c1", "bash", [st.TextContent(self.text())], timestamp=TS)
        self.track(self.s.append_message(message))

    @rule(level=hs.sampled_from(["off", "low", "high"]))
    def thinking(self, level: Any) -> None:
        self.track(self.s.append_thinking_level_change(level))

    @rule()
    def model_change(self) -> None:
        self.track(self.s.append_model_change("q", self.text()))

    @rule(names=hs.lists(hs.sampled_from(["read", "bash"]), max_size=2))
    def tools(self, names: list[str]) -> None:
        self.track(self.s.append_active_tools_change(names))

    @rule(kind=hs.sampled_from(["note", "other"]))
    def custom(self, kind: str) -> None:
        self.track(self.s.append_custom_entry(kind, self.text()))

    @rule()
    def custom_message(self) -> None:
        self.track(self.s.append_custom_message_entry("cm", self.text()))

    @precondition(lambda self: bool(self.ids))
    @rule(data=hs.data(), clear=hs.booleans())
    def label(self, data: hs.DataObject, clear: bool) -> None:
        target = data.draw(hs.sampled_from(self.ids))
        self.track(self.s.append_label(target, None if clear else self.text()))

    @rule()
    def name(self) -> None:
        self.track(self.s.append_session_info(self.text()))

    @precondition(lambda self: bool(self.ids))
    @rule(data=hs.data(), summary=hs.booleans())
    def move(self, data: hs.DataObject, summary: bool) -> None:
        target = data.draw(hs.sampled_from(self.ids))
        self.track(self.s.move_to(target, {"summary": self.text()} if summary else None))

    @rule()
    def move_to_start(self) -> None:
        self.s.move_to(None)

    @precondition(lambda self: bool(self.ids))
    @rule(data=hs.data(), tail=hs.booleans())
    def compact(self, data: hs.DataObject, tail: bool) -> None:
        branch = self.s.get_branch()
        if not branch:
            return
        first_kept = data.draw(hs.sampled_from([e.id for e in branch]))
        retained = [st.UserMessage("kept", timestamp=TS)] if tail else None
        self.track(self.s.append_compaction(self.text(), first_kept, 100, retained_tail=retained))

    @rule(index=hs.integers(0, len(OPTIONS) - 1))
    def change_options(self, index: int) -> None:
        self.options = OPTIONS[index]

    @rule()
    def behind_the_back(self) -> None:
        # An append through the storage itself: the session must notice it.
        storage = self.s.storage
        entry = st.CustomEntry(
            custom_type="note",
            data=self.text(),
            id=storage.create_entry_id(),
            parent_id=storage.get_leaf_id(),
            timestamp="2026-01-01T00:00:00.000Z",
        )
        storage.append_entry(entry)
        self.track(entry.id)

    @rule()
    def drop_cache(self) -> None:
        self.s.clear_context_cache()

    @rule()
    def reopen(self) -> None:
        storage = self.s.storage
        if isinstance(storage, st.JsonlSessionStorage):
            self.s.close()
            self.session = st.Session(st.JsonlSessionStorage.open(self.path, durability="none"))
        else:
            data = storage.to_jsonl()  # type: ignore[attr-defined]
            self.s.close()
            self.session = st.Session(st.InMemorySessionStorage.from_jsonl(data))

    @invariant()
    def matches_a_cold_build(self) -> None:
        if self.session is None:
            return
        got = self.s.build_context(self.options)
        want = cold(self.s.storage, self.s.merge_context_build_options(self.options))
        assert got == want
        # Asking again without a change gives the same answer.
        assert self.s.build_context(self.options) == want


TestIncrementalContext = IncrementalContext.TestCase


def test_a_turn_extends_the_cached_context(msgs: Any) -> None:
    with st.Session(st.InMemorySessionStorage()) as s:
        for i in range(50):
            s.append_message(msgs.user(f"u{i}"))
        first = s.build_context()
        s.append_message(msgs.user("next"))
        s.append_message(msgs.assistant("reply"))
        second = s.build_context()
        assert second.messages[:50] == first.messages
        # The earlier messages are the very objects of the last context, not copies.
        assert all(a is b for a, b in zip(first.messages, second.messages[:50], strict=True))
        assert [m.content[0].text for m in second.messages[-1:]] == ["reply"]


def test_clear_context_cache_rebuilds_from_the_storage(msgs: Any) -> None:
    with st.Session(st.InMemorySessionStorage()) as s:
        s.append_message(msgs.user("a"))
        one = s.build_context()
        s.clear_context_cache()
        two = s.build_context()
        assert one == two and one is not two


def test_a_move_keeps_the_common_prefix(msgs: Any) -> None:
    with st.Session(st.InMemorySessionStorage()) as s:
        ids = [s.append_message(msgs.user(f"u{i}")) for i in range(10)]
        before = s.build_context()
        s.move_to(ids[4], {"summary": "left the tail"})
        after = s.build_context()
        assert all(a is b for a, b in zip(before.messages[:5], after.messages[:5], strict=True))
        assert [m.role for m in after.messages[5:]] == ["branch_summary"]


def test_an_earlier_context_never_changes(msgs: Any) -> None:
    with st.Session(st.InMemorySessionStorage()) as s:
        ids = [s.append_message(msgs.user(f"u{i}")) for i in range(5)]
        old = s.build_context()
        frozen = tuple(old.messages)
        s.append_message(msgs.user("later"))
        s.build_context()
        s.move_to(ids[1])
        s.append_message(msgs.user("other branch"))
        assert len(s.build_context().messages) == 3
        assert tuple(old.messages) == frozen and len(old.messages) == 5


def test_message_sequence_behaves_like_a_tuple(msgs: Any) -> None:
    import copy
    import pickle

    items = [msgs.user(t) for t in "abcd"]
    seq = st.MessageSequence(items)
    items.append(msgs.user("e"))  # the sequence copied its input
    assert len(seq) == 4 and seq[-1] == msgs.user("d") and seq[1:3] == (seq[1], seq[2])
    assert seq == tuple(seq) and tuple(seq) == seq and seq != list(seq)
    assert msgs.user("b") in seq and seq.index(msgs.user("c")) == 2
    assert seq + (msgs.user("x"),) == (*seq, msgs.user("x"))  # noqa: RUF005
    assert pickle.loads(pickle.dumps(seq)) == seq and copy.deepcopy(seq) == seq
    assert hash(seq) == hash(tuple(seq))
    assert "MessageSequence([UserMessage(" in repr(seq) and "1 more" in repr(seq)
    with pytest.raises(IndexError):
        seq[4]
