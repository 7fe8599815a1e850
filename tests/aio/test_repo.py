"""``AsyncSessionRepo``: the repository API as coroutines, over any ``SessionRepo``."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st
from sessiontree.aio import _policy


def repos(kind: str, tmp_path: Path) -> st.SessionRepo:
    if kind == "memory":
        return st.InMemorySessionRepo()
    return st.JsonlSessionRepo(tmp_path / "repo")


def test_the_table_covers_every_public_method_of_the_interface() -> None:
    # The abstract methods and the ones every repository inherits (search, read_entry).
    public = {n for n, v in vars(st.SessionRepo).items() if not n.startswith("_") and callable(v)}
    assert set(_policy.REPO_CALLS) == public


@pytest.mark.parametrize("name", sorted(_policy.REPO_CALLS))
def test_each_method_is_a_coroutine_twin(name: str) -> None:
    sync = getattr(st.SessionRepo, name)
    twin = getattr(st.AsyncSessionRepo, name)
    assert inspect.iscoroutinefunction(twin)
    assert twin.__doc__ == sync.__doc__
    want = inspect.signature(sync)
    if want.return_annotation == "Session":
        want = want.replace(return_annotation="AsyncSession")
    assert inspect.signature(twin) == want


def test_wraps_only_repositories() -> None:
    with pytest.raises(st.SessionError, match="must be a SessionRepo") as err:
        st.AsyncSessionRepo("dir")  # type: ignore[arg-type]
    assert err.value.code == "invalid_argument"
    repo = st.InMemorySessionRepo()
    assert st.AsyncSessionRepo(repo).repo is repo
    assert repr(st.AsyncSessionRepo(repo)) == f"<AsyncSessionRepo over {repo!r}>"


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
def test_create_open_list_fork_delete(kind: str, tmp_path: Path) -> None:
    sync = repos(kind, tmp_path)
    repo = st.AsyncSessionRepo(sync)

    async def main() -> None:
        session = await repo.create(cwd="/w", name="first", metadata={"k": 1}, session_id="s-1")
        assert isinstance(session, st.AsyncSession)
        assert session.id == "s-1"
        a = await session.append_message(st.UserMessage("one"))
        await session.append_message(
            st.AssistantMessage([st.TextContent("two")], "openai", "gpt-5")
        )
        b = await session.append_message(st.UserMessage("three"))
        await session.append_label(a, "start")
        rows = await repo.list(cwd="/w")
        assert [(r.id, r.name, r.message_count) for r in rows] == [("s-1", "first", 3)]
        assert await repo.list(cwd="/elsewhere") == []

        fork = await repo.fork("s-1", entry_id=b, position="before")
        assert isinstance(fork, st.AsyncSession)
        texts = [m.content for m in (await fork.build_context()).messages]  # type: ignore[union-attr]
        assert texts[0] == "one" and len(texts) == 2
        assert await fork.get_label(a) == "start"
        fork_id = fork.id
        await fork.close()

        with pytest.raises(st.SessionError) as err:
            await repo.open("s-1")
        assert err.value.code == "locked"
        with pytest.raises(st.SessionError) as err:
            await repo.delete("s-1")
        assert err.value.code == "locked"
        await session.close()

        again = await repo.open(rows[0])
        assert await again.get_leaf_id() == (await again.get_branch())[-1].id
        await again.close()
        await repo.delete("s-1")
        assert [r.id for r in await repo.list()] == [fork_id]

    asyncio.run(main())


BAD_CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("open", ("missing",), {}),
    ("open", ("../etc",), {}),
    ("open", (42,), {}),
    ("delete", ("missing",), {}),
    ("create", (), {"session_id": "taken"}),
    ("create", (), {"session_id": "a/b"}),
    ("create", (), {"cwd": 5}),
    ("list", (), {"limit": -1}),
    ("fork", ("taken",), {"position": "after"}),
    ("fork", ("taken",), {"entry_id": "missing"}),
    ("fork", ("missing",), {}),
]


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
@pytest.mark.parametrize(("name", "args", "kwargs"), BAD_CALLS)
def test_errors_are_those_of_the_sync_repo(
    kind: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], tmp_path: Path
) -> None:
    sync = repos(kind, tmp_path)
    sync.create(cwd="/w", session_id="taken").close()
    with pytest.raises(Exception) as want:
        getattr(sync, name)(*args, **kwargs)

    async def main() -> None:
        repo = st.AsyncSessionRepo(sync)
        with pytest.raises(Exception) as got:
            await getattr(repo, name)(*args, **kwargs)
        assert type(got.value) is type(want.value)
        assert got.value.code == want.value.code  # type: ignore[attr-defined]
        assert str(got.value) == str(want.value)

    asyncio.run(main())
    assert [r.id for r in sync.list()] == ["taken"]  # nothing was made or lost
