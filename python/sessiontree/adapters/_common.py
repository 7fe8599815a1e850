"""What the framework adapters share: importing the framework with a clear hint, exact
JSON comparison, and the "residual" that makes a mapping to our messages lossless.

A framework item maps to one of our messages when the message can hold what matters to a
reader of the session (text, thinking, tool calls and results). Whatever else the item has
(ids, statuses, annotations, provider-specific fields) is kept beside the message, in an
extra field of the message object (FORMAT.md: unknown fields are kept and written back):
the *residual*, the item itself with each value the message already holds replaced by
``None``. Rebuilding the item fills the residual back in from the message, so key order
is the item's own. Every mapping is checked when it is made — the item rebuilt from the
message must serialise exactly like the original — and an item that does not come back
exactly is stored whole in a custom entry instead. So a round trip is lossless by
construction, not by the converters being right about every field.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .._gc import paused_gc
from .._util import check_text, now_iso
from ..aio._policy import INLINE_WRITE_BYTES
from ..aio._session import runs_inline
from ..errors import SessionError
from ..model.entries import MessageEntry
from ..model.messages import AgentMessage

if TYPE_CHECKING:
    from ..aio import AsyncSession, AsyncSessionRepo
    from ..model.entries import SessionTreeEntry
    from ..repo import SessionRepo
    from ..session import Session
    from ..storage import Limits

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "INLINE_BATCH_BYTES",
    "INLINE_BATCH_ITEMS",
    "SharedSession",
    "append_batch",
    "append_chain",
    "as_async_repo",
    "as_async_session",
    "batch_storage",
    "check_entries",
    "check_writes",
    "fresh_ids",
    "import_framework",
    "in_lane",
    "json_copy",
    "limits_of",
    "mapped_id",
    "paused_gc",
    "residual_of",
    "runs_inline",
    "same_json",
    "to_json",
]

INLINE_BATCH_ITEMS: Final = 16
"""An adapter writes a batch inline on the event loop (the session's lane idle, a storage
that writes from memory: :func:`runs_inline`) when it has at most this many entries..."""
INLINE_BATCH_BYTES: Final = INLINE_WRITE_BYTES
"""...of at most this many characters of JSON in all (AsyncSession's own bound for an
inline append); anything bigger goes to the lane's thread."""

T = TypeVar("T")


def import_framework(module: str, extra: str, adapter: str) -> ModuleType:
    """Import a framework's module, or fail with the install command of its extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{adapter} needs the {module!r} package; install it with "
            f"pip install 'sessiontree[{extra}]'"
        ) from exc


def to_json(value: Any, what: str) -> str:
    """``value`` as compact JSON, or ``invalid_argument`` naming ``what``: also for text
    UTF-8 cannot encode (a lone surrogate), which ``json.dumps`` lets through but no
    session can hold, so a batch is refused before any of it is written."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SessionError("invalid_argument", f"{what} is not JSON: {exc}") from None
    check_text(f"{what}'s JSON", text)
    return text


def same_json(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` serialise to the same JSON text (types and key order too)."""
    try:
        return json.dumps(a, ensure_ascii=False) == json.dumps(b, ensure_ascii=False)
    except (TypeError, ValueError):
        return False


def json_copy(value: Any) -> Any:
    """An independent copy of a JSON value (faster than ``copy.deepcopy`` for JSON)."""
    return json.loads(json.dumps(value, ensure_ascii=False))


def residual_of(message: AgentMessage, key: str) -> Any:
    """The residual a mapping kept on ``message`` under ``key``, or ``None``.

    Read from the message's unknown fields directly (``messages._Value._extra``, what
    :func:`~sessiontree.message_to_dict` writes back after the known fields): encoding the
    whole message to find one field cost 40 % of ``get_items`` on long sessions.
    """
    extra = message._extra
    return None if extra is None else extra.get(key)


async def in_lane(session: AsyncSession, fn: Callable[..., T], *args: Any) -> T:
    """Runs ``fn(*args)`` (sync code over ``session.session`` or its storage) in the
    session's lane: after every call made on ``session`` before, in a worker thread, so the
    event loop is not held up and the order of the session's calls is kept."""
    from ..aio._lane import wait

    lane = session._lane  # type: ignore[attr-defined]
    return await wait(lane.submit(fn, *args))


def as_async_session(session: object) -> AsyncSession:
    """``session`` as an :class:`~sessiontree.AsyncSession` (a sync ``Session`` is wrapped).

    Raises:
        SessionError: ``invalid_argument`` for anything else.
    """
    from ..aio import AsyncSession
    from ..session import Session

    if isinstance(session, AsyncSession):
        return session
    if isinstance(session, Session):
        return AsyncSession.wrap(session)
    raise SessionError(
        "invalid_argument",
        f"session must be an AsyncSession or a Session, not {type(session).__name__}",
    )


def as_async_repo(repo: object) -> AsyncSessionRepo:
    """``repo`` as an :class:`~sessiontree.AsyncSessionRepo` (a ``SessionRepo`` is wrapped).

    Raises:
        SessionError: ``invalid_argument`` for anything else.
    """
    from ..aio import AsyncSessionRepo
    from ..repo import SessionRepo

    if isinstance(repo, AsyncSessionRepo):
        return repo
    if isinstance(repo, SessionRepo):
        return AsyncSessionRepo(repo)
    raise SessionError(
        "invalid_argument",
        f"repo must be an AsyncSessionRepo or a SessionRepo, not {type(repo).__name__}",
    )


# ----------------------------------------------------------------- ids the framework gives


def mapped_id(prefix: str, parts: Sequence[str]) -> str:
    """The session id an adapter keeps a framework's id (or key of several ``parts``)
    under: ``prefix`` and the first 32 hex digits of the SHA-256 of the parts' UTF-8,
    joined by NUL. The same parts give the same id in every process and on every host; it
    is a safe file name and database key whatever the parts hold. The adapters keep the
    parts in the session's header metadata and check them on open, so two different ids
    never share a session (a collision is refused, never merged).

    >>> mapped_id("claude-", ["p", "s", ""])
    'claude-0d8b4952a543a8802c9f8bf1b475d715'
    """
    text = "\0".join(parts)
    check_text("a session id", text)
    return prefix + hashlib.sha256(text.encode()).hexdigest()[:32]


# ------------------------------------------------------------------ checking before writing


def limits_of(repo: object) -> Limits | None:
    """The limits the sessions of ``repo`` (an ``AsyncSessionRepo`` or ``SessionRepo``) are
    written under, when the repository says (``None``: the defaults)."""
    from ..aio import AsyncSessionRepo
    from ..storage import Limits

    if isinstance(repo, AsyncSessionRepo):
        repo = repo.repo
    limits = getattr(repo, "_limits", None)
    return limits if isinstance(limits, Limits) else None


def check_writes(limits: Limits | None, write: Callable[[Session], object]) -> None:
    """Runs ``write`` on a scratch in-memory session with the same ``limits`` (the same
    engine checks: UTF-8, nesting depth, line size, ids), so a batch that would fail part
    way is refused before any of it reaches the real session. Costs about 10 µs an entry."""
    from ..session import Session
    from ..storage import InMemorySessionStorage

    scratch = Session(InMemorySessionStorage(limits=limits))
    try:
        write(scratch)
    finally:
        scratch.close()


def check_entries(limits: Limits | None, entries: Sequence[SessionTreeEntry]) -> None:
    """:func:`check_writes` for entries with their own ids and parents: each is appended
    to the scratch session (under ``None`` when its parent is not among them; an id seen
    before is skipped, as the adapters skip entries already stored)."""

    def write(scratch: Session) -> None:
        storage = scratch.storage
        seen: set[str] = set()
        for entry in entries:
            if entry.id in seen:
                continue
            if entry.parent_id is not None and entry.parent_id not in seen:
                entry = dataclasses.replace(entry, parent_id=None)
            storage.append_entry(entry)
            seen.add(entry.id)

    check_writes(limits, write)


def batch_storage(session: Session) -> Any:
    """The session's storage when it appends a batch as one unit (one of this package's
    engine-backed storages: JSONL, in memory, PostgreSQL), else ``None`` (a storage of
    another kind, or a subclass from elsewhere, whose own appends must run: the caller
    checks with :func:`check_entries` and appends one entry at a time)."""
    from ..storage.engine import _EngineStorage

    storage = session.storage
    if isinstance(storage, _EngineStorage) and type(storage).__module__.startswith("sessiontree."):
        return storage
    return None


def append_batch(session: Session, entries: Sequence[SessionTreeEntry]) -> bool:
    """Appends ``entries`` (with their ids and parents) to ``session`` as one unit —
    every entry checked as the engine checks it, its references against the session and
    the batch's earlier entries, before anything is written; one write (one transaction)
    — and tells the session's context cache. ``False``, doing nothing, when the storage
    cannot (see :func:`batch_storage`). Call it under the storage's atomic lock."""
    storage = batch_storage(session)
    if storage is None:
        return False
    storage.append_entries(entries)
    _tell_cache(session, storage, entries)
    return True


def append_chain(
    session: Session, things: Sequence[AgentMessage | tuple[str, Any]]
) -> list[str] | None:
    """Appends a chain under the leaf — each of ``things`` a message, or a custom entry's
    ``(custom_type, data)`` — as one unit, like :func:`append_batch`; their entry ids, or
    ``None``, doing nothing, when the storage cannot (see :func:`batch_storage`).

    The lines are made by the engine's own ``append_message`` (stamping and encoding in
    one call) on a scratch in-memory engine, whose ids the chain keeps unless one is
    taken in the session (then the entries get new ids, encoded one by one); the real
    engine checks every line again before its one write. Call it under the storage's
    atomic lock."""
    from .. import _core
    from ..model.entries import CustomEntry
    from ..storage.engine import _entry_lines, _scratch_header

    storage = batch_storage(session)
    if storage is None:
        return None
    scratch = _core.Engine.memory(_scratch_header())
    ids: list[str] = []
    entries: list[SessionTreeEntry] = []
    for thing in things:
        if isinstance(thing, tuple):
            custom_type, data = thing
            entry: SessionTreeEntry = CustomEntry(
                id=scratch.create_entry_id(),
                parent_id=ids[-1] if ids else None,
                timestamp=now_iso(),
                custom_type=custom_type,
                data=data,
            )
            scratch.append_entry(entry)
        else:
            entry = scratch.append_message(thing)
            if entry is None:  # not exactly a model class: the Python writer's line
                entry = MessageEntry(
                    id=scratch.create_entry_id(),
                    parent_id=ids[-1] if ids else None,
                    timestamp=now_iso(),
                    message=thing,
                )
                scratch.append_entry(entry)
        ids.append(entry.id)
        entries.append(entry)
    leaf = storage.get_leaf_id()
    if any(storage._engine.lookup(entry_id) is not None for entry_id in ids):
        # An id the session has (about one batch in 40,000 of 10k entries): new ids.
        ids = fresh_ids(storage, len(entries))
        parent = leaf
        renamed: list[SessionTreeEntry] = []
        for entry, entry_id in zip(entries, ids, strict=True):
            renamed.append(dataclasses.replace(entry, id=entry_id, parent_id=parent))
            parent = entry_id
        entries = renamed
        lines = _entry_lines(entries)
    else:
        document = scratch.to_bytes()
        assert document is not None  # a memory engine's
        lines = document.split(b"\n", len(entries) + 1)[1 : len(entries) + 1]
        if leaf is not None:
            lines[0] = _core.reparent_line(lines[0], leaf)
            entries[0] = dataclasses.replace(entries[0], parent_id=leaf)
    storage._append_lines(lines)
    _tell_cache(session, storage, entries)
    return ids


def _tell_cache(session: Session, storage: Any, entries: Sequence[SessionTreeEntry]) -> None:
    cache = session._context_cache
    if cache is not None:
        count = len(storage) - len(entries)
        for n, entry in enumerate(entries, 1):
            cache.appended(entry, count + n)


def fresh_ids(storage: Any, count: int) -> list[str]:
    """``count`` new entry ids, none used in the session nor twice among them."""
    ids: list[str] = []
    seen: set[str] = set()
    while len(ids) < count:
        entry_id = storage.create_entry_id()
        if entry_id not in seen:
            seen.add(entry_id)
            ids.append(entry_id)
    return ids


# ------------------------------------------------------------ one writer per session, shared


DEFAULT_LOCK_TIMEOUT: Final = 5.0
"""Seconds an adapter's ``open`` waits for a session another process is writing (the
default ``timeout`` of Python's ``sqlite3``, which the SDKs' SQLite stores wait as long)."""


class _Slot:
    """A session of one repository, as shared by the adapter objects of this process."""

    __slots__ = ("gate", "refs", "session", "users")

    def __init__(self) -> None:
        self.gate = threading.Lock()  # held while the session is opened or released
        self.session: AsyncSession | None = None
        self.refs = 0  # adapter objects holding ``session``
        self.users = 0  # threads between looking the slot up and leaving its gate


_slots: dict[tuple[Any, ...], _Slot] = {}
_slots_lock = threading.Lock()


def _repo_key(repo: SessionRepo) -> tuple[Any, ...]:
    """What names a repository in the registry: a JSONL repository by its directory, a
    PostgreSQL one by its conninfo (given as a string or a pool's) and schema (every repo
    object over them shares), any other by the object itself."""
    from ..repo import JsonlSessionRepo

    if isinstance(repo, JsonlSessionRepo):
        return (type(repo).__qualname__, os.path.realpath(repo.root_dir))
    postgres = sys.modules.get("sessiontree.postgres.repo")
    if postgres is not None and isinstance(repo, postgres.PostgresSessionRepo):
        conninfo = repo._source._conninfo
        if isinstance(conninfo, str) and repo._source._conn is None:
            return (type(repo).__qualname__, conninfo, repo.schema)
    return (type(repo).__qualname__, id(repo), repo)


def _is_closed(session: AsyncSession) -> bool:
    return bool(getattr(session.storage, "closed", False))


def _open_or_create(
    repo: SessionRepo,
    session_id: str,
    create: dict[str, Any] | None,
    lock_timeout: float,
) -> Session:
    """Opens ``session_id`` (creating it with ``create``'s arguments when it does not exist
    and ``create`` is given), waiting up to ``lock_timeout`` seconds while another process
    writes it (``locked``) or creates it at the same time (``exists``)."""
    deadline = time.monotonic() + lock_timeout
    delay = 0.005
    while True:
        try:
            try:
                return repo.open(session_id)
            except SessionError as exc:
                if exc.code != "not_found" or create is None:
                    raise
            return repo.create(session_id=session_id, **create)
        except SessionError as exc:
            left = deadline - time.monotonic()
            if exc.code not in ("locked", "exists") or left <= 0:
                raise
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.2)


def _acquire(
    repo: SessionRepo,
    session_id: str,
    create: dict[str, Any] | None,
    lock_timeout: float,
    verify: Callable[[Session], None] | None,
) -> tuple[tuple[Any, ...], AsyncSession]:
    from ..aio import AsyncSession

    key = (*_repo_key(repo), session_id)
    with _slots_lock:
        slot = _slots.get(key)
        if slot is None:
            slot = _slots[key] = _Slot()
        slot.users += 1
    try:
        with slot.gate:
            session = slot.session
            if session is None or _is_closed(session):
                opened = _open_or_create(repo, session_id, create, lock_timeout)
                if verify is not None:
                    try:
                        verify(opened)
                    except BaseException:
                        opened.close()
                        raise
                session = slot.session = AsyncSession.wrap(opened)
                slot.refs = 0
            elif verify is not None:
                verify(session.session)
            slot.refs += 1
            return key, session
    finally:
        with _slots_lock:
            slot.users -= 1
            if slot.users == 0 and slot.refs == 0 and _slots.get(key) is slot:
                del _slots[key]


def _release(key: tuple[Any, ...], session: AsyncSession) -> bool:
    """Drops one reference; True when it was the last (the caller closes the session)."""
    with _slots_lock:
        slot = _slots.get(key)
    if slot is None:
        return True
    with slot.gate, _slots_lock:
        if slot.session is not session:
            return True  # replaced after it was closed: the caller's own to close
        slot.refs -= 1
        if slot.refs > 0:
            return False
        slot.session = None
        if slot.users == 0 and _slots.get(key) is slot:
            del _slots[key]
        return True


class SharedSession:
    """An adapter object's hold on a session shared through the process-wide registry:
    every adapter object that opens one session of one repository (a JSONL directory, or
    one repository object) in this process gets the same :class:`~sessiontree.AsyncSession`,
    so they are one writer, and their calls queue in its lane. The session is closed when
    the last holder releases it.

    Across processes a session still has one writer: :meth:`acquire` waits, up to
    ``lock_timeout`` seconds, for another process to close it, then raises ``locked``.
    """

    __slots__ = ("_key", "_released", "session")

    def __init__(self, key: tuple[Any, ...], session: AsyncSession) -> None:
        self._key = key
        self._released = False
        self.session = session

    @classmethod
    async def acquire(
        cls,
        repo: AsyncSessionRepo | SessionRepo,
        session_id: str,
        *,
        create: dict[str, Any] | None = None,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        verify: Callable[[Session], None] | None = None,
    ) -> SharedSession:
        """A hold on session ``session_id`` of ``repo``: the registry's, or the session
        opened now (created with ``create``'s arguments if it does not exist and
        ``create`` is given); ``verify`` checks the session opened (its header)."""
        from ..aio._lane import run_in_thread, wait

        sync_repo = as_async_repo(repo).repo
        if (
            isinstance(lock_timeout, bool)
            or not isinstance(lock_timeout, (int, float))
            or not lock_timeout >= 0
        ):
            raise SessionError("invalid_argument", "lock_timeout must be a number >= 0")

        def cleanup(got: tuple[tuple[Any, ...], AsyncSession]) -> None:
            # The awaiting task was cancelled once the session was opened: let it go.
            if _release(*got):
                got[1].session.close()

        key, session = await wait(
            run_in_thread(_acquire, sync_repo, session_id, create, float(lock_timeout), verify),
            cleanup,
        )
        return cls(key, session)

    @property
    def key(self) -> tuple[Any, ...]:
        """The registry's name of the session: the repository's (see ``_repo_key``) and
        the session id."""
        return self._key

    async def release(self) -> None:
        """Lets the session go (idempotent); the last holder closes it."""
        from ..aio._lane import run_in_thread, wait

        if self._released:
            return
        self._released = True
        if await wait(run_in_thread(_release, self._key, self.session)):
            await self.session.close()
