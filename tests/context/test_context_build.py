"""Tests for paths through compactions and for context building (``sessiontree.context``)."""

from __future__ import annotations

from typing import Any

import pytest

import sessiontree as st

T = "2026-05-06T07:08:09.010Z"
T_MS = 1_778_051_289_010


def ids(entries: list[st.SessionTreeEntry]) -> list[str]:
    return [e.id for e in entries]


def roles(ctx: st.SessionContext) -> list[str]:
    return [m.role for m in ctx.messages]


def texts(ctx: st.SessionContext) -> list[str]:
    """A short token per message: user/assistant text, or the summary."""
    out = []
    for m in ctx.messages:
        if isinstance(m, st.UserMessage):
            out.append(m.content if isinstance(m.content, str) else "?")
        elif isinstance(m, st.AssistantMessage):
            out.append(m.content[0].text)
        elif isinstance(m, (st.CompactionSummaryMessage, st.BranchSummaryMessage)):
            out.append(f"[{m.summary}]")
        elif isinstance(m, st.CustomMessage):
            out.append(f"<{m.content}>")
        else:
            out.append(m.role)
    return out


# --------------------------------------------------------------------------- FORMAT.md "Paths"


def test_path_without_compaction_is_path_to_root(backend: Any, msgs: Any) -> None:
    s = backend.session()
    a = s.append_message(msgs.user("a"))
    b = s.append_message(msgs.user("b"))
    assert ids(s.get_branch()) == [a, b]
    assert ids(s.storage.get_path_to_root(b)) == [a, b]
    assert s.storage.get_path_to_root(None) == []
    assert s.storage.get_path_to_root_or_compaction(None) == []
    s.close()


def test_retained_tail_starts_at_the_compaction(backend: Any, msgs: Any) -> None:
    s = backend.session()
    a = s.append_message(msgs.user("a"))
    s.append_message(msgs.assistant("b"))
    c = s.append_compaction("S", a, 50, retained_tail=[msgs.user("kept")])
    d = s.append_message(msgs.user("d"))
    assert ids(s.get_branch()) == [c, d]
    assert ids(s.storage.get_path_to_root_or_compaction(d)) == [c, d]
    assert texts(s.build_context()) == ["[S]", "kept", "d"]
    reopened = backend.reopen_session(s)
    assert ids(reopened.get_branch()) == [c, d]
    assert texts(reopened.build_context()) == ["[S]", "kept", "d"]
    reopened.close()


def test_first_kept_ancestor_starts_there(backend: Any, msgs: Any) -> None:
    s = backend.session()
    s.append_message(msgs.user("a"))
    b = s.append_message(msgs.assistant("b"))
    c = s.append_message(msgs.user("c"))
    comp = s.append_compaction("S", b, 50)
    d = s.append_message(msgs.assistant("d"))
    assert ids(s.get_branch()) == [b, c, comp, d]
    # The summary comes first, then the kept entries, then what followed.
    assert texts(s.build_context()) == ["[S]", "b", "c", "d"]
    assert ids(s.get_branch(comp)) == [b, c, comp]
    reopened = backend.reopen_session(s)
    assert texts(reopened.build_context()) == ["[S]", "b", "c", "d"]
    reopened.close()


def test_null_first_kept_starts_at_the_compaction(backend: Any, msgs: Any) -> None:
    s = backend.session()
    s.append_message(msgs.user("a"))
    comp = s.append_compaction("S", None, 5)
    d = s.append_message(msgs.user("d"))
    assert ids(s.get_branch()) == [comp, d]
    assert texts(s.build_context()) == ["[S]", "d"]
    s.close()


def test_first_kept_not_an_ancestor_starts_at_the_compaction(backend: Any, msgs: Any) -> None:
    s = backend.session()
    a = s.append_message(msgs.user("a"))
    elsewhere = s.append_message(msgs.user("other branch"))
    s.move_to(a)
    x = s.append_message(msgs.user("x"))
    comp = s.append_compaction("S", elsewhere, 5)
    d = s.append_message(msgs.user("d"))
    assert ids(s.get_branch()) == [comp, d]
    assert texts(s.build_context()) == ["[S]", "d"]
    assert ids(s.storage.get_path_to_root(d)) == [a, x, comp, d]
    reopened = backend.reopen_session(s)
    assert ids(reopened.get_branch()) == [comp, d]
    reopened.close()


def test_first_kept_may_be_a_leaf_entry_elsewhere(backend: Any, msgs: Any) -> None:
    """A first_kept id that names a non-ancestor (here a leaf entry) cuts at the compaction."""
    s = backend.session()
    a = s.append_message(msgs.user("a"))
    s.move_to(a)
    leaf_entry = s.storage.find_entries("leaf")[-1].id
    comp = s.append_compaction("S", leaf_entry, 5)
    assert ids(s.get_branch()) == [comp]
    s.close()


def test_nearest_of_two_compactions_wins(backend: Any, msgs: Any) -> None:
    s = backend.session()
    a = s.append_message(msgs.user("a"))
    s.append_message(msgs.user("b"))
    s.append_compaction("S1", a, 10)
    d = s.append_message(msgs.user("d"))
    c2 = s.append_compaction("S2", d, 20)
    e = s.append_message(msgs.user("e"))
    assert ids(s.get_branch()) == [d, c2, e]
    ctx = s.build_context()
    assert texts(ctx) == ["[S2]", "d", "e"]
    assert ctx.messages[0].tokens_before == 20
    s.close()


def test_newer_compaction_reaching_past_an_older_one(backend: Any, msgs: Any) -> None:
    """The path goes through the older compaction; it produces no messages."""
    s = backend.session()
    s.append_message(msgs.user("a"))
    b = s.append_message(msgs.user("b"))
    c1 = s.append_compaction("S1", None, 10, retained_tail=[msgs.user("tail1")])
    d = s.append_message(msgs.user("d"))
    c2 = s.append_compaction("S2", b, 20)
    e = s.append_message(msgs.user("e"))
    assert ids(s.get_branch()) == [b, c1, d, c2, e]
    assert texts(s.build_context()) == ["[S2]", "b", "d", "e"]
    # From c1's own point of view its retained tail still applies.
    assert texts(_context_at(s, d)) == ["[S1]", "tail1", "d"]
    s.close()


def _context_at(s: st.Session, leaf: str) -> st.SessionContext:
    return st.build_session_context(s.get_branch(leaf))


def test_compaction_as_first_entry_and_compaction_chain(backend: Any, msgs: Any) -> None:
    s = backend.session()
    c1 = s.append_compaction("S1", None, 1)
    c2 = s.append_compaction("S2", c1, 2)
    assert ids(s.get_branch()) == [c1, c2]
    assert texts(s.build_context()) == ["[S2]"]
    s.close()


def test_state_survives_compaction(backend: Any, msgs: Any) -> None:
    s = backend.session()
    s.append_thinking_level_change("high")
    s.append_model_change("openai", "gpt-4")
    s.append_active_tools_change(["bash", "read"])
    for i in range(3):
        s.append_message(msgs.user(f"u{i}"))
    s.append_compaction("S", None, 100)
    s.append_message(msgs.user("after"))
    ctx = s.build_context()
    assert texts(ctx) == ["[S]", "after"]
    assert ctx.thinking_level == "high"
    assert ctx.model == st.ModelRef("openai", "gpt-4")
    assert ctx.active_tool_names == ("bash", "read")
    # The pure function sees only the branch, so it cannot know that state.
    pure = st.build_session_context(s.get_branch())
    assert (pure.thinking_level, pure.model, pure.active_tool_names) == ("off", None, None)
    reopened = backend.reopen_session(s)
    assert reopened.build_context() == ctx
    reopened.close()


def test_state_after_compaction_overrides(backend: Any, msgs: Any) -> None:
    s = backend.session()
    s.append_thinking_level_change("high")
    s.append_model_change("openai", "gpt-4")
    s.append_compaction("S", None, 100, retained_tail=[])
    s.append_thinking_level_change("minimal")
    s.append_message(msgs.assistant(provider="anthropic", model="claude"))
    ctx = s.build_context()
    assert (ctx.thinking_level, ctx.model) == ("minimal", st.ModelRef("anthropic", "claude"))
    assert roles(ctx) == ["compaction_summary", "assistant"]
    s.close()


def test_state_ignores_other_branches(backend: Any, msgs: Any) -> None:
    s = backend.session()
    a = s.append_message(msgs.user("a"))
    s.append_thinking_level_change("high")
    s.append_active_tools_change(["x"])
    s.move_to(a)
    ctx = s.build_context()
    assert (ctx.thinking_level, ctx.active_tool_names) == ("off", None)
    s.close()


def test_compaction_messages_carry_entry_time(backend: Any, msgs: Any) -> None:
    s = backend.session()
    a = s.append_message(msgs.user("a"))
    c = s.append_compaction("S", None, 3)
    s.move_to(a, {"summary": "B"})
    bs = s.get_leaf_id()
    s.append_custom_message_entry("kind", "text", display=False, details={"k": 1})
    cm = s.get_leaf_id()
    ctx = s.build_context()
    branch_msg = ctx.messages[1]
    assert branch_msg == st.create_branch_summary_message("B", a, s.get_entry(bs).timestamp)
    custom = ctx.messages[2]
    assert custom == st.create_custom_message(
        "kind", "text", False, {"k": 1}, s.get_entry(cm).timestamp
    )
    assert isinstance(custom, st.CustomMessage)
    s.move_to(c)
    (summary,) = s.build_context().messages
    assert summary == st.create_compaction_summary_message("S", 3, s.get_entry(c).timestamp)
    s.close()


# --------------------------------------------------------------------------- pure functions


def entry(cls: type, i: str, parent: str | None = None, **kw: Any) -> Any:
    return cls(id=i, parent_id=parent, timestamp=T, **kw)


def user_entry(i: str, text: str, parent: str | None = None) -> st.MessageEntry:
    return entry(st.MessageEntry, i, parent, message=st.UserMessage(text, timestamp=1))


def test_default_transform_without_compaction_copies() -> None:
    path = [user_entry("a", "a"), user_entry("b", "b", "a")]
    out = st.default_context_entry_transform(path)
    assert out == path and out is not path
    assert st.default_context_entry_transform([]) == []


def test_default_transform_cases() -> None:
    a, b = user_entry("a", "a"), user_entry("b", "b", "a")
    keep_b = entry(
        st.CompactionEntry, "c", "b", summary="S", first_kept_entry_id="b", tokens_before=1
    )
    d = user_entry("d", "d", "c")
    assert ids(st.default_context_entry_transform([a, b, keep_b, d])) == ["c", "b", "d"]
    tail = entry(
        st.CompactionEntry,
        "c",
        "b",
        summary="S",
        first_kept_entry_id="a",
        tokens_before=1,
        retained_tail=[st.UserMessage("t", timestamp=1)],
    )
    assert ids(st.default_context_entry_transform([a, b, tail, d])) == ["c", "d"]
    none = entry(
        st.CompactionEntry, "c", "b", summary="S", first_kept_entry_id=None, tokens_before=1
    )
    assert ids(st.default_context_entry_transform([a, b, none, d])) == ["c", "d"]
    missing = entry(
        st.CompactionEntry, "c", "b", summary="S", first_kept_entry_id="zz", tokens_before=1
    )
    assert ids(st.default_context_entry_transform([a, b, missing, d])) == ["c", "d"]
    older = entry(
        st.CompactionEntry, "o", "a", summary="old", first_kept_entry_id=None, tokens_before=1
    )
    newer = entry(
        st.CompactionEntry, "n", "b", summary="new", first_kept_entry_id="a", tokens_before=1
    )
    b2 = user_entry("b", "b", "o")
    out = st.default_context_entry_transform([a, older, b2, newer, d])
    assert ids(out) == ["n", "a", "b", "d"]


def test_derive_state() -> None:
    path = [
        entry(st.ThinkingLevelChangeEntry, "t", thinking_level="low"),
        entry(st.ModelChangeEntry, "m", "t", provider="p", model_id="m1"),
        entry(st.MessageEntry, "x", "m", message=st.AssistantMessage([], "q", "m2", timestamp=1)),
        entry(st.ActiveToolsChangeEntry, "at", "x", active_tool_names=["a"]),
    ]
    state = st.derive_session_context_state(path)
    assert state == st.ContextState("low", st.ModelRef("q", "m2"), ("a",))
    assert st.derive_session_context_state([]) == st.ContextState("off", None, None)
    assert st.derive_session_context_state(path[:2]).model == st.ModelRef("p", "m1")


def test_entry_to_messages_per_type() -> None:
    msg = st.UserMessage("u", timestamp=1)
    cases: list[tuple[Any, list[Any]]] = [
        (entry(st.MessageEntry, "a", message=msg), [msg]),
        (
            entry(
                st.CustomMessageEntry, "b", custom_type="k", content="c", details=1, display=False
            ),
            [st.CustomMessage("k", "c", False, 1, T_MS)],
        ),
        (
            entry(
                st.CompactionEntry,
                "c",
                summary="S",
                first_kept_entry_id=None,
                tokens_before=7,
                retained_tail=[msg],
            ),
            [st.CompactionSummaryMessage("S", 7, T_MS), msg],
        ),
        (
            entry(st.BranchSummaryEntry, "d", from_id="z", summary="B"),
            [st.BranchSummaryMessage("B", "z", T_MS)],
        ),
        (entry(st.CustomEntry, "e", custom_type="k", data=1), []),
        (entry(st.LabelEntry, "f", target_id="a", label="l"), []),
        (entry(st.SessionInfoEntry, "g", name="n"), []),
        (entry(st.LeafEntry, "h", target_id="a"), []),
        (entry(st.ThinkingLevelChangeEntry, "i", thinking_level="high"), []),
        (entry(st.ModelChangeEntry, "j", provider="p", model_id="m"), []),
        (entry(st.ActiveToolsChangeEntry, "k", active_tool_names=[]), []),
        (
            st.UnknownEntry(
                type="zz",
                id="l",
                parent_id=None,
                timestamp=T,
                data={"type": "zz", "id": "l", "parent_id": None, "timestamp": T},
            ),
            [],
        ),
    ]
    for e, expected in cases:
        assert st.session_entry_to_context_messages(e, 0, [e]) == expected, e.type
        assert st.session_entry_to_context_messages(e, 0, [e], None) == expected, e.type


def test_build_session_context_on_a_path() -> None:
    path = [
        user_entry("a", "a"),
        entry(st.ThinkingLevelChangeEntry, "t", "a", thinking_level="medium"),
        user_entry("b", "b", "t"),
    ]
    ctx = st.build_session_context(path)
    assert texts(ctx) == ["a", "b"]
    assert ctx.thinking_level == "medium"
    assert st.build_session_context([]) == st.SessionContext((), "off", None, None)


def test_unknown_entries_produce_nothing(backend: Any, msgs: Any) -> None:
    s = backend.session()
    s.append_message(msgs.user("a"))
    data = {"type": "zz", "id": "unk1", "parent_id": s.get_leaf_id(), "timestamp": T}
    s.storage.append_entry(
        st.UnknownEntry(type="zz", id="unk1", parent_id=data["parent_id"], timestamp=T, data=data)
    )
    s.append_message(msgs.user("b"))
    assert texts(s.build_context()) == ["a", "b"]
    assert ids(s.get_branch())[1] == "unk1"
    s.close()


# --------------------------------------------------------------------------- transforms, projectors


def test_transform_order(backend: Any, msgs: Any) -> None:
    calls: list[tuple[str, list[str]]] = []

    def recorder(name: str) -> Any:
        def transform(entries: list[st.SessionTreeEntry]) -> list[st.SessionTreeEntry]:
            calls.append((name, ids(entries)))
            return entries[1:] if name == "base1" else list(entries)

        return transform

    base = st.SessionContextBuildOptions([recorder("base1"), recorder("base2")])
    s = backend.session(base)
    s.append_message(msgs.user("a"))
    b = s.append_message(msgs.user("b"))
    comp = s.append_compaction("S", b, 5)
    d = s.append_message(msgs.user("d"))
    ctx = s.build_context(st.SessionContextBuildOptions([recorder("call")]))
    # The default transform ran first (the summary leads), then base, then the call's.
    assert calls == [
        ("base1", [comp, b, d]),
        ("base2", [b, d]),
        ("call", [b, d]),
    ]
    assert texts(ctx) == ["b", "d"]
    calls.clear()
    s.build_context()
    assert [c[0] for c in calls] == ["base1", "base2"]
    s.close()


def test_transforms_may_return_any_iterable(backend: Any, msgs: Any) -> None:
    s = backend.session()
    s.append_message(msgs.user("a"))
    s.append_message(msgs.tool_result("r"))
    s.append_message(msgs.user("b"))
    only_users = st.SessionContextBuildOptions(
        [
            lambda es: (
                e for e in es if not (e.type == "message" and e.message.role == "tool_result")
            ),
            lambda es: tuple(reversed(es)),
        ]
    )
    assert texts(s.build_context(only_users)) == ["b", "a"]
    s.close()


def test_projectors(backend: Any, msgs: Any) -> None:
    seen: list[tuple[str, int, list[str]]] = []

    def project(e: st.CustomEntry, index: int, entries: list[st.SessionTreeEntry]) -> list[Any]:
        assert entries[index] is e
        seen.append((e.id, index, ids(entries)))
        return [st.CustomMessage("proj", f"{e.data}", timestamp=0)]

    s = backend.session(st.SessionContextBuildOptions(entry_projectors={"note": project}))
    first = s.append_custom_entry("note", "first")
    s.append_custom_entry("other", "ignored")
    u = s.append_message(msgs.user("u"))
    third = s.append_custom_entry("note", "third")
    ctx = s.build_context()
    assert texts(ctx) == ["<first>", "u", "<third>"]
    all_ids = ids(s.get_branch())
    assert seen == [(first, 0, all_ids), (third, 3, all_ids)]
    assert u in all_ids
    s.close()


def test_projector_override_wins(backend: Any, msgs: Any) -> None:
    def proj(tag: str) -> Any:
        return lambda e, i, es: [st.CustomMessage(tag, tag, timestamp=0)]

    base = st.SessionContextBuildOptions(
        entry_projectors={"a": proj("base-a"), "b": proj("base-b")}
    )
    s = backend.session(base)
    s.append_custom_entry("a")
    s.append_custom_entry("b")
    over = st.SessionContextBuildOptions(entry_projectors={"b": proj("over-b")})
    assert texts(s.build_context(over)) == ["<base-a>", "<over-b>"]
    assert texts(s.build_context()) == ["<base-a>", "<base-b>"]
    merged = s.merge_context_build_options(over)
    assert merged.entry_projectors["b"] is over.entry_projectors["b"]
    assert merged.entry_projectors["a"] is base.entry_projectors["a"]
    s.close()


def test_merge_context_build_options() -> None:
    def t1(es: list[Any]) -> list[Any]:
        return es

    def t2(es: list[Any]) -> list[Any]:
        return es

    def p1(e: Any, i: int, es: list[Any]) -> list[Any]:
        return []

    def p2(e: Any, i: int, es: list[Any]) -> list[Any]:
        return []

    base = st.SessionContextBuildOptions([t1], {"x": p1, "y": p1})
    over = st.SessionContextBuildOptions([t2, t1], {"y": p2})
    merged = st.merge_context_build_options(base, over)
    assert merged.entry_transforms == (t1, t2, t1)
    assert dict(merged.entry_projectors) == {"x": p1, "y": p2}
    assert st.merge_context_build_options(base, None) == base
    assert st.merge_context_build_options(None, over) == over
    empty = st.merge_context_build_options(None, None)
    assert empty.entry_transforms == () and dict(empty.entry_projectors) == {}
    # Inputs are left alone.
    assert base.entry_transforms == (t1,) and dict(base.entry_projectors) == {"x": p1, "y": p1}
    session = st.Session(st.InMemorySessionStorage(), base)
    assert session.merge_context_build_options(over) == merged
    assert session.merge_context_build_options(None) == base
    session.close()


def test_options_are_immutable_and_validated() -> None:
    projectors: dict[str, Any] = {"x": lambda e, i, es: []}
    opts = st.SessionContextBuildOptions([lambda es: es], projectors)
    projectors["y"] = lambda e, i, es: []
    assert set(opts.entry_projectors) == {"x"}
    with pytest.raises(TypeError):
        opts.entry_projectors["z"] = lambda e, i, es: []  # type: ignore[index]
    with pytest.raises(AttributeError):
        opts.entry_transforms = ()  # type: ignore[misc]
    for bad in (
        lambda: st.SessionContextBuildOptions([5]),  # type: ignore[list-item]
        lambda: st.SessionContextBuildOptions(None, {"x": 5}),  # type: ignore[dict-item]
        lambda: st.SessionContextBuildOptions(None, {1: lambda e, i, es: []}),  # type: ignore[dict-item]
        lambda: st.merge_context_build_options(opts, 5),  # type: ignore[arg-type]
        lambda: st.merge_context_build_options("x", None),  # type: ignore[arg-type]
        lambda: st.build_context_entries([], 5),  # type: ignore[arg-type]
    ):
        with pytest.raises(st.SessionError) as exc:
            bad()
        assert exc.value.code == "invalid_argument"


class Boom(Exception):
    pass


@pytest.mark.parametrize("where", ["base-transform", "call-transform", "projector"])
@pytest.mark.parametrize(
    "make", [Boom, lambda: KeyError("k"), lambda: st.SessionError("corrupt", "mine")]
)
def test_user_callback_exceptions_reach_the_caller_unchanged(
    backend: Any, msgs: Any, where: str, make: Any
) -> None:
    error = make() if not isinstance(make, type) else make("boom")

    def fail(*args: Any) -> Any:
        raise error

    base = st.SessionContextBuildOptions(
        [fail] if where == "base-transform" else None,
        {"c": fail} if where == "projector" else None,
    )
    s = backend.session(base)
    s.append_message(msgs.user("a"))
    s.append_custom_entry("c")
    call = st.SessionContextBuildOptions([fail]) if where == "call-transform" else None
    with pytest.raises(type(error)) as exc:
        s.build_context(call)
    assert exc.value is error
    # The pure functions behave the same.
    opts = s.merge_context_build_options(call)
    with pytest.raises(type(error)) as exc2:
        st.build_session_context(s.get_branch(), opts)
    assert exc2.value is error
    s.close()


def test_projector_not_called_for_entries_cut_by_compaction(backend: Any, msgs: Any) -> None:
    called: list[str] = []

    def proj(e: Any, i: int, es: list[Any]) -> list[Any]:
        called.append(e.id)
        return []

    s = backend.session(st.SessionContextBuildOptions(entry_projectors={"c": proj}))
    s.append_custom_entry("c")
    s.append_compaction("S", None, 1)
    kept = s.append_custom_entry("c")
    s.build_context()
    assert called == [kept]
    s.close()


@pytest.mark.parametrize(
    ("transform", "projector"),
    [
        (lambda es: None, None),
        (lambda es: 5, None),
        (lambda es: "abc", None),
        (lambda es: [*es, "not an entry"], None),
        (lambda es: {e.id: e for e in es}, None),
        (None, lambda e, i, es: None),
        (None, lambda e, i, es: st.UserMessage("not in a list", timestamp=0)),
        (None, lambda e, i, es: ["text"]),
        (None, lambda e, i, es: [e]),
    ],
)
def test_callbacks_returning_the_wrong_shape(
    backend: Any, msgs: Any, transform: Any, projector: Any
) -> None:
    s = backend.session()
    s.append_message(msgs.user("a"))
    s.append_custom_entry("c")
    opts = st.SessionContextBuildOptions(
        [transform] if transform else None, {"c": projector} if projector else None
    )
    with pytest.raises(st.SessionError) as exc:
        s.build_context(opts)
    assert exc.value.code == "invalid_argument"
    assert ("transform" if transform else "projector") in str(exc.value)
    s.close()


def test_callbacks_may_return_tuples_and_generators(backend: Any, msgs: Any) -> None:
    s = backend.session()
    s.append_message(msgs.user("a"))
    s.append_custom_entry("c")
    opts = st.SessionContextBuildOptions(
        [lambda es: tuple(es)],
        {"c": lambda e, i, es: (st.CustomMessage("p", str(x), timestamp=0) for x in range(2))},
    )
    assert texts(s.build_context(opts)) == ["a", "<0>", "<1>"]
    s.close()
