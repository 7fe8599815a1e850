"""``os.fork()`` with storages open: a child never touches its parent's lock or syncer.

A forked child holds copies of its parent's storages. What it may do with them:

- read (entries, paths, contexts, stats): it sees the session as it was at the fork;
- ``close()`` them (or just exit): that releases the child's own descriptor and memory,
  and nothing else — the writer lock stays the parent's, the ``group`` syncer keeps
  syncing the parent's appends, and buffered ``none`` appends are written by the parent
  alone (never twice);
- not write: an inherited writer's appends and ``flush()`` raise ``locked`` (the lock is
  the parent's); open the file read-only, or another session, instead. A ``group`` writer
  the child opens itself gets a syncer of the child's own, and any writer it opens a
  change watch of its own: the child never reads its parent's inotify queue (that would
  take the parent's events), and a fork while another thread was reading it leaves the
  child nothing to wait for.

Before issue 10 a child that merely exited unlocked the parent's writer (its cleanup ran
``flock(LOCK_UN)`` on the shared open file), so another process could open a second
writer, and ``close()`` in the child raised ``PanicException`` (a ``BaseException``).

Each case runs in a child interpreter (which forks again) under a timeout, so the test
process itself never forks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from isolated import run_isolated

FORK = """
    import json, os, sys, subprocess
    import sessiontree as st
    path, mode, what = sys.argv[1], sys.argv[2], sys.argv[3]
    w = st.JsonlSessionStorage.create(path, durability=mode)
    s = st.Session(w)
    ids = [s.append_message(st.UserMessage(f"parent {i}")) for i in range(3)]
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        out = {}
        try:
            if what == "use":
                out["read"] = [e.id for e in w.get_entries()] == ids
                out["context"] = len(s.build_context().messages)
                out["leaf"] = w.get_leaf_id() == ids[-1]
                for name, call in (
                    ("append", lambda: s.append_message(st.UserMessage("child"))),
                    ("flush", w.flush),
                ):
                    try:
                        call()
                        out[name] = "ok"
                    except st.SessionError as e:
                        out[name] = e.code
            if what in ("use", "close"):
                w.close()
                out["closed"] = w.closed
                w.close()
        except BaseException as e:  # a PanicException is a BaseException
            out["raised"] = repr(e)
        os.write(wfd, json.dumps(out).encode())
        os.close(wfd)
        sys.exit(0)  # a normal exit: the interpreter's cleanup drops what is left
    os.close(wfd)
    child = json.loads(os.read(r, 1 << 16) or b"{}")
    _, status = os.waitpid(pid, 0)
    probe = subprocess.run(
        [sys.executable, "-c", (
            "import sys, sessiontree as st\\n"
            "try:\\n"
            "    st.JsonlSessionStorage.open(sys.argv[1]).close(); print('opened')\\n"
            "except st.SessionError as e: print(e.code)"
        ), path],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    more = s.append_message(st.UserMessage("parent after the child"))
    w.close()
    with st.JsonlSessionStorage.open(path, readonly=True, strict=True) as ro:
        final = [e.id for e in ro.get_entries()]
    print(json.dumps({
        "child": child, "status": status, "second_writer": probe,
        "final_ok": final == ids + [more],
    }))
"""


@pytest.mark.parametrize("durability", ["none", "flush", "group", "fsync"])
@pytest.mark.parametrize("what", ["exit", "close", "use"])
def test_a_forked_child_leaves_the_parents_writer_alone(
    tmp_path: Path, durability: str, what: str
) -> None:
    result = run_isolated(FORK, str(tmp_path / "s.jsonl"), durability, what, timeout=60)
    assert result["status"] == 0
    assert "raised" not in result["child"], result["child"]
    # The lock is still the parent's: a second writer is refused while the parent lives.
    assert result["second_writer"] == "locked"
    # The parent went on writing; nothing was written twice (a child flushing the
    # parent's `none` buffer would have duplicated its lines: strict mode refuses that).
    assert result["final_ok"]
    if what == "use":
        assert result["child"] == {
            "read": True,
            "context": 3,
            "leaf": True,
            "append": "locked",
            "flush": "locked",
            "closed": True,
        }
    if what == "close":
        assert result["child"] == {"closed": True}


@pytest.mark.fault_hooks
def test_a_child_opening_its_own_group_writer_gets_a_syncer(tmp_path: Path) -> None:
    # The parent's syncer thread does not exist in the child; a group writer the child
    # opens must still be synced. A sync fault injected into it surfaces only if a
    # syncer runs.
    result = run_isolated(
        """
        import errno, json, os, sys, time
        import sessiontree as st
        root = sys.argv[1]
        parent = st.JsonlSessionStorage.create(f"{root}/parent.jsonl", durability="group")
        st.Session(parent).append_message(st.UserMessage("starts the parent's syncer"))
        r, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            own = st.JsonlSessionStorage.create(f"{root}/child.jsonl", durability="group")
            session = st.Session(own)
            own._engine.inject_fault("sync", errno.EIO)
            failure = None
            deadline = time.monotonic() + 5
            while failure is None and time.monotonic() < deadline:
                try:
                    session.append_message(st.UserMessage("tick"))
                    time.sleep(0.05)
                except st.SessionError as e:
                    failure = e.code
            os.write(wfd, json.dumps({"failure": failure}).encode())
            os._exit(0)
        os.close(wfd)
        child = json.loads(os.read(r, 1 << 16))
        os.waitpid(pid, 0)
        parent.close()
        print(json.dumps(child))
        """,
        str(tmp_path),
        timeout=60,
    )
    assert result == {"failure": "io"}


def test_a_forked_child_never_takes_its_parents_change_events(tmp_path: Path) -> None:
    # The child replaces the parent's file, then appends to a writer of its own (reading
    # its own change queue); the parent must still see the replacement. The child's writer
    # sees changes to its own file.
    result = run_isolated(
        """
        import json, os, sys
        import sessiontree as st
        root = sys.argv[1]
        ours = f"{root}/parent.jsonl"
        parent = st.Session(st.JsonlSessionStorage.create(ours, durability="flush"))
        parent.append_message(st.UserMessage("a"))
        r, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            out = {}
            theirs = f"{root}/child.jsonl"
            child = st.Session(st.JsonlSessionStorage.create(theirs, durability="flush"))
            child.append_message(st.UserMessage("c1"))
            with open(f"{ours}.new", "wb") as f:
                f.write(open(ours, "rb").read())
            os.replace(f"{ours}.new", ours)
            child.append_message(st.UserMessage("c2"))
            out["child_kept_going"] = True
            os.rename(theirs, f"{root}/moved.jsonl")
            try:
                child.append_message(st.UserMessage("c3"))
            except st.SessionError as e:
                out["child_saw"] = e.code
            os.write(wfd, json.dumps(out).encode())
            os._exit(0)
        os.close(wfd)
        out = json.loads(os.read(r, 1 << 16))
        os.waitpid(pid, 0)
        try:
            parent.append_message(st.UserMessage("blind write"))
        except st.SessionError as e:
            out["parent_saw"] = e.code
        print(json.dumps(out))
        """,
        str(tmp_path),
        timeout=60,
    )
    assert result == {
        "child_kept_going": True,
        "child_saw": "modified_externally",
        "parent_saw": "modified_externally",
    }


def test_a_fork_during_another_threads_append_leaves_the_child_writing(tmp_path: Path) -> None:
    # A thread appends without pause (each append reads the process's change queue under
    # its lock, with the GIL released) while the main thread forks again and again. A
    # child whose copy of that lock was held at the fork must still open a writer of its
    # own and append: it makes its own queue and lock rather than wait on the copy.
    result = run_isolated(
        """
        import json, os, sys, threading, time
        import sessiontree as st
        root = sys.argv[1]
        busy = st.Session(st.JsonlSessionStorage.create(f"{root}/busy.jsonl", durability="none"))
        stop = threading.Event()
        appends = 0
        def appender():
            global appends
            while not stop.is_set():
                busy.append_message(st.UserMessage("x"))
                appends += 1
        t = threading.Thread(target=appender)
        t.start()
        while appends < 1000:
            time.sleep(0.001)
        statuses = []
        for i in range(300):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    w = st.JsonlSessionStorage.create(f"{root}/child{i}.jsonl", durability="flush")
                    st.Session(w).append_message(st.UserMessage("child"))
                    w.close()
                    code = 0
                finally:
                    os._exit(code)
            deadline = time.monotonic() + 5
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    statuses.append(os.waitstatus_to_exitcode(status))
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    statuses.append("hung")
                    break
                time.sleep(0.001)
        stop.set()
        t.join()
        busy.storage.close()
        print(json.dumps({"statuses": statuses, "appended": appends > 1000}))
        """,
        str(tmp_path),
        timeout=300,
    )
    assert result == {"statuses": [0] * 300, "appended": True}
