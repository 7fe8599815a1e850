"""pytest configuration for the whole repository.

The package's docstring examples run too (``--doctest-modules`` on ``python/sessiontree``);
an adapter's module imports its framework, an optional extra, so it is left out of the
doctests where that framework is not installed (its tests in ``tests/adapters`` skip then).
"""

from __future__ import annotations

import importlib.util

_ADAPTER_FRAMEWORKS = {
    "openai_agents.py": "agents",
    "claude_agent_sdk.py": "claude_agent_sdk",
    "pydantic_ai.py": "pydantic_ai",
}

collect_ignore = [
    f"python/sessiontree/adapters/{module}"
    for module, framework in _ADAPTER_FRAMEWORKS.items()
    if importlib.util.find_spec(framework) is None
]
