"""pi's files: opening a pi session against the same session in sessiontree's dialect.

The pi file is the benchmark session converted with ``sessiontree.dialects.pi.convert_file``
(the same entries, pi's keys and names), cached beside the workload. Both are opened
read-only with no persisted index, so each open is a full scan; the ratio is pi's file over
sessiontree's. (pi itself takes 6.4 s and 2 GB to open a 100k-entry, 310 MiB file, and
cannot open files over 512 MiB.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture
from workload import cache_root

import sessiontree as st
from conftest import Bench
from sessiontree.dialects.pi import convert_file


def _pi_copy(path: Path) -> Path:
    # Outside the workload's directory, whose side files each run clears.
    folder = cache_root() / "pi-dialect" / path.parent.name
    folder.mkdir(parents=True, exist_ok=True)
    pi = folder / path.name
    if not pi.exists():
        tmp = folder / (path.name + ".tmp")
        tmp.unlink(missing_ok=True)
        convert_file(path, tmp, to="pi")
        tmp.rename(pi)
    return pi


def _open(path: str) -> tuple[int, str | None]:
    with st.JsonlSessionStorage.open(path, readonly=True, index=False) as s:
        return len(s), s.get_leaf_id()


@pytest.mark.parametrize("dialect", ["sessiontree", "pi"])
@pytest.mark.parametrize("size", ["small", "large"])
def test_open_pi(benchmark: BenchmarkFixture, bench: Bench, size: str, dialect: str) -> None:
    """Read-only open, no persisted index, of the same session in each dialect."""
    wl = bench.workload(size)
    path = wl.path if dialect == "sessiontree" else _pi_copy(wl.path)
    benchmark.group = f"open-pi@{bench.label(size)}"
    n, leaf = benchmark.pedantic(
        _open, args=(str(path),), rounds=bench.rounds("sessiontree", size), iterations=1
    )
    assert n == wl.manifest.n and leaf == wl.manifest.leaf_id
    with st.JsonlSessionStorage.open(path, readonly=True, index=False) as s:
        assert s.dialect == dialect
    benchmark.extra_info.update({"dialect": dialect, "bytes": path.stat().st_size})
