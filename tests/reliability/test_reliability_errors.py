"""Errors a careless caller or another program can cause are ``SessionError`` with the
right code, raised where the problem is found.

- A file truncated under an open reader, then grown back with other bytes: reading an
  entry past the cut raises ``modified_externally`` (it used to raise ``io`` without a
  cause, then a bare ``ValueError: invalid JSON``); entries before the cut still read.
  A file storage hands entries out unread (docs/performance.md): the line is read, and
  the error raised, when a field beyond ``id``, ``parent_id`` and ``timestamp`` is first
  read, so the calls below read every field of what they get.
- A header is checked in full when the file is opened (``timestamp`` an ISO-8601 time,
  ``cwd`` a string, ``parent_session`` a string or null, ``metadata`` an object or null,
  nesting within the depth limit): a bad one refuses the file with ``corrupt``, strict or
  not. ``"metadata": [1]`` used to open, then fail in ``get_metadata()`` and ``fork()``;
  ``"timestamp": "not a time"`` was accepted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st


def make(path: Path, n: int = 20) -> list[str]:
    with st.JsonlSessionStorage.create(path, durability="flush") as w:
        session = st.Session(w)
        ids = []
        for i in range(n):
            ids.append(session.append_message(st.UserMessage(f"message {i}")))
            if i % 5 == 4:
                ids.append(session.append_custom_entry("note", {"i": i}))
        return ids


def offset_of(path: Path, entry_id: str) -> int:
    data = path.read_bytes()
    at = data.index(f'"id":"{entry_id}"'.encode())
    return data.rindex(b"\n", 0, at) + 1


def read(result: Any) -> Any:
    """``result`` with every field of every entry or message in it read (``repr`` reads
    them all)."""
    if isinstance(result, st.SessionContext):
        result = list(result.messages)
    repr(result)
    return result


def expect_modified(call: Any) -> st.SessionError:
    with pytest.raises(st.SessionError) as info:
        read(call())
    assert info.value.code == "modified_externally", info.value
    return info.value


def test_a_file_truncated_and_regrown_under_a_reader(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ids = make(path)
    ro = st.JsonlSessionStorage.open(path, readonly=True)
    session = st.Session(ro)
    cut = ids[len(ids) // 2]
    cut_at = offset_of(path, cut)
    os.truncate(path, cut_at)
    after = ids[len(ids) // 2 :]
    for eid in (after[0], after[-1]):
        err = expect_modified(lambda eid=eid: ro.get_entry(eid))
        assert "changed by another program" in err.message
    expect_modified(ro.get_entries)
    expect_modified(session.build_context)
    assert ro.get_entry(ids[0]) is not None  # before the cut: still there
    # Grown back past the old end with other bytes: junk, then lines of another session.
    with open(path, "ab") as f:
        f.write(b"x" * 4000 + b"\n")
    for eid in after:
        expect_modified(lambda eid=eid: ro.get_entry(eid))
    other = tmp_path / "other.jsonl"
    make(other, n=40)
    body = other.read_bytes().split(b"\n", 1)[1]
    os.truncate(path, cut_at)
    with open(path, "ab") as f:
        f.write(body)  # valid entry lines, at the offsets the reader indexed
    assert path.stat().st_size > cut_at + 2 * len(body) // 3
    for eid in after:
        expect_modified(lambda eid=eid: ro.get_entry(eid))
    expect_modified(session.get_branch)
    assert [e.id for e in ro.get_entries(limit=3)] == ids[:3]
    ro.close()


HEADER: dict[str, Any] = {
    "type": "session",
    "version": 3,
    "id": "s1",
    "timestamp": "2026-01-01T00:00:00.000Z",
    "cwd": "/w",
    "parent_session": None,
    "metadata": None,
}

BAD_HEADERS = {
    "metadata-list": {"metadata": [1]},
    "metadata-str": {"metadata": "x"},
    "timestamp-not-a-time": {"timestamp": "not a time"},
    "timestamp-no-such-day": {"timestamp": "2026-02-30T00:00:00Z"},
    "timestamp-number": {"timestamp": 1767225600000},
    "cwd-number": {"cwd": 5},
    "cwd-missing": {"cwd": ...},
    "parent-number": {"parent_session": 7},
    "id-empty": {"id": ""},
    "metadata-too-deep": {"metadata": json.loads('{"a":' * 200 + "1" + "}" * 200)},
}


def header_line(changes: dict[str, Any]) -> bytes:
    h = dict(HEADER)
    for k, v in changes.items():
        if v is ...:
            del h[k]
        else:
            h[k] = v
    return json.dumps(h, separators=(",", ":")).encode()


ENTRY = (
    b'{"type":"custom","id":"e1","parent_id":null,"timestamp":"2026-01-01T00:00:00.000Z",'
    b'"custom_type":"x","data":null}'
)


@pytest.mark.parametrize("case", list(BAD_HEADERS))
def test_a_bad_header_refuses_the_file_at_open(tmp_path: Path, case: str) -> None:
    data = header_line(BAD_HEADERS[case]) + b"\n" + ENTRY + b"\n"
    path = tmp_path / "s1.jsonl"
    path.write_bytes(data)
    for readonly in (True, False):
        for strict in (False, True):
            with pytest.raises(st.SessionError) as info:
                st.JsonlSessionStorage.open(path, readonly=readonly, strict=strict)
            assert info.value.code == "corrupt", (readonly, strict, info.value)
    with pytest.raises(st.SessionError) as info:
        st.InMemorySessionStorage.from_jsonl(data)
    assert info.value.code == "corrupt"
    repo = st.JsonlSessionRepo(tmp_path)
    (row,) = repo.list()
    assert row.error is not None and "header" in row.error
    with pytest.raises(st.SessionError) as info:
        repo.fork("s1")
    assert info.value.code == "corrupt"
    assert path.read_bytes() == data  # refused, never rewritten
    assert os.listdir(tmp_path) == ["s1.jsonl"]  # no fork, no index, no torn file


@pytest.mark.parametrize(
    "changes",
    [
        {"timestamp": "2026-01-01T01:00:00+01:00"},
        {"timestamp": "2026-01-01 00:00:00"},
        {"timestamp": "2026-01-01T00:00:00.123456789Z"},
        {"metadata": {"tags": ["a"], "n": {"deep": [1, 2]}}},
        {"parent_session": "p0", "extra": {"kept": True}},
        {"version": 1},
    ],
)
def test_good_headers_open_and_read_back(tmp_path: Path, changes: dict[str, Any]) -> None:
    path = tmp_path / "s1.jsonl"
    path.write_bytes(header_line(changes) + b"\n" + ENTRY + b"\n")
    with st.JsonlSessionStorage.open(path, readonly=True, strict=True) as ro:
        header = ro.get_metadata()
        assert header.id == "s1"
    repo = st.JsonlSessionRepo(tmp_path)
    with repo.fork("s1") as fork:
        assert fork.storage.get_metadata().parent_session == "s1"


def test_a_header_with_a_time_that_is_not_a_time_is_refused_when_made() -> None:
    with pytest.raises(st.SessionError) as info:
        st.SessionHeader("s1", "not a time", "/w")
    assert info.value.code == "invalid_argument"
    with pytest.raises(st.SessionError) as info:
        st.model.entries.header_from_dict({**HEADER, "timestamp": "yesterday"})
    assert info.value.code == "corrupt"
