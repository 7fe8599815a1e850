"""The graph of tests/adapters/test_langgraph.py: a counter and an ``add_messages``
channel, one agent turn per step (an AI message with a tool call, then its result), until
the counter reaches ``target``. Run as a script it resumes a thread in a new process:
``python _langgraph_counter.py ROOT THREAD TARGET`` prints the state as JSON."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict


class State(TypedDict):
    count: int
    target: int
    messages: Annotated[list[AnyMessage], add_messages]


def step(state: State) -> dict[str, Any]:
    n = state["count"] + 1
    call = {"name": "add", "args": {"n": n}, "id": f"call-{n}"}
    return {
        "count": n,
        "messages": [
            AIMessage(content=f"adding {n}", tool_calls=[call], id=f"ai-{n}"),
            ToolMessage(content=str(n), tool_call_id=f"call-{n}", id=f"tool-{n}"),
        ],
    }


def route(state: State) -> str:
    return END if state["count"] >= state["target"] else "step"


def build(checkpointer: Any) -> Any:
    graph = StateGraph(State)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", route)
    return graph.compile(checkpointer=checkpointer)


def summary(values: dict[str, Any]) -> dict[str, Any]:
    return {
        "count": values["count"],
        "messages": [m.content for m in values["messages"]],
    }


def first_input(target: int) -> dict[str, Any]:
    return {"count": 0, "target": target, "messages": [HumanMessage("count", id="h-0")]}


if __name__ == "__main__":
    from sessiontree import JsonlSessionRepo
    from sessiontree.adapters.langgraph import SessionTreeSaver

    root, thread, target = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 1000}
    with SessionTreeSaver(JsonlSessionRepo(root)) as saver:
        app = build(saver)
        before = summary(app.get_state(config).values)
        app.update_state(config, {"target": target})
        after = app.invoke(None, config)
        print(json.dumps({"before": before, "after": summary(after)}))
