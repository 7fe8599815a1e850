"""How long each async call holds up the event loop (issue 28, item 7).

A ticker task sleeps 1 ms at a time and records how late it wakes; the longest gap while
one call runs is that call's *loop stall*: the time every other task of the loop waited,
whether the call ran inline on the loop or held the GIL in its worker thread. Each call
runs on the benchmark session (10k and 100k entries with ``--bench-real``; tiny in the
smoke run) opened through ``AsyncSessionRepo`` over a ``JsonlSessionRepo`` (durability
``flush``), under asyncio.

Every call runs ``rounds`` times (a fresh session for the calls that need one); the
figures are the largest and the median of the per-round stalls, and the call's own time,
in ``extra_info`` (``stall_max_ms``, ``stall_median_ms``, ``call_median_ms``). ``idle`` is
the same ticker with no call running: the floor of a shared machine.

Run alone, ``python benches/test_bench_async_stall.py [N]`` prints the table for one size
(the cached N-entry session, default 100,000).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sessiontree as st

BIG_TEXT = 16_000_000
"""The large message of ``append_large``: a 16 MB user message, as the issue's."""

TICK = 0.001


async def _ticker(gaps: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(TICK)
        gaps.append(time.perf_counter() - t0 - TICK)


async def measure(call: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """``(longest loop stall, the call's time)`` in seconds, while ``call()`` is awaited."""
    gaps: list[float] = []
    stop = asyncio.Event()
    ticker = asyncio.create_task(_ticker(gaps, stop))
    await asyncio.sleep(0.003)  # the ticker is running
    gaps.clear()
    t0 = time.perf_counter()
    await call()
    elapsed = time.perf_counter() - t0
    await asyncio.sleep(0.002)  # the tick that spans the end of the call lands
    stop.set()
    await ticker
    return max(gaps, default=0.0), elapsed


@dataclass
class Env:
    """The session file the calls run on, and where to copy it."""

    source: Path
    scratch: Path
    n: int
    copies: int = 0

    def copy(self) -> st.AsyncSessionRepo:
        """A repository holding a fresh copy of the session (its id is ``self.sid``)."""
        # One copy at a time (a 100k-entry session is 340 MB): the last one is closed.
        shutil.rmtree(self.scratch / f"repo-{self.copies}", ignore_errors=True)
        self.copies += 1
        root = self.scratch / f"repo-{self.copies}"
        root.mkdir()
        shutil.copyfile(self.source, root / self.source.name)
        return st.AsyncSessionRepo(st.JsonlSessionRepo(root, durability="flush"))

    @property
    def sid(self) -> str:
        return self.source.stem


def _big() -> st.UserMessage:
    return st.UserMessage("y" * BIG_TEXT)


# Each scenario: an async function taking the env and a ``timed`` callback it awaits
# with the one call to measure (setup before, checks after, untimed).
Timed = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


async def _session(env: Env, warm: bool = True) -> st.AsyncSession:
    session = await env.copy().open(env.sid)
    if warm:
        await session.build_context()
    return session


async def s_idle(env: Env, timed: Timed) -> None:
    await timed(lambda: asyncio.sleep(0.05))


async def s_open(env: Env, timed: Timed) -> None:
    repo = env.copy()
    session = await timed(lambda: repo.open(env.sid))
    await session.close()


async def s_append(env: Env, timed: Timed) -> None:
    session = await _session(env)
    await timed(lambda: session.append_message(st.UserMessage("a small message")))
    await session.close()


async def s_append_large(env: Env, timed: Timed) -> None:
    session = await _session(env)
    message = _big()  # made (and checked) by the caller, before the call
    entry = await timed(lambda: session.append_message(message))
    assert await session.get_leaf_id() == entry
    await session.close()


async def s_turn_context(env: Env, timed: Timed) -> None:
    session = await _session(env)
    await session.append_message(st.UserMessage("a small message"))
    await timed(session.build_context)
    await session.close()


async def s_build_context_cold(env: Env, timed: Timed) -> None:
    session = await _session(env, warm=False)
    context = await timed(session.build_context)
    assert context.messages
    await session.close()


async def s_build_context_after_move(env: Env, timed: Timed) -> None:
    session = await _session(env)
    branch = await session.get_branch()
    await session.move_to(branch[len(branch) // 2].id)
    await timed(session.build_context)
    await session.close()


async def s_get_branch(env: Env, timed: Timed) -> None:
    session = await _session(env, warm=False)
    branch = await timed(session.get_branch)
    assert branch
    await session.close()


async def s_get_tree(env: Env, timed: Timed) -> None:
    session = await _session(env, warm=False)
    tree = await timed(session.get_tree)
    assert tree
    await session.close()


async def s_get_entry(env: Env, timed: Timed) -> None:
    session = await _session(env, warm=False)
    leaf = await session.get_leaf_id()
    assert leaf is not None
    await timed(lambda: session.get_entry(leaf))
    await session.close()


async def s_get_session_stats(env: Env, timed: Timed) -> None:
    session = await _session(env, warm=False)
    await timed(session.get_session_stats)
    await session.close()


async def s_close(env: Env, timed: Timed) -> None:
    session = await _session(env)
    await session.append_message(st.UserMessage("a small message"))
    await timed(session.close)


async def s_list(env: Env, timed: Timed) -> None:
    repo = env.copy()
    rows = await timed(repo.list)
    assert len(rows) == 1


async def s_fork(env: Env, timed: Timed) -> None:
    repo = env.copy()
    fork = await timed(lambda: repo.fork(env.sid))
    await fork.close()


async def s_create(env: Env, timed: Timed) -> None:
    repo = env.copy()
    session = await timed(lambda: repo.create(cwd="/w"))
    await session.close()


SCENARIOS: dict[str, Callable[[Env, Timed], Awaitable[None]]] = {
    "idle": s_idle,
    "repo.open": s_open,
    "append_message (small)": s_append,
    "append_message (16 MB)": s_append_large,
    "build_context (a turn, cached)": s_turn_context,
    "build_context (cold)": s_build_context_cold,
    "build_context (after move_to)": s_build_context_after_move,
    "get_branch": s_get_branch,
    "get_tree": s_get_tree,
    "get_entry": s_get_entry,
    "get_session_stats": s_get_session_stats,
    "close (after an append)": s_close,
    "repo.list": s_list,
    "repo.fork": s_fork,
    "repo.create": s_create,
}


def run_scenario(name: str, env: Env, rounds: int) -> dict[str, float]:
    """Runs one scenario ``rounds`` times, each in a fresh asyncio loop."""
    stalls: list[float] = []
    times: list[float] = []

    async def timed(call: Callable[[], Awaitable[Any]]) -> Any:
        result: list[Any] = []

        async def one() -> None:
            result.append(await call())

        stall, elapsed = await measure(one)
        stalls.append(stall)
        times.append(elapsed)
        return result[0]

    for _ in range(rounds):
        asyncio.run(SCENARIOS[name](env, timed))
    return {
        "stall_max_ms": round(1e3 * max(stalls), 3),
        "stall_median_ms": round(1e3 * statistics.median(stalls), 3),
        "call_median_ms": round(1e3 * statistics.median(times), 3),
    }


# --------------------------------------------------------------------------- pytest

try:
    import pytest
    from pytest_benchmark.fixture import BenchmarkFixture

    from conftest import Bench
except ImportError:  # run as a script without pytest-benchmark
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.mark.parametrize("call", list(SCENARIOS))
    @pytest.mark.parametrize("size", ["small", "large"])
    def test_async_loop_stall(
        benchmark: BenchmarkFixture, bench: Bench, scratch: Path, size: str, call: str
    ) -> None:
        """The longest event-loop stall while one async call runs (see the module)."""
        benchmark.group = f"async-stall@{bench.label(size)}"
        wl = bench.workload(size)
        env = Env(wl.path, scratch, wl.manifest.n)
        rounds = 5 if bench.real else 1
        figures: dict[str, float] = {}
        benchmark.pedantic(
            lambda: figures.update(run_scenario(call, env, rounds)), rounds=1, warmup_rounds=0
        )
        benchmark.extra_info.update(
            scenario="async-stall", call=call, n=wl.manifest.n, rounds=rounds, **figures
        )


def main(argv: list[str]) -> None:
    """``N [ROUNDS [CALL ...]]``: the table for the cached N-entry session (``--json``:
    one JSON object a call instead; ``--switch-interval=S``: ``sys.setswitchinterval(S)``
    first)."""
    import json
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from workload import cached_session

    as_json = "--json" in argv
    for a in argv:
        if a.startswith("--switch-interval="):  # what sys.setswitchinterval changes
            sys.setswitchinterval(float(a.split("=", 1)[1]))
    args = [a for a in argv[1:] if a != "--json" and not a.startswith("--")]
    n = int(args[0]) if args else 100_000
    rounds = int(args[1]) if len(args) > 1 else 5
    only = args[2:]
    wl = cached_session(n)
    with tempfile.TemporaryDirectory(dir=wl.path.parent.parent) as tmp:
        env = Env(wl.path, Path(tmp), n)
        if not as_json:
            print(f"| call ({n} entries, {rounds} rounds) | stall max | stall median | call |")
            print("|---|---:|---:|---:|")
        for name in SCENARIOS:
            if only and name not in only:
                continue
            f = run_scenario(name, env, rounds)
            if as_json:
                print(json.dumps({"call": name, "n": n, **f}), flush=True)
            else:
                print(
                    f"| {name} | {f['stall_max_ms']:.1f} ms | {f['stall_median_ms']:.1f} ms "
                    f"| {f['call_median_ms']:.1f} ms |",
                    flush=True,
                )


if __name__ == "__main__":
    main(sys.argv)
