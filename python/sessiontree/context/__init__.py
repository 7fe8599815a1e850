"""Building the LLM context from a path of entries.

:mod:`.build` holds the seed design's functions (:func:`build_session_context`, the default
transform, user transforms and projectors); :mod:`.incremental` the context a ``Session``
keeps between turns and extends as the session grows.
"""

from .build import (
    EntryProjector,
    EntryTransform,
    SessionContextBuildOptions,
    apply_entry_transforms,
    build_context_entries,
    build_session_context,
    default_context_entry_transform,
    derive_session_context_state,
    merge_context_build_options,
    session_entry_to_context_messages,
    split_at_latest_compaction,
)
from .incremental import ContextCache

__all__ = [
    "ContextCache",
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
