"""Snapshot tests: ``tree`` and ``show`` of the demo session (``examples/demo.py``) and of
pi's fixtures, compared with ``tests/cli/snapshots/*.txt``.

Entry ids and times differ on every run of the demo; they are replaced by ``E01``,
``E02``, … (in order of first appearance) and ``<TIME>`` before comparing.
``SESSIONTREE_UPDATE_SNAPSHOTS=1`` rewrites the files instead of comparing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from .clihelp import PI_FIXTURES, Demo, Runner

SNAPSHOTS = Path(__file__).with_name("snapshots")
_ID = re.compile(r"\b[0-9a-f]{8}\b")
_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


def normalise(text: str, base: Path) -> str:
    text = text.replace(str(base), "<DIR>")
    text = _UUID.sub("<UUID>", text)
    text = _ISO.sub("<TIME>", text)
    names: dict[str, str] = {}

    def name(m: re.Match[str]) -> str:
        return names.setdefault(m.group(), f"E{len(names) + 1:02d}" + " " * 5)

    return _ID.sub(name, text)


def compare(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("SESSIONTREE_UPDATE_SNAPSHOTS"):
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"no snapshot {path.name}: run with SESSIONTREE_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text()


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("demo-tree", ("tree",)),
        ("demo-tree-all", ("tree", "--all")),
        ("demo-tree-depth0", ("tree", "--depth", "0")),
        ("demo-show", ("show",)),
        ("demo-show-full", ("show", "--full")),
    ],
)
def test_demo(cli: Runner, demo: Demo, name: str, args: tuple[str, ...]) -> None:
    proc = cli(args[0], demo.path, *args[1:])
    assert proc.returncode == 0, proc.stderr
    compare(name, normalise(proc.stdout, demo.dir))


def test_demo_branch_left(cli: Runner, demo: Demo) -> None:
    proc = cli("show", demo.path, "--leaf", demo.jwt_tip)
    assert proc.returncode == 0, proc.stderr
    compare("demo-show-jwt-branch", normalise(proc.stdout, demo.dir))
    around = cli("tree", demo.path, "--around", demo.jwt_tip, "-C", "2")
    compare("demo-tree-around", normalise(around.stdout, demo.dir))


PI_FILES = ["a-linear", "c-compaction", "d-branching", "e-custom", "h-multiroot"]


@pytest.mark.parametrize("name", PI_FILES)
def test_pi_tree(cli: Runner, name: str) -> None:
    proc = cli("tree", PI_FIXTURES / f"{name}.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert "(no entries)" not in proc.stdout
    compare(f"pi-{name}-tree", normalise(proc.stdout, PI_FIXTURES))


@pytest.mark.parametrize("name", PI_FILES)
def test_pi_show(cli: Runner, name: str) -> None:
    import json

    expected = json.loads((PI_FIXTURES / "expected.json").read_text())["files"][f"{name}.jsonl"]
    proc = cli("show", PI_FIXTURES / f"{name}.jsonl", "--json")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["messages"]) == expected["current"]["contextMessageCount"]
    text = cli("show", PI_FIXTURES / f"{name}.jsonl").stdout
    compare(f"pi-{name}-show", normalise(text, PI_FIXTURES))
