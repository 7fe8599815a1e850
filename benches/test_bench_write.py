"""The model's one writer (rust/py/encode.rs): every entry of a 10k-entry session as dicts
and as lines, and an append with ``flush`` against a bare ``os.write`` of the same line.

- ``write-dicts``: ``entry_to_dict`` (the dict sink of the writer's walk, free-form values
  held by reference) against writing each line and parsing it back
  (``_core.json_loads(entry_to_json(e))``), the other way the issue allowed.
- ``write-lines``: ``entry_to_json`` against Python's ``json`` writing the same objects
  with the settings of the Python writer it replaced (what earlier versions did).
- ``write-append``: ``Session.append_message`` with ``flush`` durability against a bare
  ``os.write`` of the same bytes to a file opened ``O_APPEND`` (the issue's reference:
  at most 2.5x).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

import sessiontree as st
from conftest import Bench
from sessiontree import _core

TEXT = (
    "Please run the failing test again with logging enabled, then look at the parser: "
    "the offset of the second line looks wrong after a torn write. Keep the fix small."
)


@pytest.fixture(scope="module")
def entries(bench: Bench) -> Iterator[list[st.SessionTreeEntry]]:
    wl = bench.workload("small")
    with st.JsonlSessionStorage.open(wl.path, readonly=True) as s:
        yield s.get_entries()
    wl.clear_side_files()


def _dumps(d: Any) -> bytes:
    return json.dumps(d, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


@pytest.mark.parametrize("impl", ["to_dict", "to_json+json_loads"])
def test_entries_as_dicts(
    benchmark: BenchmarkFixture, bench: Bench, entries: list[st.SessionTreeEntry], impl: str
) -> None:
    benchmark.group = f"write-dicts@{bench.label('small')}"
    to_dict, to_json, loads = st.entry_to_dict, st.entry_to_json, _core.json_loads
    if impl == "to_dict":
        out = benchmark(lambda: [to_dict(e) for e in entries])
    else:
        out = benchmark(lambda: [loads(to_json(e)) for e in entries])
    assert len(out) == len(entries)
    # The same objects either way (tuples held by reference come out as lists in JSON).
    assert _dumps(out[-1]) == to_json(entries[-1])
    benchmark.extra_info.update(scenario="write-dicts", impl=impl, n=len(entries))


@pytest.mark.parametrize("impl", ["entry_to_json", "json.dumps"])
def test_entries_as_lines(
    benchmark: BenchmarkFixture, bench: Bench, entries: list[st.SessionTreeEntry], impl: str
) -> None:
    benchmark.group = f"write-lines@{bench.label('small')}"
    if impl == "entry_to_json":
        to_json = st.entry_to_json
        out = benchmark(lambda: [to_json(e) for e in entries])
    else:
        dicts = [st.entry_to_dict(e) for e in entries]
        out = benchmark(lambda: [_dumps(d) for d in dicts])
    assert out == [st.entry_to_json(e) for e in entries]
    benchmark.extra_info.update(scenario="write-lines", impl=impl, n=len(entries))


@pytest.mark.parametrize("impl", ["sessiontree", "bare-write"])
def test_append_flush_against_a_bare_write(
    benchmark: BenchmarkFixture, scratch: Path, impl: str
) -> None:
    benchmark.group = "write-append"
    entry = st.MessageEntry(
        st.UserMessage(TEXT), id="0badcafe", parent_id=None, timestamp="2026-11-30T16:48:30.123Z"
    )
    line = st.entry_to_json(entry) + b"\n"
    if impl == "sessiontree":
        session = st.Session(st.JsonlSessionStorage.create(scratch / "s.jsonl", durability="flush"))
        benchmark(lambda: session.append_message(st.UserMessage(TEXT)))
        n = len(session)
        session.close()
        with st.JsonlSessionStorage.open(scratch / "s.jsonl", readonly=True) as again:
            assert len(again) == n and again.load_report.issues == ()
    else:
        fd = os.open(scratch / "bare.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            benchmark(lambda: os.write(fd, line))
        finally:
            os.close(fd)
    benchmark.extra_info.update(scenario="write-append", impl=impl)
