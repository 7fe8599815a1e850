"""pytest plugin: the Claude Agent SDK's own store tests, run with sessiontree's store.

Loaded with ``-p claude_agent_sdk_plugin`` (``tests/upstream/run.sh`` puts this folder on
``PYTHONPATH``) while pytest runs the tests of the SDK's source distribution, which stay
theirs (fetched at test time, never copied here). Before their test modules are imported,
the store they construct, ``InMemorySessionStore`` (``claude_agent_sdk`` and
``claude_agent_sdk._internal.session_store``), is swapped for
:class:`~sessiontree.adapters.claude_agent_sdk.ClaudeAgentSessionStore` over a
:class:`~sessiontree.JsonlSessionRepo` in a fresh folder (each object its own, as each
in-memory store is). Its test helpers are kept: ``get_entries(key)`` (the key's entries,
``[]`` for none), ``size`` (the main transcripts stored) and ``clear()`` (delete them all),
each read from or done to our store. So their conformance harness
(``claude_agent_sdk.testing.run_session_store_conformance``), their session-helper, import,
resume, summary and transcript-mirror tests run on our store. Every store a test made is
closed after the test.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from tempfile import mkdtemp  # bound now: tests that patch tempfile.mkdtemp do not see ours
from typing import Any

import pytest
from upstream_blocking import blocking

_root: Path | None = None
# How many tests made one of our objects (the others run no session, or one of their own).
_tests_with_ours = 0
_open: list[Any] = []


def _store_class() -> type:
    import sessiontree as st
    from sessiontree.adapters.claude_agent_sdk import ClaudeAgentSessionStore

    class InMemorySessionStore(ClaudeAgentSessionStore):
        """``claude_agent_sdk.InMemorySessionStore``'s constructor and test helpers over
        sessiontree (see the module)."""

        def __init__(self) -> None:
            assert _root is not None, "the plugin is not configured"
            directory = Path(mkdtemp(dir=_root))
            super().__init__(st.AsyncSessionRepo(st.JsonlSessionRepo(directory)))
            _open.append(self)

        def get_entries(self, key: Any) -> list[Any]:
            return blocking(self.load(key)) or []

        @property
        def size(self) -> int:
            return sum(1 for m in self.repo.repo.list() if m.parent_session is None)

        def clear(self) -> None:
            async def clear() -> None:
                await self.close()
                for m in await self.repo.list():
                    await self.repo.delete(m.id)

            blocking(clear())

    return InMemorySessionStore


def pytest_configure(config: pytest.Config) -> None:
    global _root
    _root = Path(mkdtemp(prefix="sessiontree-upstream-"))

    import claude_agent_sdk
    import claude_agent_sdk._internal.session_store as session_store

    store = _store_class()
    claude_agent_sdk.InMemorySessionStore = store  # type: ignore[misc]
    session_store.InMemorySessionStore = store  # type: ignore[misc]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Any:
    global _tests_with_ours
    yield
    _tests_with_ours += bool(_open)
    while _open:
        blocking(_open.pop().close())


def pytest_unconfigure(config: pytest.Config) -> None:
    while _open:
        blocking(_open.pop().close())
    if _root is not None:
        shutil.rmtree(_root, ignore_errors=True)


def pytest_report_header(config: pytest.Config) -> str:
    return (
        "sessiontree upstream: claude_agent_sdk.InMemorySessionStore is sessiontree's "
        "ClaudeAgentSessionStore over JSONL"
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(
        f"sessiontree upstream: {_tests_with_ours} tests made a ClaudeAgentSessionStore"
    )
