"""Threads sharing one session or storage take turns: they wait, they never fail.

Each storage serialises its calls inside (the engine's mutex, waited for with the GIL
released), and ``Session`` holds the storage's ``atomic()`` lock across each append, so:

- many threads appending through one ``Session`` (or through several sessions over one
  storage) all succeed and leave one linear chain, every entry on disk;
- reads, ``build_context``, ``flush`` and ``get_tree`` during those appends succeed and
  see a consistent prefix;
- an ``fsync`` append that holds the engine does not stall other threads' pure-Python
  work (the GIL is released while it waits).

Before issue 10 a second thread got ``RuntimeError: Already mutably borrowed`` (not a
``SessionError``) from the binding. Every test runs its threads with a deadline, so a
deadlock fails instead of hanging.

``SESSIONTREE_THREAD_APPENDS`` (default 150) sets the appends per thread.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st

APPENDS = int(os.environ.get("SESSIONTREE_THREAD_APPENDS", "150"))
DEADLINE = 120.0


def run_threads(targets: list[Callable[[], None]]) -> list[BaseException]:
    """Runs every target on its own thread; returns what they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(targets))

    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            start.wait()
            try:
                fn()
            except BaseException as e:  # collected and reported by the test
                errors.append(e)

        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for t in threads:
        t.start()
    deadline = time.monotonic() + DEADLINE
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    hung = [t for t in threads if t.is_alive()]
    assert not hung, f"{len(hung)} threads still running after {DEADLINE} s: a deadlock"
    return errors


def storages(tmp_path: Path, durability: str, request: Any = None) -> st.SessionStorage:
    if durability == "memory":
        return st.InMemorySessionStorage()
    if durability == "postgres":
        server = request.getfixturevalue("pg_server")
        schema = request.getfixturevalue("pg_schema")
        return st.PostgresSessionStorage.create(server.dsn, schema=schema, durability="group")
    return st.JsonlSessionStorage.create(tmp_path / "s.jsonl", durability=durability)  # type: ignore[arg-type]


def check_chain(storage: st.SessionStorage, expected: int) -> None:
    entries = storage.get_entries()
    assert len(entries) == expected
    # Every append hung under the previous one: the appends were serialised, none raced
    # for the same leaf.
    for before, after in itertools.pairwise(entries):
        assert after.parent_id == before.id
    assert storage.get_leaf_id() == entries[-1].id


@pytest.mark.parametrize("durability", ["memory", "none", "flush", "group", "fsync", "postgres"])
def test_many_threads_append_read_and_flush_one_session(
    tmp_path: Path, durability: str, request: pytest.FixtureRequest
) -> None:
    storage = storages(tmp_path, durability, request)
    session = st.Session(storage)
    writers, appends = 6, APPENDS if durability != "fsync" else APPENDS // 5
    stop = threading.Event()
    # Halfway through, each writer waits (briefly) until a reader has done a whole round,
    # so reads run between appends however fast this machine writes.
    read_once = threading.Event()
    done = [0]
    done_lock = threading.Lock()
    reads = [0]

    def writer(k: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(appends):
                if i == appends // 2:
                    read_once.wait(DEADLINE / 4)
                if i % 10 == 9:
                    session.append_custom_entry("tick", {"k": k, "i": i})
                else:
                    session.append_message(st.UserMessage(f"thread {k} message {i}"))
            with done_lock:
                done[0] += 1
                if done[0] == writers:
                    stop.set()

        return run

    def reader() -> None:
        while not stop.is_set():
            n = len(storage)
            branch = session.get_branch()
            assert len(branch) >= min(n, 1) or n == 0
            session.build_context()
            storage.get_entries(reverse=True, limit=5)
            storage.get_session_stats()
            leaf = storage.get_leaf_id()
            if leaf is not None:
                assert storage.get_entry(leaf) is not None
            reads[0] += 1
            read_once.set()

    def flusher() -> None:
        while not stop.is_set():
            if isinstance(storage, (st.JsonlSessionStorage, st.PostgresSessionStorage)):
                storage.flush()
            time.sleep(0.001)

    errors = run_threads([writer(k) for k in range(writers)] + [reader, reader, flusher])
    assert not errors, [repr(e) for e in errors[:5]]
    assert reads[0] > 0
    check_chain(storage, writers * appends)
    # The context agrees with a cold build after all that.
    fresh = st.build_session_context(session.get_branch())
    assert session.build_context().messages == fresh.messages
    if isinstance(storage, st.JsonlSessionStorage):
        storage.close()
        with st.JsonlSessionStorage.open(tmp_path / "s.jsonl", readonly=True, strict=True) as ro:
            check_chain(ro, writers * appends)
    elif isinstance(storage, st.PostgresSessionStorage):
        sid, schema = storage.session_id, storage.schema
        storage.close()
        server = request.getfixturevalue("pg_server")
        with st.PostgresSessionStorage.open(
            server.dsn, sid, schema=schema, readonly=True, strict=True
        ) as ro:
            check_chain(ro, writers * appends)
    else:
        storage.close()


def test_several_sessions_over_one_storage_take_turns(tmp_path: Path) -> None:
    storage = st.JsonlSessionStorage.create(tmp_path / "s.jsonl", durability="flush")
    sessions = [st.Session(storage) for _ in range(4)]

    def writer(session: st.Session) -> Callable[[], None]:
        def run() -> None:
            for i in range(APPENDS):
                if i % 25 == 24:
                    session.move_to(session.get_leaf_id(), summary={"summary": f"s{i}"})
                else:
                    session.append_message(st.UserMessage(f"m{i}"))

        return run

    errors = run_threads([writer(s) for s in sessions])
    assert not errors, [repr(e) for e in errors[:5]]
    # move_to with a summary appends a leaf entry and a branch summary under the target:
    # still one chain, since each move targets the leaf it read under the lock.
    entries = storage.get_entries()
    moves = 4 * (APPENDS // 25)
    assert len(entries) == 4 * APPENDS + moves
    for e in entries:
        if isinstance(e, st.BranchSummaryEntry):
            assert e.from_id == e.parent_id
    storage.close()


def test_readers_and_closers_race_without_crashing(tmp_path: Path) -> None:
    # A close while other threads read: each call either works or raises ``closed``;
    # nothing else (no RuntimeError, no crash, no hang).
    path = tmp_path / "s.jsonl"
    with st.JsonlSessionStorage.create(path, durability="flush") as w:
        s = st.Session(w)
        for i in range(200):
            s.append_message(st.UserMessage(f"m{i}"))
    for _ in range(5):
        storage = st.JsonlSessionStorage.open(path, readonly=True)
        session = st.Session(storage)
        outcomes: list[str] = []

        def read(session: st.Session = session, outcomes: list[str] = outcomes) -> None:
            storage = session.storage
            for _ in range(200):
                try:
                    session.get_branch()
                    session.build_context()
                    storage.get_first_message("user")
                    storage.get_newest_timestamp()
                    storage.get_fork_source(None, "before").write_lines([0], [-1])
                    outcomes.append("ok")
                except st.SessionError as exc:
                    assert exc.code == "closed", exc
                    outcomes.append("closed")

        def close(storage: st.JsonlSessionStorage = storage) -> None:
            time.sleep(0.002)
            storage.close()

        errors = run_threads([read, read, close])
        assert not errors, [repr(e) for e in errors[:5]]
        assert set(outcomes) <= {"ok", "closed"}


def test_a_slow_fsync_append_releases_the_gil(tmp_path: Path) -> None:
    # While one thread is inside the engine (appending with fsync, the GIL released), a
    # pure-Python thread keeps running: the binding never holds the GIL while it waits
    # for the disk or for the engine's lock.
    storage = st.JsonlSessionStorage.create(tmp_path / "s.jsonl", durability="fsync")
    session = st.Session(storage)
    done = threading.Event()
    ticks = [0]

    def appender() -> None:
        for i in range(40):
            session.append_message(st.UserMessage(f"m{i}"))
        done.set()

    def spinner() -> None:
        while not done.is_set():
            ticks[0] += 1

    errors = run_threads([appender, spinner])
    assert not errors
    assert ticks[0] > 1000
    storage.close()
