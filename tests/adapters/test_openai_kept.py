"""What the process keeps of an OpenAI SDK session's converted items between objects (issue
27, item 1: reopen + ``get_items()``): objects opened on one session share them, and a
reopen after the last close reuses them, yet never hands out items of another file: a
session deleted and created again under the same id, or appended to by another writer
while no object had it open, reads as it is on disk."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

import sessiontree as st
from sessiontree.adapters import openai_agents
from sessiontree.adapters.openai_agents import OpenAIAgentsSession, set_kept_bytes

from .conftest import run


def _user(text: str) -> Any:
    return {"role": "user", "content": text}


@pytest.fixture(autouse=True)
def _fresh_kept() -> Iterator[None]:
    set_kept_bytes(0)
    previous = set_kept_bytes(256 << 20)
    yield
    set_kept_bytes(0)
    set_kept_bytes(previous)


def test_a_reopen_reuses_the_items_and_sees_what_another_writer_added(tmp_path: Path) -> None:
    async def main() -> None:
        repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        first = await OpenAIAgentsSession.open(repo, "user:7")
        await first.add_items([_user("a"), _user("b")])
        second = await OpenAIAgentsSession.open(repo, "user:7")
        assert second._known is first._known  # one conversion for both objects
        await first.close()
        await second.close()
        # Another writer (a plain session: another process would do the same) appends
        # while no object has the session open.
        sync = st.JsonlSessionRepo(tmp_path)
        plain = sync.open(openai_agents.session_id_for("user:7"))
        other = OpenAIAgentsSession(plain)
        await other.add_items([_user("c")])
        await other.close()
        again = await OpenAIAgentsSession.open(repo, "user:7")
        assert await again.get_items() == [_user("a"), _user("b"), _user("c")]
        await again.close()

    run(main())


def test_a_session_created_again_under_the_same_id_reads_afresh(tmp_path: Path) -> None:
    async def main() -> None:
        repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        session = await OpenAIAgentsSession.open(repo, "conv 1")
        await session.add_items([_user("old")])
        kept_entry = (await session.get_item_entries())[0].entry_id
        await session.close()
        st.JsonlSessionRepo(tmp_path).delete(openai_agents.session_id_for("conv 1"))
        session = await OpenAIAgentsSession.open(repo, "conv 1")
        assert await session.get_items() == []
        await session.add_items([_user("new")])
        assert kept_entry not in {e.entry_id for e in await session.get_item_entries()}
        await session.close()
        session = await OpenAIAgentsSession.open(repo, "conv 1")
        assert await session.get_items() == [_user("new")]
        await session.close()

    run(main())


def test_the_budget_lets_idle_sessions_go(tmp_path: Path) -> None:
    here = os.path.realpath(tmp_path)

    def kept() -> set[str]:
        return {key[-1] for key in openai_agents._kept if key[1] == here}

    async def main() -> None:
        repo = st.AsyncSessionRepo(st.JsonlSessionRepo(tmp_path))
        for name in ("a", "b"):
            session = await OpenAIAgentsSession.open(repo, name)
            await session.add_items([_user(name * 1000)])
            await session.close()
        assert kept() == {"a", "b"}
        set_kept_bytes(1500)  # room for one: the least recently used goes
        assert kept() == {"b"}
        held = await OpenAIAgentsSession.open(repo, "a")
        assert await held.get_items() == [_user("a" * 1000)]
        set_kept_bytes(0)  # an open session's items stay with it
        assert kept() == {"a"}
        await held.close()
        assert kept() == set()
        with pytest.raises(st.SessionError) as err:
            set_kept_bytes(-1)
        assert err.value.code == "invalid_argument"

    run(main())


def test_a_postgres_session_is_shared_while_open_and_not_kept(
    pg_server: Any, pg_schema: str
) -> None:
    async def main() -> None:
        with st.PostgresSessionRepo(pg_server.dsn, schema=pg_schema) as sync:
            repo = st.AsyncSessionRepo(sync)
            first = await OpenAIAgentsSession.open(repo, "user:pg-kept")
            second = await OpenAIAgentsSession.open(repo, "user:pg-kept")
            assert second._known is first._known
            await first.add_items([_user("a")])
            assert await second.get_items() == [_user("a")]
            await first.close()
            await second.close()
            # What a PostgreSQL read costs is not measured: nothing stays past the close.
            assert not [k for k in openai_agents._kept if k[-1] == "user:pg-kept"]
            again = await OpenAIAgentsSession.open(repo, "user:pg-kept")
            assert await again.get_items() == [_user("a")]
            await again.close()

    run(main())
