"""Tests for the raw engine binding ``sessiontree._core.Engine``.

The public storages are thin wrappers over these calls; these tests pin the binding's own
contract (indices, raw lines, error codes) so a change in Rust shows up here first.
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
from typing import Any

import pytest

import sessiontree as st
from sessiontree import _core

T = "2026-09-10T11:12:13.141Z"
HEADER = (
    b'{"type":"session","version":3,"id":"core-1","timestamp":"' + T.encode() + b'","cwd":"/c",'
    b'"parent_session":null,"metadata":null}'
)


def line(entry_id: str, parent: str | None, type: str = "custom", **fields: Any) -> bytes:
    obj: dict[str, Any] = {"type": type, "id": entry_id, "parent_id": parent, "timestamp": T}
    if type == "custom":
        obj["custom_type"] = "c"
    obj.update(fields)
    return json.dumps(obj, separators=(",", ":")).encode()


def code_of(exc: pytest.ExceptionInfo[BaseException]) -> str:
    assert isinstance(exc.value, st.SessionError)
    return exc.value.code


USAGE = {
    "input": 1,
    "output": 2,
    "cache_read": 3,
    "cache_write": 4,
    "total_tokens": 10,
    "cost": {"input": 0.0, "output": 0.0, "cache_read": 0.0, "cache_write": 0.0, "total": 0.5},
}


def populated(engine: Any) -> None:
    """a -> b(assistant) -> t(thinking) -> m(model) -> k(tools) -> c(compaction) ; l(label)."""
    engine.append(
        line("a", None, "message", message={"role": "user", "content": "u", "timestamp": 0})
    )
    engine.append(
        line(
            "b",
            "a",
            "message",
            message={
                "role": "assistant",
                "content": [],
                "provider": "p",
                "model": "m",
                "usage": USAGE,
                "stop_reason": "stop",
                "timestamp": 0,
            },
        )
    )
    engine.append(line("t", "b", "thinking_level_change", thinking_level="high"))
    engine.append(line("m", "t", "model_change", provider="p2", model_id="m2"))
    engine.append(line("k", "m", "active_tools_change", active_tool_names=["x"]))
    engine.append(
        line(
            "c",
            "k",
            "compaction",
            summary="S",
            first_kept_entry_id="t",
            tokens_before=1,
            retained_tail=None,
            usage=USAGE,
        )
    )
    engine.append(line("l", "c", "label", target_id="a", label="first"))
    engine.append(line("n", "l", "session_info", name="named"))


def test_memory_engine_basics() -> None:
    engine = _core.Engine.memory(HEADER)
    assert engine.header() == HEADER
    assert engine.session_id == "core-1"
    assert engine.path is None
    assert engine.torn_path is None
    assert (engine.closed, engine.readonly) == (False, False)
    assert len(engine) == 0
    assert engine.leaf() is None
    assert engine.byte_len == len(HEADER) + 1
    assert engine.to_bytes() == HEADER + b"\n"
    assert engine.report() == ([], 0, [])
    assert engine.newest_timestamp() is None
    assert engine.stats() == (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0)
    assert isinstance(_core.__version__, str) and _core.__version__


def test_append_lookup_info_and_lines() -> None:
    engine = _core.Engine.memory(HEADER)
    populated(engine)
    assert len(engine) == 8
    assert engine.lookup("a") == 0 and engine.lookup("n") == 7
    assert engine.lookup("zzz") is None
    assert [engine.id_of(i) for i in range(8)] == ["a", "b", "t", "m", "k", "c", "l", "n"]
    assert engine.info(0) == ("message", "user", None, None, 2)
    assert engine.info(1) == ("message", "assistant", 0, None, 3)
    assert engine.info(6)[:4] == ("label", None, 5, 0)
    assert engine.leaf() == 7
    assert engine.get_line("b") == line(
        "b",
        "a",
        "message",
        message={
            "role": "assistant",
            "content": [],
            "provider": "p",
            "model": "m",
            "usage": USAGE,
            "stop_reason": "stop",
            "timestamp": 0,
        },
    )
    assert engine.get_line("zzz") is None
    assert engine.lines([2, 0]) == [engine.get_line("t"), engine.get_line("a")]
    assert engine.lines([]) == []
    assert engine.to_bytes() == HEADER + b"\n" + b"".join(
        engine.get_line(engine.id_of(i)) + b"\n" for i in range(8)
    )
    assert engine.byte_len == len(engine.to_bytes())
    assert engine.newest_timestamp() == T


def test_paths_state_children_and_queries() -> None:
    engine = _core.Engine.memory(HEADER)
    populated(engine)
    assert engine.path_indices("c", False) == [0, 1, 2, 3, 4, 5]
    # The compaction keeps from t on.
    assert engine.path_indices("c", True) == [2, 3, 4, 5]
    assert engine.path_to_root_or_compaction("c") == engine.lines([2, 3, 4, 5])
    assert engine.path_to_root("b") == engine.lines([0, 1])
    assert engine.path_to_root(None) == [] and engine.path_indices(None, True) == []
    assert engine.state_lines("n") == [
        engine.get_line("t"),
        engine.get_line("m"),
        engine.get_line("k"),
    ]
    assert engine.state_lines("b") == [None, engine.get_line("b"), None]
    assert engine.state_lines(None) == [None, None, None]
    assert engine.children(None) == [0]
    assert engine.children("c") == [6]
    assert engine.parents() == [-1, 0, 1, 2, 3, 4, 5, 6]
    assert engine.find("message") == [0, 1]
    assert engine.find("nothing") == []
    assert engine.select() == list(range(8))
    assert engine.select("message", None, None, True) == [1, 0]
    assert engine.select(None, "k", 2) == [5, 6]
    assert engine.select(limit=0) == []
    assert engine.label("a") == "first" and engine.label("b") is None
    assert engine.label("unknown") is None
    assert engine.labels() == {"a": "first"}
    assert engine.name() == "named"
    assert engine.stats() == (8, 2, 1, 1, 0, 2, 4, 6, 8, 20, 1.0)
    for call in (
        lambda: engine.path_to_root("zz"),
        lambda: engine.path_to_root_or_compaction("zz"),
        lambda: engine.path_indices("zz", False),
        lambda: engine.state_lines("zz"),
        lambda: engine.children("zz"),
        lambda: engine.select(since="zz"),
    ):
        with pytest.raises(st.SessionError) as exc:
            call()
        assert code_of(exc) == "not_found"


def test_leaf_lines() -> None:
    engine = _core.Engine.memory(HEADER)
    engine.append(line("a", None))
    engine.append(line("b", "a"))
    engine.append(line("l1", "b", "leaf", target_id="a"))
    assert engine.leaf() == 0
    engine.append(line("l2", "a", "leaf", target_id=None))
    assert engine.leaf() is None
    engine.append(line("r", None))
    assert engine.children(None) == [0, 4]


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (line("a", None), "duplicate_id"),
        (line("x", "ghost"), "not_found"),
        (line("x", "a", "leaf", target_id="ghost"), "not_found"),
        (line("x", "a", "label", target_id="ghost", label="l"), "not_found"),
        (b"not json", "invalid_argument"),
        (b"[1]", "invalid_argument"),
        (line("x", "a") + b"\n", "invalid_argument"),
        (line("x", "a") + b"\n" + line("y", "x"), "invalid_argument"),
        (b'{"type":"custom","id":"\xff","parent_id":null,"timestamp":"t"}', "invalid_argument"),
        (b'{"type":"session","version":3,"id":"x","timestamp":"t"}', "invalid_argument"),
        (line("", None), "invalid_argument"),
        (line("i" * 300, None), "limit_exceeded"),
        (line("x", None, data=[[[[[[[[[[[1]]]]]]]]]]]), "limit_exceeded"),
        (line("x", None, data="y" * 2000), "limit_exceeded"),
    ],
)
def test_append_refusals_change_nothing(raw: bytes, code: str) -> None:
    engine = _core.Engine.memory(HEADER, max_line_bytes=1000, max_depth=8)
    engine.append(line("a", None))
    before = engine.to_bytes()
    with pytest.raises(st.SessionError) as exc:
        engine.append(raw)
    assert code_of(exc) == code
    assert engine.to_bytes() == before
    assert len(engine) == 1 and engine.leaf() == 0


def test_from_bytes_and_limits() -> None:
    data = HEADER + b"\n" + line("a", None) + b"\n" + b"junk\n" + line("b", "a") + b"\n"
    engine = _core.Engine.from_bytes(data)
    assert len(engine) == 2
    issues, torn, counts = engine.report()
    assert torn == 0
    assert counts == [("malformed", 1)]
    assert [(i[0], i[1], i[2]) for i in issues] == [
        (3, len(HEADER) + 1 + len(line("a", None)) + 1, "malformed")
    ]
    with pytest.raises(st.SessionError) as exc:
        _core.Engine.from_bytes(data, True)
    assert code_of(exc) == "corrupt"
    for bad in (b"", b"garbage\n", HEADER):
        with pytest.raises(st.SessionError) as exc:
            _core.Engine.from_bytes(bad)
        assert code_of(exc) == "corrupt"
    with pytest.raises(st.SessionError) as exc:
        _core.Engine.memory(b"{}")
    assert code_of(exc) == "corrupt"


def test_file_engine(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "e.jsonl"
    engine = _core.Engine.create(os.fspath(path), HEADER, "flush")
    assert os.fspath(engine.path) == str(path)
    assert engine.to_bytes() is None
    engine.append(line("a", None))
    assert path.read_bytes() == HEADER + b"\n" + line("a", None) + b"\n"
    assert engine.byte_len == path.stat().st_size
    with pytest.raises(st.SessionError) as exc:
        _core.Engine.create(path, HEADER)
    assert code_of(exc) == "exists"
    with pytest.raises(st.SessionError) as exc:
        _core.Engine.open(path)
    assert code_of(exc) == "locked"
    reader = _core.Engine.open(path, readonly=True)
    assert reader.readonly and len(reader) == 1
    with pytest.raises(st.SessionError) as exc:
        reader.append(line("b", "a"))
    assert code_of(exc) == "readonly"
    engine.append(line("b", "a"))
    assert reader.refresh() == 1
    engine.close()
    engine.close()
    assert engine.closed
    with pytest.raises(st.SessionError) as exc:
        engine.append(line("c", "b"))
    assert code_of(exc) == "closed"
    for call in (
        lambda: engine.get_line("a"),
        lambda: engine.lines([0]),
        engine.flush,
        engine.refresh,
        lambda: engine.path_to_root("a"),
    ):
        with pytest.raises(st.SessionError) as exc:
            call()
        assert code_of(exc) == "closed"
    reader.close()
    with pytest.raises(st.SessionError) as exc:
        _core.Engine.create(path.with_name("x.jsonl"), HEADER, "sometimes")
    assert code_of(exc) == "invalid_argument"
    assert not path.with_name("x.jsonl").exists()


def test_create_refuses_multiline_header(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "e.jsonl"
    with pytest.raises(st.SessionError):
        _core.Engine.create(path, HEADER + b"\n" + line("a", None))
    assert not path.exists() or path.read_bytes() == b""


def test_none_durability_buffers_until_flush(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "e.jsonl"
    engine = _core.Engine.create(path, HEADER, "none")
    engine.append(line("a", None))
    assert path.read_bytes() == HEADER + b"\n"
    assert engine.get_line("a") == line("a", None)
    engine.flush()
    assert path.read_bytes().endswith(line("a", None) + b"\n")
    engine.append(line("b", "a"))
    engine.close()
    assert path.read_bytes().endswith(line("b", "a") + b"\n")


@pytest.mark.fault_hooks
def test_write_fault_trims_and_stays_usable(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "e.jsonl"
    engine = _core.Engine.create(path, HEADER, "flush")
    engine.append(line("a", None))
    good = path.read_bytes()
    engine.inject_fault("write", errno.ENOSPC)
    with pytest.raises(st.SessionError) as exc:
        engine.append(line("b", "a"))
    assert code_of(exc) == "io"
    assert isinstance(exc.value, OSError)
    assert isinstance(exc.value.__cause__, OSError)
    assert exc.value.__cause__.errno == errno.ENOSPC
    assert path.read_bytes() == good
    assert len(engine) == 1 and engine.lookup("b") is None
    engine.append(line("b", "a"))
    engine.close()
    with st.JsonlSessionStorage.open(path, strict=True) as storage:
        assert [e.id for e in storage.get_entries()] == ["a", "b"]


@pytest.mark.fault_hooks
def test_sync_fault_poisons_the_handle(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "e.jsonl"
    engine = _core.Engine.create(path, HEADER, "fsync")
    engine.append(line("a", None))
    engine.inject_fault("sync")
    with pytest.raises(st.SessionError) as exc:
        engine.append(line("b", "a"))
    assert code_of(exc) == "io"
    assert exc.value.__cause__.errno == errno.EIO
    with pytest.raises(st.SessionError) as exc:
        engine.append(line("c", "a"))
    assert code_of(exc) == "io"
    engine.close()
    # Whatever reached the file is whole lines.
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        assert storage.load_report.torn_tail_bytes == 0


@pytest.mark.fault_hooks
def test_inject_fault_arguments(tmp_path: pathlib.Path) -> None:
    engine = _core.Engine.create(tmp_path / "e.jsonl", HEADER, "flush")
    with pytest.raises(ValueError):
        engine.inject_fault("bogus")
    engine.inject_fault("write")
    engine.inject_fault(None)
    engine.append(line("a", None))
    engine.close()
    memory = _core.Engine.memory(HEADER)
    memory.inject_fault("write")
    memory.append(line("a", None))


def test_create_entry_id_avoids_used_ids() -> None:
    engine = _core.Engine.memory(HEADER)
    for _ in range(100):
        new = engine.create_entry_id()
        assert len(new) == 8 and int(new, 16) >= 0 and engine.lookup(new) is None
        engine.append(line(new, None))


def test_index_errors_are_exceptions() -> None:
    engine = _core.Engine.memory(HEADER)
    engine.append(line("a", None))
    for call in (lambda: engine.id_of(5), lambda: engine.info(5)):
        with pytest.raises(RuntimeError):
            call()
    with pytest.raises(OverflowError):
        engine.id_of(-1)


def test_lines_out_of_range_is_an_exception() -> None:
    engine = _core.Engine.memory(HEADER)
    engine.append(line("a", None))
    # An IndexError (not a Rust panic, which PyO3 raises as a BaseException), and the
    # engine stays usable after it.
    with pytest.raises(IndexError, match=r"entry index 5 out of range \(0\.\.1\)"):
        engine.lines([5])
    with pytest.raises(IndexError, match="entry index 5 out of range"):
        engine.entries([0, 5])
    assert engine.lines([0]) == [line("a", None)]


def test_errors_are_the_classes_sessiontree_registered() -> None:
    # The binding raises whatever `sessiontree.errors` handed it at import; it never
    # imports the package itself (so the dependency runs one way).
    from sessiontree import errors

    class Probe(errors.NotFoundError):
        pass

    engine = _core.Engine.memory(HEADER)
    _core._register_error_classes(errors.SessionError, {**errors._BY_CODE, "not_found": Probe})
    try:
        with pytest.raises(Probe) as exc:
            engine.append(line("b", "missing"))
    finally:
        _core._register_error_classes(errors.SessionError, dict(errors._BY_CODE))
    assert code_of(exc) == "not_found"
    with pytest.raises(errors.NotFoundError) as again:
        engine.append(line("b", "missing"))
    assert type(again.value) is errors.NotFoundError
    with pytest.raises(TypeError):
        _core._register_error_classes(errors.SessionError, {"io": ValueError})
