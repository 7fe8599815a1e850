"""The Claude Agent SDK's ``SessionStore`` over a sessiontree repository.

The SDK mirrors Claude Code's transcripts (JSONL files of entries linked by ``uuid`` and
``parentUuid``) into a pluggable ``SessionStore``. :class:`ClaudeAgentSessionStore` puts
each transcript in a sessiontree session, so they are sessiontree files that ``sessiontree
tree``, ``show`` and forks work on::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from sessiontree import AsyncSessionRepo, JsonlSessionRepo
    from sessiontree.adapters.claude_agent_sdk import ClaudeAgentSessionStore

    store = ClaudeAgentSessionStore(AsyncSessionRepo(JsonlSessionRepo("transcripts")))
    options = ClaudeAgentOptions(session_store=store)

How the SDK's names map to ours:

- a ``SessionKey`` (``project_key``, ``session_id``, ``subpath``) is one session. Its id is
  derived from the key (:func:`session_id_for`); its ``cwd`` is the ``project_key``, its
  name the SDK's ``session_id`` (the ``subpath`` for a subagent transcript, whose
  ``parent_session`` is the main transcript's session); the header's metadata holds the
  key;
- a transcript entry is a custom entry of type :data:`ENTRY_CUSTOM_TYPE` holding the entry's
  JSON as it is. An entry with a ``uuid`` gets it as its id (a ``uuid`` already stored is
  skipped: the SDK retries batches), and hangs under its ``parentUuid`` when that is
  stored, so the transcript's tree is the session's tree; an entry without one hangs under
  the entry before it.

- the SDK's running summary of a main transcript (``fold_session_summary``, read back by
  ``list_session_summaries``) is a custom entry of type :data:`SUMMARY_CUSTOM_TYPE`
  appended after each batch, under the batch's last entry (beside the transcript, never a
  parent of it); its ``mtime`` is the entry's write time.

``load`` returns the entries in the order they were appended. Nothing is ever rewritten;
``delete`` deletes the session files. The store keeps the sessions it wrote or read open
(a JSONL session holds its file's writer lock) until :meth:`ClaudeAgentSessionStore.close`;
stores of one process share them (one writer each), and a batch is checked whole before
any of it is written.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Final

from .._util import check_text, iso_to_ms, ms_to_iso, now_iso, now_ms, uuid7
from ..errors import SessionError
from ..model.entries import CustomEntry, SessionTreeEntry
from ._common import (
    DEFAULT_LOCK_TIMEOUT,
    INLINE_BATCH_BYTES,
    INLINE_BATCH_ITEMS,
    SharedSession,
    append_batch,
    as_async_repo,
    check_entries,
    import_framework,
    in_lane,
    json_copy,
    limits_of,
    mapped_id,
    paused_gc,
    runs_inline,
    to_json,
)

import_framework("claude_agent_sdk", "claude-agent-sdk", "sessiontree.adapters.claude_agent_sdk")

from claude_agent_sdk import fold_session_summary  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable

    from claude_agent_sdk.types import (
        SessionKey,
        SessionListSubkeysKey,
        SessionStoreEntry,
        SessionStoreListEntry,
        SessionSummaryEntry,
    )

    from ..aio import AsyncSession, AsyncSessionRepo
    from ..model.types import SessionMetadata
    from ..repo import SessionRepo
    from ..session import Session
    from ..storage import Limits, SessionStorage

__all__ = ["ENTRY_CUSTOM_TYPE", "SUMMARY_CUSTOM_TYPE", "ClaudeAgentSessionStore", "session_id_for"]

ENTRY_CUSTOM_TYPE: Final = "claude_agent_sdk.entry"
"""The ``custom_type`` of the entries holding transcript entries."""

SUMMARY_CUSTOM_TYPE: Final = "claude_agent_sdk.summary"
"""The ``custom_type`` of the entries holding the SDK's running session summary."""

METADATA_KEY: Final = "claude_agent_sdk"
"""The header metadata key holding the session's ``SessionKey``."""

_ID_PREFIX: Final = "claude-"
_MAX_ID_BYTES: Final = 256


def session_id_for(key: SessionKey | SessionListSubkeysKey) -> str:
    """The sessiontree session id of a ``SessionKey``: the same key always gives the same
    id, and a safe file name whatever the key holds.

    >>> session_id_for({"project_key": "p", "session_id": "s"})
    'claude-0d8b4952a543a8802c9f8bf1b475d715'
    """
    project, session = _key_part(key, "project_key"), _key_part(key, "session_id")
    subpath = key.get("subpath")
    if subpath is not None:
        if not isinstance(subpath, str) or not subpath:
            raise SessionError("invalid_argument", "subpath must be a non-empty str when given")
        check_text("the session key's subpath", subpath)
    return mapped_id(_ID_PREFIX, [project, session, subpath or ""])


def _verifier(key: SessionKey) -> Callable[[Session], None]:
    """Checks that a session opened for ``key`` holds that key (its header's metadata), so
    two keys never share a session, should their ids ever collide."""

    def verify(session: Session) -> None:
        metadata = session.storage.get_metadata().metadata
        kept = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
        if not isinstance(kept, dict):
            return
        if any(kept.get(k) != key.get(k) for k in ("project_key", "session_id", "subpath")):
            raise SessionError("exists", f"session {session.id!r} holds another session key")

    return verify


def _key_part(key: Any, name: str) -> str:
    if not isinstance(key, dict):
        raise SessionError("invalid_argument", f"a session key must be a dict, not {key!r}")
    value = key.get(name)
    if not isinstance(value, str):
        raise SessionError("invalid_argument", f"the session key's {name} must be a str")
    check_text(f"the session key's {name}", value)
    return value


def _entry_id(value: object) -> str | None:
    if isinstance(value, str) and value and len(value.encode()) <= _MAX_ID_BYTES:
        return value
    return None


def _is_summary(entry: SessionTreeEntry | None) -> bool:
    return isinstance(entry, CustomEntry) and entry.custom_type == SUMMARY_CUSTOM_TYPE


def _last_summary(storage: SessionStorage) -> CustomEntry | None:
    """The newest summary entry (summaries are appended after each batch, so it is among
    the last entries)."""
    # The newest few first: building every custom entry of a long transcript on each
    # append made an append cost the transcript's length.
    for limit in (4, None):
        entries = storage.get_entries("custom", limit=limit, reverse=True)
        for entry in entries:
            if isinstance(entry, CustomEntry) and entry.custom_type == SUMMARY_CUSTOM_TYPE:
                return entry
        if limit is not None and len(entries) < limit:
            return None
    return None


def _summary_of(entry: CustomEntry) -> SessionSummaryEntry:
    """The SDK's summary an entry holds, its ``mtime`` the entry's write time."""
    return {
        "session_id": entry.data["session_id"],
        "mtime": iso_to_ms(entry.timestamp),
        "data": json_copy(entry.data["data"]),
    }


def _append_entries(
    session: Session, entries: list[Any], key: SessionKey, limits: Limits | None
) -> None:
    """Appends transcript entries to ``session`` (in the session's lane), then, for a main
    transcript, the SDK's running summary folded over them: all planned first, then
    written as one unit (every entry checked before one write: :func:`._common.append_batch`),
    or, on a storage that cannot, checked on a scratch session with the repository's
    limits and written with no call between."""
    storage = session.storage
    with storage.atomic():
        planned = _plan_entries(storage, entries, key)
        if append_batch(session, planned):
            return
        if len(planned) > 1:
            check_entries(limits, planned)
        for entry in planned:
            storage.append_entry(entry)


_write_times = threading.Lock()
_last_write_ms = 0


def _write_time() -> str:
    """The time an append stamps on its entries: now, or a millisecond after the previous
    append's of this process where the clock has not moved on. Sessions written one after
    another then list in that order, by ``list_sessions``' and the summaries' ``mtime``
    alike (both read these stamps): the rule of the SDK's ``InMemorySessionStore``, whose
    appends take ``max(now, previous + 1)`` milliseconds as their ``mtime``."""
    global _last_write_ms
    with _write_times:
        _last_write_ms = max(now_ms(), _last_write_ms + 1)
        return ms_to_iso(_last_write_ms)


def _plan_entries(
    storage: SessionStorage | None, entries: list[Any], key: SessionKey
) -> list[CustomEntry]:
    """The entries :func:`_append_entries` writes (see the module's docs for the tree);
    with no ``storage``, those it would write to a new session."""
    planned: dict[str, CustomEntry] = {}

    def known(entry_id: str) -> SessionTreeEntry | None:
        found = planned.get(entry_id)
        return found if found is not None or storage is None else storage.get_entry(entry_id)

    def new_id() -> str:
        return uuid7() if storage is None else storage.create_entry_id()

    # A plan only checked (no storage) takes no write time: the next real append's stays
    # one millisecond on at most.
    stamp = now_iso() if storage is None else _write_time()
    last = None if storage is None else storage.get_leaf_id()
    if last is not None:
        leaf = known(last)
        if _is_summary(leaf):
            last = leaf.parent_id  # type: ignore[union-attr]
    for data in entries:
        uuid = _entry_id(data.get("uuid"))
        if uuid is not None:
            found = known(uuid)
            if isinstance(found, CustomEntry) and found.custom_type == ENTRY_CUSTOM_TYPE:
                continue  # a batch the SDK sent again
            if found is not None:
                uuid = None  # an id of ours: keep the uuid in the data only
        if "parentUuid" in data and data["parentUuid"] is None:
            parent = None
        else:
            parent = _entry_id(data.get("parentUuid"))
            known_parent = None if parent is None else known(parent)
            if known_parent is None or _is_summary(known_parent):
                parent = last
        entry = CustomEntry(
            id=uuid or new_id(),
            parent_id=parent,
            timestamp=stamp,
            custom_type=ENTRY_CUSTOM_TYPE,
            data=data,
        )
        planned[entry.id] = entry
        last = entry.id
    out = list(planned.values())
    if key.get("subpath") is None:
        previous = None if storage is None else _last_summary(storage)
        folded = fold_session_summary(
            None if previous is None else _summary_of(previous), key, entries
        )
        # Hung under the transcript's last entry: a side leaf, never a parent.
        out.append(
            CustomEntry(
                id=new_id(),
                parent_id=last,
                timestamp=stamp,
                custom_type=SUMMARY_CUSTOM_TYPE,
                data={"session_id": folded["session_id"], "data": folded["data"]},
            )
        )
    return out


def _load_entries(storage: SessionStorage) -> list[Any]:
    """The transcript's entries, each a new object: from the engine's lines when the
    storage has them in the sessiontree dialect (built in Rust straight from each line, no
    entry object; a line the Rust reader is not sure of sends the whole load to a
    ``json.loads``-like parse of each line), else from the entries."""
    from .. import _core
    from ..storage.engine import _EngineStorage

    if isinstance(storage, _EngineStorage):
        engine = storage._engine
        if engine.dialect[0] == "sessiontree":
            customs = engine.select("custom", None, None, False)
            with paused_gc():  # many acyclic objects: see paused_gc
                found = _core.custom_data_of_lines(engine, customs, ENTRY_CUSTOM_TYPE)
            if found is not None:
                return found
            loads = _core.json_loads
            out = []
            with paused_gc():
                for raw in engine.lines(customs):
                    line = loads(raw)
                    if line.get("custom_type") == ENTRY_CUSTOM_TYPE:
                        out.append(line["data"])
            return out
    return [
        json_copy(e.data)
        for e in storage.get_entries("custom")
        if isinstance(e, CustomEntry) and e.custom_type == ENTRY_CUSTOM_TYPE
    ]


def _mtime(m: SessionMetadata) -> int:
    """When the session last changed, in Unix ms (the SDK's ``mtime``)."""
    return 0 if m.modified is None else int(m.modified.timestamp() * 1000)


class ClaudeAgentSessionStore:
    """A Claude Agent SDK ``SessionStore`` keeping each transcript in a sessiontree session.

    A session the store opens is shared with every other store (and adapter) of this
    process that opens it (see :class:`~sessiontree.adapters._common.SharedSession`), so
    several stores over one repository work side by side; another process's writer is
    waited for up to ``lock_timeout`` seconds.

    Args:
        repo: the repository the sessions live in (an
            :class:`~sessiontree.AsyncSessionRepo`, or any ``SessionRepo``, wrapped).
        lock_timeout: how long to wait for a session another process writes.
    """

    def __init__(
        self, repo: AsyncSessionRepo | SessionRepo, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    ) -> None:
        self._repo = as_async_repo(repo)
        self._limits = limits_of(self._repo)
        self._lock_timeout = lock_timeout
        self._open: dict[str, SharedSession] = {}

    @property
    def repo(self) -> AsyncSessionRepo:
        """The repository behind the store."""
        return self._repo

    async def _session(self, key: SessionKey, *, create: bool) -> AsyncSession | None:
        session_id = session_id_for(key)
        held = self._open.get(session_id)
        if held is not None and not getattr(held.session.storage, "closed", False):
            return held.session
        subpath = key.get("subpath")
        main = {"project_key": key["project_key"], "session_id": key["session_id"]}
        arguments = {
            "cwd": key["project_key"],
            "name": subpath if subpath is not None else key["session_id"],
            "parent_session": session_id_for(main) if subpath is not None else None,  # type: ignore[arg-type]
            "metadata": {METADATA_KEY: dict(key)},
        }
        try:
            held = await SharedSession.acquire(
                self._repo,
                session_id,
                create=arguments if create else None,
                lock_timeout=self._lock_timeout,
                verify=_verifier(key),
            )
        except SessionError as exc:
            if exc.code != "not_found" or create:
                raise
            return None
        previous = self._open.pop(session_id, None)
        self._open[session_id] = held
        if previous is not None:
            await previous.release()
        return held.session

    # -- the SDK's SessionStore protocol -----------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Appends a batch of transcript entries (see the module's docs for the tree).

        All or nothing: the whole batch (and the summary after it) is checked before any
        of it is written, as the engine would check it (JSON, text, nesting depth, line
        size under the repository's limits), then written with no other call between.

        Raises:
            SessionError: ``invalid_argument`` for a bad key, or entries that are not a list
                of JSON objects (text UTF-8 cannot encode, a lone surrogate, included in
                both); ``limit_exceeded`` for an entry deeper or longer than the
                limits (nothing is written then, and a new key's session is not created).
        """
        session_id = session_id_for(key)
        if not isinstance(entries, list):
            raise SessionError("invalid_argument", "entries must be a list")
        size = 0
        for n, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise SessionError("invalid_argument", f"entry {n} must be a dict")
            size += len(to_json(entry, f"entry {n}"))
        if not entries:
            return
        copies = json_copy(entries)
        if session_id not in self._open:
            # Checked before the session is made, so a refused first batch leaves no
            # session behind (appends to a session already open are checked in its lane).
            check_entries(self._limits, _plan_entries(None, copies, key))
        session = await self._session(key, create=True)
        assert session is not None
        if (
            len(copies) <= INLINE_BATCH_ITEMS
            and size <= INLINE_BATCH_BYTES
            and runs_inline(session, "write")
        ):
            # A few small entries (the transcript mirror's frames): written inline when the
            # lane is idle and the storage writes from memory, as AsyncSession writes, so
            # an append costs microseconds, not a thread hop.
            _append_entries(session.session, copies, key, self._limits)
            return
        await in_lane(session, _append_entries, session.session, copies, key, self._limits)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """The transcript's entries in the order they were appended, or ``None`` for a key
        never written."""
        session = await self._session(key, create=False)
        if session is None:
            return None
        return await in_lane(session, _load_entries, session.storage)

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The main transcripts of ``project_key``, with their last-modified times (Unix
        ms)."""
        return [
            {"session_id": m.name, "mtime": _mtime(m)}
            for m in await self._rows(project_key)
            if m.parent_session is None
            and m.name is not None
            and session_id_for({"project_key": project_key, "session_id": m.name}) == m.id
        ]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The SDK's running summaries of the main transcripts of ``project_key`` (kept
        up to date by :meth:`append`), each stamped with its write time."""
        out: list[SessionSummaryEntry] = []
        for listed in await self.list_sessions(project_key):
            key: SessionKey = {"project_key": project_key, "session_id": listed["session_id"]}
            session = await self._session(key, create=False)
            if session is None:
                continue
            entry = await in_lane(session, _last_summary, session.storage)
            if entry is not None:
                out.append(_summary_of(entry))
        return out

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths (subagent transcripts) stored under a session."""
        main = session_id_for(key)
        return [
            m.name
            for m in await self._rows(key["project_key"])
            if m.parent_session == main
            and m.name is not None
            and session_id_for({**key, "subpath": m.name}) == m.id
        ]

    async def delete(self, key: SessionKey) -> None:
        """Deletes a transcript's session; a main transcript's key deletes its subagent
        transcripts too."""
        doomed = [session_id_for(key)]
        if key.get("subpath") is None:
            doomed += [
                session_id_for({**key, "subpath": sub}) for sub in await self.list_subkeys(key)
            ]
        for session_id in doomed:
            held = self._open.pop(session_id, None)
            if held is not None:
                await held.release()
            try:
                await self._repo.delete(session_id)
            except SessionError as exc:
                if exc.code != "not_found":
                    raise

    async def _rows(self, project_key: str) -> list[SessionMetadata]:
        """The readable sessions of the repository whose ``cwd`` is ``project_key``."""
        if not isinstance(project_key, str):
            raise SessionError("invalid_argument", "project_key must be a str")
        check_text("project_key", project_key)
        return [
            m
            for m in await self._repo.list(cwd=project_key)
            if m.error is None and m.cwd == project_key
        ]

    async def close(self) -> None:
        """Closes every session the store opened (idempotent)."""
        while self._open:
            _, held = self._open.popitem()
            await held.release()

    def __repr__(self) -> str:
        return f"<ClaudeAgentSessionStore over {self._repo!r}, {len(self._open)} open>"
