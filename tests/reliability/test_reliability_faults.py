"""Disk full and I/O errors: a failed append leaves the file as it was.

Two sources of failure:

- the engine's fault hook, ``storage._engine.inject_fault("write", errno)``: the next
  write stores half its bytes, then fails with ``errno``;
- a real, tiny file system: as root, a 64 KiB tmpfs is mounted and filled until the
  kernel says ``ENOSPC`` (skipped where ``mount`` is not permitted).

Either way the failed append raises ``io`` with the ``OSError`` (``ENOSPC``) as
``__cause__``, leaves no partial line behind, and the file opens afterwards with every
earlier entry and no problem reported.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import sessiontree as st

MODES = ("none", "flush", "group", "fsync")


def assert_clean(path: Path, ids: list[str]) -> None:
    """The file opens strictly (no torn tail, no bad line) with exactly ``ids``."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), "a partial line was left behind"
    with st.JsonlSessionStorage.open(path, readonly=True, strict=True) as ro:
        assert [e.id for e in ro.get_entries()] == ids


def assert_enospc(error: st.SessionError) -> None:
    assert error.code == "io"
    assert isinstance(error, OSError)  # SessionIOError is also an OSError
    assert isinstance(error.__cause__, OSError)
    assert error.__cause__.errno == errno.ENOSPC


@pytest.mark.fault_hooks
@pytest.mark.parametrize("mode", ["flush", "group", "fsync"])
def test_injected_write_failure_leaves_no_partial_line(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "s.jsonl"
    storage = st.JsonlSessionStorage.create(path, durability=mode)  # type: ignore[arg-type]
    session = st.Session(storage)
    ids = [session.append_message(st.UserMessage(f"m{i}")) for i in range(5)]
    before = path.read_bytes()
    storage._engine.inject_fault("write", errno.ENOSPC)
    with pytest.raises(st.SessionError) as info:
        session.append_message(st.UserMessage("this one fails " + "z" * 5000))
    assert_enospc(info.value)
    assert path.read_bytes() == before
    # The index did not take the failed entry: the leaf is still the last good one.
    assert session.get_leaf_id() == ids[-1]
    assert len(storage) == len(ids)
    # The trim succeeded, so the handle is still good: the next append works.
    ids.append(session.append_message(st.UserMessage("after the failure")))
    storage.close()
    assert_clean(path, ids)


@pytest.mark.fault_hooks
def test_injected_write_failure_of_the_none_buffer(tmp_path: Path) -> None:
    """With ``none`` the buffered entries were acknowledged in memory only: when writing
    them fails, the handle is poisoned (it cannot pretend they exist) and the file keeps
    exactly what was flushed before."""
    path = tmp_path / "s.jsonl"
    storage = st.JsonlSessionStorage.create(path, durability="none")
    session = st.Session(storage)
    kept = [session.append_message(st.UserMessage(f"m{i}")) for i in range(3)]
    storage.flush()
    lost = [session.append_message(st.UserMessage(f"buffered {i}")) for i in range(3)]
    storage._engine.inject_fault("write", errno.ENOSPC)
    with pytest.raises(st.SessionError) as info:
        storage.flush()
    assert_enospc(info.value)
    for call in (
        lambda: storage.get_entry(lost[0]),
        lambda: session.append_message(st.UserMessage("after")),
        storage.flush,
    ):
        with pytest.raises(st.SessionError) as info:
            call()
        assert info.value.code == "io"
    with contextlib.suppress(st.SessionError):
        storage.close()
    assert_clean(path, kept)
    with st.JsonlSessionStorage.open(path, durability="none") as again:
        kept.append(st.Session(again).append_message(st.UserMessage("reopened")))
    assert_clean(path, kept)


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs; skips unless this process may mount one."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"mount not permitted here: {result.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.mark.parametrize("mode", MODES)
def test_disk_full_append(tiny_fs: Path, mode: str) -> None:
    path = tiny_fs / "s.jsonl"
    storage = st.JsonlSessionStorage.create(path, durability=mode)  # type: ignore[arg-type]
    session = st.Session(storage)
    ids: list[str] = []
    failure: st.SessionError | None = None
    for i in range(1000):
        try:
            ids.append(session.append_message(st.UserMessage(f"{i} " + "p" * 900)))
            if mode == "none":
                storage.flush()
        except st.SessionError as e:
            failure = e
            break
    assert failure is not None, "64 KiB never filled up"
    assert_enospc(failure)
    if mode == "none":
        # The buffer is written at flush, so the failed entry had an id already; the
        # handle is poisoned (see test_injected_write_failure_of_the_none_buffer).
        ids.pop()
        with contextlib.suppress(st.SessionError):
            storage.close()
    else:
        assert path.read_bytes().endswith(b"\n")
        # The handle still works: a small append may still fit, a big one fails again.
        with pytest.raises(st.SessionError) as info:
            session.append_message(st.UserMessage("q" * 60_000))
        assert_enospc(info.value)
        storage.close()
    assert len(ids) > 10
    assert_clean(path, ids)


def fill(path: Path) -> None:
    """Writes ``path`` until the file system is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            os.write(fd, b"f" * 512)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_disk_full_creating_a_session(tiny_fs: Path) -> None:
    fill(tiny_fs / "filler")
    with pytest.raises(st.SessionError) as info:
        st.JsonlSessionStorage.create(tiny_fs / "s.jsonl")
    assert_enospc(info.value)


def test_failed_create_leaves_nothing_behind(tiny_fs: Path) -> None:
    fill(tiny_fs / "filler")
    path = tiny_fs / "s.jsonl"
    with pytest.raises(st.SessionError):
        st.JsonlSessionStorage.create(path)
    (tiny_fs / "filler").unlink()
    # Nothing half-made stands in the way: creating the session again works.
    st.JsonlSessionStorage.create(path).close()
    assert_clean(path, [])


def test_disk_full_never_loses_a_torn_tail(tiny_fs: Path) -> None:
    """A writer open must keep the torn bytes; when it cannot save them it must fail
    without trimming the file."""
    path = tiny_fs / "s.jsonl"
    session = st.Session(st.JsonlSessionStorage.create(path, durability="flush"))
    ids = [session.append_message(st.UserMessage(f"m{i}")) for i in range(3)]
    session.close()
    torn = b'{"type":"message","id":"torn","parent_id":null,"timest' + b"a" * 20_000
    with open(path, "ab") as f:
        f.write(torn)
    filler = tiny_fs / "filler"
    fill(filler)
    before = path.read_bytes()
    with pytest.raises(st.SessionError) as info:
        st.JsonlSessionStorage.open(path, durability="flush")
    assert_enospc(info.value)
    assert path.read_bytes() == before
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert [e.id for e in ro.get_entries()] == ids
        assert ro.load_report.torn_tail_bytes == len(torn)
    filler.unlink()
    for leftover in tiny_fs.glob("s.jsonl.torn-*"):
        leftover.unlink()  # see test_failed_torn_save_leaves_no_side_file
    time.sleep(0.002)  # a new side-file stamp (see test_reliability_security.py)
    with st.JsonlSessionStorage.open(path, durability="flush") as writer:
        assert Path(writer.torn_path or "").read_bytes() == torn
    assert_clean(path, ids)


def test_failed_torn_save_leaves_no_side_file(tiny_fs: Path) -> None:
    path = tiny_fs / "s.jsonl"
    st.JsonlSessionStorage.create(path, durability="flush").close()
    with open(path, "ab") as f:
        f.write(b'{"type":"custom","id":"t' + b"a" * 20_000)
    fill(tiny_fs / "filler")
    with pytest.raises(st.SessionError):
        st.JsonlSessionStorage.open(path, durability="flush")
    assert list(tiny_fs.glob("s.jsonl.torn-*")) == []
