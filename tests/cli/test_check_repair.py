"""``check`` and ``repair`` on broken files — torn, malformed middle lines, duplicate ids,
a bad header, another dialect's lines — with the bytes of the original compared before
and after every run."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

import sessiontree as st

from .clihelp import PI_FIXTURES, Runner, header, parse_json, snapshot_of, user_line

Writer = Callable[..., Path]

TORN = b'{"type":"message","id":"t1","parent_id":"e2","timestamp":"2026-01-01T00:00:0'


def _clean(write_lines: Writer) -> Path:
    return write_lines([header(), user_line("e1", None), user_line("e2", "e1")])


def _torn(write_lines: Writer) -> Path:
    return write_lines(
        [header(), user_line("e1", None), user_line("e2", "e1"), TORN], newline=False
    )


def _malformed(write_lines: Writer) -> Path:
    return write_lines(
        [
            header(),
            user_line("e1", None),
            b"{not json at all",
            user_line("e2", "e1"),
            b'{"type":"message","id":"e3","parent_id":"e2"}',  # no timestamp, no message
            user_line("e2", "e1", "a duplicate id"),
            user_line("e4", "e2"),
        ]
    )


# A sessiontree file with lines in pi's camelCase dialect appended (what a pi writer
# leaves in a file it does not know): refused (issue 11), never guessed at.
def _mixed_dialect(write_lines: Writer) -> Path:
    pi_line = json.dumps(
        {
            "type": "message",
            "id": "p1",
            "parentId": "e2",
            "timestamp": "2026-01-01T00:00:02.000Z",
            "message": {"role": "user", "content": "from pi", "timestamp": 1767225602000},
        }
    ).encode()
    return write_lines([header(), user_line("e1", None), user_line("e2", "e1"), pi_line])


def test_check_clean(cli: Runner, write_lines: Writer, schema) -> None:  # type: ignore[no-untyped-def]
    path = _clean(write_lines)
    proc = cli("check", path)
    assert proc.returncode == 0, proc.stderr
    assert f"{path}: ok (2 entries)" in proc.stdout
    doc = parse_json(cli("check", path, "--json"))
    schema("check", doc)
    assert doc["exit_code"] == 0 and doc["files"][0]["status"] == "ok"
    assert doc["files"][0]["dialect"] == "sessiontree"


@pytest.mark.parametrize(
    ("make", "kinds"),
    [
        (_torn, {"torn_tail"}),
        (_malformed, {"malformed", "duplicate_id"}),
    ],
    ids=["torn", "malformed"],
)
def test_check_reports_problems_and_changes_nothing(
    cli: Runner,
    write_lines: Writer,
    schema,
    make: Callable[[Writer], Path],
    kinds: set[str],  # type: ignore[no-untyped-def]
) -> None:
    path = make(write_lines)
    before = snapshot_of(path.parent)
    proc = cli("check", path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = parse_json(cli("check", path, "--json"))
    schema("check", doc)
    row = doc["files"][0]
    assert doc["exit_code"] == 1 and row["status"] == "problems"
    assert {i["kind"] for i in row["issues"]} == kinds
    for issue in row["issues"]:
        assert issue["line"] >= 2 and issue["offset"] > 0
        assert f"line {issue['line']} (byte {issue['offset']:,})" in proc.stdout
    strict = cli("check", path, "--strict", "--json")
    assert strict.returncode == 2
    assert json.loads(strict.stdout)["files"][0]["error"]["code"] == "corrupt"
    # Not a byte changed, and nothing written beside the file (no index, no torn file).
    assert snapshot_of(path.parent) == before


def test_check_offsets_point_at_the_lines(cli: Runner, write_lines: Writer) -> None:
    path = _malformed(write_lines)
    data = path.read_bytes()
    doc = parse_json(cli("check", path, "--json"))
    for issue in doc["files"][0]["issues"]:
        start = issue["offset"]
        assert start == 0 or data[start - 1 : start] == b"\n"
        assert data[:start].count(b"\n") == issue["line"] - 1


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"garbage\n",
        b'{"type":"session","version":4,"id":"x","timestamp":"t","cwd":"/"}\n',
        b'{"type":"message","id":"e1"}\n',
    ],
    ids=["empty", "garbage", "future-version", "no-header"],
)
def test_check_refuses_bad_headers(cli: Runner, tmp_path: Path, schema, content: bytes) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    proc = cli("check", path)
    assert proc.returncode == 2
    assert "refused: corrupt" in proc.stdout
    doc = parse_json(cli("check", path, "--json"))
    schema("check", doc)
    assert doc["files"][0]["status"] == "refused"
    assert doc["files"][0]["error"]["code"] == "corrupt"
    assert path.read_bytes() == content
    assert sorted(os.listdir(tmp_path)) == ["bad.jsonl"]


def test_check_unreadable_and_missing(cli: Runner, tmp_path: Path) -> None:
    missing = cli("check", tmp_path / "none.jsonl")
    assert missing.returncode == 2
    if os.geteuid() != 0:  # root reads anything
        path = tmp_path / "locked.jsonl"
        path.write_bytes(header() + b"\n")
        path.chmod(0)
        doc = parse_json(cli("check", path, "--json"))
        assert doc["files"][0]["error"]["code"] == "io"


def test_check_directory_takes_the_worst(cli: Runner, tmp_path: Path, write_lines: Writer) -> None:
    _clean(write_lines)
    write_lines([header("s2"), user_line("e1", None), b"{broken"], name="s2.jsonl")
    proc = cli("check", tmp_path)
    assert proc.returncode == 1
    assert "2 files: 1 ok, 1 with problems, 0 refused" in proc.stdout
    (tmp_path / "s3.jsonl").write_bytes(b"nonsense\n")
    assert cli("check", tmp_path).returncode == 2
    assert cli("check", env={"SESSIONTREE_REPO": str(tmp_path)}).returncode == 2


def test_repair_cuts_a_torn_tail_into_its_side_file(
    cli: Runner, write_lines: Writer, schema
) -> None:  # type: ignore[no-untyped-def]
    path = _torn(write_lines)
    original = path.read_bytes()
    dry = parse_json(cli("repair", path, "--dry-run", "--json"))
    schema("repair", dry)
    assert dry["actions"] == ["cut_torn_tail"] and path.read_bytes() == original
    doc = parse_json(cli("repair", path, "--json"))
    schema("repair", doc)
    assert doc["exit_code"] == 0 and doc["after"]["status"] == "ok"
    side = Path(doc["torn_path"])
    assert side.exists() and side.name.startswith("s.jsonl.torn-")
    # Nothing lost: the file plus its side file are the original bytes.
    assert path.read_bytes() + side.read_bytes() == original
    assert path.read_bytes() == original[: len(original) - len(TORN)]
    again = cli("repair", path)
    assert again.returncode == 0 and "nothing to do" in again.stdout


def test_repair_without_clean_leaves_malformed_lines(cli: Runner, write_lines: Writer) -> None:
    path = _malformed(write_lines)
    original = path.read_bytes()
    proc = cli("repair", path)
    assert proc.returncode == 1
    assert "--clean" in proc.stdout
    assert path.read_bytes() == original


def test_repair_clean_writes_a_copy(cli: Runner, write_lines: Writer, schema) -> None:  # type: ignore[no-untyped-def]
    path = _malformed(write_lines)
    original = path.read_bytes()
    doc = parse_json(cli("repair", path, "--clean", "--json"))
    schema("repair", doc)
    out = Path(doc["output"])
    assert out.name == "s.repaired.jsonl" and doc["exit_code"] == 0
    assert path.read_bytes() == original  # the original kept as it was
    with (
        st.Session(st.JsonlSessionStorage.open(out, readonly=True, strict=True)) as clean,
        st.Session(st.JsonlSessionStorage.open(path, readonly=True)) as old,
    ):
        assert clean.storage.load_report.ok
        assert [e.id for e in clean.storage.get_entries()] == ["e1", "e2", "e4"]
        assert clean.get_tree() == old.get_tree()
        assert clean.get_leaf_id() == old.get_leaf_id()
        assert clean.storage.get_metadata() == old.storage.get_metadata()
    explicit = write_lines([b""], name="unused")
    target = explicit.parent / "fixed.jsonl"
    assert cli("repair", path, "--clean", "-o", target).returncode == 0
    assert target.read_bytes() == out.read_bytes()
    refused = cli("repair", path, "--clean", "-o", target)
    assert refused.returncode == 2 and "exists" in refused.stderr


def test_repair_clean_in_place_keeps_a_backup(cli: Runner, write_lines: Writer, schema) -> None:  # type: ignore[no-untyped-def]
    path = _malformed(write_lines)
    with path.open("ab") as f:
        f.write(TORN)
    original = path.read_bytes()
    inode = path.stat().st_ino
    doc = parse_json(cli("repair", path, "--clean", "--in-place", "--json"))
    schema("repair", doc)
    backup = Path(doc["backup"])
    side = Path(doc["torn_path"])
    # The backup is the original file (the same inode), less only the torn tail, which is
    # in its side file.
    assert backup.stat().st_ino == inode
    assert backup.read_bytes() + side.read_bytes() == original
    assert path.stat().st_ino != inode
    with st.JsonlSessionStorage.open(path, readonly=True, strict=True) as s:
        assert [e.id for e in s.get_entries()] == ["e1", "e2", "e4"]
    assert cli("check", path).returncode == 0


def test_repair_refuses_a_bad_header_and_a_held_lock(
    cli: Runner, tmp_path: Path, write_lines: Writer
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"garbage\nmore\n")
    proc = cli("repair", bad, "--clean", "--in-place")
    assert proc.returncode == 2 and "nothing was changed" in proc.stdout
    assert bad.read_bytes() == b"garbage\nmore\n" and sorted(os.listdir(tmp_path)) == ["bad.jsonl"]
    path = _malformed(write_lines)
    original = path.read_bytes()
    # An agent still has the session open: repair gets `locked` and changes nothing.
    holder = st.JsonlSessionStorage.open(path, durability="flush")
    try:
        locked = cli("repair", path, "--clean", "--in-place")
        assert locked.returncode == 2 and "locked" in locked.stderr
        assert path.read_bytes() == original
        assert sorted(p.name for p in path.parent.iterdir()) == ["bad.jsonl", "s.jsonl"]
    finally:
        holder.close()


def test_repair_usage(cli: Runner, write_lines: Writer) -> None:
    path = _clean(write_lines)
    assert cli("repair", path, "--in-place").returncode == 2
    assert cli("repair", path, "--clean", "--in-place", "-o", "x").returncode == 2


def test_check_refuses_a_file_that_mixes_dialects(cli: Runner, write_lines: Writer) -> None:
    path = _mixed_dialect(write_lines)
    before = path.read_bytes()
    proc = cli("check", path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "mixes dialects" in proc.stdout and "line 4" in proc.stdout
    doc = parse_json(cli("check", path, "--json"))
    assert doc["files"][0]["status"] == "refused"
    assert doc["files"][0]["error"]["code"] == "corrupt"
    assert path.read_bytes() == before


def test_check_reads_pi_files_as_pi(cli: Runner) -> None:
    """A pi session is another dialect, not a broken file: clean, and said so."""
    doc = parse_json(cli("check", PI_FIXTURES / "a-linear.jsonl", "--json"))
    row = doc["files"][0]
    assert row["status"] == "ok" and row["dialect"] == "pi"
    assert row["entry_count"] == 12


def test_check_pi_torn_tail_and_repair(cli: Runner, tmp_path: Path) -> None:
    path = tmp_path / "torn.jsonl"
    path.write_bytes((PI_FIXTURES / "i-torn-tail.jsonl").read_bytes())
    doc = parse_json(cli("check", path, "--json"))
    assert doc["files"][0]["dialect"] == "pi"
    assert {i["kind"] for i in doc["files"][0]["issues"]} == {"torn_tail"}
    original = path.read_bytes()
    repaired = parse_json(cli("repair", path, "--json"))
    assert path.read_bytes() + Path(repaired["torn_path"]).read_bytes() == original


def test_check_mixed_pi_file(cli: Runner, tmp_path: Path) -> None:
    """A pi file with a snake_case line appended (what sessiontree's writer did to pi
    files before issue 11) is refused, with the wrong-dialect line named."""
    path = tmp_path / "mixed.jsonl"
    data = (PI_FIXTURES / "a-linear.jsonl").read_bytes() + user_line("zz", None) + b"\n"
    path.write_bytes(data)
    proc = cli("check", path)
    assert proc.returncode == 2 and "line 14" in proc.stdout and "mixes dialects" in proc.stdout
    doc = parse_json(cli("check", path, "--json"))
    assert doc["files"][0]["status"] == "refused"
    assert path.read_bytes() == data
