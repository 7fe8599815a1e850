"""What a fleet of sessions, and hostile input, cost in threads, descriptors and memory.

- ``group`` durability: one syncer thread serves every ``group`` writer of the process (2,000
  writers used to start 2,000 threads); every writer is still synced; a syncer that cannot
  be started fails the open with ``io`` instead of leaving a writer that never syncs.
- ``close()`` releases the file descriptor at once (it used to wait for the garbage
  collector: 1,019 created-and-closed sessions exhausted ``ulimit -n 1024``, and deleted
  sessions kept their disk space).
- A file of a million one-byte junk lines opens in memory proportional to its entries:
  the report keeps the first ``MAX_REPORTED_ISSUES`` issues in full and counts the rest.
- A torn tail of hundreds of megabytes is streamed into its side file, never held in
  memory whole (a 2 GiB one used to abort the process).
- The listing cache stays bounded whatever the sessions hold: a row too large (a huge
  name or cwd) is kept as a skip marker and re-read, and full rows stop at a budget.

Memory is measured as the peak RSS of a child interpreter (``VmHWM``, which starts afresh
at ``exec``) against its own baseline, so it does not depend on what the test process did.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import sessiontree as st
from isolated import run_isolated
from sessiontree.repo import list_cache

LINUX = os.path.isdir("/proc/self/task")

# -- group syncer ---------------------------------------------------------------------------

GROUP = """
    import errno, json, os, sys, time
    import sessiontree as st
    root, n, inject = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    def threads():
        return len(os.listdir("/proc/self/task"))
    out = {"before": threads()}
    writers = [st.JsonlSessionStorage.create(f"{root}/g{i}.jsonl", durability="group")
               for i in range(n)]
    sessions = [st.Session(w) for w in writers]
    for s in sessions:
        s.append_message(st.UserMessage("x"))
    out["open"] = threads()
    out["fds"] = len(os.listdir("/proc/self/fd"))
    if inject:
        # A fault in every writer's next background sync: each surfaces only if the
        # shared syncer really syncs that writer.
        for w in writers:
            w._engine.inject_fault("sync", errno.EIO)
        for s in sessions:
            s.append_message(st.UserMessage("dirty"))
        pending = set(range(n))
        deadline = time.monotonic() + 30
        while pending and time.monotonic() < deadline:
            time.sleep(0.05)
            for i in list(pending):
                try:
                    writers[i].flush()  # fails with the syncer's error once it ran
                except st.SessionError as e:
                    if e.code == "io":
                        pending.discard(i)
        out["unsynced"] = len(pending)
    for w in writers:
        try:
            w.close()
        except st.SessionError:
            pass
    out["closed"] = threads()
    print(json.dumps(out))
"""


@pytest.mark.skipif(not LINUX, reason="needs Linux /proc")
def test_group_writers_share_one_syncer_thread(tmp_path: Path) -> None:
    n = 300
    result = run_isolated(GROUP, str(tmp_path), str(n), "0", timeout=120)
    # One thread for all of them: started by the first group writer, kept for the next.
    assert result["open"] == result["before"] + 1, result
    assert result["closed"] == result["before"] + 1, result
    # One descriptor per writer: the syncer borrows the writer's own.
    assert result["fds"] <= n + 16, result


@pytest.mark.fault_hooks
@pytest.mark.skipif(not LINUX, reason="needs Linux /proc")
def test_the_shared_syncer_syncs_every_writer(tmp_path: Path) -> None:
    result = run_isolated(GROUP, str(tmp_path), "100", "1", timeout=120)
    assert result["unsynced"] == 0, result


@pytest.mark.fault_hooks
def test_a_syncer_that_cannot_start_fails_the_open(tmp_path: Path) -> None:
    # The test hook makes the thread spawn fail as it does when a process is out of
    # threads (EAGAIN); it used to be ignored, leaving a writer that never synced.
    child = run_isolated(
        """
        import json, os, sys
        import sessiontree as st
        root = sys.argv[1]
        out = {}
        existing = f"{root}/existing.jsonl"
        st.JsonlSessionStorage.create(existing, durability="flush").close()
        for name, call in (
            ("create", lambda: st.JsonlSessionStorage.create(f"{root}/new.jsonl")),
            ("open", lambda: st.JsonlSessionStorage.open(existing, durability="group")),
        ):
            try:
                call().close()
                out[name] = "opened"
            except st.SessionError as e:
                out[name] = [e.code, getattr(e.__cause__, "errno", None)]
        out["created"] = os.path.exists(f"{root}/new.jsonl")
        with st.JsonlSessionStorage.open(existing, durability="flush") as w:
            st.Session(w).append_message(st.UserMessage("other modes still work"))
            out["flush"] = len(w)
        print(json.dumps(out))
        """,
        str(tmp_path),
        timeout=60,
        env={**os.environ, "SESSIONTREE_TEST_FAIL_SPAWN": "11"},
    )
    assert child == {"create": ["io", 11], "open": ["io", 11], "created": False, "flush": 1}


# -- descriptors -----------------------------------------------------------------------------


@pytest.mark.skipif(not LINUX, reason="needs Linux /proc")
def test_close_releases_the_descriptor_at_once(tmp_path: Path) -> None:
    result = run_isolated(
        """
        import json, os, resource, sys
        import sessiontree as st
        root = sys.argv[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        def fds():
            out = {}
            for fd in os.listdir("/proc/self/fd"):
                try:
                    out[fd] = os.readlink(f"/proc/self/fd/{fd}")
                except OSError:
                    pass  # the descriptor listdir itself used
            return out
        before = fds()
        kept = []  # references held: nothing is garbage-collected
        for i in range(600):
            durability = ("none", "flush", "group", "fsync")[i % 4]
            w = st.JsonlSessionStorage.create(f"{root}/s{i}.jsonl", durability=durability)
            st.Session(w).append_message(st.UserMessage("x"))
            w.close()
            r = st.JsonlSessionStorage.open(f"{root}/s{i}.jsonl", readonly=True)
            r.close()
            kept += [w, r]
        m = st.InMemorySessionStorage()
        m.close()
        kept.append(m)
        # A deleted session's space is free once it is closed: no descriptor points to it.
        w = st.JsonlSessionStorage.create(f"{root}/doomed.jsonl", durability="flush")
        st.Session(w).append_message(st.UserMessage("x" * 100_000))
        w.close()
        kept.append(w)
        os.unlink(f"{root}/doomed.jsonl")
        deleted = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                deleted.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                pass  # the descriptor listdir itself used
        after = fds()
        print(json.dumps({
            # What stays open: the process's inotify instance (the change watch), made by
            # the first writer on a local file system and kept, empty, for the next.
            "grown": sorted(v for k, v in after.items() if before.get(k) != v),
            "deleted_open": [p for p in deleted if "(deleted)" in p],
            "closed": all(k.closed for k in kept),
        }))
        """,
        str(tmp_path),
        timeout=120,
    )
    assert result["grown"] in ([], ["anon_inode:inotify"]), result
    assert result["deleted_open"] == [] and result["closed"] is True


# -- memory ----------------------------------------------------------------------------------

PEAK = """
    import json, os, sys
    def peak_mib():
        # VmHWM: this process image's own peak (ru_maxrss also counts the parent's, from
        # before the exec).
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
    import sessiontree as st
    st.JsonlSessionStorage  # the package is imported: this is the baseline
    base = peak_mib()
"""


@pytest.mark.skipif(not LINUX, reason="needs Linux /proc")
def test_a_million_junk_lines_cost_memory_for_entries_only(tmp_path: Path) -> None:
    path = tmp_path / "junk.jsonl"
    header = st.model.entries.header_to_json(st.SessionHeader.generate(cwd="/w"))
    with open(path, "wb") as f:
        f.write(header + b"\n")
        f.write(b"x\n" * 1_000_000)
        f.write(
            b'{"type":"custom","id":"e0","parent_id":null,'
            b'"timestamp":"2026-01-01T00:00:00.000Z","custom_type":"x","data":null}\n'
        )
    result = run_isolated(
        PEAK
        + """
    storage = st.JsonlSessionStorage.open(sys.argv[1], readonly=True)
    report = storage.load_report  # held, as a caller inspecting it would
    print(json.dumps({
        "grown_mib": peak_mib() - base,
        "entries": len(storage),
        "kept": len(report.issues),
        "counts": report.counts,
        "first": [report.issues[0].line, report.issues[0].kind],
    }))
    """,
        str(path),
        timeout=300,
    )
    assert result["entries"] == 1
    assert result["kept"] == st.MAX_REPORTED_ISSUES
    assert result["counts"] == [["malformed", 1_000_000]]
    assert result["first"] == [2, "malformed"]
    # About 12 MiB (the 8 MiB read buffer and one batch of parsed lines); it was ~900 MiB
    # (2.8 GiB for 5 million lines, with the report held).
    assert result["grown_mib"] < 48, result


@pytest.mark.skipif(not LINUX, reason="needs Linux /proc")
def test_a_huge_torn_tail_is_streamed_into_its_side_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with st.JsonlSessionStorage.create(path, durability="flush") as w:
        ids = [st.Session(w).append_message(st.UserMessage(f"m{i}")) for i in range(3)]
    good = path.stat().st_size
    torn = 200 << 20
    with open(path, "r+b") as f:
        f.seek(good)
        f.write(b'{"type":"message","id":"never-finished","text":"')
        f.truncate(good + torn)  # a sparse run of NULs with no newline: one torn line
    result = run_isolated(
        PEAK
        + """
    limits = st.Limits(max_line_bytes=1 << 20)  # keeps the scan's own buffer small
    with st.JsonlSessionStorage.open(sys.argv[1], durability="flush", limits=limits) as w:
        side = w.torn_path
        n = len(w)
        torn = w.load_report.torn_tail_bytes
    print(json.dumps({"grown_mib": peak_mib() - base, "side": side, "n": n, "torn": torn}))
    """,
        str(path),
        timeout=300,
    )
    assert result["n"] == len(ids)
    assert result["torn"] == torn
    assert path.stat().st_size == good
    side = Path(result["side"])
    assert side.stat().st_size == torn
    with open(side, "rb") as f:
        assert f.read(48) == b'{"type":"message","id":"never-finished","text":"'
        f.seek(torn - 4096)
        assert f.read() == b"\0" * 4096
    side.unlink()
    # It was the whole tail in memory (200 MiB here; 2 GiB aborted the process).
    assert result["grown_mib"] < 64, result


# -- listing cache ---------------------------------------------------------------------------


def cache_doc(root: Path) -> dict[str, object]:
    return json.loads((root / ".sessiontree-list-cache.json").read_bytes())  # type: ignore[no-any-return]


def test_a_cache_row_is_bounded_whatever_the_session_holds(tmp_path: Path) -> None:
    repo = st.JsonlSessionRepo(tmp_path)
    big = "n" * 200_000
    with repo.create(cwd="/w" + "d" * 100_000, name=big, session_id="huge") as s:
        s.append_message(st.UserMessage("p" * 32_000))
    with repo.create(cwd="/w", name="small", session_id="small") as s:
        s.append_message(st.UserMessage("q" * 32_000))
    first = {m.id: m for m in repo.list()}
    assert first["huge"].name == big
    assert first["small"].first_message == "q" * 999 + "…"
    size = (tmp_path / ".sessiontree-list-cache.json").stat().st_size
    assert size < 4096, size  # the huge row is a skip marker; the small one ~1 KB
    files = cache_doc(tmp_path)["files"]
    assert isinstance(files, dict)
    assert files["huge.jsonl"].get("skip") is True
    assert files["small.jsonl"]["name"] == "small"
    mtime = os.stat(tmp_path / ".sessiontree-list-cache.json").st_mtime_ns
    # A fresh repository object (another process) reads the cache: same answer, the
    # skipped file re-read, and the cache not rewritten for it.
    again = {m.id: m for m in st.JsonlSessionRepo(tmp_path).list()}
    assert again == first
    assert os.stat(tmp_path / ".sessiontree-list-cache.json").st_mtime_ns == mtime


def test_the_cache_keeps_full_rows_within_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real budget is 64 MiB; a small one shows the rule without writing that much.
    monkeypatch.setattr(list_cache, "_CACHE_ROWS_MAX_BYTES", 3000)
    repo = st.JsonlSessionRepo(tmp_path)
    for i in range(20):
        with repo.create(cwd="/w", session_id=f"s{i:02d}") as s:
            s.append_message(st.UserMessage(f"first message of session {i} " + "x" * 200))
    listed = repo.list()
    files = cache_doc(tmp_path)["files"]
    assert isinstance(files, dict) and len(files) == 20
    full = [name for name, row in files.items() if "skip" not in row]
    assert 0 < len(full) < 20
    compact = [json.dumps(files[n], ensure_ascii=False, separators=(",", ":")) for n in full]
    assert sum(len(row.encode()) for row in compact) <= 3000
    # The newest sessions keep their full rows (a listing shows them first).
    assert sorted(full) == sorted(f"{m.id}.jsonl" for m in listed[: len(full)])
    assert st.JsonlSessionRepo(tmp_path).list() == listed
