"""Best and median of repeated calls, for the benches' standalone scripts
(``first_read_parts.py``, ``model_repr/measure.py``); the pytest benches use
pytest-benchmark."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any


def best_median(
    fn: Callable[[], Any],
    rounds: int,
    before: Callable[[], None] | None = None,
    collector: bool = False,
) -> str:
    """``fn()`` called ``rounds`` times (``before()`` first, untimed), its result dropped
    after each timing; the collector off during each call unless ``collector``.
    Returns ``"best / median ms"``."""
    times = []
    for _ in range(rounds):
        if before is not None:
            before()
        gc.collect()
        if not collector:
            gc.disable()
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
        gc.enable()
        del out
    return f"{min(times) * 1e3:.2f} / {statistics.median(times) * 1e3:.2f} ms"
