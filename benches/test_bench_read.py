"""Reading an open session: the newest 20 entries and the context of ~25k messages.

Both implementations open the 100k-entry session untimed; the benchmarks time only the
read. sessiontree opens it read-only, once per module; the baseline reads it again for each
test and drops it afterwards, so its ~5M Python objects never sit in the heap (and in the
garbage collector's way) while sessiontree is timed.
"""

from __future__ import annotations

import gc
import json
import statistics
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import baseline
import pytest
from harness import IMPLS, bl_pairs, context_digest, st_pairs
from pytest_benchmark.fixture import BenchmarkFixture

import sessiontree as st
from conftest import Bench

TAIL = 20


@pytest.fixture(scope="module")
def opened(bench: Bench) -> Iterator[dict[str, Any]]:
    wl = bench.workload("large")
    session = st.Session(st.JsonlSessionStorage.open(wl.path, readonly=True))
    try:
        yield {"workload": wl, "sessiontree": session}
    finally:
        session.close()
        wl.clear_side_files()


@pytest.fixture
def baseline_large(opened: dict[str, Any]) -> Iterator[baseline.BaselineSession]:
    session = baseline.open_session(opened["workload"].path)
    yield session
    del session
    gc.collect()


def _baseline(request: pytest.FixtureRequest) -> baseline.BaselineSession:
    return request.getfixturevalue("baseline_large")  # type: ignore[no-any-return]


@pytest.mark.parametrize("impl", IMPLS)
def test_newest_entries(
    benchmark: BenchmarkFixture,
    bench: Bench,
    opened: dict[str, Any],
    request: pytest.FixtureRequest,
    impl: str,
) -> None:
    """``get_entries(limit=20, reverse=True)``: the newest 20 entries in file order."""
    benchmark.group = f"newest-20@{bench.label('large')}"
    if impl == "sessiontree":
        storage = opened["sessiontree"].storage
        entries = benchmark(lambda: storage.get_entries(limit=TAIL, reverse=True))
        ids = [e.id for e in entries]
    else:
        bl = _baseline(request)
        entries = benchmark(lambda: bl.newest(TAIL))
        ids = [e["id"] for e in entries]
    assert len(ids) == TAIL
    bench.crosscheck(benchmark.group, impl, ids)
    benchmark.extra_info.update(scenario="newest-20", impl=impl, n=opened["workload"].manifest.n)


# A fresh interpreter opens the session (read-only; its persisted index, written by an
# earlier open, makes the open itself quick) and times its first `get_entries` call: what
# a program that shows the end of a session pays once, cold caches and lazy set-up included.
_FIRST_CALL = """
import json, sys, time
import sessiontree as st
storage = st.JsonlSessionStorage.open(sys.argv[1], readonly=True)
start = time.perf_counter()
entries = storage.get_entries(limit=TAIL, reverse=True)
took = time.perf_counter() - start
print(json.dumps({"seconds": took, "ids": [e.id for e in entries]}))
""".replace("TAIL", str(TAIL))


def test_newest_entries_first_call(
    benchmark: BenchmarkFixture, bench: Bench, opened: dict[str, Any]
) -> None:
    """The first ``get_entries(limit=20, reverse=True)`` after open, in a fresh process.

    The timed call is the whole process; the figure reported (``first_call``) is the
    median of the call's own time as each process measured it.
    """
    benchmark.group = f"newest-20-first@{bench.label('large')}"
    path = str(opened["workload"].path)
    # One open leaves the persisted index the fresh processes open with.
    st.JsonlSessionStorage.open(path, readonly=True).close()
    times: list[float] = []
    ids: list[list[str]] = []

    def run() -> None:
        out = subprocess.run(
            [sys.executable, "-c", _FIRST_CALL, path], capture_output=True, text=True, check=True
        ).stdout
        report = json.loads(out)
        times.append(report["seconds"])
        ids.append(report["ids"])

    benchmark.pedantic(run, rounds=9 if bench.real else 1, iterations=1)
    expected = [e.id for e in opened["sessiontree"].storage.get_entries(limit=TAIL, reverse=True)]
    assert all(got == expected for got in ids)
    benchmark.extra_info.update(
        scenario="newest-20-first",
        impl="sessiontree",
        n=opened["workload"].manifest.n,
        first_call=statistics.median(times),
        first_call_min=min(times),
    )


def _st_branch_tail(session: st.Session) -> list[st.SessionTreeEntry]:
    # The public way to read the end of the branch without materialising all of it.
    out: list[st.SessionTreeEntry] = []
    entry_id = session.get_leaf_id()
    while entry_id is not None and len(out) < TAIL:
        entry = session.get_entry(entry_id)
        assert entry is not None
        out.append(entry)
        entry_id = entry.parent_id
    return out


@pytest.mark.parametrize("impl", IMPLS)
def test_branch_tail(
    benchmark: BenchmarkFixture,
    bench: Bench,
    opened: dict[str, Any],
    request: pytest.FixtureRequest,
    impl: str,
) -> None:
    """The newest 20 entries of the current branch: walk up from the leaf."""
    benchmark.group = f"branch-tail-20@{bench.label('large')}"
    if impl == "sessiontree":
        session = opened["sessiontree"]
        entries = benchmark(_st_branch_tail, session)
        ids = [e.id for e in entries]
    else:
        bl = _baseline(request)
        entries = benchmark(bl.branch_tail, TAIL)
        ids = [e["id"] for e in entries]
    assert len(ids) == TAIL
    assert ids[0] == opened["workload"].manifest.leaf_id
    bench.crosscheck(benchmark.group, impl, ids)
    benchmark.extra_info.update(
        scenario="branch-tail-20", impl=impl, n=opened["workload"].manifest.n
    )


@pytest.mark.parametrize("impl", IMPLS)
def test_build_context(
    benchmark: BenchmarkFixture,
    bench: Bench,
    opened: dict[str, Any],
    request: pytest.FixtureRequest,
    impl: str,
) -> None:
    """Cold ``build_context()`` of the leaf (~25k messages at 100k entries) into Python
    objects: the session's context cache is dropped before every round."""
    benchmark.group = f"build-context@{bench.label('large')}"
    if impl == "sessiontree":
        session = opened["sessiontree"]
        ctx = benchmark.pedantic(
            session.build_context,
            setup=session.clear_context_cache,
            rounds=bench.rounds(impl, "large"),
        )
        messages = ctx.messages
        digest = context_digest(st_pairs(messages))
        state = (ctx.thinking_level, ctx.model and (ctx.model.provider, ctx.model.model_id))
    else:
        bl = _baseline(request)
        ctx = benchmark(bl.build_context)
        messages = ctx["messages"]
        digest = context_digest(bl_pairs(messages))
        state = (ctx["thinking_level"], ctx["model"])
    bench.crosscheck(benchmark.group, impl, (len(messages), digest, state))
    benchmark.extra_info.update(
        scenario="build-context",
        impl=impl,
        n=opened["workload"].manifest.n,
        context=len(messages),
    )


def _shape(roots: list[Any], entry: Any, children: Any, label: Any) -> tuple[int, int, str]:
    """(nodes, labelled nodes, a digest of the ids in depth-first order), without recursion."""
    count = labelled = 0
    ids: list[tuple[str, int]] = []
    stack = [(r, 0) for r in reversed(roots)]
    while stack:
        node, depth = stack.pop()
        count += 1
        labelled += label(node) is not None
        ids.append((entry(node), depth))
        stack.extend((c, depth + 1) for c in reversed(children(node)))
    return count, labelled, context_digest(ids)


@pytest.mark.parametrize("impl", IMPLS)
def test_get_tree(
    benchmark: BenchmarkFixture,
    bench: Bench,
    opened: dict[str, Any],
    request: pytest.FixtureRequest,
    impl: str,
) -> None:
    """``get_tree()`` of the whole session: every entry as a node, with labels."""
    benchmark.group = f"get-tree@{bench.label('large')}"
    if impl == "sessiontree":
        session = opened["sessiontree"]
        roots = benchmark.pedantic(session.get_tree, rounds=bench.rounds(impl, "large"))
        shape = _shape(roots, lambda n: n.entry.id, lambda n: n.children, lambda n: n.label)
    else:
        bl = _baseline(request)
        roots = benchmark.pedantic(bl.tree, rounds=bench.rounds(impl, "large"))
        shape = _shape(
            roots, lambda n: n["entry"]["id"], lambda n: n["children"], lambda n: n["label"]
        )
    bench.crosscheck(benchmark.group, impl, shape)
    benchmark.extra_info.update(scenario="get-tree", impl=impl, n=opened["workload"].manifest.n)
