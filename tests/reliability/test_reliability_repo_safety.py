"""A repository directory that an attacker (or an accident) put strange things in.

- ``delete(id)`` removes exactly that session's file and its side files, found by their
  exact names (``<file>.idx``, ``<file>.idx.tmp``, ``<file>.torn-<UTC stamp>[-n]``): the
  sessions ``a.jsonl.idx``, ``a.jsonl.torn-x``... are valid ids whose files a prefix match
  used to delete with ``a`` (even while a writer held one).
- A symlink, a FIFO or a directory at ``<id>.jsonl``: ``list`` shows an error row, and
  ``open``, ``fork`` and a read-only ``JsonlSessionStorage.open`` refuse it with ``io``
  (a fork used to copy the file a link pointed to into the repository); ``delete``
  removes a link or FIFO as a name, never what a link points to (a directory it leaves,
  with ``io``).
- A FIFO at the listing cache, at ``<file>.idx`` or ``<file>.idx.tmp``, or as a session
  opened read-only never blocks: ``list``, ``open`` and ``fork`` answer at once (they
  used to wait forever for a FIFO writer). Every such call runs in a child interpreter
  under a timeout, so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import sessiontree as st
from isolated import run_isolated


def make(repo: st.JsonlSessionRepo, sid: str, n: int = 2) -> list[str]:
    with repo.create(session_id=sid, cwd="/w") as s:
        return [s.append_message(st.UserMessage(f"{sid} {i}")) for i in range(n)]


def entry_ids(path: Path | str) -> list[str]:
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        return [e.id for e in ro.get_entries()]


NEIGHBOURS = [
    "a.jsonl.idx",
    "a.jsonl.idx.tmp",
    "a.jsonl.torn-x",
    "a.jsonl.torn-20260101T000000.000Z",
    "a.jsonl.torn-20260101T000000.000Z-1",
    "a.jsonl.idx.jsonl.idx",
    "a.jsonlx",
    "a.jsonl",
]


def test_delete_removes_its_own_side_files_and_nothing_else(tmp_path: Path) -> None:
    repo = st.JsonlSessionRepo(tmp_path)
    kept = {sid: make(repo, sid) for sid in NEIGHBOURS}
    mine = make(repo, "a")
    path = Path(repo.path_for("a"))
    # a's own side files: an index, a torn tail cut by a writer, a leftover temp index.
    st.JsonlSessionStorage.open(path, readonly=True, index=0).close()
    with open(path, "ab") as f:
        f.write(b'{"type":"custom","id":"torn"')
    with st.JsonlSessionStorage.open(path, durability="flush") as w:
        torn = w.torn_path
        assert torn is not None
    Path(f"{path}.idx.tmp").write_bytes(b"half an index")
    own = {path.name, f"{path.name}.idx", f"{path.name}.idx.tmp", Path(torn).name}
    assert own <= set(os.listdir(tmp_path))
    assert entry_ids(path) == mine

    held = repo.open("a.jsonl.idx")  # a writer holds one of the neighbours meanwhile
    try:
        repo.delete("a")
        assert not own & set(os.listdir(tmp_path))
        for sid, ids in kept.items():
            assert entry_ids(repo.path_for(sid)) == ids, sid
        held.append_message(st.UserMessage("still writing"))
    finally:
        held.close()
    listed = {m.id: m for m in repo.list()}
    assert set(listed) == set(NEIGHBOURS)
    assert all(m.error is None for m in listed.values())
    assert len(entry_ids(repo.path_for("a.jsonl.idx"))) == 3


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory"])
def test_special_files_at_a_session_name_are_refused_everywhere(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "repo"
    repo = st.JsonlSessionRepo(root)
    make(repo, "real")
    outside = tmp_path / "outside.jsonl"
    secret = st.JsonlSessionStorage.create(outside, durability="flush")
    st.Session(secret).append_message(st.UserMessage("a secret outside the repository"))
    secret.close()
    secret_bytes = outside.read_bytes()
    planted = root / "planted.jsonl"
    if kind == "symlink":
        planted.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(planted, 0o600)
    else:
        planted.mkdir()
    # Every call in a child under a timeout: opening a FIFO for reading used to block.
    result = run_isolated(
        """
        import json, os, sys
        import sessiontree as st
        root, planted = sys.argv[1], sys.argv[2]
        repo = st.JsonlSessionRepo(root)
        out = {}
        def attempt(name, call):
            try:
                call()
                out[name] = "ok"
            except st.SessionError as e:
                out[name] = [e.code, e.__cause__ is not None]
        attempt("open", lambda: repo.open("planted").close())
        attempt("fork", lambda: repo.fork("planted").close())
        attempt("fork_at", lambda: repo.fork("planted", entry_id="x", position="at").close())
        attempt("readonly", lambda: st.JsonlSessionStorage.open(planted, readonly=True).close())
        attempt("writer", lambda: st.JsonlSessionStorage.open(planted).close())
        out["listed"] = {m.id: m.error for m in repo.list()}
        out["files"] = sorted(os.listdir(root))
        print(json.dumps(out))
        """,
        str(root),
        str(planted),
        timeout=60,
    )
    for call in ("open", "fork", "fork_at", "readonly", "writer"):
        assert result[call][0] == "io", (call, result[call])
    if kind == "symlink":  # the OS refused the link (ELOOP): its error is the cause
        assert all(result[c][1] for c in ("open", "fork", "readonly")), result
    assert result["listed"]["real"] is None
    assert result["listed"]["planted"] == "not a regular file"
    # Nothing was copied in: no fork, no temporary file left behind.
    assert [f for f in result["files"] if not f.startswith(".sessiontree-list")] == [
        "planted.jsonl",
        "real.jsonl",
    ]
    if kind == "directory":
        # Never emptied: removing a directory's contents is not a session delete.
        with pytest.raises(st.SessionError) as info:
            repo.delete("planted")
        assert info.value.code == "io"
        assert planted.is_dir()
        return
    # delete removes the name alone; a link's target is untouched.
    repo.delete("planted")
    assert not os.path.lexists(planted)
    assert outside.read_bytes() == secret_bytes
    assert [m.id for m in repo.list()] == ["real"]


FIFO_CHILD = """
    import json, os, sys
    import sessiontree as st
    root, where = sys.argv[1], sys.argv[2]
    repo = st.JsonlSessionRepo(root)
    path = repo.path_for("s")
    os.mkfifo(where, 0o600)
    out = {}
    out["list"] = [(m.id, m.error, m.message_count) for m in repo.list()]
    for readonly in (True, False):
        with st.JsonlSessionStorage.open(path, readonly=readonly, index=0) as s:
            out[f"open_{readonly}"] = [len(s), s.index_status]
    with repo.fork("s") as f:
        out["fork"] = len(f)
    with repo.open("s") as s:
        out["repo_open"] = len(s)
    out["still_a_fifo"] = os.path.exists(where) and not os.path.isfile(where)
    print(json.dumps(out))
"""


@pytest.mark.parametrize(
    "where", [".sessiontree-list-cache.json", "s.jsonl.idx", "s.jsonl.idx.tmp"]
)
def test_a_fifo_planted_as_a_side_file_never_blocks(tmp_path: Path, where: str) -> None:
    repo = st.JsonlSessionRepo(tmp_path)
    make(repo, "s", n=3)
    assert not (tmp_path / where).exists()
    result = run_isolated(FIFO_CHILD, str(tmp_path), str(tmp_path / where), timeout=60)
    assert result["list"] == [["s", None, 3]]
    assert result["open_True"][0] == result["open_False"][0] == 3
    assert result["fork"] == 3
    assert result["repo_open"] == 3
    if where == "s.jsonl.idx":
        # Ignored like a damaged index (never waited on), then replaced by a real one.
        assert result["open_True"][1] == "rebuilt"
        assert not result["still_a_fifo"]
    if where == "s.jsonl.idx.tmp":
        # Not a file an index writer made: removed, and the index written.
        assert result["open_True"][1] == "created"


def test_a_fifo_opened_as_a_session_gives_io(tmp_path: Path) -> None:
    fifo = tmp_path / "s.jsonl"
    os.mkfifo(fifo, 0o600)
    result = run_isolated(
        """
        import json, sys
        import sessiontree as st
        out = []
        for readonly in (True, False):
            try:
                st.JsonlSessionStorage.open(sys.argv[1], readonly=readonly)
                out.append("opened")
            except st.SessionError as e:
                out.append([e.code, e.message])
        print(json.dumps(out))
        """,
        str(fifo),
        timeout=60,
    )
    for code, message in result:
        assert code == "io"
        assert "not a regular file (a FIFO)" in message
