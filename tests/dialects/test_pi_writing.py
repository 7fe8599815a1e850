"""Continuing pi files: what sessiontree appends, pi can read (checked by an independent
reader of pi's documented rules), and the bytes already there stay as they were."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st
from sessiontree.dialects.pi import LEAF_MARKER, convert_file, pi_role

from .test_pi_fixtures import FILES, FIXTURES


def _version(name: str) -> int:
    header = json.loads((FIXTURES / name).read_bytes().split(b"\n")[0])
    return int(header.get("version", 1))


V3 = sorted(n for n in FILES if _version(n) == 3)
OLD = sorted(n for n in FILES if _version(n) < 3)


# ------------------------------------------------------------------ pi's rules, on raw JSON


def pi_read(path: Path) -> dict[str, Any]:
    """What pi makes of a file, by its documented rules (fixtures/pi/README.md), read
    from the raw lines without sessiontree."""
    entries: list[dict[str, Any]] = []
    lines = path.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    for raw in lines[1:]:
        try:
            e = json.loads(raw)
        except ValueError:
            continue  # unparseable lines are skipped
        if isinstance(e, dict) and e.get("type") != "session":
            entries.append(e)
    by_id = {e["id"]: e for e in entries}
    leaf = entries[-1]["id"] if entries else None
    branch: list[dict[str, Any]] = []
    at = by_id.get(leaf) if leaf else None
    while at is not None:
        branch.append(at)
        parent = at.get("parentId")
        at = by_id.get(parent) if parent else None
    branch.reverse()
    roles: list[str] = []
    compactions = [i for i, e in enumerate(branch) if e["type"] == "compaction"]

    def emit(e: dict[str, Any]) -> None:
        if e["type"] == "message":
            roles.append(e["message"]["role"])
        elif e["type"] == "custom_message":
            roles.append("custom")
        elif e["type"] == "branch_summary":
            roles.append("branchSummary")

    if compactions:
        c = compactions[-1]
        roles.append("compactionSummary")
        kept = branch[c]["firstKeptEntryId"]
        start = next((i for i, e in enumerate(branch[:c]) if e["id"] == kept), c)
        for e in branch[start:c] + branch[c + 1 :]:
            emit(e)
    else:
        for e in branch:
            emit(e)
    thinking = "off"
    for e in branch:
        if e["type"] == "thinking_level_change":
            thinking = e["thinkingLevel"]
    names = [e.get("name", "").strip() for e in entries if e["type"] == "session_info"]
    labels: dict[str, str] = {}
    for e in entries:
        if e["type"] == "label":
            if e.get("label"):
                labels[e["targetId"]] = e["label"]
            else:
                labels.pop(e["targetId"], None)
    return {
        "header": header,
        "entries": entries,
        "leaf": leaf,
        "branch": [e["id"] for e in branch],
        "roles": roles,
        "thinking": thinking,
        "name": (names[-1] or None) if names else None,
        "labels": labels,
    }


def pi_copy(tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copyfile(FIXTURES / name, dest)
    dest.chmod(0o600)
    return dest


def continue_session(path: Path) -> list[str]:
    """Appends one of everything sessiontree can write; returns the new entry ids."""
    with st.Session(st.JsonlSessionStorage.open(path, durability="flush")) as s:
        start = s.get_leaf_id()
        assert start is not None
        ids = [
            s.append_model_change("openai", "gpt-5.1-codex"),
            s.append_thinking_level_change("high"),
            s.append_message(st.UserMessage("continue from sessiontree")),
            s.append_message(
                st.AssistantMessage(
                    [
                        st.ThinkingContent("let me look", signature="sig"),
                        st.TextContent("Looking."),
                        st.ToolCall("call_9", "read", {"path": "a.py", "someKey": 1}),
                    ],
                    provider="openai",
                    model="gpt-5.1-codex",
                    usage=st.Usage(input=10, output=5, cache_read=2, total_tokens=17),
                    stop_reason="tool_use",
                )
            ),
            s.append_message(
                st.ToolResultMessage(
                    "call_9", "read", [st.TextContent("print(1)")], details={"x": 1}
                )
            ),
        ]
        s.append_label(ids[2], "from-sessiontree")
        s.append_session_info("Continued by sessiontree")
        # Back to where we started, with a summary of the branch left.
        s.move_to(start, summary={"summary": "Tried reading a.py."})
        ids.append(s.append_message(st.UserMessage("second branch")))
        # A plain move, then an append: the marker keeps pi on the same branch.
        s.move_to(ids[2])
        ids.append(s.append_custom_message_entry("note", "a note", display=False))
        return ids


@pytest.mark.parametrize("name", V3)
def test_appends_read_back_as_pi_reads_them(tmp_path: Path, name: str) -> None:
    path = pi_copy(tmp_path, name)
    before = path.read_bytes()
    # A torn tail is cut into a side file by the writer, as in sessiontree's own files.
    complete = before[: before.rindex(b"\n") + 1]
    ids = continue_session(path)
    after = path.read_bytes()
    assert after.startswith(complete), "bytes already in the file changed"
    new_lines = [json.loads(line) for line in after[len(complete) :].splitlines()]
    for line in new_lines:
        assert "parent_id" not in line and "parentId" in line, line
    pi = pi_read(path)
    with st.Session(st.JsonlSessionStorage.open(path, readonly=True)) as again:
        assert again.storage.dialect == "pi"
        assert again.get_leaf_id() == pi["leaf"] == ids[-1]
        assert [e.id for e in again.get_branch()] == pi["branch"] or [
            e.id for e in again.storage.get_path_to_root(again.get_leaf_id())
        ] == pi["branch"]
        ctx = again.build_context()
        assert [pi_role(m) for m in ctx.messages] == pi["roles"]
        assert ctx.thinking_level == pi["thinking"]
        assert again.storage.get_session_name() == pi["name"] == "Continued by sessiontree"
        assert again.storage.get_labels() == pi["labels"]
        assert pi["labels"][ids[2]] == "from-sessiontree"
    # What pi sees of the new entries, in its own names.
    by_id = {e["id"]: e for e in pi["entries"]}
    assert by_id[ids[0]]["modelId"] == "gpt-5.1-codex"
    assert by_id[ids[1]]["thinkingLevel"] == "high"
    reply = by_id[ids[3]]["message"]
    assert reply["stopReason"] == "toolUse"
    assert [b["type"] for b in reply["content"]] == ["thinking", "text", "toolCall"]
    assert reply["content"][0]["thinkingSignature"] == "sig"
    assert reply["content"][2]["arguments"] == {"path": "a.py", "someKey": 1}
    assert reply["usage"]["cacheRead"] == 2 and reply["usage"]["totalTokens"] == 17
    result = by_id[ids[4]]["message"]
    assert result["role"] == "toolResult" and result["toolCallId"] == "call_9"
    markers = [e for e in pi["entries"] if e.get("customType") == LEAF_MARKER]
    # Each move is a marker under its target (the move before the summary too).
    assert markers and markers[-1]["parentId"] == ids[2]
    summary = by_id[by_id[ids[5]]["parentId"]]
    assert summary["type"] == "branch_summary" and summary["summary"] == "Tried reading a.py."
    assert "fromId" in summary and "from_id" not in summary


def test_a_v1_or_v2_file_is_only_read(tmp_path: Path) -> None:
    for name in OLD:
        path = pi_copy(tmp_path, name)
        before = path.read_bytes()
        with pytest.raises(st.SessionError) as e:
            st.JsonlSessionStorage.open(path)
        assert e.value.code == "readonly"
        assert "convert" in str(e.value)
        assert path.read_bytes() == before


def test_conversion_to_v3_is_what_pi_migrates_to(tmp_path: Path) -> None:
    for name in OLD:
        dest = convert_file(FIXTURES / name, tmp_path / f"v3-{name}", to="pi")
        header = json.loads(dest.read_bytes().split(b"\n")[0])
        assert header["version"] == 3 and "parent_session" not in header
        with (
            st.JsonlSessionStorage.open(FIXTURES / name, readonly=True) as old,
            st.JsonlSessionStorage.open(dest, readonly=True) as new,
        ):
            assert new.format_version == 3
            assert [e.id for e in new.get_entries()] == [e.id for e in old.get_entries()]
            assert new.get_entries() == old.get_entries()
        # The converted file takes appends (pi would find nothing to migrate).
        with st.Session(st.JsonlSessionStorage.open(dest, durability="none")) as s:
            s.append_message(st.UserMessage("after the conversion"))
        assert pi_read(dest)["roles"][-1] == "user"
        with pytest.raises(st.SessionError) as e:
            convert_file(FIXTURES / name, dest, to="pi")
        assert e.value.code == "exists"


def test_conversion_both_ways_is_lossless(tmp_path: Path) -> None:
    for name in V3:
        ours = convert_file(FIXTURES / name, tmp_path / f"st-{name}", to="sessiontree")
        back = convert_file(ours, tmp_path / f"pi-{name}", to="pi")
        with st.JsonlSessionStorage.open(ours, readonly=True) as a:
            assert a.dialect == "sessiontree"
            with st.JsonlSessionStorage.open(FIXTURES / name, readonly=True) as pi:
                # A re-flushed id's later copies are one more entry in pi's dialect only
                # (FORMAT.md: a sessiontree file keeps an id's first line).
                entries = pi.get_entries()
                firsts = {e.id: i for i, e in reversed(list(enumerate(entries)))}
                assert a.get_entries() == [e for i, e in enumerate(entries) if firsts[e.id] == i]
                assert a.get_leaf_id() == pi.get_leaf_id()
        # Back in pi's dialect, every complete line reads as pi wrote it.
        original = [
            json.loads(line)
            for line in (FIXTURES / name).read_bytes().split(b"\n")[1:]
            if line.strip() and _parses(line)
        ]
        again = [json.loads(line) for line in back.read_bytes().split(b"\n")[1:] if line.strip()]
        assert again == original


def _parses(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def test_a_fork_of_a_pi_session_is_a_pi_session(tmp_path: Path) -> None:
    path = pi_copy(tmp_path, "d-branching.jsonl")
    with st.JsonlSessionStorage.open(path, readonly=True) as s:
        leaf = s.get_leaf_id()
        want = [e.id for e in s.get_path_to_root(leaf)]
    (tmp_path / "repo").mkdir()
    repo = st.JsonlSessionRepo(tmp_path / "repo")
    shutil.copyfile(path, tmp_path / "repo" / "d.jsonl")
    fork = repo.fork("d", entry_id=leaf, position="at")
    try:
        assert fork.storage.dialect == "pi"
        fork.append_message(st.UserMessage("in the fork"))
    finally:
        fork.close()
    (fork_path,) = [p for p in (tmp_path / "repo").glob("*.jsonl") if p.name != "d.jsonl"]
    pi = pi_read(fork_path)
    assert "parentSession" in pi["header"]
    assert pi["branch"][: len(want)] == want
    assert pi["roles"][-1] == "user"


def test_hostile_pi_files(tmp_path: Path, write_session: Any) -> None:
    ts = '"timestamp":"2026-01-01T00:00:00.000Z"'
    pi_header = ('{"type":"session","version":3,"id":"s",' + ts + ',"cwd":"/"}\n').encode()
    pi_line = ('{"type":"custom","id":"a","parentId":null,' + ts + ',"customType":"x"}\n').encode()
    our_line = (
        '{"type":"custom","id":"b","parent_id":"a",' + ts + ',"custom_type":"x","data":null}\n'
    ).encode()
    both = b'"cwd":"/","parentSession":null,"parent_session":null'
    cases = {
        "mixed.jsonl": pi_header + pi_line + our_line,
        "mixed-ours.jsonl": pi_header.replace(b'"cwd":"/"', b'"cwd":"/","parent_session":null')
        + our_line.replace(b'"a"', b"null")
        + pi_line,
        "v4.jsonl": pi_header.replace(b'"version":3', b'"version":4') + pi_line,
        "both-keys.jsonl": pi_header.replace(b'"cwd":"/"', both) + pi_line,
    }
    for name, data in cases.items():
        path = write_session(header=b"", name=name)
        path.write_bytes(data)
        for readonly in (True, False):
            with pytest.raises(st.SessionError) as e:
                st.JsonlSessionStorage.open(path, readonly=readonly)
            assert e.value.code == "corrupt", name
            assert "dialect" in str(e.value) or "newer" in str(e.value), str(e.value)
        assert path.read_bytes() == data
    # camelCase keys of the wrong type: that line is reported, the rest read.
    bad = pi_line.replace(b'"customType":"x"', b'"customType":5').replace(b'"a"', b'"c"')
    path = write_session(header=b"", name="wrong-type.jsonl")
    path.write_bytes(pi_header + pi_line + bad)
    with st.JsonlSessionStorage.open(path, readonly=True) as s:
        assert s.dialect == "pi" and len(s) == 1
        (issue,) = s.load_report.issues
        assert issue.kind == "malformed" and issue.line == 3


@pytest.mark.skipif(
    not os.environ.get("SESSIONTREE_PI_1GB"), reason="set SESSIONTREE_PI_1GB=1 (writes 1 GiB)"
)
def test_a_one_gigabyte_pi_file(tmp_path: Path) -> None:
    """pi cannot open a file over 512 MiB; sessiontree reads a 1 GiB one like any other."""
    path = tmp_path / "big.jsonl"
    text = "x" * (64 << 10)
    n = (1 << 30) // len(text) + 1
    with path.open("wb") as f:
        f.write((FIXTURES / "a-linear.jsonl").read_bytes().split(b"\n")[0] + b"\n")
        parent = "null"
        for i in range(n):
            entry = (
                f'{{"type":"message","id":"m{i:07d}","parentId":{parent},'
                f'"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user",'
                f'"content":[{{"type":"text","text":"{text}"}}],"timestamp":1}}}}\n'
            )
            f.write(entry.encode())
            parent = f'"m{i:07d}"'
    assert path.stat().st_size > 1 << 30
    with st.JsonlSessionStorage.open(path, readonly=True, index=False) as s:
        assert s.dialect == "pi" and len(s) == n and s.load_report.ok
        assert s.get_leaf_id() == f"m{n - 1:07d}"
        last = s.get_entry(f"m{n - 1:07d}")
        assert isinstance(last, st.MessageEntry) and isinstance(last.message, st.UserMessage)


def test_a_first_entry_longer_than_the_peek(tmp_path: Path) -> None:
    """The dialect is told from the first whole entry, however long it is."""
    header = (FIXTURES / "a-linear.jsonl").read_bytes().split(b"\n")[0] + b"\n"
    entry = (
        '{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z",'
        '"message":{"role":"user","content":"' + "y" * (300 << 10) + '","timestamp":1}}\n'
    ).encode()
    path = tmp_path / "long.jsonl"
    path.write_bytes(header + entry)
    with st.JsonlSessionStorage.open(path, readonly=True) as s:
        assert s.dialect == "pi" and len(s) == 1 and s.load_report.ok
    memory = st.InMemorySessionStorage.from_jsonl(header + entry)
    assert memory.dialect == "pi" and len(memory) == 1


def test_a_parent_id_key_in_application_data_is_not_pis(write_session: Any) -> None:
    """Only a top-level ``parentId`` says pi: one inside ``data`` of a malformed line of
    ours leaves that line reported, the file read."""
    bad = (
        b'{"type":"custom","id":"x","timestamp":"2026-01-01T00:00:00.000Z",'
        b'"custom_type":"t","data":{"parentId":"y"}}\n'
    )
    good = (
        b'{"type":"custom","id":"a","parent_id":null,"timestamp":"2026-01-01T00:00:00.000Z",'
        b'"custom_type":"t","data":null}\n'
    )
    path = write_session(good, bad)
    with st.JsonlSessionStorage.open(path, readonly=True) as s:
        assert s.dialect == "sessiontree" and len(s) == 1
        (issue,) = s.load_report.issues
        assert issue.kind == "malformed" and "parent_id" in issue.message


def _pi_user(entry_id: str, parent: str | None, text: str) -> str:
    return json.dumps(
        {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1},
        }
    )


def test_a_re_flushed_id_is_kept_as_pi_keeps_it(tmp_path: Path) -> None:
    # `b` comes again, hung under its own child: pi would list it twice, and its walks
    # (the later copy wins its id map) would loop; sessiontree lists it twice, the id names
    # the first copy, and the tree stays a tree.
    header = (
        '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}'
    )
    lines = [
        header,
        _pi_user("a", None, "one"),
        _pi_user("b", "a", "two"),
        _pi_user("c", "b", "three"),
        _pi_user("b", "c", "two again"),
        _pi_user("d", "b", "four"),
    ]
    path = tmp_path / "re-flushed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    before = path.read_bytes()
    with st.JsonlSessionStorage.open(path, readonly=True) as s:
        assert len(s) == 5
        assert [e.id for e in s.get_entries()] == ["a", "b", "c", "b", "d"]
        texts = [e.message.content for e in s.get_entries() if isinstance(e, st.MessageEntry)]
        assert texts == ["one", "two", "three", "two again", "four"]
        b = s.get_entry("b")
        assert isinstance(b, st.MessageEntry) and b.message.content == "two"
        assert s.get_leaf_id() == "d"
        assert [e.id for e in s.get_path_to_root("d")] == ["a", "b", "d"]
        assert s.get_session_stats().message_count == 5
        (issue,) = s.load_report.issues
        assert issue.kind == "duplicate_id" and issue.line == 5 and "listed again" in issue.message
        (root,) = s.get_tree()
        (node_b,) = root.children
        assert [c.entry.id for c in node_b.children] == ["c", "d"]
        (again,) = node_b.children[0].children
        assert again.entry.id == "b" and again.children == ()
    # A writer continues it; a fork of it is a pi file with the same entries.
    with st.Session(st.JsonlSessionStorage.open(path, durability="none")) as session:
        session.append_message(st.UserMessage("five"))
    assert path.read_bytes().startswith(before)
    with st.JsonlSessionStorage.open(path, readonly=True) as s:
        assert [e.id for e in s.get_path_to_root(s.get_leaf_id())][:3] == ["a", "b", "d"]
        assert len(s) == 6
    (tmp_path / "repo").mkdir()
    shutil.copyfile(path, tmp_path / "repo" / "r.jsonl")
    fork = st.JsonlSessionRepo(tmp_path / "repo").fork("r")
    try:
        assert [e.id for e in fork.storage.get_entries()][:5] == ["a", "b", "c", "b", "d"]
    finally:
        fork.close()


def test_a_sessiontree_file_keeps_an_ids_first_line(write_session: Any, lines: Any) -> None:
    # FORMAT.md's rule for our own dialect is unchanged: the later line is reported, not kept.
    a, b = lines.user("a", None), lines.user("b", "a")
    path = write_session(a, b, a)
    with st.JsonlSessionStorage.open(path, readonly=True) as s:
        assert s.dialect == "sessiontree"
        assert [e.id for e in s.get_entries()] == ["a", "b"]
        assert dict(s.load_report.counts) == {"duplicate_id": 1}
