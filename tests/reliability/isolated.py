"""Running a risky piece of code in a child interpreter, under a timeout.

A hang (a FIFO opened for reading, a deadlock) or a crash (an abort, a stack overflow) in
the child fails the test that asked for it instead of taking the whole run down.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest


def run_isolated(
    code: str, *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> Any:
    """Runs ``code`` (with ``args`` as ``sys.argv[1:]``) in a child interpreter; returns
    the JSON value it prints last. Fails the test if the child hangs or exits non-zero."""
    try:
        result = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout
        pytest.fail(f"hung: no answer within {timeout} s; it printed:\n{(out or '')[-3000:]}")
    assert result.returncode == 0, (
        f"child failed (exit {result.returncode}):\n{result.stderr[-3000:]}"
    )
    return json.loads(result.stdout.strip().splitlines()[-1])
