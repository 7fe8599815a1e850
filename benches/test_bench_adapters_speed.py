"""Speed through the adapters (issue 27, item 1), each against the framework's own store in
the same run, on the same messages: user messages, assistant messages with tool calls and
1-8 KB tool results.

OpenAI Agents SDK, :class:`OpenAIAgentsSession` (JSONL) against ``SQLiteSession`` (a SQLite
file), on a history of ``n`` items (10k and 100k with ``--bench-real``):

- ``openai-turn``: an agent turn as the ``Runner`` makes it: ``add_items`` of 2 items, then
  ``get_items()`` of the whole history, on the object that holds the session
  (``sessiontree-shared``: opened with ``item_copies="shared"``).
- ``openai-reopen``: open the session (a new object), ``get_items()``, close, in one
  process (the SDK's pattern of one session object per request; the process keeps the
  converted items past the close); ``sessiontree-cold`` empties that store of the process
  (``set_kept_bytes(0)``) before each round: a first read, as a new process makes it.
- ``openai-add-batch``: ``add_items`` of the whole history at once, into a new session.
- ``openai-add-one``: ``add_items`` of one item at a time (at most 10k items).
- ``openai-branch``: branch from the middle turn, against ``AdvancedSQLiteSession``'s
  ``create_branch_from_turn`` (the leaf goes back to the tip between rounds, untimed).

pydantic-ai: ``pydantic-turn``, ``load`` + ``save`` of 2 new messages, at a tenth of ``n``
and at ``n`` messages (at most 10k), against ``InMemoryConversationStore``
(``sessiontree``: the default ``message_copies="tail"``; ``sessiontree-fresh`` and
``sessiontree-shared``: the store opened with ``"fresh"`` or ``"shared"``).

Claude Agent SDK: ``claude-load`` (a new store object each round: the first load after
opening) and ``claude-append`` (one batch of 2 entries) on a transcript of ``n`` entries,
against ``InMemorySessionStore``.

``SESSIONTREE_BENCH_ADAPTER_SIZES`` (comma-separated item counts) overrides the sizes.
The smoke run (no ``--bench-real``) uses 60 items, untimed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

import sessiontree as st
from conftest import Bench, human


def _sizes() -> list[int]:
    override = os.environ.get("SESSIONTREE_BENCH_ADAPTER_SIZES")
    if override:
        return [int(x) for x in override.split(",") if x.strip()]
    return [10_000, 100_000]


def _size_params() -> list[Any]:
    return [pytest.param(n, id=human(n)) for n in _sizes()]


def _n(bench: Bench, n: int) -> int:
    return n if bench.real else 60


def _rounds(bench: Bench, n: int, slow: bool = False) -> int:
    if not bench.real:
        return 1
    if n >= 100_000:
        return 2 if slow else 5
    return 3 if slow else 15


def _output(turn: int) -> str:
    """A tool result of 1-8 KB (escapes and non-ASCII text included)."""
    size = 1024 * (1 + turn % 8)
    line = f"line {turn}: def f(x):\\n    return {{'x': x}}  # \u00e9\t\n"
    return (line * (size // len(line) + 1))[:size]


def openai_items(n: int, start: int = 0) -> list[Any]:
    """``n`` response items, five per turn: a user message, a reasoning item, a function
    call, its output (1-8 KB), the assistant's answer, shaped as the SDK stores them."""
    out: list[Any] = []
    turn = start
    while len(out) < n:
        out += [
            {
                "content": f"Turn {turn}: fix the failing test in module {turn % 97}.",
                "role": "user",
            },
            {
                "id": f"rs_{turn}",
                "summary": [{"text": f"Look at module {turn % 97} first.", "type": "summary_text"}],
                "type": "reasoning",
            },
            {
                "arguments": json.dumps({"path": f"src/m{turn % 97}.py", "line": turn}),
                "call_id": f"call_{turn}",
                "name": "read_file",
                "type": "function_call",
                "id": f"fc_{turn}",
                "status": "completed",
            },
            {"call_id": f"call_{turn}", "output": _output(turn), "type": "function_call_output"},
            {
                "id": f"msg_{turn}",
                "content": [
                    {
                        "annotations": [],
                        "text": f"Fixed the off-by-one in m{turn % 97}.py.",
                        "type": "output_text",
                        "logprobs": [],
                    }
                ],
                "role": "assistant",
                "status": "completed",
                "type": "message",
            },
        ]
        turn += 1
    return out[:n]


def _run(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    return loop.run_until_complete(coro)


@dataclass
class History:
    """A history of ``n`` items written once per size by each store, copied per test."""

    n: int
    items: list[Any]
    jsonl_dir: Path
    sqlite_db: Path
    advanced_db: Path


_histories: dict[int, History] = {}


def _history(n: int, root: Path) -> History:
    found = _histories.get(n)
    if found is not None:
        return found
    from agents import SQLiteSession
    from agents.extensions.memory import AdvancedSQLiteSession

    from sessiontree.adapters.openai_agents import OpenAIAgentsSession

    items = openai_items(n)
    where = root / f"history-{n}"
    where.mkdir(parents=True, exist_ok=True)
    loop = asyncio.new_event_loop()
    try:
        repo = st.AsyncSessionRepo(st.JsonlSessionRepo(where / "jsonl"))
        ours = _run(loop, OpenAIAgentsSession.open(repo, "bench"))
        sqlite = SQLiteSession("bench", where / "sqlite.db")
        advanced = AdvancedSQLiteSession(
            session_id="bench", db_path=where / "advanced.db", create_tables=True
        )
        for start in range(0, n, 5):  # one add_items per turn, as the Runner does
            turn = items[start : start + 5]
            _run(loop, ours.add_items(turn))
            _run(loop, advanced.add_items(turn))
        _run(loop, sqlite.add_items(items))
        _run(loop, ours.close())
        sqlite.close()
        advanced.close()
    finally:
        loop.close()
    found = _histories[n] = History(
        n, items, where / "jsonl", where / "sqlite.db", where / "advanced.db"
    )
    return found


@pytest.fixture(scope="module")
def history_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("adapter-histories", numbered=True)
    yield path
    _histories.clear()
    shutil.rmtree(path, ignore_errors=True)


def _copy(history: History, scratch: Path) -> tuple[Path, Path, Path]:
    jsonl = scratch / "jsonl"
    shutil.copytree(history.jsonl_dir, jsonl)
    sqlite = scratch / "sqlite.db"
    advanced = scratch / "advanced.db"
    for src, dst in ((history.sqlite_db, sqlite), (history.advanced_db, advanced)):
        shutil.copy(src, dst)
        for side in ("-wal", "-shm"):
            if Path(f"{src}{side}").exists():
                shutil.copy(f"{src}{side}", f"{dst}{side}")
    return jsonl, sqlite, advanced


def _same(got: list[Any], want: list[Any]) -> None:
    assert len(got) == len(want)
    assert json.dumps(got) == json.dumps(want)


def _pedantic(
    benchmark: BenchmarkFixture,
    fn: Callable[[], Any],
    rounds: int,
    setup: Callable[[], Any] | None = None,
) -> Any:
    return benchmark.pedantic(
        fn,
        setup=setup,
        rounds=rounds,
        iterations=1,
        warmup_rounds=0,
    )


# ------------------------------------------------------------------------------ OpenAI


OPENAI = ["sessiontree", "sqlite"]


def _openai_setup(bench: Bench) -> None:
    pytest.importorskip("agents", reason="the openai-agents extra is not installed")


@pytest.mark.parametrize("impl", [*OPENAI, "sessiontree-shared"])
@pytest.mark.parametrize("size", _size_params())
def test_openai_turn(
    benchmark: BenchmarkFixture,
    bench: Bench,
    scratch: Path,
    history_root: Path,
    size: int,
    impl: str,
) -> None:
    """An agent turn: ``add_items`` of 2 items, then ``get_items()``."""
    _openai_setup(bench)
    from agents import SQLiteSession

    from sessiontree.adapters.openai_agents import OpenAIAgentsSession

    n = _n(bench, size)
    history = _history(n, history_root)
    jsonl, sqlite_db, _ = _copy(history, scratch)
    benchmark.group = f"openai-turn@{human(n)}"
    loop = asyncio.new_event_loop()
    try:
        session: Any
        if impl == "sqlite":
            session = SQLiteSession("bench", sqlite_db)
        else:
            repo = st.AsyncSessionRepo(st.JsonlSessionRepo(jsonl))
            shared: Any = {"item_copies": "shared"} if impl == "sessiontree-shared" else {}
            session = _run(loop, OpenAIAgentsSession.open(repo, "bench", **shared))
        _run(loop, session.get_items())  # the run's first turn read the history
        added: list[Any] = []
        rounds = _rounds(bench, n)
        new = openai_items(2 * rounds + 2, start=10**6)
        pairs = iter([new[k : k + 2] for k in range(0, len(new), 2)])

        async def turn() -> list[Any]:
            pair = next(pairs)
            added.extend(pair)
            await session.add_items(pair)
            return await session.get_items()  # type: ignore[no-any-return]

        got = _pedantic(benchmark, lambda: _run(loop, turn()), rounds)
        _same(got, history.items + added)
        if impl == "sqlite":
            session.close()
        else:
            _run(loop, session.close())
    finally:
        loop.close()
    benchmark.extra_info.update(scenario="openai-turn", impl=impl, n=n)


@pytest.mark.parametrize("impl", [*OPENAI, "sessiontree-cold"])
@pytest.mark.parametrize("size", _size_params())
def test_openai_reopen(
    benchmark: BenchmarkFixture,
    bench: Bench,
    scratch: Path,
    history_root: Path,
    size: int,
    impl: str,
) -> None:
    """Open the session (a new object), ``get_items()``, close."""
    _openai_setup(bench)
    from agents import SQLiteSession

    from sessiontree.adapters.openai_agents import OpenAIAgentsSession

    n = _n(bench, size)
    history = _history(n, history_root)
    jsonl, sqlite_db, _ = _copy(history, scratch)
    benchmark.group = f"openai-reopen@{human(n)}"
    loop = asyncio.new_event_loop()
    try:
        repo = st.AsyncSessionRepo(st.JsonlSessionRepo(jsonl))

        async def reopen() -> list[Any]:
            if impl == "sqlite":
                session = SQLiteSession("bench", sqlite_db)
                try:
                    return await session.get_items()
                finally:
                    session.close()
            async with await OpenAIAgentsSession.open(repo, "bench") as ours:
                return await ours.get_items()

        from sessiontree.adapters.openai_agents import set_kept_bytes

        def forget() -> None:
            set_kept_bytes(set_kept_bytes(0))

        setup: Callable[[], Any] | None = forget if impl == "sessiontree-cold" else None
        if impl == "sessiontree":
            _run(loop, reopen())  # an earlier request of the process read the session

        got = _pedantic(
            benchmark, lambda: _run(loop, reopen()), _rounds(bench, n, slow=True), setup=setup
        )
        _same(got, history.items)
    finally:
        loop.close()
    benchmark.extra_info.update(scenario="openai-reopen", impl=impl, n=n)


@pytest.mark.parametrize("impl", OPENAI)
@pytest.mark.parametrize("size", _size_params())
def test_openai_add_batch(
    benchmark: BenchmarkFixture,
    bench: Bench,
    scratch: Path,
    history_root: Path,
    size: int,
    impl: str,
) -> None:
    """``add_items`` of the whole history at once, into a new session."""
    _openai_setup(bench)
    from agents import SQLiteSession

    from sessiontree.adapters.openai_agents import OpenAIAgentsSession

    n = _n(bench, size)
    items = _history(n, history_root).items
    benchmark.group = f"openai-add-batch@{human(n)}"
    loop = asyncio.new_event_loop()
    repo = st.AsyncSessionRepo(st.JsonlSessionRepo(scratch / "jsonl"))
    sessions: list[Any] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        k = len(sessions)
        session: Any
        if impl == "sqlite":
            session = SQLiteSession(f"batch-{k}", scratch / f"batch-{k}.db")
        else:
            session = _run(loop, OpenAIAgentsSession.open(repo, f"batch-{k}"))
        sessions.append(session)
        return (session,), {}

    try:
        _pedantic(
            benchmark,
            lambda session: _run(loop, session.add_items(items)),
            _rounds(bench, n, slow=True),
            setup=setup,
        )
        last = sessions[-1]
        _same(_run(loop, last.get_items()), items)
        for session in sessions:
            if impl == "sqlite":
                session.close()
            else:
                _run(loop, session.close())
    finally:
        loop.close()
    benchmark.extra_info.update(scenario="openai-add-batch", impl=impl, n=n)


@pytest.mark.parametrize("impl", OPENAI)
@pytest.mark.parametrize("size", _size_params())
def test_openai_add_one(
    benchmark: BenchmarkFixture,
    bench: Bench,
    scratch: Path,
    history_root: Path,
    size: int,
    impl: str,
) -> None:
    """``add_items`` of one item at a time (at most 10k items, one round)."""
    _openai_setup(bench)
    from agents import SQLiteSession

    from sessiontree.adapters.openai_agents import OpenAIAgentsSession

    n = _n(bench, size)
    if n > 10_000:
        pytest.skip("one at a time is measured at 10k items (SQLiteSession commits each)")
    items = _history(n, history_root).items
    benchmark.group = f"openai-add-one@{human(n)}"
    loop = asyncio.new_event_loop()
    try:
        session: Any
        if impl == "sqlite":
            session = SQLiteSession("one", scratch / "one.db")
        else:
            repo = st.AsyncSessionRepo(st.JsonlSessionRepo(scratch / "jsonl"))
            session = _run(loop, OpenAIAgentsSession.open(repo, "one"))

        async def add_one() -> None:
            for item in items:
                await session.add_items([item])

        _pedantic(benchmark, lambda: _run(loop, add_one()), 1)
        _same(_run(loop, session.get_items()), items)
        if impl == "sqlite":
            session.close()
        else:
            _run(loop, session.close())
    finally:
        loop.close()
    benchmark.extra_info.update(scenario="openai-add-one", impl=impl, n=n)


@pytest.mark.parametrize("impl", ["sessiontree", "advanced-sqlite"])
@pytest.mark.parametrize("size", _size_params())
def test_openai_branch(
    benchmark: BenchmarkFixture,
    bench: Bench,
    scratch: Path,
    history_root: Path,
    size: int,
    impl: str,
) -> None:
    """Branch from the middle turn (the leaf goes back to the tip between rounds)."""
    _openai_setup(bench)
    from agents.extensions.memory import AdvancedSQLiteSession

    from sessiontree.adapters.openai_agents import OpenAIAgentsSession

    n = _n(bench, size)
    history = _history(n, history_root)
    jsonl, _, advanced_db = _copy(history, scratch)
    turns = (n + 4) // 5
    middle = turns // 2  # AdvancedSQLiteSession numbers turns from 1; branch(turn=k) keeps k
    benchmark.group = f"openai-branch@{human(n)}"
    loop = asyncio.new_event_loop()
    try:
        session: Any
        if impl == "advanced-sqlite":
            session = AdvancedSQLiteSession(session_id="bench", db_path=advanced_db)
            made = iter(range(10**6))

            def setup() -> Any:
                _run(loop, session.switch_to_branch("main"))

            def branch() -> Any:
                return _run(loop, session.create_branch_from_turn(middle + 1, f"b{next(made)}"))
        else:
            repo = st.AsyncSessionRepo(st.JsonlSessionRepo(jsonl))
            session = _run(loop, OpenAIAgentsSession.open(repo, "bench"))
            _run(loop, session.get_items())  # the object has served the run's turns
            tip = _run(loop, session.get_item_entries(limit=1))[0].entry_id

            def setup() -> Any:
                _run(loop, session.branch(from_entry=tip))

            def branch() -> Any:
                return _run(loop, session.branch(turn=middle))

        _pedantic(benchmark, branch, _rounds(bench, n), setup=setup)
        # Both keep the turns before the middle one (the branch continues from there).
        _same(_run(loop, session.get_items()), history.items[: 5 * middle])
        if impl == "advanced-sqlite":
            session.close()
        else:
            _run(loop, session.close())
    finally:
        loop.close()
    benchmark.extra_info.update(scenario="openai-branch", impl=impl, n=n)


# ------------------------------------------------------------------------- pydantic-ai


def _conversation(n: int, start: int = 0) -> list[Any]:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.usage import RequestUsage

    t = datetime(2026, 12, 1, tzinfo=timezone.utc)
    out: list[Any] = []
    turn = start
    while len(out) < n:
        call = f"call_{turn}"
        out += [
            ModelRequest(
                parts=[UserPromptPart(f"Turn {turn}: fix module {turn % 97}.", timestamp=t)]
            ),
            ModelResponse(
                parts=[ToolCallPart("read_file", {"path": f"src/m{turn % 97}.py"}, call)],
                usage=RequestUsage(input_tokens=900 + turn % 1000, output_tokens=20),
                model_name="claude-sonnet-4-5",
                provider_name="anthropic",
                timestamp=t,
            ),
            ModelRequest(parts=[ToolReturnPart("read_file", _output(turn), call, timestamp=t)]),
            ModelResponse(
                parts=[TextPart(f"Fixed the off-by-one in m{turn % 97}.py.")],
                usage=RequestUsage(input_tokens=950 + turn % 1000, output_tokens=12),
                model_name="claude-sonnet-4-5",
                provider_name="anthropic",
                timestamp=t,
            ),
        ]
        turn += 1
    return out[:n]


@pytest.mark.parametrize(
    "impl", ["sessiontree", "sessiontree-fresh", "sessiontree-shared", "in-memory"]
)
@pytest.mark.parametrize("length", ["tenth", "full"])
@pytest.mark.parametrize("size", _size_params())
def test_pydantic_turn(
    benchmark: BenchmarkFixture, bench: Bench, scratch: Path, size: int, length: str, impl: str
) -> None:
    """A turn: ``load``, 2 new messages, ``save`` (at most 10k messages)."""
    pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.conversation_store import InMemoryConversationStore

    from sessiontree.adapters.pydantic_ai import PydanticAIConversationStore

    n = min(_n(bench, size), 10_000)
    if length == "tenth":
        n //= 10
    if size > 10_000 and bench.real:
        pytest.skip("pydantic-ai turns are measured at 1k and 10k messages")
    messages = _conversation(n)
    benchmark.group = f"pydantic-turn@{human(n)}"
    loop = asyncio.new_event_loop()
    try:
        store: Any
        if impl == "in-memory":
            store = InMemoryConversationStore()
        else:
            repo = st.AsyncSessionRepo(st.JsonlSessionRepo(scratch))
            copies: Any = {"sessiontree-shared": "shared", "sessiontree-fresh": "fresh"}.get(
                impl, "tail"
            )
            store = _run(
                loop, PydanticAIConversationStore.open(repo, "bench", message_copies=copies)
            )
        _run(loop, store.save(Conversation(conversation_id="long", messages=messages)))
        rounds = _rounds(bench, n)
        new = _conversation(2 * rounds + 2, start=10**6)
        pairs = iter([new[k : k + 2] for k in range(0, len(new), 2)])
        added: list[Any] = []

        async def turn() -> Any:
            conversation = await store.load("long")
            pair = next(pairs)
            added.extend(pair)
            conversation.messages.extend(pair)
            await store.save(conversation)
            return conversation

        _pedantic(benchmark, lambda: _run(loop, turn()), rounds)
        loaded = _run(loop, store.load("long"))
        assert loaded.messages == messages + added
        if impl != "in-memory":
            _run(loop, store.close())
    finally:
        loop.close()
    benchmark.extra_info.update(scenario="pydantic-turn", impl=impl, n=n)


# ---------------------------------------------------------------------- Claude Agent SDK


def claude_entries(n: int, session_id: str, start: int = 0, parent: str | None = None) -> list[Any]:
    """``n`` transcript entries, four per turn: a user prompt, an assistant tool use, its
    result (1-8 KB), the assistant's answer; each ``parentUuid`` the one before."""
    out: list[Any] = []
    turn = start
    while len(out) < n:
        call = f"toolu_{turn}"
        bodies: list[tuple[str, Any]] = [
            ("user", {"role": "user", "content": f"Turn {turn}: fix module {turn % 97}."}),
            (
                "assistant",
                {
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": call,
                            "name": "Read",
                            "input": {"file_path": f"src/m{turn % 97}.py"},
                        }
                    ],
                },
            ),
            (
                "user",
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": call, "content": _output(turn)}
                    ],
                },
            ),
            (
                "assistant",
                {
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": f"Fixed m{turn % 97}.py."}],
                },
            ),
        ]
        for k, (kind, message) in enumerate(bodies):
            uuid = f"00000000-0000-4000-8000-{turn:08d}{k:04d}"
            out.append(
                {
                    "type": kind,
                    "uuid": uuid,
                    "parentUuid": parent,
                    "sessionId": session_id,
                    "timestamp": "2026-12-01T00:00:00.000Z",
                    "message": message,
                }
            )
            parent = uuid
        turn += 1
    return out[:n]


@pytest.mark.parametrize("impl", ["sessiontree", "in-memory"])
@pytest.mark.parametrize("op", ["load", "append"])
@pytest.mark.parametrize("size", _size_params())
def test_claude(
    benchmark: BenchmarkFixture, bench: Bench, scratch: Path, size: int, op: str, impl: str
) -> None:
    """``load`` (a new store object each round) and ``append`` of 2 entries."""
    pytest.importorskip("claude_agent_sdk", reason="the claude-agent-sdk extra is not installed")
    from claude_agent_sdk import InMemorySessionStore

    from sessiontree.adapters.claude_agent_sdk import ClaudeAgentSessionStore

    n = _n(bench, size)
    sid = "7d0c1e9e-0000-4000-8000-000000000001"
    key: Any = {"project_key": "bench-project", "session_id": sid}
    entries = claude_entries(n, sid)
    benchmark.group = f"claude-{op}@{human(n)}"
    loop = asyncio.new_event_loop()
    repo = st.AsyncSessionRepo(st.JsonlSessionRepo(scratch))
    try:
        store: Any = (
            InMemorySessionStore() if impl == "in-memory" else ClaudeAgentSessionStore(repo)
        )
        for start in range(0, n, 1000):
            _run(loop, store.append(key, entries[start : start + 1000]))
        rounds = _rounds(bench, n, slow=op == "load")
        if op == "load":
            if impl == "sessiontree":
                _run(loop, store.close())

            async def load() -> Any:
                if impl == "in-memory":
                    return await store.load(key)
                fresh = ClaudeAgentSessionStore(repo)
                try:
                    return await fresh.load(key)
                finally:
                    await fresh.close()

            got = _pedantic(benchmark, lambda: _run(loop, load()), rounds)
            _same(got, entries)
        else:
            new = claude_entries(2 * rounds + 2, sid, start=10**6, parent=entries[-1]["uuid"])
            pairs = iter([new[k : k + 2] for k in range(0, len(new), 2)])
            _pedantic(benchmark, lambda: _run(loop, store.append(key, next(pairs))), rounds)
            assert len(_run(loop, store.load(key))) == n + 2 * rounds
            if impl == "sessiontree":
                _run(loop, store.close())
    finally:
        loop.close()
    benchmark.extra_info.update(scenario=f"claude-{op}", impl=impl, n=n)


@pytest.mark.parametrize("impl", ["sessiontree", "in-memory", "sdk-file"])
@pytest.mark.parametrize("size", _size_params())
def test_claude_messages(
    benchmark: BenchmarkFixture,
    bench: Bench,
    scratch: Path,
    size: int,
    impl: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session's messages as the SDK reads them: ``get_session_messages_from_store``
    over our store (a new store object each round) or ``InMemorySessionStore``, against
    ``get_session_messages``, the SDK's reader of its own JSONL transcript files
    (``CLAUDE_CONFIG_DIR/projects/<project>/<session>.jsonl``, written here as the CLI
    writes it: one entry a line)."""
    pytest.importorskip("claude_agent_sdk", reason="the claude-agent-sdk extra is not installed")
    from claude_agent_sdk import (
        InMemorySessionStore,
        get_session_messages,
        get_session_messages_from_store,
        project_key_for_directory,
    )

    from sessiontree.adapters.claude_agent_sdk import ClaudeAgentSessionStore

    n = _n(bench, size)
    sid = "7d0c1e9e-0000-4000-8000-000000000002"
    project = scratch / "project"
    project.mkdir()
    key: Any = {"project_key": project_key_for_directory(project), "session_id": sid}
    entries = claude_entries(n, sid)
    benchmark.group = f"claude-messages@{human(n)}"
    loop = asyncio.new_event_loop()
    repo = st.AsyncSessionRepo(st.JsonlSessionRepo(scratch / "jsonl"))
    try:
        store: Any = None
        if impl == "sdk-file":
            config = scratch / "claude"
            monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
            folder = config / "projects" / key["project_key"]
            folder.mkdir(parents=True)
            with (folder / f"{sid}.jsonl").open("w", encoding="utf-8") as f:
                for entry in entries:
                    f.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")
        else:
            store = InMemorySessionStore() if impl == "in-memory" else ClaudeAgentSessionStore(repo)
            for start in range(0, n, 1000):
                _run(loop, store.append(key, entries[start : start + 1000]))
            if impl == "sessiontree":
                _run(loop, store.close())

        async def read() -> Any:
            if impl == "sdk-file":
                return get_session_messages(sid, directory=str(project))
            if impl == "in-memory":
                return await get_session_messages_from_store(store, sid, directory=str(project))
            fresh = ClaudeAgentSessionStore(repo)
            try:
                return await get_session_messages_from_store(fresh, sid, directory=str(project))
            finally:
                await fresh.close()

        got = _pedantic(benchmark, lambda: _run(loop, read()), _rounds(bench, n, slow=True))
        assert len(got) == n
    finally:
        loop.close()
    benchmark.extra_info.update(scenario="claude-messages", impl=impl, n=n)
