"""Helpers for the async API's tests (``conftest.py`` has the fixtures).

``ThreadRecordingStorage`` is a storage the async API knows nothing about (it is not one
of the engine-backed classes): it forwards every abstract method to an
``InMemorySessionStorage`` and records the thread each call ran on, so a test can see
which calls ran on the event loop and which in a worker thread.

``check_file`` is what the cancellation tests check a session file for afterwards.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sessiontree as st


class ThreadRecordingStorage(st.SessionStorage):
    """Every abstract ``SessionStorage`` method, forwarded; ``calls`` is
    ``[(method name, thread name), ...]``."""

    def __init__(self, inner: st.SessionStorage | None = None) -> None:
        self.inner = inner if inner is not None else st.InMemorySessionStorage()
        self.calls: list[tuple[str, str]] = []

    def threads_of(self, name: str) -> set[str]:
        return {thread for method, thread in self.calls if method == name}


def _forward(name: str) -> Callable[..., Any]:
    def method(self: ThreadRecordingStorage, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((name, threading.current_thread().name))
        return getattr(self.inner, name)(*args, **kwargs)

    method.__name__ = name
    return method


for _name in sorted(st.SessionStorage.__abstractmethods__):
    setattr(ThreadRecordingStorage, _name, _forward(_name))
ThreadRecordingStorage.__abstractmethods__ = frozenset()


def check_file(path: Path, returned: set[str], attempted: list[str]) -> list[str]:
    """Asserts the file is whole and consistent; returns its entry ids in file order.

    ``returned``: ids of appends whose await returned (all must be there); ``attempted``:
    the texts of every append in the order they were submitted (the file must hold a
    subsequence of them, in that order).
    """
    data = path.read_bytes()
    assert data.endswith(b"\n"), "a partial last line"
    lines = data.split(b"\n")[:-1]
    for line in lines:
        json.loads(line)  # every line is complete JSON
    storage = st.JsonlSessionStorage.open(path)  # a writer: no lock is left held
    try:
        assert storage.load_report.issues == ()
        entries = storage.get_entries("message")
        ids = [e.id for e in entries]
        assert returned <= set(ids)
        texts = [e.message.content for e in entries]  # type: ignore[attr-defined]
        it = iter(attempted)
        assert all(t in it for t in texts), "appends out of the order they were made"
        chain = storage.get_entries()
        assert [e.parent_id for e in chain] == [None, *[e.id for e in chain[:-1]]]
        return ids
    finally:
        storage.close()
