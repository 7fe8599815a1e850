"""What is written reads back exactly: every float as the same float (serde_json parses
with round-trip precision, as Python's ``json`` does), and a file another program wrote
with what Python's ``json`` reads but serde_json refuses inside a free-form value (a lone
surrogate escape, which JavaScript's ``JSON.stringify`` writes; a number past a float's
range) reads as ``json.loads`` reads it, never as a false "modified externally"."""

from __future__ import annotations

import json
import math
import pathlib
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import sessiontree as st
from conftest import header_line

# Floats across the exponents (where a parser without round-trip precision misses the
# last digit of about one in seven), and the edges. None is a whole number past 2**63:
# such a float may stand for a wide integer, and its value is parsed by Python's json.
_draw = random.Random(20261205)
FLOATS = [
    0.0,
    -0.0,
    5e-324,
    2.2250738585072014e-308,
    0.1 + 0.2,
    9.965147367961288e-29,
    *(_draw.uniform(-1e3, 1e3) * 10.0 ** _draw.randint(-300, 12) for _ in range(500)),
]


def test_floats_read_back_as_written(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    values = FLOATS
    cost = st.Cost(input=abs(values[6]), output=abs(values[9]), total=abs(values[-1]))
    with st.JsonlSessionStorage.create(path) as storage:
        session = st.Session(storage)
        session.append_message(
            st.AssistantMessage(
                content=[st.ToolCall("c1", "f", {"xs": values})],
                provider="p",
                model="m",
                usage=st.Usage(cost=cost),
            )
        )
        session.append_custom_entry("kind", {"xs": values})
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        message, custom = storage.get_entries()
        assert message.message.content[0].arguments == {"xs": values}
        assert message.message.usage.cost == cost
        assert custom.data == {"xs": values}
        # The context builds from the same lines the same values.
        (built,) = st.Session(storage).build_context().messages
        assert built.content[0].arguments == {"xs": values}


def test_what_python_json_reads_in_a_free_form_value_reads_as_it_reads_it(
    write_session: Callable[..., pathlib.Path],
) -> None:
    data = '{"t": "\\ud800 alone", "big": 1e400, "f": 9.965147367961288e-29}'
    line = (
        '{"type":"custom","id":"e1","parent_id":null,'
        '"timestamp":"2026-01-01T00:00:00.000Z","custom_type":"x","data":' + data + "}\n"
    )
    path = write_session(line.encode())
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        assert storage.load_report.issues == ()
        entry = storage.get_entry("e1")
        assert entry is not None
        assert entry.data == {"t": "\ud800 alone", "big": math.inf, "f": 9.965147367961288e-29}
        assert entry.data == json.loads(data)


_JSON = hs.recursive(
    hs.none()
    | hs.booleans()
    | hs.integers(min_value=-(2**70), max_value=2**70)
    | hs.floats(allow_nan=False, allow_infinity=False)
    | hs.sampled_from(FLOATS)
    | hs.text(),
    lambda inner: hs.lists(inner, max_size=4) | hs.dictionaries(hs.text(), inner, max_size=4),
    max_leaves=16,
)


def _exactly(a: Any, b: Any) -> bool:
    """Equal, of the same types all the way down, keys in the same order."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(_exactly(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(_exactly(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is float:
        return repr(a) == repr(b)
    return bool(a == b)


@settings(max_examples=80, deadline=None)
@given(value=_JSON, ascii=hs.booleans())
def test_any_value_reads_back_as_json_loads_reads_its_line(
    tmp_path_factory: pytest.TempPathFactory, value: Any, ascii: bool
) -> None:
    """Whatever JSON value a custom entry's data holds, written by another program with or
    without escaped non-ASCII, the entry read back holds what ``json.loads`` makes of it."""
    data = json.dumps(value, ensure_ascii=ascii)
    line = (
        '{"type":"custom","id":"e1","parent_id":null,'
        '"timestamp":"2026-01-01T00:00:00.000Z","custom_type":"x","data":' + data + "}\n"
    )
    path = tmp_path_factory.mktemp("values") / "s.jsonl"
    path.write_bytes(header_line() + line.encode())
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        entry = storage.get_entry("e1")
        assert entry is not None
        assert _exactly(entry.data, json.loads(data))
