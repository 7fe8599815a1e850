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


def _forwarding(sync: Callable[..., Any]) -> tuple[str, str, dict[str, Any]]:
    """The parameter list and call arguments that forward a call to ``sync`` as it was
    made (its own defaults bound by name), so a twin needs no ``*args`` / ``**kwargs``
    (packing them costs a third of a cheap call)."""
    params: list[str] = []
    call: list[str] = []
    defaults: dict[str, Any] = {}
    star = False
    for p in list(inspect.signature(sync).parameters.values())[1:]:  # not self
        text = p.name
        if p.kind is p.VAR_POSITIONAL:
            params.append("*" + text)
            call.append("*" + text)
            star = True
            continue
        if p.kind is p.VAR_KEYWORD:
            params.append("**" + text)
            call.append("**" + text)
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        if p.default is not p.empty:
            defaults[f"_default_{p.name}"] = p.default
            text += f"=_default_{p.name}"
        params.append(text)
        call.append(f"{p.name}={p.name}" if p.kind is p.KEYWORD_ONLY else p.name)
    return ", ".join(["self", *params]), ", ".join(call), defaults


# The body of every non-local twin: inline while the session's lane is idle and the
# policy allows it, else queued in the lane and awaited. ``{check}`` is the policy's.
_TWIN = """
async def {name}({params}):
    session = self._session
    lane = self._lane
    if not lane._pending and kind in self._kinds{check}:
        {inline}
    return await wait(lane.submit({target}{comma}{call}){shield})
"""
_LOCAL = """
async def {name}({params}):
    return self._session.{name}({call})
"""


def session_twin(owner: type, name: str, policy: Policy, sync: Callable[..., Any]) -> Any:
    """The coroutine twin of ``Session.<name>`` on ``owner`` (an ``AsyncSession``),
    compiled with the sync method's own parameters."""
    params, call, defaults = _forwarding(sync)
    if policy is LOCAL:
        source = _LOCAL.format(name=name, params=params, call=call)
    else:
        if policy.attempt is not None:
            check = ""
            inline = (
                f"result = attempt(session{', ' if call else ''}{call})\n"
                "        if result is not DEFER:\n"
                "            return result"
            )
        else:
            check = "" if policy.decide is None else f" and decide(session, {call})"
            inline = f"return session.{name}({call})"
        target = f"session.{name}" if policy.worker is None else "worker, session"
        source = _TWIN.format(
            name=name,
            params=params,
            call=call,
            comma=", " if call else "",
            check=check,
            inline=inline,
            target=target,
            shield=", shield=True" if policy.shield else "",
        )
    namespace: dict[str, Any] = {
        "kind": policy.kind,
        "decide": policy.decide,
        "attempt": policy.attempt,
        "worker": policy.worker,
        "DEFER": DEFER,
        "wait": wait,
        **defaults,
    }
    exec(compile(source, f"<sessiontree.aio twin {name}>", "exec"), namespace)
    twin = namespace[name]
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
