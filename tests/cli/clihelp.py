"""Helpers and fixtures for the ``sessiontree`` command's tests (``conftest.py`` makes the
fixtures available): they run the installed command as a subprocess on real files.

- ``cli``: runs ``sessiontree ARGS`` (the console script beside this interpreter, as
  ``make install`` puts it there) with a plain environment — no colour variables, no pager,
  ``COLUMNS=100`` — and returns the completed process (text).
- ``demo``: the session ``examples/demo.py`` writes (``<tmp>/demo/demo.jsonl``), with the
  ids of a few of its entries.
- ``schema``: validates a ``--json`` document against ``sessiontree schema CMD``.
- ``write_lines``: writes a session file from raw lines (bytes), for broken files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("sessiontree")
# pi's own session files (the repository's copy of the golden fixtures).
PI_FIXTURES = ROOT / "tests" / "fixtures" / "pi"


def command() -> list[str]:
    """The installed console script, or ``python -m sessiontree`` where none is."""
    return [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "sessiontree"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "NO_COLOR",
            "FORCE_COLOR",
            "CLICOLOR_FORCE",
            "PAGER",
            "SESSIONTREE_PAGER",
            "SESSIONTREE_REPO",
            "COLUMNS",
            "LINES",
        )
    }
    env["COLUMNS"] = "100"
    env.update(extra)
    return env


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def cli() -> Runner:
    def run(
        *args: str | os.PathLike[str],
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        input: str | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command(), *(os.fspath(a) for a in args)],
            capture_output=True,
            text=True,
            env=clean_env(**(env or {})),
            cwd=cwd,
            input=input,
            timeout=timeout,
            check=False,
        )

    return run


def load_demo() -> Any:
    spec = importlib.util.spec_from_file_location("sessiontree_demo", ROOT / "examples" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Demo:
    """The demo session and the ids the tests need."""

    dir: Path
    path: Path
    jwt_tip: str
    leaf: str
    ids: tuple[str, ...]


@pytest.fixture
def demo(tmp_path: Path) -> Demo:
    import sessiontree as st

    module = load_demo()
    directory = tmp_path / "demo"
    directory.mkdir()
    path = directory / "demo.jsonl"
    jwt_tip = module.build(path)
    with st.JsonlSessionStorage.open(path, readonly=True) as s:
        leaf = s.get_leaf_id()
        ids = tuple(e.id for e in s.get_entries())
    assert leaf is not None
    return Demo(directory, path, jwt_tip, leaf, ids)


@pytest.fixture
def schema() -> Callable[[str, Any], None]:
    import jsonschema

    from sessiontree.cli._schema import load

    def check(name: str, doc: Any) -> None:
        jsonschema.validate(doc, load(name))

    return check


def parse_json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def write_lines(tmp_path: Path) -> Callable[..., Path]:
    def write(lines: Sequence[bytes], name: str = "s.jsonl", *, newline: bool = True) -> Path:
        path = tmp_path / name
        data = b"\n".join(lines) + (b"\n" if newline else b"")
        path.write_bytes(data)
        return path

    return write


def header(sid: str = "s1") -> bytes:
    return json.dumps(
        {
            "type": "session",
            "version": 3,
            "id": sid,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "cwd": "/w",
            "parent_session": None,
            "metadata": None,
        },
        separators=(",", ":"),
    ).encode()


def user_line(eid: str, parent: str | None, text: str = "hello") -> bytes:
    return json.dumps(
        {
            "type": "message",
            "id": eid,
            "parent_id": parent,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1767225601000},
        },
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()


def snapshot_of(directory: Path) -> dict[str, bytes]:
    """Every file in ``directory`` (names and bytes), to compare before and after."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}
