"""Running a compaction: ``compact`` and ``acompact`` share their start and finish."""

from __future__ import annotations

import inspect

from ..errors import SessionError
from ..model.entries import CompactionEntry
from ..session import Session
from .plan import CompactionPlan, prepare_compaction
from .prompts import DEFAULT_SUMMARY_PROMPT, DEFAULT_UPDATE_SUMMARY_PROMPT
from .summary import (
    AsyncSummarizer,
    Summarizer,
    SummaryRequest,
    _build_prompt,
    _check_instructions,
    _result,
    serialize_conversation,
)
from .tokens import CompactionSettings

__all__ = ["acompact", "compact"]


# --------------------------------------------------------------------------- compacting


def _compaction_request(plan: CompactionPlan, instructions: str | None) -> SummaryRequest:
    conversation = serialize_conversation(plan.messages_to_summarize)
    turn_prefix = (
        serialize_conversation(plan.turn_prefix_messages) if plan.turn_prefix_messages else None
    )
    base = (
        DEFAULT_SUMMARY_PROMPT if plan.previous_summary is None else DEFAULT_UPDATE_SUMMARY_PROMPT
    )
    return SummaryRequest(
        kind="compaction",
        messages=plan.messages_to_summarize,
        conversation=conversation,
        previous_summary=plan.previous_summary,
        turn_prefix_messages=plan.turn_prefix_messages,
        turn_prefix=turn_prefix,
        instructions=instructions,
        prompt=_build_prompt(base, conversation, plan.previous_summary, turn_prefix, instructions),
        entries=plan.entries_to_summarize + plan.turn_prefix_entries,
        plan=plan,
    )


def _check_leaf(session: Session, leaf: str | None, what: str) -> None:
    if session.get_leaf_id() != leaf:
        raise SessionError(
            "modified_externally",
            f"the session's leaf moved while the {what} was being written; nothing was appended",
        )


def _start_compaction(
    session: Session,
    summarize: object,
    settings: CompactionSettings | None,
    retain_tail: bool,
    instructions: str | None,
    plan: CompactionPlan | None,
) -> SummaryRequest | None:
    if not isinstance(session, Session):
        raise SessionError(
            "invalid_argument", f"session must be a Session, not {type(session).__name__}"
        )
    if not callable(summarize):
        raise SessionError("invalid_argument", "summarize must be callable")
    _check_instructions(instructions)
    if plan is None:
        plan = prepare_compaction(session, settings, retain_tail=retain_tail)
        if plan is None:
            return None
    elif not isinstance(plan, CompactionPlan):
        raise SessionError(
            "invalid_argument", f"plan must be a CompactionPlan, not {type(plan).__name__}"
        )
    elif plan.retain_tail != retain_tail:
        raise SessionError(
            "invalid_argument",
            f"the plan was made with retain_tail={plan.retain_tail}, not {retain_tail}",
        )
    else:
        _check_leaf(session, plan.leaf_id, "plan")
    return _compaction_request(plan, instructions)


def _finish_compaction(session: Session, plan: CompactionPlan, value: object) -> CompactionEntry:
    result = _result(value)
    _check_leaf(session, plan.leaf_id, "summary")
    entry_id = session.append_compaction(
        result.summary,
        plan.first_kept_entry_id,
        plan.tokens_before,
        details=result.details,
        usage=result.usage,
        retained_tail=plan.kept_messages if plan.retain_tail else None,
    )
    entry = session.get_entry(entry_id)
    assert isinstance(entry, CompactionEntry)
    return entry


def compact(
    session: Session,
    summarize: Summarizer,
    settings: CompactionSettings | None = None,
    *,
    retain_tail: bool = False,
    instructions: str | None = None,
    plan: CompactionPlan | None = None,
) -> CompactionEntry | None:
    """Compacts the current branch: plans, calls ``summarize``, appends the entry.

    Args:
        session: the session.
        summarize: your LLM call, ``summarize(request) -> str | SummaryResult``; it gets a
            :class:`SummaryRequest` with the serialised conversation, the previous summary
            to update, the split turn's prefix and a ready-made prompt.
        settings: the settings (defaults when ``None``).
        retain_tail: store the kept messages in the entry (``retained_tail``), so the
            context no longer reads them from the branch entries.
        instructions: extra focus for the summary (added to the default prompt).
        plan: a plan from :func:`prepare_compaction` to carry out (it must have been made
            at the current leaf, with the same ``retain_tail``).

    Returns:
        The appended :class:`~sessiontree.CompactionEntry` (now the leaf), or ``None`` when
        there was nothing to compact (``summarize`` is then not called).

    Raises:
        Exception: whatever ``summarize`` raises, unchanged; nothing is appended then.
        SessionError: ``invalid_argument`` for bad arguments or a ``summarize`` result
            that is not a ``str``/:class:`SummaryResult` (or whose ``details`` is not
            JSON); ``modified_externally`` if the leaf moved while the summary was being
            written (nothing is appended); storage errors.
    """
    request = _start_compaction(session, summarize, settings, retain_tail, instructions, plan)
    if request is None:
        return None
    assert request.plan is not None
    return _finish_compaction(session, request.plan, summarize(request))


async def acompact(
    session: Session,
    summarize: AsyncSummarizer,
    settings: CompactionSettings | None = None,
    *,
    retain_tail: bool = False,
    instructions: str | None = None,
    plan: CompactionPlan | None = None,
) -> CompactionEntry | None:
    """:func:`compact` for async agents: awaits ``summarize(request)``.

    ``summarize`` may be an ``async def`` function or return any awaitable; a plain
    function returning the summary works too. Arguments, result and errors are those of
    :func:`compact`; if the agent appends to the session while the summary is awaited,
    ``modified_externally`` is raised and nothing is appended.
    """
    request = _start_compaction(session, summarize, settings, retain_tail, instructions, plan)
    if request is None:
        return None
    assert request.plan is not None
    value = summarize(request)
    if inspect.isawaitable(value):
        value = await value
    return _finish_compaction(session, request.plan, value)
