"""The persisted index (``<file>.idx``): used when valid, ignored and rebuilt otherwise.

``index=0`` makes every file big enough to be indexed; the default threshold is 128 KiB.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest

import sessiontree as st


def make_session(path: pathlib.Path, n: int = 30, **kwargs: object) -> list[str]:
    ids = []
    with st.Session(st.JsonlSessionStorage.create(path, durability="flush", index=0)) as s:
        for i in range(n):
            ids.append(s.append_message(st.UserMessage(f"message {i}", timestamp=i)))
        s.append_label(ids[n // 2], "middle")
        s.move_to(ids[n // 3])
    return ids


def open_ro(path: pathlib.Path) -> st.JsonlSessionStorage:
    return st.JsonlSessionStorage.open(path, readonly=True, index=0)


def snapshot(storage: st.JsonlSessionStorage) -> tuple[object, ...]:
    session = st.Session(storage)
    return (
        len(storage),
        storage.get_leaf_id(),
        [e.id for e in session.get_branch()],
        storage.get_labels(),
        storage.get_session_stats(),
        len(session.build_context().messages),
    )


def test_writer_close_writes_an_index_that_reopen_uses(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    make_session(path)
    idx = pathlib.Path(f"{path}.idx")
    assert idx.exists()
    assert idx.stat().st_mode & 0o777 == 0o600
    with open_ro(path) as r:
        assert r.index_status == "loaded"
        loaded = snapshot(r)
    with st.JsonlSessionStorage.open(path, readonly=True, index=False) as plain:
        assert plain.index_status == "unused"
        assert snapshot(plain) == loaded


def test_lines_appended_after_the_index_are_scanned(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    ids = make_session(path)
    with open(path, "ab") as f:  # another program appends a valid line
        f.write(
            st.entry_to_json(
                st.CustomEntry(
                    id="tail0001",
                    parent_id=ids[10],
                    timestamp="2026-01-01T00:00:00.000Z",
                    custom_type="x",
                )
            )
            + b"\n"
        )
    with open_ro(path) as r:
        assert r.index_status == "loaded"
        assert r.get_leaf_id() == "tail0001"
        assert r.get_entry("tail0001") is not None


@pytest.mark.parametrize("damage", ["torn", "flipped", "foreign", "stale-rewrite", "stale-cut"])
def test_bad_indexes_are_ignored_and_rebuilt(tmp_path: pathlib.Path, damage: str) -> None:
    path = tmp_path / "s.jsonl"
    make_session(path)
    idx = pathlib.Path(f"{path}.idx")
    with st.JsonlSessionStorage.open(path, readonly=True, index=False) as plain:
        expected = snapshot(plain)
    data = idx.read_bytes()
    if damage == "torn":
        idx.write_bytes(data[: len(data) // 2])
    elif damage == "flipped":
        idx.write_bytes(data[:50] + bytes([data[50] ^ 0xFF]) + data[51:])
    elif damage == "foreign":
        other = tmp_path / "other.jsonl"
        make_session(other, n=5)
        shutil.copy(f"{other}.idx", idx)
    else:
        text = path.read_bytes()
        if damage == "stale-rewrite":
            # Same length, different content: message 2 becomes message 7.
            text = text.replace(b'"message 2"', b'"message 7"')
            path.write_bytes(text)
        else:
            lines = text.splitlines(keepends=True)
            path.write_bytes(b"".join(lines[:8]))
        with st.JsonlSessionStorage.open(path, readonly=True, index=False) as plain:
            expected = snapshot(plain)
    with open_ro(path) as r:
        assert r.index_status == "rebuilt"
        assert snapshot(r) == expected
    with open_ro(path) as r:
        assert r.index_status == "loaded"
        assert snapshot(r) == expected


def test_read_only_open_never_changes_the_session_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    make_session(path)
    os.unlink(f"{path}.idx")
    before = path.read_bytes()
    with open_ro(path) as r:
        assert r.index_status == "created"
    assert path.read_bytes() == before


def test_small_files_and_disabled_indexes_write_nothing(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path, durability="flush")) as s:
        s.append_message(st.UserMessage("hi"))
    assert not pathlib.Path(f"{path}.idx").exists()  # below the 128 KiB default
    with st.JsonlSessionStorage.open(path, readonly=True, index=False) as r:
        assert r.index_status == "unused"
    with pytest.raises(st.SessionError) as exc:
        st.JsonlSessionStorage.open(path, index=-1)  # type: ignore[arg-type]
    assert exc.value.code == "invalid_argument"


def test_a_session_past_128_kib_reopens_from_its_index(tmp_path: pathlib.Path) -> None:
    """The default threshold: a session of a few dozen tool results (160 KB) is indexed
    when its writer closes, and a reopen loads the index instead of scanning the file."""
    path = tmp_path / "s.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path, durability="none")) as s:
        for i in range(40):
            s.append_message(st.UserMessage("x" * 4000, timestamp=i))
    assert path.stat().st_size > 128 << 10
    assert pathlib.Path(f"{path}.idx").exists()
    with st.JsonlSessionStorage.open(path, readonly=True) as r:
        assert r.index_status == "loaded"
        assert len(r) == 40


def test_an_index_is_only_used_under_the_limits_it_was_read_under(
    tmp_path: pathlib.Path,
) -> None:
    """An open with a small line limit skips a long entry and indexes the file so; a later
    open with the default limits must not take that index's word and lose the entry."""
    path = tmp_path / "s.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path, durability="flush", index=0)) as s:
        first = s.append_message(st.UserMessage("short", timestamp=0))
        long = s.append_message(st.UserMessage("x" * 5000, timestamp=1))
    small = st.Limits(max_line_bytes=1000)
    with st.JsonlSessionStorage.open(path, readonly=True, index=0, limits=small) as r:
        assert [e.id for e in r.get_entries()] == [first]
        assert [i.kind for i in r.load_report.issues] == ["too_large"]
    with open_ro(path) as r:
        assert r.index_status == "rebuilt"
        assert [e.id for e in r.get_entries()] == [first, long]
        assert not r.load_report.issues
    with open_ro(path) as r:
        assert r.index_status == "loaded"
        assert [e.id for e in r.get_entries()] == [first, long]


def test_repo_delete_removes_the_index(tmp_path: pathlib.Path) -> None:
    repo = st.JsonlSessionRepo(tmp_path / "repo")
    with repo.create() as s:
        s.append_message(st.UserMessage("hi"))
        path = s.storage.path  # type: ignore[attr-defined]
    with st.JsonlSessionStorage.open(path, readonly=True, index=0):
        pass
    assert pathlib.Path(f"{path}.idx").exists()
    repo.delete(pathlib.Path(path).stem)
    assert sorted(os.listdir(tmp_path / "repo")) in ([], [".sessiontree-list-cache.json"])


def test_a_temp_file_left_by_a_killed_index_writer_is_cleared(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    make_session(path)
    idx = pathlib.Path(f"{path}.idx")
    stale = pathlib.Path(f"{path}.idx.tmp")
    idx.unlink()
    stale.write_bytes(b"half an index")
    # Just written: it may be a live writer's between its creation and its lock, so it is
    # left alone and this open goes without an index.
    with open_ro(path) as r:
        assert r.index_status == "unused"
    assert stale.exists() and not idx.exists()
    # A killed writer's file: nobody holds it locked and it is a few seconds old. A
    # read-only open clears it and writes the index (issue 10, item 13: it used to wait
    # for a writer open).
    old = time.time() - 60
    os.utime(stale, (old, old))
    with open_ro(path) as r:
        assert r.index_status == "created"
    assert not stale.exists()
    with open_ro(path) as r:
        assert r.index_status == "loaded"


def test_a_temp_file_being_written_is_left_alone(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    make_session(path)
    pathlib.Path(f"{path}.idx").unlink()
    busy = pathlib.Path(f"{path}.idx.tmp")
    busy.write_bytes(b"an index being written")
    old = time.time() - 60
    os.utime(busy, (old, old))
    with open(busy, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as the writing process holds it
        for readonly in (True, False):
            with st.JsonlSessionStorage.open(
                path, readonly=readonly, durability="flush", index=0
            ) as s:
                assert s.index_status == "unused"
            assert busy.read_bytes() == b"an index being written"
    with open_ro(path) as r:  # once let go, it is a leftover like any other
        assert r.index_status == "created"


def _mount(args: list[str]) -> None:
    result = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"mount not permitted here: {result.stderr.strip()}")


@pytest.fixture
def ro_mount(tmp_path: pathlib.Path) -> Iterator[tuple[pathlib.Path, Callable[[], None]]]:
    """A tmpfs and the function that remounts it read-only.

    Tests run as root, which chmod does not stop from writing: only a read-only mount
    denies the writes for real. Skips unless this process may mount.
    """
    mount_point = tmp_path / "ro"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    _mount(["-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount_point)])
    try:
        yield mount_point, lambda: _mount(["-o", "remount,ro", str(mount_point)])
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _files(root: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir())}


@pytest.mark.parametrize(
    ("index_before", "status"),
    [("none", "unused"), ("damaged", "unused"), ("prefix", "loaded")],
)
def test_read_only_open_works_on_a_read_only_mount(
    ro_mount: tuple[pathlib.Path, Callable[[], None]], index_before: str, status: str
) -> None:
    # API.md / FORMAT.md: the persisted index is best effort; a read-only open of a large
    # session on a read-only file in a read-only directory works and changes nothing. Each
    # case makes the open want to write an index: none there, a damaged one, or one that
    # covers only a prefix of the file.
    root, remount_ro = ro_mount
    path = root / "s.jsonl"
    ids = make_session(path)
    idx = pathlib.Path(f"{path}.idx")
    if index_before == "none":
        idx.unlink()
    elif index_before == "damaged":
        idx.write_bytes(bytes(len(idx.read_bytes())))
    else:
        with st.JsonlSessionStorage.open(path, durability="flush", index=False) as w:
            ids.append(st.Session(w).append_message(st.UserMessage("after the index")))
        del w  # its engine holds the file open for writing, which blocks the remount
    os.chmod(path, 0o400)
    with st.JsonlSessionStorage.open(path, readonly=True, index=False) as plain:
        expected = snapshot(plain)
    before = _files(root)
    remount_ro()
    with pytest.raises(OSError):  # the mount really refuses writes, even to root
        (root / "probe").write_bytes(b"x")
    with st.JsonlSessionStorage.open(path, readonly=True, index=0) as r:
        assert snapshot(r) == expected
        assert r.get_entry(ids[-1]) is not None
        assert r.load_report.issues == ()
        assert r.index_status == status
        assert r.refresh() == 0
    assert _files(root) == before
