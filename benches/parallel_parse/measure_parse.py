"""Issue 27, the first read: what parsing on a second core would buy.

Build the scratch extension, then run this with the project's interpreter::

    cargo build --release --manifest-path benches/parallel_parse/Cargo.toml \\
        --target-dir target/parallel_parse
    cp target/parallel_parse/release/libparallel_parse.so \\
        target/parallel_parse/parallel_parse.abi3.so
    .venv/bin/python benches/parallel_parse/measure_parse.py [--n 10000]

On the lines of the adapter benchmark's session (``test_bench_adapters_speed``: 1-8 KB
tool results, an escape every ~12 bytes), best / median of 9 with the collector paused:

- ``whole lines``: every line built as ``json.loads`` builds it, in one pass from the text
  (how the project's readers work), from tapes made on one worker thread, and with
  ``marshal`` (the same objects from a binary form: the cost of making them);
- ``the adapter's share``: each line's ``message.content`` and ``message.openai_agents``
  built, the rest stepped over (the part of a line the adapter's reader builds), the same
  three ways, the parallel one with 1 or 2 workers, with and without this thread making
  tapes while none is ready (``helping``);
- ``tapes alone``: parsing every line into a tape, on one thread.

The ratio between the one pass and the best parallel way of the adapter's share is what a
parallel reader could gain on the adapter's first read. Figures:
``benches/RESULTS-adapters.md``, "Seventh round".
"""

from __future__ import annotations

import argparse
import gc
import json
import marshal
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2] / "target" / "parallel_parse"))
sys.path.insert(0, str(HERE.parents[1]))

import parallel_parse  # noqa: E402
import test_bench_adapters_speed as speed  # noqa: E402
from timing import best_median  # noqa: E402

import sessiontree as st  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        history = speed._history(args.n, Path(tmp))
        session = st.JsonlSessionRepo(history.jsonl_dir).open("bench")
        try:
            engine = session.storage._engine  # type: ignore[attr-defined]
            lines = list(engine.lines(engine.path_indices(session.get_leaf_id(), True)))
        finally:
            session.close()
    want = [json.loads(line) for line in lines]
    share = parallel_parse.direct(lines, share=True)
    assert parallel_parse.direct(lines) == want
    assert parallel_parse.parallel(lines, 1) == want
    for workers in (1, 2):
        for helping in (False, True):
            assert parallel_parse.parallel(lines, workers, help=helping, share=True) == share
    whole, part = marshal.dumps(want), marshal.dumps(share)
    del want, share
    gc.collect()
    rows = [
        ("whole lines: one pass", lambda: parallel_parse.direct(lines)),
        ("whole lines: tapes, 1 worker", lambda: parallel_parse.parallel(lines, 1)),
        ("whole lines: marshal", lambda: marshal.loads(whole)),
        ("adapter's share: one pass", lambda: parallel_parse.direct(lines, share=True)),
        ("adapter's share: marshal", lambda: marshal.loads(part)),
    ]
    for workers in (1, 2):
        for helping in (False, True):
            rows.append(
                (
                    f"adapter's share: {workers} worker{'s' if workers > 1 else ''}"
                    + (", helping" if helping else ""),
                    lambda w=workers, h=helping: parallel_parse.parallel(
                        lines, w, help=h, share=True
                    ),
                )
            )
    rows.append(("tapes alone, 1 thread", lambda: parallel_parse.tapes_only(lines)))
    size = sum(len(line) for line in lines)
    print(f"{len(lines):,} lines, {size / 1e6:.1f} MB; best / median of {args.rounds}")
    for name, run in rows:
        print(f"  {name:<40} {best_median(run, args.rounds):>22}")


if __name__ == "__main__":
    main()
