"""Every pi fixture gives pi's own answers (``tests/fixtures/pi/expected.json``).

One test per answer, parametrised over the fixtures that record it. The files are read
where they are, read-only; none is edited (a test checks their bytes are unchanged).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st
from sessiontree.compaction import (
    CompactionSettings,
    estimate_context_tokens,
    estimate_tokens,
    prepare_compaction,
)
from sessiontree.context.build import build_context_entries, build_session_context
from sessiontree.dialects.pi import convert_to_llm, pi_role

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pi"
EXPECTED: dict[str, Any] = json.loads((FIXTURES / "expected.json").read_text())
FILES: dict[str, dict[str, Any]] = EXPECTED["files"]
NAMES = sorted(FILES)
# Files whose ids pi draws at random when it migrates them: only id-free answers count.
RANDOM_IDS = sorted(n for n, e in FILES.items() if e.get("idsAreRandom"))
WITH_IDS = [n for n in NAMES if n not in RANDOM_IDS]
# pi keeps a re-flushed duplicate as a second entry (and lists it twice in its tree);
# sessiontree keeps the first line of an id and reports the later one (FORMAT.md).

# Message entries whose message pi's context shows (the rest are state or bookkeeping).
_MAKES_MESSAGES = (
    st.MessageEntry,
    st.CustomMessageEntry,
    st.BranchSummaryEntry,
    st.CompactionEntry,
)


def storage(name: str) -> st.JsonlSessionStorage:
    return st.JsonlSessionStorage.open(FIXTURES / name, readonly=True)


def answers(key: str, names: list[str] | None = None) -> list[Any]:
    return [pytest.param(n, FILES[n][key], id=n) for n in (names or NAMES) if key in FILES[n]]


def current(key: str, names: list[str] | None = None) -> list[Any]:
    return [
        pytest.param(n, FILES[n]["current"][key], id=n)
        for n in (names or NAMES)
        if key in FILES[n]["current"]
    ]


def context_at(s: st.SessionStorage, leaf: str | None) -> st.SessionContext:
    return build_session_context(s.get_path_to_root(leaf))


def test_fixtures_are_pi_files_and_unchanged() -> None:
    for name in NAMES:
        data = (FIXTURES / name).read_bytes()
        assert len(data) == FILES[name]["bytes"], name
        with storage(name) as s:
            assert s.dialect == "pi"
        assert (
            hashlib.sha256((FIXTURES / name).read_bytes()).digest() == hashlib.sha256(data).digest()
        )


@pytest.mark.parametrize(("name", "want"), answers("entryCount"))
def test_entry_count(name: str, want: int) -> None:
    with storage(name) as s:
        assert len(s) == want
        assert len(s.get_entries()) == want


@pytest.mark.parametrize(("name", "want"), answers("lineCount"))
def test_line_count(name: str, want: int) -> None:
    with storage(name) as s:
        # pi keeps a re-flushed id's every copy as an entry, and so does sessiontree for a
        # pi file (the report still names each copy).
        assert len(s) + 1 == want


@pytest.mark.parametrize(("name", "want"), answers("typeCounts"))
def test_type_counts(name: str, want: dict[str, int]) -> None:
    with storage(name) as s:
        assert dict(Counter(e.type for e in s.get_entries())) == want


@pytest.mark.parametrize(("name", "want"), answers("roleCounts"))
def test_role_counts(name: str, want: dict[str, int]) -> None:
    with storage(name) as s:
        got = Counter(pi_role(e.message) for e in s.get_entries() if isinstance(e, st.MessageEntry))
        assert dict(got) == want


@pytest.mark.parametrize(("name", "want"), answers("leafId"))
def test_leaf_is_the_last_entry(name: str, want: str) -> None:
    with storage(name) as s:
        assert s.get_leaf_id() == want
        assert s.get_entries(reverse=True, limit=1)[0].id == FILES[name]["lastEntryId"]


@pytest.mark.parametrize(("name", "want"), answers("sessionName"))
def test_session_name(name: str, want: str | None) -> None:
    with storage(name) as s:
        assert s.get_session_name() == want


@pytest.mark.parametrize(("name", "want"), current("branchLength"))
def test_branch_length(name: str, want: int) -> None:
    with storage(name) as s:
        assert len(s.get_path_to_root(s.get_leaf_id())) == want


@pytest.mark.parametrize(("name", "want"), current("branchIds", WITH_IDS))
def test_branch_ids(name: str, want: list[str]) -> None:
    with storage(name) as s:
        assert [e.id for e in s.get_path_to_root(s.get_leaf_id())] == want


@pytest.mark.parametrize(("name", "want"), current("contextRoles"))
def test_context_roles(name: str, want: list[str]) -> None:
    with storage(name) as s, st.Session(s) as session:
        ctx = session.build_context()
        assert [pi_role(m) for m in ctx.messages] == want
        assert len(ctx.messages) == FILES[name]["current"]["contextMessageCount"]
        # The session's (incremental) context is a cold build of the whole branch.
        assert ctx == context_at(s, s.get_leaf_id())


@pytest.mark.parametrize(("name", "want"), current("contextSourceEntryIds", WITH_IDS))
def test_context_source_entries(name: str, want: list[str]) -> None:
    with storage(name) as s:
        entries = build_context_entries(s.get_path_to_root(s.get_leaf_id()))
        assert [e.id for e in entries if isinstance(e, _MAKES_MESSAGES)] == want


@pytest.mark.parametrize(("name", "want"), current("llmRoles"))
def test_llm_roles(name: str, want: list[str]) -> None:
    with storage(name) as s:
        llm = convert_to_llm(context_at(s, s.get_leaf_id()).messages)
        assert [pi_role(m) for m in llm] == want
        assert len(llm) == FILES[name]["current"]["llmMessageCount"]


@pytest.mark.parametrize(("name", "want"), current("thinkingLevel"))
def test_thinking_level(name: str, want: str) -> None:
    with storage(name) as s, st.Session(s) as session:
        assert session.build_context().thinking_level == want


@pytest.mark.parametrize(("name", "want"), current("model"))
def test_model(name: str, want: dict[str, str] | None) -> None:
    with storage(name) as s, st.Session(s) as session:
        model = session.build_context().model
        got = None if model is None else {"provider": model.provider, "modelId": model.model_id}
        assert got == want


@pytest.mark.parametrize(("name", "want"), current("estimatedContextTokens"))
def test_estimated_context_tokens(name: str, want: int) -> None:
    with storage(name) as s:
        assert estimate_context_tokens(context_at(s, s.get_leaf_id()).messages) == want


@pytest.mark.parametrize(("name", "want"), answers("estimateTokensByEntry", WITH_IDS))
def test_token_estimates(name: str, want: dict[str, int]) -> None:
    with storage(name) as s:
        got = {}
        for entry_id in want:
            entry = s.get_entry(entry_id)
            assert isinstance(entry, st.MessageEntry)
            got[entry_id] = estimate_tokens(entry.message)
        assert got == want


def _tree_shape(roots: list[st.TreeNode]) -> dict[str, Any]:
    leaves: list[str] = []
    points: list[dict[str, Any]] = []
    stack = list(reversed(roots))
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        # A node listed twice (pi's re-flushed id) is described once, as pi's answer is.
        if id(node) in seen:
            continue
        seen.add(id(node))
        if not node.children:
            leaves.append(node.entry.id)
        if len(node.children) > 1:
            points.append({"id": node.entry.id, "children": [c.entry.id for c in node.children]})
        stack.extend(reversed(node.children))
    return {"rootIds": [r.entry.id for r in roots], "leafIds": leaves, "branchPoints": points}


@pytest.mark.parametrize(("name", "want"), answers("tree", WITH_IDS))
def test_tree_shape(name: str, want: dict[str, Any]) -> None:
    with storage(name) as s, st.Session(s) as session:
        got = _tree_shape(session.get_tree())
        assert got["rootIds"] == want["rootIds"]
        assert sorted(got["leafIds"]) == sorted(want["leafIds"])
        key = lambda p: p["id"]  # noqa: E731
        assert sorted(got["branchPoints"], key=key) == sorted(want["branchPoints"], key=key)


@pytest.mark.parametrize(("name", "want"), answers("labels", WITH_IDS))
def test_labels(name: str, want: dict[str, str]) -> None:
    with storage(name) as s:
        assert s.get_labels() == want
        for entry_id, label in want.items():
            assert s.get_label(entry_id) == label


def _per_leaf() -> list[Any]:
    return [
        pytest.param(name, leaf, want, id=f"{name}-{leaf}")
        for name in WITH_IDS
        for leaf, want in FILES[name].get("perLeaf", {}).items()
    ]


@pytest.mark.parametrize(("name", "leaf", "want"), _per_leaf())
def test_every_leaf(name: str, leaf: str, want: dict[str, Any]) -> None:
    with storage(name) as s:
        assert len(s.get_path_to_root(leaf)) == want["branchLength"]
        ctx = context_at(s, leaf)
        assert [pi_role(m) for m in ctx.messages] == want["contextRoles"]
        assert [pi_role(m) for m in convert_to_llm(ctx.messages)] == want["llmRoles"]
        assert ctx.thinking_level == want["thinkingLevel"]
        model = ctx.model
        got = None if model is None else {"provider": model.provider, "modelId": model.model_id}
        assert got == want["model"]
        assert estimate_context_tokens(ctx.messages) == want["estimatedContextTokens"]


def _compactions() -> list[Any]:
    return [
        pytest.param(name, c, id=f"{name}-{c['entryId']}")
        for name in WITH_IDS
        for c in FILES[name].get("compactions", [])
    ]


@pytest.mark.parametrize(("name", "want"), _compactions())
def test_compaction_cut_points(name: str, want: dict[str, Any]) -> None:
    with storage(name) as s:
        compaction = s.get_entry(want["entryId"])
        assert isinstance(compaction, st.CompactionEntry)
        assert compaction.first_kept_entry_id == want["firstKeptEntryId"]
        assert compaction.tokens_before == want["tokensBefore"]
        # Where pi cut, our planner cuts, from the branch as it was before the compaction.
        settings = CompactionSettings(
            reserve_tokens=want["settings"]["reserveTokens"],
            keep_recent_tokens=want["settings"]["keepRecentTokens"],
        )
        # The file as it was when pi compacted: everything before the compaction's line.
        data = (FIXTURES / name).read_bytes()
        line = json.dumps(want["entryId"])
        cut = data.index(f'"id":{line}'.encode())
        before = data[: data.rindex(b"\n", 0, cut) + 1]
        memory = st.InMemorySessionStorage.from_jsonl(before)
        assert memory.dialect == "pi"
        assert memory.get_leaf_id() == compaction.parent_id
        plan = prepare_compaction(st.Session(memory), settings)
        assert plan is not None
        assert plan.first_kept_entry_id == want["firstKeptEntryId"]
        assert plan.tokens_before == want["tokensBefore"]
        assert plan.is_split_turn == want["isSplitTurn"]


def test_lines_as_the_file_holds_them() -> None:
    lines = (FIXTURES / "a-linear.jsonl").read_bytes().split(b"\n")[1:-1]
    with storage("a-linear.jsonl") as s:
        assert [s.get_line(e.id) for e in s.get_entries()] == lines
        with pytest.raises(st.SessionError) as e:
            s.get_line("nope")
        assert e.value.code == "not_found"
    memory = st.InMemorySessionStorage()
    session = st.Session(memory)
    entry_id = session.append_message(st.UserMessage("hi", timestamp=1))
    line = memory.get_line(entry_id)
    assert st.entry_from_json(line) == memory.get_entry(entry_id)
