"""Torn tails and corrupt lines: what a reader and a writer do with a damaged file.

The sweep builds a real session (every entry type, through ``Session``) and cuts it at
every byte offset of its last lines. For each cut:

- a read-only open returns exactly the entries whose lines are complete, reports the
  torn tail, and changes no byte of the file (nor creates any);
- a writer open saves the cut bytes in ``<file>.torn-<stamp>`` (mode 0600), trims the
  file to its last complete line and appends a valid next entry;
- a strict reopen sees every complete entry plus the new one, which is the leaf;
- all of this holds too when a persisted index of the whole, uncut file lies beside the
  cut one (the index claims more than the file holds and must be ignored).

Lines that are malformed, NUL-filled, garbage or not UTF-8 in the middle of a file are
skipped and reported (line, byte offset, kind), nothing after them is lost, a writer
never rewrites them, and ``strict=True`` raises ``corrupt``.

Sizes: ``SESSIONTREE_SWEEP_LINES`` (default 20) is how many trailing lines the sweep
cuts through; every byte offset in them is one case.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import sessiontree as st
from reliability_writer import build_full_session

SWEEP_LINES = int(os.environ.get("SESSIONTREE_SWEEP_LINES", "20"))


def side_files(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".torn-*"))


@pytest.fixture(scope="module")
def full_session(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, list[str]]:
    """The bytes of a real session file and its entry ids in file order."""
    path = tmp_path_factory.mktemp("src") / "full.jsonl"
    rounds = max(3, SWEEP_LINES // 14 + 2)
    ids = build_full_session(path, rounds=rounds)
    data = path.read_bytes()
    assert data.count(b"\n") == len(ids) + 1 > SWEEP_LINES
    return data, ids


@pytest.fixture
def fast_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory on tmpfs when there is one: a writer open that cuts a tail syncs twice,
    which on a real disk would make thousands of cases take minutes. The cut logic does
    not depend on the file system; durability is the crash test's business."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    d = Path(tempfile.mkdtemp(prefix="sessiontree-sweep-", dir=shm))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def full_index(
    tmp_path_factory: pytest.TempPathFactory, full_session: tuple[bytes, list[str]]
) -> bytes:
    """A valid persisted index of the whole session (``<file>.idx``)."""
    path = tmp_path_factory.mktemp("idx") / "full.jsonl"
    path.write_bytes(full_session[0])
    st.JsonlSessionStorage.open(path, readonly=True, index=0).close()
    return Path(f"{path}.idx").read_bytes()


@pytest.mark.parametrize("index", ["no-index", "stale-index"])
def test_truncation_sweep(
    fast_dir: Path, full_session: tuple[bytes, list[str]], full_index: bytes, index: str
) -> None:
    """With ``stale-index`` every cut file sits beside the index of the whole file, which
    claims more than the file holds: it must be ignored, never trusted."""
    data, ids = full_session
    use_index: bool | int = 0 if index == "stale-index" else False
    line_ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    # line_ends[0] ends the header; line_ends[k] ends entry k-1.
    first_cut = line_ends[-SWEEP_LINES - 1]
    path = fast_dir / "cut.jsonl"
    cases = torn_cases = 0
    for cut in range(first_cut, len(data) + 1):
        prefix = data[:cut]
        good = prefix.rfind(b"\n") + 1
        complete = prefix.count(b"\n") - 1
        expected = ids[:complete]
        torn = cut - good
        path.write_bytes(prefix)
        if use_index is not False:
            Path(f"{path}.idx").write_bytes(full_index)

        ro = st.JsonlSessionStorage.open(path, readonly=True, index=use_index)
        assert [e.id for e in ro.get_entries()] == expected, cut
        report = ro.load_report
        assert report.torn_tail_bytes == torn
        assert [i.kind for i in report.issues] == (["torn_tail"] if torn else [])
        leaf_before = ro.get_leaf_id()
        ro.close()
        assert path.read_bytes() == prefix, f"read-only open changed the file at cut {cut}"
        assert side_files(path) == []

        writer = st.JsonlSessionStorage.open(path, durability="flush", index=use_index)
        if torn:
            torn_cases += 1
            saved = Path(writer.torn_path or "")
            assert side_files(path) == [saved]
            assert saved.read_bytes() == prefix[good:]
            assert stat.S_IMODE(saved.stat().st_mode) == 0o600
            assert path.read_bytes() == prefix[:good]
        else:
            assert writer.torn_path is None
        new_id = st.Session(writer).append_message(st.UserMessage(f"after cut {cut}"))
        writer.close()

        again = st.JsonlSessionStorage.open(path, readonly=True, strict=True, index=use_index)
        entries = again.get_entries()
        assert [e.id for e in entries] == [*expected, new_id]
        assert entries[-1].parent_id == leaf_before
        assert again.get_leaf_id() == new_id
        again.close()
        for f in side_files(path):
            f.unlink()
        cases += 1
    print(f"\ntruncation sweep [{index}]: {cases} cuts ({torn_cases} torn), entries lost: 0")
    assert cases == len(data) - first_cut + 1


HEADER = (
    b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z",'
    b'"cwd":"/","parent_session":null,"metadata":null}\n'
)


def entry(i: int, parent: int | None) -> bytes:
    p = "null" if parent is None else f'"e{parent}"'
    return (
        f'{{"type":"custom","id":"e{i}","parent_id":{p},'
        f'"timestamp":"2026-01-01T00:00:00.000Z","custom_type":"x","data":{{"i":{i}}}}}\n'
    ).encode()


BAD_LINES = {
    "malformed": b'{"type":"custom","id":"x1","parent_id":null,\n',
    "nul_filled": b"\x00" * 300 + b"\n",
    "garbage": b"\x13\x37 garbage ]]}{ not json\n",
    "invalid_utf8": b'{"type":"custom","id":"\xff\xfe","parent_id":null,"timestamp":"t"}\n',
    "raw_nul_in_string": b'{"type":"custom","id":"a\x00b","parent_id":null,"timestamp":"t"}\n',
    "truncated_then_continued": b'{"type":"message","id":"zz","parent_id":"e1","timest'
    + entry(99, None),
    "not_an_object": b'["type","custom"]\n',
    "missing_id": b'{"type":"custom","parent_id":null,"timestamp":"t","custom_type":"x"}\n',
}

KIND = {
    "invalid_utf8": "invalid_utf8",
}


@pytest.mark.parametrize("name", sorted(BAD_LINES))
def test_bad_middle_line_is_skipped_and_reported(tmp_path: Path, name: str) -> None:
    bad = BAD_LINES[name]
    good_before = entry(0, None) + entry(1, 0)
    good_after = entry(2, 1) + entry(3, 2)
    data = HEADER + good_before + bad + good_after
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)

    ro = st.JsonlSessionStorage.open(path, readonly=True)
    ids = [e.id for e in ro.get_entries()]
    assert ids[:2] == ["e0", "e1"] and ids[-2:] == ["e2", "e3"], ids
    issue = ro.load_report.issues[0]
    assert issue.line == 4
    assert issue.offset == len(HEADER + good_before)
    assert issue.kind == KIND.get(name, "malformed")
    assert issue.message
    assert ro.get_leaf_id() == "e3"
    ro.close()

    # A writer neither rewrites nor drops the bad line; its append lands after it.
    with st.JsonlSessionStorage.open(path, durability="flush") as writer:
        new_id = st.Session(writer).append_message(st.UserMessage("after damage"))
    after = path.read_bytes()
    assert after.startswith(data)
    assert json.loads(after[len(data) :])["id"] == new_id

    with pytest.raises(st.SessionError) as info:
        st.JsonlSessionStorage.open(path, readonly=True, strict=True)
    assert info.value.code == "corrupt"
    assert "line 4" in info.value.message
    with pytest.raises(st.SessionError) as info:
        st.InMemorySessionStorage.from_jsonl(data, strict=True)
    assert info.value.code == "corrupt"


def test_many_bad_lines_lose_nothing_in_between(tmp_path: Path) -> None:
    bad = list(BAD_LINES.values())
    parts = [HEADER]
    for i in range(200):
        parts.append(entry(i, i - 1 if i else None))
        parts.append(bad[i % len(bad)])
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(parts))
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert [e.id for e in ro.get_entries()] == [f"e{i}" for i in range(200)]
        assert len(ro.load_report.issues) == 200
        assert ro.get_leaf_id() == "e199"


def test_blank_and_crlf_lines_are_not_problems(tmp_path: Path) -> None:
    data = HEADER + entry(0, None) + b"\n   \n" + entry(1, 0).replace(b"\n", b"\r\n")
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    with st.JsonlSessionStorage.open(path, readonly=True, strict=True) as ro:
        assert [e.id for e in ro.get_entries()] == ["e0", "e1"]
        assert ro.load_report.issues == ()


def test_nul_filled_tail_is_a_torn_tail(tmp_path: Path) -> None:
    """A crash can leave the file extended with zeros (size updated, data not written)."""
    data = HEADER + entry(0, None) + entry(1, 0)
    path = tmp_path / "s.jsonl"
    path.write_bytes(data + b"\x00" * 4096)
    with st.JsonlSessionStorage.open(path, readonly=True) as ro:
        assert len(ro) == 2
        assert ro.load_report.torn_tail_bytes == 4096
    with st.JsonlSessionStorage.open(path, durability="flush") as writer:
        assert Path(writer.torn_path or "").read_bytes() == b"\x00" * 4096
        st.Session(writer).append_message(st.UserMessage("next"))
    with st.JsonlSessionStorage.open(path, readonly=True, strict=True) as ro:
        assert len(ro) == 3


def test_torn_tail_of_a_memory_document_is_reported() -> None:
    data = HEADER + entry(0, None) + entry(1, 0)[:-5]
    storage = st.InMemorySessionStorage.from_jsonl(data)
    assert [e.id for e in storage.get_entries()] == ["e0"]
    assert storage.load_report.torn_tail_bytes == len(entry(1, 0)) - 5
    with pytest.raises(st.SessionError) as info:
        st.InMemorySessionStorage.from_jsonl(data, strict=True)
    assert info.value.code == "corrupt"
