"""``AsyncSession``: :class:`~sessiontree.Session` for code running in an event loop."""

from __future__ import annotations

import threading
import weakref
from types import TracebackType

from ..context import SessionContextBuildOptions
from ..errors import SessionError
from ..session import Session
from ..storage import SessionStorage
from . import _twins
from ._lane import Lane
from ._policy import SESSION_CALLS, inline_kinds

__all__ = ["AsyncSession"]

# One lane per Session, so two AsyncSession wrappers of one Session still take turns.
_lanes: weakref.WeakKeyDictionary[Session, Lane] = weakref.WeakKeyDictionary()
_lanes_lock = threading.Lock()


def _lane_of(session: Session) -> Lane:
    with _lanes_lock:
        lane = _lanes.get(session)
        if lane is None:
            lane = _lanes[session] = Lane()
        return lane


class AsyncSession:
    """A :class:`~sessiontree.Session` for asyncio, trio or anyio code: every method of
    ``Session`` as a coroutine of the same name, arguments, errors and result.

    Calls that answer from memory run inline; those that may block (syncs, closes, first
    context builds, whole-branch reads of large sessions, appends of large messages,
    every call on a storage whose costs are unknown) run in a worker thread, and what
    they build is built a chunk at a time, so the event loop keeps running meanwhile
    (``sessiontree.aio._policy`` has the table; ``benches/test_bench_async_stall.py``
    measures each call's longest loop stall).

    The calls of one ``AsyncSession`` run in the order they were made, one at a time.
    A cancelled call either never ran or ran to its end (the cancellation arrives when
    it returned): no partial line, no lock left held, and the session stays usable.
    ``close()`` (and so leaving ``async with``) always closes, whatever cancels it,
    including a cancel scope that was cancelled before (anyio's ``move_on_after``): it
    waits for the close, then delivers the cancellation.

    Args:
        storage: where the entries live (any :class:`~sessiontree.SessionStorage`).
        context_build_options: as for :class:`~sessiontree.Session`.

    >>> import asyncio
    >>> from sessiontree import AsyncSession, InMemorySessionStorage, UserMessage
    >>> async def main() -> int:
    ...     async with AsyncSession(InMemorySessionStorage()) as session:
    ...         await session.append_message(UserMessage("Hello"))
    ...         return len((await session.build_context()).messages)
    >>> asyncio.run(main())
    1
    """

    __slots__ = ("_kinds", "_lane", "_session")

    def __init__(
        self,
        storage: SessionStorage,
        context_build_options: SessionContextBuildOptions | None = None,
    ) -> None:
        self._bind(Session(storage, context_build_options))

    @classmethod
    def wrap(cls, session: Session) -> AsyncSession:
        """The async API over an existing :class:`~sessiontree.Session`.

        Wrap a session once and use the wrapper only (wrappers of one session share
        their queue; a sync call made meanwhile on the session from another thread
        waits for the storage's lock, which may hold up the event loop).
        """
        if not isinstance(session, Session):
            raise SessionError(
                "invalid_argument", f"session must be a Session, not {type(session).__name__}"
            )
        self = cls.__new__(cls)
        self._bind(session)
        return self

    def _bind(self, session: Session) -> None:
        self._session = session
        self._lane = _lane_of(session)
        self._kinds = inline_kinds(session.storage)

    @property
    def session(self) -> Session:
        """The sync :class:`~sessiontree.Session` underneath."""
        return self._session

    @property
    def storage(self) -> SessionStorage:
        """The storage behind this session."""
        return self._session.storage

    @property
    def id(self) -> str:
        """The session id (from the header)."""
        return self._session.id

    @property
    def context_build_options(self) -> SessionContextBuildOptions:
        """The session's own context build options (see ``Session``)."""
        return self._session.context_build_options

    @context_build_options.setter
    def context_build_options(self, options: SessionContextBuildOptions) -> None:
        self._session.context_build_options = options

    def __len__(self) -> int:
        return len(self._session)

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # The generated twin of Session.close (mypy sees it in the stub only): shielded,
        # so it closes even when the block is left by a cancellation.
        await self.close()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"<AsyncSession over {self._session.storage!r}>"


_twins.install(
    AsyncSession,
    SESSION_CALLS,
    lambda name, policy: _twins.session_twin(AsyncSession, name, policy, getattr(Session, name)),
)


def runs_inline(session: object, kind: str) -> bool:
    """Whether a cheap call of ``kind`` (``"read"``, ``"write"``) may run inline on the
    event loop now: the rule every twin applies (``_twins.py``) — no call of the session
    queued or running in its lane (so the order of calls is kept), and a storage that
    answers such calls from memory (:func:`._policy.inline_kinds`). For code that runs its
    own steps beside the twins (the framework adapters): a thread hop costs ~0.1 ms, more
    than a small append to such a storage."""
    # (``object``: type checkers see AsyncSession through the package's stub.)
    assert isinstance(session, AsyncSession)
    return session._lane.idle and kind in session._kinds
