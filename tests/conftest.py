"""Shared fixtures for the session-engine tests, and the hypothesis profiles.

Profiles (pick one with the ``HYPOTHESIS_PROFILE`` environment variable):

- ``default``: small and fast, for the edit-test loop (the whole suite stays well under a
  minute on two cores);
- ``ci``: more examples and longer stateful runs;
- ``thorough``: a long soak, run by hand.

Fixtures:

- ``backend``: parametrized over ``memory``, ``jsonl`` and ``postgres``; builds a storage of
  that kind and "reopens" it (a JSONL file or a PostgreSQL session is closed and opened
  again, an in-memory storage goes through ``to_jsonl`` / ``from_jsonl``), so shared
  behaviour is tested on all three.
- ``pg_server``: a PostgreSQL server for the whole run (see ``tests/postgres/pgserver.py``):
  ``SESSIONTREE_PG_DSN`` if set, else a throwaway cluster started by
  ``tests/postgres/pg-cluster.sh``; tests needing it skip when neither can be had, except
  under CI (``CI=true``), where they fail. ``pg_schema``: a fresh schema for one test.
- ``msgs``: builders of messages with fixed timestamps.
- ``write_session``: writes a session file byte by byte (for reader tests).
- ``lines``: builders of hand-written header and entry lines.

Marker ``fault_hooks``: the test drives the engine's fault injection
(``Engine.inject_fault``), which only a build with the ``test-hooks`` cargo feature has
(``make install`` / ``make build-dev``); on any other build the test is skipped, not failed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import sessiontree as st
from postgres.pgserver import PgServer, fresh_schema, pg_server_for_run
from sessiontree import _core

# Deadlines are off everywhere: the machine is shared, and a slow example is not a bug.
settings.register_profile(
    "default",
    max_examples=15,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    max_examples=60,
    stateful_step_count=50,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=600,
    stateful_step_count=120,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

HAS_FAULT_HOOKS = hasattr(_core.Engine, "inject_fault")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fault_hooks: needs Engine.inject_fault (a build with the test-hooks feature)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if HAS_FAULT_HOOKS:
        return
    skip = pytest.mark.skip(
        reason="this _core build has no Engine.inject_fault: rebuild with the test-hooks "
        "cargo feature (make build-dev)"
    )
    for item in items:
        if item.get_closest_marker("fault_hooks"):
            item.add_marker(skip)


FIXED_ISO = "2026-01-02T03:04:05.678Z"
"""A valid entry timestamp for hand-written lines."""


def header_line(session_id: str = "s1", **extra: Any) -> bytes:
    """A header line (with its newline) for hand-written files."""
    obj: dict[str, Any] = {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": FIXED_ISO,
        "cwd": "/work",
        "parent_session": None,
        "metadata": None,
    }
    obj.update(extra)
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def entry_line(entry_id: str, parent_id: str | None, type: str = "custom", **fields: Any) -> bytes:
    """An entry line (with its newline) for hand-written files; ``custom`` by default."""
    obj: dict[str, Any] = {
        "type": type,
        "id": entry_id,
        "parent_id": parent_id,
        "timestamp": FIXED_ISO,
    }
    if type == "custom" and not fields:
        fields = {"custom_type": "note", "data": None}
    obj.update(fields)
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def user_line(entry_id: str, parent_id: str | None, text: str = "hi") -> bytes:
    """A user message entry line."""
    return entry_line(
        entry_id,
        parent_id,
        "message",
        message={"role": "user", "content": text, "timestamp": 1},
    )


@dataclass
class Msgs:
    """Builders of messages with fixed timestamps (so equal inputs give equal messages)."""

    ts: int = 1_767_225_600_000

    def user(self, text: str = "hello") -> st.UserMessage:
        return st.UserMessage(text, timestamp=self.ts)

    def assistant(
        self,
        text: str = "hi!",
        *,
        provider: str = "openai",
        model: str = "gpt-4",
        usage: st.Usage | None = None,
    ) -> st.AssistantMessage:
        return st.AssistantMessage(
            [st.TextContent(text)],
            provider,
            model,
            usage=usage or st.Usage(),
            timestamp=self.ts,
        )

    def tool_result(self, text: str = "ok", call_id: str = "call_1") -> st.ToolResultMessage:
        return st.ToolResultMessage(call_id, "bash", [st.TextContent(text)], timestamp=self.ts)

    def usage(self, n: int = 10, cost: float = 0.25) -> st.Usage:
        return st.Usage(
            input=n,
            output=2 * n,
            cache_read=3 * n,
            cache_write=4 * n,
            total_tokens=10 * n,
            cost=st.Cost(input=cost, total=cost),
        )


@pytest.fixture
def msgs() -> Msgs:
    """Message builders with fixed timestamps."""
    return Msgs()


@dataclass
class Backend:
    """Builds and reopens storages of one kind (``memory`` or ``jsonl``)."""

    kind: str
    dir: pathlib.Path
    _count: int = 0
    pg: tuple[PgServer, str] | None = None  # the server and schema of ``postgres``

    def path(self) -> pathlib.Path:
        self._count += 1
        return self.dir / f"session-{self._count}.jsonl"

    def new(self, header: st.SessionHeader | None = None) -> st.SessionStorage:
        """A new, empty storage."""
        if self.kind == "memory":
            return st.InMemorySessionStorage(header)
        if self.pg is not None:
            server, schema = self.pg
            return st.PostgresSessionStorage.create(
                server.dsn, header, schema=schema, durability="flush"
            )
        return st.JsonlSessionStorage.create(self.path(), header, durability="flush")

    def session(self, options: st.SessionContextBuildOptions | None = None) -> st.Session:
        """A session over a new storage."""
        return st.Session(self.new(), options)

    def reopen(self, storage: st.SessionStorage) -> st.SessionStorage:
        """Closes ``storage`` and loads what it holds again."""
        if isinstance(storage, st.InMemorySessionStorage):
            data = storage.to_jsonl()
            storage.close()
            return st.InMemorySessionStorage.from_jsonl(data)
        if isinstance(storage, st.PostgresSessionStorage):
            assert self.pg is not None
            sid = storage.session_id
            storage.close()
            return st.PostgresSessionStorage.open(
                self.pg[0].dsn, sid, schema=self.pg[1], durability="flush"
            )
        assert isinstance(storage, st.JsonlSessionStorage)
        path = storage.path
        storage.close()
        # "flush" rather than the default: a test that forgets to close must not leave a
        # background syncer behind (tests of "group" itself live in test_storage.py).
        return st.JsonlSessionStorage.open(path, durability="flush")

    def reopen_session(self, session: st.Session) -> st.Session:
        """The session reloaded from what it wrote (options kept)."""
        return st.Session(self.reopen(session.storage), session.context_build_options)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The PostgreSQL server of this run (skips, or under CI fails, without one)."""
    yield from pg_server_for_run()


@pytest.fixture
def pg_schema(pg_server: PgServer) -> Iterator[str]:
    """A new, empty schema on ``pg_server``, dropped after the test."""
    yield from fresh_schema(pg_server)


@pytest.fixture(params=["memory", "jsonl", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Backend:
    """Every storage kind, for behaviour they share."""
    if request.param == "postgres":
        server = request.getfixturevalue("pg_server")
        return Backend("postgres", tmp_path, pg=(server, request.getfixturevalue("pg_schema")))
    return Backend(request.param, tmp_path)


@pytest.fixture
def write_session(tmp_path: pathlib.Path) -> Callable[..., pathlib.Path]:
    """``write_session(*entry_lines, header=..., name=...)`` writes a file and returns it."""

    def write(*lines: bytes, header: bytes | None = None, name: str = "s.jsonl") -> pathlib.Path:
        path = tmp_path / name
        path.write_bytes((header_line() if header is None else header) + b"".join(lines))
        return path

    return write


@pytest.fixture
def lines() -> SimpleNamespace:
    """The hand-written-line builders: ``header``, ``entry``, ``user``, and ``iso``."""
    return SimpleNamespace(header=header_line, entry=entry_line, user=user_line, iso=FIXED_ISO)


def assert_same(a: Any, b: Any, path: str = "$") -> None:
    """Equal and of the same types all the way down, ``_extra`` (and its key order) included."""
    assert type(a) is type(b), path
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    else:
        assert a == b, path
