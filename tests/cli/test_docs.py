"""The documentation in the repository: the repository example (``docs/repositories.md``)
runs twice in the same directory (the second run used to raise ``not_found``), the README
points to the docs in ``docs/`` rather than to files outside the repository, and the
command's manual names every command. ``tests/docs`` runs every example once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .clihelp import ROOT


def _repository_example() -> str:
    page = (ROOT / "docs" / "repositories.md").read_text()
    return page.split("```python", 1)[1].split("```", 1)[0]


def test_repository_example_runs_twice(tmp_path: Path) -> None:
    code = _repository_example()
    assert 'Path.home() / ".myagent" / "sessions"' in code
    env = {**os.environ, "HOME": str(tmp_path)}  # the example's sessions go to ~/.myagent
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
        )
        assert proc.returncode == 0, proc.stderr
    sessions = tmp_path / ".myagent" / "sessions"
    assert len(list(sessions.glob("*.jsonl"))) == 2  # the two sessions; the forks deleted


def test_readme_points_to_docs_in_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        text = page.read_text()
        assert "shared/spec" not in text and "FORMAT.md" not in text, page.name
        assert "API.md" not in text, page.name
    for doc in ("docs/format.md", "docs/cli.md"):
        assert f"({doc})" in readme
        assert (ROOT / doc).is_file()


def test_cli_manual_names_every_command() -> None:
    manual = (ROOT / "docs" / "cli.md").read_text()
    from sessiontree.cli._app import COMMANDS

    for name, *_ in COMMANDS:
        assert f"`{name}" in manual, name
