"""One writer per session file, and no blind writes over someone else's changes.

- Processes racing to open one session for writing: exactly one wins; every other gets
  ``locked`` with a message naming the winner's pid (from ``/proc/locks``).
- A lock held by a SIGKILLed process is gone with it: the next writer opens at once.
- Read-only opens never take the lock and always succeed, and see what the writer wrote.
- An append after another program appended to, truncated, replaced (rename over),
  removed or moved the file, or moved its directory, raises ``modified_externally`` and
  writes nothing: with the writer's change watch (inotify) and without it (the path
  looked up before every write). A forked child's watches: ``test_reliability_fork.py``.

``SESSIONTREE_LOCK_ROUNDS`` (default 10) is the number of races, each between
``SESSIONTREE_LOCK_RACERS`` (default 3) processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import sessiontree as st
from sessiontree import _core

WRITER = Path(__file__).with_name("reliability_writer.py")
ROUNDS = int(os.environ.get("SESSIONTREE_LOCK_ROUNDS", "10"))
RACERS = int(os.environ.get("SESSIONTREE_LOCK_RACERS", "3"))
TIMEOUT = 60


def start_racer(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), "race", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("waiting ")
    return proc


def finish(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    if not proc.stdin.closed:
        proc.stdin.close()
    proc.wait(timeout=TIMEOUT)
    proc.stdout.close()


def test_racing_writers_exactly_one_wins(tmp_path: Path) -> None:
    path = tmp_path / "race.jsonl"
    st.JsonlSessionStorage.create(path, durability="flush").close()
    outcomes = {"won": 0, "locked": 0}
    for _ in range(ROUNDS):
        racers = [start_racer(path) for _ in range(RACERS)]
        for p in racers:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in racers:
            assert p.stdout is not None
            results.append((p.pid, p.stdout.readline().split(" ", 2)))
        winners = [pid for pid, r in results if r[0] == "won"]
        assert len(winners) == 1, results
        for pid, r in results:
            if r[0] == "won":
                assert r[1].strip() == str(pid), r
            else:
                assert r[0] == "locked", r
                assert f"process {winners[0]}" in r[2], r
        outcomes["won"] += 1
        outcomes["locked"] += len(results) - 1
        for p in racers:
            finish(p)
    print(f"\nlock race: {ROUNDS} rounds of {RACERS}: {outcomes}")


def test_lock_of_a_killed_writer_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    st.JsonlSessionStorage.create(path, durability="flush").close()
    holder = start_racer(path)
    assert holder.stdin is not None and holder.stdout is not None
    holder.stdin.write("go\n")
    holder.stdin.flush()
    assert holder.stdout.readline().startswith("won ")
    with pytest.raises(st.SessionError) as info:
        st.JsonlSessionStorage.open(path)
    assert info.value.code == "locked"
    assert f"process {holder.pid}" in info.value.message
    assert isinstance(info.value, BlockingIOError)
    # Read-only opens work while the writer lives.
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert len(ro) == 0
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=TIMEOUT)
    holder.stdin.close()
    holder.stdout.close()
    with st.JsonlSessionStorage.open(path, durability="flush") as writer:
        st.Session(writer).append_message(st.UserMessage("took over"))


def test_second_writer_in_the_same_process_is_locked(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = st.JsonlSessionStorage.create(path, durability="flush")
    with pytest.raises(st.SessionError) as info:
        st.JsonlSessionStorage.open(path)
    assert info.value.code == "locked"
    # Told it is this very process (not "another writer (process <our own pid>)").
    assert "another writer in this process" in info.value.message
    assert f"process {os.getpid()}" not in info.value.message
    first.close()
    st.JsonlSessionStorage.open(path).close()


def test_readers_always_open_while_a_writer_appends(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    writer = st.JsonlSessionStorage.create(path, durability="flush")
    session = st.Session(writer)
    ids = []
    for i in range(50):
        ids.append(session.append_message(st.UserMessage(f"m{i}")))
        with st.JsonlSessionStorage.open(path, readonly=True) as ro:
            assert ro.get_leaf_id() == ids[-1]
        ro2 = st.JsonlSessionStorage.open(path, readonly=True, strict=True)
        assert len(ro2) == i + 1
        ro2.close()
    writer.close()


EXTERNAL_LINE = (
    b'{"type":"custom","id":"ext1","parent_id":null,'
    b'"timestamp":"2026-01-01T00:00:00.000Z","custom_type":"x","data":null}\n'
)


def other_program_appends(path: Path) -> None:
    with open(path, "ab") as f:
        f.write(EXTERNAL_LINE)


def other_program_truncates(path: Path) -> None:
    os.truncate(path, path.stat().st_size - 7)


def other_program_replaces(path: Path) -> None:
    tmp = path.with_suffix(".new")
    tmp.write_bytes(path.read_bytes())
    os.replace(tmp, path)


def other_program_removes(path: Path) -> None:
    path.unlink()


def other_program_moves(path: Path) -> None:
    path.rename(path.with_name("moved.jsonl"))


def other_program_moves_the_directory(path: Path) -> None:
    path.parent.rename(path.parent.with_name("moved"))


CHANGES = {
    "append": other_program_appends,
    "truncate": other_program_truncates,
    "replace": other_program_replaces,
    "remove": other_program_removes,
    "move": other_program_moves,
    "move-directory": other_program_moves_the_directory,
}


@pytest.mark.parametrize("watch", ["watched", "path-checked"])
@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest.mark.parametrize("mode", ["flush", "fsync", "group"])
def test_append_after_external_change_writes_nothing(
    tmp_path: Path, change: str, mode: str, watch: str
) -> None:
    (tmp_path / "sessions").mkdir()
    path = tmp_path / "sessions" / "s.jsonl"
    storage = st.JsonlSessionStorage.create(path, durability=mode)  # type: ignore[arg-type]
    # The dev build's test hook: a writer on a local file system has its watch (inotify,
    # a Linux speed-up: the portable OS layer always looks the path up).
    watched = watch == "watched" and _core.LINUX_FAST
    assert storage._engine.change_watch(keep=watch == "watched") == watched
    session = st.Session(storage)
    ids = [session.append_message(st.UserMessage(f"m{i}")) for i in range(3)]
    CHANGES[change](path)
    after_change = path.read_bytes() if path.exists() else None
    with pytest.raises(st.SessionError) as info:
        session.append_message(st.UserMessage("blind write"))
    assert info.value.code == "modified_externally"
    assert isinstance(info.value, RuntimeError)
    assert (path.read_bytes() if path.exists() else None) == after_change
    assert session.get_leaf_id() == ids[-1]
    storage.close()
    if after_change is not None:
        # Reopening picks up the other program's version, and appends work again.
        with st.JsonlSessionStorage.open(path, durability=mode) as again:  # type: ignore[arg-type]
            st.Session(again).append_message(st.UserMessage("after reopen"))


def test_harmless_changes_are_allowed_and_later_ones_still_seen(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = st.Session(st.JsonlSessionStorage.create(path, durability="flush"))
    session.append_message(st.UserMessage("a"))
    os.chmod(path, 0o644)
    os.utime(path, (0, 0))
    os.link(path, tmp_path / "backup.jsonl")
    # Still our file, at our size: appends go on.
    kept = session.append_message(st.UserMessage("b"))
    other_program_replaces(path)
    after_change = path.read_bytes()
    with pytest.raises(st.SessionError) as info:
        session.append_message(st.UserMessage("blind write"))
    assert info.value.code == "modified_externally"
    assert path.read_bytes() == after_change
    assert session.get_leaf_id() == kept
    session.close()


def test_buffered_appends_never_overwrite_an_external_change(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    storage = st.JsonlSessionStorage.create(path, durability="none")
    st.Session(storage).append_message(st.UserMessage("buffered"))
    other_program_appends(path)
    after_change = path.read_bytes()
    try:
        with pytest.raises(st.SessionError) as info:
            storage.flush()
        assert info.value.code == "modified_externally"
    finally:
        with contextlib.suppress(st.SessionError):
            storage.close()
        assert path.read_bytes() == after_change


def test_read_only_refresh_sees_replacement(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with st.JsonlSessionStorage.create(path, durability="flush") as w:
        st.Session(w).append_message(st.UserMessage("a"))
    ro = st.JsonlSessionStorage.open(path, readonly=True)
    other_program_replaces(path)
    with pytest.raises(st.SessionError) as info:
        ro.refresh()
    assert info.value.code == "modified_externally"
    ro.close()
