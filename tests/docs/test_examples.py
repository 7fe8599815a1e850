"""Every code example in README.md and docs/*.md runs, and every link between them holds.

The convention the pages follow (also told in ``docs/README.md``, "Examples"):

* A fenced block marked ``python`` is a complete program. Each one runs on its own in a
  fresh interpreter (``sys.executable``), with an empty temporary directory as its working
  directory and ``HOME`` set to another empty temporary directory (so ``~`` and
  ``Path.home()`` land there), and must exit with status 0 within ``TIMEOUT`` seconds.
* What is not a program (signatures, outlines, output, a shell session, file contents) is
  fenced ``text``, ``bash``/``sh`` or ``jsonl``, never ``python``.
* An HTML comment on the line before the fence, ``<!-- example: KEY=VALUE ... -->``, says
  what the block needs:

  - ``needs=postgres``: a PostgreSQL server. The block reads its conninfo from
    ``SESSIONTREE_PG_DSN`` and its schema from ``SESSIONTREE_PG_SCHEMA`` (a fresh one per
    block), both set from the suite's ``pg_server`` / ``pg_schema`` fixtures; skipped when
    there is no server, as every PostgreSQL test is (and failed under CI).
  - ``needs=MODULE`` (``agents``, ``claude_agent_sdk``, ``pydantic_ai``, ``langgraph``):
    skipped only when that module cannot be imported (its extra is not installed).
  - ``setup=pi-home``: pi's fixture session ``c-compaction.jsonl`` lies in
    ``~/.pi/agent/sessions/--home-user-project--/`` as pi names its files.

* ``<!-- example: output -->`` on the line before a ``text`` block that directly follows a
  ``python`` block: the program prints exactly that text.

Nothing calls a real model or the network: examples that use an LLM use a stand-in
function or the framework's own test model.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TIMEOUT = 120
PI_SESSION = ROOT / "tests" / "fixtures" / "pi" / "c-compaction.jsonl"
PI_NAME = "2026-11-30T17-03-53-640Z_01a22d69-bb27-709d-97f1-8c54614e86e5.jsonl"

_FENCE = re.compile(r"^(\s*)(`{3,})\s*([\w+-]*)\s*$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*example:\s*(.*?)\s*-->\s*$")
_KNOWN_NEEDS = {"postgres", "agents", "claude_agent_sdk", "pydantic_ai", "langgraph"}
_KNOWN_SETUPS = {"pi-home"}


@dataclass
class Block:
    """One fenced block of a page."""

    page: Path
    line: int  # 1-based line of its opening fence
    lang: str
    code: str
    directive: str | None  # the text of an ``<!-- example: ... -->`` right before it


@dataclass
class Example:
    """A ``python`` block with what it needs and what it must print."""

    block: Block
    needs: set[str] = field(default_factory=set)
    setups: set[str] = field(default_factory=set)
    output: str | None = None

    @property
    def id(self) -> str:
        return f"{self.block.page.relative_to(ROOT)}:{self.block.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, in order (an indented fence is dedented)."""
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        indent, ticks, lang = match.groups()
        before = lines[i - 1] if i > 0 else ""
        directive = _DIRECTIVE.match(before)
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != ticks:
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        assert j < len(lines), f"{page.name}:{i + 1}: a code block is never closed"
        code = "\n".join(body) + "\n"
        out.append(Block(page, i + 1, lang, code, directive.group(1) if directive else None))
        i = j + 1
    return out


def examples() -> list[Example]:
    """Every ``python`` block of the pages, with its directive and expected output."""
    found: list[Example] = []
    for page in PAGES:
        page_blocks = blocks(page)
        for k, block in enumerate(page_blocks):
            if block.lang != "python":
                continue
            example = Example(block)
            for item in (block.directive or "").split():
                key, _, value = item.partition("=")
                if key == "needs" and value in _KNOWN_NEEDS:
                    example.needs.add(value)
                elif key == "setup" and value in _KNOWN_SETUPS:
                    example.setups.add(value)
                else:
                    raise AssertionError(f"{example.id}: unknown example directive {item!r}")
            after = page_blocks[k + 1] if k + 1 < len(page_blocks) else None
            if after is not None and after.directive == "output":
                assert after.lang == "text", f"{example.id}: an output block is fenced text"
                example.output = after.code
            found.append(example)
    return found


EXAMPLES = examples()


def test_the_pages_have_examples_and_only_known_fences() -> None:
    # A block fenced ``py`` or ``python3`` would silently not run: only these are allowed.
    allowed = {"python", "text", "bash", "sh", "jsonl", ""}
    for page in PAGES:
        for block in blocks(page):
            where = f"{page.relative_to(ROOT)}:{block.line}"
            assert block.lang in allowed, f"{where}: fence {block.lang!r}"
            assert block.lang or not block.code.strip(), f"{where}: a fence names no language"
            if block.directive == "output":
                assert block.lang == "text", f"{where}: expected output is fenced text"
            elif block.directive is not None:
                assert block.lang == "python", f"{where}: an example directive on {block.lang!r}"
    # Every expected output belongs to the example right before it (none is ignored).
    outputs = [b for page in PAGES for b in blocks(page) if b.directive == "output"]
    assert len(outputs) == sum(e.output is not None for e in EXAMPLES)
    pages_with_examples = {e.block.page.name for e in EXAMPLES}
    assert "README.md" in pages_with_examples
    assert len(EXAMPLES) >= 15


def _prepare_home(home: Path, setups: set[str]) -> None:
    if "pi-home" in setups:
        folder = home / ".pi" / "agent" / "sessions" / "--home-user-project--"
        folder.mkdir(parents=True)
        shutil.copyfile(PI_SESSION, folder / PI_NAME)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.id)
def test_example_runs(example: Example, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    env = dict(os.environ)
    for name in ("SESSIONTREE_REPO", "PI_CODING_AGENT_DIR", "SESSIONTREE_PG_SCHEMA"):
        env.pop(name, None)
    for module in sorted(example.needs - {"postgres"}):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (its extra is missing)")
    if "postgres" in example.needs:
        env["SESSIONTREE_PG_DSN"] = request.getfixturevalue("pg_server").dsn
        env["SESSIONTREE_PG_SCHEMA"] = request.getfixturevalue("pg_schema")
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    env["HOME"] = str(home)
    _prepare_home(home, example.setups)
    proc = subprocess.run(
        [sys.executable, "-c", example.block.code],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, f"{example.id} failed:\n{proc.stderr}"
    if example.output is not None:
        assert proc.stdout == example.output, f"{example.id} printed:\n{proc.stdout}"


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_relative_links_point_at_files_in_the_repository() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target in _LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            assert path.exists(), f"{page.relative_to(ROOT)} links {target}, which is missing"
            assert ROOT in path.parents, f"{page.relative_to(ROOT)} links outside: {target}"


def test_the_readme_is_short_and_links_every_page_of_the_guide() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    title, intro, rest = readme.split("\n\n", 2)
    assert title == "# sessiontree" and intro.startswith("LLM-agent sessions")  # one paragraph
    assert rest.startswith("```bash\nmake demo")  # then the two commands
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in readme, f"the README does not link docs/{page.name}"
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name != "README.md":
            assert f"({page.name})" in index, f"docs/README.md does not link {page.name}"
