"""The repository holds everything its tests, benchmarks and examples read: a fresh clone
has nothing beside it (no reference folder next to it), so no code may reach outside the
checkout."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The reference folder beside a checkout as a relative path, as path parts joined with
# `/`, or as its fixtures' or spec's path: the ways code has reached it.
OUTSIDE = re.compile(
    r"\.\./shared|/\s*[\"']shared[\"']|[\"']shared[\"']\s*/|\bshared/(fixtures|spec)"
)
# Files that name it only to keep it out: this test, and the docs test that checks no page
# points there. (`.ci/run` checks that its own clone has nothing beside it.)
NAMING_IT = {"tests/test_self_contained.py", "tests/cli/test_docs.py"}


def test_no_code_reads_outside_the_repository() -> None:
    offenders = []
    for folder in ("tests", "benches", "examples", "python", "fuzz"):
        for path in (ROOT / folder).rglob("*"):
            rel = path.relative_to(ROOT).as_posix()
            if path.suffix not in {".py", ".rs", ".sh", ".toml"} or rel in NAMING_IT:
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if OUTSIDE.search(line):
                    offenders.append(f"{rel}:{n}: {line.strip()}")
    for name in ("Makefile", "conftest.py", "pyproject.toml"):
        for n, line in enumerate((ROOT / name).read_text().splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{name}:{n}: {line.strip()}")
    assert offenders == []


def test_the_pi_fixtures_are_in_the_repository() -> None:
    fixtures = ROOT / "tests" / "fixtures" / "pi"
    assert (fixtures / "expected.json").is_file()
    assert len(list(fixtures.glob("*.jsonl"))) == 18
