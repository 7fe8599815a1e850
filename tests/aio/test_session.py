"""``AsyncSession``: the same API as ``Session``, as coroutines, run where the table says.

Parity is checked against the sync class itself (names, signatures, docstrings, results,
errors), so a method added to ``Session`` without its twin fails here.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st
from sessiontree.aio import _policy

from .aiohelp import ThreadRecordingStorage

Async = Callable[[], Coroutine[Any, Any, Any]]


def run(fn: Async) -> Any:
    return asyncio.run(fn())


def public_methods(cls: type) -> list[str]:
    return [
        name
        for name, value in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(value)
    ]


# --------------------------------------------------------------------------- the API


def test_the_table_covers_every_public_method_of_session() -> None:
    assert set(_policy.SESSION_CALLS) == set(public_methods(st.Session))


@pytest.mark.parametrize("name", public_methods(st.Session))
def test_each_method_is_a_coroutine_twin(name: str) -> None:
    sync = getattr(st.Session, name)
    twin = getattr(st.AsyncSession, name)
    assert inspect.iscoroutinefunction(twin)
    assert inspect.signature(twin) == inspect.signature(sync)
    assert twin.__doc__ == sync.__doc__ and twin.__doc__
    assert twin.__name__ == name
    assert twin.__qualname__ == f"AsyncSession.{name}"


def test_root_exports_without_importing_asyncio_eagerly() -> None:
    import subprocess
    import sys

    code = (
        "import sys, sessiontree; a = 'sessiontree.aio' in sys.modules; "
        "from sessiontree import AsyncSession, AsyncSessionRepo; "
        "print(a, AsyncSession.__module__, 'AsyncSession' in sessiontree.__all__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "sessiontree.aio._session", "True"]


def test_properties_and_repr(tmp_path: Path) -> None:
    storage = st.JsonlSessionStorage.create(tmp_path / "s.jsonl")
    session = st.AsyncSession(storage)
    assert session.storage is storage
    assert session.session.storage is storage
    assert session.id == storage.get_metadata().id
    options = st.SessionContextBuildOptions()
    session.context_build_options = options
    assert session.session.context_build_options is options
    assert session.context_build_options is options
    assert len(session) == 0
    assert repr(session).startswith("<AsyncSession over <JsonlSessionStorage ")
    run(session.close)
    assert storage.closed


def test_constructor_errors_are_the_sync_ones() -> None:
    with pytest.raises(st.SessionError) as sync:
        st.Session("not a storage")  # type: ignore[arg-type]
    with pytest.raises(st.SessionError) as aio:
        st.AsyncSession("not a storage")  # type: ignore[arg-type]
    assert (aio.value.code, str(aio.value)) == (sync.value.code, str(sync.value))
    with pytest.raises(st.SessionError, match="must be a Session") as err:
        st.AsyncSession.wrap(st.InMemorySessionStorage())  # type: ignore[arg-type]
    assert err.value.code == "invalid_argument"


def test_wrap_keeps_the_session_and_wrappers_share_one_queue() -> None:
    session = st.Session(st.InMemorySessionStorage())
    a, b = st.AsyncSession.wrap(session), st.AsyncSession.wrap(session)
    assert a.session is session and b.session is session
    assert a._lane is b._lane


# --------------------------------------------------------------------------- same results


def _script_sync(session: st.Session, msgs: Any) -> list[str]:
    ids = [session.append_session_info("demo")]
    ids.append(session.append_thinking_level_change("high"))
    ids.append(session.append_model_change("openai", "gpt-5"))
    ids.append(session.append_active_tools_change(["read", "bash"]))
    ids.append(session.append_message(msgs.user("one")))
    ids.append(session.append_message(msgs.assistant("two", usage=msgs.usage(3))))
    ids.append(session.append_label(ids[4], "first"))
    ids.append(session.append_custom_entry("note", {"k": 1}))
    ids.append(session.append_custom_message_entry("hint", "remember", details={"x": 1}))
    ids.append(session.append_compaction("summary", ids[4], 1234, usage=msgs.usage(1)))
    branch = session.move_to(ids[5], {"summary": "went back", "details": [1]})
    assert branch is not None
    ids.append(branch)
    ids.append(session.append_message(msgs.user("three")))
    assert session.move_to(ids[4]) is None
    ids.append(session.append_message(msgs.user("four")))
    return ids


async def _script_async(session: st.AsyncSession, msgs: Any) -> list[str]:
    ids = [await session.append_session_info("demo")]
    ids.append(await session.append_thinking_level_change("high"))
    ids.append(await session.append_model_change("openai", "gpt-5"))
    ids.append(await session.append_active_tools_change(["read", "bash"]))
    ids.append(await session.append_message(msgs.user("one")))
    ids.append(await session.append_message(msgs.assistant("two", usage=msgs.usage(3))))
    ids.append(await session.append_label(ids[4], "first"))
    ids.append(await session.append_custom_entry("note", {"k": 1}))
    ids.append(await session.append_custom_message_entry("hint", "remember", details={"x": 1}))
    ids.append(await session.append_compaction("summary", ids[4], 1234, usage=msgs.usage(1)))
    branch = await session.move_to(ids[5], {"summary": "went back", "details": [1]})
    assert branch is not None
    ids.append(branch)
    ids.append(await session.append_message(msgs.user("three")))
    assert await session.move_to(ids[4]) is None
    ids.append(await session.append_message(msgs.user("four")))
    return ids


def _shape(nodes: list[st.TreeNode]) -> list[Any]:
    return [(n.entry.type, n.label, _shape(n.children)) for n in nodes]


def _strip(entries: list[st.SessionTreeEntry]) -> list[Any]:
    return [(e.type, getattr(e, "message", None)) for e in entries]


def _storages(kind: str, tmp_path: Path, name: str) -> st.SessionStorage:
    if kind == "memory":
        return st.InMemorySessionStorage()
    if kind == "foreign":
        return ThreadRecordingStorage()
    return st.JsonlSessionStorage.create(tmp_path / f"{name}.jsonl", durability=kind)


@pytest.mark.parametrize("kind", ["memory", "flush", "fsync", "foreign"])
def test_same_results_as_the_sync_session(kind: str, tmp_path: Path, msgs: Any) -> None:
    sync = st.Session(_storages(kind, tmp_path, "sync"))
    sync_ids = _script_sync(sync, msgs)

    async def main() -> None:
        session = st.AsyncSession(_storages(kind, tmp_path, "async"))
        ids = await _script_async(session, msgs)
        assert len(ids) == len(sync_ids) and len(session) == len(sync)
        got = await session.build_context()
        want = sync.build_context()
        assert list(got.messages) == list(want.messages)
        assert (got.thinking_level, got.model, got.active_tool_names) == (
            want.thinking_level,
            want.model,
            want.active_tool_names,
        )
        assert await session.get_session_stats() == sync.get_session_stats()
        assert await session.get_session_name() == sync.get_session_name() == "demo"
        assert await session.get_label(ids[4]) == sync.get_label(sync_ids[4]) == "first"
        assert _strip(await session.get_branch()) == _strip(sync.get_branch())
        assert _strip(await session.get_branch(ids[5])) == _strip(sync.get_branch(sync_ids[5]))
        assert _shape(await session.get_tree()) == _shape(sync.get_tree())
        assert (await session.get_entry(ids[4])) == session.session.get_entry(ids[4])
        assert await session.get_entry("nope") is None
        assert await session.get_leaf_id() == ids[-1]
        merged = await session.merge_context_build_options(None)
        assert merged == sync.merge_context_build_options(None)
        await session.clear_context_cache()
        assert (await session.build_context()) == got
        await session.close()
        await session.close()  # idempotent, as the sync close

    run(main)
    sync.close()


# --------------------------------------------------------------------------- same errors

BAD_CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("get_label", ("missing",), {}),
    ("get_label", (42,), {}),
    ("append_label", ("missing", "x"), {}),
    ("append_label", (None, "x"), {}),
    ("append_compaction", ("s", "missing", 1), {}),
    ("append_thinking_level_change", ("loud",), {}),
    ("append_active_tools_change", ("read",), {}),
    ("append_session_info", (3,), {}),
    ("move_to", ("missing",), {}),
    ("move_to", (None, {"summary": "x"}), {}),
    ("move_to", ("FIRST", {"summary": 1}), {}),
    ("move_to", ("FIRST", {"summary": "s", "bogus": 1}), {}),
    ("get_branch", (5,), {}),
    ("get_branch", ("missing",), {}),
    ("append_message", ("not a message",), {}),
    ("append_custom_entry", ("k", object()), {}),
]


@pytest.mark.parametrize("kind", ["memory", "fsync", "foreign"])
@pytest.mark.parametrize(("name", "args", "kwargs"), BAD_CALLS)
def test_errors_are_those_of_the_sync_session(
    kind: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], tmp_path: Path, msgs: Any
) -> None:
    def fill(a: tuple[Any, ...], first: str) -> tuple[Any, ...]:
        return tuple(first if x == "FIRST" else x for x in a)

    sync = st.Session(_storages(kind, tmp_path, "sync"))
    first = sync.append_message(msgs.user())
    with pytest.raises(Exception) as want:
        getattr(sync, name)(*fill(args, first), **kwargs)

    async def main() -> None:
        session = st.AsyncSession(_storages(kind, tmp_path, "async"))
        first = await session.append_message(msgs.user())
        with pytest.raises(Exception) as got:
            await getattr(session, name)(*fill(args, first), **kwargs)
        assert type(got.value) is type(want.value)
        assert getattr(got.value, "code", None) == getattr(want.value, "code", None)
        assert str(got.value).replace(first, "FIRST") == str(want.value).replace(
            sync.get_leaf_id() or "", "FIRST"
        )
        # Nothing was written by the failed call; the session goes on.
        assert len(session) == 1
        await session.append_message(msgs.user("after"))
        await session.close()

    run(main)
    sync.close()


def test_calls_after_close_raise_closed(tmp_path: Path, msgs: Any) -> None:
    async def main() -> None:
        session = st.AsyncSession(st.JsonlSessionStorage.create(tmp_path / "c.jsonl"))
        await session.append_message(msgs.user())
        await session.close()
        for call in (
            session.append_message(msgs.user()),
            session.get_leaf_id(),
            session.build_context(),
            session.get_tree(),
        ):
            with pytest.raises(st.SessionError) as err:
                await call
            assert err.value.code == "closed"

    run(main)


# --------------------------------------------------------------------------- where calls run


def test_every_call_on_an_unknown_storage_runs_in_a_worker_thread(
    recording: ThreadRecordingStorage, msgs: Any
) -> None:
    async def main() -> None:
        session = st.AsyncSession(recording)
        first = await session.append_message(msgs.user())
        await session.append_label(first, "x")
        await session.get_leaf_id()
        await session.get_entry(first)
        await session.get_label(first)
        await session.get_session_name()
        await session.get_session_stats()
        await session.build_context()
        await session.get_branch()
        await session.get_tree()
        await session.move_to(None)
        await session.merge_context_build_options(None)
        await session.clear_context_cache()
        await session.close()

    run(main)
    threads = {thread for _, thread in recording.calls}
    assert threads and all(t.startswith("sessiontree-aio") for t in threads), threads
    assert "close" in {name for name, _ in recording.calls}


class _MemoryRecording(st.InMemorySessionStorage):
    """The engine's in-memory storage, recording the thread of a few calls."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: dict[str, set[str]] = {}

    def _note(self, name: str) -> None:
        self.threads.setdefault(name, set()).add(threading.current_thread().name)

    def append_entry(self, entry: st.SessionTreeEntry) -> None:
        self._note("append_entry")
        super().append_entry(entry)

    def get_branch_entries(self, leaf_id: str | None, **kw: Any) -> list[st.SessionTreeEntry]:
        self._note("get_branch_entries")
        return super().get_branch_entries(leaf_id, **kw)

    def get_tree(self) -> list[st.TreeNode]:
        self._note("get_tree")
        return super().get_tree()


def test_cheap_calls_run_on_the_loop_and_big_reads_in_a_thread(msgs: Any) -> None:
    storage = _MemoryRecording()

    async def main() -> None:
        session = st.AsyncSession(storage)
        loop_thread = threading.current_thread().name
        for _ in range(10):
            await session.append_message(msgs.user())
        assert storage.threads["append_entry"] == {loop_thread}
        await session.build_context()  # first build: the branch is read
        await session.get_tree()  # 10 entries: small enough for the loop
        assert storage.threads["get_branch_entries"] == {loop_thread}
        assert storage.threads["get_tree"] == {loop_thread}
        storage.threads.clear()
        for _ in range(_policy.BULK_INLINE_ENTRIES):
            await session.append_message(msgs.user())
        await session.get_tree()  # too many entries now: a thread
        assert all(t.startswith("sessiontree-aio") for t in storage.threads["get_tree"])
        await session.build_context()  # only the new entries: on the loop
        assert "get_branch_entries" not in storage.threads
        await session.move_to(None)
        await session.build_context()  # a leaf move: the new branch is read, in a thread
        assert all(t.startswith("sessiontree-aio") for t in storage.threads["get_branch_entries"])
        await session.close()

    run(main)


class _JsonlRecording(st.JsonlSessionStorage):
    threads: dict[str, set[str]]

    def _note(self, name: str) -> None:
        self.__dict__.setdefault("threads", {}).setdefault(name, set()).add(
            threading.current_thread().name
        )

    def append_entry(self, entry: st.SessionTreeEntry) -> None:
        self._note("append_entry")
        super().append_entry(entry)

    def get_branch_entries(self, leaf_id: str | None, **kw: Any) -> list[st.SessionTreeEntry]:
        self._note("get_branch_entries")
        return super().get_branch_entries(leaf_id, **kw)

    def get_leaf_id(self) -> str | None:
        self._note("get_leaf_id")
        return super().get_leaf_id()

    def close(self) -> None:
        self._note("close")
        super().close()


@pytest.mark.parametrize("durability", ["flush", "fsync"])
def test_file_appends_sync_in_a_thread_and_closes_always(
    durability: str, tmp_path: Path, msgs: Any
) -> None:
    path = tmp_path / "s.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path)) as sync:
        for _ in range(_policy.BULK_INLINE_ENTRIES):
            sync.append_message(msgs.user())
    storage = _JsonlRecording.open(path, durability=durability)  # type: ignore[arg-type]
    loop_thread = threading.current_thread().name

    def worker(name: str) -> bool:
        return all(t.startswith("sessiontree-aio") for t in storage.threads[name])

    async def main() -> None:
        session = st.AsyncSession(storage)
        await session.append_message(msgs.user())
        await session.append_message(msgs.user())
        if durability == "fsync":
            assert worker("append_entry")
        else:
            assert storage.threads["append_entry"] == {loop_thread}
        await session.build_context()  # a first build of a long branch: a thread
        assert worker("get_branch_entries")
        storage.threads.pop("get_leaf_id", None)
        await session.build_context()  # nothing new: the cached context, on the loop
        assert storage.threads["get_leaf_id"] == {loop_thread}
        await session.close()
        assert worker("close")

    run(main)


def test_no_event_loop_is_a_clear_error(recording: ThreadRecordingStorage) -> None:
    session = st.AsyncSession(recording)
    coro = session.get_leaf_id()
    with pytest.raises(RuntimeError, match="running asyncio or trio event loop"):
        coro.send(None)
    coro.close()


# --------------------------------------------------------------------------- concurrency


@pytest.mark.parametrize("durability", ["flush", "fsync"])
def test_concurrent_calls_on_one_session_keep_their_order(
    durability: str, tmp_path: Path, msgs: Any
) -> None:
    path = tmp_path / "s.jsonl"

    async def main() -> None:
        storage = st.JsonlSessionStorage.create(path, durability=durability)  # type: ignore[arg-type]
        session = st.AsyncSession(storage)

        async def one(i: int) -> str:
            await asyncio.sleep(0)
            entry = await session.append_message(msgs.user(f"m{i}"))
            if i % 7 == 0:
                await session.build_context()
            return entry

        ids = await asyncio.gather(*(one(i) for i in range(60)))
        await session.close()
        return ids

    ids = asyncio.run(main())
    reopened = st.Session(st.JsonlSessionStorage.open(path, readonly=True))
    entries = reopened.storage.get_entries()
    assert [e.id for e in entries] == ids  # gather starts them in order
    assert [e.parent_id for e in entries] == [None, *ids[:-1]]  # one chain
    assert [e.message.content for e in entries] == [f"m{i}" for i in range(60)]  # type: ignore[attr-defined]
    reopened.close()


def test_many_sessions_in_one_loop(tmp_path: Path, msgs: Any) -> None:
    repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path / "repo", durability="flush"))
    n_sessions, n_turns = 120, 15

    async def agent(k: int) -> tuple[str, list[str]]:
        session = await repo.create(cwd="/w", name=f"agent {k}")
        ids = []
        for t in range(n_turns):
            ids.append(await session.append_message(msgs.user(f"{k}:{t}")))
            ids.append(await session.append_message(msgs.assistant(f"{k}:{t}")))
            context = await session.build_context()
            assert len(context.messages) == 2 * (t + 1)
            await asyncio.sleep(0)
        sid = session.id
        await session.close()
        return sid, ids

    async def main() -> list[tuple[str, list[str]]]:
        return await asyncio.gather(*(agent(k) for k in range(n_sessions)))

    results = asyncio.run(main())
    sync = st.JsonlSessionRepo(tmp_path / "repo")
    assert len(sync.list()) == n_sessions
    for k, (sid, ids) in enumerate(results):
        with sync.open(sid) as session:
            assert session.get_session_name() == f"agent {k}"
            branch = session.get_branch()
            assert [e.id for e in branch][1:] == ids
            assert branch[-1].message.content[0].text == f"{k}:{n_turns - 1}"  # type: ignore[attr-defined]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork() with threads (3.12+)
def test_a_forked_child_gets_its_own_worker_threads(recording: ThreadRecordingStorage) -> None:
    import os

    release = threading.Event()
    session = st.AsyncSession(recording)

    async def parent() -> None:
        # A call of this session is running in its worker thread at the fork.
        started = threading.Event()

        def slow() -> None:
            started.set()
            release.wait(10)

        future = session._lane.submit(slow)
        while not started.is_set():
            await asyncio.sleep(0.001)
        pid = os.fork()
        if pid == 0:  # the child: the same session's next call must still run
            code = 1
            try:
                asyncio.run(asyncio.wait_for(session.append_message(st.UserMessage("c")), 10))
                code = 0
            finally:
                os._exit(code)
        release.set()
        await asyncio.wrap_future(future)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0

    asyncio.run(parent())


def test_context_options_and_transforms_give_the_sync_results(msgs: Any) -> None:
    transform_threads: set[str] = set()

    def drop_customs(entries: list[st.SessionTreeEntry]) -> list[st.SessionTreeEntry]:
        transform_threads.add(threading.current_thread().name)
        return [e for e in entries if e.type != "custom_message"]

    def project(entry: Any, index: int, entries: Any) -> list[st.AgentMessage]:
        return [st.UserMessage(f"note {entry.data}", timestamp=msgs.ts)]

    projecting = st.SessionContextBuildOptions(entry_projectors={"note": project})
    dropping = st.SessionContextBuildOptions(entry_transforms=[drop_customs])
    storage = _MemoryRecording()
    sync = st.Session(st.InMemorySessionStorage(), projecting)

    async def main() -> None:
        session = st.AsyncSession(storage, projecting)
        for i in range(_policy.BULK_INLINE_ENTRIES):
            for s in (sync, session.session):
                s.append_message(msgs.user(f"u{i}"))
                if i % 50 == 0:
                    s.append_custom_entry("note", i)
                    s.append_custom_message_entry("c", f"c{i}")
        async_transform_threads: set[str] = set()
        for options in (None, dropping, None, dropping):
            # Custom messages carry their entry's time, which differs between the two.
            want = [(m.role, m.content) for m in sync.build_context(options).messages]  # type: ignore[union-attr]
            transform_threads.clear()
            got = await session.build_context(options)
            async_transform_threads |= transform_threads
            assert [(m.role, m.content) for m in got.messages] == want  # type: ignore[union-attr]
        # The first build of a long branch, and a transform (it runs over the whole
        # branch on every build), run in a worker thread.
        assert all(t.startswith("sessiontree-aio") for t in storage.threads["get_branch_entries"])
        assert async_transform_threads
        assert all(t.startswith("sessiontree-aio") for t in async_transform_threads)
        branch = await session.get_branch()
        assert [e.id for e in branch] == [e.id for e in session.session.get_branch()]
        await session.close()

    run(main)
