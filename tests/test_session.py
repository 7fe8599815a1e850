"""Tests for ``Session``: appends, the leaf, branches, the tree, stats, reprs and errors."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import pytest

import sessiontree as st

HERE_TS = "2026-03-04T05:06:07.890Z"


def code_of(exc: pytest.ExceptionInfo[BaseException]) -> str:
    assert isinstance(exc.value, st.SessionError)
    return exc.value.code


# --------------------------------------------------------------------------- the seed example


def test_seed_complete_session_example(tmp_path: pathlib.Path, msgs: Any) -> None:
    """The seed's "Complete Session Example", on a file, then reopened."""
    path = tmp_path / "session.jsonl"
    header = st.SessionHeader("session_1", "2026-01-01T00:00:00.000Z", "/path")
    storage = st.JsonlSessionStorage.create(path, header)
    session = st.Session(storage)
    u_msg = msgs.usage(100, 0.5)
    u_cmp = msgs.usage(7, 0.125)

    msg1_id = session.append_message(msgs.user("Hello"))
    msg2 = msgs.assistant("Hi!", model="gpt-3.5", usage=u_msg)
    msg2_id = session.append_message(msg2)
    tl_id = session.append_thinking_level_change("medium")
    mc_id = session.append_model_change("openai", "gpt-4")
    msg3 = msgs.user("What can you do?")
    msg4 = msgs.assistant("I can...", model="gpt-4", usage=u_msg)
    msg3_id = session.append_message(msg3)
    msg4_id = session.append_message(msg4)
    compact_id = session.append_compaction(
        "User asked about capabilities and assistant explained",
        msg2_id,
        100000,
        {"summary_length": 50},
        False,
        u_cmp,
        [msg3, msg4],
    )

    # At the compaction: the retained tail follows the summary; state from the whole path.
    assert session.get_leaf_id() == compact_id
    assert [e.id for e in session.get_branch()] == [compact_id]
    at_compaction = session.build_context()
    assert [m.role for m in at_compaction.messages] == ["compaction_summary", "user", "assistant"]
    assert at_compaction.messages[1:] == (msg3, msg4)
    assert at_compaction.messages[0].summary.startswith("User asked")
    assert at_compaction.messages[0].tokens_before == 100000
    assert at_compaction.thinking_level == "medium"
    assert at_compaction.model == st.ModelRef("openai", "gpt-4")

    assert session.move_to(msg2_id) is None
    assert session.get_leaf_id() == msg2_id
    branch_id = session.move_to(
        msg2_id, {"summary": "User changed direction", "details": {"focus": "files"}}
    )
    assert branch_id is not None
    msg5 = msgs.user("Let's work with files")
    msg5_id = session.append_message(msg5)

    def check(s: st.Session) -> None:
        assert s.get_leaf_id() == msg5_id
        assert [e.id for e in s.get_branch()] == [msg1_id, msg2_id, branch_id, msg5_id]
        context = s.build_context()
        assert context.messages == (
            msgs.user("Hello"),
            msg2,
            st.create_branch_summary_message(
                "User changed direction", msg2_id, s.get_entry(branch_id).timestamp
            ),
            msg5,
        )
        # The thinking level and model change live on the abandoned branch.
        assert context.thinking_level == "off"
        assert context.model == st.ModelRef("openai", "gpt-3.5")
        assert context.active_tool_names is None

        branch = s.get_entry(branch_id)
        assert isinstance(branch, st.BranchSummaryEntry)
        assert (branch.parent_id, branch.from_id) == (msg2_id, msg2_id)
        assert branch.details == {"focus": "files"}
        compaction = s.get_entry(compact_id)
        assert isinstance(compaction, st.CompactionEntry)
        assert compaction.details == {"summary_length": 50}
        assert compaction.retained_tail == (msg3, msg4)
        assert compaction.usage == u_cmp

        stats = s.get_session_stats()
        assert stats.entry_count == 11  # 8 appends, 2 leaf moves, 1 branch summary
        assert stats.message_count == 5
        assert (stats.user_message_count, stats.assistant_message_count) == (3, 2)
        assert stats.tool_result_count == 0
        assert stats.input_tokens == 2 * 100 + 7
        assert stats.output_tokens == 2 * 200 + 14
        assert stats.cache_read_tokens == 2 * 300 + 21
        assert stats.cache_write_tokens == 2 * 400 + 28
        assert stats.total_tokens == 2 * 1000 + 70
        assert stats.cost_total == pytest.approx(1.125)
        assert len(s) == 11

        (root,) = s.get_tree()
        assert root.entry.id == msg1_id
        (n2,) = root.children
        assert n2.entry.id == msg2_id
        assert [c.entry.type for c in n2.children] == [
            "thinking_level_change",
            "leaf",
            "branch_summary",
        ]
        tl, _, br = n2.children
        assert tl.entry.id == tl_id
        chain = []
        node = tl
        while node.children:
            (node,) = node.children
            chain.append(node.entry.id)
        assert chain[:4] == [mc_id, msg3_id, msg4_id, compact_id]
        assert s.get_entry(chain[4]).type == "leaf"
        assert [c.entry.id for c in br.children] == [msg5_id]

    check(session)
    session.close()
    with st.Session(st.JsonlSessionStorage.open(path)) as reopened:
        check(reopened)
        assert reopened.storage.get_metadata() == header
        assert reopened.id == "session_1"
    with st.Session(st.JsonlSessionStorage.open(path, readonly=True)) as readonly:
        check(readonly)


# --------------------------------------------------------------------------- every entry type


def append_every_kind(session: st.Session, msgs: Any) -> dict[str, str]:
    """Appends one entry of every kind (and an unknown type); returns name -> id."""
    ids: dict[str, str] = {}
    ids["user"] = session.append_message(
        st.UserMessage(
            [st.TextContent("look"), st.ImageContent("iVBORw0KGgo=", "image/png")],
            timestamp=5,
        )
    )
    ids["assistant"] = session.append_message(
        st.AssistantMessage(
            [
                st.ThinkingContent("hmm", signature="sig", redacted=False),
                st.TextContent("calling", signature="t-sig"),
                st.ToolCall("call_1", "bash", {"cmd": "ls", "n": [1, 2.5, None, True]}),
            ],
            "anthropic",
            "claude",
            api="messages",
            usage=msgs.usage(3, 0.01),
            stop_reason="tool_use",
            timestamp=6,
        )
    )
    ids["tool_result"] = session.append_message(
        st.ToolResultMessage(
            "call_1", "bash", [st.TextContent("a\nb")], is_error=True, details={"x": 1}, timestamp=7
        )
    )
    ids["custom_msg"] = session.append_message(
        st.CustomMessage("note", "custom text", display=False, details=[1], timestamp=8)
    )
    ids["compaction_msg"] = session.append_message(
        st.CompactionSummaryMessage("cs", 9, timestamp=9)
    )
    ids["branch_msg"] = session.append_message(st.BranchSummaryMessage("bs", "x", timestamp=10))
    ids["unknown_msg"] = session.append_message(
        st.UnknownMessage("bash_execution", {"role": "bash_execution", "command": "ls", "n": 1})
    )
    ids["thinking"] = session.append_thinking_level_change("xhigh")
    ids["model"] = session.append_model_change("google", "gemini")
    ids["tools"] = session.append_active_tools_change(["read", "write"])
    ids["compaction"] = session.append_compaction(
        "sum",
        ids["user"],
        1234,
        details={"k": "v"},
        from_hook=True,
        usage=msgs.usage(1),
        retained_tail=[msgs.user("kept")],
    )
    ids["compaction_plain"] = session.append_compaction("sum2", None, 5)
    ids["custom"] = session.append_custom_entry("state", {"a": [1, {"b": None}]})
    ids["custom_none"] = session.append_custom_entry("bare")
    ids["custom_message"] = session.append_custom_message_entry(
        "hint", "hello model", display=False, details={"d": 1}
    )
    ids["label"] = session.append_label(ids["user"], "start ✓")
    ids["label_clear"] = session.append_label(ids["assistant"], None)
    ids["info"] = session.append_session_info("my session")
    ids["info_none"] = session.append_session_info(None)
    ids["info2"] = session.append_session_info("final name")
    session.move_to(ids["model"])
    ids["leaf"] = session.storage.get_entries("leaf")[-1].id
    ids["branch"] = session.move_to(
        ids["tools"],
        {"summary": "left", "details": {"why": 1}, "usage": msgs.usage(2), "from_hook": True},
    )
    storage = session.storage
    unknown_id = storage.create_entry_id()
    data = {
        "type": "future_kind",
        "id": unknown_id,
        "parent_id": storage.get_leaf_id(),
        "timestamp": HERE_TS,
        "payload": {"nested": [1, 2, 3]},
        "z": "ünïcödé",
    }
    storage.append_entry(
        st.UnknownEntry(
            type="future_kind",
            id=unknown_id,
            parent_id=data["parent_id"],
            timestamp=HERE_TS,
            data=data,
        )
    )
    ids["unknown"] = unknown_id
    return ids


def test_every_entry_type_round_trips(backend: Any, msgs: Any) -> None:
    session = backend.session()
    ids = append_every_kind(session, msgs)
    before = {name: session.get_entry(i) for name, i in ids.items()}
    leaf = session.get_leaf_id()
    assert leaf == ids["unknown"]
    assert set(type(e).__name__ for e in before.values()) >= {
        "MessageEntry",
        "ThinkingLevelChangeEntry",
        "ModelChangeEntry",
        "ActiveToolsChangeEntry",
        "CompactionEntry",
        "BranchSummaryEntry",
        "CustomEntry",
        "CustomMessageEntry",
        "LabelEntry",
        "SessionInfoEntry",
        "LeafEntry",
        "UnknownEntry",
    }
    all_before = session.storage.get_entries()
    reopened = backend.reopen_session(session)
    for name, entry_id in ids.items():
        assert reopened.get_entry(entry_id) == before[name], name
    assert reopened.storage.get_entries() == all_before
    assert reopened.get_leaf_id() == leaf
    assert reopened.get_label(ids["user"]) == "start ✓"
    assert reopened.get_label(ids["assistant"]) is None
    assert reopened.get_session_name() == "final name"
    unknown = reopened.get_entry(ids["unknown"])
    assert isinstance(unknown, st.UnknownEntry)
    assert unknown.type == "future_kind"
    assert unknown.data["payload"] == {"nested": [1, 2, 3]}
    reopened.close()


def test_appended_fields_are_what_was_given(backend: Any, msgs: Any) -> None:
    session = backend.session()
    ids = append_every_kind(session, msgs)
    get = session.get_entry
    assert get(ids["thinking"]).thinking_level == "xhigh"
    model = get(ids["model"])
    assert (model.provider, model.model_id) == ("google", "gemini")
    assert get(ids["tools"]).active_tool_names == ("read", "write")
    compaction = get(ids["compaction"])
    assert compaction.first_kept_entry_id == ids["user"]
    assert compaction.tokens_before == 1234
    assert compaction.from_hook is True
    assert compaction.retained_tail == (msgs.user("kept"),)
    plain = get(ids["compaction_plain"])
    assert (plain.first_kept_entry_id, plain.retained_tail, plain.usage) == (None, None, None)
    assert get(ids["custom"]).data == {"a": [1, {"b": None}]}
    assert get(ids["custom_none"]).data is None
    cm = get(ids["custom_message"])
    assert (cm.custom_type, cm.content, cm.display, cm.details) == (
        "hint",
        "hello model",
        False,
        {"d": 1},
    )
    label = get(ids["label"])
    assert (label.target_id, label.label) == (ids["user"], "start ✓")
    assert get(ids["info_none"]).name is None
    leaf = get(ids["leaf"])
    assert isinstance(leaf, st.LeafEntry)
    assert leaf.target_id == ids["model"]
    assert leaf.parent_id == ids["info2"]
    branch = get(ids["branch"])
    assert (branch.from_id, branch.parent_id, branch.summary) == (
        ids["tools"],
        ids["tools"],
        "left",
    )
    assert branch.usage == msgs.usage(2)
    assert branch.from_hook is True
    # Each append hangs under the previous leaf.
    assert get(ids["assistant"]).parent_id == ids["user"]
    assert get(ids["user"]).parent_id is None
    session.close()


def test_generated_ids_and_timestamps(backend: Any, msgs: Any) -> None:
    session = backend.session()
    ids = [session.append_message(msgs.user(str(i))) for i in range(50)]
    assert len(set(ids)) == 50
    for entry_id in ids:
        assert len(entry_id) == 8
        assert all(c in "0123456789abcdef" for c in entry_id)
        ts = session.get_entry(entry_id).timestamp
        assert ts.endswith("Z")
        assert len(ts) == len("2026-11-30T16:48:30.123Z")
    session.close()


def test_jsonl_bytes_untouched_by_open_close_and_readonly(
    tmp_path: pathlib.Path, msgs: Any
) -> None:
    path = tmp_path / "s.jsonl"
    session = st.Session(st.JsonlSessionStorage.create(path))
    append_every_kind(session, msgs)
    session.close()
    data = path.read_bytes()
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 1 + 24

    st.JsonlSessionStorage.open(path).close()
    assert path.read_bytes() == data
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert len(ro) == 24
        assert ro.load_report.ok
    assert path.read_bytes() == data
    # Reading everything through a writer changes nothing either.
    with st.Session(st.JsonlSessionStorage.open(path)) as s:
        s.get_tree()
        s.build_context()
        s.get_session_stats()
        s.storage.get_entries()
    assert path.read_bytes() == data


def test_memory_document_equals_file_bytes(tmp_path: pathlib.Path) -> None:
    """The in-memory storage holds exactly what a file would."""
    header = st.SessionHeader("same", HERE_TS, "/w")
    path = tmp_path / "s.jsonl"
    file_storage = st.JsonlSessionStorage.create(path, header)
    mem = st.InMemorySessionStorage(header)
    for storage in (file_storage, mem):
        storage.append_entry(
            st.CustomEntry(id="a", parent_id=None, timestamp=HERE_TS, custom_type="t", data=1)
        )
        storage.append_entry(
            st.LabelEntry(id="b", parent_id="a", timestamp=HERE_TS, target_id="a", label="x")
        )
    file_storage.close()
    assert mem.to_jsonl() == path.read_bytes()
    mem.close()


# --------------------------------------------------------------------------- the leaf


def test_append_moves_the_leaf_and_hangs_under_it(backend: Any, msgs: Any) -> None:
    session = backend.session()
    assert session.get_leaf_id() is None
    assert session.get_branch() == []
    a = session.append_message(msgs.user("a"))
    assert session.get_leaf_id() == a
    b = session.append_custom_entry("x")
    assert session.get_leaf_id() == b
    assert session.get_entry(b).parent_id == a
    session.close()


@pytest.mark.parametrize("scenario", ["earlier", "none", "summary", "chain", "none_then_append"])
def test_leaf_restored_after_reopen(backend: Any, msgs: Any, scenario: str) -> None:
    session = backend.session()
    a = session.append_message(msgs.user("a"))
    b = session.append_message(msgs.assistant("b"))
    c = session.append_message(msgs.user("c"))
    expected: str | None
    branch: list[str]
    if scenario == "earlier":
        session.move_to(a)
        expected, branch = a, [a]
    elif scenario == "none":
        session.move_to(None)
        expected, branch = None, []
    elif scenario == "summary":
        bs = session.move_to(b, summary={"summary": "gone"})
        assert bs is not None
        expected, branch = bs, [a, b, bs]
    elif scenario == "chain":
        session.move_to(a)
        session.move_to(c)
        session.move_to(b)
        expected, branch = b, [a, b]
    else:
        session.move_to(None)
        d = session.append_message(msgs.user("d"))
        expected, branch = d, [d]
    assert session.get_leaf_id() == expected
    reopened = backend.reopen_session(session)
    assert reopened.get_leaf_id() == expected
    assert [e.id for e in reopened.get_branch()] == branch
    # The next append hangs under the restored leaf (a new root after move_to(None)).
    e = reopened.append_message(msgs.user("e"))
    assert reopened.get_entry(e).parent_id == expected
    again = backend.reopen_session(reopened)
    assert again.get_leaf_id() == e
    assert [x.id for x in again.get_branch()] == [*branch, e]
    again.close()


def test_move_to_none_makes_a_new_root(backend: Any, msgs: Any) -> None:
    session = backend.session()
    a = session.append_message(msgs.user("a"))
    session.append_message(msgs.assistant("b"))
    assert session.move_to(None) is None
    r = session.append_message(msgs.user("new root"))
    assert session.get_entry(r).parent_id is None
    roots = session.get_tree()
    assert [n.entry.id for n in roots] == [a, r]
    assert [e.id for e in session.storage.get_children(None)] == [a, r]
    assert session.build_context().messages == (msgs.user("new root"),)
    session.close()


def test_move_to_with_summary(backend: Any, msgs: Any) -> None:
    session = backend.session()
    a = session.append_message(msgs.user("a"))
    b = session.append_message(msgs.assistant("b"))
    leaf_count = len(session.storage.find_entries("leaf"))
    bs = session.move_to(a, {"summary": "tried b", "usage": msgs.usage(1)})
    assert isinstance(bs, str)
    assert session.get_leaf_id() == bs
    leaves = session.storage.find_entries("leaf")
    assert len(leaves) == leaf_count + 1
    assert leaves[-1].target_id == a
    assert leaves[-1].parent_id == b
    entry = session.get_entry(bs)
    assert isinstance(entry, st.BranchSummaryEntry)
    assert (entry.from_id, entry.parent_id, entry.details, entry.from_hook) == (a, a, None, False)
    ctx = session.build_context()
    assert [m.role for m in ctx.messages] == ["user", "branch_summary"]
    assert ctx.messages[1].summary == "tried b"
    assert ctx.messages[1].from_id == a
    session.close()


def test_get_branch_of_another_leaf(backend: Any, msgs: Any) -> None:
    session = backend.session()
    a = session.append_message(msgs.user("a"))
    b = session.append_message(msgs.assistant("b"))
    session.move_to(a)
    c = session.append_message(msgs.user("c"))
    assert [e.id for e in session.get_branch()] == [a, c]
    assert [e.id for e in session.get_branch(b)] == [a, b]
    assert [e.id for e in session.get_branch(a)] == [a]
    session.close()


# --------------------------------------------------------------------------- labels, names


def test_labels_last_wins_and_none_clears(backend: Any, msgs: Any) -> None:
    session = backend.session()
    a = session.append_message(msgs.user("a"))
    b = session.append_message(msgs.user("b"))
    assert session.get_label(a) is None
    session.append_label(a, "one")
    session.append_label(b, "bee")
    session.append_label(a, "two")
    assert session.get_label(a) == "two"
    session.append_label(b, None)
    assert session.get_label(b) is None
    # Labels are file-wide: a label appended on another branch still counts.
    session.move_to(None)
    session.append_label(a, "three")
    reopened = backend.reopen_session(session)
    assert reopened.get_label(a) == "three"
    assert reopened.get_label(b) is None
    tree_labels = {n.entry.id: n.label for r in reopened.get_tree() for n in r.walk()}
    assert tree_labels[a] == "three"
    assert tree_labels[b] is None
    reopened.close()


def test_session_name(backend: Any) -> None:
    session = backend.session()
    assert session.get_session_name() is None
    session.append_session_info("first")
    session.append_session_info("second")
    assert session.get_session_name() == "second"
    session.move_to(None)
    session.append_session_info(None)
    reopened = backend.reopen_session(session)
    assert reopened.get_session_name() is None
    reopened.append_session_info("again")
    assert reopened.get_session_name() == "again"
    reopened.close()


# --------------------------------------------------------------------------- stats


def test_stats_cover_every_branch(backend: Any, msgs: Any) -> None:
    session = backend.session()
    assert session.get_session_stats() == st.SessionStats()
    a = session.append_message(msgs.user("a"))
    session.append_message(msgs.assistant("b", usage=msgs.usage(1, 0.5)))
    session.append_message(msgs.tool_result())
    session.move_to(a, {"summary": "s", "usage": msgs.usage(2, 0.25)})
    session.append_message(msgs.assistant("c", usage=msgs.usage(3, 1.0)))
    session.append_compaction("c", None, 10, usage=msgs.usage(4, 2.0))
    session.append_message(st.CustomMessage("n", "custom", timestamp=1))
    session.append_custom_message_entry("n", "not a message entry")
    session.append_label(a, "x")
    stats = session.get_session_stats()
    assert stats.entry_count == len(session) == 10
    assert stats.message_count == 5
    assert stats.user_message_count == 1
    assert stats.assistant_message_count == 2
    assert stats.tool_result_count == 1
    assert stats.input_tokens == 10
    assert stats.output_tokens == 20
    assert stats.cache_read_tokens == 30
    assert stats.cache_write_tokens == 40
    assert stats.total_tokens == 100
    assert stats.cost_total == pytest.approx(3.75)
    reopened = backend.reopen_session(session)
    assert reopened.get_session_stats() == stats
    reopened.close()


# --------------------------------------------------------------------------- tree


def test_tree_shape_and_order(backend: Any, msgs: Any) -> None:
    session = backend.session()
    a = session.append_message(msgs.user("a"))
    b = session.append_message(msgs.user("b"))
    session.move_to(a)
    c = session.append_message(msgs.user("c"))
    session.move_to(a)
    d = session.append_message(msgs.user("d"))
    session.move_to(None)
    r2 = session.append_custom_entry("root2")
    session.append_label(c, "see")
    tree = session.get_tree()
    assert [n.entry.id for n in tree] == [a, r2]
    kids = tree[0].children
    # File order, leaf entries included (they are entries too).
    assert [(n.entry.type, n.entry.id) for n in kids if n.entry.type != "leaf"] == [
        ("message", b),
        ("message", c),
        ("message", d),
    ]
    assert next(n for n in kids if n.entry.id == c).label == "see"
    # The label hangs under the leaf at the time it was appended, like any entry.
    assert [n.entry.type for n in tree[1].children] == ["label"]
    walked = [n.entry.id for root in tree for n in root.walk()]
    assert sorted(walked) == sorted(e.id for e in session.storage.get_entries())
    reopened = backend.reopen_session(session)
    assert reopened.get_tree() == tree
    reopened.close()


def test_tree_node_equality_and_repr_on_a_deep_tree() -> None:
    depth = 20_000  # twenty times the recursion limit
    entries = [
        st.CustomEntry(
            id=f"n{i}",
            parent_id=None if i == 0 else f"n{i - 1}",
            timestamp=HERE_TS,
            custom_type="t",
        )
        for i in range(depth + 1)
    ]

    def chain(last_label: str | None) -> st.TreeNode:
        node = st.TreeNode(entries[-1], (), last_label)
        for entry in reversed(entries[:-1]):
            node = st.TreeNode(entry, [node])
        return node

    one, two, other = chain("end"), chain("end"), chain("different")
    assert one == two
    assert one != other
    assert (one != two) is False
    entries[depth // 2] = dataclasses.replace(entries[depth // 2], data="changed")
    assert chain("end") != one
    text = repr(one)
    assert "n0" in text and "custom" in text
    assert len(text) < 200
    assert len(one.walk()) == depth + 1
    with pytest.raises(TypeError):
        hash(one)
    with pytest.raises(AttributeError):
        one.label = "x"  # type: ignore[misc]


# --------------------------------------------------------------------------- state


def test_state_from_model_changes_and_assistant_messages(backend: Any, msgs: Any) -> None:
    session = backend.session()
    ctx = session.build_context()
    assert (ctx.messages, ctx.thinking_level, ctx.model, ctx.active_tool_names) == (
        (),
        "off",
        None,
        None,
    )
    session.append_model_change("openai", "gpt-4")
    assert session.build_context().model == st.ModelRef("openai", "gpt-4")
    session.append_message(msgs.assistant(provider="anthropic", model="claude"))
    assert session.build_context().model == st.ModelRef("anthropic", "claude")
    session.append_model_change("openai", "o3")
    session.append_active_tools_change([])
    session.append_thinking_level_change("low")
    ctx = session.build_context()
    assert ctx.model == st.ModelRef("openai", "o3")
    assert ctx.active_tool_names == ()
    assert ctx.thinking_level == "low"
    session.append_active_tools_change(["bash"])
    session.append_thinking_level_change("off")
    ctx = session.build_context()
    assert ctx.active_tool_names == ("bash",)
    assert ctx.thinking_level == "off"
    session.close()


# --------------------------------------------------------------------------- bad input


def test_unknown_ids_are_not_found(backend: Any, msgs: Any) -> None:
    session = backend.session()
    a = session.append_message(msgs.user("a"))
    before = len(session)
    assert session.get_entry("missing") is None
    calls = [
        lambda: session.get_branch("missing"),
        lambda: session.move_to("missing"),
        lambda: session.move_to("missing", {"summary": "s"}),
        lambda: session.append_label("missing", "x"),
        lambda: session.append_compaction("s", "missing", 1),
        lambda: session.storage.get_children("missing"),
        lambda: session.storage.get_path_to_root("missing"),
        lambda: session.storage.get_path_to_root_or_compaction("missing"),
        lambda: session.storage.set_leaf_id("missing"),
        lambda: session.storage.get_entries(since="missing"),
        lambda: session.get_label("missing"),
        lambda: session.storage.get_label("missing"),
    ]
    for call in calls:
        with pytest.raises(st.SessionError) as exc:
            call()
        assert code_of(exc) == "not_found"
        assert isinstance(exc.value, KeyError)
    assert len(session) == before
    assert session.get_leaf_id() == a
    session.close()


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda s, m: s.append_thinking_level_change("ultra"), id="thinking-level"),
        pytest.param(lambda s, m: s.append_thinking_level_change(3), id="thinking-level-type"),
        pytest.param(lambda s, m: s.append_thinking_level_change(None), id="thinking-level-none"),
        pytest.param(lambda s, m: s.append_message("hello"), id="message-str"),
        pytest.param(lambda s, m: s.append_message(None), id="message-none"),
        pytest.param(lambda s, m: s.append_model_change("p", 4), id="model-id-type"),
        pytest.param(lambda s, m: s.append_model_change(None, "m"), id="provider-none"),
        pytest.param(lambda s, m: s.append_active_tools_change("bash"), id="tools-str"),
        pytest.param(lambda s, m: s.append_active_tools_change([1]), id="tools-item"),
        pytest.param(lambda s, m: s.append_active_tools_change(None), id="tools-none"),
        pytest.param(lambda s, m: s.append_compaction(5, None, 1), id="compaction-summary"),
        pytest.param(lambda s, m: s.append_compaction("s", None, "1"), id="compaction-tokens"),
        pytest.param(lambda s, m: s.append_compaction("s", 5, 1), id="compaction-first-kept"),
        pytest.param(
            lambda s, m: s.append_compaction("s", None, 1, usage={"input": 1}),
            id="compaction-usage",
        ),
        pytest.param(
            lambda s, m: s.append_compaction("s", None, 1, retained_tail=["x"]), id="retained-tail"
        ),
        pytest.param(
            lambda s, m: s.append_compaction("s", None, 1, from_hook="yes"), id="from-hook"
        ),
        pytest.param(lambda s, m: s.append_custom_entry(None), id="custom-type"),
        pytest.param(lambda s, m: s.append_custom_message_entry("t", 5), id="custom-content"),
        pytest.param(
            lambda s, m: s.append_custom_message_entry("t", "c", display="no"), id="custom-display"
        ),
        pytest.param(lambda s, m: s.append_label(m, 5), id="label-type"),
        pytest.param(lambda s, m: s.append_label(None, "x"), id="label-target-none"),
        pytest.param(lambda s, m: s.append_session_info(5), id="session-name"),
        pytest.param(
            lambda s, m: s.move_to(None, summary={"summary": "s"}), id="move-none-summary"
        ),
        pytest.param(lambda s, m: s.move_to(5), id="move-type"),
        pytest.param(lambda s, m: s.move_to(m, summary="text"), id="summary-str"),
        pytest.param(lambda s, m: s.move_to(m, summary={}), id="summary-missing"),
        pytest.param(lambda s, m: s.move_to(m, summary={"summary": 1}), id="summary-type"),
        pytest.param(
            lambda s, m: s.move_to(m, summary={"summary": "s", "bogus": 1}), id="summary-key"
        ),
        pytest.param(
            lambda s, m: s.move_to(m, summary={"summary": "s", "usage": 3}), id="summary-usage"
        ),
        pytest.param(
            lambda s, m: s.move_to(m, summary={"summary": "s", "from_hook": 1}), id="summary-hook"
        ),
        pytest.param(
            lambda s, m: s.move_to(m, summary={"summary": "s", "details": {1, 2}}),
            id="summary-details-not-json",
        ),
        pytest.param(lambda s, m: s.append_custom_entry("t", {1, 2}), id="data-not-json"),
        pytest.param(lambda s, m: s.get_branch(5), id="branch-type"),
        pytest.param(lambda s, m: s.get_entry(5), id="get-entry-type"),
        pytest.param(lambda s, m: s.build_context(options=5), id="options-type"),
        pytest.param(lambda s, m: s.storage.get_entries(limit=-1), id="negative-limit"),
        pytest.param(lambda s, m: s.storage.get_entries(limit="2"), id="limit-type"),
        pytest.param(lambda s, m: s.storage.get_entries(type=3), id="type-type"),
        pytest.param(lambda s, m: s.storage.append_entry({"type": "custom"}), id="entry-dict"),
    ],
)
def test_invalid_arguments(backend: Any, msgs: Any, call: Any) -> None:
    session = backend.session()
    m = session.append_message(msgs.user("a"))
    before = (len(session), session.get_leaf_id())
    with pytest.raises(st.SessionError) as exc:
        call(session, m)
    assert code_of(exc) == "invalid_argument"
    assert isinstance(exc.value, ValueError)
    assert (len(session), session.get_leaf_id()) == before
    reopened = backend.reopen_session(session)
    assert len(reopened) == 1
    reopened.close()


def test_invalid_stop_reason_and_constructor_types() -> None:
    with pytest.raises(st.SessionError) as exc:
        st.AssistantMessage([], "p", "m", stop_reason="finished")
    assert code_of(exc) == "invalid_argument"
    with pytest.raises(st.SessionError) as exc:
        st.Session("not a storage")  # type: ignore[arg-type]
    assert code_of(exc) == "invalid_argument"
    with pytest.raises(st.SessionError) as exc:
        st.Session(st.InMemorySessionStorage(), context_build_options={"x": 1})  # type: ignore[arg-type]
    assert code_of(exc) == "invalid_argument"


def test_closed_session(backend: Any, msgs: Any) -> None:
    session = backend.session()
    a = session.append_message(msgs.user("a"))
    session.close()
    session.close()
    for call in (
        lambda: session.append_message(msgs.user("b")),
        lambda: session.get_entry(a),
        lambda: session.get_leaf_id(),
        lambda: session.get_branch(),
        lambda: session.get_tree(),
        lambda: session.build_context(),
        lambda: session.get_session_stats(),
        lambda: session.get_label(a),
        lambda: session.get_session_name(),
        lambda: session.move_to(a),
        lambda: len(session),
    ):
        with pytest.raises(st.SessionError) as exc:
            call()
        assert code_of(exc) == "closed"
    assert "closed" in repr(session)


def test_context_manager_closes(backend: Any, msgs: Any) -> None:
    with backend.session() as session:
        session.append_message(msgs.user("a"))
    with pytest.raises(st.SessionError) as exc:
        session.get_leaf_id()
    assert code_of(exc) == "closed"


# --------------------------------------------------------------------------- values and reprs


def test_reprs_are_helpful(backend: Any, msgs: Any) -> None:
    session = backend.session()
    a = session.append_message(msgs.user("a question"))
    session.append_label(a, "important")
    assert a in repr(session.get_entry(a))
    assert "a question" in repr(session.get_entry(a))
    assert "2 entries" in repr(session.storage)
    assert type(session.storage).__name__ in repr(session)
    (node,) = session.get_tree()
    assert a in repr(node) and "message" in repr(node) and "important" in repr(node)
    ctx_repr = repr(session.build_context())
    assert "SessionContext" in ctx_repr and "1 messages" in ctx_repr
    assert "entry_count=2" in repr(session.get_session_stats())
    assert "gpt" in repr(st.ModelRef("openai", "gpt"))
    if isinstance(session.storage, st.JsonlSessionStorage):
        assert session.storage.path in repr(session.storage)
    session.close()
    assert "closed" in repr(session.storage)


def test_result_types_are_immutable_and_equal_by_value(msgs: Any) -> None:
    values = [
        (st.ModelRef("p", "m"), st.ModelRef("p", "m"), st.ModelRef("p", "n")),
        (
            st.SessionContext((msgs.user("x"),), "low", st.ModelRef("p", "m"), ("a",)),
            st.SessionContext((msgs.user("x"),), "low", st.ModelRef("p", "m"), ("a",)),
            st.SessionContext((msgs.user("y"),), "low", st.ModelRef("p", "m"), ("a",)),
        ),
        (st.SessionStats(1, 2), st.SessionStats(1, 2), st.SessionStats(1, 3)),
        (
            st.LoadIssue(2, 10, "malformed", "bad"),
            st.LoadIssue(2, 10, "malformed", "bad"),
            st.LoadIssue(3, 10, "malformed", "bad"),
        ),
        (
            st.LoadReport((st.LoadIssue(2, 10, "malformed", "bad"),), 0),
            st.LoadReport((st.LoadIssue(2, 10, "malformed", "bad"),), 0),
            st.LoadReport((), 5),
        ),
        (st.ContextState("low"), st.ContextState("low"), st.ContextState("high")),
    ]
    for a, b, c in values:
        assert a == b and hash(a) == hash(b)
        assert a != c
        field = dataclasses.fields(a)[0].name
        with pytest.raises(AttributeError):
            setattr(a, field, getattr(c, field))
        assert type(a).__name__ in repr(a)
    entry = st.CustomEntry(id="e", parent_id=None, timestamp=HERE_TS, custom_type="t")
    node = st.TreeNode(entry, [], "l")
    assert node == st.TreeNode(entry, (), "l")
    assert node != st.TreeNode(entry, (), None)
    with pytest.raises(AttributeError):
        node.children = ()  # type: ignore[misc]


def test_session_results_are_values(backend: Any, msgs: Any) -> None:
    session = backend.session()
    session.append_message(msgs.user("a"))
    session.append_model_change("p", "m")
    one, two = session.build_context(), session.build_context()
    # Unchanged session: the cached (immutable) context itself comes back.
    assert one == two and one is two
    assert session.get_session_stats() == session.get_session_stats()
    assert session.get_tree() == session.get_tree()
    assert session.get_branch() == session.get_branch()
    with pytest.raises(AttributeError):
        one.thinking_level = "high"  # type: ignore[misc]
    # An immutable sequence equal to the tuple of its messages.
    assert isinstance(one.messages, st.MessageSequence)
    assert one.messages == tuple(one.messages) and one.messages[:] == tuple(one.messages)
    with pytest.raises(AttributeError):
        one.messages._len = 0  # type: ignore[attr-defined]
    session.close()


def test_paths_may_be_pathlike_or_str(tmp_path: pathlib.Path, msgs: Any) -> None:
    p = tmp_path / "a.jsonl"
    with st.Session(st.JsonlSessionStorage.create(p)) as s:
        s.append_message(msgs.user("x"))
    with st.Session(st.JsonlSessionStorage.open(str(p))) as s:
        assert len(s) == 1
        assert s.storage.path == str(p)


def test_tree_nodes_pickle_and_copy(backend: Any, msgs: Any) -> None:
    import copy
    import pickle

    session = backend.session()
    a = session.append_message(msgs.user("a"))
    session.append_message(msgs.user("b"))
    session.append_label(a, "L")
    tree = session.get_tree()
    assert pickle.loads(pickle.dumps(tree)) == tree
    assert copy.copy(tree[0]) == tree[0]
    assert copy.deepcopy(tree) == tree
    with pytest.raises(AttributeError):
        del tree[0].label
    assert tree[0].label == "L"
    for value in (session.build_context(), session.get_session_stats()):
        assert pickle.loads(pickle.dumps(value)) == value
    session.close()


def test_wrong_values_are_refused_and_nothing_is_written(backend: Any) -> None:
    with backend.session() as session:
        first = session.append_custom_entry("k", {"ok": 1})
        for call, field in [
            (lambda: session.append_model_change("", "claude"), "provider"),
            (lambda: session.append_model_change("anthropic", ""), "model_id"),
            # Today's json would store {1: "x"} as {"1": "x"}.
            (lambda: session.append_custom_entry("k", {1: "x"}), "CustomEntry.data"),
            (
                lambda: session.append_custom_message_entry("k", "t", details={"a": {2: 0}}),
                "CustomMessageEntry.details",
            ),
            (lambda: session.append_compaction("s", first, -1), "tokens_before"),
        ]:
            with pytest.raises(st.SessionError, match=field) as exc:
                call()
            assert exc.value.code == "invalid_argument"
        assert len(session.storage) == 1 and session.get_leaf_id() == first
