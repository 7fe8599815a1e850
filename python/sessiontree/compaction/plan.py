"""Planning a compaction: where to cut a branch without splitting a tool call from its results."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from ..context import (
    build_session_context,
    default_context_entry_transform,
    session_entry_to_context_messages,
)
from ..errors import SessionError
from ..model.entries import CompactionEntry, SessionTreeEntry
from ..model.messages import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ..session import Session
from .tokens import CompactionSettings, _log, _settings, estimate_context_tokens, estimate_tokens

__all__ = ["CompactionPlan", "prepare_compaction"]


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True, slots=True)
class _Item:
    """One context message of the compactable part of the branch (or a message-less entry)."""

    entry: SessionTreeEntry
    message: AgentMessage | None
    entry_start: bool  # the entry's first item: an entry-based cut may land here
    from_tail: bool  # a message of the previous compaction's retained tail
    tokens: int


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Where a compaction cuts the current branch; made by :func:`prepare_compaction`.

    The branch's compactable part runs from the previous compaction's kept messages (or
    the root) to the leaf. Everything before the cut is summarised; everything from it on
    is kept verbatim. When the cut falls inside a turn (at an assistant message) the start
    of that turn is the *turn prefix*: summarised too, but flagged so the summary can
    describe the turn in progress.

    Attributes:
        first_kept_entry_id: the first kept entry (the compaction's
            ``first_kept_entry_id``); ``None`` when nothing is kept, or when the first kept
            message comes from the previous compaction's retained tail.
        messages_to_summarize: the messages before the turn prefix (or before the cut).
        turn_prefix_messages: the split turn's messages before the cut (else empty).
        kept_messages: the messages kept after the summary, in order (stored in the entry
            as ``retained_tail`` when :attr:`retain_tail`).
        entries_to_summarize: the branch entries behind :attr:`messages_to_summarize`
            (message-less ones included, compaction entries left out).
        turn_prefix_entries: the entries behind :attr:`turn_prefix_messages`.
        kept_entries: the branch entries from the first kept one to the leaf.
        is_split_turn: whether the cut falls inside a turn.
        tokens_before: the context size now (:func:`estimate_context_tokens`).
        tokens_kept: the estimated size of :attr:`kept_messages`.
        previous_summary: the summary of the previous compaction on the branch, or ``None``.
        previous_compaction_id: that compaction's id, or ``None``.
        leaf_id: the leaf the plan was made for; :func:`compact` refuses a moved leaf.
        retain_tail: whether the kept messages go into the entry's ``retained_tail``.
        settings: the settings used.
    """

    first_kept_entry_id: str | None
    messages_to_summarize: tuple[AgentMessage, ...]
    turn_prefix_messages: tuple[AgentMessage, ...]
    kept_messages: tuple[AgentMessage, ...]
    entries_to_summarize: tuple[SessionTreeEntry, ...]
    turn_prefix_entries: tuple[SessionTreeEntry, ...]
    kept_entries: tuple[SessionTreeEntry, ...]
    is_split_turn: bool
    tokens_before: int
    tokens_kept: int
    previous_summary: str | None
    previous_compaction_id: str | None
    leaf_id: str
    retain_tail: bool
    settings: CompactionSettings

    def __repr__(self) -> str:
        return (
            f"CompactionPlan(first_kept_entry_id={self.first_kept_entry_id!r}, "
            f"messages_to_summarize=<{len(self.messages_to_summarize)}>, "
            f"turn_prefix_messages=<{len(self.turn_prefix_messages)}>, "
            f"kept_messages=<{len(self.kept_messages)}>, is_split_turn={self.is_split_turn}, "
            f"tokens_before={self.tokens_before}, tokens_kept={self.tokens_kept}, "
            f"previous_compaction_id={self.previous_compaction_id!r}, "
            f"retain_tail={self.retain_tail})"
        )


_TURN_START: Final = (UserMessage, CustomMessage, BranchSummaryMessage, CompactionSummaryMessage)


def _compactable_items(
    session: Session, branch: Sequence[SessionTreeEntry]
) -> tuple[list[_Item], CompactionEntry | None]:
    """The branch from the previous compaction's kept part to the leaf, as items.

    Built from the default context transform, so the items are exactly the context's
    messages (projectors see the same entries and indices as in ``build_context``), with
    the previous compaction's summary left out: it is handed over as the previous summary.
    """
    entries = default_context_entry_transform(branch)
    prev = entries[0] if entries and isinstance(entries[0], CompactionEntry) else None
    options = session.context_build_options
    items: list[_Item] = []
    for i, entry in enumerate(entries):
        if entry is prev:
            assert prev is not None
            # A message-less item: the backward extension of a cut stops at it.
            items.append(_Item(prev, None, True, False, 0))
            for j, m in enumerate(prev.retained_tail or ()):
                items.append(_Item(prev, m, j == 0, True, estimate_tokens(m)))
            continue
        msgs = session_entry_to_context_messages(entry, i, entries, options)
        if not msgs:
            items.append(_Item(entry, None, True, False, 0))
            continue
        for j, m in enumerate(msgs):
            items.append(_Item(entry, m, j == 0, False, estimate_tokens(m)))
    return items, prev


def _valid_cuts(items: Sequence[_Item], retain_tail: bool) -> list[bool]:
    """``valid[p]``: may the kept part start at item ``p`` (``p == len(items)``: keep none)?"""
    n = len(items)
    # Cutting at p orphans a tool result at j >= p whose call is at k < p, so every p in
    # (k, j] is forbidden; a difference array marks the ranges in one pass.
    diff = [0] * (n + 2)
    calls: dict[str, int] = {}
    answered: set[str] = set()
    last_assistant = -1
    for j, item in enumerate(items):
        m = item.message
        if isinstance(m, AssistantMessage):
            last_assistant = j
            for block in m.content:
                if isinstance(block, ToolCall):
                    calls[block.id] = j
        elif isinstance(m, ToolResultMessage):
            answered.add(m.tool_call_id)
            # A result whose call is not in range is already an orphan: keep it out.
            k = calls.get(m.tool_call_id, -1)
            diff[k + 1] += 1
            diff[j + 1] -= 1
    if last_assistant >= 0:
        last = items[last_assistant].message
        assert isinstance(last, AssistantMessage)
        if any(isinstance(b, ToolCall) and b.id not in answered for b in last.content):
            # The latest calls are still running (notes or state changes may follow them
            # meanwhile): their results will need the call in the context.
            diff[last_assistant + 1] += 1
            diff[n + 1] -= 1
    valid = [False] * (n + 1)
    depth = 0
    for p in range(n + 1):
        depth += diff[p]
        if p == n:
            # Keeping nothing drops the request the model is working on, so it is only a
            # last resort for tool results too big to keep, never after a user message.
            valid[n] = depth == 0 and isinstance(_last_message(items), ToolResultMessage)
            break
        item = items[p]
        m = item.message
        valid[p] = (
            depth == 0
            and m is not None
            and not isinstance(m, ToolResultMessage)
            and (retain_tail or (item.entry_start and not item.from_tail))
        )
    return valid


def _last_message(items: Sequence[_Item]) -> AgentMessage | None:
    for item in reversed(items):
        if item.message is not None:
            return item.message
    return None


def _unique_entries(items: Iterable[_Item]) -> tuple[SessionTreeEntry, ...]:
    seen: set[str] = set()
    out: list[SessionTreeEntry] = []
    for item in items:
        e = item.entry
        if item.from_tail or isinstance(e, CompactionEntry) or e.id in seen:
            continue
        seen.add(e.id)
        out.append(e)
    return tuple(out)


def _messages(items: Iterable[_Item]) -> tuple[AgentMessage, ...]:
    return tuple(item.message for item in items if item.message is not None)


def _nothing(reason: str) -> None:
    _log.debug("nothing to compact: %s", reason)


def prepare_compaction(
    session: Session, settings: CompactionSettings | None = None, *, retain_tail: bool = False
) -> CompactionPlan | None:
    """Plans a compaction of the current branch without changing anything.

    The recent messages are walked newest first, adding up :func:`estimate_tokens`, until
    ``settings.keep_recent_tokens`` is reached; the cut goes to the nearest valid point at
    or after that message, so the kept part stays within the budget. A valid point is a
    message that is not a tool result and that no later tool result depends on: an
    assistant message is kept with all its tool results, or summarised with them, and
    while the latest assistant message still waits for results of its calls, it is kept
    (whatever entries arrive meanwhile). When only tool results follow (the budget ran out
    inside trailing tool results) the cut goes to the nearest valid point before them
    instead, which is usually the assistant message that made the calls; if that leaves
    nothing to summarise and every call has its result, everything is summarised and
    nothing kept. Message-less entries (model or thinking changes, labels) just before the
    cut are kept with it.

    The compactable part starts at the previous compaction's kept messages, so a second
    compaction re-summarises what the first one kept and hands over the first summary as
    :attr:`CompactionPlan.previous_summary` to be updated.

    Without ``retain_tail`` the cut must fall on the first message of a branch entry
    (the compaction records ``first_kept_entry_id``). With it, the kept messages are
    copied into the entry, so the cut may also fall inside the previous compaction's
    retained tail.

    ``settings.enabled`` is not consulted: it governs :func:`should_compact` only. User
    context transforms are not applied when planning; projectors are.

    Args:
        session: the session; its current leaf ends the branch.
        settings: the settings (defaults when ``None``).
        retain_tail: plan for a compaction that stores its kept messages.

    Returns:
        The plan, or ``None`` when there is nothing to compact: the branch is empty or
        already ends in a compaction, the messages since the previous compaction add up
        to less than ``keep_recent_tokens``, or no valid cut leaves anything to summarise
        (the reason is logged at DEBUG level on the ``sessiontree.compaction`` logger).

    Raises:
        SessionError: ``invalid_argument`` for bad settings; storage errors (``closed``...).
    """
    s = _settings(settings)
    if not isinstance(retain_tail, bool):
        raise SessionError("invalid_argument", "retain_tail must be a bool")
    leaf = session.get_leaf_id()
    if leaf is None:
        _nothing("the branch is empty")
        return None
    branch = session.get_branch()
    if not branch or isinstance(branch[-1], CompactionEntry):
        _nothing("the branch ends in a compaction")
        return None
    items, prev = _compactable_items(session, branch)
    n = len(items)

    budget_at: int | None = None
    total = 0
    for i in range(n - 1, -1, -1):
        if items[i].message is None:
            continue
        total += items[i].tokens
        if total >= s.keep_recent_tokens:
            budget_at = i
            break
    if budget_at is None:
        _nothing(f"the history ({total} tokens) fits in keep_recent_tokens")
        return None

    valid = _valid_cuts(items, retain_tail)
    cut = next((p for p in range(budget_at, n) if valid[p]), None)
    if cut is None:
        cut = next((p for p in range(budget_at - 1, -1, -1) if valid[p]), None)
    if (cut is None or not any(it.message is not None for it in items[:cut])) and valid[n]:
        cut = n
    if cut is None:
        _nothing("no valid cut point")
        return None

    # The turn is split when the first kept message is not a turn start (an assistant
    # message); the turn's start is then found before it.
    turn_start = cut
    if cut < n and not isinstance(items[cut].message, _TURN_START):
        for i in range(cut - 1, -1, -1):
            if isinstance(items[i].message, _TURN_START):
                turn_start = i
                break
    if not retain_tail and cut < n:
        while (
            cut > 0
            and items[cut - 1].message is None
            and not items[cut - 1].from_tail
            and not isinstance(items[cut - 1].entry, CompactionEntry)
        ):
            cut -= 1
        turn_start = min(turn_start, cut)

    history, prefix, kept = items[:turn_start], items[turn_start:cut], items[cut:]
    to_summarize = _messages(history)
    prefix_messages = _messages(prefix)
    if not to_summarize and not prefix_messages:
        _nothing("every message would be kept")
        return None

    first_kept: str | None = None
    if kept and not kept[0].from_tail:
        first_kept = kept[0].entry.id
    kept_messages = _messages(kept)
    return CompactionPlan(
        first_kept_entry_id=first_kept,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=prefix_messages,
        kept_messages=kept_messages,
        entries_to_summarize=_unique_entries(history),
        turn_prefix_entries=_unique_entries(prefix),
        kept_entries=_unique_entries(kept),
        is_split_turn=bool(prefix_messages),
        # The branch is already decoded: build its context here instead of build_context()
        # reading it again (the same messages: same entries, same options).
        tokens_before=estimate_context_tokens(
            build_session_context(branch, session.context_build_options).messages
        ),
        tokens_kept=sum(estimate_tokens(m) for m in kept_messages),
        previous_summary=None if prev is None else prev.summary,
        previous_compaction_id=None if prev is None else prev.id,
        leaf_id=leaf,
        retain_tail=retain_tail,
        settings=s,
    )
