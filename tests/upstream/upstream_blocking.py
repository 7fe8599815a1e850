"""Running a coroutine to completion from synchronous code, for the plugins' stand-ins of
the frameworks' classes (their constructors and test helpers are synchronous)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Runs ``coro`` to completion in a thread with its own event loop, so it can be called
    whether or not an event loop is running in this thread (sessiontree's async objects are
    not tied to a loop: their calls run in worker threads)."""
    result: list[T] = []
    error: list[BaseException] = []

    def main() -> None:
        try:
            result.append(asyncio.run(coro))
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=main, name="sessiontree-upstream")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]
