"""Issue 26, item 2: a ``#[pyclass(frozen)]`` model type against the project's frozen,
slotted dataclass, both built in Rust from the same data (24,553 assistant messages of one
text block each: the context of the 100k-entry benchmark session).

Build the scratch extension, then run this with the project's interpreter::

    cargo build --release --manifest-path benches/model_repr/Cargo.toml \\
        --target-dir target/model_repr
    cp target/model_repr/release/libmodel_repr.so target/model_repr/model_repr.abi3.so
    .venv/bin/python benches/model_repr/measure.py

It prints, best / median of 9 with the collector paused: building the messages, reading
five fields of each, ``==`` between two equal builds, a pickle round trip, and which of the
standard operations each representation answers. Figures: ``benches/RESULTS.md``, "One
model representation".
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "target" / "model_repr"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import model_repr
from timing import best_median

from sessiontree.model.messages import AssistantMessage, TextContent, Usage

N = 24_553
USAGE = Usage()


def dataclasses_built() -> list[Any]:
    return model_repr.build_dataclass(N, USAGE, TextContent, AssistantMessage)  # type: ignore[no-any-return]


def pyclasses_built() -> list[Any]:
    return model_repr.build_pyclass(N, USAGE)  # type: ignore[no-any-return]


def reads(values: list[Any]) -> Callable[[], int]:
    def read() -> int:
        total = 0
        for m in values:
            total += len(m.content[0].text) + m.timestamp + len(m.model) + (m.api is None)
        return total

    return read


def answers(name: str, op: Callable[[], Any]) -> str:
    try:
        op()
    except Exception as e:  # the point is which operations work
        return f"{name}: {type(e).__name__}: {e}"
    return f"{name}: yes"


def report(kind: str, build: Callable[[], list[Any]]) -> None:
    values, again = build(), build()
    print(f"-- {kind}")
    print("build   ", best_median(build, 9))
    print("read    ", best_median(reads(values), 9))
    print(
        "==      ", best_median(lambda: sum(x == y for x, y in zip(values, again, strict=True)), 9)
    )
    print("  equal builds compare equal:", values[7] == again[7])
    first = values[0]
    print(answers("  hash", lambda: hash(first)))
    print(answers("  pickle", lambda: pickle.loads(pickle.dumps(first))))
    print(answers("  copy.copy", lambda: copy.copy(first)))
    print(answers("  dataclasses.replace", lambda: dataclasses.replace(first, model="x")))
    print("  repr:", repr(first)[:70])
    gc.collect()
    tracemalloc.start()
    kept = build()
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    print(f"memory   {size / 1e6:.1f} MB")


def main() -> None:
    assert reads(dataclasses_built())() == reads(pyclasses_built())()
    report("dataclass", dataclasses_built)
    report("pyclass", pyclasses_built)
    values = dataclasses_built()
    print(
        "pickle round trip of the dataclass messages",
        best_median(lambda: pickle.loads(pickle.dumps(values)), 3),
    )


if __name__ == "__main__":
    main()
