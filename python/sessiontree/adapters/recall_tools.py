"""The recall tools (:mod:`sessiontree.recall`) registered with each agent framework, in
one line::

    from sessiontree.adapters.recall_tools import openai_agents_recall_tools
    agent = agents.Agent(name="helper", tools=openai_agents_recall_tools(repo))

    from sessiontree.adapters.recall_tools import pydantic_ai_recall_tools
    agent = pydantic_ai.Agent(model, tools=pydantic_ai_recall_tools(repo))

Each returns the framework's own tool objects for ``search_past_sessions`` and
``read_past_entry`` (their names, parameters and descriptions come from the methods'
signatures and docstrings). A bad query reaches the model as the tool's error text
(``invalid_argument: ...``), so it can try again.
"""

from __future__ import annotations

from typing import Any

from ..recall import RecallTools
from ..repo import SessionRepo

__all__ = ["openai_agents_recall_tools", "pydantic_ai_recall_tools"]


def openai_agents_recall_tools(repo: SessionRepo, **options: Any) -> list[Any]:
    """The recall tools as OpenAI Agents SDK ``FunctionTool`` objects (``function_tool``).

    Args:
        repo: the sessions to search.
        **options: passed to :class:`~sessiontree.recall.RecallTools`.
    """
    from agents import function_tool

    tools = RecallTools(repo, **options)
    return [function_tool(tools.search_past_sessions), function_tool(tools.read_past_entry)]


def pydantic_ai_recall_tools(repo: SessionRepo, **options: Any) -> list[Any]:
    """The recall tools as pydantic-ai ``Tool`` objects.

    Args:
        repo: the sessions to search.
        **options: passed to :class:`~sessiontree.recall.RecallTools`.
    """
    from pydantic_ai import Tool

    tools = RecallTools(repo, **options)
    return [Tool(tools.search_past_sessions), Tool(tools.read_past_entry)]
