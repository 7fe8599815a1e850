"""Building the LLM context from a path of entries, with user transforms and projectors.

The functions mirror the seed design: :func:`build_session_context` derives the state
(thinking level, model, active tools) and turns the context entries into messages;
:func:`default_context_entry_transform` applies the latest compaction on the path; user
transforms run after it, in order; projectors turn ``custom`` entries into messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..errors import SessionError
from ..model.entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionTreeEntry,
    ThinkingLevelChangeEntry,
)
from ..model.messages import (
    _MESSAGE_CLASSES,
    AgentMessage,
    AssistantMessage,
    create_branch_summary_message,
    create_compaction_summary_message,
    create_custom_message,
)
from ..model.types import ContextState, ModelRef, SessionContext

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = [
    "EntryProjector",
    "EntryTransform",
    "SessionContextBuildOptions",
    "apply_entry_transforms",
    "build_context_entries",
    "build_session_context",
    "default_context_entry_transform",
    "derive_session_context_state",
    "merge_context_build_options",
    "session_entry_to_context_messages",
    "split_at_latest_compaction",
]

EntryTransform = Callable[[list[SessionTreeEntry]], list[SessionTreeEntry]]
"""``transform(entries) -> entries``: runs after the default transform."""

EntryProjector = Callable[[CustomEntry, int, list[SessionTreeEntry]], list[AgentMessage]]
"""``projector(entry, index, entries) -> messages`` for one ``custom_type``."""


def _empty_projectors() -> Mapping[str, EntryProjector]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class SessionContextBuildOptions:
    """User hooks for context building.

    Attributes:
        entry_transforms: callables ``list[entry] -> list[entry]`` applied in order after
            the default transform.
        entry_projectors: ``custom_type`` → ``callable(entry, index, entries) -> list[message]``
            turning ``custom`` entries into messages (``index`` is 0-based).

    >>> opts = SessionContextBuildOptions(entry_projectors={"note": lambda e, i, es: []})
    >>> sorted(opts.entry_projectors)
    ['note']
    """

    entry_transforms: tuple[EntryTransform, ...] = ()
    entry_projectors: Mapping[str, EntryProjector] = field(default_factory=_empty_projectors)

    def __init__(
        self,
        entry_transforms: Iterable[EntryTransform] | None = None,
        entry_projectors: Mapping[str, EntryProjector] | None = None,
    ) -> None:
        transforms = tuple(entry_transforms or ())
        for t in transforms:
            if not callable(t):
                raise SessionError("invalid_argument", f"entry transform {t!r} is not callable")
        projectors = dict(entry_projectors or {})
        for key, p in projectors.items():
            if not isinstance(key, str) or not callable(p):
                raise SessionError(
                    "invalid_argument",
                    f"entry projector for {key!r} must map a str to a callable",
                )
        object.__setattr__(self, "entry_transforms", transforms)
        object.__setattr__(self, "entry_projectors", MappingProxyType(projectors))


def _check_options(name: str, options: object) -> None:
    if options is not None and not isinstance(options, SessionContextBuildOptions):
        raise SessionError(
            "invalid_argument",
            f"{name} must be SessionContextBuildOptions or None, not {type(options).__name__}",
        )


def merge_context_build_options(
    base: SessionContextBuildOptions | None,
    override: SessionContextBuildOptions | None,
) -> SessionContextBuildOptions:
    """Combines two option sets: base transforms first, then the override's; projectors
    merged with the override winning on the same ``custom_type``.

    Raises:
        SessionError: ``invalid_argument`` if either is not options or ``None``.
    """
    _check_options("base", base)
    _check_options("override", override)
    if base is None:
        return override or SessionContextBuildOptions()
    if override is None:
        return base
    return SessionContextBuildOptions(
        entry_transforms=(*base.entry_transforms, *override.entry_transforms),
        entry_projectors={**base.entry_projectors, **override.entry_projectors},
    )


def derive_session_context_state(path_entries: Iterable[SessionTreeEntry]) -> ContextState:
    """Thinking level, model and active tools after replaying ``path_entries`` in order.

    The model comes from the last ``model_change`` or assistant message.
    """
    thinking_level = "off"
    model: ModelRef | None = None
    tools: tuple[str, ...] | None = None
    for entry in path_entries:
        if isinstance(entry, ThinkingLevelChangeEntry):
            thinking_level = entry.thinking_level
        elif isinstance(entry, ModelChangeEntry):
            model = ModelRef(entry.provider, entry.model_id)
        elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
            model = ModelRef(entry.message.provider, entry.message.model)
        elif isinstance(entry, ActiveToolsChangeEntry):
            tools = tuple(entry.active_tool_names)
    return ContextState(thinking_level, model, tools)


def default_context_entry_transform(
    path_entries: Sequence[SessionTreeEntry],
) -> list[SessionTreeEntry]:
    """Applies the latest compaction on the path.

    Returns the compaction (its summary, then its retained tail, if any), the entries from
    ``first_kept_entry_id`` up to it (unless it has a retained tail), then every entry
    after it. Older compactions are left out: the latest summary supersedes them.
    """
    head, tail_start = split_at_latest_compaction(path_entries)
    return [*head, *path_entries[tail_start:]]


def split_at_latest_compaction(
    path_entries: Sequence[SessionTreeEntry],
) -> tuple[list[SessionTreeEntry], int]:
    """The default transform in two parts: ``(head, tail_start)``.

    ``head`` is what the latest compaction contributes (the compaction, then the entries it
    keeps from before it) and ``path_entries[tail_start:]`` follows it unchanged; without a
    compaction ``head`` is empty and ``tail_start`` is 0.  The incremental context keeps the
    head and extends the tail, so both share this one rule.
    """
    last = -1
    for i in range(len(path_entries) - 1, -1, -1):
        if isinstance(path_entries[i], CompactionEntry):
            last = i
            break
    if last < 0:
        return [], 0
    compaction = path_entries[last]
    assert isinstance(compaction, CompactionEntry)
    head: list[SessionTreeEntry] = [compaction]
    first_kept = compaction.first_kept_entry_id
    if compaction.retained_tail is None and first_kept is not None:
        keeping = False
        for entry in path_entries[:last]:
            if entry.id == first_kept:
                keeping = True
            if keeping and not isinstance(entry, CompactionEntry):
                head.append(entry)
    return head, last + 1


def build_context_entries(
    path_entries: Sequence[SessionTreeEntry],
    options: SessionContextBuildOptions | None = None,
) -> list[SessionTreeEntry]:
    """The default transform, then each user transform in order.

    An exception raised by a transform reaches the caller unchanged.
    """
    _check_options("options", options)
    entries = default_context_entry_transform(path_entries)
    return entries if options is None else apply_entry_transforms(entries, options)


def apply_entry_transforms(
    entries: list[SessionTreeEntry], options: SessionContextBuildOptions
) -> list[SessionTreeEntry]:
    """Each of ``options.entry_transforms`` in order, on already default-transformed
    ``entries``; a transform's result is checked to be a list of entries."""
    for transform in options.entry_transforms:
        entries = _checked(
            transform(entries), SessionTreeEntry, f"entry transform {transform!r}", "entries"
        )
    return entries


def _checked(result: object, item_type: Any, who: str, what: str) -> list[Any]:
    """``result`` as a list, or ``invalid_argument`` naming the callback that returned it.

    A wrong item would otherwise be dropped silently further on (it matches no entry type)
    or fail far from its cause.
    """
    if isinstance(result, list):
        items = result
    elif isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Iterable):
        raise SessionError(
            "invalid_argument", f"{who} returned {type(result).__name__}, not a list of {what}"
        )
    else:
        items = list(result)
    for item in items:
        if not isinstance(item, item_type):
            raise SessionError(
                "invalid_argument",
                f"{who} returned a {type(item).__name__} among its {what}",
            )
    return items


def session_entry_to_context_messages(
    entry: SessionTreeEntry,
    index: int,
    entries: list[SessionTreeEntry],
    options: SessionContextBuildOptions | None = None,
) -> list[AgentMessage]:
    """The messages one context entry contributes (``index`` is 0-based in ``entries``)."""
    if isinstance(entry, MessageEntry):
        return [entry.message]
    if isinstance(entry, CustomMessageEntry):
        return [
            create_custom_message(
                entry.custom_type, entry.content, entry.display, entry.details, entry.timestamp
            )
        ]
    if isinstance(entry, CompactionEntry):
        messages: list[AgentMessage] = [
            create_compaction_summary_message(entry.summary, entry.tokens_before, entry.timestamp)
        ]
        if entry.retained_tail is not None:
            messages.extend(entry.retained_tail)
        return messages
    if isinstance(entry, BranchSummaryEntry):
        return [create_branch_summary_message(entry.summary, entry.from_id, entry.timestamp)]
    if isinstance(entry, CustomEntry) and options is not None:
        projector = options.entry_projectors.get(entry.custom_type)
        if projector is not None:
            return _checked(
                projector(entry, index, entries),
                _MESSAGE_CLASSES,
                f"entry projector for {entry.custom_type!r}",
                "messages",
            )
    return []


def _messages(
    path_entries: Sequence[SessionTreeEntry], options: SessionContextBuildOptions | None
) -> tuple[AgentMessage, ...]:
    entries = build_context_entries(path_entries, options)
    out: list[AgentMessage] = []
    for i, entry in enumerate(entries):
        out.extend(session_entry_to_context_messages(entry, i, entries, options))
    return tuple(out)


def build_session_context(
    path_entries: Sequence[SessionTreeEntry],
    options: SessionContextBuildOptions | None = None,
) -> SessionContext:
    """Builds the context of a path (root first): its messages and derived state."""
    state = derive_session_context_state(path_entries)
    return SessionContext(
        _messages(path_entries, options),
        state.thinking_level,
        state.model,
        state.active_tool_names,
    )
