"""Compaction and branch summaries: keep a session under the model's context window.

When the context nears the window, :func:`compact` summarises the older part of the
current branch with *your* LLM call and appends a :class:`~sessiontree.CompactionEntry`;
the context then starts with that summary and goes on with the recent messages. When the
user moves back to an earlier entry, :func:`move_to_with_summary` summarises the branch
being left into a :class:`~sessiontree.BranchSummaryEntry`. The only thing you supply is
``summarize(request) -> str``.

The pieces, in the order an agent meets them:

- :func:`estimate_tokens` / :func:`estimate_context_tokens`: a fast size estimate
  (characters / 4, images :data:`IMAGE_TOKEN_ESTIMATE` each, the real ``usage`` of the last
  assistant reply preferred where it can be trusted);
- :func:`should_compact`: ``context_tokens > context_window - reserve_tokens``;
- :func:`prepare_compaction`: where to cut, as a :class:`CompactionPlan` (or ``None``);
- :func:`compact` / :func:`acompact`: plan, summarise, append;
- :func:`collect_entries_for_branch_summary`, :func:`move_to_with_summary` /
  :func:`amove_to_with_summary`.

Cut rules (each one tested): the cut never lands on a tool result, no tool result is kept
whose tool call was summarised, and tool calls still waiting for results are kept, so no
orphan tool result reaches the context; a
repeated compaction re-summarises what the previous one kept, updating its summary; when
the recent budget runs out inside trailing tool results the cut moves back to the nearest
boundary before them instead of giving up; nothing is compacted when the branch already
ends in a compaction or its history is smaller than ``keep_recent_tokens``.

>>> from sessiontree import InMemorySessionStorage, Session, UserMessage
>>> session = Session(InMemorySessionStorage())
>>> for i in range(6):
...     _ = session.append_message(UserMessage("word " * 100))
>>> settings = CompactionSettings(keep_recent_tokens=200)
>>> entry = compact(session, lambda request: f"{len(request.messages)} messages", settings)
>>> entry.summary
'4 messages'
>>> len(session.build_context().messages)  # the summary, then the 2 kept messages
3"""

from __future__ import annotations

from .branch import amove_to_with_summary, collect_entries_for_branch_summary, move_to_with_summary
from .plan import CompactionPlan, prepare_compaction
from .prompts import (
    DEFAULT_BRANCH_SUMMARY_PROMPT,
    DEFAULT_SUMMARY_PROMPT,
    DEFAULT_TURN_PREFIX_PROMPT,
    DEFAULT_UPDATE_SUMMARY_PROMPT,
    SUMMARY_SYSTEM_PROMPT,
)
from .run import acompact, compact
from .summary import (
    AsyncSummarizer,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    serialize_conversation,
)
from .tokens import (
    IMAGE_TOKEN_ESTIMATE,
    CompactionSettings,
    estimate_context_tokens,
    estimate_tokens,
    should_compact,
)

__all__ = [
    "DEFAULT_BRANCH_SUMMARY_PROMPT",
    "DEFAULT_SUMMARY_PROMPT",
    "DEFAULT_TURN_PREFIX_PROMPT",
    "DEFAULT_UPDATE_SUMMARY_PROMPT",
    "IMAGE_TOKEN_ESTIMATE",
    "SUMMARY_SYSTEM_PROMPT",
    "AsyncSummarizer",
    "CompactionPlan",
    "CompactionSettings",
    "Summarizer",
    "SummaryRequest",
    "SummaryResult",
    "acompact",
    "amove_to_with_summary",
    "collect_entries_for_branch_summary",
    "compact",
    "estimate_context_tokens",
    "estimate_tokens",
    "move_to_with_summary",
    "prepare_compaction",
    "serialize_conversation",
    "should_compact",
]
