"""Adapters that put agent frameworks' conversations into sessiontree's tree.

Each adapter lives in its own module and imports its framework there, so
``import sessiontree`` (and ``import sessiontree.adapters``) never imports one:

- :mod:`sessiontree.adapters.openai_agents` — :class:`OpenAIAgentsSession`, the OpenAI
  Agents SDK's ``Session`` protocol over a sessiontree session
  (``pip install 'sessiontree[openai-agents]'``);
- :mod:`sessiontree.adapters.claude_agent_sdk` — :class:`ClaudeAgentSessionStore`, the
  Claude Agent SDK's ``SessionStore`` over a sessiontree repository
  (``pip install 'sessiontree[claude-agent-sdk]'``);
- :mod:`sessiontree.adapters.pydantic_ai` — :class:`PydanticAIConversationStore`,
  pydantic-ai's ``ConversationStore`` over a sessiontree session, and converters between
  its ``ModelMessage`` and sessiontree's messages (``pip install 'sessiontree[pydantic-ai]'``).

The classes are also importable from the package root (``sessiontree.OpenAIAgentsSession``
...), loaded on first use.
"""

from __future__ import annotations

__all__: list[str] = []
