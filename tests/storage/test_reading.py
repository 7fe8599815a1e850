"""Robustness of the reader (FORMAT.md "Robustness"): what damaged files load as.

Each file here is written byte by byte, so the tests see exactly what a crash, a foreign
writer or a disk error could leave behind.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
from collections.abc import Callable
from typing import Any

import pytest

import sessiontree as st
from sessiontree import _core

Write = Callable[..., pathlib.Path]


def code_of(exc: pytest.ExceptionInfo[BaseException]) -> str:
    assert isinstance(exc.value, st.SessionError)
    return exc.value.code


def issue_tuples(storage: Any) -> list[tuple[int, int, str]]:
    return [(i.line, i.offset, i.kind) for i in storage.load_report.issues]


def side_files(path: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in path.parent.iterdir() if p.name.startswith(path.name + ".torn-"))


# --------------------------------------------------------------------------- torn tail


def torn_file(write: Write, lines: Any) -> tuple[pathlib.Path, bytes, bytes]:
    good = lines.header() + lines.entry("a", None) + lines.entry("b", "a")
    torn = b'{"type":"custom","id":"c","parent_id":"b","timest'
    path = write(good[len(lines.header()) :], torn)
    assert path.read_bytes() == good + torn
    return path, good, torn


def test_torn_tail_read_only_leaves_the_file_alone(write_session: Write, lines: Any) -> None:
    path, good, torn = torn_file(write_session, lines)
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        assert [e.id for e in storage.get_entries()] == ["a", "b"]
        assert storage.get_leaf_id() == "b"
        report = storage.load_report
        assert report.torn_tail_bytes == len(torn)
        assert not report.ok
        assert issue_tuples(storage) == [(4, len(good), "torn_tail")]
        assert storage.torn_path is None
    assert path.read_bytes() == good + torn
    assert side_files(path) == []


def test_torn_tail_writer_cuts_it_into_a_side_file(write_session: Write, lines: Any) -> None:
    path, good, torn = torn_file(write_session, lines)
    storage = st.JsonlSessionStorage.open(path)
    assert storage.load_report.torn_tail_bytes == len(torn)
    assert issue_tuples(storage) == [(4, len(good), "torn_tail")]
    (side,) = side_files(path)
    assert storage.torn_path == str(side)
    assert re.fullmatch(re.escape(path.name) + r"\.torn-\d{8}T\d{6}(\.\d+)?Z", side.name)
    assert side.read_bytes() == torn
    assert path.read_bytes() == good
    storage.append_entry(
        st.CustomEntry(id="c", parent_id="b", timestamp=lines.iso, custom_type="note")
    )
    storage.close()
    data = path.read_bytes()
    assert data.startswith(good) and data.endswith(b"\n")
    with st.JsonlSessionStorage.open(path, strict=True) as again:
        assert again.load_report.ok
        assert [e.id for e in again.get_entries()] == ["a", "b", "c"]
        assert again.get_leaf_id() == "c"


def test_torn_only_entry(write_session: Write, lines: Any) -> None:
    path = write_session(b'{"type":"cus')
    with st.JsonlSessionStorage.open(path) as storage:
        assert len(storage) == 0
        assert storage.get_leaf_id() is None
        assert storage.load_report.torn_tail_bytes == len(b'{"type":"cus')
    assert path.read_bytes() == lines.header()


def test_torn_tail_completed_later_is_picked_up_by_refresh(
    write_session: Write, lines: Any
) -> None:
    path, good, torn = torn_file(write_session, lines)
    storage = st.JsonlSessionStorage.open(path, readonly=True)
    full = lines.entry("c", "b")
    with open(path, "ab") as f:
        f.write(full[len(torn) :])
    assert path.read_bytes() == good + full
    assert storage.refresh() == 1
    assert storage.get_leaf_id() == "c"
    assert storage.load_report.torn_tail_bytes == 0
    storage.close()


def test_torn_tail_in_memory_document(lines: Any) -> None:
    data = lines.header() + lines.entry("a", None) + b'{"type":"x'
    storage = st.InMemorySessionStorage.from_jsonl(data)
    assert len(storage) == 1
    assert storage.load_report.torn_tail_bytes == len(b'{"type":"x')
    assert storage.to_jsonl() == lines.header() + lines.entry("a", None)
    storage.close()


# --------------------------------------------------------------------------- skipped lines


MALFORMED = {
    "not-json": b"this is not json\n",
    "truncated-json": b'{"type":"custom","id":"x"\n',
    "array": b"[1,2,3]\n",
    "string": b'"just a string"\n',
    "null": b"null\n",
    "no-type": b'{"id":"x","parent_id":null,"timestamp":"t"}\n',
    "no-id": b'{"type":"custom","parent_id":null,"timestamp":"t"}\n',
    "empty-id": b'{"type":"custom","id":"","parent_id":null,"timestamp":"t"}\n',
    "numeric-id": b'{"type":"custom","id":5,"parent_id":null,"timestamp":"t"}\n',
    "bad-parent": b'{"type":"custom","id":"x","parent_id":7,"timestamp":"t"}\n',
    "no-timestamp": b'{"type":"custom","id":"x","parent_id":null}\n',
    "second-header": b'{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/"}\n',
    "message-not-object": b'{"type":"message","id":"x","parent_id":null,"timestamp":"t",'
    b'"message":"hi"}\n',
    "long-id": b'{"type":"custom","id":"' + b"i" * 300 + b'","parent_id":null,"timestamp":"t"}\n',
    "trailing-garbage": b'{"type":"custom","id":"x","parent_id":null,"timestamp":"t"} x\n',
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_middle_line_is_skipped_and_reported(
    write_session: Write, lines: Any, name: str
) -> None:
    a = lines.entry("a", None)
    bad = MALFORMED[name]
    path = write_session(a, bad, lines.entry("b", "a"), lines.entry("c", "b"))
    data = path.read_bytes()
    offset = len(lines.header()) + len(a)
    for readonly in (True, False):
        with st.JsonlSessionStorage.open(path, readonly=readonly) as storage:
            assert [e.id for e in storage.get_entries()] == ["a", "b", "c"]
            assert storage.get_leaf_id() == "c"
            (issue,) = storage.load_report.issues
            assert (issue.line, issue.offset) == (3, offset)
            assert issue.kind in {"malformed", "too_large"}
            if name != "long-id":
                assert issue.kind == "malformed"
            assert issue.message
            assert issue.kind in repr(issue)
            assert storage.get_entry("x") is None
        assert path.read_bytes() == data


def test_writer_appends_after_a_skipped_line(write_session: Write, lines: Any) -> None:
    path = write_session(lines.entry("a", None), b"garbage\n", lines.entry("b", "a"))
    data = path.read_bytes()
    with st.Session(st.JsonlSessionStorage.open(path)) as session:
        new = session.append_custom_entry("more")
    assert path.read_bytes().startswith(data)
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        assert [e.id for e in storage.get_entries()] == ["a", "b", new]
        assert storage.get_entry(new).parent_id == "b"
        assert issue_tuples(storage) == [
            (3, len(lines.header()) + len(lines.entry("a", None)), "malformed")
        ]


def test_invalid_utf8_line(write_session: Write, lines: Any) -> None:
    a = lines.entry("a", None)
    bad = b'{"type":"custom","id":"x","parent_id":"a","timestamp":"t","data":"\xff\xfe"}\n'
    path = write_session(a, bad, lines.entry("b", "a"))
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        assert issue_tuples(storage) == [(3, len(lines.header()) + len(a), "invalid_utf8")]
        assert [e.id for e in storage.get_entries()] == ["a", "b"]


def test_several_problems_are_reported_in_order(write_session: Write, lines: Any) -> None:
    parts = [
        lines.entry("a", None),
        b"\n",
        b"oops\n",
        lines.entry("b", "ghost"),
        lines.entry("a", "b"),
        lines.entry("l", "b", "leaf", target_id="nowhere"),
        b"\xff\n",
        lines.entry("c", "b"),
    ]
    path = write_session(*parts)
    offsets = []
    pos = len(lines.header())
    for p in parts:
        offsets.append(pos)
        pos += len(p)
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        assert issue_tuples(storage) == [
            (4, offsets[2], "malformed"),
            (5, offsets[3], "dangling_parent"),
            (6, offsets[4], "duplicate_id"),
            (7, offsets[5], "unknown_leaf_target"),
            (8, offsets[6], "invalid_utf8"),
        ]
        assert [e.id for e in storage.get_entries()] == ["a", "b", "l", "c"]
        assert storage.get_leaf_id() == "c"


def test_duplicate_id_keeps_the_first(write_session: Write, lines: Any) -> None:
    first = lines.entry("a", None, custom_type="note", data="first")
    dup = lines.entry("a", "b", custom_type="note", data="second")
    path = write_session(first, lines.entry("b", "a"), dup)
    for readonly in (True, False):
        with st.JsonlSessionStorage.open(path, readonly=readonly) as storage:
            assert storage.get_entry("a").data == "first"
            assert storage.get_entry("a").parent_id is None
            # The ignored line does not move the leaf.
            assert storage.get_leaf_id() == "b"
            assert len(storage) == 2
            (issue,) = storage.load_report.issues
            assert (issue.line, issue.kind) == (4, "duplicate_id")
            assert issue.offset == len(lines.header()) + len(first) + len(lines.entry("b", "a"))
    with st.Session(st.JsonlSessionStorage.open(path)) as session:
        c = session.append_custom_entry("x")
        assert session.get_entry(c).parent_id == "b"
        with pytest.raises(st.SessionError) as exc:
            session.storage.append_entry(
                st.CustomEntry(id="a", parent_id=None, timestamp=lines.iso, custom_type="n")
            )
        assert code_of(exc) == "duplicate_id"


def test_dangling_parent_becomes_a_root(write_session: Write, lines: Any) -> None:
    path = write_session(
        lines.entry("a", None),
        lines.entry("x", "ghost"),
        lines.entry("y", "x"),
        lines.entry("fwd", "later"),
        lines.entry("later", None),
    )
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        assert [(i.line, i.kind) for i in storage.load_report.issues] == [
            (3, "dangling_parent"),
            (5, "dangling_parent"),
        ]
        assert "ghost" in storage.load_report.issues[0].message
        assert [e.id for e in storage.get_children(None)] == ["a", "x", "fwd", "later"]
        assert [e.id for e in storage.get_path_to_root("y")] == ["x", "y"]
        assert [e.id for e in storage.get_path_to_root_or_compaction("fwd")] == ["fwd"]
        assert storage.get_children("later") == []
        session = st.Session(storage)
        assert [n.entry.id for n in session.get_tree()] == ["a", "x", "fwd", "later"]
        assert session.get_leaf_id() == "later"


@pytest.mark.parametrize("how", ["file", "memory"])
def test_dangling_parent_reads_as_null_everywhere(
    write_session: Write, lines: Any, how: str
) -> None:
    # FORMAT.md: the entry as returned has ``parent_id`` null; the line stays as written.
    path = write_session(
        lines.entry("a", None),
        lines.user("x", "ghost"),
        lines.entry("y", "x"),
        lines.entry("u", "phantom", "future_kind", payload=1),
    )
    before = path.read_bytes()
    if how == "file":
        storage: st.SessionStorage = st.JsonlSessionStorage.open(path)
    else:
        storage = st.InMemorySessionStorage.from_jsonl(before)
    with storage:
        report = storage.load_report  # type: ignore[attr-defined]
        assert [(i.line, i.kind) for i in report.issues] == [
            (3, "dangling_parent"),
            (5, "dangling_parent"),
        ]
        assert "ghost" in report.issues[0].message and "phantom" in report.issues[1].message
        x = storage.get_entry("x")
        assert x is not None and x.parent_id is None
        unknown = storage.get_entry("u")
        assert isinstance(unknown, st.UnknownEntry) and unknown.parent_id is None
        assert st.entry_to_dict(unknown)["parent_id"] is None
        assert {e.id: e.parent_id for e in storage.get_entries()} == {
            "a": None,
            "x": None,
            "y": "x",
            "u": None,
        }
        assert [e.parent_id for e in storage.get_entries(reverse=True, limit=1)] == [None]
        assert [e.parent_id for e in storage.find_entries("message")] == [None]
        assert [(e.id, e.parent_id) for e in storage.get_path_to_root("y")] == [
            ("x", None),
            ("y", "x"),
        ]
        assert storage.get_path_to_root_or_compaction("y")[0].parent_id is None
        assert [e.parent_id for e in storage.get_children(None)] == [None, None, None]
        session = st.Session(storage)
        assert [(n.entry.id, n.entry.parent_id) for n in session.get_tree()] == [
            ("a", None),
            ("x", None),
            ("u", None),
        ]
        assert session.get_branch("y")[0].parent_id is None
    assert path.read_bytes() == before


def test_unknown_leaf_target_leaves_the_leaf(write_session: Write, lines: Any) -> None:
    path = write_session(
        lines.entry("a", None),
        lines.entry("b", "a"),
        lines.entry("l1", "b", "leaf", target_id="ghost"),
    )
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        assert storage.get_leaf_id() == "b"
        assert [(i.line, i.kind) for i in storage.load_report.issues] == [
            (4, "unknown_leaf_target")
        ]
    with st.Session(st.JsonlSessionStorage.open(path)) as session:
        assert session.get_entry(session.append_custom_entry("n")).parent_id == "b"


def test_leaf_to_null_and_back(write_session: Write, lines: Any) -> None:
    path = write_session(
        lines.entry("a", None),
        lines.entry("l1", "a", "leaf", target_id=None),
        lines.entry("r", None),
        lines.entry("l2", "r", "leaf", target_id="a"),
    )
    with st.JsonlSessionStorage.open(path, strict=True) as storage:
        assert storage.get_leaf_id() == "a"
        assert [e.id for e in storage.get_children(None)] == ["a", "r"]


def test_blank_lines_and_crlf_are_accepted_silently(write_session: Write, lines: Any) -> None:
    crlf = [lines.entry("a", None), lines.entry("b", "a"), lines.user("c", "b", "hello")]
    header = lines.header().replace(b"\n", b"\r\n")
    body = b"\n" + crlf[0].replace(b"\n", b"\r\n") + b"   \n\r\n\t\n" + crlf[1] + b"\n"
    body += crlf[2].replace(b"\n", b"\r\n") + b"\n"
    path = write_session(body, header=header)
    data = path.read_bytes()
    plain = st.InMemorySessionStorage.from_jsonl(lines.header() + b"".join(crlf))
    for kwargs in ({"readonly": True}, {"strict": True}, {}):
        with st.JsonlSessionStorage.open(path, **kwargs) as storage:
            assert storage.load_report.ok
            assert storage.get_entries() == plain.get_entries()
            assert storage.get_metadata() == plain.get_metadata()
            assert storage.get_leaf_id() == "c"
            assert st.Session(storage).build_context().messages[0].content == "hello"
        assert path.read_bytes() == data
    assert st.InMemorySessionStorage.from_jsonl(data, strict=True).get_entries() == (
        plain.get_entries()
    )
    with st.Session(st.JsonlSessionStorage.open(path)) as session:
        d = session.append_custom_entry("after crlf")
    with st.JsonlSessionStorage.open(path, strict=True) as storage:
        assert storage.get_leaf_id() == d
        assert storage.get_entry(d).parent_id == "c"
    assert path.read_bytes().startswith(data)


@pytest.mark.parametrize(("limit", "size"), [(300, 1000), (100_000, 300_000)])
def test_too_large_line(write_session: Write, lines: Any, limit: int, size: int) -> None:
    a = lines.entry("a", None)
    big = lines.entry("big", "a", custom_type="n", data="x" * size)
    path = write_session(a, big, lines.entry("b", "a"), b"bad\n", lines.entry("c", "b"))
    head = len(lines.header())
    with st.JsonlSessionStorage.open(
        path, readonly=True, limits=st.Limits(max_line_bytes=limit)
    ) as storage:
        assert issue_tuples(storage) == [
            (3, head + len(a), "too_large"),
            (5, head + len(a) + len(big) + len(lines.entry("b", "a")), "malformed"),
        ]
        assert [e.id for e in storage.get_entries()] == ["a", "b", "c"]
    # Under the default limit the same line is an ordinary entry.
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        assert [i.kind for i in storage.load_report.issues] == ["malformed"]
        assert storage.get_entry("big").data == "x" * size
    with pytest.raises(st.SessionError) as exc:
        st.JsonlSessionStorage.open(path, strict=True, limits=st.Limits(max_line_bytes=limit))
    assert code_of(exc) == "corrupt"


def test_too_deep_line(write_session: Write, lines: Any) -> None:
    """Nesting Python's ``json`` could not decode is skipped when read, not a
    ``RecursionError`` later."""
    deep = b"[" * 5000 + b"1" + b"]" * 5000
    line = lines.entry("d", "a", custom_type="n", data=None).replace(b"null", deep)
    shallow = lines.entry("s", "a", custom_type="n", data=[[[[[1]]]]])
    path = write_session(lines.entry("a", None), line, shallow, lines.entry("b", "a"))
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        assert [(i.line, i.kind) for i in storage.load_report.issues] == [(3, "too_large")]
        assert [e.id for e in storage.get_entries()] == ["a", "s", "b"]
        st.Session(storage).get_tree()
    with st.JsonlSessionStorage.open(path, readonly=True, limits=st.Limits(max_depth=4)) as s:
        assert [(i.line, i.kind) for i in s.load_report.issues] == [
            (3, "too_large"),
            (4, "too_large"),
        ]
        assert [e.id for e in s.get_entries()] == ["a", "b"]


def test_long_but_legal_ids(write_session: Write, lines: Any) -> None:
    long_id = "ü" * 128  # 256 UTF-8 bytes: the longest id a reader accepts
    path = write_session(lines.entry(long_id, None), lines.entry("b", long_id))
    with st.JsonlSessionStorage.open(path, strict=True) as storage:
        assert [e.id for e in storage.get_path_to_root("b")] == [long_id, "b"]


# --------------------------------------------------------------------------- strict mode


def _strict_cases(lines: Any) -> dict[str, list[bytes]]:
    return {
        "torn": [lines.entry("a", None), b'{"type":"cu'],
        "malformed": [lines.entry("a", None), b"nope\n", lines.entry("b", "a")],
        "invalid-utf8": [lines.entry("a", None), b"\xc3\x28\n"],
        "duplicate": [lines.entry("a", None), lines.entry("a", None)],
        "dangling": [lines.entry("a", "ghost")],
        "leaf-target": [lines.entry("a", None), lines.entry("l", "a", "leaf", target_id="g")],
        "too-large": [lines.entry("a", None, custom_type="n", data="x" * 500)],
    }


@pytest.mark.parametrize(
    "case",
    ["torn", "malformed", "invalid-utf8", "duplicate", "dangling", "leaf-target", "too-large"],
)
def test_strict_mode_refuses_each_problem(write_session: Write, lines: Any, case: str) -> None:
    parts = _strict_cases(lines)[case]
    path = write_session(*parts)
    data = path.read_bytes()
    limits = st.Limits(max_line_bytes=400)
    for readonly in (True, False):
        with pytest.raises(st.SessionError) as exc:
            st.JsonlSessionStorage.open(
                path, readonly=readonly, strict=True, limits=limits, durability="flush"
            )
        assert code_of(exc) == "corrupt"
        assert "line" in str(exc.value)
        # The lenient reader takes the same file.
        st.JsonlSessionStorage.open(path, readonly=True, limits=limits).close()
    with pytest.raises(st.SessionError) as exc:
        st.InMemorySessionStorage.from_jsonl(data, strict=True, limits=limits)
    assert code_of(exc) == "corrupt"
    assert path.read_bytes() == data
    assert side_files(path) == []
    # A failed strict writer open leaves no lock behind.
    st.JsonlSessionStorage.open(path, limits=limits, durability="flush").close()


@pytest.mark.parametrize("how", ["failed-strict-open", "dropped-without-close"])
def test_default_durability_writer_releases_its_lock(
    write_session: Write, lines: Any, how: str
) -> None:
    import gc

    if how == "failed-strict-open":
        path = write_session(lines.entry("a", None), b"nope\n")
        with pytest.raises(st.SessionError):
            st.JsonlSessionStorage.open(path, strict=True)
    else:
        path = write_session(lines.entry("a", None))
        storage = st.JsonlSessionStorage.open(path)
        del storage
        gc.collect()
    st.JsonlSessionStorage.open(path).close()


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "thinking_level_change", "thinking_level": "ultra"},
        {"type": "message", "message": {"role": "user"}},
        {"type": "model_change", "provider": 5},
    ],
)
def test_semantically_invalid_line_is_skipped(
    write_session: Write, lines: Any, bad: dict[str, Any]
) -> None:
    fields = {k: v for k, v in bad.items() if k != "type"}
    path = write_session(
        lines.entry("a", None),
        lines.entry("x", "a", bad["type"], **fields),
        lines.entry("b", "a"),
    )
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        assert [(i.line, i.kind) for i in storage.load_report.issues] == [(3, "malformed")]
        session = st.Session(storage)
        assert [e.id for e in session.get_branch()] == ["a", "b"]
        session.get_tree()


# --------------------------------------------------------------------------- deep chains

# 10^6 entries for the engine; the Python-object paths (one object per entry, in a debug
# build ~10 µs each) use 10^5 unless SESSIONTREE_DEEP is set, e.g. to 1000000.
ENGINE_DEPTH = 1_000_000
PYTHON_DEPTH = int(os.environ.get("SESSIONTREE_DEEP", "100000"))


def write_chain(path: pathlib.Path, n: int, lines: Any, *, messages: bool) -> None:
    ts = lines.iso.encode()
    if messages:
        template = (
            b'{"type":"message","id":"%x","parent_id":%s,"timestamp":"'
            + ts
            + b'","message":{"role":"user","content":"m","timestamp":0}}\n'
        )
    else:
        template = (
            b'{"type":"custom","id":"%x","parent_id":%s,"timestamp":"'
            + ts
            + b'","custom_type":"x"}\n'
        )
    parts = [lines.header()]
    parts.append(template % (0, b"null"))
    parts.extend(template % (i, b'"%x"' % (i - 1)) for i in range(1, n))
    path.write_bytes(b"".join(parts))


def test_million_deep_chain_engine_paths(tmp_path: pathlib.Path, lines: Any) -> None:
    path = tmp_path / "deep.jsonl"
    write_chain(path, ENGINE_DEPTH, lines, messages=False)
    engine = _core.Engine.open(os.fspath(path), readonly=True)
    assert len(engine) == ENGINE_DEPTH
    leaf = engine.leaf()
    assert leaf == ENGINE_DEPTH - 1
    leaf_id = engine.id_of(leaf)
    path_idx = engine.path_indices(leaf_id, False)
    assert len(path_idx) == ENGINE_DEPTH
    assert path_idx[0] == 0 and path_idx[-1] == leaf
    assert engine.path_indices(leaf_id, True) == path_idx
    raw = engine.path_to_root_or_compaction(leaf_id)
    assert len(raw) == ENGINE_DEPTH and b'"id":"0"' in raw[0]
    parents = engine.parents()
    assert parents[0] == -1 and parents[-1] == ENGINE_DEPTH - 2
    assert engine.children(None) == [0]
    assert engine.state_lines(leaf_id) == [None, None, None]
    engine.close()


def test_deep_chain_python_paths(tmp_path: pathlib.Path, lines: Any) -> None:
    n = PYTHON_DEPTH
    path = tmp_path / "deep.jsonl"
    write_chain(path, n, lines, messages=True)
    with st.Session(st.JsonlSessionStorage.open(path, readonly=True)) as session:
        leaf = f"{n - 1:x}"
        assert session.get_leaf_id() == leaf
        branch = session.get_branch()
        assert len(branch) == n and branch[0].id == "0" and branch[-1].id == leaf
        ctx = session.build_context()
        assert len(ctx.messages) == n
        assert len(session.storage.get_path_to_root(leaf)) == n
        (root,) = session.get_tree()
        assert root.entry.id == "0"
        depth, node = 1, root
        while node.children:
            (node,) = node.children
            depth += 1
        assert depth == n and node.entry.id == leaf
        assert "0" in repr(root)
        assert len(root.walk()) == n
        assert root == root.__class__(root.entry, root.children, root.label)


def test_json_reader_lines_are_what_python_json_reads(write_session: Write, lines: Any) -> None:
    """Escapes, unicode and numbers survive the engine's byte-for-byte handling."""
    data = {"s": 'q"\\\n\t\u2028ü😀', "n": [0, -1, 1.5, 1e300, 12345678901234567890], "b": None}
    path = write_session(lines.entry("a", None, custom_type="t", data=data))
    with st.JsonlSessionStorage.open(path, strict=True) as storage:
        assert storage.get_entry("a").data == json.loads(json.dumps(data))


def test_values_refused_at_construction_still_load_from_a_file(
    write_session: Write, lines: Any, tmp_path: pathlib.Path
) -> None:
    # Negative counts and costs, an empty provider and model, a non-image mime type: the
    # constructors refuse them now, but earlier versions wrote them and FORMAT.md only
    # asks for the types, so the reader keeps every such line (nothing is reported).
    usage = {"input": -1, "output": 2, "cost": {"input": -0.5, "total": 0.0}}
    assistant = {
        "role": "assistant",
        "content": [{"type": "text", "text": "hi"}],
        "provider": "",
        "model": "",
        "usage": usage,
        "timestamp": 2,
    }
    image = {"type": "image", "data": "aGk=", "mime_type": "application/pdf"}
    path = write_session(
        lines.entry(
            "u", None, "message", message={"role": "user", "content": [image], "timestamp": 1}
        ),
        lines.entry("a", "u", "message", message=assistant),
        lines.entry("m", "a", "model_change", provider="", model_id=""),
        lines.entry(
            "c",
            "m",
            "compaction",
            summary="s",
            first_kept_entry_id="u",
            tokens_before=-7,
            usage=usage,
        ),
        name="s1.jsonl",  # the repo below finds a session by its id
    )
    with st.JsonlSessionStorage.open(path) as storage:
        assert storage.load_report.ok
        entries = storage.get_entries()
        assert [e.id for e in entries] == ["u", "a", "m", "c"]
        c = storage.get_entry("c")
        assert isinstance(c, st.CompactionEntry) and c.tokens_before == -7
        a = storage.get_entry("a")
        assert isinstance(a, st.MessageEntry) and a.message.usage.input == -1  # type: ignore[union-attr]
        session = st.Session(storage)
        ctx = session.build_context()
        assert ctx.messages[0].tokens_before == -7  # type: ignore[union-attr]
        assert [e.id for e in session.get_branch()] == ["u", "a", "m", "c"]
        assert session.get_tree()[0].entry.id == "u"
        assert [e.id for e in st.get_entries_to_fork(storage, "c", "at")] == ["u", "a", "m", "c"]
        session.append_message(st.UserMessage("next"))
    repo = st.JsonlSessionRepo(tmp_path)
    (meta,) = [m for m in repo.list() if m.id == "s1"]
    with repo.fork(meta) as fork:
        assert [e.id for e in fork.storage.get_entries()][:4] == ["u", "a", "m", "c"]
