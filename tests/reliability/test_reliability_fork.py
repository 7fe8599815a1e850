"""``os.fork()`` with storages open: a child never touches its parent's lock or syncer.

A forked child holds copies of its parent's storages. What it may do with them:

- read (entries, paths, contexts, stats): it sees the session as it was at the fork;
- ``close()`` them (or just exit): that releases the child's own descriptor and memory,
  and nothing else — the writer lock stays the parent's, the ``group`` syncer keeps
  syncing the parent's appends, and buffered ``none`` appends are written by the parent
  alone (never twice);
- not write: an inherited writer's appends and ``flush()`` raise ``locked`` (the lock is
  the parent's); open the file read-only, or another session, instead. A ``group`` writer
  the child opens itself gets a syncer of the child's own.

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
