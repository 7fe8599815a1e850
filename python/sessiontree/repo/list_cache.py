"""The listing cache of a JSONL repository: one row per file, keyed by size, mtime and inode."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, Final

from ..model.types import SessionMetadata
from .base import _SUFFIX, is_valid_session_id, newest_first_key
from .metadata import FIRST_MESSAGE_LIMIT

__all__ = []


_CACHE_NAME: Final = ".sessiontree-list-cache.json"
_CACHE_FORMAT: Final = "sessiontree-list-cache"
# 2: ``modified`` is no earlier than ``created`` (version 1 rows may be).
# 3: rows are bounded (``first_message`` at most FIRST_MESSAGE_LIMIT characters, rows over
#    _ROW_MAX_BYTES or past _CACHE_ROWS_MAX_BYTES stored as skip markers).
# 4: rows have the session's ``dialect``.
_CACHE_VERSION: Final = 4
# A row is a few hundred bytes (``first_message`` is cut to 1,000 characters); one over
# this (a huge name or cwd) is not cached but kept as a skip marker, and re-read.
_ROW_MAX_BYTES: Final = 16 << 10
# Full rows stop here (the newest sessions first); the rest become skip markers, so the
# cache never grows past what a listing can load quickly.
_CACHE_ROWS_MAX_BYTES: Final = 64 << 20
# A cache bigger than this is not ours: full rows plus a marker per file stay far below.
_CACHE_MAX_BYTES: Final = 256 << 20


def _row_to_json(meta: SessionMetadata, key: tuple[int, int, int]) -> dict[str, Any]:
    return {
        "key": list(key),
        "id": meta.id,
        "cwd": meta.cwd,
        "created": None if meta.created is None else meta.created.isoformat(),
        "modified": None if meta.modified is None else meta.modified.isoformat(),
        "name": meta.name,
        "parent_session": meta.parent_session,
        "entry_count": meta.entry_count,
        "message_count": meta.message_count,
        "first_message": meta.first_message,
        "error": meta.error,
        "dialect": meta.dialect,
    }


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _encode_cache(rows: Mapping[str, tuple[tuple[int, int, int], SessionMetadata]]) -> bytes:
    """The cache document for ``rows``: each row in full while it and the whole stay within
    their bounds (newest sessions first), else a skip marker (its key alone), which says
    "re-read this file, the cache is not stale"."""
    order = sorted(rows.items(), key=lambda kv: newest_first_key(kv[1][1]), reverse=True)
    budget = _CACHE_ROWS_MAX_BYTES
    parts = []
    for name, (key, meta) in order:
        row = _dumps(_row_to_json(meta, key))
        size = len(row.encode("utf-8"))
        if size > _ROW_MAX_BYTES or size > budget:
            row = _dumps({"key": list(key), "skip": True})
        else:
            budget -= size
        parts.append(f"{_dumps(name)}:{row}")
    head = _dumps({"format": _CACHE_FORMAT, "version": _CACHE_VERSION})
    return f'{head[:-1]},"files":{{{",".join(parts)}}}}}'.encode()


def _is_skip_row(value: object, key: tuple[int, int, int]) -> bool:
    """True for the skip marker of a file whose key is still ``key``."""
    return isinstance(value, dict) and value.get("skip") is True and value.get("key") == list(key)


def _opt_str(d: dict[str, Any], key: str) -> str | None:
    value = d[key]
    if value is not None and not isinstance(value, str):
        raise TypeError(key)
    return value


def _dialect(d: dict[str, Any]) -> str:
    value = d["dialect"]
    if value not in ("sessiontree", "pi"):
        raise TypeError("dialect")
    return str(value)


def _count(d: dict[str, Any], key: str) -> int:
    value = d[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(key)
    return value


def _first_message(d: dict[str, Any]) -> str | None:
    text = _opt_str(d, "first_message")
    if text is not None and len(text) > FIRST_MESSAGE_LIMIT:
        raise ValueError("first_message")
    return text


def _cached_time(value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError("time")
    dt = datetime.fromisoformat(value)
    if dt.utcoffset() is None or dt.utcoffset():
        raise ValueError("not UTC")
    return dt.astimezone(timezone.utc)


def _row_from_json(
    file_name: str, value: object, path: str, *, named_by_id: bool = True
) -> tuple[tuple[int, int, int], SessionMetadata] | None:
    """A cache row, checked field by field; ``None`` if anything about it is off."""
    try:
        if not isinstance(value, dict):
            return None
        raw_key = value["key"]
        if not isinstance(raw_key, list) or len(raw_key) != 3:
            return None
        size, mtime, ino = raw_key
        for part in raw_key:
            if isinstance(part, bool) or not isinstance(part, int) or part < 0:
                return None
        sid = value["id"]
        if not isinstance(sid, str):
            return None
        if named_by_id and (file_name != sid + _SUFFIX or not is_valid_session_id(sid)):
            return None
        cwd = value["cwd"]
        if not isinstance(cwd, str):
            return None
        meta = SessionMetadata(
            id=sid,
            path=path,
            cwd=cwd,
            created=_cached_time(value["created"]),
            modified=_cached_time(value["modified"]),
            name=_opt_str(value, "name"),
            parent_session=_opt_str(value, "parent_session"),
            entry_count=_count(value, "entry_count"),
            message_count=_count(value, "message_count"),
            first_message=_first_message(value),
            size_bytes=size,
            error=_opt_str(value, "error"),
            dialect=_dialect(value),
        )
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    return (size, mtime, ino), meta
