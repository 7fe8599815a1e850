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

import importlib
import json
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from .._util import check_text
from ..errors import SessionError
from ..model.messages import AgentMessage

if TYPE_CHECKING:
    from ..aio import AsyncSession, AsyncSessionRepo

__all__ = [
    "as_async_repo",
    "as_async_session",
    "import_framework",
    "in_lane",
    "json_copy",
    "residual_of",
    "same_json",
    "to_json",
]

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
