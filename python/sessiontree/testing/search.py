"""The search contracts every :class:`~sessiontree.SessionRepo` keeps (docs/search.md):
one planted corpus, the same answers from every repository.

They are part of :data:`~sessiontree.testing.REPO_CONTRACTS` (names ``search_*``), so
:func:`~sessiontree.testing.check_repo` runs them; :func:`plant_search_corpus` and
:func:`search_answers` let a test compare two repositories' full answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model.entries import MessageEntry
from ..model.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ..session import Session
from ._harness import Skip, expect, expect_equal, expect_error
from .repo import RepoHarness, _contract

__all__ = ["SEARCH_QUERIES", "plant_search_corpus", "search_answers"]

_A, _B, _C = "search-a", "search-b", "search-c"
_HERE, _THERE = "/conformance/project", "/conformance/other"
_OCT = "2026-10-01T10:0{}:00.000Z"
_NOV = "2026-11-15T12:0{}:00.000Z"
_MS = 1_767_225_600_000


def _put(session: Session, message: AgentMessage, ts: str) -> str:
    """Appends ``message`` with the entry timestamp ``ts`` (what time filters read)."""
    storage = session.storage
    eid = storage.create_entry_id()
    storage.append_entry(
        MessageEntry(message, id=eid, parent_id=storage.get_leaf_id(), timestamp=ts)
    )
    return eid


def plant_search_corpus(create: Callable[..., Session]) -> dict[str, str]:
    """Writes the search corpus with ``create(cwd=..., name=..., session_id=...)`` (a
    repository's ``create``) and closes its sessions.

    Returns:
        Names of the planted entries → their ids (``"a.user"``, ``"a.side"``, ...).
    """
    ids: dict[str, str] = {}
    with create(cwd=_HERE, name="Zyxwv planning", session_id=_A) as a:
        ids["a.user"] = _put(
            a,
            UserMessage('What did we decide about the "retry backoff" for Qwertyuiop?', _MS),
            _OCT.format(0),
        )
        ids["a.assistant"] = _put(
            a,
            AssistantMessage(
                [
                    ThinkingContent("consider snake_case_names and paths/like/this"),
                    TextContent(
                        "We decided on exponential backoff; the qwertyuiop retry uses jitter."
                    ),
                    ToolCall(
                        "call-1",
                        "grep_files",
                        {"pattern": "connection refused", "path": "src/net.py", "n": 42},
                    ),
                ],
                "openai",
                "gpt-5",
                timestamp=_MS,
            ),
            _OCT.format(1),
        )
        ids["a.tool"] = _put(
            a,
            ToolResultMessage(
                "call-1",
                "grep_files",
                [TextContent("Error: connection refused at 127.0.0.1")],
                timestamp=_MS,
            ),
            _OCT.format(2),
        )
        ids["a.custom"] = _put(
            a,
            CustomMessage("note", "Café déjà vu — 東京タワー 🎉 naïve", timestamp=_MS),
            _OCT.format(3),
        )
        ids["a.label"] = a.append_label(ids["a.user"], "decision-point")
        ids["a.compaction"] = a.append_compaction(
            "Summary: the team agreed to ship the mnbvcxz feature", ids["a.tool"], 1234
        )
        # Back to the first question, on a new branch: the answer is now off the branch.
        a.move_to(ids["a.user"])
        ids["a.side"] = _put(a, UserMessage("a side branch with sidetoken", _MS), _OCT.format(4))
        ids["a.name"] = next(e.id for e in a.storage.get_entries("session_info"))
    with create(cwd=_THERE, session_id=_B) as b:
        ids["b.user"] = _put(
            b,
            UserMessage(
                [
                    TextContent('retry later: he said "quoted text" then\nnext line qwertyuiop'),
                    ImageContent("aW1hZ2V0b2tlbg==", "image/png"),
                ],
                _MS,
            ),
            _NOV.format(0),
        )
    with create(cwd=_HERE, session_id=_C) as c:
        ids["c.user"] = _put(c, UserMessage("deletedtoken lives here", _MS), _NOV.format(1))
    return ids


SEARCH_QUERIES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("qwertyuiop", {}),
    ("QWERTYUIOP", {"order": "newest"}),
    ('"retry backoff"', {}),
    ('"backoff retry"', {}),
    ("qwertyuiop -jitter", {}),
    ("mnbv*", {}),
    ("snake", {}),
    ("case_names", {}),
    ("like/this", {}),
    ("grep_files", {}),
    ("42", {}),
    ("src/net.py", {}),
    ('"quoted text"', {}),
    ('"then next line"', {}),
    ("café DÉJÀ naïve", {}),
    ("東京", {}),
    ("🎉", {}),
    ("decision", {}),
    ("zyxwv", {}),
    ("qwertyuiop", {"roles": ["user"]}),
    ("decision OR mnbvcxz", {}),
    ("retry", {"types": ["message"], "roles": ["assistant", "user"]}),
    ("qwertyuiop", {"since": "2026-11-01"}),
    ("qwertyuiop", {"until": "2026-11-01"}),
    ("qwertyuiop", {"cwd": _THERE}),
    ("qwertyuiop", {"limit": 1}),
    ("qwertyuiop", {"branch_only": True}),
    ("connection refused", {}),
    ("pattern", {}),
    ("parent_id", {}),
    ("aw1hz2v0b2tlbg", {}),
    (".*[(a-z]+ retry", {}),
)
"""The queries :func:`search_answers` asks (query, keyword arguments)."""


def search_answers(repo: Any) -> list[list[tuple[Any, ...]]]:
    """Every :data:`SEARCH_QUERIES` answer of ``repo`` as comparable rows (session,
    type, role, snippet, marks, score, on_branch; not the entry ids and times, which
    differ between two plantings): two repositories holding the planted corpus must give
    equal lists."""
    out = []
    for query, kwargs in SEARCH_QUERIES:
        out.append(
            [
                (
                    h.session_id,
                    h.entry_type,
                    h.role,
                    h.snippet,
                    h.marks,
                    h.score,
                    h.on_branch,
                )
                for h in repo.search(query, **kwargs)
            ]
        )
    return out


def _found(repo: Any, query: str, **kwargs: Any) -> list[tuple[str, str]]:
    return [(h.session_id, h.entry_id) for h in repo.search(query, **kwargs)]


def _planted(h: RepoHarness) -> dict[str, str]:
    try:
        return plant_search_corpus(h.create)
    except Exception as exc:
        raise Skip(f"the corpus could not be written ({type(exc).__name__}: {exc})") from exc


@_contract(
    "search_words",
    "search() finds whole words case-insensitively in the decoded text of messages, "
    "thinking, tool calls and results, custom messages, summaries, labels and names; "
    "phrases, exclusions, prefixes and a word's parts work; keys, ids and image data are "
    "never matched",
)
def _search_words(h: RepoHarness) -> None:
    ids = _planted(h)
    repo = h.repo

    def want(*names: str) -> set[tuple[str, str]]:
        return {({"a": _A, "b": _B, "c": _C}[n[0]], ids[n]) for n in names}

    def got(query: str, **kwargs: Any) -> set[tuple[str, str]]:
        return set(_found(repo, query, **kwargs))

    expect_equal(got("qwertyuiop"), want("a.user", "a.assistant", "b.user"), "'qwertyuiop'")
    expect_equal(got("QwErTyUiOp"), got("qwertyuiop"), "the same word in another case")
    expect_equal(got('"retry backoff"'), want("a.user"), "a phrase")
    expect_equal(got('"backoff retry"'), set(), "a phrase in the wrong order")
    expect_equal(got("qwertyuiop -jitter"), want("a.user", "b.user"), "an exclusion")
    expect_equal(got("mnbv*"), want("a.compaction"), "a prefix (a compaction summary)")
    expect_equal(got("mnbv"), set(), "a prefix without * is a whole word")
    for part in ("snake", "case_names", "like/this", "grep_files", "42", "src/net.py"):
        expect_equal(got(part), want("a.assistant"), f"{part!r} (thinking, tool call)")
    expect_equal(got("refused 127.0.0.1"), want("a.tool"), "a tool result")
    expect_equal(got('"quoted text"'), want("b.user"), "text with escaped quotes")
    expect_equal(got('"then next line"'), want("b.user"), "a phrase across a newline")
    for word in ("café DÉJÀ naïve", "東京", "タワー", "🎉"):
        expect_equal(got(word), want("a.custom"), f"{word!r} (non-ASCII)")
    expect_equal(got("decision"), want("a.label"), "a label")
    expect_equal(got("zyxwv"), want("a.name"), "a session name")
    for never in ("pattern", "parent_id", "aw1hz2v0b2tlbg", "image", "png", ids["a.user"]):
        expect_equal(got(never), set(), f"{never!r} (a key, an id or image data)")
    hit = repo.search('"retry backoff"')[0]
    marked = [hit.snippet[s:e] for s, e in hit.marks]
    expect_equal(marked, ["retry backoff"], "the marked text of a phrase hit")
    expect(f"**{marked[0]}**" in hit.snippet, f"the snippet {hit.snippet!r} marks the match")
    expect_equal((hit.role, hit.entry_type), ("user", "message"), "(role, entry_type)")


@_contract(
    "search_filters",
    "search() filters by role, type, time, cwd and branch, orders by relevance or newest "
    "and stops at limit",
)
def _search_filters(h: RepoHarness) -> None:
    ids = _planted(h)
    repo = h.repo
    users = {(_A, ids["a.user"]), (_B, ids["b.user"])}
    expect_equal(set(_found(repo, "qwertyuiop", roles=["user"])), users, "roles=['user']")
    expect_equal(
        set(_found(repo, "decision OR mnbvcxz", types=["label", "compaction"])),
        set(),
        "every word must appear (OR is a word)",
    )
    expect_equal(_found(repo, "decision", types=["label"]), [(_A, ids["a.label"])], "types")
    expect_equal(_found(repo, "decision", types=["message"]), [], "types that exclude it")
    expect_equal(_found(repo, "qwertyuiop", since="2026-11-01"), [(_B, ids["b.user"])], "since")
    expect_equal(
        set(_found(repo, "qwertyuiop", until="2026-11-01")),
        {(_A, ids["a.user"]), (_A, ids["a.assistant"])},
        "until",
    )
    expect_equal(_found(repo, "qwertyuiop", cwd=_THERE), [(_B, ids["b.user"])], "cwd")
    newest = _found(repo, "qwertyuiop", order="newest")
    expect_equal(newest[0], (_B, ids["b.user"]), "order='newest' puts the newest first")
    expect_equal(len(_found(repo, "qwertyuiop", limit=1)), 1, "limit=1")
    hits = {x.entry_id: x for x in repo.search("qwertyuiop")}
    expect(
        hits[ids["a.user"]].on_branch and not hits[ids["a.assistant"]].on_branch,
        "on_branch: the first question is on the current branch, the answer left behind is not",
    )
    expect_equal(set(_found(repo, "qwertyuiop", branch_only=True)), users, "branch_only=True")
    scores = [x.score for x in repo.search("qwertyuiop")]
    expect(scores == sorted(scores, reverse=True), f"relevance order: scores {scores}")


@_contract(
    "search_changes",
    "search() sees appends made after an earlier search (or index build) and forgets "
    "deleted sessions",
)
def _search_changes(h: RepoHarness) -> None:
    _planted(h)
    repo = h.repo
    build = getattr(repo.raw, "build_search_index", None)
    expect_equal(len(_found(repo, "deletedtoken")), 1, "a planted word")
    if build is not None:
        build()
    repo.delete(_C)
    expect_equal(_found(repo, "deletedtoken"), [], "a word of a deleted session")
    with h.open(_B) as b:
        new = b.append_message(UserMessage("appendedtoken arrives later"))
    expect_equal(_found(repo, "appendedtoken"), [(_B, new)], "a word appended after indexing")
    expect_equal([x[0] for x in _found(repo, "sidetoken")], [_A], "another session's word")


@_contract(
    "search_errors",
    "search() refuses bad queries and arguments with invalid_argument (never a crash) and "
    "answers hostile but valid queries",
)
def _search_errors(h: RepoHarness) -> None:
    _planted(h)
    repo = h.repo
    for bad in (
        "",
        "   ",
        "!!! ...",
        "-qwertyuiop",
        '"unbalanced',
        "\ud800",
        " ".join(["w"] * 10_000),
    ):
        expect_error("invalid_argument", repo.search, bad)
    for kwargs in (
        {"limit": 0},
        {"limit": True},
        {"order": "oldest"},
        {"since": "yesterday"},
        {"roles": 5},
        {"branch_only": "yes"},
    ):
        expect_error("invalid_argument", repo.search, "qwertyuiop", **kwargs)
    expect_error("invalid_argument", repo.search, 5)
    expect_equal(len(_found(repo, ".*[(a-z]+ retry\\d")), 0, "regex characters are not a regex")
    expect_equal(len(_found(repo, "qwertyuiop\x00")), 3, "a NUL separates words")


@_contract(
    "search_session",
    "Session.search() searches one session, every branch, with the same rules",
)
def _search_session(h: RepoHarness) -> None:
    ids = _planted(h)
    with h.open(_A) as a:
        got = {x.entry_id for x in a.search("qwertyuiop")}
        expect_equal(got, {ids["a.user"], ids["a.assistant"]}, "Session.search('qwertyuiop')")
        expect_equal(
            [x.entry_id for x in a.search("qwertyuiop", branch_only=True)],
            [ids["a.user"]],
            "branch_only",
        )
        expect_error("invalid_argument", a.search, '"')
