"""LangGraph's checkpointers on one long thread, in the same run (issue 30).

The peers' workload: a ``StateGraph`` whose one node adds one message per step to an
``add_messages`` channel, alternately an AI message with a tool call and the tool's result
(~4 KB), plus a step counter. The thread is run to ``steps`` in ten chunks (one
``invoke`` each, as a conversation's turns are), with:

- ``sessiontree-jsonl``: :class:`SessionTreeSaver` over a JSONL directory;
- ``sqlite``: LangGraph's ``SqliteSaver`` (``langgraph-checkpoint-sqlite``) on a file;
- ``sessiontree-postgres`` and ``postgres`` (LangGraph's ``PostgresSaver``) when
  ``SESSIONTREE_PG_DSN`` names a server.

Measured per saver: time per step in the first and the last chunk (flat means the cost of
a step does not grow with the thread), disk after the run (the directory, the SQLite file
with its WAL; not measured for PostgreSQL), the time a new saver takes to resume the
thread (``get_state``), and the time to read the whole ``get_state_history`` with that
new saver. Every saver must end with the same messages (checked).

Sizes: 40 steps in the smoke run; ``--bench-real`` runs 600 and 1,200;
``SESSIONTREE_BENCH_LANGGRAPH_STEPS=600,1200,2400,10000`` picks others. The figures are
printed (``-s``) as one JSON line per run, and kept in ``benchmark.extra_info``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from conftest import Bench

pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs sessiontree[langgraph-test]")

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

import sessiontree as st
from sessiontree.adapters.langgraph import SessionTreeSaver

# ~4 KB of tool output and ~0.5 KB of AI message: 2.3 KB a message on average, the size
# behind the SqliteSaver figure (6.5 GB for 2,400 steps, a full copy of the list
# per checkpoint).
TOOL_OUTPUT = "\n".join(
    f"{n:>4}  def handler_{n}(event):  # returns {{'ok': True}}" for n in range(80)
)
PLAN = " ".join(f"check {w}" for w in ("imports", "fixtures", "timeouts", "retries") * 10)
PG_DSN = os.environ.get("SESSIONTREE_PG_DSN")


class State(TypedDict):
    count: int
    target: int
    messages: Annotated[list[AnyMessage], add_messages]


def _step(state: State) -> dict[str, Any]:
    n = state["count"] + 1
    if n % 2:
        args = {"path": f"src/module_{n % 97}.py", "line": n}
        message: AnyMessage = AIMessage(
            content=f"Step {n}: reading module {n % 97} to find the failing handler; {PLAN}.",
            tool_calls=[{"name": "read_file", "args": args, "id": f"call_{n}"}],
            id=f"ai_{n}",
        )
    else:
        message = ToolMessage(content=TOOL_OUTPUT, tool_call_id=f"call_{n - 1}", id=f"tool_{n}")
    return {"count": n, "messages": [message]}


def _graph(checkpointer: Any) -> Any:
    graph = StateGraph(State)
    graph.add_node("agent", _step)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", lambda s: END if s["count"] >= s["target"] else "agent")
    return graph.compile(checkpointer=checkpointer)


def _sizes(bench: Bench) -> list[int]:
    override = os.environ.get("SESSIONTREE_BENCH_LANGGRAPH_STEPS")
    if override:
        return [int(s) for s in override.split(",") if s.strip()]
    return [600, 1200] if bench.real else [40]


def _disk(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# Each returns a factory of savers over the same store (a new one resumes the thread).
@contextmanager
def _sessiontree_jsonl(root: Path) -> Iterator[Callable[[], Any]]:
    yield lambda: SessionTreeSaver(st.JsonlSessionRepo(root / "threads"))


@contextmanager
def _sqlite(root: Path) -> Iterator[Callable[[], Any]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conns: list[sqlite3.Connection] = []

    def make() -> Any:
        conn = sqlite3.connect(root / "checkpoints.sqlite", check_same_thread=False)
        conns.append(conn)
        return SqliteSaver(conn)

    try:
        yield make
    finally:
        for conn in conns:
            conn.close()


@contextmanager
def _sessiontree_postgres(root: Path) -> Iterator[Callable[[], Any]]:
    from sessiontree.postgres import PostgresSessionRepo

    schema = "lgbench_" + uuid.uuid4().hex[:12]
    repos: list[Any] = []

    def make() -> Any:
        repo = PostgresSessionRepo(PG_DSN, schema=schema)
        repos.append(repo)
        return SessionTreeSaver(repo)

    try:
        yield make
    finally:
        for repo in repos:
            repo.close()
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@contextmanager
def _postgres(root: Path) -> Iterator[Callable[[], Any]]:
    from langgraph.checkpoint.postgres import PostgresSaver

    stack: list[Any] = []

    def make() -> Any:
        cm = PostgresSaver.from_conn_string(PG_DSN)  # type: ignore[arg-type]
        saver = cm.__enter__()
        stack.append(cm)
        saver.setup()
        return saver

    try:
        yield make
    finally:
        for cm in stack:
            cm.__exit__(None, None, None)


SAVERS: dict[str, Any] = {"sessiontree-jsonl": _sessiontree_jsonl, "sqlite": _sqlite}
# LangGraph's own cost per step, with no checkpointer: the state is passed from one chunk to
# the next (add_messages and the channels are linear in the thread's length themselves).
ALONE = "no-checkpointer"
if PG_DSN:
    SAVERS.update({"sessiontree-postgres": _sessiontree_postgres, "postgres": _postgres})


def _close(saver: Any) -> None:
    close = getattr(saver, "close", None)
    if isinstance(saver, SessionTreeSaver) and close is not None:
        close()


def test_langgraph_alone(benchmark: BenchmarkFixture, bench: Bench) -> None:
    for steps in _sizes(bench):
        app = _graph(None)
        chunk = max(steps // 10, 1)
        times: list[float] = []
        state: dict[str, Any] = {"count": 0, "messages": [HumanMessage("Fix the tests.")]}
        for target in range(chunk, steps + 1, chunk):
            started = time.perf_counter()
            state = app.invoke({**state, "target": target}, {"recursion_limit": steps + 10})
            times.append(time.perf_counter() - started)
        assert len(state["messages"]) == 1 + steps
        figures = {
            "impl": ALONE,
            "steps": steps,
            "first_chunk_ms_per_step": round(times[0] / chunk * 1000, 3),
            "last_chunk_ms_per_step": round(times[-1] / chunk * 1000, 3),
            "total_s": round(sum(times), 2),
        }
        benchmark.extra_info[str(steps)] = figures
        print(json.dumps(figures))
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


@pytest.mark.parametrize("impl", list(SAVERS))
@pytest.mark.parametrize("size_index", [0, 1, 2, 3])
def test_langgraph_thread(
    benchmark: BenchmarkFixture, bench: Bench, tmp_path: Path, impl: str, size_index: int
) -> None:
    sizes = _sizes(bench)
    if size_index >= len(sizes):
        pytest.skip("size not selected")
    steps = sizes[size_index]
    benchmark.group = f"langgraph-{steps}-steps"
    thread = {"configurable": {"thread_id": f"bench-{uuid.uuid4().hex[:8]}"}}
    config = {**thread, "recursion_limit": steps + 10}
    chunk = max(steps // 10, 1)
    figures: dict[str, Any] = {"impl": impl, "steps": steps}
    with SAVERS[impl](tmp_path) as make:
        saver = make()
        app = _graph(saver)
        chunk_times: list[float] = []

        def run() -> None:
            first: dict[str, Any] = {"count": 0, "messages": [HumanMessage("Fix the tests.")]}
            for target in range(chunk, steps + 1, chunk):
                started = time.perf_counter()
                app.invoke({**first, "target": target}, config)
                chunk_times.append(time.perf_counter() - started)
                first = {}

        benchmark.pedantic(run, rounds=1, iterations=1)
        messages = app.get_state(config).values["messages"]
        assert len(messages) == 1 + steps
        _close(saver)
        figures["first_chunk_ms_per_step"] = round(chunk_times[0] / chunk * 1000, 3)
        figures["last_chunk_ms_per_step"] = round(chunk_times[-1] / chunk * 1000, 3)
        figures["total_s"] = round(sum(chunk_times), 2)
        if not impl.endswith("postgres"):
            figures["disk_bytes"] = _disk(tmp_path)
        figures["messages_jsonl_bytes"] = sum(
            len(json.dumps(m.model_dump(), ensure_ascii=False).encode()) + 1 for m in messages
        )
        started = time.perf_counter()
        resumed = make()
        app = _graph(resumed)
        state = app.get_state(config)
        figures["resume_ms"] = round((time.perf_counter() - started) * 1000, 2)
        assert state.values["count"] == steps
        started = time.perf_counter()
        history = list(app.get_state_history(config))
        figures["history_s"] = round(time.perf_counter() - started, 3)
        figures["history_checkpoints"] = len(history)
        assert [m.content for m in history[0].values["messages"]] == [m.content for m in messages]
        bench.crosscheck(f"langgraph-{steps}", impl, (len(history), len(messages)))
        _close(resumed)
    benchmark.extra_info.update(figures)
    print(json.dumps(figures))


@pytest.mark.parametrize("impl", ["sessiontree-jsonl", "sqlite"])
def test_saver_alone(benchmark: BenchmarkFixture, bench: Bench, tmp_path: Path, impl: str) -> None:
    """The saver's own cost per step, without LangGraph around it (whose ``add_messages``
    is itself linear in the thread's length): a step is ``put_writes`` of the node's one
    message, then ``put`` of the next checkpoint with the grown list, as the loop calls
    them. ``SqliteSaver`` only up to 2,400 steps (at 10,000 it would write ~50 GB)."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    for steps in _sizes(bench):
        if impl == "sqlite" and steps > 2400:
            continue
        root = tmp_path / f"{impl}-{steps}"
        root.mkdir()
        with SAVERS[impl](root) as make:
            saver = make()
            cfg: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            messages: list[Any] = []
            chunk = max(steps // 10, 1)
            times: list[float] = []
            started = time.perf_counter()
            for n in range(1, steps + 1):
                message = _step({"count": n - 1, "target": steps, "messages": []})["messages"][0]
                if n > 1:
                    saver.put_writes(cfg, [("messages", [message]), ("count", n)], f"task-{n}")
                messages = [*messages, message]
                checkpoint = empty_checkpoint()
                checkpoint["id"] = str(uuid6(clock_seq=n))
                checkpoint["channel_values"] = {"messages": messages, "count": n}
                checkpoint["channel_versions"] = {"messages": n, "count": n}
                metadata: Any = {"source": "loop", "step": n}
                cfg = saver.put(cfg, checkpoint, metadata, {"messages": n, "count": n})
                if n % chunk == 0:
                    times.append(time.perf_counter() - started)
                    started = time.perf_counter()
            got = saver.get_tuple(cfg)
            assert got is not None and len(got.checkpoint["channel_values"]["messages"]) == steps
            _close(saver)
        figures = {
            "impl": f"{impl} (saver alone)",
            "steps": steps,
            "first_chunk_ms_per_step": round(times[0] / chunk * 1000, 3),
            "last_chunk_ms_per_step": round(times[-1] / chunk * 1000, 3),
            "total_s": round(sum(times), 2),
            "disk_bytes": _disk(root),
        }
        benchmark.extra_info[str(steps)] = figures
        print(json.dumps(figures))
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
