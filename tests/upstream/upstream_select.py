"""pytest plugin: which of a framework's own tests run against sessiontree, and why not the
others.

``--upstream-list FILE`` names a list kept in this repository (``openai_agents.txt``,
``claude_agent_sdk.txt``); ``tests/upstream/run.sh`` passes the list's ``file`` lines to
pytest as the tests to run. Its other lines::

    deselect <node id>  # <reason>
    xfail <node id>  # <reason>

``deselect``: the test is not run (it reaches into the framework's own store: its private
attributes, its tables, its files; or it fails the same way with the framework's own
store). ``xfail``: a divergence of sessiontree's from the framework's store, expected to
fail (strict: once the divergence is fixed, the test passes and the run fails, so the line
goes). A deselect reason beginning ``baseline:`` says the test fails the same way with the
framework's own stores: ``--upstream-baseline`` (``run.sh --baseline``: their stores, our
plugin left out) runs every listed test and expects exactly those to fail. A deselect
reason beginning ``reference:`` says the test fails the same way with the framework's own
persistent reference store: ``--upstream-reference`` (``run.sh claude-agent-sdk
--reference``: the SDK's PostgreSQL store) runs only those, expecting each to fail on its
assertion (``AssertionError``), and the ``reference <node id>`` lines, expected to pass
(they show the reference store is wired right). A node id
without ``[...]`` covers every parametrization of the test. Every line must still name a
test that was collected when the run is the list's files (else the run fails: the list
went stale).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class _Rule:
    action: str
    node_id: str
    reason: str
    line: int
    used: bool = False


def _read(path: Path) -> tuple[list[str], list[_Rule]]:
    files: list[str] = []
    rules: list[_Rule] = []
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        body, _, reason = line.partition("#")
        parts = body.split()
        if len(parts) != 2 or parts[0] not in ("file", "deselect", "xfail", "reference"):
            raise pytest.UsageError(
                f"{path}:{n}: expected 'file|deselect|xfail|reference <id>': {raw}"
            )
        if parts[0] == "file":
            files.append(parts[1])
        elif not reason.strip():
            raise pytest.UsageError(f"{path}:{n}: a {parts[0]} line needs '# <reason>'")
        else:
            rules.append(_Rule(parts[0], parts[1], reason.strip(), n))
    return files, rules


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--upstream-list",
        metavar="FILE",
        help="sessiontree's list of the framework tests to deselect or expect to fail",
    )
    parser.addoption(
        "--upstream-baseline",
        action="store_true",
        help="the run uses the framework's own stores: every listed test runs, and only "
        "those deselected as 'baseline:' are expected to fail",
    )
    parser.addoption(
        "--upstream-reference",
        action="store_true",
        help="the run uses the framework's own persistent reference store: only the tests "
        "deselected as 'reference:' (expected to fail) and the 'reference' lines run",
    )


def _matches(rule: _Rule, node_id: str) -> bool:
    return node_id == rule.node_id or node_id.startswith(rule.node_id + "[")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    path = config.getoption("--upstream-list")
    if not path:
        return
    files, rules = _read(Path(path))
    if config.getoption("--upstream-baseline"):
        rules = [
            _Rule("xfail", r.node_id, r.reason, r.line)
            for r in rules
            if r.action == "deselect" and r.reason.startswith("baseline:")
        ]
    reference = bool(config.getoption("--upstream-reference"))
    if reference:
        rules = [
            _Rule("xfail" if r.action == "deselect" else "run", r.node_id, r.reason, r.line)
            for r in rules
            if r.action == "reference" or r.reason.startswith("reference:")
        ]
    elif not config.getoption("--upstream-baseline"):
        rules = [r for r in rules if r.action != "reference"]
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        rule = next((r for r in rules if _matches(r, item.nodeid)), None)
        if rule is None:
            (dropped if reference else kept).append(item)
            continue
        rule.used = True
        if rule.action == "deselect":
            dropped.append(item)
        elif rule.action == "xfail":
            # A reference run expects the test's own assertion to fail, not a setup error.
            raises = AssertionError if reference else None
            item.add_marker(pytest.mark.xfail(strict=True, reason=rule.reason, raises=raises))
            kept.append(item)
        else:
            kept.append(item)
    # A list line naming no collected test has gone stale (checked when the run is the
    # list's files, so a run of a few files or tests is not refused).
    stale = [r for r in rules if not r.used]
    if stale and (reference or sorted(config.args) == sorted(files)):
        lines = ", ".join(f"line {r.line} ({r.node_id})" for r in stale)
        raise pytest.UsageError(f"{path}: no collected test matches {lines}")
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_report_header(config: pytest.Config) -> str | None:
    path = config.getoption("--upstream-list")
    if not path:
        return None
    files, rules = _read(Path(path))
    deselected = sum(r.action == "deselect" for r in rules)
    xfails = sum(r.action == "xfail" for r in rules)
    return (
        f"sessiontree upstream list {path}: {len(files)} files, {deselected} deselect "
        f"and {xfails} xfail lines"
    )
