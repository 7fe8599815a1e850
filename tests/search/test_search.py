"""Search: the shared conformance contracts on every repository type, the same answers
from all of them, hostile queries, and the engine's tokeniser through the binding."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as hs

import sessiontree as st
from sessiontree.search import search_tokens
from sessiontree.testing import REPO_CONTRACTS, check_repo, plant_search_corpus, search_answers

SEARCH_CONTRACTS = [c for c in REPO_CONTRACTS if c.name.startswith("search_")]

RepoFactory = Callable[[], st.SessionRepo]


@pytest.fixture(params=["jsonl", "pi", "memory", "postgres"])
def repo_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RepoFactory]:
    count = itertools.count()
    kind = request.param
    if kind == "jsonl":
        yield lambda: st.JsonlSessionRepo(tmp_path / f"r{next(count)}")
    elif kind == "pi":
        yield lambda: st.PiSessionRepo(tmp_path / f"r{next(count)}")
    elif kind == "memory":
        yield st.InMemorySessionRepo
    else:
        server = request.getfixturevalue("pg_server")
        schema = request.getfixturevalue("pg_schema")
        made: list[st.PostgresSessionRepo] = []

        def new() -> st.SessionRepo:
            repo = st.PostgresSessionRepo(server.dsn, schema=f"{schema}_{next(count)}")
            made.append(repo)
            return repo

        yield new
        import psycopg

        for r in made:
            r.close()
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            for r in made:
                conn.execute(f"DROP SCHEMA IF EXISTS {r.schema} CASCADE")


@pytest.mark.parametrize("contract", SEARCH_CONTRACTS, ids=lambda c: c.name)
def test_search_contracts(repo_factory: RepoFactory, contract: Any) -> None:
    report = check_repo(repo_factory, only=[contract])
    assert report.ok, str(report)


@pytest.fixture(scope="module")
def reference_answers() -> list[list[tuple[Any, ...]]]:
    repo = st.InMemorySessionRepo()
    plant_search_corpus(repo.create)
    return search_answers(repo)


def test_every_repository_gives_the_same_answers(
    repo_factory: RepoFactory, reference_answers: list[list[tuple[Any, ...]]]
) -> None:
    repo = repo_factory()
    plant_search_corpus(repo.create)
    assert search_answers(repo) == reference_answers
    assert any(reference_answers) and not all(reference_answers)


def test_an_index_gives_the_scan_answers(tmp_path: Path) -> None:
    repo = st.JsonlSessionRepo(tmp_path / "r")
    plant_search_corpus(repo.create)
    scanned = search_answers(repo)
    if not hasattr(repo, "build_search_index"):
        pytest.skip("no index")
    repo.build_search_index()
    assert search_answers(repo) == scanned


# --------------------------------------------------------------------------- hostile


@pytest.fixture(scope="module")
def small_repo() -> st.SessionRepo:
    repo = st.InMemorySessionRepo()
    plant_search_corpus(repo.create)
    return repo


@given(hs.text(max_size=200))
def test_any_text_is_refused_or_answered(small_repo: st.SessionRepo, query: str) -> None:
    try:
        hits = small_repo.search(query)
    except st.SessionError as exc:
        assert exc.code == "invalid_argument"
        return
    for h in hits:
        assert all(0 <= s < e <= len(h.snippet) for s, e in h.marks)


@given(hs.lists(hs.sampled_from(["qwertyuiop", "retry", "-jitter", '"a b"', "mnbv*", "*", "-"])))
def test_combinations_match_what_each_term_says(
    small_repo: st.SessionRepo, terms: list[str]
) -> None:
    query = " ".join(terms)
    try:
        got = {h.entry_id for h in small_repo.search(query, limit=10_000)}
    except st.SessionError as exc:
        assert exc.code == "invalid_argument"
        return
    for term in terms:
        if term in ("*", "-"):
            continue
        alone = {h.entry_id for h in small_repo.search(term.lstrip("-"), limit=10_000)}
        assert got.isdisjoint(alone) if term.startswith("-") else got <= alone, term


def test_hostile_queries(small_repo: st.SessionRepo) -> None:
    for bad in (
        "",
        "\x00",
        '"',
        '"a',
        "-",
        "--",
        "\ud800 x",
        "x " * 10_000,
        "*" * 5000,
        "\\",
        "$^",
    ):
        with pytest.raises(st.SessionError) as err:
            small_repo.search(bad)
        assert err.value.code == "invalid_argument"
    for fine in ("(?i).*x", "[a-z]+", "a|b", "retry\x00backoff", "ﬀ", "İ"):
        small_repo.search(fine)


def test_tokens() -> None:
    assert search_tokens("Retry snake_case dotted.names a/b") == [
        "retry",
        "snake",
        "case",
        "dotted",
        "names",
        "a",
        "b",
    ]
    assert search_tokens("Ünïcødé 東京 🎉") == ["ünïcødé", "東", "京", "🎉"]
    with pytest.raises(st.SessionError):
        search_tokens("\ud800")


def test_search_hit_is_a_frozen_value(small_repo: st.SessionRepo) -> None:
    hit = small_repo.search("qwertyuiop")[0]
    with pytest.raises(AttributeError):
        hit.score = 2  # type: ignore[misc]
    assert hit == small_repo.search("qwertyuiop")[0]
    data = hit.to_json()
    assert data["timestamp"].endswith("Z") and data["snippet"] == hit.snippet


def _branch_tree(repo: st.SessionRepo, seed: int) -> str:
    """A session of common words on many branches: moves back, labels, a leaf moved to
    nothing and back."""
    rng = random.Random(seed)
    with repo.create(cwd="/w") as s:
        ids: list[str] = []
        for i in range(60):
            roll = rng.random()
            if ids and roll < 0.2:
                s.move_to(rng.choice(ids))
            elif ids and roll < 0.25:
                s.append_label(rng.choice(ids), f"common label {i}")
            elif roll < 0.27:
                s.move_to(None)
            ids.append(s.append_message(st.UserMessage(f"common word number {i} " * (1 + i % 3))))
        return s.id


@pytest.mark.parametrize("kind", ["jsonl", "memory"])
def test_on_branch_equals_the_readers_branch(kind: str, tmp_path: Path) -> None:
    # The scan tells a hit's branch from the lines it read; the reader's path from the
    # leaf is the reference. With and without the index (which asks the files again).
    repo: st.SessionRepo = (
        st.JsonlSessionRepo(tmp_path / "r") if kind == "jsonl" else st.InMemorySessionRepo()
    )
    sids = [_branch_tree(repo, seed) for seed in range(6)]
    on: set[str] = set()
    for sid in sids:
        with repo.open(sid) as s:
            on |= {e.id for e in s.storage.get_path_to_root(s.get_leaf_id())}
    hits = repo.search("common", limit=10_000)
    assert len(hits) > 300
    assert {h.entry_id for h in hits if h.on_branch} == {h.entry_id for h in hits} & on
    assert any(not h.on_branch for h in hits) and any(h.on_branch for h in hits)
    only = repo.search("common", limit=10_000, branch_only=True)
    assert {h.entry_id for h in only} == {h.entry_id for h in hits} & on
    if isinstance(repo, st.JsonlSessionRepo):
        repo.build_search_index()
        indexed = repo.search("number", limit=10_000)
        assert {h.entry_id for h in indexed if h.on_branch} == {h.entry_id for h in indexed} & on


@pytest.mark.parametrize("kind", ["jsonl", "memory"])
def test_newest_first_is_the_newest_of_all_hits(kind: str, tmp_path: Path) -> None:
    # The scan skips entries older than the worst hit it keeps: the answer must be the
    # newest of every hit, ties broken by session then entry id.
    repo: st.SessionRepo = (
        st.JsonlSessionRepo(tmp_path / "r") if kind == "jsonl" else st.InMemorySessionRepo()
    )
    for seed in range(6):
        _branch_tree(repo, seed)
    every = repo.search("common", limit=10_000)
    assert len(every) > 300

    def key(h: st.SearchHit) -> tuple[float, str, str]:
        assert h.timestamp is not None
        return (-h.timestamp.timestamp(), h.session_id, h.entry_id)

    for limit in (1, 20, 50):
        newest = repo.search("common", order="newest", limit=limit)
        assert [h.entry_id for h in newest] == [h.entry_id for h in sorted(every, key=key)][:limit]
