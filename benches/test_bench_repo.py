"""Repository operations: fork at an entry of a 100k session; list 1,000 / 10,000 sessions.

Skipped with a message while ``sessiontree.repo`` (``JsonlSessionRepo``) is not importable.

- fork: ``repo.fork(source_id, entry_id=..., position="at")`` on a session that is not
  open, then closing the new session; the baseline reads the source and writes the path.
  The source's side files (a persisted index, if sessiontree keeps one) stay between rounds,
  as they would for a user who opened the session before; the forks are removed.
- list (cached): a new ``JsonlSessionRepo(root).list()`` each round, after one untimed
  list has written the repo's on-disk cache. A new repo object per round means no
  in-process memo helps, as for a command-line tool listing sessions on start. The baseline
  reads every file's header and scans its lines.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any

import baseline
import pytest
from harness import IMPLS
from pytest_benchmark.fixture import BenchmarkFixture

from conftest import Bench


@pytest.fixture(scope="module")
def repo_module() -> ModuleType:
    try:
        import sessiontree.repo as repo
    except Exception as exc:  # a half-written module may fail with anything
        pytest.skip(f"sessiontree.repo is not importable yet ({type(exc).__name__}: {exc})")
    if not hasattr(repo, "JsonlSessionRepo"):
        pytest.skip("sessiontree.repo has no JsonlSessionRepo yet")
    return repo


def _remove_forks(directory: Path, source_name: str) -> None:
    # Forks are "<new id>.jsonl" plus side files named after them; the source and its own
    # side files ("<source>.jsonl...") stay.
    source_stem = source_name[: -len(".jsonl")]
    for entry in os.scandir(directory):
        if entry.name.startswith(source_stem) or not entry.is_file():
            continue
        if entry.name.startswith(".sessiontree-list-cache"):
            continue
        os.unlink(entry.path)


# sessiontree's fork drops label/leaf entries that would dangle and appends fresh label,
# session_info and leaf entries so labels, name and leaf match the source; the baseline copies
# the path as is. The entries compared are the rest, which both must copy alike.
_BOOKKEEPING = frozenset({"label", "leaf", "session_info"})


@pytest.mark.parametrize("impl", IMPLS)
def test_fork(
    benchmark: BenchmarkFixture,
    bench: Bench,
    scratch: Path,
    repo_module: ModuleType,
    impl: str,
) -> None:
    """Fork at a user message ~60 % into a 100k session (``position="at"``)."""
    wl = bench.workload("large")
    target = wl.manifest.fork_target
    assert target is not None
    benchmark.group = f"fork@{bench.label('large')}"
    source_id = wl.manifest.session_id
    if impl == "sessiontree":
        repo = repo_module.JsonlSessionRepo(wl.directory)
        # A user forks a session they have opened before: leave what an open leaves.
        repo.open(source_id).close()

        def fork() -> tuple[list[str], str | None, str | None]:
            with repo.fork(source_id, entry_id=target, position="at") as new:
                header = new.storage.get_metadata()
                kept = [e.id for e in new.storage.get_entries() if e.type not in _BOOKKEEPING]
                return kept, new.get_leaf_id(), header.parent_session

        def setup() -> None:
            _remove_forks(wl.directory, wl.path.name)

        try:
            kept, leaf, parent = benchmark.pedantic(
                fork, setup=setup, rounds=bench.rounds(impl, "large"), iterations=1
            )
        finally:
            _remove_forks(wl.directory, wl.path.name)
            wl.clear_side_files()
    else:
        out = scratch / "forks"
        out.mkdir()

        def bl_fork() -> tuple[list[str], str | None, str | None]:
            dest = baseline.fork(wl.path, target, out)
            copy = baseline.open_session(dest)
            os.unlink(dest)
            kept = [e["id"] for e in copy.entries if e["type"] not in _BOOKKEEPING]
            return kept, copy.leaf, copy.header["parent_session"]

        # Reading the copy back (on both sides) is not part of a fork; it is cheap next to
        # reading the 100k source, and lets both sides report the same facts.
        kept, leaf, parent = benchmark.pedantic(
            bl_fork, rounds=bench.rounds(impl, "large"), iterations=1
        )
    assert leaf == target
    assert parent == source_id
    assert target in kept
    bench.crosscheck(benchmark.group, impl, kept)
    benchmark.extra_info.update(scenario="fork", impl=impl, n=wl.manifest.n, copied=len(kept))


def _st_rows(metas: list[Any]) -> list[tuple[Any, ...]]:
    return [(m.id, m.entry_count, m.message_count, m.name, m.first_message) for m in metas]


def _bl_rows(metas: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (m["id"], m["entry_count"], m["message_count"], m["name"], m["first_message"])
        for m in metas
    ]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("size", ["repo", "repo_big"])
def test_list(
    benchmark: BenchmarkFixture,
    bench: Bench,
    repo_module: ModuleType,
    size: str,
    impl: str,
) -> None:
    """List every session of a repository, newest first (sessiontree: cached)."""
    rw = bench.repo(size)
    benchmark.group = f"list@{bench.label(size)}"
    if impl == "sessiontree":
        cls = repo_module.JsonlSessionRepo
        cls(rw.directory).list()  # writes the on-disk cache
        metas = benchmark.pedantic(
            lambda: cls(rw.directory).list(), rounds=bench.rounds(impl, "small"), iterations=1
        )
        rows = _st_rows(metas)
        errors = [m for m in metas if m.error is not None]
        modified = [m.modified for m in metas]
    else:
        metas = benchmark.pedantic(
            baseline.list_sessions,
            args=(rw.directory,),
            rounds=bench.rounds(impl, "small"),
            iterations=1,
        )
        rows = _bl_rows(metas)
        errors = [m for m in metas if m["error"] is not None]
        modified = [m["modified"] for m in metas]
    assert errors == []
    assert modified == sorted(modified, reverse=True)
    expected = {
        sid: (sid, m.n, m.counts.get("message", 0), m.name, m.first_user_text)
        for sid, m in rw.manifests.items()
    }
    assert sorted(rows) == sorted(expected.values())
    newest = [m.newest_timestamp for m in rw.manifests.values()]
    if len(set(newest)) == len(newest):
        # Without ties the order is fully determined: both must list the same order.
        bench.crosscheck(benchmark.group, impl, [r[0] for r in rows])
    benchmark.extra_info.update(scenario="list", impl=impl, n=len(rows))
