"""The machinery of a conformance run: contracts, a tracer of calls, and checks that fail
with a sentence."""

from __future__ import annotations

import reprlib
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..errors import SessionError
from ._report import ContractResult

__all__ = [
    "Contract",
    "Failure",
    "Skip",
    "Tracer",
    "expect",
    "expect_equal",
    "expect_error",
    "run_contracts",
    "show",
]

T = TypeVar("T")
H = TypeVar("H")

_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 80
_short.maxlist = 6


def show(value: object, limit: int = 120) -> str:
    """A short repr for reports."""
    text = _short.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Failure(Exception):
    """A contract was broken; the message says how."""


class Skip(Exception):
    """A contract cannot be checked here; the message says why."""


@dataclass(frozen=True)
class Contract(Generic[H]):
    """One rule an implementation must keep.

    Attributes:
        name: a short identifier (usable as a test id).
        summary: the rule, with where the spec states it.
        run: checks the rule on a harness; raises :class:`Failure` when it is broken.
    """

    name: str
    summary: str
    run: Callable[[H], None]

    def __str__(self) -> str:
        return self.name


class Tracer:
    """Wraps an object so every method call on it is logged (for the report's "last call")."""

    def __init__(self, label: str, log: list[str]) -> None:
        self._label = label
        self._log = log

    def wrap(self, target: Any) -> Any:
        return _Traced(target, self._label, self._log)


class _Traced:
    __slots__ = ("_label", "_log", "_target")

    def __init__(self, target: Any, label: str, log: list[str]) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_log", log)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value
        label, log = self._label, self._log

        def call(*args: Any, **kwargs: Any) -> Any:
            shown = ", ".join([*map(show, args), *(f"{k}={show(v)}" for k, v in kwargs.items())])
            text = f"{label}.{name}({shown})"
            log.append(text)
            try:
                result = value(*args, **kwargs)
            except BaseException as exc:
                log[-1] = f"{text} raised {type(exc).__name__}: {exc}"
                raise
            log[-1] = f"{text} -> {show(result)}"
            return result

        return call

    def __len__(self) -> int:
        text = f"len({self._label})"
        self._log.append(text)
        n = len(self._target)
        self._log[-1] = f"{text} -> {n}"
        return n

    @property
    def raw(self) -> Any:
        """The object itself, untraced."""
        return self._target


def expect(ok: bool, why: str) -> None:
    """Fails the contract with ``why`` unless ``ok``."""
    if not ok:
        raise Failure(why)


def expect_equal(got: object, want: object, what: str) -> None:
    """Fails unless ``got == want``."""
    if got != want:
        raise Failure(f"{what}: expected {show(want)}, got {show(got)}")


def expect_error(code: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> SessionError:
    """Calls ``fn`` and fails unless it raises a ``SessionError`` with ``code``."""
    try:
        result = fn(*args, **kwargs)
    except SessionError as exc:
        if exc.code != code:
            raise Failure(f"expected SessionError code {code!r}, got {exc.code!r} ({exc})") from exc
        return exc
    except Exception as exc:
        raise Failure(
            f"expected SessionError code {code!r}, got {type(exc).__name__}: {exc}"
        ) from exc
    raise Failure(f"expected SessionError code {code!r}, but the call returned {show(result)}")


def run_contracts(
    contracts: Sequence[Contract[H]],
    only: Iterable[str | Contract[H]] | None,
    harness: Callable[[list[str]], H],
    cleanup: Callable[[H], None],
) -> tuple[ContractResult, ...]:
    """Runs each contract on a fresh harness; an error other than :class:`Failure` or
    :class:`Skip` is a failure too (reported with its traceback's last line)."""
    names = {c.name for c in contracts}
    wanted: set[str] | None = None
    if only is not None:
        wanted = {c if isinstance(c, str) else c.name for c in only}
        unknown = wanted - names
        if unknown:
            raise SessionError(
                "invalid_argument", f"unknown contracts: {', '.join(sorted(unknown))}"
            )
    results: list[ContractResult] = []
    for contract in contracts:
        if wanted is not None and contract.name not in wanted:
            continue
        log: list[str] = []
        h = harness(log)
        try:
            contract.run(h)
        except Skip as exc:
            results.append(ContractResult(contract.name, contract.summary, "skipped", str(exc)))
        except Failure as exc:
            results.append(
                ContractResult(
                    contract.name, contract.summary, "failed", str(exc), log[-1] if log else None
                )
            )
        except Exception as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            results.append(
                ContractResult(
                    contract.name,
                    contract.summary,
                    "failed",
                    f"unexpected {type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})",
                    log[-1] if log else None,
                )
            )
        else:
            results.append(ContractResult(contract.name, contract.summary, "passed"))
        finally:
            cleanup(h)
    return tuple(results)
