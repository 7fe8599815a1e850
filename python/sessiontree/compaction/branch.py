"""Branch summaries: what a branch left behind says, and moving the leaf with one."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from ..context import (
    default_context_entry_transform,
    session_entry_to_context_messages,
)
from ..errors import SessionError
from ..model.entries import SessionTreeEntry
from ..model.messages import (
    AgentMessage,
)
from ..session import Session
from .prompts import DEFAULT_BRANCH_SUMMARY_PROMPT
from .run import _check_leaf
from .summary import (
    AsyncSummarizer,
    Summarizer,
    SummaryRequest,
    _build_prompt,
    _check_instructions,
    _result,
    serialize_conversation,
)
from .tokens import _check_count, estimate_tokens

__all__ = ["amove_to_with_summary", "collect_entries_for_branch_summary", "move_to_with_summary"]


# --------------------------------------------------------------------------- branch summaries


def collect_entries_for_branch_summary(
    session: Session, from_leaf: str | None, to_entry: str | None
) -> list[SessionTreeEntry]:
    """The entries a move from ``from_leaf`` to ``to_entry`` leaves behind.

    These are the entries on the path to ``from_leaf`` below the deepest entry it shares
    with the path to ``to_entry`` (their common ancestor), root first. Moving back to an
    ancestor leaves behind everything after it; moving to a descendant leaves nothing.

    Args:
        session: the session.
        from_leaf: the leaf being left (``None``: nothing is left behind).
        to_entry: the target (``None``: before the first entry, so the whole path).

    Returns:
        The entries, root first (empty when nothing is left behind).

    Raises:
        SessionError: ``not_found`` for an unknown id; ``invalid_argument`` for a non-str.
    """
    for name, value in (("from_leaf", from_leaf), ("to_entry", to_entry)):
        if value is not None and not isinstance(value, str):
            raise SessionError(
                "invalid_argument", f"{name} must be a str or None, not {type(value).__name__}"
            )
    storage = session.storage
    target_ids = set() if to_entry is None else {e.id for e in storage.get_path_to_root(to_entry)}
    if from_leaf is None:
        return []
    path = storage.get_path_to_root(from_leaf)
    start = len(path)
    while start > 0 and path[start - 1].id not in target_ids:
        start -= 1
    return path[start:]


def _branch_request(
    session: Session,
    entries: Sequence[SessionTreeEntry],
    instructions: str | None,
    max_tokens: int | None,
) -> SummaryRequest | None:
    # The left branch may itself hold a compaction: its summary then stands for what
    # came before it, exactly as in that branch's context.
    context_entries = default_context_entry_transform(entries)
    options = session.context_build_options
    messages: list[AgentMessage] = []
    for i, entry in enumerate(context_entries):
        messages.extend(session_entry_to_context_messages(entry, i, context_entries, options))
    if max_tokens is not None:
        kept: list[AgentMessage] = []
        total = 0
        for m in reversed(messages):
            total += estimate_tokens(m)
            if total > max_tokens and kept:
                break
            kept.append(m)
        messages = kept[::-1]
    if not messages:
        return None
    conversation = serialize_conversation(messages)
    return SummaryRequest(
        kind="branch_summary",
        messages=tuple(messages),
        conversation=conversation,
        previous_summary=None,
        turn_prefix_messages=(),
        turn_prefix=None,
        instructions=instructions,
        prompt=_build_prompt(DEFAULT_BRANCH_SUMMARY_PROMPT, conversation, None, None, instructions),
        entries=tuple(entries),
    )


def _start_branch_summary(
    session: Session,
    target: str,
    summarize: object,
    instructions: str | None,
    max_tokens: int | None,
) -> tuple[str | None, SummaryRequest | None]:
    if not isinstance(session, Session):
        raise SessionError(
            "invalid_argument", f"session must be a Session, not {type(session).__name__}"
        )
    if not isinstance(target, str):
        raise SessionError(
            "invalid_argument",
            f"target must be an entry id (a str), not {type(target).__name__}",
        )
    if not callable(summarize):
        raise SessionError("invalid_argument", "summarize must be callable")
    _check_instructions(instructions)
    if max_tokens is not None:
        _check_count("", "max_tokens", max_tokens, 1)
    # Checked before the (slow, paid) summary call, not only by move_to afterwards.
    if session.get_entry(target) is None:
        raise SessionError("not_found", f"entry {target!r} not found")
    leaf = session.get_leaf_id()
    entries = collect_entries_for_branch_summary(session, leaf, target)
    return leaf, _branch_request(session, entries, instructions, max_tokens)


def _finish_branch_summary(
    session: Session, target: str, leaf: str | None, value: object
) -> str | None:
    result = _result(value)
    _check_leaf(session, leaf, "branch summary")
    return session.move_to(
        target,
        summary={"summary": result.summary, "details": result.details, "usage": result.usage},
    )


def move_to_with_summary(
    session: Session,
    target: str,
    summarize: Summarizer,
    *,
    instructions: str | None = None,
    max_tokens: int | None = None,
) -> str | None:
    """Moves the leaf to ``target``, leaving a summary of the branch being left.

    The entries from :func:`collect_entries_for_branch_summary` (current leaf → target)
    are turned into messages as their own context would show them, passed to
    ``summarize`` as a :class:`SummaryRequest` of kind ``"branch_summary"``, and the
    result is written by ``session.move_to(target, summary=...)``: a
    :class:`~sessiontree.BranchSummaryEntry` under the target, which becomes the leaf.

    Args:
        session: the session.
        target: the entry to move to.
        summarize: your LLM call, ``summarize(request) -> str | SummaryResult``.
        instructions: extra focus for the summary.
        max_tokens: summarise only the newest messages of the branch that fit in this many
            tokens (the summariser's own input limit); ``None`` sends them all.

    Returns:
        The id of the branch-summary entry, or ``None`` when the move leaves nothing to
        summarise (``target`` is the leaf or below it): the leaf is then moved without a
        summary and ``summarize`` is not called.

    Raises:
        Exception: whatever ``summarize`` raises, unchanged; the leaf is not moved then.
        SessionError: ``not_found`` for an unknown target; ``invalid_argument`` for bad
            arguments or result; ``modified_externally`` if the leaf moved meanwhile.
    """
    leaf, request = _start_branch_summary(session, target, summarize, instructions, max_tokens)
    if request is None:
        session.move_to(target)
        return None
    return _finish_branch_summary(session, target, leaf, summarize(request))


async def amove_to_with_summary(
    session: Session,
    target: str,
    summarize: AsyncSummarizer,
    *,
    instructions: str | None = None,
    max_tokens: int | None = None,
) -> str | None:
    """:func:`move_to_with_summary` for async agents: awaits ``summarize(request)``."""
    leaf, request = _start_branch_summary(session, target, summarize, instructions, max_tokens)
    if request is None:
        session.move_to(target)
        return None
    value = summarize(request)
    if inspect.isawaitable(value):
        value = await value
    return _finish_branch_summary(session, target, leaf, value)
