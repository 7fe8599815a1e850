"""Session repositories: many sessions under one roof, with create, open, list, delete, fork.

:class:`JsonlSessionRepo` keeps one file per session (``<root>/<session id>.jsonl``) and
caches what :meth:`~SessionRepo.list` needs per file, so listing thousands of sessions does
not re-read unchanged files. :class:`InMemorySessionRepo` has the same API without files,
for tests. Both implement :class:`SessionRepo`; :func:`get_entries_to_fork` is the fork
selection on its own, for any :class:`~sessiontree.storage.SessionStorage`.

>>> repo = InMemorySessionRepo()
>>> session = repo.create(cwd="/tmp/project", name="demo")
>>> [m.name for m in repo.list(cwd="/tmp/project")]
['demo']
>>> session.close()

Rooms: :mod:`.base` (the interface and shared argument checks), :mod:`.fork` (fork
planning for every storage), :mod:`.metadata` (what ``list`` shows), :mod:`.memory`,
:mod:`.jsonl`, :mod:`.pi` (:class:`PiSessionRepo`, pi's own session folders),
:mod:`.list_cache` (the JSONL repository's listing cache) and :mod:`.files` (atomic
publishing and other file helpers).
"""

from __future__ import annotations

from .base import FORK_POSITIONS, ForkPosition, SessionRef, SessionRepo, is_valid_session_id
from .fork import get_entries_to_fork
from .jsonl import JsonlSessionRepo
from .memory import InMemorySessionRepo
from .pi import PiSessionRepo

__all__ = [
    "FORK_POSITIONS",
    "ForkPosition",
    "InMemorySessionRepo",
    "JsonlSessionRepo",
    "PiSessionRepo",
    "SessionRef",
    "SessionRepo",
    "get_entries_to_fork",
    "is_valid_session_id",
]
