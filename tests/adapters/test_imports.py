"""``import sessiontree`` never imports a framework; an adapter without its framework says
which extra to install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FRAMEWORKS = (
    "agents",
    "claude_agent_sdk",
    "pydantic_ai",
    "openai",
    "pydantic",
    "mcp",
    "langgraph",
    "langchain_core",
)

ADAPTERS = [
    ("openai_agents", "agents", "openai-agents", "OpenAIAgentsSession"),
    ("claude_agent_sdk", "claude_agent_sdk", "claude-agent-sdk", "ClaudeAgentSessionStore"),
    ("pydantic_ai", "pydantic_ai", "pydantic-ai", "PydanticAIConversationStore"),
    ("langgraph", "langgraph", "langgraph", "SessionTreeSaver"),
]


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
    )


def test_importing_sessiontree_imports_no_framework() -> None:
    code = (
        "import sys, sessiontree, sessiontree.adapters; "
        "s = sessiontree.Session(sessiontree.InMemorySessionStorage()); "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r}))"
    )
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize(("module", "framework", "extra", "name"), ADAPTERS)
def test_an_adapter_without_its_framework_names_the_extra(
    tmp_path: Path, module: str, framework: str, extra: str, name: str
) -> None:
    # A framework that cannot be imported stands for an installation without the extra.
    fake = tmp_path / "fake"
    (fake / framework).mkdir(parents=True)
    (fake / framework / "__init__.py").write_text(f"raise ImportError('no {framework}')\n")
    for code in (
        f"import sessiontree.adapters.{module}",
        f"import sessiontree; sessiontree.{name}",
    ):
        proc = _python(code, PYTHONPATH=str(fake))
        assert proc.returncode == 1
        assert f"pip install 'sessiontree[{extra}]'" in proc.stderr


@pytest.mark.parametrize(("module", "framework", "extra", "name"), ADAPTERS)
def test_the_root_names_are_the_adapters_classes(
    module: str, framework: str, extra: str, name: str
) -> None:
    pytest.importorskip(framework, reason=f"the {extra} extra is not installed")
    import importlib

    import sessiontree

    adapter = importlib.import_module(f"sessiontree.adapters.{module}")
    assert getattr(sessiontree, name) is getattr(adapter, name)
    assert name in sessiontree.__all__
