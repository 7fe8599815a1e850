"""Makes the coroutine twins of the sync methods, from the call table (``_policy``).

A twin has the sync method's name, signature and docstring; its body only decides where
the sync method runs (inline, or in the session's lane) and awaits it there. Arguments
are checked, and errors raised, by the sync method itself, so both APIs fail alike.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from ._lane import run_in_thread, wait
from ._policy import DEFER, LOCAL, Policy

__all__ = ["install"]

TWIN_MARK = "__sessiontree_twin__"
"""Set on every generated twin (to the sync function it mirrors)."""


def _dress(
    twin: Callable[..., Any], owner: type, name: str, sync: Callable[..., Any], returns: str | None
) -> None:
    twin.__name__ = name
    twin.__qualname__ = f"{owner.__name__}.{name}"
    twin.__module__ = owner.__module__
    twin.__doc__ = sync.__doc__
    signature = inspect.signature(sync)
    annotations = dict(getattr(sync, "__annotations__", {}))
    if returns is not None:
        signature = signature.replace(return_annotation=returns)
        annotations["return"] = returns
    twin.__signature__ = signature  # type: ignore[attr-defined]
    twin.__annotations__ = annotations
    setattr(twin, TWIN_MARK, sync)


def session_twin(owner: type, name: str, policy: Policy, sync: Callable[..., Any]) -> Any:
    """The coroutine twin of ``Session.<name>`` on ``owner`` (an ``AsyncSession``).

    A local call runs at once. Any other runs inline while the session's lane is idle and
    the policy allows it (its ``attempt``, which may answer or defer, or its ``decide``),
    else it is queued in the lane and awaited (shielded from cancellation where the
    policy says so).
    """
    if policy is LOCAL:

        async def local(self: Any, /, *args: Any, **kwargs: Any) -> Any:
            return getattr(self._session, name)(*args, **kwargs)

        _dress(local, owner, name, sync, None)
        return local

    kind, decide, attempt = policy.kind, policy.decide, policy.attempt
    worker, shield = policy.worker, policy.shield

    async def twin(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        session = self._session
        lane = self._lane
        if not lane._pending and kind in self._kinds:
            if attempt is not None:
                result = attempt(session, *args, **kwargs)
                if result is not DEFER:
                    return result
            elif decide is None or decide(session, *args, **kwargs):
                return getattr(session, name)(*args, **kwargs)
        if worker is None:
            future = lane.submit(getattr(session, name), *args, **kwargs)
        else:
            future = lane.submit(worker, session, *args, **kwargs)
        return await wait(future, shield=shield)

    _dress(twin, owner, name, sync, None)
    return twin


def repo_twin(
    owner: type,
    name: str,
    sync: Callable[..., Any],
    opens: bool,
    wrap: Callable[[Any], Any],
) -> Any:
    """The coroutine twin of ``SessionRepo.<name>`` on ``owner`` (an ``AsyncSessionRepo``).

    ``opens``: the method returns an open ``Session``, handed out wrapped by ``wrap``
    (and closed again if its caller was cancelled meanwhile).
    """

    def _close(session: Any) -> None:
        session.close()

    cleanup = _close if opens else None

    async def twin(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self._repo, name)
        if name in self._inline:
            result = method(*args, **kwargs)
        else:
            result = await wait(run_in_thread(method, *args, **kwargs), cleanup)
        return wrap(result) if opens else result

    _dress(twin, owner, name, sync, "AsyncSession" if opens else None)
    return twin


def install(owner: type, table: Mapping[str, Policy], make: Callable[[str, Policy], Any]) -> None:
    """Sets ``owner.<name> = make(name, policy)`` for every entry of ``table``."""
    for name, policy in table.items():
        if name in vars(owner):
            raise TypeError(f"{owner.__name__}.{name} is written by hand; drop it from the table")
        setattr(owner, name, make(name, policy))
