"""Hostile files: each gives a clear error or a load report, never a crash or a hang.

Where a crash (stack overflow, abort) or a hang is possible the case runs in a child
interpreter under a timeout, so a failure is reported instead of taking pytest down.

Cases: JSON bombs (10^5 levels of arrays or objects, with the default nesting limit and a
lower ``Limits.max_depth``), a 10^6-deep chain of entries, lines over
``Limits.max_line_bytes`` (reported ``too_large``, the rest loads), duplicate and
dangling ids, unknown leaf targets, invalid UTF-8, NUL bytes, over-long ids, a header-only
file, an empty file, a torn or unsupported header, a file of nothing but garbage after
the header, and every input the fuzzer ever found (``tests/fuzz_regressions/``).

Sizes: ``SESSIONTREE_DEEP_CHAIN`` (default 1000000) is the chain length;
``SESSIONTREE_HUGE_LINE=1`` adds a line just over the default 256 MiB line limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st

DEEP_CHAIN = int(os.environ.get("SESSIONTREE_DEEP_CHAIN", "1000000"))
HUGE_LINE = os.environ.get("SESSIONTREE_HUGE_LINE") == "1"
REGRESSIONS = Path(__file__).parents[1] / "fuzz_regressions"

HEADER = (
    b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z",'
    b'"cwd":"/","parent_session":null,"metadata":null}\n'
)


def entry(i: int, parent: int | None, data: str = "null", eid: str | None = None) -> bytes:
    p = "null" if parent is None else f'"e{parent}"'
    return (
        f'{{"type":"custom","id":"{eid or f"e{i}"}","parent_id":{p},'
        f'"timestamp":"2026-01-01T00:00:00.000Z","custom_type":"x","data":{data}}}\n'
    ).encode()


def run_isolated(code: str, timeout: float = 300) -> Any:
    """Runs ``code`` in a child interpreter; returns the JSON it prints last."""
    try:
        result = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung: no answer within {timeout} s")
    assert result.returncode == 0, (
        f"child crashed (exit {result.returncode}):\n{result.stderr[-3000:]}"
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def issues(storage: st.JsonlSessionStorage | st.InMemorySessionStorage) -> list[tuple[int, str]]:
    return [(i.line, i.kind) for i in storage.load_report.issues]


# -- JSON bombs ----------------------------------------------------------------------------

BOMB_CODE = """
    import json, sys
    import sessiontree as st
    path, max_depth = sys.argv[1] if len(sys.argv) > 1 else None, None
    data = open({path!r}, "rb").read()
    limits = st.Limits(max_depth={max_depth}) if {max_depth} else None
    out = {{}}
    for how in ("file", "memory"):
        if how == "file":
            s = st.JsonlSessionStorage.open({path!r}, readonly=True, limits=limits)
        else:
            s = st.InMemorySessionStorage.from_jsonl(data, limits=limits)
        session = st.Session(s)
        tree = session.get_tree()
        out[how] = {{
            "ids": [e.id for e in s.get_entries()],
            "issues": [[i.line, i.kind] for i in s.load_report.issues],
            "roots": len(tree),
            "context": len(session.build_context().messages),
        }}
        s.close()
    for how in ("file", "memory"):
        try:
            if how == "file":
                st.JsonlSessionStorage.open({path!r}, readonly=True, strict=True, limits=limits)
            else:
                st.InMemorySessionStorage.from_jsonl(data, strict=True, limits=limits)
            out[how + "_strict"] = "accepted"
        except st.SessionError as e:
            out[how + "_strict"] = e.code
    print(json.dumps(out))
"""


@pytest.mark.parametrize("shape", ["array", "object", "in_message"])
def test_json_bomb_is_reported_and_the_rest_loads(tmp_path: Path, shape: str) -> None:
    depth = 100_000
    if shape == "array":
        bomb = entry(9, 0, "[" * depth + "]" * depth)
    elif shape == "object":
        bomb = entry(9, 0, '{"a":' * depth + "1" + "}" * depth)
    else:
        bomb = (
            b'{"type":"message","id":"e9","parent_id":"e0","timestamp":"t","message":'
            b'{"role":"user","content":' + b"[" * depth + b"]" * depth + b"}}\n"
        )
    path = tmp_path / "bomb.jsonl"
    path.write_bytes(HEADER + entry(0, None) + bomb + entry(1, 0))
    out = run_isolated(BOMB_CODE.format(path=str(path), max_depth=None))
    for how in ("file", "memory"):
        assert out[how]["ids"] == ["e0", "e1"]
        assert out[how]["issues"] == [[3, "too_large"]]
        assert out[how]["roots"] == 1
        assert out[how + "_strict"] == "corrupt"


def test_lower_max_depth_limit(tmp_path: Path) -> None:
    def nested(levels: int) -> str:
        # ``data`` sits inside the entry object: the line nests one level more.
        return "[" * (levels - 1) + "]" * (levels - 1)

    path = tmp_path / "depth.jsonl"
    path.write_bytes(
        HEADER + entry(0, None) + entry(1, 0, nested(8)) + entry(2, 1, nested(9)) + entry(3, 1)
    )
    out = run_isolated(BOMB_CODE.format(path=str(path), max_depth=8))
    for how in ("file", "memory"):
        assert out[how]["ids"] == ["e0", "e1", "e3"]
        assert out[how]["issues"] == [[4, "too_large"]]
        assert out[how + "_strict"] == "corrupt"

    storage = st.JsonlSessionStorage.open(path, durability="flush", limits=st.Limits(max_depth=8))
    size = path.stat().st_size
    with pytest.raises(st.SessionError) as info:
        st.Session(storage).append_custom_entry("x", [[[[[[[[["too deep"]]]]]]]]])
    assert info.value.code == "limit_exceeded"
    assert path.stat().st_size == size
    storage.close()


def test_appending_a_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    storage = st.JsonlSessionStorage.create(path, durability="flush")
    session = st.Session(storage)
    deep: Any = "x"
    for _ in range(200):
        deep = [deep]
    size = path.stat().st_size
    with pytest.raises(st.SessionError) as info:
        session.append_custom_entry("bomb", deep)
    assert info.value.code in ("limit_exceeded", "invalid_argument")
    assert path.stat().st_size == size
    assert len(storage) == 0
    storage.close()


# -- a very deep chain ---------------------------------------------------------------------

DEEP_CODE = """
    import json, sys, time
    import sessiontree as st
    n = {n}
    path = {path!r}
    header = {header!r}
    with open(path, "wb") as f:
        f.write(header)
        f.write(b"".join(
            (
                '{{"type":"custom","id":"e%d","parent_id":%s,"timestamp":"2026-01-01T00:00:00.000Z",'
                '"custom_type":"x","data":null}}\\n' % (i, "null" if i == 0 else '"e%d"' % (i - 1))
            ).encode()
            for i in range(n)
        ))
        # Move the leaf back so the branch and the context are 100000 deep: the whole chain
        # as Python objects would only measure the object layer, not recursion.
        branch_at = min(n, 100_000) - 1
        f.write(('{{"type":"leaf","id":"mv","parent_id":"e%d","timestamp":"2026-01-01T00:00:00.000Z",'
                 '"target_id":"e%d"}}\\n' % (n - 1, branch_at)).encode())
    t0 = time.perf_counter()
    s = st.JsonlSessionStorage.open(path, readonly=True)
    session = st.Session(s)
    out = {{"entries": len(s), "leaf": s.get_leaf_id(), "issues": len(s.load_report.issues)}}
    out["open_s"] = time.perf_counter() - t0
    tree = session.get_tree()
    depth, node = 0, tree[0]
    while True:  # walk down without recursion
        depth += 1
        if not node.children:
            break
        node = node.children[0]
    out["tree_depth"] = depth
    del tree, node
    out["branch"] = len(session.get_branch())
    out["path"] = len(s.get_path_to_root("e%d" % branch_at))
    out["context"] = len(session.build_context().messages)
    out["stats"] = session.get_session_stats().entry_count
    out["children_of_root"] = len(s.get_children("e0"))
    print(json.dumps(out))
"""


def test_very_deep_chain(tmp_path: Path) -> None:
    path = tmp_path / "chain.jsonl"
    out = run_isolated(DEEP_CODE.format(n=DEEP_CHAIN, path=str(path), header=HEADER), 600)
    branch_len = min(DEEP_CHAIN, 100_000)
    assert out["entries"] == DEEP_CHAIN + 1
    assert out["leaf"] == f"e{branch_len - 1}"
    assert out["issues"] == 0
    assert out["tree_depth"] == DEEP_CHAIN + 1  # the leaf entry hangs under the last one
    assert out["branch"] == out["path"] == branch_len
    assert out["context"] == 0  # custom entries make no messages
    assert out["stats"] == DEEP_CHAIN + 1
    assert out["children_of_root"] == 1
    print(f"\ndeep chain: {DEEP_CHAIN} entries opened in {out['open_s']:.1f} s")


# -- huge lines ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "size"),
    [(4096, 10_000), (1 << 20, 3 << 20)],
    ids=["small-limit", "over-one-read-chunk"],
)
def test_line_over_the_limit_is_reported(tmp_path: Path, limit: int, size: int) -> None:
    big = entry(9, 0, '"' + "x" * size + '"')
    path = tmp_path / "big.jsonl"
    path.write_bytes(HEADER + entry(0, None) + big + entry(1, 0))
    limits = st.Limits(max_line_bytes=limit)
    with st.JsonlSessionStorage.open(path, readonly=True, limits=limits) as ro:
        assert [e.id for e in ro.get_entries()] == ["e0", "e1"]
        assert issues(ro) == [(3, "too_large")]
        assert str(len(big) - 1) in ro.load_report.issues[0].message
    mem = st.InMemorySessionStorage.from_jsonl(path.read_bytes(), limits=limits)
    assert [e.id for e in mem.get_entries()] == ["e0", "e1"]
    with pytest.raises(st.SessionError) as info:
        st.JsonlSessionStorage.open(path, readonly=True, strict=True, limits=limits)
    assert info.value.code == "corrupt"
    # The same limit refuses such an append and writes nothing.
    storage = st.JsonlSessionStorage.open(path, durability="flush", limits=limits)
    size_before = path.stat().st_size
    with pytest.raises(st.SessionError) as info:
        st.Session(storage).append_custom_entry("x", "y" * size)
    assert info.value.code == "limit_exceeded"
    assert path.stat().st_size == size_before
    storage.close()


def test_huge_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "torn.jsonl"
    tail = b'{"type":"custom","id":"big","data":"' + b"z" * (3 << 20)
    path.write_bytes(HEADER + entry(0, None) + tail)
    limits = st.Limits(max_line_bytes=1 << 20)
    with st.JsonlSessionStorage.open(path, readonly=True, limits=limits) as ro:
        assert len(ro) == 1
        assert ro.load_report.torn_tail_bytes == len(tail)
    with st.JsonlSessionStorage.open(path, durability="flush", limits=limits) as w:
        assert Path(w.torn_path or "").stat().st_size == len(tail)
    assert path.read_bytes() == HEADER + entry(0, None)


@pytest.mark.skipif(not HUGE_LINE, reason="set SESSIONTREE_HUGE_LINE=1 (writes 257 MiB)")
def test_line_over_the_default_limit(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as f:
        f.write(HEADER + entry(0, None))
        f.write(b'{"type":"custom","id":"huge","data":"')
        chunk = b"h" * (1 << 20)
        for _ in range(257):
            f.write(chunk)
        f.write(b'"}\n' + entry(1, 0))
    out = run_isolated(
        f"""
        import json, resource
        import sessiontree as st
        s = st.JsonlSessionStorage.open({str(path)!r}, readonly=True)
        print(json.dumps({{
            "ids": [e.id for e in s.get_entries()],
            "issues": [[i.line, i.kind] for i in s.load_report.issues],
            "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        }}))
        """
    )
    assert out["ids"] == ["e0", "e1"]
    assert out["issues"] == [[3, "too_large"]]
    assert out["max_rss_mib"] < 512, "the oversize line was held in memory"


# -- ids, references, encodings -------------------------------------------------------------


def test_duplicate_dangling_and_unknown_leaf(tmp_path: Path) -> None:
    data = (
        HEADER
        + entry(0, None)
        + entry(1, 0)
        + entry(2, 0, eid="e1")  # duplicate id: ignored, the leaf stays at e1
        + entry(3, 77)  # dangling parent: a root of its own
        + b'{"type":"leaf","id":"lf","parent_id":"e3","timestamp":"t","target_id":"nope"}\n'
        + entry(4, 1)
    )
    path = tmp_path / "refs.jsonl"
    path.write_bytes(data)
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert issues(ro) == [
            (4, "duplicate_id"),
            (5, "dangling_parent"),
            (6, "unknown_leaf_target"),
        ]
        ids = [e.id for e in ro.get_entries()]
        assert ids == ["e0", "e1", "e3", "lf", "e4"]
        assert ro.get_entry("e1").parent_id == "e0"  # type: ignore[union-attr]
        assert [e.id for e in ro.get_children(None)] == ["e0", "e3"]
        assert ro.get_leaf_id() == "e4"
    dup_only = HEADER + entry(0, None) + entry(1, 0) + entry(2, 0, eid="e1")
    mem = st.InMemorySessionStorage.from_jsonl(dup_only)
    assert mem.get_leaf_id() == "e1"  # the ignored duplicate did not move the leaf
    for bad in (data, dup_only):
        with pytest.raises(st.SessionError) as info:
            st.InMemorySessionStorage.from_jsonl(bad, strict=True)
        assert info.value.code == "corrupt"


def test_invalid_utf8_and_nul_bytes(tmp_path: Path) -> None:
    data = (
        HEADER
        + entry(0, None)
        + b'{"type":"custom","id":"\xc3\x28","parent_id":null,"timestamp":"t"}\n'
        + b"\xff\xfe\xfd\n"
        + b"\x00\x00\x00\x00\n"
        + b'{"type":"custom","id":"a\x00b","parent_id":null,"timestamp":"t"}\n'
        + entry(1, 0, '"nul escaped \\u0000 is fine"')
    )
    path = tmp_path / "enc.jsonl"
    path.write_bytes(data)
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert issues(ro) == [
            (3, "invalid_utf8"),
            (4, "invalid_utf8"),
            (5, "malformed"),
            (6, "malformed"),
        ]
        assert [e.id for e in ro.get_entries()] == ["e0", "e1"]
        assert ro.get_entry("e1").data == "nul escaped \x00 is fine"  # type: ignore[union-attr]


def test_id_limits(tmp_path: Path) -> None:
    long_id = "i" * 257
    data = HEADER + entry(0, None) + entry(1, 0, eid=long_id) + entry(2, 0, eid="i" * 17)
    mem = st.InMemorySessionStorage.from_jsonl(data)
    assert [e.id for e in mem.get_entries()] == ["e0", "i" * 17]
    assert [(i.line, i.kind) for i in mem.load_report.issues] == [(3, "malformed")]
    mem16 = st.InMemorySessionStorage.from_jsonl(data, limits=st.Limits(max_id_bytes=16))
    assert [e.id for e in mem16.get_entries()] == ["e0"]
    assert len(mem16.load_report.issues) == 2

    path = tmp_path / "s.jsonl"
    storage = st.JsonlSessionStorage.create(
        path, durability="flush", limits=st.Limits(max_id_bytes=16)
    )
    size = path.stat().st_size
    with pytest.raises(st.SessionError) as info:
        storage.append_entry(
            st.CustomEntry(id="x" * 17, parent_id=None, timestamp="t", custom_type="c")
        )
    assert info.value.code == "limit_exceeded"
    assert path.stat().st_size == size
    storage.close()


def test_many_garbage_lines(tmp_path: Path) -> None:
    path = tmp_path / "garbage.jsonl"
    path.write_bytes(HEADER + b"not json at all\n" * 100_000 + entry(0, None))
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert [e.id for e in ro.get_entries()] == ["e0"]
        report = ro.load_report
        # The first issues in full, every one counted (test_reliability_resources.py has
        # the memory bound).
        assert len(report.issues) == st.MAX_REPORTED_ISSUES
        assert [i.line for i in report.issues] == list(range(2, 2 + st.MAX_REPORTED_ISSUES))
        assert report.counts == (("malformed", 100_000),)
        assert (report.issue_count, report.truncated) == (100_000, True)


# -- whole-file shapes ---------------------------------------------------------------------


def test_header_only_file(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(HEADER)
    with st.JsonlSessionStorage.open(path, readonly=True, strict=True) as ro:
        session = st.Session(ro)
        assert len(ro) == 0
        assert session.get_leaf_id() is None
        assert session.get_tree() == []
        assert len(session.build_context().messages) == 0
    with st.JsonlSessionStorage.open(path, durability="flush") as w:
        new = st.Session(w).append_message(st.UserMessage("first"))
    with st.JsonlSessionStorage.open(path, readonly=True, strict=True) as ro:
        assert ro.get_leaf_id() == new


def test_file_of_only_garbage_after_the_header(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    garbage = (
        b"\x00\x01garbage\n{{{{\n]]]\n\xff\xff\n" + os.urandom(300).replace(b"\n", b" ") + b"\n"
    )
    path.write_bytes(HEADER + garbage)
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert len(ro) == 0
        assert len(ro.load_report.issues) == 5
        assert {i.kind for i in ro.load_report.issues} <= {"malformed", "invalid_utf8"}
    with st.JsonlSessionStorage.open(path, durability="flush") as w:
        new = st.Session(w).append_message(st.UserMessage("after garbage"))
    assert path.read_bytes().startswith(HEADER + garbage)
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert [e.id for e in ro.get_entries()] == [new]


BAD_FILES = {
    "empty": b"",
    "only_newline": b"\n",
    "torn_header": HEADER[:-10],
    "header_without_newline": HEADER[:-1],
    "version_4": HEADER.replace(b'"version":3', b'"version":4'),
    "no_version": HEADER.replace(b'"version":3,', b""),
    "entry_first": entry(0, None) + entry(1, 0),
    "garbage_header": b"\x89PNG\r\n\x1a\n" + entry(0, None),
    "nul_file": b"\x00" * 4096,
    "invalid_utf8_header": HEADER.replace(b'"cwd":"/"', b'"cwd":"\xff"'),
    "array_header": b"[1,2,3]\n" + entry(0, None),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_unreadable_header_is_corrupt_and_never_rewritten(tmp_path: Path, name: str) -> None:
    data = BAD_FILES[name]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(data)
    for readonly in (True, False):
        with pytest.raises(st.SessionError) as info:
            st.JsonlSessionStorage.open(path, readonly=readonly)
        assert info.value.code == "corrupt", info.value
        assert isinstance(info.value, ValueError)
    with pytest.raises(st.SessionError) as info:
        st.InMemorySessionStorage.from_jsonl(data)
    assert info.value.code == "corrupt"
    assert path.read_bytes() == data
    assert list(tmp_path.iterdir()) == [path]  # no side file either


# -- the fuzzer's findings -------------------------------------------------------------------


REPLAY_CODE = """
    import json, sys
    from pathlib import Path
    import sessiontree as st

    def depth(raw):
        d = top = 0
        in_str = esc = False
        for b in raw:
            if in_str:
                if esc:
                    esc = False
                elif b == 0x5C:
                    esc = True
                elif b == 0x22:
                    in_str = False
            elif b == 0x22:
                in_str = True
            elif b in (0x5B, 0x7B):
                d += 1
                top = max(top, d)
            elif b in (0x5D, 0x7D):
                d = max(d - 1, 0)
        return top

    out = []
    for p in sorted(Path({dir!r}).iterdir()):
        raw = p.read_bytes()
        if p.name.startswith("load-") and raw:
            # The first byte picks the limits, as limits_for() in fuzz/src/lib.rs does.
            sel, data = raw[0], raw[1:]
            limits = st.Limits(
                max_line_bytes=96 if sel & 2 else None,
                max_depth=3 if sel & 4 else None,
                max_id_bytes=8 if sel & 8 else None,
            )
        elif p.name.startswith("line-"):
            data, limits = {header!r} + raw + b"\\n", st.Limits()
        else:
            continue
        max_line = limits.max_line_bytes or 256 << 20
        max_depth = limits.max_depth or 128
        for strict in (False, True):
            try:
                s = st.InMemorySessionStorage.from_jsonl(data, strict=strict, limits=limits)
                # Every line the loader kept is within the limits...
                for line in s._engine.lines(list(range(len(s)))):
                    assert len(line) <= max_line, (p.name, "line over the limit")
                    assert depth(line) <= max_depth, (p.name, "nested over the limit")
                # ...so turning the session into Python objects works.
                st.Session(s).get_tree()
                [e.id for e in s.get_entries()]
                out.append([p.name, strict, "ok"])
            except st.SessionError as e:
                out.append([p.name, strict, e.code])
    print(json.dumps(out))
"""


def test_fuzz_regressions_replay() -> None:
    if not REGRESSIONS.is_dir() or not any(REGRESSIONS.glob("*-*")):
        pytest.skip("no fuzz regressions recorded")
    out = run_isolated(REPLAY_CODE.format(dir=str(REGRESSIONS), header=HEADER))
    assert out, "no regression input was replayed"
    for name, strict, result in out:
        assert result in ("ok", "corrupt", "limit_exceeded"), (name, strict, result)
