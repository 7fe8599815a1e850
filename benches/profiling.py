"""cProfile one sessiontree scenario on a cached workload: where the Python time goes.

Usage::

    .venv/bin/python benches/profiling.py build-context [--n 100000] [--top 25]

Scenarios: ``open``, ``resume``, ``build-context``, ``append-flush``, ``fork``, ``list``,
``import``. Engine (Rust) calls show up as single ``Engine.*`` rows: cProfile cannot see
inside them, so a large ``tottime`` on such a row means the time is in Rust.
``import`` prints the ``-X importtime`` breakdown instead.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workload  # noqa: E402

import sessiontree as st  # noqa: E402


def _scenario(name: str, n: int, tmp: Path) -> tuple[Callable[[], object], Callable[[], None]]:
    """The call to profile and a cleanup."""
    if name == "list":
        from sessiontree.repo import JsonlSessionRepo

        rw = workload.cached_repo(n)
        JsonlSessionRepo(rw.directory).list()
        return (lambda: JsonlSessionRepo(rw.directory).list()), lambda: None
    wl = workload.cached_session(n)
    wl.clear_side_files()
    if name == "open":

        def run() -> object:
            wl.clear_side_files()
            with st.JsonlSessionStorage.open(wl.path, readonly=True) as s:
                return len(s)

        return run, wl.clear_side_files
    if name == "resume":

        def resume() -> object:
            wl.clear_side_files()
            with st.Session(st.JsonlSessionStorage.open(wl.path)) as s:
                return s.build_context()

        return resume, wl.clear_side_files
    if name == "build-context":
        session = st.Session(st.JsonlSessionStorage.open(wl.path, readonly=True))
        return session.build_context, session.close
    if name == "append-flush":
        session = st.Session(st.JsonlSessionStorage.create(tmp / "a.jsonl", durability="flush"))

        def append() -> object:
            for _ in range(20_000):
                session.append_message(st.UserMessage("profile me " * 20))
            return None

        return append, session.close
    if name == "fork":
        from sessiontree.repo import JsonlSessionRepo

        repo = JsonlSessionRepo(wl.directory)
        target = wl.manifest.fork_target

        def fork() -> object:
            with repo.fork(wl.manifest.session_id, entry_id=target, position="at") as new:
                return len(new)

        def cleanup() -> None:
            for entry in os.scandir(wl.directory):
                if not entry.name.startswith(wl.manifest.session_id):
                    os.unlink(entry.path)

        return fork, cleanup
    raise SystemExit(f"unknown scenario {name!r}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("scenario")
    parser.add_argument("--n", type=int, default=None, help="entries (sessions for list)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    if args.scenario == "import":
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import sessiontree"],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        rows = [line for line in out.splitlines()[1:] if line.startswith("import time:")]
        rows.sort(key=lambda line: -int(line.split("|")[1]))
        print("\n".join([out.splitlines()[0], *rows[: args.top]]))
        return 0
    n = args.n or (1000 if args.scenario == "list" else 100_000)
    with tempfile.TemporaryDirectory() as tmp:
        run, cleanup = _scenario(args.scenario, n, Path(tmp))
        try:
            start = time.perf_counter()
            run()
            print(f"unprofiled: {time.perf_counter() - start:.4f} s")
            profiler = cProfile.Profile()
            profiler.enable()
            run()
            profiler.disable()
        finally:
            cleanup()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
