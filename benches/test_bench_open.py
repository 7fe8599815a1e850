"""Opening sessions: resume (open + context of the leaf, without and with a persisted index),
open throughput, 1M open, reopen.

Before every timed round the session's side files are removed (a persisted index, lock
files), so "open" and "resume" measure a full scan; "reopen" and "resume with index" keep
the index an earlier open wrote, as a user reopening an unchanged session would have it.
"""

from __future__ import annotations

import pytest
from harness import IMPLS, SCENARIOS, close_all, measure_peak_rss
from pytest_benchmark.fixture import BenchmarkFixture

from conftest import Bench


def _run(
    benchmark: BenchmarkFixture,
    bench: Bench,
    scenario: str,
    size: str,
    impl: str,
    *,
    reopen: bool = False,
) -> None:
    wl = bench.workload(size)
    if impl == "baseline":
        bench.baseline_fits(size)
    label = bench.label(size)
    group = f"{scenario}@{label}"
    benchmark.group = group
    kind = "resume" if scenario.startswith("resume") else "open"
    run, summarize = SCENARIOS[(kind, impl)]
    if reopen and impl == "sessiontree":
        # One untimed open leaves whatever a reopen may use (a persisted index).
        run(str(wl.path))

    def setup() -> None:
        # Untimed: the session the last round left open (a resume keeps it) is closed.
        close_all()
        if not reopen:
            wl.clear_side_files()

    result = benchmark.pedantic(
        run, args=(str(wl.path),), setup=setup, rounds=bench.rounds(impl, size), iterations=1
    )
    summary = summarize(result)
    close_all()
    assert summary.entries == wl.manifest.n
    assert summary.leaf == wl.manifest.leaf_id
    bench.crosscheck(group, impl, summary)
    info = {
        "scenario": scenario,
        "impl": impl,
        "n": wl.manifest.n,
        "bytes": wl.manifest.size_bytes,
        "context": summary.context,
    }
    if scenario in ("resume", "open", "resume-indexed"):
        if not reopen:
            wl.clear_side_files()
        rss, child, (rss_run, rss_read) = measure_peak_rss(kind, impl, wl.path)
        assert child == summary
        info.update(peak_rss=rss, peak_rss_run=rss_run, peak_rss_read=rss_read)
    benchmark.extra_info.update(info)
    wl.clear_side_files()


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("size", ["small", "large"])
def test_resume(benchmark: BenchmarkFixture, bench: Bench, size: str, impl: str) -> None:
    """Writer open + build the context of the leaf."""
    _run(benchmark, bench, "resume", size, impl)


@pytest.mark.parametrize("size", ["large", "huge"])
def test_resume_indexed(benchmark: BenchmarkFixture, bench: Bench, size: str) -> None:
    """Writer open of a session an earlier open left its persisted index, + build the
    context of the leaf (sessiontree only: the baseline has no index)."""
    _run(benchmark, bench, "resume-indexed", size, "sessiontree", reopen=True)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("size", ["small", "large", "huge"])
def test_open(benchmark: BenchmarkFixture, bench: Bench, size: str, impl: str) -> None:
    """Read-only open with no persisted index: throughput = file bytes / time."""
    _run(benchmark, bench, "open", size, impl)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("size", ["large", "huge"])
def test_reopen(benchmark: BenchmarkFixture, bench: Bench, size: str, impl: str) -> None:
    """Read-only open of an unchanged session that was opened before."""
    _run(benchmark, bench, "reopen", size, impl, reopen=True)
