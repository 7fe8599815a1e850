"""pi users' files in every command (issue 25 §4): pi's sessions folder as a repository,
commands that write a session keeping pi's dialect, counts that agree between commands,
messages whose counts agree with their nouns, and session data that cannot drive the
terminal (issue 28)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st

from .clihelp import PI_FIXTURES, Demo, Runner, parse_json

EXPECTED = json.loads((PI_FIXTURES / "expected.json").read_text())["files"]
PROJECT = "--home-user-project--"
OTHER = "--home-user-other-project--"


@pytest.fixture
def pi_root(tmp_path: Path) -> Path:
    """pi's sessions folder (``~/.pi/agent/sessions``) holding pi's own files under the
    names pi gave them, each in the folder of its cwd."""
    root = tmp_path / "sessions"
    for name, facts in EXPECTED.items():
        original = facts.get("originalName")
        if not original:
            continue
        folder = root / pi_folder(facts["header"]["cwd"])
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PI_FIXTURES / name, folder / original)
    return root


def pi_folder(cwd: str) -> str:
    return "--" + cwd.strip("/").replace("/", "-") + "--"


def pi_path(root: Path, fixture: str) -> Path:
    facts = EXPECTED[fixture]
    return root / pi_folder(facts["header"]["cwd"]) / facts["originalName"]


def header_ids(root: Path) -> dict[str, str]:
    """Every session file under ``root``: its header's id -> its path."""
    out = {}
    for path in root.rglob("*.jsonl"):
        with path.open("rb") as f:
            out[json.loads(f.readline())["id"]] = str(path)
    return out


def lines(path: Path | str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def assert_pi_dialect(path: Path | str) -> None:
    """Every line of ``path`` is in pi's camelCase dialect, the header pi's v3."""
    rows = lines(path)
    assert rows[0]["type"] == "session" and rows[0]["version"] == 3
    assert "parent_session" not in rows[0] and "metadata" not in rows[0], rows[0]
    for row in rows[1:]:
        assert "parentId" in row and "parent_id" not in row, row
    with st.JsonlSessionStorage.open(path, readonly=True) as s:
        assert s.dialect == "pi"


# --------------------------------------------------------------------------- ls


def test_ls_lists_every_session_of_pis_sessions_folder(
    cli: Runner, pi_root: Path, schema: Any
) -> None:
    files = header_ids(pi_root)
    for args in (("ls", pi_root), ("ls", "-r", pi_root), ("--repo", pi_root, "ls")):
        doc = parse_json(cli(*args, "--json"))
        schema("ls", doc)
        rows = doc["sessions"]
        assert [r["error"] for r in rows] == [None] * len(files), args
        assert {r["id"]: r["path"] for r in rows} == files, args
        text = cli(*args)
        assert text.returncode == 0 and "error" not in text.stdout, text.stdout
    by_id = {r["id"]: r for r in rows}
    d = by_id[EXPECTED["d-branching.jsonl"]["header"]["id"]]
    assert d["name"] == "Refactor auth module (v2)" and d["cwd"] == "/home/user/project"
    f2 = by_id[EXPECTED["f2-forkfrom.jsonl"]["header"]["id"]]
    assert f2["cwd"] == "/home/user/other-project"


def test_ls_of_one_cwd_folder_and_its_filter(cli: Runner, pi_root: Path) -> None:
    doc = parse_json(cli("ls", pi_root / PROJECT, "--json"))
    rows = doc["sessions"]
    assert rows and all(r["error"] is None for r in rows)
    assert {r["cwd"] for r in rows} == {"/home/user/project"}
    assert len(rows) == len(list((pi_root / PROJECT).glob("*.jsonl")))
    only = parse_json(cli("ls", pi_root, "--cwd", "/home/user/other-project", "--json"))
    assert [r["id"] for r in only["sessions"]] == [EXPECTED["f2-forkfrom.jsonl"]["header"]["id"]]


def test_ls_of_a_pi_folder_ignores_rows_an_older_listing_cached_as_errors(
    cli: Runner, pi_root: Path
) -> None:
    """An older sessiontree listed pi's folders by file name and cached every row as an
    error; those cached rows must not come back."""
    folder = pi_root / PROJECT
    rows = st.JsonlSessionRepo(folder).list()
    assert rows and all(r.error for r in rows)  # the old listing, cached in the folder
    doc = parse_json(cli("ls", folder, "--json"))
    assert [r["error"] for r in doc["sessions"]] == [None] * len(rows)


def test_commands_take_pi_session_ids_in_pis_folders(cli: Runner, pi_root: Path) -> None:
    d = EXPECTED["d-branching.jsonl"]
    for repo in (pi_root, pi_root / PROJECT):
        proc = cli("--repo", repo, "tree", d["header"]["id"][:13])
        assert proc.returncode == 0, proc.stderr
        assert "Refactor auth module (v2)" in proc.stdout.splitlines()[0]
        shown = parse_json(cli("--repo", repo, "show", d["header"]["id"], "--json"))
        assert len(shown["messages"]) == d["current"]["contextMessageCount"]
    # The newest session, with no SESSION given.
    newest = parse_json(cli("ls", pi_root, "--json"))["sessions"][0]
    proc = cli("--repo", pi_root, "stats", "--json")
    assert proc.returncode == 0, proc.stderr
    assert parse_json(proc)["session"]["id"] == newest["id"]
    # pi's v1 file names another id than its header's: the id `ls` shows works.
    v1 = EXPECTED["g-v1.jsonl"]["header"]["id"]
    assert v1 not in EXPECTED["g-v1.jsonl"]["originalName"]
    proc = cli("--repo", pi_root, "tree", v1)
    assert proc.returncode == 0, proc.stderr
    assert v1 in proc.stdout.splitlines()[0]


# --------------------------------------------------------------------------- pi's dialect kept


def test_repair_clean_keeps_a_pi_file_in_pis_dialect(cli: Runner, tmp_path: Path) -> None:
    # pi's file with a glued torn line and duplicated entries (see the fixtures' README).
    path = tmp_path / "reflush.jsonl"
    shutil.copyfile(PI_FIXTURES / "i-torn-reflush.jsonl", path)
    with st.JsonlSessionStorage.open(path, readonly=True) as s:
        want = [(e.id, e.type) for e in s.get_path_to_root(s.get_leaf_id())]
    doc = parse_json(cli("repair", path, "--clean", "--json"))
    assert doc["after"]["status"] == "ok" and doc["after"]["dialect"] == "pi"
    assert_pi_dialect(doc["output"])
    with st.JsonlSessionStorage.open(doc["output"], readonly=True) as s:
        assert [(e.id, e.type) for e in s.get_path_to_root(s.get_leaf_id())] == want

    doc = parse_json(cli("repair", path, "--clean", "--in-place", "--json"))
    assert doc["output"] == str(path) and doc["backup"]
    assert_pi_dialect(path)
    # pi can resume it: a writer continues it in pi's dialect.
    with st.Session(st.JsonlSessionStorage.open(path)) as session:
        session.append_message(st.UserMessage("again"))
    assert_pi_dialect(path)


@pytest.mark.parametrize("fixture", ["g-v1.jsonl", "g-v1-branched.jsonl"])
def test_repair_clean_keeps_a_pi_v1_file_pis_but_as_v3(
    cli: Runner, tmp_path: Path, fixture: str
) -> None:
    path = tmp_path / "v1.jsonl"
    shutil.copyfile(PI_FIXTURES / fixture, path)
    out = tmp_path / "v3.jsonl"
    doc = parse_json(cli("repair", path, "--clean", "-o", out, "--json"))
    assert doc["after"]["entry_count"] == EXPECTED[fixture]["entryCount"]
    assert_pi_dialect(doc["output"])
    # Header fields pi keeps (v1's branchedFrom) are kept too.
    extra = {k: v for k, v in lines(path)[0].items() if k == "branchedFrom"}
    assert extra.items() <= lines(out)[0].items()


def test_export_jsonl_of_a_pi_file_is_what_fork_at_writes(cli: Runner, pi_root: Path) -> None:
    path = pi_path(pi_root, "d-branching.jsonl")
    leaf = EXPECTED["d-branching.jsonl"]["leafId"]
    out = pi_root / "export.jsonl"
    export = parse_json(cli("export", path, "--jsonl", "-o", out, "--json"))
    assert_pi_dialect(out)
    assert lines(out)[0]["parentSession"] == str(path)  # pi names its parent by path
    fork = parse_json(cli("fork", path, "--at", leaf, "--json"))["session"]
    check = parse_json(cli("check", out, fork["path"], "--json"))["files"]
    # The same branch: one count everywhere, the entries of the file written.
    assert export["entries"] == fork["entry_count"] == check[0]["entry_count"]
    assert check[1]["entry_count"] == fork["entry_count"]
    assert export["leaf_id"] == fork["leaf_id"] == leaf
    # ... the same entries of the source (the appended label/name/leaf entries are new).
    source_ids = {r.get("id") for r in lines(path)}
    copied = [r["id"] for r in lines(out)[1:] if r["id"] in source_ids]
    assert copied == [r["id"] for r in lines(fork["path"])[1:] if r["id"] in source_ids]
    text = cli("export", path, "--jsonl", "-o", pi_root / "again.jsonl")
    assert f"{export['entries']:,} entries)" in text.stderr


def test_export_jsonl_count_is_the_files_for_sessiontree_too(cli: Runner, demo: Demo) -> None:
    out = demo.dir / "branch.jsonl"
    export = parse_json(cli("export", demo.path, "--jsonl", "-o", out, "--json"))
    check = parse_json(cli("check", out, "--json"))["files"][0]
    fork = parse_json(cli("fork", demo.path, "--at", demo.leaf, "--json"))["session"]
    assert export["entries"] == check["entry_count"] == fork["entry_count"]
    assert check["dialect"] == "sessiontree"
    assert "parent_id" in lines(out)[1]


def test_fork_of_a_pi_session_is_a_pi_session_beside_it(cli: Runner, pi_root: Path) -> None:
    path = pi_path(pi_root, "d-branching.jsonl")
    proc = cli("--repo", pi_root, "fork", EXPECTED["d-branching.jsonl"]["header"]["id"], "--json")
    assert proc.returncode == 0, proc.stderr
    new = parse_json(proc)["session"]
    new_path = Path(new["path"])
    assert new_path.parent == path.parent
    assert new_path.name.endswith(f"_{new['id']}.jsonl")  # pi's name for it
    assert_pi_dialect(new_path)
    assert lines(new_path)[0]["parentSession"] == str(path)
    assert new["entry_count"] == EXPECTED["d-branching.jsonl"]["entryCount"]
    listed = parse_json(cli("ls", pi_root, "--json"))["sessions"]
    assert {r["id"]: r["error"] for r in listed}[new["id"]] is None


def test_import_keeps_a_pi_file_pis(cli: Runner, tmp_path: Path, pi_root: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    doc = parse_json(cli("--repo", repo, "import", PI_FIXTURES / "a-linear.jsonl", "--json"))
    [row] = doc["imported"]
    assert row["dialect"] == "pi"
    assert_pi_dialect(row["session"]["path"])
    # Into pi's sessions folder: where pi keeps it, under pi's name.
    source = tmp_path / "elsewhere.jsonl"
    data = (PI_FIXTURES / "a-linear.jsonl").read_text().replace("/home/user/project", "/srv/x")
    source.write_text(data)
    [row] = parse_json(cli("--repo", pi_root, "import", source, "--json"))["imported"]
    dest = Path(row["session"]["path"])
    assert dest.parent == pi_root / "--srv-x--"
    assert dest.name.endswith(f"_{row['session']['id']}.jsonl")
    assert_pi_dialect(dest)
    listed = parse_json(cli("ls", pi_root, "--json"))["sessions"]
    assert row["session"]["id"] in {r["id"] for r in listed}


# --------------------------------------------------------------------------- messages


def test_counts_agree_with_their_nouns(cli: Runner, tmp_path: Path) -> None:
    from .clihelp import header, user_line

    source = tmp_path / "one.jsonl"
    source.write_bytes(b"\n".join([header("one"), user_line("u1", None), b"{not json", b""]))
    repo = tmp_path / "repo"
    repo.mkdir()
    proc = cli("--repo", repo, "import", source)
    assert proc.returncode == 0, proc.stderr
    assert "(1 entry, 1 problem line left out)" in proc.stdout, proc.stdout
    check = cli("check", source)
    assert "1 problem (1 entry read)" in check.stdout, check.stdout
    fixed = cli("repair", source, "--clean")
    assert "is clean (1 entry)" in fixed.stdout, fixed.stdout


# --------------------------------------------------------------------------- terminal safety

HOSTILE_NAME = "\x1b]0;TITLE\x07named"
HOSTILE_CWD = "/w/\x1b[2J"
HOSTILE_TEXT = "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ \x9b31m"


def test_ls_shows_session_data_with_controls_escaped(cli: Runner, tmp_path: Path) -> None:
    repo = st.JsonlSessionRepo(tmp_path / "r")
    with repo.create(cwd=HOSTILE_CWD, name=HOSTILE_NAME):
        pass
    with repo.create(cwd=HOSTILE_CWD) as s:
        s.append_message(st.UserMessage(HOSTILE_TEXT))
    for color in ("never", "always"):
        proc = cli("--color", color, "ls", tmp_path / "r", env={"COLUMNS": "200"})
        assert proc.returncode == 0, proc.stderr
        out = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)  # the command's own colours
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out, repr(out)
        assert "\\x1b]0;TITLE\\x07named" in out
        assert "/w/\\x1b[2J" in out
        assert "\\x1b]8;;https://evil.example" in out
