"""Durability modes, observed from outside the writer.

- ``none``: appends stay in the writer's buffer: another reader sees nothing until
  ``flush()`` or ``close()``.
- ``flush``: every append is one ``write(2)``: a read-only open (or ``refresh()``) in
  another handle sees it as soon as the append returns.
- ``group``: written like ``flush``; a background thread syncs the file within a second
  (one thread serves every group writer of the process: ``test_reliability_resources``),
  and a failed background sync surfaces as ``io`` on a later append or ``flush()``.
- ``fsync``: every append is synced before it returns; a failed sync raises ``io`` from
  that very append.

A failed sync poisons the handle: the failed call raises ``io`` with the ``OSError`` as
``__cause__``, and every later call raises ``io`` until the file is reopened. A sync is
never retried and then reported as success. Faults are injected with the engine's test
hook (``storage._engine.inject_fault``); real disk-full errors are in
``test_reliability_faults.py``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import sessiontree as st

DURABILITIES = ("none", "flush", "group", "fsync")


def reader_ids(path: Path) -> list[str]:
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        return [e.id for e in ro.get_entries()]


def test_none_buffers_until_flush(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = st.Session(st.JsonlSessionStorage.create(path, durability="none"))
    header_size = path.stat().st_size
    ids = [session.append_message(st.UserMessage(f"m{i}")) for i in range(5)]
    assert reader_ids(path) == []
    assert path.stat().st_size == header_size
    assert isinstance(session.storage, st.JsonlSessionStorage)
    session.storage.flush()
    assert reader_ids(path) == ids
    more = session.append_message(st.UserMessage("after flush"))
    assert reader_ids(path) == ids
    session.close()
    assert reader_ids(path) == [*ids, more]


@pytest.mark.parametrize("durability", ["flush", "group", "fsync"])
def test_append_is_visible_to_readers_when_it_returns(tmp_path: Path, durability: str) -> None:
    path = tmp_path / "s.jsonl"
    storage = st.JsonlSessionStorage.create(path, durability=durability)  # type: ignore[arg-type]
    session = st.Session(storage)
    follower = st.JsonlSessionStorage.open(path, readonly=True)
    ids = []
    for i in range(20):
        ids.append(session.append_message(st.UserMessage(f"m{i}")))
        assert reader_ids(path) == ids
        assert follower.refresh() == 1
        assert follower.get_leaf_id() == ids[-1]
    follower.close()
    session.close()


def check_poisoned(storage: st.JsonlSessionStorage, session: st.Session) -> None:
    """Every writing call, and every call that reads the file, raises ``io``."""
    calls: list[Callable[[], object]] = [
        lambda: session.append_message(st.UserMessage("after failure")),
        lambda: session.append_custom_entry("x"),
        storage.flush,
        lambda: storage.set_leaf_id(None),
        lambda: storage.get_entries(),
        lambda: session.get_branch(),
        lambda: session.build_context(),
    ]
    for call in calls:
        with pytest.raises(st.SessionError) as info:
            call()
        assert info.value.code == "io"


def wait_for_group_failure(session: st.Session, seconds: float) -> st.SessionError | None:
    """Appends until the group syncer's failure surfaces, or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            session.append_message(st.UserMessage("tick"))
        except st.SessionError as e:
            return e
        time.sleep(0.05)
    return None


@pytest.mark.fault_hooks
@pytest.mark.parametrize("durability", ["flush", "fsync"])
def test_failed_sync_poisons_the_handle(tmp_path: Path, durability: str) -> None:
    path = tmp_path / "s.jsonl"
    storage = st.JsonlSessionStorage.create(path, durability=durability)  # type: ignore[arg-type]
    session = st.Session(storage)
    kept = session.append_message(st.UserMessage("before"))
    storage._engine.inject_fault("sync", errno.EIO)
    with pytest.raises(st.SessionError) as info:
        if durability == "fsync":
            session.append_message(st.UserMessage("synced"))  # syncs before returning
        else:
            storage.flush()  # flush() syncs in every mode but none
    assert info.value.code == "io"
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.__cause__.errno == errno.EIO
    size = path.stat().st_size
    check_poisoned(storage, session)
    # Not retried and then called a success: the failure stays until reopened.
    assert path.stat().st_size == size
    storage.close()
    storage.close()
    with st.JsonlSessionStorage.open(path, durability=durability) as again:  # type: ignore[arg-type]
        assert kept in [e.id for e in again.get_entries()]
        st.Session(again).append_message(st.UserMessage("reopened"))


@pytest.mark.fault_hooks
def test_group_sync_failure_surfaces_on_a_later_append(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    storage = st.JsonlSessionStorage.create(path, durability="group")
    session = st.Session(storage)
    session.append_message(st.UserMessage("before"))
    storage._engine.inject_fault("sync", errno.EIO)
    session.append_message(st.UserMessage("marks the file dirty"))
    # The syncer runs within a second of the append; 1.5 s leaves room for scheduling.
    failure = wait_for_group_failure(session, 1.5)
    try:
        assert failure is not None, "the background sync failure never surfaced"
        assert failure.code == "io"
        assert isinstance(failure.__cause__, OSError)
        check_poisoned(storage, session)
    finally:
        with contextlib.suppress(st.SessionError):
            storage.close()


@pytest.mark.fault_hooks
def test_group_sync_failure_surfaces_on_flush(tmp_path: Path) -> None:
    # flush() syncs the file itself; that sync succeeding says nothing about what the
    # failed background sync covered, so flush reports the failure too.
    storage = st.JsonlSessionStorage.create(tmp_path / "g.jsonl", durability="group")
    session = st.Session(storage)
    storage._engine.inject_fault("sync", errno.EIO)
    session.append_message(st.UserMessage("marks the file dirty"))
    deadline = time.monotonic() + 5
    failure: st.SessionError | None = None
    while failure is None and time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            storage.flush()
        except st.SessionError as e:
            failure = e
    assert failure is not None and failure.code == "io"
    assert isinstance(failure.__cause__, OSError) and failure.__cause__.errno == errno.EIO
    check_poisoned(storage, session)
    with contextlib.suppress(st.SessionError):
        storage.close()


@pytest.mark.fault_hooks
def test_poisoned_handle_refuses_index_reads_too(tmp_path: Path) -> None:
    storage = st.JsonlSessionStorage.create(tmp_path / "s.jsonl", durability="fsync")
    session = st.Session(storage)
    first = session.append_message(st.UserMessage("x"))
    storage._engine.inject_fault("sync", errno.EIO)
    with pytest.raises(st.SessionError):
        session.append_message(st.UserMessage("y"))
    for call in (storage.get_leaf_id, storage.get_session_stats, lambda: storage.get_label(first)):
        with pytest.raises(st.SessionError) as info:
            call()
        assert info.value.code == "io"
    storage.close()


def test_close_flushes_in_every_mode(tmp_path: Path) -> None:
    for mode in DURABILITIES:
        path = tmp_path / f"{mode}.jsonl"
        session = st.Session(st.JsonlSessionStorage.create(path, durability=mode))  # type: ignore[arg-type]
        ids = [session.append_message(st.UserMessage(f"{mode} {i}")) for i in range(3)]
        session.close()
        assert reader_ids(path) == ids, mode


def test_unknown_durability_is_refused(tmp_path: Path) -> None:
    for bad in ("sync", "", None, 1):
        with pytest.raises(st.SessionError) as info:
            st.JsonlSessionStorage.create(tmp_path / "s.jsonl", durability=bad)  # type: ignore[arg-type]
        assert info.value.code == "invalid_argument"
    assert not os.path.exists(tmp_path / "s.jsonl")
