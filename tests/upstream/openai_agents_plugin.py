"""pytest plugin: the OpenAI Agents SDK's own tests, run with sessiontree's session.

Loaded with ``-p openai_agents_plugin`` (``tests/upstream/run.sh`` puts this folder on
``PYTHONPATH``) while pytest runs the tests of the SDK's source distribution, which stay
theirs (fetched at test time, never copied here). Before their test modules are imported,
the session classes they construct are swapped for ones that keep the history in
:class:`~sessiontree.adapters.openai_agents.OpenAIAgentsSession` over a
:class:`~sessiontree.JsonlSessionRepo`:

- ``SQLiteSession`` (``agents.SQLiteSession``, ``agents.memory.SQLiteSession``): the same
  constructor; ``db_path=":memory:"`` gives each object a repository of its own (as each
  in-memory SQLite database is its own), a file path gives the folder ``<db_path>.sessiontree``
  (one per table pair), so objects over one file share their sessions, as SQLite's do;
- their in-memory test session ``tests.utils.simple_session.SimpleListSession`` and its
  subclasses ``CountingSession`` (counts ``pop_item`` calls) and ``IdStrippingSession``
  (drops item ids on write, as hosted stores do): the same constructors (``history`` is
  written first), and ``saved_items`` and ``_items`` (a list of the items, read from our
  session: what a test reads there is ours; what it would write there is not kept).

Each object opens its session with :meth:`OpenAIAgentsSession.open` (a blocking constructor,
as the SDK's: the open runs in a helper thread with its own event loop); every session a
test made and did not close is closed after the test.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from tempfile import mkdtemp  # bound now: tests that patch tempfile.mkdtemp do not see ours
from typing import Any, cast

import pytest
from upstream_blocking import blocking

import sessiontree as st
from sessiontree.adapters.openai_agents import OpenAIAgentsSession

_root: Path | None = None
# How many tests made one of our objects (the others run no session, or one of their own).
_tests_with_ours = 0
_open: list[_SessionTreeBacked] = []


def _fresh_dir() -> Path:
    assert _root is not None, "the plugin is not configured"
    return Path(mkdtemp(dir=_root))


class _SessionTreeBacked:
    """What the swapped classes share: an :class:`OpenAIAgentsSession` opened blocking, the
    SDK's ``Session`` protocol and anything else (``list_branches`` ...) passed to it."""

    _inner: OpenAIAgentsSession

    def _open_inner(self, directory: Path, session_id: str, session_settings: Any = None) -> None:
        repo = st.AsyncSessionRepo(st.JsonlSessionRepo(directory))
        inner = blocking(
            OpenAIAgentsSession.open(repo, session_id, session_settings=session_settings)
        )
        object.__setattr__(self, "_inner", inner)
        _open.append(self)

    @property
    def session_id(self) -> str:
        return self._inner.session_id

    @property
    def session_settings(self) -> Any:
        return self._inner.session_settings

    @session_settings.setter
    def session_settings(self, value: Any) -> None:
        self._inner.session_settings = value

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return await self._inner.get_items(limit)

    async def add_items(self, items: list[Any]) -> None:
        await self._inner.add_items(items)

    async def pop_item(self) -> Any:
        return await self._inner.pop_item()

    async def clear_session(self) -> None:
        await self._inner.clear_session()

    def _close_inner(self) -> None:
        if not self._inner.closed:
            blocking(self._inner.close())

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


def _sqlite_session_class() -> type:
    from agents.memory.session import SessionABC
    from agents.memory.session_settings import SessionSettings, coerce_session_settings

    class SQLiteSession(_SessionTreeBacked, SessionABC):  # type: ignore[misc]
        """``agents.SQLiteSession``'s constructor over sessiontree (see the module)."""

        def __init__(
            self,
            session_id: str,
            db_path: str | Path = ":memory:",
            sessions_table: str = "agent_sessions",
            messages_table: str = "agent_messages",
            session_settings: SessionSettings | dict[str, Any] | None = None,
        ) -> None:
            settings = (
                coerce_session_settings(session_settings)
                if session_settings is not None
                else SessionSettings()
            )
            self.db_path = db_path
            self.sessions_table = sessions_table
            self.messages_table = messages_table
            if str(db_path) == ":memory:":
                directory = _fresh_dir()
            else:
                base = Path(db_path).expanduser().resolve()
                directory = base.with_name(base.name + ".sessiontree")
                if (sessions_table, messages_table) != ("agent_sessions", "agent_messages"):
                    directory = directory / f"{sessions_table}.{messages_table}"
                directory.mkdir(parents=True, exist_ok=True)
            self._open_inner(directory, session_id, settings)

        def close(self) -> None:
            self._close_inner()

    return SQLiteSession


def _simple_session_classes() -> tuple[type, type, type]:
    from agents.memory.session import Session

    class SimpleListSession(_SessionTreeBacked, Session):  # type: ignore[misc]
        """Their in-memory test session's constructor over sessiontree (see the module)."""

        def __init__(self, session_id: str = "test", history: list[Any] | None = None) -> None:
            self._ignore_ids_for_matching = False
            self._open_inner(_fresh_dir(), session_id)
            if history:
                blocking(self._inner.add_items(list(history)))

        @property
        def saved_items(self) -> list[Any]:
            return blocking(self._inner.get_items())

        @property
        def _items(self) -> list[Any]:
            return blocking(self._inner.get_items())

        def __getattr__(self, name: str) -> Any:
            # Theirs has no _get_compaction_snapshot: their compaction tests take the path
            # of a store without one (a complete read, then clear and add) through it.
            if name == "_get_compaction_snapshot":
                raise AttributeError(name)
            return super().__getattr__(name)

    class CountingSession(SimpleListSession):
        def __init__(self, session_id: str = "test", history: list[Any] | None = None) -> None:
            super().__init__(session_id=session_id, history=history)
            self.pop_calls = 0

        async def pop_item(self) -> Any:
            self.pop_calls += 1
            return await super().pop_item()

    class IdStrippingSession(CountingSession):
        def __init__(self, session_id: str = "test", history: list[Any] | None = None) -> None:
            super().__init__(session_id=session_id, history=history)
            self._ignore_ids_for_matching = True

        async def add_items(self, items: list[Any]) -> None:
            clean = [
                {k: v for k, v in item.items() if k != "id"} if isinstance(item, dict) else item
                for item in items
            ]
            await super().add_items(clean)

    return SimpleListSession, CountingSession, IdStrippingSession


def pytest_configure(config: pytest.Config) -> None:
    global _root
    _root = Path(mkdtemp(prefix="sessiontree-upstream-"))

    import agents
    import agents.memory

    sqlite_session = _sqlite_session_class()
    agents.SQLiteSession = sqlite_session  # type: ignore[attr-defined, misc]
    agents.memory.SQLiteSession = sqlite_session  # type: ignore[attr-defined, misc]

    # Their test package is importable once their conftest is loaded (the SDK's root is on
    # sys.path): swap the helper module's classes before any test module imports them.
    if (config.rootpath / "tests" / "utils" / "simple_session.py").exists():
        from tests.utils import simple_session  # type: ignore[import-not-found]

        classes = _simple_session_classes()
        for cls in classes:
            cls.__module__ = simple_session.__name__
        module = cast(Any, simple_session)
        module.SimpleListSession, module.CountingSession, module.IdStrippingSession = classes


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Any:
    global _tests_with_ours
    yield
    _tests_with_ours += bool(_open)
    while _open:
        _open.pop()._close_inner()


def pytest_unconfigure(config: pytest.Config) -> None:
    while _open:
        _open.pop()._close_inner()
    if _root is not None:
        shutil.rmtree(_root, ignore_errors=True)


def pytest_report_header(config: pytest.Config) -> str:
    return (
        "sessiontree upstream: agents.SQLiteSession and tests.utils.simple_session's "
        "sessions are sessiontree's OpenAIAgentsSession over JSONL"
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(
        f"sessiontree upstream: {_tests_with_ours} tests made an OpenAIAgentsSession"
    )
