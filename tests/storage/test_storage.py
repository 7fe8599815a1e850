"""Tests for the storages: files, locks, read-only use, errors and the query methods."""

from __future__ import annotations

import errno
import os
import pathlib
import stat
import subprocess
import sys
import textwrap
from typing import Any

import pytest

import sessiontree as st

T = "2026-07-08T09:10:11.121Z"


def code_of(exc: pytest.ExceptionInfo[BaseException]) -> str:
    assert isinstance(exc.value, st.SessionError)
    return exc.value.code


def custom(i: str, parent: str | None, custom_type: str = "c") -> st.CustomEntry:
    return st.CustomEntry(id=i, parent_id=parent, timestamp=T, custom_type=custom_type, data=i)


def make_file(path: pathlib.Path, n: int = 3) -> list[str]:
    """A session file with a chain of ``n`` custom entries; returns their ids."""
    with st.JsonlSessionStorage.create(path) as storage:
        parent = None
        out = []
        for i in range(n):
            e = custom(f"e{i}", parent)
            storage.append_entry(e)
            parent = e.id
            out.append(e.id)
    return out


# --------------------------------------------------------------------------- create / open


def test_create_writes_the_header_and_is_private(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    header = st.SessionHeader("sid", T, "/home/me", parent_session="p0", metadata={"k": [1]})
    storage = st.JsonlSessionStorage.create(path, header)
    assert storage.get_metadata() == header
    assert storage.session_id == "sid"
    assert len(storage) == 0
    assert storage.get_leaf_id() is None
    assert storage.readonly is False
    assert storage.durability == "group"
    storage.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = path.read_bytes().split(b"\n")[0]
    assert st.model.entries.header_from_json(first) == header
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert ro.get_metadata() == header


def test_create_generates_a_header(tmp_path: pathlib.Path) -> None:
    with st.JsonlSessionStorage.create(tmp_path / "s.jsonl") as storage:
        header = storage.get_metadata()
    assert header.cwd == os.getcwd()
    assert header.version == 3
    assert header.parent_session is None
    assert len(header.id) == 36
    mem = st.InMemorySessionStorage()
    assert mem.get_metadata().id != header.id
    mem.close()


def test_create_refuses_an_existing_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    for content in (b"", b"precious\n"):
        path.write_bytes(content)
        with pytest.raises(st.SessionError) as exc:
            st.JsonlSessionStorage.create(path)
        assert code_of(exc) == "exists"
        assert isinstance(exc.value, FileExistsError)
        assert path.read_bytes() == content


def test_create_in_a_missing_directory_is_an_io_error(tmp_path: pathlib.Path) -> None:
    # A missing directory is an OS failure, not an unknown session: `io`, not `not_found`.
    path = tmp_path / "no-such-dir" / "s.jsonl"
    with pytest.raises(st.SessionError) as exc:
        st.JsonlSessionStorage.create(path)
    assert code_of(exc) == "io"
    assert isinstance(exc.value, OSError)
    assert isinstance(exc.value.__cause__, FileNotFoundError)
    assert exc.value.__cause__.errno == errno.ENOENT
    assert not path.parent.exists()
    assert list(tmp_path.iterdir()) == []


def test_open_missing_file(tmp_path: pathlib.Path) -> None:
    for readonly in (False, True):
        with pytest.raises(st.SessionError) as exc:
            st.JsonlSessionStorage.open(tmp_path / "nope.jsonl", readonly=readonly)
        assert code_of(exc) == "not_found"
        assert isinstance(exc.value.__cause__, OSError)
    assert not (tmp_path / "nope.jsonl").exists()


def test_open_a_directory_is_an_io_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(st.SessionError) as exc:
        st.JsonlSessionStorage.open(tmp_path, readonly=True)
    assert code_of(exc) in {"io"}


@pytest.mark.parametrize("durability", ["sometimes", "", None, 1, "FSYNC"])
def test_bad_durability(tmp_path: pathlib.Path, durability: Any) -> None:
    path = tmp_path / "s.jsonl"
    with pytest.raises(st.SessionError) as exc:
        st.JsonlSessionStorage.create(path, durability=durability)
    assert code_of(exc) == "invalid_argument"
    assert not path.exists()
    make_file(path)
    data = path.read_bytes()
    with pytest.raises(st.SessionError) as exc:
        st.JsonlSessionStorage.open(path, durability=durability)
    assert code_of(exc) == "invalid_argument"
    assert path.read_bytes() == data


@pytest.mark.parametrize("header", ["x", {"id": "s"}, 5])
def test_bad_header_argument(tmp_path: pathlib.Path, header: Any) -> None:
    with pytest.raises(st.SessionError) as exc:
        st.JsonlSessionStorage.create(tmp_path / "s.jsonl", header)
    assert code_of(exc) == "invalid_argument"
    with pytest.raises(st.SessionError) as exc:
        st.InMemorySessionStorage(header)
    assert code_of(exc) == "invalid_argument"


@pytest.mark.parametrize("durability", ["none", "flush", "group", "fsync"])
def test_every_durability_mode_persists(tmp_path: pathlib.Path, durability: Any) -> None:
    path = tmp_path / "s.jsonl"
    storage = st.JsonlSessionStorage.create(path, durability=durability)
    assert storage.durability == durability
    storage.append_entry(custom("a", None))
    size_after_one = path.stat().st_size
    if durability == "none":
        # Buffered until flush() or close().
        assert b'"a"' not in path.read_bytes()
        storage.flush()
    assert b'"id":"a"' in path.read_bytes()
    assert durability == "none" or size_after_one == path.stat().st_size
    storage.append_entry(custom("b", "a"))
    storage.close()
    with st.JsonlSessionStorage.open(path, durability=durability) as again:
        assert [e.id for e in again.get_entries()] == ["a", "b"]
        again.append_entry(custom("c", "b"))
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert len(ro) == 3


def test_memory_storage_round_trips_through_jsonl() -> None:
    mem = st.InMemorySessionStorage()
    mem.append_entry(custom("a", None))
    data = mem.to_jsonl()
    again = st.InMemorySessionStorage.from_jsonl(data)
    assert again.to_jsonl() == data
    assert again.get_entry("a") == mem.get_entry("a")
    assert again.get_metadata() == mem.get_metadata()
    with pytest.raises(st.SessionError) as exc:
        st.InMemorySessionStorage.from_jsonl("not bytes")  # type: ignore[arg-type]
    assert code_of(exc) == "invalid_argument"
    assert st.InMemorySessionStorage.from_jsonl(bytearray(data)).to_jsonl() == data


# --------------------------------------------------------------------------- corrupt headers


CORRUPT_HEADERS = {
    "empty": b"",
    "only-newline": b"\n",
    "blank-first-line": b"\n"
    + b'{"type":"session","version":3,"id":"s","timestamp":"'
    + T.encode()
    + b'","cwd":"/"}\n',
    "malformed": b'{"type":"session","version":3,\n',
    "not-json": b"hello world\n",
    "array": b"[1,2,3]\n",
    "version-4": b'{"type":"session","version":4,"id":"s","timestamp":"'
    + T.encode()
    + b'","cwd":"/","parent_session":null,"metadata":null}\n',
    "version-string": b'{"type":"session","version":"3","id":"s","timestamp":"'
    + T.encode()
    + b'","cwd":"/"}\n',
    "no-id": b'{"type":"session","version":3,"timestamp":"' + T.encode() + b'","cwd":"/"}\n',
    "not-a-header": b'{"type":"custom","id":"a","parent_id":null,"timestamp":"'
    + T.encode()
    + b'","custom_type":"c","data":null}\n',
    "no-newline": b'{"type":"session","version":3,"id":"s","timestamp":"'
    + T.encode()
    + b'","cwd":"/","parent_session":null,"metadata":null}',
    "binary": b"\xff\xfe\x00garbage\n",
}


@pytest.mark.parametrize("name", sorted(CORRUPT_HEADERS))
def test_corrupt_header_is_refused_and_never_rewritten(tmp_path: pathlib.Path, name: str) -> None:
    data = CORRUPT_HEADERS[name] + b'{"type":"custom","id":"z","parent_id":null,"timestamp":"x"}'
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    for kwargs in ({}, {"readonly": True}, {"strict": True}, {"readonly": True, "strict": True}):
        with pytest.raises(st.SessionError) as exc:
            st.JsonlSessionStorage.open(path, **kwargs)
        assert code_of(exc) == "corrupt", kwargs
        assert isinstance(exc.value, ValueError)
    with pytest.raises(st.SessionError) as exc:
        st.InMemorySessionStorage.from_jsonl(data)
    assert code_of(exc) == "corrupt"
    assert path.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]
    # A corrupt file is not locked by the failed open: a fixed file opens fine.
    make_file(tmp_path / "fixed.jsonl")
    st.JsonlSessionStorage.open(tmp_path / "fixed.jsonl").close()


def test_older_header_versions_are_read(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(
        b'{"type":"session","version":2,"id":"old","timestamp":"' + T.encode() + b'","cwd":"/"}\n'
    )
    with st.JsonlSessionStorage.open(path) as storage:
        assert storage.get_metadata().version == 2


# --------------------------------------------------------------------------- read-only


def test_readonly_refuses_writes_and_keeps_the_file(tmp_path: pathlib.Path, msgs: Any) -> None:
    path = tmp_path / "s.jsonl"
    ids = make_file(path)
    data = path.read_bytes()
    storage = st.JsonlSessionStorage.open(path, readonly=True)
    assert storage.readonly
    session = st.Session(storage)
    for call in (
        lambda: storage.append_entry(custom("new", ids[-1])),
        lambda: storage.set_leaf_id(ids[0]),
        lambda: storage.set_leaf_id(None),
        lambda: session.append_message(msgs.user("x")),
        lambda: session.move_to(ids[0]),
        lambda: session.move_to(ids[0], {"summary": "s"}),
        lambda: session.append_label(ids[0], "l"),
    ):
        with pytest.raises(st.SessionError) as exc:
            call()
        assert code_of(exc) == "readonly"
        assert isinstance(exc.value, PermissionError)
    assert storage.get_leaf_id() == ids[-1]
    assert len(storage) == 3
    storage.flush()
    storage.close()
    assert path.read_bytes() == data


def test_readonly_refresh_sees_a_writers_appends(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    ids = make_file(path, 2)
    writer = st.JsonlSessionStorage.open(path, durability="flush")
    reader = st.JsonlSessionStorage.open(path, readonly=True)
    assert reader.refresh() == 0
    writer.append_entry(custom("n1", ids[-1]))
    writer.append_entry(custom("n2", "n1"))
    assert len(reader) == 2
    assert reader.refresh() == 2
    assert reader.get_leaf_id() == "n2"
    assert reader.get_entry("n1") == writer.get_entry("n1")
    writer.set_leaf_id(ids[0])
    assert reader.refresh() == 1
    assert reader.get_leaf_id() == ids[0]
    assert writer.refresh() == 0
    writer.close()
    reader.close()


def test_readonly_refresh_after_replacement(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    make_file(path)
    reader = st.JsonlSessionStorage.open(path, readonly=True)
    other = tmp_path / "other.jsonl"
    make_file(other, 1)
    os.replace(other, path)
    with pytest.raises(st.SessionError) as exc:
        reader.refresh()
    assert code_of(exc) == "modified_externally"
    reader.close()


def test_readonly_open_needs_no_lock(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    make_file(path)
    writer = st.JsonlSessionStorage.open(path)
    readers = [st.JsonlSessionStorage.open(path, readonly=True) for _ in range(3)]
    assert all(len(r) == 3 for r in readers)
    for r in readers:
        r.close()
    writer.close()


# --------------------------------------------------------------------------- locks


def test_second_writer_in_process_is_locked(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    make_file(path)
    data = path.read_bytes()
    first = st.JsonlSessionStorage.open(path)
    with pytest.raises(st.SessionError) as exc:
        st.JsonlSessionStorage.open(path)
    assert code_of(exc) == "locked"
    assert isinstance(exc.value, BlockingIOError)
    assert str(path) in str(exc.value)
    assert path.read_bytes() == data
    first.append_entry(custom("more", "e2"))
    first.close()
    second = st.JsonlSessionStorage.open(path)
    assert second.get_leaf_id() == "more"
    second.close()


def test_created_file_is_locked(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    creator = st.JsonlSessionStorage.create(path)
    with pytest.raises(st.SessionError) as exc:
        st.JsonlSessionStorage.open(path)
    assert code_of(exc) == "locked"
    creator.close()
    st.JsonlSessionStorage.open(path).close()


CHILD = textwrap.dedent(
    """
    import sys
    import sessiontree as st
    path, mode = sys.argv[1], sys.argv[2]
    try:
        storage = st.JsonlSessionStorage.open(path)
    except st.SessionError as e:
        print(e.code, flush=True)
        sys.exit(0)
    print("opened", flush=True)
    if mode == "hold":
        sys.stdin.readline()
    storage.close()
    """
)


def run_child(path: pathlib.Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_writer_lock_across_processes(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    make_file(path)
    # This process holds the lock: the child is refused.
    holder = st.JsonlSessionStorage.open(path)
    child = run_child(path, "try")
    out, _ = child.communicate(timeout=60)
    assert out.strip() == "locked"
    holder.close()
    # The child holds the lock: this process is refused, until the child exits.
    child = run_child(path, "hold")
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "opened"
    with pytest.raises(st.SessionError) as exc:
        st.JsonlSessionStorage.open(path)
    assert code_of(exc) == "locked"
    ro = st.JsonlSessionStorage.open(path, readonly=True)
    assert len(ro) == 3
    ro.close()
    child.communicate("\n", timeout=60)
    assert child.returncode == 0
    st.JsonlSessionStorage.open(path).close()


# --------------------------------------------------------------------------- modified externally


def test_append_after_another_program_appended(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    make_file(path)
    storage = st.JsonlSessionStorage.open(path, durability="flush")
    with open(path, "ab") as f:
        f.write(b'{"type":"custom","id":"x","parent_id":null,"timestamp":"t","custom_type":"c"}\n')
    data = path.read_bytes()
    with pytest.raises(st.SessionError) as exc:
        storage.append_entry(custom("mine", "e2"))
    assert code_of(exc) == "modified_externally"
    assert path.read_bytes() == data
    with pytest.raises(st.SessionError) as exc:
        st.Session(storage).move_to("e0")
    assert code_of(exc) == "modified_externally"
    assert path.read_bytes() == data
    storage.close()
    with st.JsonlSessionStorage.open(path) as again:
        assert again.get_leaf_id() == "x"


@pytest.mark.parametrize("how", ["replace", "remove", "truncate"])
def test_append_after_the_file_was_replaced(tmp_path: pathlib.Path, how: str) -> None:
    path = tmp_path / "s.jsonl"
    make_file(path)
    storage = st.JsonlSessionStorage.open(path)
    if how == "replace":
        other = tmp_path / "other.jsonl"
        make_file(other, 1)
        os.replace(other, path)
    elif how == "remove":
        path.unlink()
    else:
        with open(path, "r+b") as f:
            f.truncate(10)
    before = path.read_bytes() if path.exists() else None
    with pytest.raises(st.SessionError) as exc:
        storage.append_entry(custom("mine", "e2"))
    assert code_of(exc) == "modified_externally"
    assert (path.read_bytes() if path.exists() else None) == before
    storage.close()


# --------------------------------------------------------------------------- closed


def test_every_method_after_close(backend: Any) -> None:
    storage = backend.new()
    storage.append_entry(custom("a", None))
    storage.close()
    storage.close()
    calls = [
        storage.get_metadata,
        storage.get_leaf_id,
        lambda: storage.set_leaf_id("a"),
        storage.create_entry_id,
        lambda: storage.append_entry(custom("b", "a")),
        lambda: storage.get_entry("a"),
        lambda: storage.find_entries("custom"),
        lambda: storage.get_label("a"),
        storage.get_labels,
        storage.get_session_name,
        lambda: storage.get_path_to_root_or_compaction("a"),
        lambda: storage.get_path_to_root("a"),
        lambda: storage.get_children(None),
        storage.get_entries,
        storage.get_session_stats,
        lambda: len(storage),
        storage.flush,
    ]
    if isinstance(storage, st.JsonlSessionStorage):
        calls.append(storage.refresh)
    else:
        calls.append(storage.to_jsonl)
    for call in calls:
        with pytest.raises(st.SessionError) as exc:
            call()
        assert code_of(exc) == "closed", call
    assert storage.closed
    assert "closed" in repr(storage)


def test_closed_wins_over_readonly(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    make_file(path)
    storage = st.JsonlSessionStorage.open(path, readonly=True)
    storage.close()
    for call in (
        lambda: storage.append_entry(custom("x", None)),
        lambda: storage.set_leaf_id(None),
    ):
        with pytest.raises(st.SessionError) as exc:
            call()
        assert code_of(exc) == "closed"


def test_close_releases_the_lock_and_context_manager(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    with st.JsonlSessionStorage.create(path) as storage:
        storage.append_entry(custom("a", None))
    assert storage.closed
    with st.JsonlSessionStorage.open(path) as again:
        assert again.get_leaf_id() == "a"


# --------------------------------------------------------------------------- append validation


def test_bad_appends_write_nothing(backend: Any) -> None:
    storage = backend.new()
    storage.append_entry(custom("a", None))
    storage.append_entry(custom("b", "a"))

    def size() -> int:
        if isinstance(storage, st.JsonlSessionStorage):
            storage.flush()
            return os.path.getsize(storage.path)
        return len(storage.to_jsonl())

    before = size()
    cases = [
        (custom("c", "nope"), "not_found"),
        (custom("a", "b"), "duplicate_id"),
        (custom("b", None), "duplicate_id"),
        (st.LeafEntry(id="l", parent_id="b", timestamp=T, target_id="nope"), "not_found"),
        (
            st.LabelEntry(id="l", parent_id="b", timestamp=T, target_id="nope", label="x"),
            "not_found",
        ),
    ]
    for entry, code in cases:
        with pytest.raises(st.SessionError) as exc:
            storage.append_entry(entry)
        assert code_of(exc) == code, entry
        assert size() == before
        assert len(storage) == 2
        assert storage.get_leaf_id() == "b"
    assert isinstance(storage.get_entry("a"), st.CustomEntry)
    assert storage.get_entry("a").data == "a"
    reopened = backend.reopen(storage)
    assert [e.id for e in reopened.get_entries()] == ["a", "b"]
    reopened.close()


def test_leaf_entries_move_the_leaf(backend: Any) -> None:
    storage = backend.new()
    storage.append_entry(custom("a", None))
    storage.append_entry(custom("b", "a"))
    storage.append_entry(st.LeafEntry(id="l1", parent_id="b", timestamp=T, target_id="a"))
    assert storage.get_leaf_id() == "a"
    storage.set_leaf_id(None)
    assert storage.get_leaf_id() is None
    leaf = storage.get_entries("leaf")[-1]
    assert isinstance(leaf, st.LeafEntry)
    assert (leaf.parent_id, leaf.target_id) == ("a", None)
    storage.set_leaf_id("b")
    assert storage.get_leaf_id() == "b"
    reopened = backend.reopen(storage)
    assert reopened.get_leaf_id() == "b"
    reopened.close()


def test_limits(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    limits = st.Limits(max_line_bytes=200)
    assert "200" in repr(limits)
    storage = st.JsonlSessionStorage.create(path, limits=limits)
    storage.append_entry(custom("a", None))
    big = st.CustomEntry(id="b", parent_id="a", timestamp=T, custom_type="c", data="x" * 500)
    storage.flush()
    size = path.stat().st_size
    with pytest.raises(st.SessionError) as exc:
        storage.append_entry(big)
    assert code_of(exc) == "limit_exceeded"
    storage.flush()
    assert path.stat().st_size == size
    storage.close()
    mem = st.InMemorySessionStorage(limits=st.Limits(max_line_bytes=100))
    with pytest.raises(st.SessionError) as exc:
        mem.append_entry(big)
    assert code_of(exc) == "limit_exceeded"
    mem.close()
    for bad in (
        {"max_line_bytes": 0},
        {"max_depth": -1},
        {"max_id_bytes": "2"},
        {"max_depth": True},
    ):
        with pytest.raises(st.SessionError) as exc:
            st.Limits(**bad)
        assert code_of(exc) == "invalid_argument"
    with pytest.raises(st.SessionError) as exc:
        st.JsonlSessionStorage.open(path, limits={"max_line_bytes": 5})  # type: ignore[arg-type]
    assert code_of(exc) == "invalid_argument"


def test_create_entry_id(backend: Any) -> None:
    storage = backend.new()
    seen = set()
    for _ in range(200):
        new = storage.create_entry_id()
        assert len(new) == 8 and int(new, 16) >= 0 and new == new.lower()
        seen.add(new)
        storage.append_entry(custom(new, None))
    assert len(seen) == 200
    storage.close()


# --------------------------------------------------------------------------- queries


def build_query_session(storage: st.SessionStorage) -> None:
    """a(custom) b(label) c(custom x) d(custom) e(unknown zz) ; f (custom, child of a)."""
    storage.append_entry(custom("a", None))
    storage.append_entry(
        st.LabelEntry(id="b", parent_id="a", timestamp=T, target_id="a", label="A")
    )
    storage.append_entry(custom("c", "b", "x"))
    storage.append_entry(custom("d", "c"))
    data = {"type": "zz", "id": "e", "parent_id": "d", "timestamp": T}
    storage.append_entry(st.UnknownEntry(type="zz", id="e", parent_id="d", timestamp=T, data=data))
    storage.append_entry(custom("f", "a"))


def test_get_entries(backend: Any) -> None:
    storage = backend.new()
    build_query_session(storage)

    def q(*args: Any, **kw: Any) -> list[str]:
        return [e.id for e in storage.get_entries(*args, **kw)]

    assert q() == ["a", "b", "c", "d", "e", "f"]
    assert q("custom") == ["a", "c", "d", "f"]
    assert q(type="label") == ["b"]
    assert q("zz") == ["e"]
    assert q("nothing-like-this") == []
    assert q("session") == []
    assert q(since="c") == ["d", "e", "f"]
    assert q(since="f") == []
    assert q("custom", since="a") == ["c", "d", "f"]
    assert q(limit=2) == ["a", "b"]
    assert q(limit=0) == []
    assert q(limit=100) == ["a", "b", "c", "d", "e", "f"]
    assert q(reverse=True) == ["f", "e", "d", "c", "b", "a"]
    assert q("custom", reverse=True, limit=2) == ["f", "d"]
    assert q(since="b", reverse=True) == ["f", "e", "d", "c"]
    assert q("custom", since="b", limit=1) == ["c"]
    assert q(limit=None) == q()
    with pytest.raises(st.SessionError) as exc:
        storage.get_entries(since="nope")
    assert code_of(exc) == "not_found"
    with pytest.raises(st.SessionError) as exc:
        storage.get_entries(limit=-1)
    assert code_of(exc) == "invalid_argument"
    with pytest.raises(TypeError):
        storage.get_entries("custom", "a")  # type: ignore[misc]
    assert [e.id for e in storage.find_entries("custom")] == ["a", "c", "d", "f"]
    assert [e.id for e in storage.find_entries("zz")] == ["e"]
    assert storage.find_entries("label")[0] == st.LabelEntry(
        id="b", parent_id="a", timestamp=T, target_id="a", label="A"
    )
    storage.close()


def test_children_paths_and_labels(backend: Any) -> None:
    storage = backend.new()
    build_query_session(storage)
    assert [e.id for e in storage.get_children(None)] == ["a"]
    assert [e.id for e in storage.get_children("a")] == ["b", "f"]
    assert storage.get_children("e") == []
    assert [e.id for e in storage.get_path_to_root("e")] == ["a", "b", "c", "d", "e"]
    assert [e.id for e in storage.get_path_to_root_or_compaction("f")] == ["a", "f"]
    assert storage.get_label("a") == "A"
    assert storage.get_label("c") is None
    assert storage.get_labels() == {"a": "A"}
    assert storage.get_session_name() is None
    assert len(storage) == 6
    assert storage.get_leaf_id() == "f"
    for bad in (lambda: storage.get_children("nope"), lambda: storage.get_path_to_root("nope")):
        with pytest.raises(st.SessionError) as exc:
            bad()
        assert code_of(exc) == "not_found"
    for bad in (
        lambda: storage.get_entry(None),
        lambda: storage.get_children(1),
        lambda: storage.find_entries(None),
        lambda: storage.set_leaf_id(3),
        lambda: storage.get_path_to_root(["a"]),
    ):
        with pytest.raises(st.SessionError) as exc:
            bad()
        assert code_of(exc) == "invalid_argument"
    storage.close()


def test_load_report_of_a_clean_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.jsonl"
    make_file(path)
    with st.JsonlSessionStorage.open(path) as storage:
        report = storage.load_report
        assert report == st.LoadReport((), 0)
        assert report.ok
        assert storage.torn_path is None


def test_error_codes_subclass_builtins() -> None:
    pairs = {
        "not_found": KeyError,
        "invalid_argument": ValueError,
        "corrupt": ValueError,
        "duplicate_id": ValueError,
        "locked": BlockingIOError,
        "readonly": PermissionError,
        "closed": ValueError,
        "exists": FileExistsError,
        "io": OSError,
        "limit_exceeded": ValueError,
    }
    for code, builtin in pairs.items():
        err = st.SessionError(code, "m")
        assert isinstance(err, builtin) and isinstance(err, st.SessionError)
        assert err.code == code
        assert code in repr(err)


def test_constructing_from_a_path_points_to_the_factories(tmp_path: pathlib.Path) -> None:
    with pytest.raises(st.SessionError) as exc:
        st.JsonlSessionStorage(tmp_path / "s.jsonl")  # type: ignore[arg-type]
    assert code_of(exc) == "invalid_argument"
    assert "open" in str(exc.value) and "create" in str(exc.value)


@pytest.mark.parametrize("bad", [123, None, b"s.jsonl", ["s.jsonl"]])
def test_path_arguments_must_be_str_or_pathlike(tmp_path: pathlib.Path, bad: Any) -> None:
    calls = [
        lambda: st.JsonlSessionStorage.open(bad),
        lambda: st.JsonlSessionStorage.create(bad),
        lambda: st.JsonlSessionRepo(bad),
    ]
    for call in calls:
        with pytest.raises(st.SessionError) as exc:
            call()
        assert exc.value.code == "invalid_argument"
        assert "path" in exc.value.message or "root_dir" in exc.value.message
    # A PathLike works everywhere.
    with st.JsonlSessionStorage.create(tmp_path / "ok.jsonl") as storage:
        assert storage.path == str(tmp_path / "ok.jsonl")
    st.JsonlSessionStorage.open(tmp_path / "ok.jsonl", readonly=True).close()
