"""Running blocking calls in worker threads and awaiting them from asyncio or trio.

A :class:`Lane` runs one session's calls one at a time, in the order they were submitted,
so appends made by one ``AsyncSession`` land in the file in the order its callers made
them, even when the task that awaited one of them was cancelled. :func:`wait` awaits a
lane's (or the pool's) future under whichever event loop is running.

Cancellation: a call that has not started when its awaiting task is cancelled is dropped
(it never runs); a call already running in its thread is waited for, shielded, and the
cancellation is delivered once it returned. So when a cancelled ``await`` ends, its call
has either not happened at all or happened completely (an engine append writes its whole
line or nothing), and the session is free for the next call.

A *shielded* wait (``wait(..., shield=True)``, what closes use) never drops its call: it
waits for it whatever cancels the task meanwhile, also in a scope that was cancelled
before the call was made (anyio's ``move_on_after`` around an ``async with``: every
checkpoint of the scope is cancelled until it is left, ``__aexit__``'s close included),
then delivers the cancellation.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import sys
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final, TypeVar

__all__ = ["Lane", "run_in_thread", "wait"]

T = TypeVar("T")

# Worker threads of every AsyncSession and AsyncSessionRepo in the process. Most of what
# they run releases the GIL (engine opens, writes, syncs, forks), so a few more threads
# than cores keep a slow disk from serialising unrelated sessions; as the stdlib's default.
_MAX_WORKERS: Final = min(32, (os.cpu_count() or 1) + 4)
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    pool = _pool
    if pool is None:
        with _pool_lock:
            pool = _pool
            if pool is None:
                pool = _pool = ThreadPoolExecutor(_MAX_WORKERS, "sessiontree-aio")
    return pool


def _forget_pool() -> None:
    # A forked child has none of the parent's threads: it starts its own pool, and a lane
    # the parent was draining at the fork would otherwise wait forever for its drainer.
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()
    for lane in list(_lanes):
        lane._reset()


os.register_at_fork(after_in_child=_forget_pool)


_Job = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]
_lanes: weakref.WeakSet[Lane] = weakref.WeakSet()


def _run(
    future: Future[Any],
    fn: Callable[..., Any],
    args: Any,
    kwargs: Any,
    settled: Callable[[], None] | None = None,
) -> None:
    """Runs one call into ``future``; ``settled`` is called once the call is over (or
    dropped), before ``future`` tells anyone."""
    if not future.set_running_or_notify_cancel():
        if settled is not None:
            settled()
        return  # cancelled before it started: it never runs
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:
        if settled is not None:
            settled()
        future.set_exception(exc)
    else:
        if settled is not None:
            settled()
        future.set_result(result)


def run_in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """Starts ``fn(*args, **kwargs)`` in a worker thread, outside any lane."""
    future: Future[T] = Future()
    _executor().submit(_run, future, fn, args, kwargs)
    return future


class Lane:
    """One session's worker-thread calls, run one at a time in submission order.

    The lane holds no thread of its own: while it has work, one pool thread drains it.
    """

    __slots__ = ("__weakref__", "_active", "_jobs", "_lock", "_pending")

    def __init__(self) -> None:
        self._jobs: collections.deque[_Job] = collections.deque()
        self._lock = threading.Lock()
        self._active = False  # a pool thread is draining the queue
        self._pending = 0  # calls submitted and not yet over
        _lanes.add(self)

    def _reset(self) -> None:
        # In a forked child: the parent's queued calls are the parent's.
        self._jobs.clear()
        self._lock = threading.Lock()
        self._active = False
        self._pending = 0

    @property
    def idle(self) -> bool:
        """True when every call submitted to this lane is over.

        A call counts as over before its future reports it, so the task awaiting the
        last call sees the lane idle when it resumes.
        """
        return self._pending == 0

    def _settled(self) -> None:
        with self._lock:
            self._pending -= 1

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        """Queues ``fn(*args, **kwargs)`` after every call submitted before."""
        future: Future[T] = Future()
        with self._lock:
            self._jobs.append((future, fn, args, kwargs))
            self._pending += 1
            if self._active:
                return future
            self._active = True
        try:
            _executor().submit(self._drain)
        except BaseException:
            with self._lock:
                self._pending -= len(self._jobs)
                self._jobs.clear()
                self._active = False
            raise
        return future

    def _drain(self) -> None:
        jobs = self._jobs
        while True:
            with self._lock:
                if not jobs:
                    self._active = False
                    return
                job = jobs.popleft()
            _run(*job, self._settled)

    def __repr__(self) -> str:
        return f"<Lane {'idle' if self.idle else f'{self._pending} calls pending'}>"


# --------------------------------------------------------------------------- awaiting


def _current_trio() -> Any:
    """The ``trio`` module when this thread runs a trio event loop, else ``None``."""
    trio = sys.modules.get("trio")
    if trio is None:
        return None
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return None
    return trio


async def wait(
    future: Future[T], cleanup: Callable[[T], object] | None = None, *, shield: bool = False
) -> T:
    """The result of ``future`` (from :class:`Lane` or :func:`run_in_thread`), awaited
    without blocking the running asyncio or trio loop.

    Args:
        future: the call's future.
        cleanup: for a call that hands out a resource (an open session): run, in a
            worker thread, on a result that arrives after the awaiting task was
            cancelled, so nothing stays open (or locked) that nobody holds.
        shield: never drop the call, even when it has not started yet: wait for it
            whatever cancels the task, then deliver the cancellation (for closes, which
            must happen however the block that owns the resource is left).
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        trio = _current_trio()
        if trio is None:
            raise RuntimeError(
                "sessiontree.aio needs a running asyncio or trio event loop (anyio runs on either)"
            ) from None
        return await _wait_trio(trio, future, cleanup, shield)
    return await _wait_asyncio(loop, future, cleanup, shield)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _waiter(loop: asyncio.AbstractEventLoop, future: Future[Any]) -> asyncio.Future[None]:
    waiter: asyncio.Future[None] = loop.create_future()

    def done(_: Future[Any]) -> None:
        # A loop closed meanwhile (RuntimeError) has nobody waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_wake, waiter)

    future.add_done_callback(done)
    return waiter


async def _wait_asyncio(
    loop: asyncio.AbstractEventLoop,
    future: Future[T],
    cleanup: Callable[[T], object] | None,
    shield: bool,
) -> T:
    try:
        await _waiter(loop, future)
    except BaseException:
        if not shield and future.cancel():
            raise  # not started: it never will
        # Running: wait until it returned, whatever cancellations arrive meanwhile (anyio
        # delivers a cancel scope's cancellation again on every loop iteration).
        while not future.done():
            try:
                await _waiter(loop, future)
            except asyncio.CancelledError:
                continue
        if cleanup is not None and future.exception() is None:
            done = run_in_thread(cleanup, future.result())
            while not done.done():
                try:
                    await _waiter(loop, done)
                except asyncio.CancelledError:
                    continue
        raise
    return future.result()


async def _wait_trio(
    trio: Any, future: Future[T], cleanup: Callable[[T], object] | None, shield: bool
) -> T:
    token = trio.lowlevel.current_trio_token()

    def event_of(f: Future[Any]) -> Any:
        event = trio.Event()

        def done(_: Future[Any]) -> None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(event.set)

        f.add_done_callback(done)
        return event

    event = event_of(future)
    if shield:
        with trio.CancelScope(shield=True):
            await event.wait()
        await trio.lowlevel.checkpoint_if_cancelled()
        return future.result()
    try:
        await event.wait()
    except BaseException:
        if future.cancel():
            raise
        with trio.CancelScope(shield=True):
            await event.wait()
            if cleanup is not None and future.exception() is None:
                await event_of(run_in_thread(cleanup, future.result())).wait()
        raise
    return future.result()
