"""The documentation in the repository: the README's repository example runs (twice, in
the same directory: the second run used to raise ``not_found``), and the README points to
the docs in ``docs/`` rather than to files outside the repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .clihelp import ROOT


def _repository_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Managing many sessions") :]
    return section.split("```python", 1)[1].split("```", 1)[0]


def test_readme_repository_example_runs_twice(tmp_path: Path) -> None:
    code = _repository_example().replace('"/home/me/.myagent/sessions"', repr(str(tmp_path)))
    assert repr(str(tmp_path)) in code
    code = code.replace("    ...\n", "    pass\n")
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    assert len(list(tmp_path.glob("*.jsonl"))) == 2  # the two sessions; the forks deleted


def test_readme_points_to_docs_in_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "shared/spec" not in readme and "FORMAT.md" not in readme
    for doc in ("docs/format.md", "docs/cli.md"):
        assert f"({doc})" in readme
        assert (ROOT / doc).is_file()


def test_cli_manual_names_every_command() -> None:
    manual = (ROOT / "docs" / "cli.md").read_text()
    from sessiontree.cli._app import COMMANDS

    for name, *_ in COMMANDS:
        assert f"`{name}" in manual, name
