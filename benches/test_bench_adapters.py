"""The agent-framework adapters against the frameworks' own stores, in the same run.

- ``openai-get-items``: ``get_items()`` of :class:`OpenAIAgentsSession` (a JSONL session)
  against the OpenAI Agents SDK's own ``SQLiteSession`` (a SQLite file) holding the same
  items: 24.5k with ``--bench-real`` (the context of the 100k-entry workload is 24.5k
  messages), 245 in the smoke run. Both must return the same items. ``sessiontree`` is the
  adapter that wrote the items (the Runner calls ``get_items`` every turn);
  ``sessiontree-first-read`` a new adapter object each round, which reads and converts every
  entry (a process resuming the session pays that once).
- ``pydantic-load``: ``store.load`` of one long conversation from
  :class:`PydanticAIConversationStore` against pydantic-ai's ``InMemoryConversationStore``
  (4,900 messages real, 49 in the smoke run). Both must load equal conversations.
  ``sessiontree`` is the store that saved it, ``sessiontree-first-read`` a new store object
  each round (every entry read from the file and converted).

``SESSIONTREE_BENCH_ADAPTER_ITEMS`` overrides the item count of the first (the second is a
fifth of it). Each scenario skips when its framework's extra is not installed.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

import sessiontree as st
from conftest import Bench, human

TOOL_OUTPUT = "\n".join(
    f"line {n}: def f(x):\\n    return {{'x': x}}  # \u00e9\t" for n in range(40)
)


def _count(bench: Bench) -> int:
    override = os.environ.get("SESSIONTREE_BENCH_ADAPTER_ITEMS")
    if override:
        return int(override)
    return 24_500 if bench.real else 245


def _items(n: int) -> list[Any]:
    """``n`` response items, five per turn: a user message, a reasoning item, a function
    call, its output (~2 KB), the assistant's answer — shaped as the SDK stores them."""
    out: list[Any] = []
    turn = 0
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
                "encrypted_content": "gAAAA" + "x" * 120,
            },
            {
                "arguments": json.dumps({"path": f"src/m{turn % 97}.py", "line": turn}),
                "call_id": f"call_{turn}",
                "name": "read_file",
                "type": "function_call",
                "id": f"fc_{turn}",
                "status": "completed",
            },
            {"call_id": f"call_{turn}", "output": TOOL_OUTPUT, "type": "function_call_output"},
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


@pytest.mark.parametrize("impl", ["sessiontree", "sessiontree-first-read", "sqlite"])
def test_openai_get_items(
    benchmark: BenchmarkFixture, bench: Bench, scratch: Path, impl: str
) -> None:
    """``get_items()`` of every item of a long session."""
    pytest.importorskip("agents", reason="the openai-agents extra is not installed")
    from agents import SQLiteSession

    from sessiontree.adapters.openai_agents import OpenAIAgentsSession

    n = _count(bench)
    items = _items(n)
    benchmark.group = f"openai-get-items@{human(n)}"
    loop = asyncio.new_event_loop()
    try:
        session: Any
        if impl == "sqlite":
            session = SQLiteSession("bench", scratch / "bench.db")
        else:
            repo = st.AsyncSessionRepo(st.JsonlSessionRepo(scratch))
            session = loop.run_until_complete(OpenAIAgentsSession.open(repo, "bench"))
        for start in range(0, n, 5):  # one add_items per turn, as the Runner does
            loop.run_until_complete(session.add_items(items[start : start + 5]))
        if impl == "sessiontree-first-read":
            # A new adapter object each round: nothing known yet, every entry is read
            # from the file and converted (what a process resuming the session pays once).
            tree = session.session

            def first_read() -> Any:
                return loop.run_until_complete(OpenAIAgentsSession(tree).get_items())

            got = benchmark(first_read)
        else:
            got = benchmark(lambda: loop.run_until_complete(session.get_items()))
        assert json.dumps(got) == json.dumps(items)
        if impl == "sqlite":
            session.close()
        else:
            loop.run_until_complete(session.close())
    finally:
        loop.close()
    benchmark.extra_info.update(scenario="openai-get-items", impl=impl, n=n)


def _conversation(n: int) -> list[Any]:
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
    turn = 0
    while len(out) < n:
        call = f"call_{turn}"
        out += [
            ModelRequest(
                parts=[UserPromptPart(f"Turn {turn}: fix module {turn % 97}.", timestamp=t)]
            ),
            ModelResponse(
                parts=[ToolCallPart("read_file", {"path": f"src/m{turn % 97}.py"}, call)],
                usage=RequestUsage(input_tokens=900 + turn, output_tokens=20),
                model_name="claude-sonnet-4-5",
                provider_name="anthropic",
                timestamp=t,
            ),
            ModelRequest(parts=[ToolReturnPart("read_file", TOOL_OUTPUT, call, timestamp=t)]),
            ModelResponse(
                parts=[TextPart(f"Fixed the off-by-one in m{turn % 97}.py.")],
                usage=RequestUsage(input_tokens=950 + turn, output_tokens=12),
                model_name="claude-sonnet-4-5",
                provider_name="anthropic",
                timestamp=t,
            ),
        ]
        turn += 1
    return out[:n]


@pytest.mark.parametrize("impl", ["sessiontree", "sessiontree-first-read", "in-memory"])
def test_pydantic_load(benchmark: BenchmarkFixture, bench: Bench, scratch: Path, impl: str) -> None:
    """``store.load`` of one long conversation."""
    pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.conversation_store import InMemoryConversationStore

    from sessiontree.adapters.pydantic_ai import PydanticAIConversationStore

    n = max(4, _count(bench) // 5)
    messages = _conversation(n)
    benchmark.group = f"pydantic-load@{human(n)}"
    loop = asyncio.new_event_loop()
    try:
        store: Any
        if impl == "in-memory":
            store = InMemoryConversationStore()
        else:
            repo = st.AsyncSessionRepo(st.JsonlSessionRepo(scratch))
            store = loop.run_until_complete(PydanticAIConversationStore.open(repo, "bench"))
        conversation = Conversation(conversation_id="long", messages=messages)
        loop.run_until_complete(store.save(conversation))
        if impl == "sessiontree-first-read":
            # A new store object each round: every entry is read from the file and converted.
            session = store.session

            def first_read() -> Any:
                return loop.run_until_complete(PydanticAIConversationStore(session).load("long"))

            loaded = benchmark(first_read)
        else:
            loaded = benchmark(lambda: loop.run_until_complete(store.load("long")))
        assert loaded.messages == messages
        if impl != "in-memory":
            loop.run_until_complete(store.close())
    finally:
        loop.close()
    benchmark.extra_info.update(scenario="pydantic-load", impl=impl, n=n)
