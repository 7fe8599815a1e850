"""``AsyncSessionRepo``: any :class:`~sessiontree.SessionRepo` for code in an event loop."""

from __future__ import annotations

from ..errors import SessionError
from ..repo import SessionRepo
from ..session import Session
from . import _twins
from ._policy import REPO_CALLS, repo_inline
from ._session import AsyncSession

__all__ = ["AsyncSessionRepo"]


def _wrap(session: Session) -> AsyncSession:
    return AsyncSession.wrap(session)


class AsyncSessionRepo:
    """A :class:`~sessiontree.SessionRepo` (JSONL, in memory, yours) for asyncio, trio or
    anyio code: ``create``, ``open``, ``list``, ``delete`` and ``fork`` as coroutines of
    the same names, arguments and errors, handing out :class:`AsyncSession` objects.

    File and directory work runs in worker threads. A cancelled ``create``, ``open`` or
    ``fork`` that had already started finishes first; the session it made is then
    closed (so its lock is free) and the cancellation delivered.

    Args:
        repo: the repository to wrap.

    >>> import asyncio
    >>> from sessiontree import AsyncSessionRepo, InMemorySessionRepo
    >>> async def main() -> list[str | None]:
    ...     repo = AsyncSessionRepo(InMemorySessionRepo())
    ...     async with await repo.create(cwd="/w", name="first"):
    ...         pass
    ...     return [m.name for m in await repo.list()]
    >>> asyncio.run(main())
    ['first']
    """

    __slots__ = ("_inline", "_repo")

    def __init__(self, repo: SessionRepo) -> None:
        if not isinstance(repo, SessionRepo):
            raise SessionError(
                "invalid_argument", f"repo must be a SessionRepo, not {type(repo).__name__}"
            )
        self._repo = repo
        self._inline = frozenset(n for n, p in REPO_CALLS.items() if repo_inline(repo, p))

    @property
    def repo(self) -> SessionRepo:
        """The sync repository underneath."""
        return self._repo

    def __repr__(self) -> str:
        return f"<AsyncSessionRepo over {self._repo!r}>"


_twins.install(
    AsyncSessionRepo,
    REPO_CALLS,
    lambda name, policy: _twins.repo_twin(
        AsyncSessionRepo,
        name,
        getattr(SessionRepo, name),
        opens=name in ("create", "open", "fork"),
        wrap=_wrap,
    ),
)
