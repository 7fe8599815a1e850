"""The search index of a file repository: the scan's answers, kept current from appends,
deleted and replaced files, and never trusted when damaged or killed mid-update."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sessiontree as st
from sessiontree.search.index import INDEX_DIR
from sessiontree.testing import plant_search_corpus, search_answers


@pytest.fixture(params=["jsonl", "pi"])
def repo(request: pytest.FixtureRequest, tmp_path: Path) -> st.JsonlSessionRepo:
    cls = st.JsonlSessionRepo if request.param == "jsonl" else st.PiSessionRepo
    repo = cls(tmp_path / "r")
    plant_search_corpus(repo.create)
    return repo


def _ids(repo: st.SessionRepo, query: str) -> set[tuple[str, str]]:
    return {(h.session_id, h.entry_id) for h in repo.search(query, limit=10_000)}


def test_the_index_answers_as_the_scan(repo: st.JsonlSessionRepo) -> None:
    scanned = search_answers(repo)
    assert repo.search_index_status() == "none"
    repo.build_search_index()
    assert repo.search_index_status() == "ready"
    assert (Path(repo.root_dir) / INDEX_DIR).is_dir()
    assert search_answers(repo) == scanned
    assert [m.id for m in repo.list()] == [m.id for m in repo.list()]  # the folder is not a session


def test_appends_deletes_and_replacements_are_seen(repo: st.JsonlSessionRepo) -> None:
    repo.build_search_index()
    with repo.open("search-b") as b:
        first = b.append_message(st.UserMessage("lateword one"))
        assert _ids(repo, "lateword") == {("search-b", first)}
        second = b.append_message(st.UserMessage("lateword two"))
    assert _ids(repo, "lateword") == {("search-b", first), ("search-b", second)}
    repo.delete("search-c")
    assert _ids(repo, "deletedtoken") == set()
    # A file replaced by another (a repair, a copy over it): read again whole.
    path = Path(repo.path_for("search-a"))
    data = path.read_bytes()
    lines = data.split(b"\n")
    path.write_bytes(b"\n".join(lines[:2]) + b"\n")
    assert {sid for sid, _ in _ids(repo, "qwertyuiop")} == {"search-b"}
    path.write_bytes(data)
    assert len(_ids(repo, "qwertyuiop")) == 3


def test_a_damaged_index_is_dropped_and_the_scan_answers(repo: st.JsonlSessionRepo) -> None:
    scanned = search_answers(repo)
    repo.build_search_index()
    index = Path(repo.root_dir) / INDEX_DIR / "index.sqlite3"
    index.write_bytes(b"this is not sqlite" * 100)
    assert search_answers(repo) == scanned
    repo.build_search_index()
    assert search_answers(repo) == scanned


_BUILD = """
import sys, sessiontree as st
st.JsonlSessionRepo(sys.argv[1]).build_search_index()
print("built", flush=True)
"""


def test_a_killed_build_leaves_a_usable_index(tmp_path: Path) -> None:
    root = tmp_path / "big"
    repo = st.JsonlSessionRepo(root)
    for i in range(40):
        with repo.create(cwd="/w", session_id=f"s{i}") as s:
            for j in range(300):
                s.append_message(st.UserMessage(f"turn {j} of session {i} says killword{i % 7}"))
    want = _ids(repo, "killword3")
    for delay in (0.05, 0.2, 0.5):
        proc = subprocess.Popen(
            [sys.executable, "-c", _BUILD, str(root)], stdout=subprocess.DEVNULL
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert _ids(repo, "killword3") == want
    repo.build_search_index()
    assert _ids(repo, "killword3") == want
    assert os.path.exists(root / INDEX_DIR)
