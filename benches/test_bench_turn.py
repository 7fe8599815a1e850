"""One agent turn: append a user and an assistant message, then ``build_context()``.

This is what an agent pays on every turn. Each implementation appends to its own copy of
the session (durability ``flush``); the context is built once, untimed, before the rounds
(an agent resuming a session pays that once, see ``test_bench_read.py`` and the resume
scenario). sessiontree extends the context it keeps; the plain-Python baseline rebuilds
it, as a user's own code would. After the run sessiontree's context must equal a cold
build of the same file.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import baseline
import pytest
from harness import IMPLS
from pytest_benchmark.fixture import BenchmarkFixture

import sessiontree as st
from conftest import Bench

USER = "Run the failing test again with logging on, then fix the offset of the second line."
REPLY = "The offset was read before the torn tail was cut; I moved the check after it."


def _assistant() -> st.AssistantMessage:
    return st.AssistantMessage(
        [st.TextContent(REPLY)],
        "anthropic",
        "claude-sonnet-4-5",
        usage=st.Usage(input=900, output=40, total_tokens=940),
    )


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("size", ["tiny", "small", "large", "huge"])
def test_agent_turn(
    benchmark: BenchmarkFixture, bench: Bench, scratch: Path, size: str, impl: str
) -> None:
    """append user + append assistant + build_context, at 1k / 10k / 100k (/ 1M) entries."""
    benchmark.group = f"agent-turn@{bench.label(size)}"
    wl = bench.workload(size)
    path = scratch / f"{impl}.jsonl"
    shutil.copyfile(wl.path, path)
    if impl == "sessiontree":
        session = st.Session(st.JsonlSessionStorage.open(path, durability="flush"))
        session.build_context()

        def turn() -> int:
            session.append_message(st.UserMessage(USER))
            session.append_message(_assistant())
            return len(session.build_context().messages)

        rounds = 200 if bench.real else 2
        benchmark.pedantic(turn, rounds=rounds, warmup_rounds=5 if bench.real else 0)
        incremental = session.build_context()
        session.clear_context_cache()
        assert session.build_context() == incremental
        assert [m.role for m in incremental.messages[-2:]] == ["user", "assistant"]
        session.close()
    else:
        bench.baseline_fits(size)
        bl = baseline.open_session(path)
        bl.build_context()

        def bl_turn() -> int:
            bl.append_user_message(USER)
            reply = {
                "role": "assistant",
                "content": [{"type": "text", "text": REPLY}],
                "api": None,
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "usage": {"input": 900, "output": 40, "total_tokens": 940},
                "stop_reason": "stop",
                "error_message": None,
                "timestamp": baseline.iso_to_ms(baseline.iso_now()),
            }
            bl.append("message", {"message": reply})
            return len(bl.build_context()["messages"])

        benchmark.pedantic(bl_turn, rounds=bench.rounds(impl, size), warmup_rounds=0)
        bl.close()
    benchmark.extra_info.update(scenario="agent-turn", impl=impl, n=wl.manifest.n)
