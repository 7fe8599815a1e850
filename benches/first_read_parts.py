"""Where the OpenAI adapter's first read goes, part by part, and what a stored binary form
of the items would buy (issue 27: the first read is short of 2x ``SQLiteSession``).

Usage::

    .venv/bin/python benches/first_read_parts.py [--n 10000] [--rounds 9]

On the benchmark's history (``test_bench_adapters_speed.openai_items``: user messages,
reasoning, function calls, 1-8 KB tool results, answers), written once into a temporary
folder, it times (best and median of ``rounds``; the collector off, except in the first reads):

- ``first read``: open + ``get_items()`` + close with nothing kept in the process, against
  ``SQLiteSession`` (a new object, ``get_items()``, close);
- ``reader + view``: the Rust pass of that read (``_core.openai_read_known`` filling the
  adapter's view), and the same without the view;
- ``lines``: the branch's lines read as ``bytes`` (the engine's reads alone);
- ``reader on lines``: the lines already in memory turned into ``(code, [item])`` pairs
  (``_core.openai_items_of_lines``): parsing and building;
- ``marshal``: ``marshal.loads`` of those pairs, of the items alone and of the entry id ->
  pair table the read keeps: the same Python objects built from a binary form, with no
  JSON to parse (marshal is not safe on files others may write: a floor, not a design);
- ``msgpack``: the same with ``msgpack.unpackb`` (safe on any input), when installed.
"""

from __future__ import annotations

import argparse
import asyncio
import marshal
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import test_bench_adapters_speed as speed  # noqa: E402
from timing import best_median  # noqa: E402

import sessiontree as st  # noqa: E402
from sessiontree import _core  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    from agents import SQLiteSession

    import sessiontree.adapters.openai_agents as oa

    with tempfile.TemporaryDirectory() as tmp:
        history = speed._history(args.n, Path(tmp))
        loop = asyncio.new_event_loop()
        repo = st.AsyncSessionRepo(st.JsonlSessionRepo(history.jsonl_dir))

        async def ours() -> list[Any]:
            async with await oa.OpenAIAgentsSession.open(repo, "bench") as session:
                return await session.get_items()

        async def sqlite() -> list[Any]:
            session = SQLiteSession("bench", history.sqlite_db)
            try:
                return await session.get_items()
            finally:
                session.close()

        def forget() -> None:
            oa.set_kept_bytes(oa.set_kept_bytes(0))

        rows: list[tuple[str, str]] = []
        rows.append(
            (
                "first read (sessiontree)",
                best_median(lambda: loop.run_until_complete(ours()), args.rounds, forget, True),
            )
        )
        rows.append(
            (
                "first read (SQLiteSession)",
                best_median(lambda: loop.run_until_complete(sqlite()), args.rounds, None, True),
            )
        )
        forget()
        loop.close()

        session = st.JsonlSessionRepo(history.jsonl_dir).open("bench")
        try:
            engine = session.storage._engine  # type: ignore[attr-defined]
            idxs = engine.path_indices(session.get_leaf_id(), True)
            lines = list(engine.lines(idxs))
            kind, key = oa.ITEM_CUSTOM_TYPE, oa.RESIDUAL_KEY
            rows.append(
                (
                    "reader + view",
                    best_median(
                        lambda: _core.openai_read_known(
                            engine, idxs, kind, key, {}, {}, ([], [], [], [])
                        ),
                        args.rounds,
                    ),
                )
            )
            rows.append(
                (
                    "reader, no view",
                    best_median(
                        lambda: _core.openai_read_known(engine, idxs, kind, key, {}, {}),
                        args.rounds,
                    ),
                )
            )
            rows.append(
                ("lines (bytes)", best_median(lambda: list(engine.lines(idxs)), args.rounds))
            )
            rows.append(
                (
                    "reader on lines in memory",
                    best_median(
                        lambda: _core.openai_items_of_lines(lines, kind, key, {}), args.rounds
                    ),
                )
            )
            pairs = _core.openai_items_of_lines(lines, kind, key, {})
            items = [item for _, found in pairs for item in found]
            table = dict(zip([engine.id_of(i) for i in idxs], pairs, strict=True))
            size = sum(len(line) for line in lines)
            for name, value in (("pairs", pairs), ("items", items), ("id table", table)):
                blob = marshal.dumps(value)
                rows.append(
                    (
                        f"marshal.loads, {name} ({len(blob) / size:.2f}x the lines)",
                        best_median(lambda b=blob: marshal.loads(b), args.rounds),
                    )
                )
            try:
                import msgpack  # type: ignore[import-not-found]
            except ImportError:
                msgpack = None
            if msgpack is not None:
                for name, value in (("pairs", pairs), ("id table", table)):
                    blob = msgpack.packb(value)
                    rows.append(
                        (
                            f"msgpack.unpackb, {name} ({len(blob) / size:.2f}x the lines)",
                            best_median(lambda b=blob: msgpack.unpackb(b), args.rounds),
                        )
                    )
        finally:
            session.close()
    print(f"{args.n:,} items, {size / 1e6:.1f} MB of lines; best / median of {args.rounds}")
    for name, figure in rows:
        print(f"  {name:<48} {figure:>22}")


if __name__ == "__main__":
    main()
