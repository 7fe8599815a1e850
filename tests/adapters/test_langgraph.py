"""SessionTreeSaver under a real LangGraph ``StateGraph``: a counter and an
``add_messages`` channel run 30+ steps, a new process resumes the thread, time travel
(``update_state`` on a past checkpoint) starts a branch, and both branches are LangGraph's
history and the session's tree. Plus what the conformance suite does not look at: list
deltas on disk, the one-writer rule, serde, the header check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.graph", reason="needs sessiontree[langgraph]")

from langchain_core.messages import HumanMessage

from sessiontree import InMemorySessionRepo, JsonlSessionRepo, SessionError
from sessiontree.adapters.langgraph import SessionTreeSaver, session_id_for

from ._langgraph_counter import build, first_input, summary

HERE = Path(__file__).parent


def config(thread: str, **extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, **extra}, "recursion_limit": 1000}


def blobs_of(root: Path, thread: str) -> list[dict[str, Any]]:
    """Every channel value stored (``{"ch": channel, **blob}``), in file order."""
    return [
        {"ch": channel, **blob}
        for e in custom_entries(root, thread)
        if e["custom_type"] == "langgraph/checkpoint"
        for channel, blob in e["data"]["blobs"].items()
    ]


def custom_entries(root: Path, thread: str) -> list[dict[str, Any]]:
    path = JsonlSessionRepo(root).path_for(session_id_for(thread))
    lines = [json.loads(line) for line in Path(path).read_text().splitlines()]
    return [line for line in lines if line.get("type") == "custom"]


def test_graph_runs_resumes_in_a_new_process_and_time_travels(tmp_path: Path) -> None:
    root = tmp_path / "threads"
    with SessionTreeSaver(JsonlSessionRepo(root)) as saver:
        app = build(saver)
        out = app.invoke(first_input(32), config("t1"))
        assert out["count"] == 32
        assert len(out["messages"]) == 1 + 2 * 32
        assert len(list(app.get_state_history(config("t1")))) == 34  # input, 33 steps

    # A new process, a new saver over the same directory: the thread goes on.
    run = subprocess.run(
        [sys.executable, str(HERE / "_langgraph_counter.py"), str(root), "t1", "40"],
        capture_output=True,
        text=True,
        check=True,
        cwd=HERE.parent.parent,
    )
    resumed = json.loads(run.stdout)
    assert resumed["before"]["count"] == 32
    assert resumed["after"]["count"] == 40
    assert resumed["after"]["messages"][:3] == ["count", "adding 1", "1"]
    assert len(resumed["after"]["messages"]) == 1 + 2 * 40

    with SessionTreeSaver(JsonlSessionRepo(root)) as saver:
        app = build(saver)
        history = list(app.get_state_history(config("t1")))
        past = next(s for s in history if s.values.get("count") == 10 and s.next != ())
        assert summary(past.values)["messages"][-1] == "10"
        # Time travel: change the past state, then go on from there.
        forked = app.update_state(
            past.config, {"messages": [HumanMessage("a detour", id="detour")], "target": 15}
        )
        final = app.invoke(None, forked)
        assert final["count"] == 15
        texts = summary(final)["messages"]
        assert texts[:21] == summary(past.values)["messages"]
        assert texts[21] == "a detour"
        assert texts[-1] == "15"
        assert app.get_state(config("t1")).values["count"] == 15  # the newest branch

        both = list(app.get_state_history(config("t1")))
        ids = {s.config["configurable"]["checkpoint_id"] for s in both}
        assert {s.config["configurable"]["checkpoint_id"] for s in history} <= ids
        # Every checkpoint of both branches reads back its own messages.
        for snap in both:
            if not snap.values.get("messages"):
                continue  # the input checkpoint: nothing in the channels yet
            n, texts = snap.values.get("count", 0), [m.content for m in snap.values["messages"]]
            detour = ["a detour"] if "a detour" in texts else []
            assert texts[0] == "count" and len(texts) == 1 + 2 * n + len(detour)
            assert [t for t in texts if t != "a detour"][-1] == (str(n) if n else "count")
        counts = sorted(s.values.get("count", 0) for s in both)
        assert counts.count(40) >= 1 and counts.count(15) >= 2  # both branches' steps
        # The new branch's parent chain runs through the past checkpoint.
        final_config = app.get_state(config("t1")).config
        chain: list[str] = []
        cfg = final_config
        while cfg is not None:
            snap = app.get_state(cfg)
            chain.append(snap.config["configurable"]["checkpoint_id"])
            cfg = snap.parent_config
        assert past.config["configurable"]["checkpoint_id"] in chain
        assert final_config["configurable"]["checkpoint_id"] == chain[0]

    # The session's tree is LangGraph's: the past checkpoint's entry has two branches.
    entries = custom_entries(root, "t1")
    by_id = {e["id"]: e for e in entries}
    checkpoints = [e for e in entries if e["custom_type"] == "langgraph/checkpoint"]
    assert len(checkpoints) == len(both)
    past_entry = next(
        e for e in checkpoints if e["data"]["id"] == past.config["configurable"]["checkpoint_id"]
    )
    children: dict[str | None, int] = {}
    for e in entries:
        children[e["parent_id"]] = children.get(e["parent_id"], 0) + 1
    # Its own writes come first; the branches start under its last writes entry.
    tail = past_entry["id"]
    while True:
        below = [
            e for e in entries if e["parent_id"] == tail and e["custom_type"] == "langgraph/writes"
        ]
        if not below:
            break
        tail = below[-1]["id"]
    assert children[tail] == 2
    assert all(e["parent_id"] in by_id or e["parent_id"] is None for e in entries)


def test_a_growing_message_list_is_stored_as_deltas(tmp_path: Path) -> None:
    root = tmp_path / "threads"
    with SessionTreeSaver(JsonlSessionRepo(root)) as saver:
        app = build(saver)
        app.invoke(first_input(60), config("t"))
    messages = [b for b in blobs_of(root, "t") if b["ch"] == "messages"]
    deltas = [b for b in messages if "base" in b]
    assert len(deltas) >= 60
    # Each step's two messages are stored once: in the node's write, which the delta names
    # (unless the write came after the next checkpoint: LangGraph's async durability
    # saves both in the background; then the delta holds the two messages itself).
    named = [b for b in deltas if "src" in b]
    assert all(len(b["src"]) == 1 and "items" not in b for b in named)
    assert all(len(b["items"]) == 2 for b in deltas if "src" not in b)
    assert len(named) >= len(deltas) // 2
    writes = [e for e in custom_entries(root, "t") if e["custom_type"] == "langgraph/writes"]
    assert sum(1 for w in writes for row in w["data"]["w"] if row[1] == "messages") >= 60
    # And they read back whole, in a new saver (nothing cached).
    with SessionTreeSaver(JsonlSessionRepo(root)) as saver:
        values = build(saver).get_state(config("t")).values
        assert len(values["messages"]) == 121
        assert values["messages"][-1].content == "60"


def test_a_list_that_does_not_extend_its_parent_is_stored_whole() -> None:
    saver = SessionTreeSaver(InMemorySessionRepo())
    base = {"thread_id": "t", "checkpoint_ns": ""}
    cp = {"v": 1, "id": "1", "ts": "", "versions_seen": {}, "updated_channels": None}
    first = saver.put(
        {"configurable": base},
        {**cp, "channel_values": {"l": [1, 2, 3]}, "channel_versions": {"l": 1}},
        {},
        {"l": 1},
    )
    saver.put(
        first,
        {**cp, "id": "2", "channel_values": {"l": [1, 9, 3, 4]}, "channel_versions": {"l": 2}},
        {},
        {"l": 2},
    )
    got = saver.get_tuple({"configurable": base})
    assert got is not None and got.checkpoint["channel_values"] == {"l": [1, 9, 3, 4]}
    older = saver.get_tuple(first)
    assert older is not None and older.checkpoint["channel_values"] == {"l": [1, 2, 3]}
    saver.close()


def test_a_second_process_gets_locked_not_a_second_history(tmp_path: Path) -> None:
    root = tmp_path / "threads"
    with SessionTreeSaver(JsonlSessionRepo(root)) as saver:
        build(saver).invoke(first_input(2), config("t"))
        code = (
            "import sys\n"
            "from sessiontree import JsonlSessionRepo, SessionError\n"
            "from sessiontree.adapters.langgraph import SessionTreeSaver\n"
            "s = SessionTreeSaver(JsonlSessionRepo(sys.argv[1]), lock_timeout=0.2)\n"
            "try:\n"
            "    s.get_tuple({'configurable': {'thread_id': 't'}})\n"
            "except SessionError as exc:\n"
            "    print(exc.code)\n"
        )
        run = subprocess.run(
            [sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True
        )
        assert run.stdout.strip() == "locked"


def test_savers_of_one_process_share_the_thread() -> None:
    repo = InMemorySessionRepo()
    a, b = SessionTreeSaver(repo), SessionTreeSaver(repo)
    build(a).invoke(first_input(3), config("t"))
    assert build(b).get_state(config("t")).values["count"] == 3
    with SessionTreeSaver(repo, lock_timeout=0) as c:  # listing every thread: no wait
        assert {t.config["configurable"]["thread_id"] for t in c.list(None)} == {"t"}
    a.close()
    assert build(b).get_state(config("t")).values["count"] == 3
    b.close()
    with pytest.raises(SessionError) as info:
        b.get_tuple({"configurable": {"thread_id": "t"}})
    assert info.value.code == "closed"


def test_encrypted_serde_is_used_for_every_value(tmp_path: Path) -> None:
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    class Xor:
        """A toy cipher (LangGraph's ``CipherProtocol``): enough to show every value
        goes through the saver's serde, without pycryptodome."""

        def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
            return "xor", bytes(b ^ 0x5A for b in plaintext)

        def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
            assert ciphername == "xor"
            return bytes(b ^ 0x5A for b in ciphertext)

    serde = EncryptedSerializer(Xor())
    root = tmp_path / "threads"
    with SessionTreeSaver(JsonlSessionRepo(root), serde=serde) as saver:
        app = build(saver)
        app.invoke(first_input(3), config("t"))
        assert app.get_state(config("t")).values["count"] == 3
    text = Path(JsonlSessionRepo(root).path_for(session_id_for("t"))).read_text()
    blobs = blobs_of(root, "t")
    assert {b.get("t", "").split("+")[-1] for b in blobs if "t" in b} <= {"xor", "empty"}
    assert any("items" in b for b in blobs)  # deltas of encrypted items
    assert all(tag.startswith("msgpack+xor") for b in blobs for tag, _ in b.get("items", []))
    assert "adding 2" not in text


def test_a_session_of_another_thread_is_refused() -> None:
    repo = InMemorySessionRepo()
    repo.create(session_id=session_id_for("t"), metadata={"langgraph": {"thread_id": "x"}}).close()
    with SessionTreeSaver(repo) as saver, pytest.raises(SessionError) as info:
        saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert info.value.code == "invalid_argument"


def test_prune_keep_latest_leaves_a_valid_session_that_reads_the_same(tmp_path: Path) -> None:
    root = tmp_path / "threads"
    repo = JsonlSessionRepo(root)
    with SessionTreeSaver(repo) as saver:
        app = build(saver)
        app.invoke(first_input(20), config("t"))
        before = summary(app.get_state(config("t")).values)
        size = Path(repo.path_for(session_id_for("t"))).stat().st_size
        saver.prune(["t"])
        assert len(list(app.get_state_history(config("t")))) == 1
        assert summary(app.get_state(config("t")).values) == before
        assert Path(repo.path_for(session_id_for("t"))).stat().st_size < size
        # And it goes on from there.
        app.update_state(config("t"), {"target": 22})
        assert app.invoke(None, config("t"))["count"] == 22
    with repo.open(session_id_for("t")) as session:
        assert session.get_leaf_id() is not None
    assert sorted(m.id for m in repo.list()) == [session_id_for("t")]
