"""An agent answers "what did we decide about the queue last week?" from an earlier
session, with sessiontree's recall tools.

Last week's session is written first (a real one would be the agent's own). Then a new
session's agent (pydantic-ai, with its ``FunctionModel`` standing in for an LLM so the
example needs no network or key) calls ``search_past_sessions``, reads the best hit in
full with ``read_past_entry`` and answers from it. Swap the model for a real one
(``Agent("openai:gpt-5", tools=...)``) and the same tools work unchanged. Run it with::

    pip install 'sessiontree[pydantic-ai]'
    python examples/recall_agent.py
"""

from __future__ import annotations

import tempfile
from typing import Any

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

import sessiontree as st
from sessiontree.adapters.recall_tools import pydantic_ai_recall_tools


def write_last_week(repo: st.SessionRepo) -> None:
    with repo.create(cwd="/home/me/shop", name="job queue design") as s:
        s.append_message(st.UserMessage("Should the job queue live in Redis or Postgres?"))
        s.append_message(
            st.AssistantMessage(
                [
                    st.TextContent(
                        "Decision: keep the job queue in Postgres (SELECT … FOR UPDATE SKIP "
                        "LOCKED); one less service to run, and jobs commit with the data."
                    )
                ],
                "anthropic",
                "claude-sonnet-4-5",
            )
        )
    with repo.create(cwd="/home/me/shop") as s:
        s.append_message(st.UserMessage("Fix the flaky checkout test."))


def stand_in_llm(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """What a model would do: search, read the best hit, answer from it."""
    returns: list[Any] = [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    if not returns:
        return ModelResponse(
            parts=[ToolCallPart("search_past_sessions", {"query": "queue decision"})]
        )
    if len(returns) == 1:
        best = returns[0][0]
        args = {"session_id": best["session"], "entry_id": best["entry"]}
        return ModelResponse(parts=[ToolCallPart("read_past_entry", args)])
    return ModelResponse(parts=[TextPart(f"Last week we settled it: {returns[1]['text']}")])


def main() -> str:
    repo = st.JsonlSessionRepo(tempfile.mkdtemp(prefix="recall-"))
    write_last_week(repo)
    for hit in repo.search("queue decision", limit=3):
        print(f"hit: {hit.role} {hit.snippet}")
    agent = Agent(FunctionModel(stand_in_llm), tools=pydantic_ai_recall_tools(repo))
    answer = agent.run_sync("What did we decide about the queue last week?").output
    print(answer)
    return answer


if __name__ == "__main__":
    main()
