"""``PiSessionRepo`` over pi's folders: pi's listing, and open, fork and delete on them."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st
from sessiontree.repo.pi import pi_cwd_folder, pi_file_name

from .test_pi_fixtures import EXPECTED, FILES, FIXTURES
from .test_pi_writing import pi_read

LISTED: list[dict[str, Any]] = EXPECTED["list"]["sessions"]


def _iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.fixture
def flat(tmp_path: Path) -> st.PiSessionRepo:
    """A directory holding exactly the fixtures, as pi's listing of them was made."""
    root = tmp_path / "sessions"
    root.mkdir()
    for name in FILES:
        shutil.copyfile(FIXTURES / name, root / name)
    return st.PiSessionRepo(root)


def test_the_listing_is_pis(flat: st.PiSessionRepo) -> None:
    rows = flat.list()
    by_file = {Path(m.path or "").name: m for m in rows}
    assert len(rows) == len(LISTED)
    for want in LISTED:
        got = by_file[want["file"]]
        assert got.error is None and got.dialect == "pi"
        assert got.id == want["id"]
        assert got.cwd == want["cwd"]
        assert got.name == want["name"]
        assert got.parent_session == want["parentSessionPath"]
        assert got.created == _iso(want["created"])
        assert got.modified == _iso(want["modified"]), want["file"]
        assert got.first_message == want["firstMessage"]
        assert got.message_count == want["messageCount"], want["file"]
    # pi's order: newest `modified` first (files of equal times in either order).
    assert [m.modified for m in rows] == sorted((m.modified for m in rows), reverse=True)
    # From the cache, the same.
    assert st.PiSessionRepo(flat.root_dir).list() == rows


def test_pi_layout_create_open_fork_delete(tmp_path: Path) -> None:
    repo = st.PiSessionRepo(tmp_path / "sessions")
    with repo.create(cwd="/home/user/project", name="made here") as s:
        first = s.append_message(st.UserMessage("hello from sessiontree"))
        sid = s.storage.get_metadata().id
        path = Path(s.storage.path)
    assert path.parent.name == pi_cwd_folder("/home/user/project") == "--home-user-project--"
    assert path.name.endswith(f"_{sid}.jsonl") and path.name[:4].isdigit()
    header = json.loads(path.read_bytes().split(b"\n")[0])
    assert header["version"] == 3 and "parent_session" not in header
    assert pi_read(path)["name"] == "made here"
    with repo.open(sid) as again:
        assert again.storage.dialect == "pi"
        again.append_message(st.UserMessage("second"))
    (row,) = repo.list(cwd="/home/user/project")
    assert row.id == sid and row.message_count == 2 and row.dialect == "pi"
    fork = repo.fork(sid, entry_id=first, position="at")
    fork_id = fork.storage.get_metadata().id
    fork_path = Path(fork.storage.path)
    fork.close()
    assert fork_path.parent == path.parent
    assert pi_read(fork_path)["header"]["parentSession"] == str(path)
    assert {m.id for m in repo.list()} == {sid, fork_id}
    repo.delete(fork_id)
    assert not fork_path.exists() and [m.id for m in repo.list()] == [sid]
    with pytest.raises(st.SessionError) as e:
        repo.open(fork_id)
    assert e.value.code == "not_found"


def test_a_fixture_opens_by_its_pi_id(tmp_path: Path) -> None:
    name = "d-branching.jsonl"
    created = _iso(FILES[name]["header"]["timestamp"])
    sid = FILES[name]["header"]["id"]
    folder = tmp_path / "sessions" / pi_cwd_folder("/home/user/project")
    folder.mkdir(parents=True)
    shutil.copyfile(FIXTURES / name, folder / pi_file_name(sid, created))
    assert pi_file_name(sid, created) == FILES[name]["originalName"]
    repo = st.PiSessionRepo(tmp_path / "sessions")
    assert sid in repo
    with repo.open(sid) as s:
        assert s.get_leaf_id() == FILES[name]["leafId"]
        s.append_message(st.UserMessage("continued"))
    assert pi_read(folder / pi_file_name(sid, created))["roles"][-1] == "user"


def test_a_fork_of_an_old_pi_file_is_a_v3_file(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    root.mkdir()
    for name in ("g-v1.jsonl", "g-v2.jsonl"):
        shutil.copyfile(FIXTURES / name, root / name)
    repo = st.PiSessionRepo(root)
    for name in ("g-v1.jsonl", "g-v2.jsonl"):
        sid = FILES[name]["header"]["id"]
        with st.JsonlSessionStorage.open(root / name, readonly=True) as old:
            entries = old.get_entries()
        with repo.fork(sid) as fork:
            path = Path(fork.storage.path)
            assert fork.storage.format_version == 3
            assert fork.storage.get_entries() == entries
            fork.append_message(st.UserMessage("after the fork"))
        pi = pi_read(path)
        assert pi["header"]["version"] == 3
        assert [e["id"] for e in pi["entries"]][: len(entries)] == [e.id for e in entries]
        assert "hookMessage" not in path.read_text()
