"""sessiontree: LLM-agent sessions as a tree of entries in append-only JSONL files.

A Rust engine indexes the file (entries, ids, parents, labels, the leaf) without making
Python objects; this package is the API over it. Start with :class:`Session` over a
:class:`JsonlSessionStorage` or :class:`InMemorySessionStorage`, or manage many sessions
with :class:`JsonlSessionRepo`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .context import (
    EntryProjector,
    EntryTransform,
    SessionContextBuildOptions,
    build_context_entries,
    build_session_context,
    default_context_entry_transform,
    derive_session_context_state,
    merge_context_build_options,
    session_entry_to_context_messages,
)
from .errors import ERROR_CODES, SessionError
from .model.entries import (
    ENTRY_TYPES,
    THINKING_LEVELS,
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    SessionTreeEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
    entry_from_dict,
    entry_from_json,
    entry_to_dict,
    entry_to_json,
)
from .model.messages import (
    BASH_EXECUTION_ROLE,
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Cost,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    Usage,
    UserMessage,
    create_branch_summary_message,
    create_compaction_summary_message,
    create_custom_message,
    message_from_dict,
    message_to_dict,
)
from .model.types import (
    MAX_REPORTED_ISSUES,
    ContextState,
    LoadIssue,
    LoadReport,
    MessageSequence,
    ModelRef,
    SessionContext,
    SessionMetadata,
    SessionStats,
    TreeNode,
)
from .session import Session
from .storage import (
    DURABILITY_MODES,
    InMemorySessionStorage,
    JsonlSessionStorage,
    Limits,
    SessionStorage,
)

if TYPE_CHECKING:
    from typing import Any

    from .adapters.claude_agent_sdk import ClaudeAgentSessionStore
    from .adapters.langgraph import SessionTreeSaver
    from .adapters.openai_agents import OpenAIAgentsSession
    from .adapters.pydantic_ai import PydanticAIConversationStore
    from .aio import AsyncSession, AsyncSessionRepo
    from .postgres import PostgresSessionRepo, PostgresSessionStorage
    from .repo import (
        FORK_POSITIONS,
        ForkPosition,
        InMemorySessionRepo,
        JsonlSessionRepo,
        PiSessionRepo,
        SessionRef,
        SessionRepo,
        get_entries_to_fork,
        is_valid_session_id,
    )
    from .search import SearchHit

__version__ = "0.1.0"

# Names loaded on first use (PEP 562), so ``import sessiontree`` does not pay for them:
# the session repositories are a separate layer over the core that many programs never use.
_LAZY: dict[str, str] = {
    # The async API imports asyncio, which programs without an event loop never need.
    "AsyncSession": ".aio",
    "AsyncSessionRepo": ".aio",
    "FORK_POSITIONS": ".repo",
    "ForkPosition": ".repo",
    "InMemorySessionRepo": ".repo",
    "JsonlSessionRepo": ".repo",
    "PiSessionRepo": ".repo",
    "SessionRef": ".repo",
    "SessionRepo": ".repo",
    "get_entries_to_fork": ".repo",
    "is_valid_session_id": ".repo",
    # The PostgreSQL backend (extra ``postgres``); psycopg is imported only when used.
    "PostgresSessionRepo": ".postgres",
    "PostgresSessionStorage": ".postgres",
    # The agent-framework adapters: each imports its framework (an optional extra).
    "ClaudeAgentSessionStore": ".adapters.claude_agent_sdk",
    "OpenAIAgentsSession": ".adapters.openai_agents",
    "PydanticAIConversationStore": ".adapters.pydantic_ai",
    "SessionTreeSaver": ".adapters.langgraph",
    # Search results (sessiontree.search).
    "SearchHit": ".search",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    # The public API only: not the module's own machinery (``annotations``,
    # ``TYPE_CHECKING``, the lazy table) nor the subpackages it happens to have imported.
    return sorted(__all__)


__all__ = [
    "BASH_EXECUTION_ROLE",
    "DURABILITY_MODES",
    "ENTRY_TYPES",
    "ERROR_CODES",
    "FORK_POSITIONS",
    "MAX_REPORTED_ISSUES",
    "THINKING_LEVELS",
    "ActiveToolsChangeEntry",
    "AgentMessage",
    "AssistantMessage",
    "AsyncSession",
    "AsyncSessionRepo",
    "BranchSummaryEntry",
    "BranchSummaryMessage",
    "ClaudeAgentSessionStore",
    "CompactionEntry",
    "CompactionSummaryMessage",
    "ContextState",
    "Cost",
    "CustomEntry",
    "CustomMessage",
    "CustomMessageEntry",
    "EntryProjector",
    "EntryTransform",
    "ForkPosition",
    "ImageContent",
    "InMemorySessionRepo",
    "InMemorySessionStorage",
    "JsonlSessionRepo",
    "JsonlSessionStorage",
    "LabelEntry",
    "LeafEntry",
    "Limits",
    "LoadIssue",
    "LoadReport",
    "MessageEntry",
    "MessageSequence",
    "ModelChangeEntry",
    "ModelRef",
    "OpenAIAgentsSession",
    "PiSessionRepo",
    "PostgresSessionRepo",
    "PostgresSessionStorage",
    "PydanticAIConversationStore",
    "SearchHit",
    "Session",
    "SessionContext",
    "SessionContextBuildOptions",
    "SessionError",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionMetadata",
    "SessionRef",
    "SessionRepo",
    "SessionStats",
    "SessionStorage",
    "SessionTreeEntry",
    "SessionTreeSaver",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevelChangeEntry",
    "ToolCall",
    "ToolResultMessage",
    "TreeNode",
    "UnknownEntry",
    "UnknownMessage",
    "Usage",
    "UserMessage",
    "__version__",
    "build_context_entries",
    "build_session_context",
    "create_branch_summary_message",
    "create_compaction_summary_message",
    "create_custom_message",
    "default_context_entry_transform",
    "derive_session_context_state",
    "entry_from_dict",
    "entry_from_json",
    "entry_to_dict",
    "entry_to_json",
    "get_entries_to_fork",
    "is_valid_session_id",
    "merge_context_build_options",
    "message_from_dict",
    "message_to_dict",
    "session_entry_to_context_messages",
]
