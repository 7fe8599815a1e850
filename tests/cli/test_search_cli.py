"""``sessiontree search``: lines, colour, --json against its schema, exit statuses, and
hostile session text kept off the terminal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st
from sessiontree.testing import plant_search_corpus

from .clihelp import Runner, parse_json


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    plant_search_corpus(st.JsonlSessionRepo(root).create)
    return root


def test_one_line_per_hit_and_exit_statuses(cli: Runner, corpus: Path) -> None:
    found = cli("search", "qwertyuiop", corpus)
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    assert len(lines) == 3
    assert all("**qwertyuiop**" in line.lower() for line in lines)
    assert any("assistant (off branch)" in line for line in lines)
    none = cli("search", "nothingmatcheszz", corpus)
    assert (none.returncode, none.stdout) == (1, "")
    bad = cli("search", '"unbalanced', corpus)
    assert bad.returncode == 2 and "invalid_argument" in bad.stderr
    by_env = cli("search", "qwertyuiop", "--role", "user", env={"SESSIONTREE_REPO": str(corpus)})
    assert len(by_env.stdout.splitlines()) == 2


def test_json_follows_its_schema(
    cli: Runner, corpus: Path, schema: Callable[[str, Any], None]
) -> None:
    proc = cli("search", '"retry backoff"', corpus, "--json", "--since", "2026-09-01")
    doc = parse_json(proc)
    schema("search", doc)
    (hit,) = doc["hits"]
    assert hit["session_id"] == "search-a" and hit["role"] == "user"
    start, end = hit["marks"][0]
    assert hit["snippet"][start:end] == "retry backoff"
    newest = parse_json(cli("search", "qwertyuiop", corpus, "--json", "--newest", "--limit", "1"))
    assert [h["session_id"] for h in newest["hits"]] == ["search-b"]
    # A hit opens in context.
    shown = cli("show", hit["session_id"], hit["entry_id"], "--repo", corpus)
    assert shown.returncode == 0 and "retry backoff" in shown.stdout


def test_colour_highlights_the_match(cli: Runner, corpus: Path) -> None:
    proc = cli("search", "jitter", corpus, "--color", "always")
    assert "\x1b[1;33mjitter\x1b[0m" in proc.stdout
    assert "**" not in proc.stdout


def test_session_text_cannot_drive_the_terminal(cli: Runner, tmp_path: Path) -> None:
    repo = st.JsonlSessionRepo(tmp_path / "r")
    with repo.create(cwd="/w") as s:
        s.append_message(st.UserMessage("evil \x1b]0;TITLE\x07 \x9b2J payload"))
    for colour in ("never", "always"):
        out = cli("search", "payload", tmp_path / "r", "--color", colour).stdout
        assert "\x07" not in out and "\x9b" not in out and "\x1b]" not in out
