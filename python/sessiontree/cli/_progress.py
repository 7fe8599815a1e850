"""A progress bar on stderr while a large session file is opened.

``JsonlSessionStorage.open`` is one call into the engine, which releases the GIL while it
scans, so a thread can draw the bar meanwhile. The engine reads the file sequentially
through one descriptor; on Linux ``/proc/self/fdinfo`` tells how far that descriptor has
read, which is the bar's position. Elsewhere (or if the descriptor is not found) the bar
pulses without a position.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, TypeVar

from ._output import safe_line

T = TypeVar("T")

PROGRESS_BYTES: Final = 50_000_000
"""Files at least this big get a progress bar (when stderr is a terminal)."""

_POLL_S: Final = 0.1


def _fd_reading(path: str) -> int | None:
    """The descriptor of this process open on ``path``, if /proc shows one (Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        real = os.path.realpath(path)
        for name in os.listdir("/proc/self/fd"):
            try:
                if os.readlink(f"/proc/self/fd/{name}") == real:
                    return int(name)
            except OSError:
                continue
    except OSError:
        return None
    return None


def _position(fd: int) -> int | None:
    try:
        with open(f"/proc/self/fdinfo/{fd}") as f:
            for line in f:
                if line.startswith("pos:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def want_progress(mode: str, size: int) -> bool:
    """Whether to draw: ``always``, ``never``, or ``auto`` (stderr a terminal and the file
    at least :data:`PROGRESS_BYTES`)."""
    if mode == "never":
        return False
    if mode == "always":
        return True
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and size >= PROGRESS_BYTES


@contextmanager
def _plain_bar(label: str, total: int) -> Iterator[Callable[[int | None], None]]:
    """The bar without the ``cli`` extra: one line of text on stderr, rewritten in place."""
    width = 0

    def show(text: str) -> None:
        nonlocal width
        sys.stderr.write("\r" + text.ljust(width))
        sys.stderr.flush()
        width = len(text)

    def update(done: int | None) -> None:
        where = "…" if done is None else f"{min(done, total) / 1e6:,.1f}"
        show(f"{label}: {where} of {total / 1e6:,.1f} MB")

    update(0)
    try:
        yield update
    finally:
        show("")
        sys.stderr.write("\r")
        sys.stderr.flush()


@contextmanager
def _bar(label: str, total: int, color: bool) -> Iterator[Callable[[int | None], None]]:
    try:
        from rich.console import Console
    except ImportError:  # a plain install, without the `cli` extra
        with _plain_bar(label, total) as plain:
            yield plain
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(
        file=sys.stderr,
        force_terminal=True,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
    )
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        auto_refresh=False,
    )
    from rich.markup import escape

    task = progress.add_task(escape(label), total=total)
    progress.start()
    progress.refresh()

    def update(done: int | None) -> None:
        if done is None:
            progress.update(task, total=None)
        else:
            progress.update(task, completed=min(done, total))
        progress.refresh()

    try:
        yield update
    finally:
        progress.update(task, completed=total)
        progress.refresh()
        progress.stop()


def with_progress(path: str, size: int, color: bool, load: Callable[[], T]) -> T:
    """Runs ``load()`` (which opens ``path``) with a bar on stderr until it returns."""
    # The file's name as text, never as terminal controls or rich markup.
    label = f"Reading {safe_line(os.path.basename(path))}"
    done = threading.Event()
    with _bar(label, size, color) as update:

        def watch() -> None:
            fd: int | None = None
            while not done.wait(_POLL_S):
                if fd is None:
                    fd = _fd_reading(path)
                update(None if fd is None else _position(fd))

        thread = threading.Thread(target=watch, name="sessiontree-progress", daemon=True)
        thread.start()
        try:
            return load()
        finally:
            done.set()
            thread.join()
