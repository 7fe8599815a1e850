"""The README's async example runs as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_async_example_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Async and the conformance kit") :]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1 ['async demo']"
    assert len(list((tmp_path / "sessions").glob("*.jsonl"))) == 1
