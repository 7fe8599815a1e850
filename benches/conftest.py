"""pytest configuration for the benchmark suite (``pytest benches``).

By default the suite is a smoke test: benchmarking is off (each benchmarked call runs once,
untimed) and the workloads are tiny, so ``pytest benches`` finishes in well under a minute
and still asserts every scenario's correctness. ``--bench-real`` turns benchmarking on and
uses the real sizes (10k and 100k entries, 1,000 sessions); ``--bench-size=1m`` (or
``SESSIONTREE_BENCH_1M=1``) adds the 1M-entry (~3.4 GB) and 10,000-session scenarios.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload import RepoWorkload, Workload, cache_root, cached_repo, cached_session


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sessiontree benches")
    group.addoption(
        "--bench-real",
        action="store_true",
        default=False,
        help="benchmark for real at real sizes (default: a fast untimed smoke run)",
    )
    group.addoption(
        "--bench-size",
        choices=("default", "1m"),
        default=None,
        help="'1m' adds the 1M-entry and 10,000-session scenarios (also SESSIONTREE_BENCH_1M=1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # pytest-benchmark reads this in its own (trylast) pytest_configure, after this one.
    if not config.getoption("--bench-real", default=False):
        config.option.benchmark_disable = True


def human(n: int) -> str:
    """``100000`` → ``100k``, ``1000000`` → ``1M``."""
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def mem_available() -> int:
    """Bytes of memory available (``MemAvailable``), or a large number if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62


@dataclass
class Bench:
    """Sizes, workloads and cross-implementation checks for one pytest run.

    Attributes:
        real: benchmarking on, real sizes.
        huge: the opt-in 1M / 10,000-session scenarios are enabled.
        sizes: entry counts per size name (``empty``, ``small``, ``large``, ``huge``) and
            session counts (``repo``, ``repo_big``).
    """

    real: bool
    huge: bool
    sizes: dict[str, int]
    _seen: dict[str, tuple[str, Any]] = field(default_factory=dict)
    _warm: set[Path] = field(default_factory=set)

    def n(self, size: str) -> int:
        return self.sizes[size]

    def label(self, size: str) -> str:
        return human(self.sizes[size])

    def require(self, size: str) -> None:
        """Skips unless the size is enabled."""
        if size in ("huge", "repo_big") and not self.huge:
            pytest.skip("opt-in: pass --bench-size=1m or set SESSIONTREE_BENCH_1M=1")

    def workload(self, size: str) -> Workload:
        """The cached session for ``size``, its side files cleared and its bytes in the
        page cache (the targets are for a warm cache)."""
        self.require(size)
        wl = cached_session(self.sizes[size])
        wl.clear_side_files()
        self._warm_up(wl.path)
        return wl

    def repo(self, size: str) -> RepoWorkload:
        """The cached repository directory for ``size``, in the page cache."""
        self.require(size)
        rw = cached_repo(self.sizes[size])
        for sid in rw.manifests:
            self._warm_up(rw.directory / f"{sid}.jsonl")
        return rw

    def _warm_up(self, path: Path) -> None:
        if path not in self._warm:
            with open(path, "rb", buffering=0) as f:
                while f.read(8 << 20):
                    pass
            self._warm.add(path)

    def rounds(self, impl: str, size: str) -> int:
        """Rounds for a pedantic benchmark: fewer for the slow baseline on big files."""
        if not self.real:
            return 1
        n = self.sizes.get(size, 0)
        if n >= 1_000_000:
            return 1 if impl == "baseline" else 3
        if n >= 100_000:
            return 3 if impl == "baseline" else 7
        return 5 if impl == "baseline" else 15

    def baseline_fits(self, size: str) -> None:
        """Skips the baseline where its dicts would not fit in memory (~9 KB per entry)."""
        need = self.sizes[size] * 9 * 1024
        if need > mem_available() * 0.8:
            pytest.skip(f"baseline needs ~{need >> 30} GiB, more than this machine has free")

    def crosscheck(self, key: str, impl: str, value: Any) -> None:
        """Asserts ``value`` equals what the other implementation produced for ``key``."""
        other = self._seen.get(key)
        if other is not None and other[0] != impl:
            assert value == other[1], f"{key}: {impl} gave {value!r}, {other[0]} gave {other[1]!r}"
        self._seen[key] = (impl, value)


@pytest.fixture(scope="session")
def bench(pytestconfig: pytest.Config) -> Bench:
    real = bool(pytestconfig.getoption("--bench-real"))
    huge = pytestconfig.getoption("--bench-size") == "1m" or os.environ.get(
        "SESSIONTREE_BENCH_1M", ""
    ) not in ("", "0")
    if real:
        sizes = {
            "empty": 0,
            "tiny": 1_000,
            "small": 10_000,
            "large": 100_000,
            "huge": 1_000_000,
            "repo": 1_000,
            "repo_big": 10_000,
        }
    else:
        sizes = {
            "empty": 0,
            "tiny": 100,
            "small": 500,
            "large": 2_000,
            "huge": 4_000,
            "repo": 20,
            "repo_big": 60,
        }
    return Bench(real=real, huge=huge, sizes=sizes)


@pytest.fixture
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A scratch directory on the cache's file system, removed afterwards (copies of
    100k-entry sessions are too big to leave behind)."""
    path = Path(
        tmp_path_factory.mktemp("bench", numbered=True)
        if not os.environ.get("SESSIONTREE_BENCH_CACHE")
        else _mk_cache_scratch()
    )
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _mk_cache_scratch() -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="scratch-", dir=cache_root()))
