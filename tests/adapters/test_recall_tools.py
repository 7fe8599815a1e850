"""The recall tools in real agent loops: the frameworks' own test models call
``search_past_sessions`` and ``read_past_entry`` and get the planted answer back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st
from sessiontree.recall import RecallTools

from .conftest import run

DECISION = "We decided to retry with exponential backoff, capped at 30 seconds (zqfrob)."


@pytest.fixture
def repo(tmp_path: Path) -> st.JsonlSessionRepo:
    repo = st.JsonlSessionRepo(tmp_path / "sessions")
    with repo.create(cwd="/w", name="networking") as s:
        s.append_message(st.UserMessage("How should the client handle zqfrob timeouts?"))
        s.append_message(st.AssistantMessage([st.TextContent(DECISION)], "openai", "gpt-5"))
    with repo.create(cwd="/w") as s:
        s.append_message(st.UserMessage("Unrelated chatter about lunch."))
    return repo


def test_the_tools_alone(repo: st.JsonlSessionRepo) -> None:
    tools = RecallTools(repo)
    hits = tools.search_past_sessions("zqfrob", limit=5)
    assert {h["role"] for h in hits} == {"assistant", "user"}
    found = next(h for h in hits if h["role"] == "assistant")
    assert "**zqfrob**" in (found["snippet"] or "")
    entry = tools.read_past_entry(str(found["session"]), str(found["entry"]))
    assert entry["text"] == DECISION and entry["type"] == "message"
    json.dumps(hits), json.dumps(entry)
    # A writer holding the session does not stop recall.
    with repo.open(str(found["session"])):
        assert tools.read_past_entry(str(found["session"]), str(found["entry"]))["text"]
    with pytest.raises(st.SessionError) as err:
        tools.search_past_sessions('"unbalanced')
    assert err.value.code == "invalid_argument"


def test_pydantic_ai_agent_recalls(repo: st.JsonlSessionRepo) -> None:
    pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from sessiontree.adapters.recall_tools import pydantic_ai_recall_tools

    seen: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert {t.name for t in info.function_tools} == {
            "search_past_sessions",
            "read_past_entry",
        }
        returns = [
            p
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        if not returns:
            return ModelResponse(
                parts=[ToolCallPart("search_past_sessions", {"query": "zqfrob decided"})]
            )
        if len(returns) == 1:
            seen.append(returns[0].content)
            hit = returns[0].content[0]
            return ModelResponse(
                parts=[
                    ToolCallPart(
                        "read_past_entry",
                        {"session_id": hit["session"], "entry_id": hit["entry"]},
                    )
                ]
            )
        seen.append(returns[1].content)
        return ModelResponse(parts=[TextPart(f"Earlier: {returns[1].content['text']}")])

    agent = Agent(FunctionModel(model), tools=pydantic_ai_recall_tools(repo))
    result = run(agent.run("What did we decide about zqfrob timeouts?"))
    assert result.output == f"Earlier: {DECISION}"
    assert "**zqfrob**" in seen[0][0]["snippet"]


def test_openai_agents_agent_recalls(repo: st.JsonlSessionRepo) -> None:
    pytest.importorskip("agents", reason="the openai-agents extra is not installed")
    from agents import Agent, Runner
    from agents.items import ToolCallOutputItem
    from agents.testing import ScriptedModel, assistant_message, function_call

    from sessiontree.adapters.recall_tools import openai_agents_recall_tools

    model = ScriptedModel(
        [
            [function_call("search_past_sessions", {"query": "zqfrob decided"}, call_id="c1")],
            [assistant_message("We chose exponential backoff.", item_id="m1")],
        ]
    )
    agent = Agent(name="helper", model=model, tools=openai_agents_recall_tools(repo))
    result = run(Runner.run(agent, "What did we decide about zqfrob timeouts?"))
    outputs = [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    assert len(outputs) == 1
    text = outputs[0] if isinstance(outputs[0], str) else json.dumps(outputs[0])
    assert "exponential backoff" in text and "zqfrob" in text
    assert result.final_output == "We chose exponential backoff."


def test_the_recall_example_runs() -> None:
    pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[2] / "examples" / "recall_agent.py"
    proc = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=120, check=True
    )
    assert "Last week we settled it: Decision: keep the job queue in Postgres" in proc.stdout
