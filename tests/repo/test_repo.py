"""Tests for sessiontree.repo: JsonlSessionRepo, InMemorySessionRepo, get_entries_to_fork.

Shared behaviour runs on every repo (the ``repo`` fixture: memory, JSONL, PostgreSQL); file
layout, permissions, the listing cache, locking across processes and atomic forks are
JSONL-only (PostgreSQL's own are in tests/postgres/).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

import sessiontree as st
import sessiontree.repo.files as repo_files
import sessiontree.repo.jsonl as repo_jsonl
from sessiontree.errors import SessionError
from sessiontree.model.entries import MessageEntry, SessionTreeEntry
from sessiontree.model.types import SessionMetadata
from sessiontree.repo import (
    InMemorySessionRepo,
    JsonlSessionRepo,
    SessionRepo,
    get_entries_to_fork,
    is_valid_session_id,
)
from sessiontree.storage import JsonlSessionStorage
from sessiontree.storage.engine import _EngineStorage

UUID7_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
T0 = "2026-01-01T00:00:00.000Z"
CACHE = ".sessiontree-list-cache.json"
BAD_IDS = ["../x", "a/b", "", "x" * 200, ".hidden", "..", "/abs", "a b", "a\n", "é"]


def user(text: Any = "hello") -> st.UserMessage:
    return st.UserMessage(text, timestamp=1_767_225_600_000)


def assistant(text: str = "hi!") -> st.AssistantMessage:
    return st.AssistantMessage(
        [st.TextContent(text)], "openai", "gpt-4", timestamp=1_767_225_600_000
    )


def at(session: st.Session, ts: str, message: Any) -> str:
    """Appends ``message`` with the entry timestamp ``ts``; returns its id."""
    entry = MessageEntry(
        id=session.storage.create_entry_id(),
        parent_id=session.get_leaf_id(),
        timestamp=ts,
        message=message,
    )
    session.storage.append_entry(entry)
    return entry.id


def utc(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(timezone.utc)


def dump(session: st.Session) -> list[SessionTreeEntry]:
    return session.storage.get_entries()


def assert_self_contained(entries: list[SessionTreeEntry]) -> None:
    """No parent_id, label target or leaf target points outside ``entries``."""
    seen: set[str] = set()
    for e in entries:
        assert e.parent_id is None or e.parent_id in seen, f"{e.id} dangles to {e.parent_id}"
        if isinstance(e, (st.LabelEntry,)):
            assert e.target_id in seen
        if isinstance(e, st.LeafEntry) and e.target_id is not None:
            assert e.target_id in seen
        seen.add(e.id)


@pytest.fixture(params=["memory", "jsonl", "postgres"])
def repo(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[SessionRepo]:
    if request.param == "memory":
        yield InMemorySessionRepo()
    elif request.param == "postgres":
        server = request.getfixturevalue("pg_server")
        schema = request.getfixturevalue("pg_schema")
        with st.PostgresSessionRepo(server.dsn, schema=schema, durability="flush") as pg:
            yield pg
    else:
        yield JsonlSessionRepo(tmp_path / "sessions", durability="flush")


@pytest.fixture
def jrepo(tmp_path: pathlib.Path) -> JsonlSessionRepo:
    return JsonlSessionRepo(tmp_path / "sessions", durability="flush")


def tree_snapshot(root: pathlib.Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# --------------------------------------------------------------------------- create / open


def test_create_defaults(repo: SessionRepo) -> None:
    with repo.create() as s:
        header = s.storage.get_metadata()
        assert UUID7_RE.fullmatch(s.id)
        assert header.cwd == os.getcwd()
        assert header.parent_session is None and header.metadata is None
        assert len(s.storage) == 0
        assert s.get_session_name() is None
        sid = s.id
    (meta,) = repo.list()
    assert meta.id == sid
    assert meta.entry_count == 0 and meta.name is None and meta.first_message is None
    assert meta.modified == meta.created


def test_create_with_everything(repo: SessionRepo, tmp_path: pathlib.Path) -> None:
    with repo.create(
        cwd=tmp_path,
        name="my task",
        parent_session="older",
        metadata={"k": [1, 2]},
        session_id="chosen.id_1-A",
    ) as s:
        assert s.id == "chosen.id_1-A"
        header = s.storage.get_metadata()
        assert header.cwd == str(tmp_path)
        assert header.parent_session == "older"
        assert header.metadata == {"k": [1, 2]}
        infos = s.storage.find_entries("session_info")
        assert [e.name for e in infos] == ["my task"]  # type: ignore[attr-defined]
        assert s.get_session_name() == "my task"
    (meta,) = repo.list()
    assert (meta.id, meta.name, meta.parent_session, meta.cwd) == (
        "chosen.id_1-A",
        "my task",
        "older",
        str(tmp_path),
    )


def test_create_ids_are_uuid7_and_distinct(repo: SessionRepo) -> None:
    made = []
    for _ in range(5):
        with repo.create(cwd="/w") as s:
            made.append(s.id)
    assert len(set(made)) == 5 and all(UUID7_RE.fullmatch(i) for i in made)
    assert made == sorted(made)  # UUIDv7 ids sort by creation


def test_create_existing_id_is_refused(repo: SessionRepo) -> None:
    with repo.create(session_id="dup", name="first") as s:
        s.append_message(user("keep me"))
    with pytest.raises(SessionError) as exc:
        repo.create(session_id="dup", name="second")
    assert exc.value.code == "exists"
    (meta,) = repo.list()
    assert meta.name == "first" and meta.message_count == 1


@pytest.mark.parametrize("bad", BAD_IDS)
def test_unsafe_ids_are_refused_and_nothing_is_created(
    repo: SessionRepo, tmp_path: pathlib.Path, bad: str
) -> None:
    before = tree_snapshot(tmp_path)
    siblings = set(os.listdir(tmp_path.parent))
    with pytest.raises(SessionError) as exc:
        repo.create(session_id=bad, name="x")
    assert exc.value.code == "invalid_id"
    for call in (repo.open, repo.delete, repo.fork):
        with pytest.raises(SessionError) as exc:
            call(bad)
        assert exc.value.code == "invalid_id"
    assert tree_snapshot(tmp_path) == before
    assert set(os.listdir(tmp_path.parent)) == siblings
    assert not os.path.exists("/abs.jsonl")
    assert repo.list() == []
    assert not is_valid_session_id(bad)


def test_id_pattern_edges() -> None:
    assert is_valid_session_id("a")
    assert is_valid_session_id("A" * 128)
    assert not is_valid_session_id("A" * 129)
    assert is_valid_session_id("0.-_x")
    assert not is_valid_session_id("-x") and not is_valid_session_id("_x")
    assert not is_valid_session_id(5)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": 5},
        {"cwd": 5},
        {"cwd": b"/bytes"},
        {"metadata": [1]},
        {"metadata": {"x": float("nan")}},
        {"parent_session": 3},
        {"session_id": 7},
    ],
)
def test_create_bad_arguments(
    repo: SessionRepo, tmp_path: pathlib.Path, kwargs: dict[str, Any]
) -> None:
    before = tree_snapshot(tmp_path)
    with pytest.raises(SessionError) as exc:
        repo.create(**kwargs)
    assert exc.value.code == "invalid_argument"
    assert tree_snapshot(tmp_path) == before
    assert repo.list() == []


def test_open_by_id_and_by_metadata(repo: SessionRepo) -> None:
    with repo.create(cwd="/w") as s:
        sid = s.id
        first = s.append_message(user("q"))
    with repo.open(sid) as again:
        assert again.id == sid
        assert [e.id for e in dump(again)] == [first]
        again.append_message(assistant())
    (meta,) = repo.list()
    with repo.open(meta) as third:
        assert len(third.storage) == 2


def test_open_unknown_is_not_found(repo: SessionRepo) -> None:
    with pytest.raises(SessionError) as exc:
        repo.open("nope")
    assert exc.value.code == "not_found"
    assert isinstance(exc.value, KeyError)
    with pytest.raises(SessionError) as exc:
        repo.open(SessionMetadata(id="nope", path=None, cwd="/", created=None, modified=None))
    assert exc.value.code == "not_found"
    with pytest.raises(SessionError) as exc:
        repo.open(42)  # type: ignore[arg-type]
    assert exc.value.code == "invalid_argument"


def test_open_twice_is_locked_until_closed(repo: SessionRepo) -> None:
    s = repo.create(cwd="/w")
    sid = s.id
    with pytest.raises(SessionError) as exc:
        repo.open(sid)
    assert exc.value.code == "locked"
    s.close()
    with repo.open(sid):
        with pytest.raises(SessionError) as exc:
            repo.open(sid)
        assert exc.value.code == "locked"
    repo.open(sid).close()


def test_closed_session_raises_closed_and_data_stays(repo: SessionRepo) -> None:
    s = repo.create(cwd="/w")
    sid = s.id
    s.append_message(user("x"))
    s.close()
    with pytest.raises(SessionError) as exc:
        s.append_message(user("y"))
    assert exc.value.code == "closed"
    with repo.open(sid) as s2:
        assert len(s2.storage) == 1


# --------------------------------------------------------------------------- list


def make_dated(repo: SessionRepo, cwd: str, created_name: str, stamps: list[str]) -> str:
    with repo.create(cwd=cwd, session_id=created_name) as s:
        for ts in stamps:
            at(s, ts, user(f"at {ts}"))
        return s.id


def test_list_order_filter_limit(repo: SessionRepo, tmp_path: pathlib.Path) -> None:
    # Entry times after the headers' (now), so the newest entry decides ``modified``.
    make_dated(repo, "/a", "old", ["2099-01-01T00:00:00.000Z"])
    make_dated(repo, "/b", "newest", ["2099-01-01T00:00:00.000Z", "2099-03-01T00:00:00.000Z"])
    make_dated(repo, "/a", "middle", ["2099-02-01T00:00:00.000Z"])
    # An older entry appended later does not make the session newer: newest entry wins.
    make_dated(repo, "/a/", "mixed", ["2099-01-15T00:00:00.000Z", "2098-06-01T00:00:00.000Z"])
    assert [m.id for m in repo.list()] == ["newest", "middle", "mixed", "old"]
    assert [m.id for m in repo.list(cwd="/a")] == ["middle", "mixed", "old"]
    assert [m.id for m in repo.list(cwd=pathlib.Path("/a/"))] == ["middle", "mixed", "old"]
    assert [m.id for m in repo.list(cwd="/b")] == ["newest"]
    assert repo.list(cwd="/nowhere") == []
    assert [m.id for m in repo.list(limit=2)] == ["newest", "middle"]
    assert [m.id for m in repo.list(cwd="/a", limit=1)] == ["middle"]
    assert repo.list(limit=0) == []
    assert len(repo.list(limit=100)) == 4
    by_id = {m.id: m for m in repo.list()}
    assert by_id["newest"].modified == utc("2099-03-01T00:00:00.000Z")
    assert by_id["mixed"].modified == utc("2099-01-15T00:00:00.000Z")
    assert by_id["old"].created is not None and by_id["old"].created.tzinfo is timezone.utc


def test_modified_is_never_before_the_header(repo: SessionRepo) -> None:
    # Entries older than the header (copied, or from a skewed clock): ``modified`` is the
    # header's time, the later of the two.
    sid = make_dated(repo, "/a", "skewed", ["2001-01-01T00:00:00.000Z"])
    (meta,) = repo.list()
    assert meta.id == sid and meta.created is not None
    assert meta.modified == meta.created > utc("2001-01-01T00:00:00.000Z")


def test_fresh_fork_lists_first(repo: SessionRepo) -> None:
    with repo.create(cwd="/w", session_id="src") as s:
        first = at(s, "2026-01-01T00:00:00.000Z", user("one"))
        at(s, "2026-06-01T00:00:00.000Z", user("two"))
    with repo.create(cwd="/w", session_id="other") as s:
        at(s, "2026-03-01T00:00:00.000Z", user("three"))
    # The fork copies only the oldest entry, but it was made now: the newest session.
    time.sleep(0.002)  # header times have millisecond resolution
    with repo.fork("src", entry_id=first, position="at") as fork:
        fork_id = fork.id
        created = utc(fork.storage.get_metadata().timestamp)
        assert [e.id for e in dump(fork)] == [first]
    rows = repo.list()
    assert rows[0].id == fork_id and {m.id for m in rows[1:]} == {"src", "other"}
    assert rows[0].modified == rows[0].created == created
    # The sources' entries are older than their headers too.
    assert all(m.modified == m.created for m in rows)
    assert [m.id for m in repo.list(cwd="/w", limit=1)] == [fork_id]


@pytest.mark.parametrize("limit", [-1, True, 1.5, "3"])
def test_list_bad_limit(repo: SessionRepo, limit: Any) -> None:
    with pytest.raises(SessionError) as exc:
        repo.list(limit=limit)
    assert exc.value.code == "invalid_argument"


def test_list_bad_cwd(repo: SessionRepo) -> None:
    with pytest.raises(SessionError) as exc:
        repo.list(cwd=3)  # type: ignore[arg-type]
    assert exc.value.code == "invalid_argument"


def test_metadata_values(repo: SessionRepo) -> None:
    with repo.create(cwd="/proj", name="first name", metadata={"a": 1}) as s:
        sid = s.id
        s.append_model_change("openai", "gpt-4")
        s.append_message(assistant("before any user"))
        root_user = s.append_message(user([st.TextContent("part one"), st.TextContent("two")]))
        s.append_message(assistant("answer"))
        s.move_to(root_user)
        s.append_message(user("on another branch"))
        s.append_label(root_user, "mark")
        s.append_session_info("final name")
        stats = s.get_session_stats()
        newest = max(e.timestamp for e in dump(s))
        created = s.storage.get_metadata().timestamp
    (meta,) = repo.list()
    assert meta.id == sid
    assert meta.cwd == "/proj"
    assert meta.name == "final name"
    assert meta.first_message == "part one\ntwo"
    assert meta.entry_count == stats.entry_count == 9
    assert meta.message_count == stats.message_count == 4
    assert meta.parent_session is None
    assert meta.created == utc(created)
    assert meta.modified == utc(newest)
    assert meta.error is None
    if isinstance(repo, JsonlSessionRepo):
        assert meta.path == repo.path_for(sid)
        assert meta.size_bytes == os.path.getsize(meta.path)
    else:
        assert meta.path is None
        assert meta.size_bytes > 0


def test_first_message_is_first_in_file_order_and_none_without_user(repo: SessionRepo) -> None:
    with repo.create(cwd="/w", session_id="nouser") as s:
        s.append_message(assistant("only me"))
    with repo.create(cwd="/w", session_id="branches") as s:
        a = s.append_message(assistant("root"))
        s.append_message(user("first typed"))
        s.move_to(a)
        s.append_message(user("second typed"))
    with repo.create(cwd="/w", session_id="image") as s:
        s.append_message(user([st.ImageContent("aGk=", "image/png")]))
    by_id = {m.id: m for m in repo.list()}
    assert by_id["nouser"].first_message is None
    assert by_id["branches"].first_message == "first typed"
    assert by_id["image"].first_message == ""


def test_list_sees_appends_and_renames(repo: SessionRepo) -> None:
    with repo.create(cwd="/w", name="a") as s:
        sid = s.id
        assert repo.list()[0].entry_count == 1
        s.append_message(user("x"))
        s.append_session_info("b")
        s.storage.flush()  # type: ignore[attr-defined]
        (meta,) = repo.list()
        assert (meta.entry_count, meta.message_count, meta.name) == (3, 1, "b")
    with repo.open(sid) as s:
        s.append_session_info(None)
    assert repo.list()[0].name is None


# --------------------------------------------------------------------------- delete


def test_delete(repo: SessionRepo) -> None:
    with repo.create(cwd="/w", session_id="keep") as s:
        s.append_message(user())
    with repo.create(cwd="/w", session_id="gone") as s:
        s.append_message(user())
    repo.delete("gone")
    assert [m.id for m in repo.list()] == ["keep"]
    with pytest.raises(SessionError) as exc:
        repo.open("gone")
    assert exc.value.code == "not_found"
    with pytest.raises(SessionError) as exc:
        repo.delete("gone")
    assert exc.value.code == "not_found"
    (meta,) = repo.list()
    repo.delete(meta)
    assert repo.list() == []
    # The id can be used again.
    repo.create(session_id="gone").close()


def test_delete_open_session_is_locked(repo: SessionRepo) -> None:
    s = repo.create(cwd="/w")
    sid = s.id
    with pytest.raises(SessionError) as exc:
        repo.delete(sid)
    assert exc.value.code == "locked"
    assert [m.id for m in repo.list()] == [sid]
    s.close()
    repo.delete(sid)
    assert repo.list() == []


# --------------------------------------------------------------------------- fork


def build_source(repo: SessionRepo) -> tuple[str, dict[str, str]]:
    """u1 a1 [label u1] u2 a2 ; branch from a1: u3 a3 ; name set; leaf moved back to a2."""
    ids: dict[str, str] = {}
    with repo.create(cwd="/src", metadata={"m": 1}, name="source name") as s:
        ids["info"] = s.get_leaf_id() or ""
        ids["u1"] = s.append_message(user("one"))
        ids["a1"] = s.append_message(assistant("one!"))
        ids["l1"] = s.append_label(ids["u1"], "start")
        ids["u2"] = s.append_message(user("two"))
        ids["a2"] = s.append_message(assistant("two!"))
        s.move_to(ids["a1"])
        ids["u3"] = s.append_message(user("three"))
        ids["a3"] = s.append_message(assistant("three!"))
        s.move_to(ids["a2"])
        ids["model"] = s.append_model_change("anthropic", "claude")
        return s.id, ids


def test_fork_full_copy(repo: SessionRepo) -> None:
    sid, ids = build_source(repo)
    with repo.open(sid) as src:
        src_entries = dump(src)
        src_leaf = src.get_leaf_id()
        src_labels = src.storage.get_labels()
    with repo.fork(sid) as f:
        header = f.storage.get_metadata()
        assert f.id != sid and UUID7_RE.fullmatch(f.id)
        assert header.parent_session == sid
        assert header.cwd == "/src" and header.metadata == {"m": 1}
        assert dump(f) == src_entries  # ids, parents, timestamps, everything
        assert f.get_leaf_id() == src_leaf == ids["model"]
        assert f.storage.get_labels() == src_labels
        assert f.get_session_name() == "source name"
        fid = f.id
    meta = {m.id: m for m in repo.list()}[fid]
    assert meta.parent_session == sid and meta.name == "source name"
    assert meta.entry_count == len(src_entries)


def test_fork_full_copy_keeps_a_moved_back_leaf(repo: SessionRepo) -> None:
    with repo.create(cwd="/w") as s:
        u1 = s.append_message(user("one"))
        s.append_message(assistant())
        s.move_to(u1)
        sid = s.id
    with repo.fork(sid) as f:
        assert f.get_leaf_id() == u1
        assert len(f.storage) == 3
    with repo.create(cwd="/w") as s:
        s.append_message(user("one"))
        s.move_to(None)
        sid = s.id
    with repo.fork(sid) as f:
        assert f.get_leaf_id() is None


def test_fork_at(repo: SessionRepo) -> None:
    sid, ids = build_source(repo)
    with repo.fork(sid, entry_id=ids["u3"], position="at") as f:
        entries = dump(f)
        path = [ids["info"], ids["u1"], ids["a1"], ids["u3"]]
        assert [e.id for e in entries[:4]] == path
        assert entries[0].parent_id is None
        assert_self_contained(entries)
        assert f.get_leaf_id() == ids["u3"]
        assert [e.id for e in f.get_branch()] == path
        # The label on u1 was set off this path; it applies to u1, so it carries over.
        assert f.get_label(ids["u1"]) == "start"
        assert f.get_session_name() == "source name"


def test_fork_before_user_message(repo: SessionRepo) -> None:
    sid, ids = build_source(repo)
    with repo.fork(sid, entry_id=ids["u2"]) as f:
        entries = dump(f)
        # The label entry sits on the path (u2's parent is the label entry).
        path = [ids["info"], ids["u1"], ids["a1"], ids["l1"]]
        assert [e.id for e in entries] == path
        assert_self_contained(entries)
        assert f.get_leaf_id() == ids["l1"]
        assert f.get_label(ids["u1"]) == "start"
        assert f.storage.get_metadata().parent_session == sid


def test_fork_before_rules(repo: SessionRepo) -> None:
    sid, ids = build_source(repo)
    with pytest.raises(SessionError) as exc:
        repo.fork(sid, entry_id=ids["a1"])
    assert exc.value.code == "invalid_fork_target"
    assert "is an assistant message" in exc.value.message  # not "a assistant"
    with pytest.raises(SessionError) as exc:
        repo.fork(sid, entry_id=ids["a1"], position="before")
    assert exc.value.code == "invalid_fork_target"
    # A non-message target is fine "before": the path to its parent.
    with repo.fork(sid, entry_id=ids["model"]) as f:
        assert f.get_leaf_id() == ids["a2"]
    # Before the root: an empty fork.
    with repo.fork(sid, entry_id=ids["info"]) as f:
        assert len(f.storage) == 0 and f.get_leaf_id() is None
        assert f.get_session_name() is None  # nothing copied for the name to apply to
    with repo.fork(sid, entry_id=ids["info"], position="at") as f:
        assert [e.id for e in dump(f)] == [ids["info"]]
    n = len(repo.list())
    for kwargs, code in [
        ({"entry_id": "missing"}, "not_found"),
        ({"entry_id": "missing", "position": "at"}, "not_found"),
        ({"entry_id": ids["u1"], "position": "after"}, "invalid_argument"),
        ({"position": "sideways"}, "invalid_argument"),
        ({"entry_id": 5}, "invalid_argument"),
    ]:
        with pytest.raises(SessionError) as exc:
            repo.fork(sid, **kwargs)
        assert exc.value.code == code
    with pytest.raises(SessionError) as exc:
        repo.fork("no-such-session")
    assert exc.value.code == "not_found"
    assert len(repo.list()) == n  # failed forks leave nothing


def test_fork_while_source_is_open_by_writer(repo: SessionRepo) -> None:
    s = repo.create(cwd="/w")
    u = s.append_message(user("q"))
    s.append_message(assistant())
    s.storage.flush()  # type: ignore[attr-defined]
    with repo.fork(s.id, entry_id=u, position="at") as f:
        assert [e.id for e in dump(f)] == [u]
    with repo.fork(s.id) as f:
        assert len(f.storage) == 2
    s.append_message(user("source still writable"))
    s.close()


def test_fork_of_a_fork_names_its_parent(repo: SessionRepo) -> None:
    with repo.create(cwd="/w") as s:
        s.append_message(user())
        a = s.id
    with repo.fork(a) as f:
        b = f.id
    with repo.fork(b) as g:
        assert g.storage.get_metadata().parent_session == b
    assert {m.parent_session for m in repo.list()} == {None, a, b}


def build_labels_and_compaction(repo: SessionRepo) -> tuple[str, dict[str, str]]:
    """A branch with labels sitting on it and a compaction, plus labels changed elsewhere.

    u1 a1 u2 [label u1 "old"] a2 [label a2 "kept"] C(first_kept=u2) u3 [label u3 "x"] a3
    then from a1 another branch: u4 [label u1 "new"] [label a2 cleared] [label u2 "late"]
    and the session renamed on that branch.
    """
    ids: dict[str, str] = {}
    with repo.create(cwd="/w", name="before rename") as s:
        ids["info"] = s.get_leaf_id() or ""
        ids["u1"] = s.append_message(user("one"))
        ids["a1"] = s.append_message(assistant("one!"))
        ids["u2"] = s.append_message(user("two"))
        ids["l_u1"] = s.append_label(ids["u1"], "old")
        ids["a2"] = s.append_message(assistant("two!"))
        ids["l_a2"] = s.append_label(ids["a2"], "kept")
        ids["c"] = s.append_compaction("summary of one and two", ids["u2"], 1000)
        ids["u3"] = s.append_message(user("three"))
        ids["l_u3"] = s.append_label(ids["u3"], "x")
        ids["a3"] = s.append_message(assistant("three!"))
        s.move_to(ids["a1"])
        ids["u4"] = s.append_message(user("four"))
        s.append_label(ids["u1"], "new")
        s.append_label(ids["a2"], None)
        s.append_label(ids["u2"], "late")
        s.append_session_info("after rename")
        return s.id, ids


def test_fork_branch_with_labels_and_compaction(repo: SessionRepo) -> None:
    sid, ids = build_labels_and_compaction(repo)
    with repo.open(sid) as src:
        want_context = src.build_context()
        src_ctx_at_a3 = st.build_session_context(src.get_branch(ids["a3"]))
    with repo.fork(sid, entry_id=ids["a3"], position="at") as f:
        entries = dump(f)
        got = [e.id for e in entries]
        # The path starts at the compaction's first kept entry; the label on u1 (outside
        # the copy) is dropped and a2 re-attached to u2; labels on copied entries stay.
        assert got[:7] == [
            ids["u2"],
            ids["a2"],
            ids["l_a2"],
            ids["c"],
            ids["u3"],
            ids["l_u3"],
            ids["a3"],
        ]
        assert ids["l_u1"] not in got
        by_id = {e.id: e for e in entries}
        assert by_id[ids["u2"]].parent_id is None
        assert by_id[ids["a2"]].parent_id == ids["u2"]
        assert_self_contained(entries)
        # Labels as in the source for the copied entries: a2 cleared, u2 "late", u3 "x".
        assert f.storage.get_labels() == {ids["u2"]: "late", ids["u3"]: "x"}
        assert f.get_session_name() == "after rename"
        assert f.get_leaf_id() == ids["a3"]
        assert st.build_session_context(f.get_branch()) == src_ctx_at_a3
        # Ids and timestamps are preserved.
        with repo.open(sid) as src:
            for e in entries[:7]:
                assert src.get_entry(e.id) is not None
                assert src.get_entry(e.id).timestamp == e.timestamp  # type: ignore[union-attr]
        fid = f.id
    # Reopening the fork gives the same tree (nothing dangling for the reader to fix).
    with repo.open(fid) as again:
        assert dump(again) == entries
        assert again.get_leaf_id() == ids["a3"]
        report = getattr(again.storage, "load_report", None)
        assert report is None or report.ok
    assert want_context.messages  # the source itself is untouched
    with repo.open(sid) as src:
        assert src.get_label(ids["u1"]) == "new"


def test_fork_at_a_label_entry(repo: SessionRepo) -> None:
    sid, ids = build_labels_and_compaction(repo)
    # "at" the label entry on u2's branch: no compaction above it, so its target u1 is
    # copied and the label entry stays; the later relabel of u1 is appended after it.
    with repo.fork(sid, entry_id=ids["l_u1"], position="at") as f:
        entries = dump(f)
        assert [e.id for e in entries[:5]] == [
            ids["info"],
            ids["u1"],
            ids["a1"],
            ids["u2"],
            ids["l_u1"],
        ]
        assert [e.type for e in entries[5:]] == ["label", "label", "session_info", "leaf"]
        assert_self_contained(entries)
        assert f.get_leaf_id() == ids["l_u1"]
        assert f.storage.get_labels() == {ids["u1"]: "new", ids["u2"]: "late"}
        assert f.get_session_name() == "after rename"


def test_fork_before_after_compaction_drops_dangling_label(repo: SessionRepo) -> None:
    sid, ids = build_labels_and_compaction(repo)
    with repo.fork(sid, entry_id=ids["u3"]) as f:
        entries = dump(f)
        got = [e.id for e in entries]
        assert got[:4] == [ids["u2"], ids["a2"], ids["l_a2"], ids["c"]]
        assert_self_contained(entries)
        assert f.get_leaf_id() == ids["c"]
        assert f.storage.get_labels() == {ids["u2"]: "late"}


def test_get_entries_to_fork_matches_repo_fork(repo: SessionRepo) -> None:
    sid, ids = build_labels_and_compaction(repo)
    with repo.open(sid) as src:
        for entry_id, position in [
            (None, "before"),
            (ids["a3"], "at"),
            (ids["u3"], "before"),
            (ids["u1"], "before"),
        ]:
            chosen = get_entries_to_fork(src.storage, entry_id, position)  # type: ignore[arg-type]
            with repo.fork(sid, entry_id=entry_id, position=position) as f:  # type: ignore[arg-type]
                forked = dump(f)
            # The fork holds the chosen source entries, then what carries labels, the name
            # and the leaf over (fresh ids).
            assert forked[: len(chosen)] == chosen
            for e in chosen:  # only source entries, with their ids and times
                source_entry = src.get_entry(e.id)
                assert source_entry is not None and source_entry.timestamp == e.timestamp
            assert {e.type for e in forked[len(chosen) :]} <= {"label", "session_info", "leaf"}
            assert not {e.id for e in forked[len(chosen) :]} & set(ids.values())


def test_get_entries_to_fork_before_a_non_message_is_its_parents_path(
    repo: SessionRepo,
) -> None:
    sid, ids = build_labels_and_compaction(repo)
    with repo.open(sid) as src:
        storage = src.storage
        for target in ("l_u1", "l_a2", "c", "l_u3"):
            entry = storage.get_entry(ids[target])
            assert entry is not None and entry.parent_id is not None
            path = storage.get_path_to_root_or_compaction(entry.parent_id)
            if target == "l_u1":
                # Source labels and name differ from the path's (u1 relabelled, u2
                # labelled, renamed later), which the fork must not fake into this list.
                assert [e.id for e in path] == [ids["info"], ids["u1"], ids["a1"], ids["u2"]]
            if target == "l_u3":
                # The path starts at the compaction's first kept entry u2 and runs through
                # l_u1, whose target u1 is before the cut: that label entry is left out (a
                # dangling reference) and a2 hangs from u2 instead.
                assert ids["l_u1"] in [e.id for e in path]
                path = [e for e in path if e.id != ids["l_u1"]]
            for where in (storage, DelegatingStorage(storage)):
                chosen = get_entries_to_fork(where, ids[target], "before")
                assert [e.id for e in chosen] == [e.id for e in path], target
                assert [e.timestamp for e in chosen] == [e.timestamp for e in path]
                assert chosen[0].parent_id is None
                assert_self_contained(chosen)
    # fork() still carries labels and the name over, by appending entries after the copy.
    with repo.fork(sid, entry_id=ids["l_u1"]) as f:
        entries = dump(f)
        assert [e.id for e in entries[:4]] == [ids["info"], ids["u1"], ids["a1"], ids["u2"]]
        extras = entries[4:]
        assert [e.type for e in extras] == ["label", "label", "session_info", "leaf"]
        assert extras[0].parent_id == ids["u2"]
        assert f.storage.get_labels() == {ids["u1"]: "new", ids["u2"]: "late"}
        assert f.get_session_name() == "after rename"
        assert f.get_leaf_id() == ids["u2"]


class DelegatingStorage(st.SessionStorage):
    """A Python-implemented storage (no engine) to exercise the generic fork path."""

    def __init__(self, inner: st.SessionStorage) -> None:
        self.inner = inner

    def get_metadata(self) -> st.SessionHeader:
        return self.inner.get_metadata()

    def get_leaf_id(self) -> str | None:
        return self.inner.get_leaf_id()

    def set_leaf_id(self, entry_id: str | None) -> None:
        self.inner.set_leaf_id(entry_id)

    def create_entry_id(self) -> str:
        return self.inner.create_entry_id()

    def append_entry(self, entry: SessionTreeEntry) -> None:
        self.inner.append_entry(entry)

    def get_entry(self, entry_id: str) -> SessionTreeEntry | None:
        return self.inner.get_entry(entry_id)

    def find_entries(self, type: str) -> list[SessionTreeEntry]:
        return self.inner.find_entries(type)

    def get_label(self, entry_id: str) -> str | None:
        return self.inner.get_label(entry_id)

    def get_session_name(self) -> str | None:
        return self.inner.get_session_name()

    def get_path_to_root_or_compaction(self, leaf_id: str | None) -> list[SessionTreeEntry]:
        return self.inner.get_path_to_root_or_compaction(leaf_id)

    def get_path_to_root(self, entry_id: str | None) -> list[SessionTreeEntry]:
        return self.inner.get_path_to_root(entry_id)

    def get_children(self, entry_id: str | None) -> list[SessionTreeEntry]:
        return self.inner.get_children(entry_id)

    def get_entries(
        self,
        type: str | None = None,
        *,
        since: str | None = None,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[SessionTreeEntry]:
        return self.inner.get_entries(type, since=since, limit=limit, reverse=reverse)

    def get_session_stats(self) -> st.SessionStats:
        return self.inner.get_session_stats()

    def __len__(self) -> int:
        return len(self.inner)

    def close(self) -> None:
        self.inner.close()


def test_get_entries_to_fork_on_a_python_storage() -> None:
    repo = InMemorySessionRepo()
    sid, ids = build_labels_and_compaction(repo)
    with repo.open(sid) as src:
        generic = DelegatingStorage(src.storage)
        for entry_id, position in [
            (None, "before"),
            (ids["a3"], "at"),
            (ids["u3"], "before"),
            (ids["u4"], "at"),
            (ids["u1"], "before"),
        ]:
            fast = get_entries_to_fork(src.storage, entry_id, position)  # type: ignore[arg-type]
            slow = get_entries_to_fork(generic, entry_id, position)  # type: ignore[arg-type]
            assert fast == slow
            # Appending the result to an empty storage reproduces a valid session.
            copy = st.InMemorySessionStorage()
            for e in slow:
                copy.append_entry(e)
            assert_self_contained(copy.get_entries())
        with pytest.raises(SessionError) as exc:
            get_entries_to_fork(generic, ids["a1"])
        assert exc.value.code == "invalid_fork_target"
        with pytest.raises(SessionError) as exc:
            get_entries_to_fork(generic, "missing", "at")
        assert exc.value.code == "not_found"
        with pytest.raises(SessionError) as exc:
            get_entries_to_fork(generic, ids["a1"], "nope")  # type: ignore[arg-type]
        assert exc.value.code == "invalid_argument"
    closed = st.InMemorySessionStorage()
    closed.close()
    with pytest.raises(SessionError) as exc:
        get_entries_to_fork(closed)
    assert exc.value.code == "closed"
    with pytest.raises(SessionError) as exc:
        get_entries_to_fork("not a storage")  # type: ignore[arg-type]
    assert exc.value.code == "invalid_argument"


# --------------------------------------------------------------------------- in memory only


def test_in_memory_handle_released_by_garbage_collection() -> None:
    repo = InMemorySessionRepo()
    s = repo.create(cwd="/w")
    sid = s.id
    del s
    import gc

    gc.collect()
    with repo.open(sid) as again:
        assert again.id == sid
    assert sid in repo and "nope" not in repo and "../x" not in repo
    assert len(repo) == 1
    assert "1 sessions" in repr(repo)


# --------------------------------------------------------------------------- JSONL: files


def test_file_layout(jrepo: JsonlSessionRepo, tmp_path: pathlib.Path) -> None:
    with jrepo.create(cwd="/w", session_id="abc") as s:
        assert s.storage.path == str(tmp_path / "sessions" / "abc.jsonl")  # type: ignore[attr-defined]
    assert jrepo.root_dir == str(tmp_path / "sessions")
    assert (tmp_path / "sessions" / "abc.jsonl").is_file()
    first = (tmp_path / "sessions" / "abc.jsonl").read_bytes().split(b"\n")[0]
    assert json.loads(first)["id"] == "abc"
    assert "abc" in jrepo and "zzz" not in jrepo
    assert repr(jrepo) == f"JsonlSessionRepo({str(tmp_path / 'sessions')!r})"


@pytest.fixture
def umask() -> Iterator[Any]:
    old = os.umask(0o022)
    os.umask(old)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    try:
        yield set_mask
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0, 0o077, 0o022])
def test_permissions_whatever_the_umask(tmp_path: pathlib.Path, umask: Any, mask: int) -> None:
    umask(mask)
    root = tmp_path / "deep" / "sessions"
    repo = JsonlSessionRepo(root)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    with repo.create(cwd="/w", name="n") as s:
        s.append_message(user())
        sid = s.id
    with repo.fork(sid) as f:
        fid = f.id
    repo.list()
    for name in (f"{sid}.jsonl", f"{fid}.jsonl", CACHE):
        assert stat.S_IMODE((root / name).stat().st_mode) == 0o600, name


def test_existing_root_is_left_alone(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "mine"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    JsonlSessionRepo(root)
    assert stat.S_IMODE(root.stat().st_mode) == 0o755
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SessionError) as exc:
        JsonlSessionRepo(tmp_path / "afile")
    assert exc.value.code == "io"
    with pytest.raises(SessionError) as exc:
        JsonlSessionRepo(5)  # type: ignore[arg-type]
    assert exc.value.code == "invalid_argument"
    with pytest.raises(SessionError) as exc:
        JsonlSessionRepo(root, durability="sometimes")  # type: ignore[arg-type]
    assert exc.value.code == "invalid_argument"


def test_list_of_a_removed_root_is_empty(tmp_path: pathlib.Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "r")
    os.rmdir(tmp_path / "r")
    assert repo.list() == []


# --------------------------------------------------------------------------- JSONL: listing cache


@pytest.fixture
def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every read-only open the repo makes (that is, every file it parses)."""
    opened: list[str] = []
    real = st.JsonlSessionStorage.open.__func__  # type: ignore[attr-defined]

    def spy(cls: Any, path: Any, **kwargs: Any) -> Any:
        if kwargs.get("readonly"):
            opened.append(os.path.basename(os.fspath(path)))
        return real(cls, path, **kwargs)

    monkeypatch.setattr(st.JsonlSessionStorage, "open", classmethod(spy))
    return opened


def fill(repo: JsonlSessionRepo, n: int) -> list[str]:
    made = []
    for i in range(n):
        with repo.create(cwd="/w", name=f"s{i}") as s:
            s.append_message(user(f"question {i}"))
            made.append(s.id)
    return made


def test_list_does_not_reread_unchanged_files(
    jrepo: JsonlSessionRepo, count_reads: list[str]
) -> None:
    made = fill(jrepo, 5)
    first = jrepo.list()
    assert sorted(count_reads) == sorted(f"{i}.jsonl" for i in made)
    count_reads.clear()
    assert jrepo.list() == first
    assert count_reads == []
    # A new repo object (as in a new process) uses the cache file.
    other = JsonlSessionRepo(jrepo.root_dir)
    assert other.list() == first
    assert count_reads == []


def test_cache_invalidated_by_append_from_another_process(
    jrepo: JsonlSessionRepo, count_reads: list[str]
) -> None:
    made = fill(jrepo, 3)
    before = {m.id: m for m in jrepo.list()}
    count_reads.clear()
    target = made[1]
    code = textwrap.dedent(
        f"""
        import sessiontree as st
        s = st.Session(st.JsonlSessionStorage.open({jrepo.path_for(target)!r}))
        s.append_message(st.UserMessage("from elsewhere"))
        s.append_session_info("renamed elsewhere")
        s.close()
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    after = {m.id: m for m in jrepo.list()}
    assert count_reads == [f"{target}.jsonl"]
    assert after[target].entry_count == before[target].entry_count + 2
    assert after[target].message_count == 2
    assert after[target].name == "renamed elsewhere"
    assert after[target].size_bytes == os.path.getsize(jrepo.path_for(target))
    for sid in made:
        if sid != target:
            assert after[sid] == before[sid]
    # The refreshed row was written back: a fresh repo reads nothing.
    count_reads.clear()
    assert {m.id: m for m in JsonlSessionRepo(jrepo.root_dir).list()} == after
    assert count_reads == []


def test_damaged_cache_is_rebuilt(jrepo: JsonlSessionRepo, count_reads: list[str]) -> None:
    made = fill(jrepo, 3)
    good = jrepo.list()
    cache = pathlib.Path(jrepo.root_dir) / CACHE
    for garbage in [
        b"",
        b"\x00\xff not json",
        b'{"format":"something-else","version":1,"files":{}}',
        b'{"format":"sessiontree-list-cache","version":99,"files":{}}',
        b"[1,2,3]",
        b'{"format":"sessiontree-list-cache","version":1,"files":[]}',
        b"[" * 100000,
    ]:
        cache.write_bytes(garbage)
        count_reads.clear()
        assert JsonlSessionRepo(jrepo.root_dir).list() == good
        assert sorted(count_reads) == sorted(f"{i}.jsonl" for i in made)
        doc = json.loads(cache.read_bytes())
        assert doc["format"] == "sessiontree-list-cache"
        assert sorted(doc["files"]) == sorted(f"{i}.jsonl" for i in made)


def test_forged_cache_rows_are_not_trusted(jrepo: JsonlSessionRepo, count_reads: list[str]) -> None:
    (sid,) = fill(jrepo, 1)
    good = jrepo.list()
    cache = pathlib.Path(jrepo.root_dir) / CACHE
    doc = json.loads(cache.read_bytes())
    row = doc["files"][f"{sid}.jsonl"]
    forgeries: list[dict[str, Any]] = [
        {**row, "entry_count": "many"},
        {**row, "entry_count": -1},
        {**row, "name": 5},
        {**row, "created": "yesterday"},
        {**row, "modified": "2026-01-01T00:00:00+05:00"},
        {**row, "id": "other"},
        {**row, "key": [1, 2]},
        {**row, "key": [*row["key"][:2], row["key"][2] + 1]},  # another inode
        {k: v for k, v in row.items() if k != "cwd"},
    ]
    for forged in forgeries:
        doc["files"] = {f"{sid}.jsonl": forged, "../evil.jsonl": row}
        cache.write_text(json.dumps(doc))
        count_reads.clear()
        assert JsonlSessionRepo(jrepo.root_dir).list() == good, forged
        assert count_reads == [f"{sid}.jsonl"]


def test_cache_symlink_is_ignored(jrepo: JsonlSessionRepo, tmp_path: pathlib.Path) -> None:
    (sid,) = fill(jrepo, 1)
    good = jrepo.list()
    cache = pathlib.Path(jrepo.root_dir) / CACHE
    doc = json.loads(cache.read_bytes())
    doc["files"][f"{sid}.jsonl"]["name"] = "evil"
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(doc))
    cache.unlink()
    cache.symlink_to(elsewhere)
    assert JsonlSessionRepo(jrepo.root_dir).list() == good
    assert json.loads(elsewhere.read_text())["files"][f"{sid}.jsonl"]["name"] == "evil"


def test_unreadable_files_are_listed_with_error(jrepo: JsonlSessionRepo) -> None:
    root = pathlib.Path(jrepo.root_dir)
    (ok,) = fill(jrepo, 1)
    (root / "garbage.jsonl").write_bytes(b"this is not json\n")
    (root / "empty.jsonl").write_bytes(b"")
    (root / "future.jsonl").write_bytes(
        b'{"type":"session","version":99,"id":"future","timestamp":"2026-01-01T00:00:00.000Z",'
        b'"cwd":"/w"}\n'
    )
    (root / "adir.jsonl").mkdir()
    (root / "link.jsonl").symlink_to(root / f"{ok}.jsonl")
    (root / "renamed.jsonl").write_bytes((root / f"{ok}.jsonl").read_bytes())
    # Not session files: ignored.
    (root / "notes.txt").write_text("hi")
    (root / ".hidden.jsonl").write_text("x")
    (root / "bad name.jsonl").write_text("x")
    (root / f"{ok}.jsonl.torn-20260101T000000.000Z").write_text("x")
    for _ in range(2):  # the second time from the cache: errors must stay
        rows = {m.id: m for m in jrepo.list()}
        assert set(rows) == {ok, "garbage", "empty", "future", "adir", "link", "renamed"}
        assert rows[ok].error is None
        for bad in ("garbage", "empty", "future", "adir", "link"):
            m = rows[bad]
            assert m.error, bad
            assert m.path == str(root / f"{bad}.jsonl")
            assert m.modified is not None and m.created is None
            assert m.cwd == ""
        assert "version" in (rows["future"].error or "")
        assert "regular file" in (rows["adir"].error or "")
        # A copy under another name is readable but inconsistent: flagged, still listed.
        assert rows["renamed"].error and ok in rows["renamed"].error
        assert rows["renamed"].cwd == "/w" and rows["renamed"].entry_count == 2
    # A cwd filter keeps rows whose cwd could not be read.
    assert {m.id for m in jrepo.list(cwd="/elsewhere")} == {
        "garbage",
        "empty",
        "future",
        "adir",
        "link",
    }


def test_torn_tail_is_listed_without_the_torn_line(jrepo: JsonlSessionRepo) -> None:
    with jrepo.create(cwd="/w") as s:
        s.append_message(user("done"))
        sid = s.id
    path = jrepo.path_for(sid)
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"half"')
    (meta,) = jrepo.list()
    assert meta.error is None and meta.entry_count == 1
    assert meta.size_bytes == os.path.getsize(path)


# --------------------------------------------------------------------------- JSONL: delete


def test_delete_removes_side_files_and_cache_row(jrepo: JsonlSessionRepo) -> None:
    with jrepo.create(cwd="/w", session_id="torn") as s:
        s.append_message(user())
    with jrepo.create(cwd="/w", session_id="torny") as s:  # a prefix-sharing neighbour
        s.append_message(user())
    root = pathlib.Path(jrepo.root_dir)
    with open(root / "torn.jsonl", "ab") as f:
        f.write(b'{"partial')
    with jrepo.open("torn") as s:  # a writer open cuts the torn tail into a side file
        side = s.storage.torn_path  # type: ignore[attr-defined]
    assert side and os.path.exists(side)
    neighbour_side = root / "torny.jsonl.torn-20260101T000000.000Z"
    neighbour_side.write_text("keep")
    jrepo.list()
    jrepo.delete("torn")
    assert not os.path.exists(side)
    assert not (root / "torn.jsonl").exists()
    assert neighbour_side.exists()
    doc = json.loads((root / CACHE).read_bytes())
    assert list(doc["files"]) == ["torny.jsonl"]
    assert [m.id for m in jrepo.list()] == ["torny"]


def test_delete_locked_by_another_process(jrepo: JsonlSessionRepo) -> None:
    with jrepo.create(cwd="/w") as s:
        sid = s.id
    code = textwrap.dedent(
        f"""
        import sys, sessiontree as st
        s = st.JsonlSessionStorage.open({jrepo.path_for(sid)!r})
        print("ready", flush=True)
        sys.stdin.readline()
        s.close()
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            assert proc.stdout.readline().strip() == "ready"
            with pytest.raises(SessionError) as exc:
                jrepo.delete(sid)
            assert exc.value.code == "locked"
            with pytest.raises(SessionError) as exc:
                jrepo.open(sid)
            assert exc.value.code == "locked"
            # Listing and forking only read: they work while the other process writes.
            assert [m.id for m in jrepo.list()] == [sid]
            jrepo.fork(sid).close()
        finally:
            proc.stdin.write("\n")
            proc.stdin.flush()
            proc.wait(timeout=60)
    jrepo.delete(sid)
    assert sid not in {m.id for m in jrepo.list()}


def test_delete_a_symlinked_session_removes_only_the_link(
    jrepo: JsonlSessionRepo, tmp_path: pathlib.Path
) -> None:
    target = tmp_path / "outside.jsonl"
    target.write_text("x")
    (pathlib.Path(jrepo.root_dir) / "ln.jsonl").symlink_to(target)
    jrepo.delete("ln")
    assert target.exists()
    assert jrepo.list() == []


# --------------------------------------------------------------------------- JSONL: atomic fork


@pytest.fixture(params=["engine", "python"])
def fork_writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Who writes a fork's file: the engine (``ForkSource.write_file``), or the repository
    from the source's lines (``write_lines``), as for a storage without ``write_file``."""
    if request.param == "python":
        original = _EngineStorage.get_fork_source

        def lines_only(self: Any, entry_id: str | None, position: str) -> Any:
            source = original(self, entry_id, position)
            source.write_file = None
            return source

        monkeypatch.setattr(_EngineStorage, "get_fork_source", lines_only)
    return str(request.param)


def test_fork_failure_before_publish_leaves_nothing(
    jrepo: JsonlSessionRepo, monkeypatch: pytest.MonkeyPatch, fork_writer: str
) -> None:
    with jrepo.create(cwd="/w") as s:
        s.append_message(user())
        sid = s.id
    root = pathlib.Path(jrepo.root_dir)
    before = set(os.listdir(root))

    def boom(tmp: str, final: str, replace: bool) -> None:
        if not replace:
            # The complete file exists under its temporary name at this point.
            assert os.path.getsize(tmp) > 0 and not os.path.exists(final)
            raise OSError(28, "No space left on device")
        os.replace(tmp, final)

    if fork_writer == "engine":
        monkeypatch.setenv("SESSIONTREE_TEST_FORK_FAULT", "28")  # the engine's test hook
    monkeypatch.setattr(repo_files, "_publish", boom)
    with pytest.raises(SessionError) as exc:
        jrepo.fork(sid)
    assert exc.value.code == "io"
    assert isinstance(exc.value.__cause__, OSError)
    assert set(os.listdir(root)) - {CACHE} == before - {CACHE}
    assert [m.id for m in jrepo.list()] == [sid]


def test_fork_crash_before_publish_leaves_no_session_file(
    jrepo: JsonlSessionRepo, fork_writer: str
) -> None:
    with jrepo.create(cwd="/w") as s:
        s.append_message(user())
        sid = s.id
    code = textwrap.dedent(
        f"""
        import os, sessiontree.repo as r, sessiontree.repo.files as files
        from sessiontree.storage.engine import _EngineStorage
        def crash(tmp, final, replace):
            os._exit(3)  # the process dies between writing and publishing
        files._publish = crash
        if {fork_writer!r} == "python":
            original = _EngineStorage.get_fork_source
            def lines_only(self, entry_id, position):
                source = original(self, entry_id, position)
                source.write_file = None
                return source
            _EngineStorage.get_fork_source = lines_only
        r.JsonlSessionRepo({jrepo.root_dir!r}).fork({sid!r})
        """
    )
    # The engine's test hook ends the process at the same point.
    env = {**os.environ, "SESSIONTREE_TEST_FORK_FAULT": "exit"}
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=60).returncode == 3
    root = pathlib.Path(jrepo.root_dir)
    leftovers = [n for n in os.listdir(root) if n.endswith(".tmp")]
    assert leftovers and all(n.startswith(".") for n in leftovers)
    assert [n for n in os.listdir(root) if n.endswith(".jsonl")] == [f"{sid}.jsonl"]
    assert [m.id for m in jrepo.list()] == [sid]


def test_engine_forks_write_what_the_python_path_writes(
    jrepo: JsonlSessionRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every fork of a session with branches, labels, a compaction and a dangling parent:
    the engine's file (bytes copied, arena handed over) is the file the repository writes
    from the source's lines, and reopening it reads what the fork's storage holds."""
    sid, ids = build_labels_and_compaction(jrepo)
    path = pathlib.Path(jrepo.path_for(sid))
    with path.open("ab") as f:  # a line whose parent is nowhere, and a child of it
        f.write(
            b'{"type":"custom","id":"dang","parent_id":"gone","timestamp":"T","custom_type":"k"}\n'
        )
        f.write(
            b'{"type":"custom","id":"kid","parent_id":"dang","timestamp":"T","custom_type":"k"}\n'
        )
    with jrepo.open(sid) as src:
        targets = [(None, "before")]
        for e in src.storage.get_entries():
            targets.append((e.id, "at"))
            if not (isinstance(e, MessageEntry) and e.message.role != "user"):
                targets.append((e.id, "before"))

    def stable(lines: list[bytes]) -> list[Any]:
        # The appended label, name and leaf entries get fresh ids and the time now.
        out: list[Any] = []
        fresh: dict[str, str] = {}
        for line in lines:
            if not line:
                continue
            d = json.loads(line)
            if d["type"] in ("label", "session_info", "leaf") and d["id"] not in ids.values():
                fresh[d["id"]] = f"new{len(fresh)}"
                d["id"] = fresh[d["id"]]
                d["parent_id"] = fresh.get(d["parent_id"], d["parent_id"])
                d["timestamp"] = "now"
                out.append(d)
            else:
                out.append(line)
        return out

    original = _EngineStorage.get_fork_source

    def lines_only(self: Any, eid: str | None, pos: str) -> Any:
        source = original(self, eid, pos)
        source.write_file = None
        return source

    for entry_id, position in targets:
        with jrepo.fork(sid, entry_id=entry_id, position=position) as f:
            fork_path = pathlib.Path(f.storage.path)  # type: ignore[attr-defined]
            held = (f.storage.get_entries(), f.get_leaf_id(), f.storage.get_labels())
            held_stats = f.storage.get_session_stats()
            held_name = f.get_session_name()
        with JsonlSessionStorage.open(fork_path, readonly=True) as again:
            assert again.load_report.issues == ()
            assert (again.get_entries(), again.get_leaf_id(), again.get_labels()) == held
            assert (again.get_session_stats(), again.get_session_name()) == (held_stats, held_name)
        engine_lines = fork_path.read_bytes().split(b"\n")[1:]
        with monkeypatch.context() as m:
            m.setattr(_EngineStorage, "get_fork_source", lines_only)
            with jrepo.fork(sid, entry_id=entry_id, position=position) as f:
                python_path = pathlib.Path(f.storage.path)  # type: ignore[attr-defined]
        python_lines = python_path.read_bytes().split(b"\n")[1:]
        assert stable(engine_lines) == stable(python_lines), (entry_id, position)
        fork_path.unlink()
        python_path.unlink()


def test_fork_never_overwrites(jrepo: JsonlSessionRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    with jrepo.create(cwd="/w", session_id="taken") as s:
        s.append_message(user("precious"))
    with jrepo.create(cwd="/w") as s:
        sid = s.id
    original = pathlib.Path(jrepo.path_for("taken")).read_bytes()
    monkeypatch.setattr(repo_jsonl, "uuid7", lambda: "taken")
    with pytest.raises(SessionError) as exc:
        jrepo.fork(sid)
    assert exc.value.code == "exists"
    assert pathlib.Path(jrepo.path_for("taken")).read_bytes() == original


def test_fork_preserves_unknown_fields_and_types_byte_for_byte(jrepo: JsonlSessionRepo) -> None:
    root = pathlib.Path(jrepo.root_dir)
    header = (
        b'{"type":"session","version":3,"id":"raw","timestamp":"2026-01-01T00:00:00.000Z",'
        b'"cwd":"/w","parent_session":null,"metadata":{"x":1},"vendor":"kept"}'
    )
    body = [
        b'{"type":"message","id":"m1","parent_id":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"user","content":"h\xc3\xa9","timestamp":1,"extra":[1.5e300]},'
        b'"zz":{"b":1,"a":2}}',
        b'{"type":"future_thing","id":"f1","parent_id":"m1","timestamp":"2026-01-01T00:00:02.000Z",'
        b'"payload":{"deep":[true,null]}}',
        b'{"id":"m2","type":"message","parent_id":"f1","timestamp":"2026-01-01T00:00:03.000Z",'
        b'"message":{"role":"user","content":"again","timestamp":2}}',
    ]
    (root / "raw.jsonl").write_bytes(header + b"\n" + b"\n".join(body) + b"\n")
    with jrepo.fork("raw") as f:
        fid = f.id
    data = (root / f"{fid}.jsonl").read_bytes().split(b"\n")
    head = json.loads(data[0])
    assert head["vendor"] == "kept" and head["metadata"] == {"x": 1}
    assert head["parent_session"] == "raw" and head["id"] == fid
    assert data[1:] == [*body, b""]
    with jrepo.fork("raw", entry_id="m2", position="at") as f:
        fid = f.id
    data = (root / f"{fid}.jsonl").read_bytes().split(b"\n")
    assert data[1:] == [*body, b""]  # the path is the whole chain: nothing rewritten
    with jrepo.fork("raw", entry_id="f1", position="before") as f:
        assert [e.id for e in dump(f)] == ["m1"]
    # A path starting below the root: only its first line is re-encoded, fields kept.
    with st.Session(st.JsonlSessionStorage.open(root / "raw.jsonl")) as s:
        s.append_compaction("sum", "f1", 5)
        s.append_message(user("after"))
        leaf = s.get_leaf_id()
    with jrepo.fork("raw", entry_id=leaf, position="at") as f:
        fid = f.id
    lines = (root / f"{fid}.jsonl").read_bytes().split(b"\n")[1:]
    first = json.loads(lines[0])
    assert first == {**json.loads(body[1]), "parent_id": None}
    assert lines[1] == body[2]


# --------------------------------------------------------------------------- big sessions


def big_session_bytes(n: int) -> tuple[bytes, dict[str, Any]]:
    """A chain of ``n`` entries written as raw JSONL, with labels and one compaction.

    Every 1000th entry is a label on the entry 5 before it; entry ``n // 2`` is a
    compaction keeping from ``n // 2 - 10``; the last 10 entries are a side branch off
    entry ``n - 20`` (the leaf stays on the side branch).
    """
    head = (
        b'{"type":"session","version":3,"id":"big","timestamp":"2026-01-01T00:00:00.000Z",'
        b'"cwd":"/big","parent_session":null,"metadata":null}\n'
    )
    out = [head]
    comp = n // 2
    side_from = n - 20
    parent = "null"
    for i in range(n):
        eid = f"e{i:07d}"
        ts = f"2026-01-01T00:{(i // 60000) % 60:02d}:{(i // 1000) % 60:02d}.{i % 1000:03d}Z"
        if i == n - 10:
            parent = f'"e{side_from:07d}"'
        if i % 1000 == 999:
            line = (
                f'{{"type":"label","id":"{eid}","parent_id":{parent},"timestamp":"{ts}",'
                f'"target_id":"e{i - 5:07d}","label":"L{i}"}}\n'
            )
        elif i == comp:
            line = (
                f'{{"type":"compaction","id":"{eid}","parent_id":{parent},"timestamp":"{ts}",'
                f'"summary":"s","first_kept_entry_id":"e{comp - 10:07d}","tokens_before":1,'
                f'"retained_tail":null,"details":null,"usage":null,"from_hook":false}}\n'
            )
        else:
            line = (
                f'{{"type":"message","id":"{eid}","parent_id":{parent},"timestamp":"{ts}",'
                f'"message":{{"role":"user","content":"m{i}","timestamp":{i}}}}}\n'
            )
        out.append(line.encode() if isinstance(line, str) else line)
        parent = f'"{eid}"'
    return b"".join(out), {"comp": comp, "side_from": side_from}


def test_fork_of_a_100k_entry_session(jrepo: JsonlSessionRepo) -> None:
    n = 100_000
    data, info = big_session_bytes(n)
    root = pathlib.Path(jrepo.root_dir)
    (root / "big.jsonl").write_bytes(data)
    src_lines = data.split(b"\n")[1:-1]

    with jrepo.fork("big") as f:
        fid = f.id
        assert len(f.storage) == n
        assert f.get_leaf_id() == f"e{n - 1:07d}"
        assert f.get_label(f"e{994:07d}") == "L999"
    forked = (root / f"{fid}.jsonl").read_bytes().split(b"\n")
    assert forked[1:-1] == src_lines  # a full copy is byte-for-byte

    # "at" the end of the main line: the path starts at the compaction's first kept entry.
    main_end = info["side_from"] + 9
    with jrepo.fork("big", entry_id=f"e{main_end:07d}", position="at") as f:
        fid = f.id
        entries_n = len(f.storage)
        assert f.get_leaf_id() == f"e{main_end:07d}"
        first = f.storage.get_entries(limit=1)[0]
        assert first.id == f"e{info['comp'] - 10:07d}" and first.parent_id is None
        assert report_ok(f)
    forked = (root / f"{fid}.jsonl").read_bytes().split(b"\n")[1:-1]
    copied = main_end - (info["comp"] - 10) + 1
    assert entries_n == len(forked) == copied
    # Only the first line was rewritten; every other line is the source's.
    start = info["comp"] - 10
    assert forked[1:] == src_lines[start + 1 : main_end + 1]
    assert json.loads(forked[0]) == {
        **json.loads(src_lines[start]),
        "parent_id": None,
    }
    metas = {m.id: m for m in jrepo.list()}
    assert metas["big"].entry_count == n
    assert metas["big"].first_message == "m0"


def report_ok(session: st.Session) -> bool:
    report = getattr(session.storage, "load_report", None)
    return report is None or report.ok


def test_fork_of_a_damaged_file_is_clean(jrepo: JsonlSessionRepo) -> None:
    root = pathlib.Path(jrepo.root_dir)

    def line(eid: str, parent: str | None, type: str = "message", **fields: Any) -> bytes:
        obj: dict[str, Any] = {"type": type, "id": eid, "parent_id": parent, "timestamp": T0}
        if type == "message":
            obj["message"] = {"role": "user", "content": eid, "timestamp": 1}
        obj.update(fields)
        return json.dumps(obj, separators=(",", ":")).encode()

    header = json.dumps(
        {"type": "session", "version": 3, "id": "dmg", "timestamp": T0, "cwd": "/w"},
        separators=(",", ":"),
    ).encode()
    body = [
        line("a", None),
        line("b", "ghost"),  # dangling parent: the reader makes it a root
        b"{not json",
        line("a", None),  # duplicate id: ignored by the reader
        line("lab", "b", "label", target_id="nowhere", label="x"),  # unknown target
        line("c", "lab"),
        line("lv", "c", "leaf", target_id="nowhere"),  # unknown leaf target
        line("d", "c"),
    ]
    (root / "dmg.jsonl").write_bytes(header + b"\n" + b"\n".join(body) + b"\n")
    with jrepo.fork("dmg") as f:
        entries = dump(f)
        assert [e.id for e in entries] == ["a", "b", "c", "d"]
        assert [e.parent_id for e in entries] == [None, None, "b", "c"]
        assert f.get_leaf_id() == "d"
        assert report_ok(f)
        fid = f.id
    with jrepo.open(fid) as again:
        assert report_ok(again)


def test_first_message_is_cut_to_a_thousand_characters(repo: SessionRepo) -> None:
    with repo.create(cwd="/w", session_id="long") as s:
        s.append_message(st.UserMessage("x" * 5000, timestamp=0))
    with repo.create(cwd="/w", session_id="exact") as s:
        s.append_message(st.UserMessage("y" * 1000, timestamp=0))
    by_id = {m.id: m for m in repo.list()}
    assert by_id["long"].first_message == "x" * 999 + "…"
    assert by_id["exact"].first_message == "y" * 1000


def test_an_in_memory_share_sees_the_document_and_closes_alone(msgs: Any) -> None:
    doc = st.InMemorySessionStorage()
    share = doc.share()
    first = st.Session(share).append_message(msgs.user("via the share"))
    assert doc.get_entry(first) is not None and len(doc) == 1
    share.close()
    assert share.closed and not doc.closed
    with pytest.raises(SessionError) as exc:
        share.get_entry(first)
    assert exc.value.code == "closed"
    assert doc.size_bytes == len(doc.to_jsonl())
    again = doc.share()
    doc.close()
    assert again.closed
