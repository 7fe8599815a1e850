"""Tests for sessiontree.compaction: estimates, cut points, compact, branch summaries."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import pathlib
import random
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import sessiontree as st
from sessiontree.compaction import (
    DEFAULT_BRANCH_SUMMARY_PROMPT,
    DEFAULT_SUMMARY_PROMPT,
    DEFAULT_TURN_PREFIX_PROMPT,
    DEFAULT_UPDATE_SUMMARY_PROMPT,
    IMAGE_TOKEN_ESTIMATE,
    SUMMARY_SYSTEM_PROMPT,
    CompactionPlan,
    CompactionSettings,
    SummaryRequest,
    SummaryResult,
    acompact,
    amove_to_with_summary,
    collect_entries_for_branch_summary,
    compact,
    estimate_context_tokens,
    estimate_tokens,
    move_to_with_summary,
    prepare_compaction,
    serialize_conversation,
    should_compact,
)

TS = 1_767_225_600_000
# pi's own session files (the repository's copy of the golden fixtures).
PI_DIR = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "pi"


# --------------------------------------------------------------------------- builders


def text(tokens: int) -> str:
    """A text that estimates to exactly ``tokens`` tokens."""
    return "x" * (4 * tokens)


def user(tokens: int = 10, ts: int = TS) -> st.UserMessage:
    return st.UserMessage(text(tokens), timestamp=ts)


def assistant(
    tokens: int = 10,
    calls: Sequence[str] = (),
    usage: st.Usage | None = None,
    ts: int = TS,
    stop_reason: str = "stop",
) -> st.AssistantMessage:
    content: list[Any] = [st.TextContent(text(tokens))] if tokens else []
    content += [st.ToolCall(c, "read", {}) for c in calls]
    return st.AssistantMessage(
        content,
        "prov",
        "model",
        usage=usage or st.Usage(),
        stop_reason=("tool_use" if calls else stop_reason),  # type: ignore[arg-type]
        timestamp=ts,
    )


def result(call_id: str, tokens: int = 10) -> st.ToolResultMessage:
    return st.ToolResultMessage(call_id, "read", [st.TextContent(text(tokens))], timestamp=TS)


class Recorder:
    """A fake summariser that records its requests."""

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return f"summary #{len(self.requests)}"


def new_session() -> st.Session:
    return st.Session(st.InMemorySessionStorage())


def add(session: st.Session, *messages: st.AgentMessage) -> list[str]:
    return [session.append_message(m) for m in messages]


def no_orphans(messages: Sequence[st.AgentMessage]) -> bool:
    """Every tool result follows an assistant message that made its call."""
    seen: set[str] = set()
    for m in messages:
        if isinstance(m, st.AssistantMessage):
            seen.update(b.id for b in m.content if isinstance(b, st.ToolCall))
        elif isinstance(m, st.ToolResultMessage) and m.tool_call_id not in seen:
            return False
    return True


def keep(tokens: int) -> CompactionSettings:
    return CompactionSettings(keep_recent_tokens=tokens)


# --------------------------------------------------------------------------- estimates


def test_estimate_tokens_counts_what_the_model_reads() -> None:
    png = st.ImageContent("aGVsbG8=", "image/png")
    assert estimate_tokens(st.UserMessage("abcde", timestamp=0)) == 2  # ceil(5 / 4)
    assert estimate_tokens(st.UserMessage("", timestamp=0)) == 0
    # A user's images are not counted (pi's estimate, checked against pi's own figures
    # in tests/dialects); a tool's are.
    blocks = st.UserMessage([st.TextContent("abcd"), png], timestamp=0)
    assert estimate_tokens(blocks) == 1
    reply = st.AssistantMessage(
        [
            st.ThinkingContent("abcd" * 2, signature="s" * 400),
            st.TextContent("abcd"),
            st.ToolCall("call_1", "read", {"path": "a.py"}),
        ],
        "p",
        "m",
        timestamp=0,
    )
    # thinking 8 + text 4 + "read" 4 + '{"path":"a.py"}' 15 = 31 chars; signatures are free.
    assert estimate_tokens(reply) == 8
    tool = st.ToolResultMessage("c", "read", [st.TextContent("a" * 9), png, png], timestamp=0)
    assert estimate_tokens(tool) == 3 + 2 * IMAGE_TOKEN_ESTIMATE
    assert estimate_tokens(st.CustomMessage("note", "a" * 8, timestamp=0)) == 2
    assert estimate_tokens(st.CompactionSummaryMessage("a" * 12, 5, timestamp=0)) == 3
    assert estimate_tokens(st.BranchSummaryMessage("a" * 4, "x", timestamp=0)) == 1
    unknown = st.UnknownMessage("bash", {"role": "bash", "cmd": "ls"})
    assert estimate_tokens(unknown) == 7  # '{"role":"bash","cmd":"ls"}' is 26 chars
    bash = st.UnknownMessage(
        st.BASH_EXECUTION_ROLE,
        {"role": st.BASH_EXECUTION_ROLE, "command": "ls", "output": "a\nb"},
    )
    assert estimate_tokens(bash) == 2  # pi counts command and output: 5 chars


def test_estimate_tokens_rejects_a_non_message() -> None:
    with pytest.raises(st.SessionError) as exc:
        estimate_tokens("hello")  # type: ignore[arg-type]
    assert exc.value.code == "invalid_argument"


def test_estimate_context_tokens_prefers_the_last_usage() -> None:
    u = st.Usage(input=700, output=100, cache_read=150, cache_write=50, total_tokens=1000)
    msgs = [user(500), assistant(10, usage=u), result("c", 40)]
    assert estimate_context_tokens(msgs) == 1000 + 40
    # Without total_tokens the parts are added up.
    parts = st.Usage(input=700, output=100, cache_read=150, cache_write=50)
    assert estimate_context_tokens([user(500), assistant(10, usage=parts)]) == 1000
    # No usage anywhere: everything is estimated.
    assert estimate_context_tokens([user(500), assistant(10), result("c", 40)]) == 550
    assert estimate_context_tokens([]) == 0


def test_estimate_context_tokens_skips_failed_and_empty_replies() -> None:
    good = assistant(10, usage=st.Usage(total_tokens=2000))
    for bad in (
        assistant(10, usage=st.Usage(total_tokens=9), stop_reason="aborted"),
        assistant(10, usage=st.Usage(total_tokens=9), stop_reason="error"),
        assistant(10),  # all-zero usage: nothing measured
    ):
        # The earlier reply's usage counts, and everything after it is estimated.
        assert estimate_context_tokens([user(5), good, user(20), bad]) == 2000 + 20 + 10


def test_estimate_context_tokens_ignores_usage_from_before_a_compaction() -> None:
    summary = st.CompactionSummaryMessage(text(30), 90_000, timestamp=TS)
    stale = assistant(10, usage=st.Usage(total_tokens=90_000), ts=TS - 1)
    fresh = assistant(10, usage=st.Usage(total_tokens=3_000), ts=TS + 1)
    # The kept reply measured the context before the compaction: estimate instead.
    assert estimate_context_tokens([summary, user(5), stale, user(7)]) == 30 + 5 + 10 + 7
    assert estimate_context_tokens([summary, user(5), stale, user(7), fresh]) == 3_000


# --------------------------------------------------------------------------- settings


def test_settings_defaults_and_immutability() -> None:
    s = CompactionSettings()
    assert (s.enabled, s.reserve_tokens, s.keep_recent_tokens) == (True, 16384, 20000)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.reserve_tokens = 1  # type: ignore[misc]
    assert CompactionSettings(keep_recent_tokens=5) == CompactionSettings(keep_recent_tokens=5)
    assert "keep_recent_tokens=5" in repr(CompactionSettings(keep_recent_tokens=5))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"enabled": 1},
        {"reserve_tokens": -1},
        {"reserve_tokens": 1.5},
        {"reserve_tokens": True},
        {"keep_recent_tokens": "20000"},
        {"keep_recent_tokens": -5},
    ],
)
def test_settings_reject_bad_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(st.SessionError) as exc:
        CompactionSettings(**kwargs)
    assert exc.value.code == "invalid_argument"


def test_should_compact_threshold() -> None:
    s = CompactionSettings(reserve_tokens=1000)
    assert not should_compact(9000, 10_000, s)  # exactly at the limit still fits
    assert should_compact(9001, 10_000, s)
    assert not should_compact(9001, 10_000, CompactionSettings(enabled=False, reserve_tokens=1000))
    assert should_compact(200_000, 128_000)  # default settings


@pytest.mark.parametrize(
    "args",
    [(-1, 100, None), (10, 0, None), ("10", 100, None), (10, 100, {"reserve_tokens": 5})],
)
def test_should_compact_rejects_bad_arguments(args: tuple[Any, Any, Any]) -> None:
    with pytest.raises(st.SessionError) as exc:
        should_compact(*args)
    assert exc.value.code == "invalid_argument"


# --------------------------------------------------------------------------- serialising


def test_serialize_conversation_marks_roles_and_truncates_tool_results() -> None:
    messages: list[st.AgentMessage] = [
        st.UserMessage([st.TextContent("Look"), st.ImageContent("AA==", "image/png")], timestamp=0),
        st.AssistantMessage(
            [
                st.ThinkingContent("hmm"),
                st.TextContent("Reading."),
                st.ToolCall("c1", "read", {"path": "a.py", "lines": [1, 2]}),
            ],
            "p",
            "m",
            timestamp=0,
        ),
        st.ToolResultMessage("c1", "read", [st.TextContent("y" * 50)], timestamp=0),
        st.ToolResultMessage("c1", "read", [st.TextContent("boom")], is_error=True, timestamp=0),
        st.CustomMessage("note", "remember", timestamp=0),
        st.CompactionSummaryMessage("old", 5, timestamp=0),
        st.BranchSummaryMessage("tried X", "e1", timestamp=0),
        st.AssistantMessage([], "p", "m", stop_reason="error", error_message="overloaded"),
    ]
    out = serialize_conversation(messages, max_tool_result_chars=20)
    assert out.split("\n\n") == [
        "[User]: Look\n[image: image/png]",
        "[Assistant thinking]: hmm",
        "[Assistant]: Reading.",
        '[Assistant tool call]: read {"path":"a.py","lines":[1,2]}',
        "[Tool result: read]: " + "y" * 20 + "\n[... 30 more characters truncated]",
        "[Tool error: read]: boom",
        "[Custom: note]: remember",
        "[Earlier summary]: old",
        "[Branch summary]: tried X",
        "[Assistant reply error: overloaded]",
    ]
    assert "y" * 50 in serialize_conversation(messages, max_tool_result_chars=None)
    # User and assistant text is never cut, only tool output.
    assert text(1000) in serialize_conversation([user(1000)], max_tool_result_chars=5)


def test_serialize_conversation_rejects_bad_input() -> None:
    for bad in ({"max_tool_result_chars": -1}, {"max_tool_result_chars": 2.5}):
        with pytest.raises(st.SessionError) as exc:
            serialize_conversation([], **bad)
        assert exc.value.code == "invalid_argument"
    with pytest.raises(st.SessionError):
        serialize_conversation(["hi"])  # type: ignore[list-item]


# --------------------------------------------------------------------------- cut points


def test_nothing_to_compact(caplog: pytest.LogCaptureFixture) -> None:
    session = new_session()
    summarize = Recorder()
    assert prepare_compaction(session) is None  # empty
    add(session, user(100), assistant(100))
    with caplog.at_level(logging.DEBUG, logger="sessiontree.compaction"):
        assert prepare_compaction(session, keep(500)) is None  # too little history
    assert "fits in keep_recent_tokens" in caplog.text
    assert compact(session, summarize, keep(500)) is None
    add(session, user(600))
    assert compact(session, summarize, keep(500)) is not None
    # The branch now ends in a compaction: nothing more to do, however small the budget.
    assert prepare_compaction(session, keep(0)) is None
    assert compact(session, summarize, keep(0)) is None
    assert len(summarize.requests) == 1


def test_plan_does_not_change_the_session() -> None:
    session = new_session()
    add(session, user(100), assistant(100), user(100))
    before = session.storage.to_jsonl()  # type: ignore[attr-defined]
    plan = prepare_compaction(session, keep(150))
    assert plan is not None
    assert session.storage.to_jsonl() == before  # type: ignore[attr-defined]
    assert "turn_prefix_messages=<1>" in repr(plan) and "is_split_turn=True" in repr(plan)


def test_cut_lands_on_a_user_message_without_splitting() -> None:
    session = new_session()
    u1, a1, u2, a2 = add(session, user(100), assistant(100), user(100), assistant(100))
    plan = prepare_compaction(session, keep(150))
    assert plan is not None
    assert plan.first_kept_entry_id == u2
    assert not plan.is_split_turn and plan.turn_prefix_messages == ()
    assert [e.id for e in plan.entries_to_summarize] == [u1, a1]
    assert [e.id for e in plan.kept_entries] == [u2, a2]
    assert plan.tokens_kept == 200 and plan.tokens_before == 400
    assert plan.previous_summary is None and plan.previous_compaction_id is None


def test_tool_call_at_the_boundary_keeps_all_its_results() -> None:
    session = new_session()
    ids = add(
        session,
        user(300),
        assistant(20, calls=["c1", "c2"]),
        result("c1", 100),
        result("c2", 100),
        assistant(50),
    )
    for budget, first_kept in [
        (150, ids[4]),  # reached at the second result: the cut moves on to the reply
        (250, ids[4]),  # reached at the first result: same
        (260, ids[1]),  # reached at the assistant message with the calls: kept with both
    ]:
        plan = prepare_compaction(session, keep(budget))
        assert plan is not None
        assert plan.first_kept_entry_id == first_kept
        kept = list(plan.kept_messages)
        assert not isinstance(kept[0], st.ToolResultMessage)
        assert no_orphans(kept)
        summarised = [*plan.messages_to_summarize, *plan.turn_prefix_messages]
        assert no_orphans(summarised)
    entry = compact(session, Recorder(), keep(260))
    assert entry is not None
    assert no_orphans(session.build_context().messages)


def test_split_turn() -> None:
    session = new_session()
    ids = add(
        session,
        user(100),
        assistant(100),
        user(20),  # the turn that gets split starts here
        assistant(30, calls=["c1"]),
        result("c1", 200),
        assistant(30, calls=["c2"]),
        result("c2", 50),
        assistant(50),
    )
    plan = prepare_compaction(session, keep(120))
    assert plan is not None
    assert plan.first_kept_entry_id == ids[5]
    assert plan.is_split_turn
    assert [e.id for e in plan.entries_to_summarize] == ids[:2]
    assert [e.id for e in plan.turn_prefix_entries] == ids[2:5]
    assert plan.turn_prefix_messages[0] == session.get_entry(ids[2]).message  # type: ignore[union-attr]
    summarize = Recorder()
    entry = compact(session, summarize, plan=plan)
    assert entry is not None and entry.first_kept_entry_id == ids[5]
    request = summarize.requests[0]
    assert request.kind == "compaction" and request.plan is plan
    assert request.turn_prefix == serialize_conversation(plan.turn_prefix_messages)
    assert "<turn-prefix>" in request.prompt and DEFAULT_TURN_PREFIX_PROMPT in request.prompt
    assert DEFAULT_SUMMARY_PROMPT in request.prompt
    assert [e.id for e in request.entries] == ids[:5]
    ctx = session.build_context().messages
    assert isinstance(ctx[0], st.CompactionSummaryMessage) and ctx[0].summary == "summary #1"
    assert (
        ctx[1:]
        == plan.kept_messages
        == tuple(
            session.get_entry(i).message  # type: ignore[union-attr]
            for i in ids[5:]
        )
    )


def test_turn_start_at_the_first_message_gives_a_prefix_and_no_history() -> None:
    session = new_session()
    ids = add(session, user(20), assistant(100, calls=["c"]), result("c", 100), assistant(100))
    plan = prepare_compaction(session, keep(150))
    assert plan is not None and plan.first_kept_entry_id == ids[3]
    assert plan.is_split_turn and plan.messages_to_summarize == ()
    assert len(plan.turn_prefix_messages) == 3
    request = Recorder()
    compact(session, request, plan=plan)
    assert request.requests[0].conversation == ""
    assert "(no messages before the current turn)" in request.requests[0].prompt


def test_budget_spent_inside_trailing_tool_results_cuts_before_them() -> None:
    session = new_session()
    ids = add(
        session,
        user(200),
        assistant(200),
        user(20),
        assistant(10, calls=["c1", "c2", "c3"]),
        result("c1", 300),
        result("c2", 300),
        result("c3", 300),
    )
    plan = prepare_compaction(session, keep(400))
    assert plan is not None  # not "nothing to compact"
    assert plan.first_kept_entry_id == ids[3]  # the message that made the calls
    assert plan.is_split_turn and [e.id for e in plan.turn_prefix_entries] == [ids[2]]
    assert len(plan.kept_messages) == 4 and no_orphans(plan.kept_messages)
    compact(session, Recorder(), plan=plan)
    assert no_orphans(session.build_context().messages)


def test_tool_results_too_big_to_keep_are_summarised_when_all_are_in() -> None:
    session = new_session()
    _, a1, r1 = add(session, user(20), assistant(10, calls=["c1", "c2"]), result("c1", 900))
    # A compaction kept the assistant message and its first result (e.g. made by hand).
    session.append_compaction("earlier", a1, 1000)
    (r2,) = add(session, result("c2", 900))
    plan = prepare_compaction(session, keep(100))
    assert plan is not None
    assert plan.first_kept_entry_id is None and plan.kept_messages == ()
    assert [e.id for e in plan.entries_to_summarize] == [a1, r1, r2]
    assert plan.previous_summary == "earlier"
    entry = compact(session, Recorder(), plan=plan)
    assert entry is not None
    assert session.build_context().messages == (
        st.CompactionSummaryMessage("summary #1", plan.tokens_before, timestamp=entry_ms(entry)),
    )


def entry_ms(entry: st.SessionTreeEntry) -> int:
    return st.create_compaction_summary_message("", 0, entry.timestamp).timestamp


def test_pending_tool_call_is_never_summarised_away() -> None:
    session = new_session()
    calls = ["c1", "c2", "c3"]
    _, a1, _ = add(session, user(20), assistant(10, calls=calls), result("c1", 900))
    session.append_compaction("earlier", a1, 1000)
    add(session, result("c2", 900))
    # c3 has no result yet: summarising a1 would make that result an orphan when it comes.
    assert prepare_compaction(session, keep(100)) is None
    add(session, result("c3", 10))
    plan = prepare_compaction(session, keep(100))
    assert plan is not None and plan.kept_messages == ()


def test_running_tool_calls_stay_in_the_context_while_other_entries_arrive() -> None:
    session = new_session()
    ids = add(session, user(300), assistant(0, calls=["c1"]))
    note = session.append_custom_message_entry("progress", text(50))
    plan = prepare_compaction(session, keep(0))
    assert plan is not None
    assert plan.first_kept_entry_id == ids[1]  # not the note: c1's result is still to come
    assert [e.id for e in plan.kept_entries] == [ids[1], note]
    compact(session, Recorder(), plan=plan)
    add(session, result("c1", 10))
    assert no_orphans(session.build_context().messages)


def test_message_between_a_call_and_its_result_is_not_a_cut_point() -> None:
    session = new_session()
    ids = add(session, user(200), assistant(10, calls=["c1"]))
    ids.append(session.append_custom_message_entry("note", text(10)))
    ids += add(session, result("c1", 200))
    plan = prepare_compaction(session, keep(150))
    assert plan is not None
    assert plan.first_kept_entry_id == ids[1]  # not the note: it would orphan the result
    compact(session, Recorder(), plan=plan)
    assert no_orphans(session.build_context().messages)


def test_message_less_entries_before_the_cut_are_kept_with_it() -> None:
    session = new_session()
    add(session, user(100), assistant(100))
    model = session.append_model_change("prov", "bigger-model")
    label = session.append_label(model, "switch")
    u2, a2 = add(session, user(100), assistant(100))
    plan = prepare_compaction(session, keep(150))
    assert plan is not None
    assert plan.first_kept_entry_id == model
    assert not plan.is_split_turn
    assert [e.id for e in plan.kept_entries] == [model, label, u2, a2]


def test_projected_custom_entries_count_and_keep_their_index() -> None:
    seen: list[int] = []

    def project(entry: st.CustomEntry, index: int, entries: list[Any]) -> list[Any]:
        seen.append(index)
        return [st.CustomMessage("memo", text(entry.data), timestamp=TS)]

    options = st.SessionContextBuildOptions(entry_projectors={"memo": project})
    session = st.Session(st.InMemorySessionStorage(), options)
    add(session, user(10))
    memo = session.append_custom_entry("memo", 300)
    add(session, user(10), assistant(10))
    plan = prepare_compaction(session, keep(15))
    assert plan is not None
    assert [e.id for e in plan.entries_to_summarize][-1] == memo
    assert len(plan.messages_to_summarize) == 2
    assert set(seen) == {1}  # the index build_context gives it


def test_repeated_compaction_resummarises_what_the_previous_one_kept() -> None:
    session = new_session()
    summarize = Recorder()
    appended: list[st.AgentMessage] = []
    entries: list[st.CompactionEntry] = []
    for round_ in range(3):
        for i in range(6):
            label = f"{round_}.{i} "
            m: st.AgentMessage = (
                st.UserMessage(label + text(100), timestamp=TS)
                if i % 2 == 0
                else st.AssistantMessage([st.TextContent(label + text(100))], "p", "m")
            )
            appended.append(m)
            session.append_message(m)
        entry = compact(session, summarize, keep(250))
        assert entry is not None
        entries.append(entry)
        request = summarize.requests[-1]
        if round_ == 0:
            assert request.previous_summary is None
            assert DEFAULT_SUMMARY_PROMPT in request.prompt
        else:
            previous = entries[-2]
            assert request.previous_summary == previous.summary
            assert request.plan is not None
            assert request.plan.previous_compaction_id == previous.id
            assert DEFAULT_UPDATE_SUMMARY_PROMPT in request.prompt
            assert f"<previous-summary>\n{previous.summary}\n" in request.prompt
            # The previous compaction's kept messages come first in this summary.
            kept_before = session.get_entry(previous.first_kept_entry_id)  # type: ignore[arg-type]
            assert request.messages[0] == kept_before.message  # type: ignore[union-attr]
        ctx = session.build_context().messages
        summaries = [m for m in ctx if isinstance(m, st.CompactionSummaryMessage)]
        assert [m.summary for m in summaries] == [entry.summary]
        # Nothing is dropped silently: every message is summarised or still in the context.
        covered = [m for r in summarize.requests for m in (*r.messages, *r.turn_prefix_messages)]
        covered += ctx
        assert all(m in covered for m in appended)


def test_retained_tail_is_stored_and_resummarised() -> None:
    session = new_session()
    ids = add(session, user(100), assistant(100), user(100), assistant(100))
    summarize = Recorder()
    entry = compact(session, summarize, keep(150), retain_tail=True)
    assert entry is not None
    plan = summarize.requests[0].plan
    assert plan is not None and plan.retain_tail
    assert entry.retained_tail == plan.kept_messages
    assert entry.first_kept_entry_id == ids[2]
    assert session.get_branch()[0].id == entry.id  # the path starts at the compaction
    ctx = session.build_context().messages
    assert ctx[1:] == plan.kept_messages and len(ctx) == 3
    # The next compaction summarises the tail; with retain_tail it may cut inside it.
    add(session, user(30))
    second = prepare_compaction(session, keep(120), retain_tail=True)
    assert second is not None
    assert second.is_split_turn  # cut at the tail's assistant message
    assert (*second.messages_to_summarize, *second.turn_prefix_messages) == plan.kept_messages[:1]
    assert second.first_kept_entry_id is None  # the first kept message lives in the tail
    assert second.kept_messages == (*plan.kept_messages[1:], user(30))
    # Without retain_tail the cut must fall on a branch entry, after the tail.
    third = prepare_compaction(session, keep(120))
    assert third is not None
    assert third.messages_to_summarize == plan.kept_messages
    compact(session, summarize, keep(120), retain_tail=True, plan=second)
    assert session.build_context().messages[1:] == second.kept_messages


def test_compaction_entry_fields_and_summary_result() -> None:
    session = new_session()
    add(session, user(100), assistant(100), user(100))
    usage = st.Usage(input=400, output=50, total_tokens=450)

    def summarize(request: SummaryRequest) -> SummaryResult:
        assert request.system_prompt == SUMMARY_SYSTEM_PROMPT
        assert request.conversation == serialize_conversation(request.messages)
        assert "Focus on the parser." in request.prompt
        assert "SummaryRequest(kind='compaction'" in repr(request)
        return SummaryResult("the summary", details={"files": ["a.py"]}, usage=usage)

    entry = compact(session, summarize, keep(150), instructions="Focus on the parser.")
    assert entry is not None
    assert session.get_leaf_id() == entry.id and session.get_entry(entry.id) == entry
    assert (entry.summary, entry.details, entry.usage) == (
        "the summary",
        {"files": ["a.py"]},
        usage,
    )
    assert entry.tokens_before == 300 and entry.retained_tail is None and not entry.from_hook


def test_summary_result_validation() -> None:
    with pytest.raises(st.SessionError):
        SummaryResult(5)  # type: ignore[arg-type]
    with pytest.raises(st.SessionError):
        SummaryResult("s", usage={"input": 1})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [{"instructions": 5}, {"retain_tail": "yes"}, {"plan": "plan"}, {"settings": {"a": 1}}],
)
def test_compact_rejects_bad_arguments(kwargs: dict[str, Any]) -> None:
    session = new_session()
    add(session, user(100), assistant(100), user(100))
    with pytest.raises(st.SessionError) as exc:
        compact(session, Recorder(), **kwargs)
    assert exc.value.code == "invalid_argument"
    with pytest.raises(st.SessionError):
        compact(session, "not callable")  # type: ignore[arg-type]
    with pytest.raises(st.SessionError):
        compact("session", Recorder())  # type: ignore[arg-type]


def test_plan_must_match_the_session() -> None:
    session = new_session()
    add(session, user(100), assistant(100), user(100))
    plan = prepare_compaction(session, keep(150))
    assert plan is not None
    with pytest.raises(st.SessionError) as exc:
        compact(session, Recorder(), retain_tail=True, plan=plan)
    assert exc.value.code == "invalid_argument"
    add(session, assistant(5))
    with pytest.raises(st.SessionError) as exc:
        compact(session, Recorder(), plan=plan)
    assert exc.value.code == "modified_externally"


# --------------------------------------------------------------------------- failures


class SummaryFailed(Exception):
    pass


def test_summariser_errors_reach_the_caller_and_leave_the_session_unchanged(
    backend: Any,
) -> None:
    session = backend.session()
    add(session, user(100), assistant(100), user(100))
    count = len(session)
    size = os.path.getsize(session.storage.path) if backend.kind == "jsonl" else None
    leaf = session.get_leaf_id()
    boom = SummaryFailed("rate limited")

    def failing(request: SummaryRequest) -> str:
        raise boom

    with pytest.raises(SummaryFailed) as exc:
        compact(session, failing, keep(150))
    assert exc.value is boom
    # A result that is not a summary, or whose details are not JSON, is refused too.
    for bad_result in (None, 42, SummaryResult("s", details={1j})):
        with pytest.raises(st.SessionError) as err:
            compact(session, lambda r, v=bad_result: v, keep(150))  # type: ignore[misc]
        assert err.value.code == "invalid_argument"
    assert len(session) == count and session.get_leaf_id() == leaf
    if size is not None:
        assert os.path.getsize(session.storage.path) == size
    reopened = backend.reopen_session(session)
    assert len(reopened) == count and reopened.get_leaf_id() == leaf
    reopened.close()


def test_leaf_moving_during_the_summary_appends_nothing() -> None:
    session = new_session()
    add(session, user(100), assistant(100), user(100))

    def agent_appends(request: SummaryRequest) -> str:
        session.append_message(assistant(5))
        return "late"

    count = len(session) + 1  # the message appended meanwhile
    with pytest.raises(st.SessionError) as exc:
        compact(session, agent_appends, keep(150))
    assert exc.value.code == "modified_externally"
    assert len(session) == count
    assert not session.storage.find_entries("compaction")


# --------------------------------------------------------------------------- async


def test_acompact_awaits_an_async_summariser() -> None:
    session = new_session()
    add(session, user(100), assistant(100), user(100), assistant(100))

    async def summarize(request: SummaryRequest) -> str:
        await asyncio.sleep(0)
        return f"async {len(request.messages)}"

    entry = asyncio.run(acompact(session, summarize, keep(150)))
    assert entry is not None and entry.summary == "async 2"
    assert session.get_leaf_id() == entry.id
    # Nothing left to compact: the summariser is not called.
    assert asyncio.run(acompact(session, summarize, keep(150))) is None


def test_acompact_accepts_a_plain_summariser_and_propagates_errors() -> None:
    session = new_session()
    add(session, user(100), assistant(100), user(100))
    count = len(session)

    async def failing(request: SummaryRequest) -> str:
        raise SummaryFailed("down")

    with pytest.raises(SummaryFailed):
        asyncio.run(acompact(session, failing, keep(150)))
    assert len(session) == count
    entry = asyncio.run(acompact(session, lambda r: "sync", keep(150), retain_tail=True))
    assert entry is not None and entry.summary == "sync" and entry.retained_tail is not None


def test_acompact_refuses_a_leaf_moved_while_awaiting() -> None:
    session = new_session()
    add(session, user(100), assistant(100), user(100))

    async def slow(request: SummaryRequest) -> str:
        await asyncio.sleep(0)
        return "late"

    async def agent() -> None:
        task = asyncio.ensure_future(acompact(session, slow, keep(150)))
        await asyncio.sleep(0)
        session.append_message(user(5))  # the agent goes on meanwhile
        with pytest.raises(st.SessionError) as exc:
            await task
        assert exc.value.code == "modified_externally"

    asyncio.run(agent())
    assert not session.storage.find_entries("compaction")


# --------------------------------------------------------------------------- branch summaries


def branching_session() -> tuple[st.Session, dict[str, str]]:
    """root u1 -> a1 -> u2 -> a2 (-> c1 -> r1) and a1 -> u3 -> a3."""
    session = new_session()
    ids: dict[str, str] = {}
    ids["u1"], ids["a1"], ids["u2"], ids["a2"] = add(
        session, user(5), assistant(5), user(6), assistant(6, calls=["c1"])
    )
    (ids["r1"],) = add(session, result("c1", 6))
    session.move_to(ids["a1"])
    ids["u3"], ids["a3"] = add(session, user(7), assistant(7))
    return session, ids


def test_collect_entries_for_branch_summary() -> None:
    session, ids = branching_session()

    def collect(a: str | None, b: str | None) -> list[str]:
        return [e.id for e in collect_entries_for_branch_summary(session, a, b)]

    assert collect(ids["a3"], ids["r1"]) == [ids["u3"], ids["a3"]]  # to a sibling branch
    assert collect(ids["r1"], ids["a1"]) == [ids["u2"], ids["a2"], ids["r1"]]  # to an ancestor
    assert collect(ids["r1"], ids["u2"]) == [ids["a2"], ids["r1"]]
    assert collect(ids["u2"], ids["r1"]) == []  # to a descendant: nothing left behind
    assert collect(ids["r1"], ids["r1"]) == []
    assert collect(ids["a3"], None) == [ids["u1"], ids["a1"], ids["u3"], ids["a3"]]
    assert collect(None, ids["a1"]) == []
    with pytest.raises(st.SessionError) as exc:
        collect(ids["a3"], "nope")
    assert exc.value.code == "not_found"
    with pytest.raises(st.SessionError) as exc:
        collect_entries_for_branch_summary(session, 5, None)  # type: ignore[arg-type]
    assert exc.value.code == "invalid_argument"


def test_move_to_with_summary(backend: Any) -> None:
    session = backend.session()
    _, a1, u2, a2 = add(session, user(5), assistant(5), user(6), assistant(6))
    summarize = Recorder()
    summary_id = move_to_with_summary(session, a1, summarize, instructions="be terse")
    assert summary_id is not None and session.get_leaf_id() == summary_id
    entry = session.get_entry(summary_id)
    assert isinstance(entry, st.BranchSummaryEntry)
    assert (entry.parent_id, entry.from_id, entry.summary) == (a1, a1, "summary #1")
    request = summarize.requests[0]
    assert request.kind == "branch_summary" and request.plan is None
    assert [e.id for e in request.entries] == [u2, a2]
    assert request.messages == (user(6), assistant(6))
    assert DEFAULT_BRANCH_SUMMARY_PROMPT in request.prompt and "be terse" in request.prompt
    ctx = session.build_context().messages
    assert ctx[:2] == (user(5), assistant(5))
    assert isinstance(ctx[2], st.BranchSummaryMessage) and ctx[2].summary == "summary #1"
    reopened = backend.reopen_session(session)
    assert reopened.get_leaf_id() == summary_id
    assert reopened.build_context().messages == ctx
    reopened.close()


def test_move_to_with_summary_without_anything_to_summarise() -> None:
    session, ids = branching_session()
    summarize = Recorder()
    session.move_to(ids["u2"])
    assert move_to_with_summary(session, ids["r1"], summarize) is None  # forward: plain move
    assert session.get_leaf_id() == ids["r1"] and summarize.requests == []


def test_move_to_with_summary_failures_leave_the_leaf() -> None:
    session, ids = branching_session()
    count, leaf = len(session), session.get_leaf_id()
    summarize = Recorder()
    with pytest.raises(st.SessionError) as exc:
        move_to_with_summary(session, "missing", summarize)
    assert exc.value.code == "not_found" and summarize.requests == []

    def failing(request: SummaryRequest) -> str:
        raise SummaryFailed("no")

    with pytest.raises(SummaryFailed):
        move_to_with_summary(session, ids["u2"], failing)
    for bad in ({"max_tokens": 0}, {"instructions": 3}):
        with pytest.raises(st.SessionError) as exc:
            move_to_with_summary(session, ids["u2"], summarize, **bad)
        assert exc.value.code == "invalid_argument"
    with pytest.raises(st.SessionError) as exc:
        move_to_with_summary(session, None, summarize)  # type: ignore[arg-type]
    assert exc.value.code == "invalid_argument"
    assert (len(session), session.get_leaf_id()) == (count, leaf)


def test_branch_summary_sees_a_compaction_on_the_left_branch_and_a_budget() -> None:
    session = new_session()
    (root,) = add(session, user(5))
    add(session, user(100), assistant(100), user(100), assistant(100))
    compact(session, Recorder(), keep(150))
    add(session, user(50))
    summarize = Recorder()
    move_to_with_summary(session, root, summarize)
    messages = summarize.requests[0].messages
    assert isinstance(messages[0], st.CompactionSummaryMessage)  # stands for what it replaced
    assert messages[1:] == (user(100), assistant(100), user(50))
    # A budget keeps the newest messages that fit.
    session.move_to(None)
    add(session, user(5))
    add(session, user(100), user(30), user(20))
    budgeted = Recorder()
    move_to_with_summary(session, session.get_branch()[0].id, budgeted, max_tokens=60)
    assert budgeted.requests[0].messages == (user(30), user(20))


def test_amove_to_with_summary() -> None:
    session, ids = branching_session()

    async def summarize(request: SummaryRequest) -> SummaryResult:
        await asyncio.sleep(0)
        return SummaryResult("left it", details={"n": len(request.messages)})

    summary_id = asyncio.run(amove_to_with_summary(session, ids["a1"], summarize))
    entry = session.get_entry(summary_id)  # type: ignore[arg-type]
    assert isinstance(entry, st.BranchSummaryEntry)
    assert entry.summary == "left it" and entry.details == {"n": 2}
    assert asyncio.run(amove_to_with_summary(session, entry.id, summarize)) is None


# --------------------------------------------------------------------------- properties


# Messages are drawn more often than the other operations so that histories outgrow the
# keep budgets and most examples compact, several times.
_MESSAGE_OPS = hs.one_of(
    hs.tuples(hs.just("user"), hs.integers(1, 150)),
    hs.tuples(hs.just("assistant"), hs.integers(0, 3), hs.integers(0, 150)),
    hs.tuples(hs.just("results"), hs.integers(1, 3), hs.integers(1, 300)),
)
OPS = hs.lists(
    hs.one_of(
        _MESSAGE_OPS,
        _MESSAGE_OPS,
        hs.tuples(hs.just("compact"), hs.integers(0, 300), hs.booleans()),
        hs.tuples(hs.just("move"), hs.integers(0, 10**6), hs.booleans()),
        hs.tuples(hs.just("note"), hs.integers(1, 50)),
        hs.tuples(hs.just("model"), hs.just(0)),
    ),
    min_size=5,
    max_size=60,
)


def pending_calls(session: st.Session) -> list[str]:
    """The calls of the last assistant message on the path that have no result yet."""
    path = session.storage.get_path_to_root(session.get_leaf_id())
    answered: set[str] = set()
    for entry in reversed(path):
        if not isinstance(entry, st.MessageEntry):
            continue
        m = entry.message
        if isinstance(m, st.ToolResultMessage):
            answered.add(m.tool_call_id)
        elif isinstance(m, st.AssistantMessage):
            calls = [b.id for b in m.content if isinstance(b, st.ToolCall)]
            return [c for c in calls if c not in answered]
        else:
            return []
    return []


@settings(max_examples=max(100, settings.default.max_examples))
@given(OPS)
def test_no_context_ever_holds_an_orphan_tool_result(ops: list[tuple[Any, ...]]) -> None:
    session = new_session()
    counter = 0
    for op in ops:
        kind = op[0]
        if kind == "user":
            add(session, user(op[1]))
        elif kind == "assistant":
            calls = [f"call{counter + i}" for i in range(op[1])]
            counter += op[1]
            add(session, assistant(op[2], calls=calls))
        elif kind == "results":
            for call in pending_calls(session)[: op[1]]:
                add(session, result(call, op[2]))
        elif kind == "compact":
            entry = compact(session, Recorder(), keep(op[1]), retain_tail=op[2])
            if entry is not None:
                ctx = session.build_context().messages
                assert isinstance(ctx[0], st.CompactionSummaryMessage)
        elif kind == "move":
            targets = session.storage.find_entries("message")
            if targets:
                target = targets[op[1] % len(targets)].id
                if op[2]:
                    move_to_with_summary(session, target, Recorder())
                else:
                    session.move_to(target)
        elif kind == "note":
            session.append_custom_message_entry("note", text(op[1]))
        else:
            session.append_model_change("prov", "other")
        assert no_orphans(session.build_context().messages), op


# --------------------------------------------------------------------------- end to end


class FakeAgent:
    """A deterministic agent: user turns, replies with tool calls, tool results."""

    def __init__(self, session: st.Session, seed: int = 7) -> None:
        self.session = session
        self.rng = random.Random(seed)
        self.calls = 0

    def llm(self, context: Sequence[st.AgentMessage]) -> st.AssistantMessage:
        """A reply whose usage is what the request would have cost."""
        n_calls = self.rng.choice([0, 0, 1, 2, 3])
        calls = [f"call{self.calls + i}" for i in range(n_calls)]
        self.calls += n_calls
        # A real clock, so the usage counts as fresh after a compaction.
        reply = assistant(self.rng.randint(5, 150), calls=calls, ts=st.UserMessage("").timestamp)
        used = estimate_context_tokens(context) + estimate_tokens(reply)
        return dataclasses.replace(reply, usage=st.Usage(total_tokens=used))


def run_agent(
    session: st.Session, turns: int, window: int, settings: CompactionSettings
) -> tuple[int, int]:
    """Runs the loop; returns (compactions, the largest context sent to the model)."""
    agent = FakeAgent(session)
    summarize = Recorder()
    compactions = largest = 0
    for _ in range(turns):
        add(session, user(agent.rng.randint(5, 150)))
        while True:
            context = session.build_context().messages
            if should_compact(estimate_context_tokens(context), window, settings):
                entry = compact(session, summarize, settings, retain_tail=compactions % 3 == 2)
                assert entry is not None
                compactions += 1
                context = session.build_context().messages
            tokens = estimate_context_tokens(context)
            assert tokens <= window - settings.reserve_tokens
            assert no_orphans(context)
            largest = max(largest, tokens)
            reply = agent.llm(context)
            add(session, reply)
            calls = [b.id for b in reply.content if isinstance(b, st.ToolCall)]
            if not calls:
                break
            for call in calls:
                add(session, result(call, agent.rng.randint(1, 200)))
    return compactions, largest


def test_agent_loop_stays_under_the_window(backend: Any) -> None:
    window = 3000
    settings = CompactionSettings(reserve_tokens=600, keep_recent_tokens=1000)
    session = backend.session()
    compactions, largest = run_agent(session, 120, window, settings)
    assert compactions >= 5
    assert largest <= window - settings.reserve_tokens
    assert len(session.storage.find_entries("compaction")) == compactions
    ctx = session.build_context()
    reopened = backend.reopen_session(session)
    assert reopened.build_context() == ctx
    # Compaction goes on after reopening.
    more, _ = run_agent(reopened, 30, window, settings)
    assert more >= 1
    reopened.close()


# --------------------------------------------------------------------------- pi golden file

_PI_KEYS = {
    "parentId": "parent_id",
    "thinkingSignature": "signature",
    "toolCallId": "tool_call_id",
    "toolName": "tool_name",
    "isError": "is_error",
    "stopReason": "stop_reason",
    "errorMessage": "error_message",
    "cacheRead": "cache_read",
    "cacheWrite": "cache_write",
    "totalTokens": "total_tokens",
    "modelId": "model_id",
    "thinkingLevel": "thinking_level",
    "firstKeptEntryId": "first_kept_entry_id",
    "tokensBefore": "tokens_before",
    "fromHook": "from_hook",
    "mimeType": "mime_type",
}
_PI_VALUES = {"toolCall": "tool_call", "toolResult": "tool_result", "toolUse": "tool_use"}


def _from_pi(value: Any, key: str | None = None) -> Any:
    """pi's camelCase dialect to our format (enough for c-compaction.jsonl)."""
    if isinstance(value, dict):
        if key == "details":
            return value
        return {_PI_KEYS.get(k, k): _from_pi(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_pi(v) for v in value]
    if isinstance(value, str) and key in ("type", "role", "stopReason"):
        return _PI_VALUES.get(value, value)
    return value


def test_matches_pi_prepare_compaction_on_its_own_file() -> None:
    lines = []
    for line in (PI_DIR / "c-compaction.jsonl").read_text().splitlines():
        obj = _from_pi(json.loads(line))
        if obj["type"] == "session":
            obj.update(parent_session=None, metadata=None)
        lines.append(json.dumps(obj))
    storage = st.InMemorySessionStorage.from_jsonl(("\n".join(lines) + "\n").encode(), strict=True)
    session = st.Session(storage)
    expected = json.loads((PI_DIR / "expected.json").read_text())["files"]["c-compaction.jsonl"]
    for entry_id, tokens in expected["estimateTokensByEntry"].items():
        entry = session.get_entry(entry_id)
        assert isinstance(entry, st.MessageEntry)
        assert estimate_tokens(entry.message) == tokens, entry_id
    for pi in expected["compactions"]:
        # Replay pi's decision from the leaf it compacted at.
        session.move_to(session.get_entry(pi["entryId"]).parent_id)  # type: ignore[union-attr]
        plan = prepare_compaction(
            session, CompactionSettings(keep_recent_tokens=pi["settings"]["keepRecentTokens"])
        )
        assert isinstance(plan, CompactionPlan)
        assert plan.first_kept_entry_id == pi["firstKeptEntryId"]
        assert plan.tokens_before == pi["tokensBefore"]
        assert plan.is_split_turn == pi["isSplitTurn"]
        assert len(plan.messages_to_summarize) == pi["messagesToSummarize"]
        assert len(plan.turn_prefix_messages) == pi["turnPrefixMessages"]
        assert (plan.previous_summary is not None) == pi["previousSummary"]
    session.move_to(expected["leafId"])
    context = session.build_context().messages
    assert len(context) == expected["current"]["contextMessageCount"]
    assert estimate_context_tokens(context) == expected["current"]["estimatedContextTokens"]
