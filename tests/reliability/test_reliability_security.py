"""File modes and symlinks.

- A session file is created 0600, and so are a torn-tail side file and the persisted
  index (``<file>.idx``), whatever the umask.
- The index is never written through a symlink planted at its name (it is written to a
  new private temporary file and renamed over the name).
- Creating a session never follows a symlink: at a path that is a symlink (to a file or
  dangling) ``create`` fails and the link's target is untouched (not created, not
  written).
- A writer open never follows a symlink: a session path that is a symlink is refused,
  and a torn tail in the link's target is not cut.
- Saving a torn tail never follows a symlink planted at the side file's name: the
  writer open fails (or picks another, new file) and nothing is written through the link.
- A read-only open refuses a symlinked session too (``io`` with ``ELOOP``): no open, of
  a session or of a side file, follows a link at the last component (``O_NOFOLLOW``).
  Symlinks in the directory part of a path are followed as usual.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import sessiontree as st


@pytest.fixture(params=[0, 0o022, 0o077], ids=["umask-000", "umask-022", "umask-077"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode_of(path: Path | str) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def add_torn_tail(path: Path, tail: bytes = b'{"type":"custom","id":"torn"') -> bytes:
    with open(path, "ab") as f:
        f.write(tail)
    return tail


def test_session_and_side_files_are_private(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "s.jsonl"
    for mode in ("none", "flush", "group", "fsync"):
        p = tmp_path / f"{mode}.jsonl"
        st.JsonlSessionStorage.create(p, durability=mode).close()  # type: ignore[arg-type]
        assert mode_of(p) == 0o600, mode
    with st.JsonlSessionStorage.create(path, durability="flush") as w:
        st.Session(w).append_message(st.UserMessage("x"))
    add_torn_tail(path)
    with st.JsonlSessionStorage.open(path, durability="flush") as w:
        side = w.torn_path
    assert side is not None
    assert mode_of(side) == 0o600
    assert mode_of(path) == 0o600
    # The persisted index is private too (index=0: kept whatever the file's size).
    st.JsonlSessionStorage.open(path, durability="flush", index=0).close()
    assert mode_of(f"{path}.idx") == 0o600


def test_index_is_never_written_through_a_symlink(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ids = make_session(path)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    os.symlink(victim, f"{path}.idx")
    for readonly in (True, False):
        with st.JsonlSessionStorage.open(path, readonly=readonly, index=0) as s:
            assert [e.id for e in s.get_entries()] == ids
    assert victim.read_bytes() == b"precious"
    idx = Path(f"{path}.idx")
    if idx.is_symlink():
        assert idx.resolve() == victim
    else:
        assert mode_of(idx) == 0o600  # replaced by a new private file, not written through


def test_create_refuses_a_symlink_to_a_file(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_bytes(b"precious")
    link = tmp_path / "s.jsonl"
    link.symlink_to(target)
    with pytest.raises(st.SessionError) as info:
        st.JsonlSessionStorage.create(link)
    assert info.value.code in ("exists", "io")
    assert target.read_bytes() == b"precious"
    assert link.is_symlink()


def test_create_refuses_a_dangling_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "planted.jsonl"
    target.parent.mkdir()
    link = tmp_path / "s.jsonl"
    link.symlink_to(target)
    with pytest.raises(st.SessionError) as info:
        st.JsonlSessionStorage.create(link)
    assert info.value.code in ("exists", "io")
    assert not target.exists()


def make_session(path: Path) -> list[str]:
    with st.JsonlSessionStorage.create(path, durability="flush") as w:
        session = st.Session(w)
        return [session.append_message(st.UserMessage(f"m{i}")) for i in range(3)]


def test_writer_open_refuses_a_symlinked_session(tmp_path: Path) -> None:
    real = tmp_path / "real.jsonl"
    ids = make_session(real)
    add_torn_tail(real)
    before = real.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    with pytest.raises(st.SessionError) as info:
        st.JsonlSessionStorage.open(link, durability="flush")
    assert info.value.code == "io"
    assert isinstance(info.value.__cause__, OSError)
    assert real.read_bytes() == before  # the torn tail was not cut through the link
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.jsonl", "real.jsonl"]

    # A reader refuses the link the same way (issue 10: a repository must never be led out
    # of its directory by a link planted at a session's name); the file itself opens.
    with pytest.raises(st.SessionError) as info:
        st.JsonlSessionStorage.open(link, readonly=True)
    assert info.value.code == "io"
    assert isinstance(info.value.__cause__, OSError)
    assert info.value.__cause__.errno == errno.ELOOP
    with st.JsonlSessionStorage.open(real, readonly=True) as ro:
        assert [e.id for e in ro.get_entries()] == ids
        assert ro.load_report.torn_tail_bytes > 0
    assert real.read_bytes() == before


def stamps(seconds: float) -> list[str]:
    """Every side-file stamp (``YYYYMMDDTHHMMSS.mmmZ``) from now for ``seconds``."""
    now = datetime.now(timezone.utc)
    out = []
    for ms in range(-50, int(seconds * 1000)):
        t = now + timedelta(milliseconds=ms)
        out.append(t.strftime("%Y%m%dT%H%M%S.") + f"{t.microsecond // 1000:03d}Z")
    return out


def test_torn_tail_is_never_saved_through_a_symlink(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ids = make_session(path)
    add_torn_tail(path)
    before = path.read_bytes()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    # Plant a link at every name the side file could get in the next few seconds.
    for stamp in stamps(3.0):
        os.symlink(victim, f"{path}.torn-{stamp}")
    try:
        writer = st.JsonlSessionStorage.open(path, durability="flush")
    except st.SessionError as e:
        # Refusing is safe: nothing was cut, nothing written through a link.
        assert e.code in ("exists", "io")
        assert path.read_bytes() == before
    else:
        # Choosing another name is safe too, if that name is a new regular file.
        side = Path(writer.torn_path or "")
        writer.close()
        assert (
            not side.is_symlink()
            and side.read_bytes() == before[-len(b'{"type":"custom","id":"torn"') :]
        )
    assert victim.read_bytes() == b"precious"
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert [e.id for e in ro.get_entries()][:3] == ids


def test_side_file_name_collision_picks_another_name(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    make_session(path)
    add_torn_tail(path)
    for stamp in stamps(3.0):
        Path(f"{path}.torn-{stamp}").write_bytes(b"an older torn tail")
    with st.JsonlSessionStorage.open(path, durability="flush") as w:
        assert w.torn_path is not None
        assert Path(w.torn_path).read_bytes() == b'{"type":"custom","id":"torn"'


def test_read_only_open_creates_and_changes_nothing(tmp_path: Path) -> None:
    """Below the index threshold (128 KiB) a reader leaves no trace; above it, it may write
    the derived ``<file>.idx`` (best effort), never the session file."""
    path = tmp_path / "s.jsonl"
    make_session(path)
    add_torn_tail(path)
    os.chmod(path, 0o400)  # even a file the reader could not write
    before = (path.read_bytes(), os.stat(path).st_mtime_ns)
    time.sleep(0.01)
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert ro.torn_path is None
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before
    assert mode_of(path) == 0o400
    assert [p.name for p in tmp_path.iterdir()] == ["s.jsonl"]
