"""What ``list`` shows for a session, read through the storage interface."""

from __future__ import annotations

from datetime import datetime
from typing import Final

from .._util import iso_to_datetime
from ..errors import SessionError
from ..model.messages import TextContent, UserMessage
from ..model.types import SessionMetadata
from ..storage import SessionStorage

__all__ = ["FIRST_MESSAGE_LIMIT", "metadata_of"]

FIRST_MESSAGE_LIMIT: Final = 1000
"""The most characters of :attr:`SessionMetadata.first_message` (API.md), ``…`` included."""


def _user_text(message: object) -> str | None:
    """The text of a user message: the string content, or its text blocks joined."""
    if not isinstance(message, UserMessage):
        return None
    content = message.content
    text = (
        content
        if isinstance(content, str)
        else "\n".join(b.text for b in content if isinstance(b, TextContent))
    )
    if len(text) > FIRST_MESSAGE_LIMIT:
        text = text[: FIRST_MESSAGE_LIMIT - 1] + "…"
    return text


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return iso_to_datetime(value)
    except SessionError:
        return None


def metadata_of(
    storage: SessionStorage, session_id: str, path: str | None, size: int
) -> SessionMetadata:
    """What ``list`` shows for one session, from any storage (an engine-backed one builds
    no entry objects but the first user message)."""
    header = storage.get_metadata()
    created = _parse_time(header.timestamp)
    newest = _parse_time(storage.get_newest_timestamp())
    # API.md: the later of the header's time and the newest entry's, so a fresh fork (its
    # copied entries are older than its header) lists first.
    modified = newest if created is None or (newest is not None and newest > created) else created
    stats = storage.get_session_stats()
    first = storage.get_first_message("user") if stats.user_message_count else None
    error = None
    if header.id != session_id:
        error = f"the header names session {header.id!r}, not {session_id!r}"
    return SessionMetadata(
        id=session_id,
        path=path,
        cwd=header.cwd,
        created=created,
        modified=modified,
        name=storage.get_session_name(),
        parent_session=header.parent_session,
        entry_count=stats.entry_count,
        message_count=stats.message_count,
        first_message=None if first is None else _user_text(first.message),
        size_bytes=size,
        error=error,
        dialect=storage.dialect,
    )
