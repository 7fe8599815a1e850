"""pytest plugin: the Claude Agent SDK's tests, run with the SDK's own PostgreSQL store.

Loaded with ``-p claude_agent_sdk_reference_plugin`` by ``tests/upstream/run.sh
claude-agent-sdk --reference``. It swaps ``InMemorySessionStore`` for the SDK's reference
``PostgresSessionStore`` (``examples/session_stores/postgres_session_store.py`` of the
SDK's source distribution, fetched at test time like their tests; ``asyncpg``, its driver,
is pinned in ``constraints/upstream.txt``) over the PostgreSQL server the tests' own
script started (``SESSIONTREE_PG_DSN``), one fresh table per store, dropped at the end.

What it proves: the tests our list deselects with a reason beginning ``reference:`` fail
the same way with the SDK's own persistent store (they count event-loop ticks that only a
store which never waits for I/O answers within), while the SDK's store conformance tests
pass with it, so the store is wired right. ``upstream_select`` expects exactly those tests
to fail, with the tick assertion (``AssertionError``) and nothing else.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest

_dsn = os.environ.get("SESSIONTREE_PG_DSN", "")
_tables: list[str] = []
_pools: list[Any] = []


def _store_class() -> type:
    import asyncpg
    from postgres_session_store import PostgresSessionStore

    class InMemorySessionStore(PostgresSessionStore):  # type: ignore[misc]
        """``claude_agent_sdk.InMemorySessionStore``'s no-argument constructor over the
        SDK's ``PostgresSessionStore``: its pool is made on first use, in the test's event
        loop (asyncpg binds a pool to the loop that made it)."""

        def __init__(self) -> None:
            table = f"reference_{uuid.uuid4().hex[:12]}"
            _tables.append(table)
            super().__init__(pool=_Unconnected(), table=table)

        async def _ready(self) -> None:
            if isinstance(self._pool, _Unconnected):
                self._pool = await asyncpg.create_pool(**_connect_args(), min_size=1, max_size=4)
                _pools.append(self._pool)
                await self.create_schema()

        async def append(self, key: Any, entries: Any) -> None:
            await self._ready()
            await super().append(key, entries)

        async def load(self, key: Any) -> Any:
            await self._ready()
            return await super().load(key)

        async def list_sessions(self, project_key: str) -> Any:
            await self._ready()
            return await super().list_sessions(project_key)

        async def list_subkeys(self, key: Any) -> Any:
            await self._ready()
            return await super().list_subkeys(key)

        async def delete(self, key: Any) -> None:
            await self._ready()
            await super().delete(key)

    return InMemorySessionStore


class _Unconnected:
    """The pool of a store that has not been used yet."""


def _connect_args() -> dict[str, Any]:
    """asyncpg's arguments for ``SESSIONTREE_PG_DSN`` (a libpq ``key=value`` string, which
    asyncpg does not read)."""
    from psycopg.conninfo import conninfo_to_dict

    names = {"host": "host", "port": "port", "user": "user", "password": "password"}
    info = conninfo_to_dict(_dsn)
    args: dict[str, Any] = {names[k]: v for k, v in info.items() if k in names}
    if "dbname" in info:
        args["database"] = info["dbname"]
    return args


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # asyncpg has no trio backend (the SDK's own tests of this store run on asyncio only).
    trio = [item for item in items if item.nodeid.endswith("[trio]")]
    if trio:
        config.hook.pytest_deselected(items=trio)
        items[:] = [item for item in items if not item.nodeid.endswith("[trio]")]


def pytest_configure(config: pytest.Config) -> None:
    if not _dsn:
        raise pytest.UsageError(
            "--reference needs a PostgreSQL server: export SESSIONTREE_PG_DSN "
            "(tests/postgres/pg-cluster.sh start prints one)"
        )
    import claude_agent_sdk
    import claude_agent_sdk._internal.session_store as session_store

    store = _store_class()
    claude_agent_sdk.InMemorySessionStore = store  # type: ignore[misc]
    session_store.InMemorySessionStore = store  # type: ignore[misc]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    # A test asserting inside a task group fails with a group of its AssertionError: it is
    # raised as itself, so the expected failure is told from any other (a setup error).
    try:
        return (yield)
    except BaseException as error:
        leaves = list(_leaves(error))
        if leaves != [error] and all(isinstance(e, AssertionError) for e in leaves):
            raise leaves[0] from error
        raise


def _leaves(error: BaseException) -> Any:
    # An exception group's members (BaseExceptionGroup: Python 3.11+ or the backport).
    inner_errors = getattr(error, "exceptions", None)
    if isinstance(inner_errors, tuple):
        for inner in inner_errors:
            yield from _leaves(inner)
    else:
        yield error


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Any:
    yield
    # The test's event loop is closed by now: the pools are dropped, their sockets closed
    # with them, which ends their server sessions.
    _pools.clear()


def pytest_unconfigure(config: pytest.Config) -> None:
    if not _tables or not _dsn:
        return
    import psycopg

    with psycopg.connect(_dsn, autocommit=True) as conn:
        for table in _tables:
            conn.execute(f"DROP TABLE IF EXISTS {table}")


def pytest_report_header(config: pytest.Config) -> str:
    return (
        "sessiontree upstream: claude_agent_sdk.InMemorySessionStore is the SDK's own "
        "PostgresSessionStore (examples/session_stores) over PostgreSQL"
    )
