"""What ``list`` shows for a session, read through the storage interface."""

from __future__ import annotations

import json
from datetime import datetime

from .. import _core
from .._util import iso_to_datetime
from ..errors import SessionError
from ..types import SessionMetadata

__all__ = []


# --------------------------------------------------------------------------- metadata


def _user_text(line: bytes) -> str | None:
    """The text of a user message entry line: the string content, or text blocks joined."""
    try:
        d = json.loads(line)
    except ValueError:
        return None
    message = d.get("message") if isinstance(d, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return None


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return iso_to_datetime(value)
    except SessionError:
        return None


def _metadata_from_engine(
    engine: _core.Engine, session_id: str, path: str | None, size: int
) -> SessionMetadata:
    """What ``list`` shows for one session, from its engine (no entry objects built)."""
    header = json.loads(engine.header())
    cwd = header.get("cwd")
    parent = header.get("parent_session")
    created = _parse_time(header.get("timestamp"))
    newest = engine.newest_timestamp()
    newest_time = None if newest is None else _parse_time(newest)
    # API.md: the later of the header's time and the newest entry's, so a fresh fork (its
    # copied entries are older than its header) lists first.
    modified = (
        newest_time
        if created is None or (newest_time is not None and newest_time > created)
        else created
    )
    entry_count, message_count, user_count = engine.stats()[:3]
    first_message: str | None = None
    if user_count:
        for idx in engine.select("message"):
            if engine.info(idx)[1] == "user":
                first_message = _user_text(engine.lines([idx])[0])
                break
    error = None
    if engine.session_id != session_id:
        error = f"the header names session {engine.session_id!r}, not {session_id!r}"
    return SessionMetadata(
        id=session_id,
        path=path,
        cwd=cwd if isinstance(cwd, str) else "",
        created=created,
        modified=modified,
        name=engine.name(),
        parent_session=parent if isinstance(parent, str) else None,
        entry_count=entry_count,
        message_count=message_count,
        first_message=first_message,
        size_bytes=size,
        error=error,
    )
