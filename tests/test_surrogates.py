"""Text UTF-8 cannot encode (a lone surrogate) is refused at every public entry point.

A ``str`` holding a lone surrogate (``"\\ud800"``) cannot be written to a session file, and
the engine's binding raises a bare ``UnicodeEncodeError`` when it takes one. Every entry
point that hands text on refuses it with ``SessionError`` code ``invalid_argument`` (the
``UnicodeEncodeError`` as its cause), lookups too (``get_entry`` included: like a value of
the wrong type, not like an unknown id); session ids keep their ``invalid_id``. Nothing is
written, and the session stays usable. The framework adapters raise what the framework's
own stores raise for a bad argument: ``ValueError`` (our ``invalid_argument`` is one) for
the Claude Agent SDK and the OpenAI Agents SDK, pydantic-ai's ``UserError`` (also our
``invalid_argument``) for pydantic-ai.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import sessiontree as st
from sessiontree.repo.fork import get_entries_to_fork

BAD = "\ud800"  # a lone high surrogate
BAD_IN_TEXT = "ok\udfffok"  # a lone low surrogate inside ASCII
# An undecodable file-name byte (os.fsdecode(b"\xff")): a valid path, not valid text.
ESCAPED_BYTE = "\udcff"


def refused(
    call: Callable[[], object], code: str = "invalid_argument", *, cause: bool = True
) -> st.SessionError:
    """Runs ``call``, which must raise ``SessionError`` with ``code`` (and, when ``cause``,
    the ``UnicodeEncodeError`` as ``__cause__``)."""
    with pytest.raises(st.SessionError) as info:
        call()
    err = info.value
    assert err.code == code, err
    if code in ("invalid_argument", "invalid_id"):
        assert isinstance(err, ValueError)
    if cause:
        assert isinstance(err.__cause__, UnicodeEncodeError), err.__cause__
    return err


# --------------------------------------------------------------------------- a session


class Subject:
    """A session (in memory or in a JSONL file) with a few entries, and its bytes."""

    def __init__(self, kind: str, tmp_path: Any) -> None:
        self.kind = kind
        if kind == "memory":
            storage: st.SessionStorage = st.InMemorySessionStorage()
        else:
            self.path = str(tmp_path / "s.jsonl")
            storage = st.JsonlSessionStorage.create(self.path, durability="none")
        self.session = st.Session(storage)
        self.storage = storage
        self.first = self.session.append_message(st.UserMessage("one", timestamp=1))
        self.second = self.session.append_message(st.UserMessage("two", timestamp=2))
        self.label = self.session.append_label(self.first, "start")

    def snapshot(self) -> bytes:
        if self.kind == "memory":
            assert isinstance(self.storage, st.InMemorySessionStorage)
            return self.storage.to_jsonl()
        self.storage.flush()
        with open(self.path, "rb") as f:
            return f.read()

    def still_usable(self) -> None:
        """Reads, appends and moves as before the refusal."""
        session = self.session
        assert session.get_entry(self.first) is not None
        assert session.get_label(self.first) == "start"
        new = session.append_message(st.UserMessage("three", timestamp=3))
        assert [e.id for e in session.get_branch()][-3:] == [self.second, self.label, new]
        session.move_to(self.first)
        assert session.get_leaf_id() == self.first


@pytest.fixture(params=["memory", "jsonl"])
def subject(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Subject]:
    s = Subject(request.param, tmp_path)
    yield s
    s.session.close()


# Each takes the subject and the bad text; ``cause`` is False where the refusal is the
# entry encoder's (an append of text that reaches the file), which raises ``from None``.
SESSION_CALLS: dict[str, tuple[Callable[[Subject, str], object], bool]] = {
    "storage.get_entry": (lambda s, t: s.storage.get_entry(t), True),
    "storage.get_label": (lambda s, t: s.storage.get_label(t), True),
    "storage.get_children": (lambda s, t: s.storage.get_children(t), True),
    "storage.get_path_to_root": (lambda s, t: s.storage.get_path_to_root(t), True),
    "storage.get_path_to_root_or_compaction": (
        lambda s, t: s.storage.get_path_to_root_or_compaction(t),
        True,
    ),
    "storage.get_branch_entries": (
        lambda s, t: s.storage.get_branch_entries(t, known={"x": s.session.get_entry(s.first)}),
        True,
    ),
    "storage.get_context_state_entries": (
        lambda s, t: s.storage.get_context_state_entries(t),
        True,
    ),
    "storage.set_leaf_id": (lambda s, t: s.storage.set_leaf_id(t), True),
    "storage.find_entries": (lambda s, t: s.storage.find_entries(t), True),
    "storage.get_entries(type)": (lambda s, t: s.storage.get_entries(t), True),
    "storage.get_entries(since)": (lambda s, t: s.storage.get_entries(since=t), True),
    "storage.get_first_message": (lambda s, t: s.storage.get_first_message(t), True),
    "storage.get_positions": (lambda s, t: s.storage.get_positions([s.first, t]), True),
    "storage.get_line": (lambda s, t: s.storage.get_line(t), True),
    "storage.get_fork_source": (lambda s, t: s.storage.get_fork_source(t, "at"), True),
    "get_entries_to_fork": (lambda s, t: get_entries_to_fork(s.storage, t), True),
    "session.get_entry": (lambda s, t: s.session.get_entry(t), True),
    "session.get_label": (lambda s, t: s.session.get_label(t), True),
    "session.get_branch": (lambda s, t: s.session.get_branch(t), True),
    "session.move_to": (lambda s, t: s.session.move_to(t), True),
    "session.move_to(summary)": (lambda s, t: s.session.move_to(t, {"summary": "x"}), True),
    "session.append_label(target)": (lambda s, t: s.session.append_label(t, "x"), True),
    "session.append_compaction": (lambda s, t: s.session.append_compaction("x", t, 1), True),
    "session.append_label(label)": (lambda s, t: s.session.append_label(s.first, t), False),
    "session.append_session_info": (lambda s, t: s.session.append_session_info(t), False),
    "session.append_custom_entry": (lambda s, t: s.session.append_custom_entry(t), False),
    "session.append_model_change": (lambda s, t: s.session.append_model_change(t, "m"), False),
    "session.append_message": (
        lambda s, t: s.session.append_message(st.UserMessage(t, timestamp=4)),
        False,
    ),
    "session.move_to(summary text)": (
        lambda s, t: s.session.move_to(s.first, {"summary": t}),
        False,
    ),
}


@pytest.mark.parametrize("text", [BAD, BAD_IN_TEXT], ids=["lone", "inside"])
@pytest.mark.parametrize("name", list(SESSION_CALLS))
def test_session_entry_points_refuse_bad_text(subject: Subject, name: str, text: str) -> None:
    call, cause = SESSION_CALLS[name]
    before = subject.snapshot()
    leaf = subject.session.get_leaf_id()
    refused(lambda: call(subject, text), cause=cause)
    assert subject.snapshot() == before
    assert subject.session.get_leaf_id() == leaf
    subject.still_usable()


def test_the_error_names_the_argument(subject: Subject) -> None:
    err = refused(lambda: subject.storage.get_entries(since=BAD))
    assert err.message.startswith("since is not valid Unicode text")
    assert isinstance(err, st.errors.InvalidArgumentError)


def test_lookups_of_well_formed_unknown_ids_are_unchanged(subject: Subject) -> None:
    # Only text UTF-8 cannot encode is refused: other unknown ids (non-ASCII, or longer
    # than any id may be) answer as before.
    for unknown in ("é-unknown", "x" * 5000):
        assert subject.session.get_entry(unknown) is None
        refused(lambda u=unknown: subject.session.get_label(u), "not_found", cause=False)
        refused(lambda u=unknown: subject.session.move_to(u), "not_found", cause=False)


def test_async_twins_give_the_same_error(subject: Subject) -> None:
    async def main() -> tuple[st.SessionError, st.SessionError]:
        session = st.AsyncSession.wrap(subject.session)
        with pytest.raises(st.SessionError) as got_entry:
            await session.get_entry(BAD)
        with pytest.raises(st.SessionError) as got_label:
            await session.append_label(BAD, "x")
        assert await session.get_entry(subject.first) is not None
        return got_entry.value, got_label.value

    before = subject.snapshot()
    errors = asyncio.run(main())
    for err, sync_call in zip(
        errors,
        [lambda: subject.session.get_entry(BAD), lambda: subject.session.append_label(BAD, "x")],
        strict=True,
    ):
        sync_err = refused(sync_call)
        assert (type(err), err.code, err.message) == (
            type(sync_err),
            sync_err.code,
            sync_err.message,
        )
        assert isinstance(err.__cause__, UnicodeEncodeError)
    assert subject.snapshot() == before
    subject.still_usable()


# --------------------------------------------------------------------------- paths


def test_paths_that_cannot_be_encoded_are_refused(tmp_path: Any) -> None:
    bad = str(tmp_path / f"s{BAD}.jsonl")
    refused(lambda: st.JsonlSessionStorage.create(bad))
    refused(lambda: st.JsonlSessionStorage.open(bad))
    refused(lambda: st.JsonlSessionRepo(str(tmp_path / BAD)))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("dialect", [BAD, 5])
def test_a_bad_dialect_is_refused(tmp_path: Any, dialect: Any) -> None:
    path = str(tmp_path / "s.jsonl")
    refused(lambda: st.JsonlSessionStorage.create(path, dialect=dialect), cause=False)
    assert os.listdir(tmp_path) == []


def test_paths_with_an_undecodable_byte_still_work(tmp_path: Any) -> None:
    # surrogateescape: "\udcff" is the file-name byte 0xff, a path like any other.
    path = str(tmp_path / f"s{ESCAPED_BYTE}.jsonl")
    with st.JsonlSessionStorage.create(path) as storage:
        st.Session(storage).append_message(st.UserMessage("hi", timestamp=1))
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        assert len(storage) == 1
    assert os.listdir(os.fsencode(tmp_path)) == [b"s\xff.jsonl"]


# --------------------------------------------------------------------------- repositories


@pytest.fixture(params=["memory", "jsonl", "pi"])
def repo(request: pytest.FixtureRequest, tmp_path: Any) -> st.SessionRepo:
    if request.param == "memory":
        return st.InMemorySessionRepo()
    if request.param == "pi":
        return st.PiSessionRepo(str(tmp_path / "pi"))
    return st.JsonlSessionRepo(str(tmp_path / "repo"))


def _repo_state(repo: st.SessionRepo) -> Any:
    """The sessions listed, the folders, and the session files with their bytes."""
    listed = sorted(m.id for m in repo.list())
    found: dict[str, bytes | None] = {}
    if isinstance(repo, st.JsonlSessionRepo):
        for folder, dirs, names in os.walk(repo.root_dir):
            for d in dirs:
                found[os.path.join(folder, d)] = None
            for name in names:
                if name.endswith(".jsonl"):
                    with open(os.path.join(folder, name), "rb") as f:
                        found[os.path.join(folder, name)] = f.read()
    return listed, found


# (call, code, whether the UnicodeEncodeError is the cause: not where the header or entry
# encoder refuses the text, which raises ``from None``).
REPO_CALLS: dict[str, tuple[Callable[[st.SessionRepo, str, str], object], str, bool]] = {
    "fork(before)": (lambda r, sid, t: r.fork(sid, entry_id=t), "invalid_argument", True),
    "fork(at)": (
        lambda r, sid, t: r.fork(sid, entry_id=t, position="at"),
        "invalid_argument",
        True,
    ),
    "list(cwd)": (lambda r, sid, t: r.list(cwd=t), "invalid_argument", True),
    "create(cwd)": (lambda r, sid, t: r.create(cwd=t), "invalid_argument", True),
    "create(name)": (lambda r, sid, t: r.create(cwd="/new", name=t), "invalid_argument", True),
    "create(parent_session)": (
        lambda r, sid, t: r.create(cwd="/new", parent_session=t),
        "invalid_argument",
        True,
    ),
    "create(metadata)": (
        lambda r, sid, t: r.create(cwd="/new", metadata={"k": t}),
        "invalid_argument",
        False,
    ),
    # Session ids are file names: text that is not one is ``invalid_id``, as before.
    "create(session_id)": (lambda r, sid, t: r.create(session_id=t), "invalid_id", False),
    "open": (lambda r, sid, t: r.open(t), "invalid_id", False),
    "delete": (lambda r, sid, t: r.delete(t), "invalid_id", False),
}


@pytest.mark.parametrize("name", list(REPO_CALLS))
def test_repo_entry_points_refuse_bad_text(repo: st.SessionRepo, name: str) -> None:
    call, code, cause = REPO_CALLS[name]
    with repo.create(cwd="/w", name="source") as session:
        first = session.append_message(st.UserMessage("one", timestamp=1))
        sid = session.id
    before = _repo_state(repo)
    refused(lambda: call(repo, sid, BAD), code, cause=cause)
    assert _repo_state(repo) == before
    assert BAD not in repo
    # Still usable: the source opens, forks and lists as before.
    with repo.fork(sid, entry_id=first, position="at") as fork:
        assert [e.id for e in fork.get_branch()][-1] == first
    with repo.open(sid) as session:
        assert session.get_session_name() == "source"
    assert len(repo.list(cwd="/w")) == 2


# --------------------------------------------------------------------------- adapters


def _jsonl_lines(repo: st.JsonlSessionRepo) -> dict[str, int]:
    out = {}
    for name in os.listdir(repo.root_dir):
        if name.endswith(".jsonl"):
            with open(os.path.join(repo.root_dir, name), "rb") as f:
                out[name] = f.read().count(b"\n")
    return out


@pytest.mark.parametrize(
    "name",
    [
        "append(project_key)",
        "append(session_id)",
        "append(subpath)",
        "append(uuid)",
        "append(parentUuid)",
        "append(data)",
        "load",
        "list_sessions",
        "list_session_summaries",
        "list_subkeys",
        "delete",
    ],
)
def test_claude_agent_sdk_store(tmp_path: Any, name: str) -> None:
    pytest.importorskip("claude_agent_sdk", reason="the claude-agent-sdk extra is not installed")
    from sessiontree.adapters.claude_agent_sdk import ClaudeAgentSessionStore

    repo = st.JsonlSessionRepo(str(tmp_path))
    key = {"project_key": "p", "session_id": "s"}
    good = {"type": "user", "uuid": "u1", "parentUuid": None}

    def bad_key(part: str) -> dict[str, str]:
        return {**key, part: BAD}

    calls: dict[str, Callable[[ClaudeAgentSessionStore], Any]] = {
        "append(project_key)": lambda c: c.append(bad_key("project_key"), [good]),
        "append(session_id)": lambda c: c.append(bad_key("session_id"), [good]),
        "append(subpath)": lambda c: c.append(bad_key("subpath"), [good]),
        # The bad entry comes second: the first must not be written either.
        "append(uuid)": lambda c: c.append(key, [{"uuid": "u2"}, {"uuid": BAD}]),
        "append(parentUuid)": lambda c: c.append(key, [{"uuid": "u2"}, {"parentUuid": BAD}]),
        "append(data)": lambda c: c.append(key, [{"uuid": "u2"}, {"text": BAD_IN_TEXT}]),
        "load": lambda c: c.load(bad_key("session_id")),
        "list_sessions": lambda c: c.list_sessions(BAD),
        "list_session_summaries": lambda c: c.list_session_summaries(BAD),
        "list_subkeys": lambda c: c.list_subkeys(bad_key("project_key")),
        "delete": lambda c: c.delete(bad_key("session_id")),
    }

    async def main() -> None:
        store = ClaudeAgentSessionStore(repo)
        await store.append(key, [good])
        before = _jsonl_lines(repo)
        with pytest.raises(st.SessionError) as info:
            await calls[name](store)
        assert info.value.code == "invalid_argument"
        assert isinstance(info.value, ValueError)  # what the SDK raises for a bad argument
        assert isinstance(info.value.__cause__, UnicodeEncodeError)
        assert _jsonl_lines(repo) == before
        # Still usable.
        assert await store.load(key) == [good]
        await store.append(key, [{"type": "user", "uuid": "u3", "parentUuid": "u1"}])
        assert [e["uuid"] for e in await store.load(key) or []] == ["u1", "u3"]
        assert [s["session_id"] for s in await store.list_sessions("p")] == ["s"]
        await store.close()

    asyncio.run(main())


@pytest.mark.parametrize("name", ["add_items", "add_items(key)", "branch", "open(cwd)", "open"])
def test_openai_agents_session(tmp_path: Any, name: str) -> None:
    pytest.importorskip("agents", reason="the openai-agents extra is not installed")
    from sessiontree.adapters.openai_agents import OpenAIAgentsSession

    repo = st.JsonlSessionRepo(str(tmp_path))
    ok = {"role": "user", "content": "ok"}
    calls: dict[str, tuple[Callable[[OpenAIAgentsSession], Any], str]] = {
        # The bad item comes second: the first must not be written either.
        "add_items": (
            lambda o: o.add_items([ok, {"role": "user", "content": BAD}]),
            "invalid_argument",
        ),
        "add_items(key)": (lambda o: o.add_items([ok, {"type": "x", BAD: 1}]), "invalid_argument"),
        "branch": (lambda o: o.branch(from_entry=BAD), "invalid_argument"),
        "open(cwd)": (
            lambda o: OpenAIAgentsSession.open(repo, "other", cwd=BAD),
            "invalid_argument",
        ),
        # The SDK's session id: ``invalid_id`` where it is taken as the file name (as for
        # repositories), ``invalid_argument`` where it is text mapped to one.
        "open": (lambda o: OpenAIAgentsSession.open(repo, BAD), "invalid_id|invalid_argument"),
    }

    async def main() -> None:
        session = await OpenAIAgentsSession.open(repo, "chat")
        await session.add_items([{"role": "user", "content": "hi"}])
        before = _jsonl_lines(repo)
        call, code = calls[name]
        with pytest.raises(st.SessionError) as info:
            await call(session)
        assert info.value.code in code.split("|")
        assert isinstance(info.value, ValueError)  # what the SDK raises for a bad argument
        # (The header encoder, which refuses a bad cwd, raises ``from None``.)
        if info.value.code == "invalid_argument" and name != "open(cwd)":
            assert isinstance(info.value.__cause__, UnicodeEncodeError)
        assert _jsonl_lines(repo) == before
        # Still usable.
        await session.add_items([ok])
        assert await session.get_items() == [{"role": "user", "content": "hi"}, ok]
        await session.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    "name",
    [
        "read_record",
        "read_records",
        "read_entry",
        "read_history",
        "delete_record",
        "write_record(conversation_id)",
        "write_record(entry id)",
        "write_record(message)",
        "load",
        "save",
    ],
)
def test_pydantic_ai_store(tmp_path: Any, name: str) -> None:
    pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
    from pydantic_ai import Agent
    from pydantic_ai.conversation import Conversation
    from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.messages import ModelRequest, UserPromptPart
    from pydantic_ai.models.test import TestModel

    from sessiontree.adapters.pydantic_ai import PydanticAIConversationStore, StoreArgumentError

    repo = st.JsonlSessionRepo(str(tmp_path))
    agent = Agent(TestModel())

    def request(text: str) -> ModelRequest:
        return ModelRequest(parts=[UserPromptPart(text)])

    def write(store: PydanticAIConversationStore, conversation_id: str, entries: list[Any]) -> Any:
        record = ConversationRecord(conversation_id=conversation_id, head_id=entries[-1].id)
        return store.write_record(record, new_entries=entries, expected_revision=None)

    calls: dict[str, Callable[[PydanticAIConversationStore], Any]] = {
        "read_record": lambda p: p.read_record(BAD),
        "read_records": lambda p: p.read_records(scope=BAD),
        "read_entry": lambda p: p.read_entry(BAD),
        "read_history": lambda p: p.read_history(BAD),
        "delete_record": lambda p: p.delete_record(BAD, expected_revision="r"),
        "write_record(conversation_id)": lambda p: write(
            p, BAD, [ConversationEntry(id="e1", parent_id=None, message=request("a"))]
        ),
        # The bad entry comes second: the first must not be written either.
        "write_record(entry id)": lambda p: write(
            p,
            "c2",
            [
                ConversationEntry(id="e1", parent_id=None, message=request("a")),
                ConversationEntry(id=BAD, parent_id="e1", message=request("b")),
            ],
        ),
        "write_record(message)": lambda p: write(
            p,
            "c2",
            [
                ConversationEntry(id="e1", parent_id=None, message=request("a")),
                ConversationEntry(id="e2", parent_id="e1", message=request(BAD_IN_TEXT)),
            ],
        ),
        "load": lambda p: p.load(BAD),
        "save": lambda p: p.save(Conversation(conversation_id=BAD, messages=[request("a")])),
    }

    async def main() -> None:
        store = await PydanticAIConversationStore.open(repo, "store")
        result = await agent.run("hi", conversation=Conversation(conversation_id="c1"))
        await store.save(result)
        before = _jsonl_lines(repo)
        with pytest.raises(StoreArgumentError) as info:
            await calls[name](store)
        err = info.value
        # pydantic-ai's type for a usage mistake, and our code.
        assert isinstance(err, UserError)
        assert isinstance(err, st.SessionError)
        assert err.code == "invalid_argument"
        assert isinstance(err.__cause__, st.SessionError)
        assert _jsonl_lines(repo) == before
        # Still usable.
        loaded = await store.load("c1")
        assert loaded is not None and len(loaded.messages) == 2
        again = await agent.run("more", conversation=loaded)
        await store.save(again)
        reloaded = await store.load("c1")
        assert reloaded is not None and len(reloaded.messages) == 4
        await store.close()

    asyncio.run(main())
