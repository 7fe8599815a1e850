"""The async example of the guide (``docs/async.md``) runs as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_async_example_runs(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "async.md").read_text()
    code = page.split("```python", 1)[1].split("```", 1)[0]
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1 ['async demo']"
    assert len(list((tmp_path / "sessions").glob("*.jsonl"))) == 1
