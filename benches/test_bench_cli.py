"""The ``sessiontree`` command, timed as a user meets it: a fresh process each round.

- ``cli-ls``: ``sessiontree ls DIR`` of 1,000 sessions (10,000 with ``--bench-size=1m``),
  after one untimed run wrote the repository's listing cache; output to a pipe.
- ``cli-tree-first-screen``: from starting ``sessiontree tree FILE`` to having read its
  first 50 lines from the pipe (what a pager shows first), on the 100k session and, opt-in,
  the 1M one; the file was opened once before (its persisted index is there, as after any
  earlier use).
- ``cli-export-html``: ``sessiontree export FILE --html -o PAGE`` of the 100k session.
- ``cli-html-load``: the time headless Chromium takes to open that page until the viewer
  has drawn its first screen (``document.body.dataset.ready``), by selenium; skipped with a
  message where no Chromium/chromedriver is installed.

There is no baseline: nothing in the plain-Python baseline draws a session. The figures
include the interpreter's start and ``import sessiontree`` (about 0.1 s here, more
without byte-compiled files: the suite byte-compiles the package first, as pip does).
"""

from __future__ import annotations

import compileall
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from conftest import Bench

SCRIPT = Path(sys.executable).with_name("sessiontree")


def _command() -> list[str]:
    return [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "sessiontree"]


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NO_COLOR", "PAGER", "PYTHONDONTWRITEBYTECODE")
    }
    env["COLUMNS"] = "120"
    return env


@pytest.fixture(scope="module", autouse=True)
def _compiled() -> None:
    import sessiontree

    compileall.compile_dir(Path(sessiontree.__file__).parent, quiet=1)


def _run(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*_command(), *map(os.fspath, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(),
        check=True,
    )


@pytest.mark.parametrize("size", ["repo", "repo_big"])
def test_cli_ls(benchmark: BenchmarkFixture, bench: Bench, size: str) -> None:
    rw = bench.repo(size)
    benchmark.group = f"cli-ls@{bench.label(size)}"
    _run("ls", rw.directory)  # writes the listing cache
    benchmark.pedantic(_run, args=("ls", rw.directory), rounds=bench.rounds("sessiontree", "small"))
    out = subprocess.run(
        [*_command(), "ls", rw.directory, "--json"], capture_output=True, env=_env(), check=True
    ).stdout
    import json

    assert {r["id"] for r in json.loads(out)["sessions"]} == set(rw.manifests)
    benchmark.extra_info.update(scenario="cli-ls", impl="sessiontree", n=bench.n(size))


def _first_screen(path: Path, lines: int = 50) -> list[bytes]:
    proc = subprocess.Popen(
        [*_command(), "tree", os.fspath(path)], stdout=subprocess.PIPE, env=_env()
    )
    assert proc.stdout is not None
    got = [proc.stdout.readline() for _ in range(lines)]
    proc.kill()
    proc.wait()
    proc.stdout.close()
    return got


@pytest.mark.parametrize("size", ["large", "huge"])
def test_cli_tree_first_screen(benchmark: BenchmarkFixture, bench: Bench, size: str) -> None:
    wl = bench.workload(size)
    benchmark.group = f"cli-tree-first-screen@{bench.label(size)}"
    from sessiontree import JsonlSessionStorage

    JsonlSessionStorage.open(wl.path, readonly=True).close()  # as after any earlier use
    got = benchmark.pedantic(
        _first_screen, args=(wl.path,), rounds=bench.rounds("sessiontree", size)
    )
    assert got[0].startswith(b"bench session") or b"session" in got[0]
    assert all(got), "fewer than 50 lines"
    benchmark.extra_info.update(
        scenario="cli-tree-first-screen",
        impl="sessiontree",
        n=wl.manifest.n,
        bytes=wl.manifest.size_bytes,
    )


@pytest.fixture(scope="module")
def page(bench: Bench, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return {"path": tmp_path_factory.mktemp("html") / "session.html"}


def test_cli_export_html(benchmark: BenchmarkFixture, bench: Bench, page: dict[str, Any]) -> None:
    wl = bench.workload("large")
    benchmark.group = f"cli-export-html@{bench.label('large')}"
    out = page["path"]

    def export() -> None:
        out.unlink(missing_ok=True)
        _run("export", wl.path, "--html", "-o", out)

    benchmark.pedantic(export, rounds=1 if not bench.real else 3)
    assert out.stat().st_size > 0
    page["n"] = wl.manifest.n
    benchmark.extra_info.update(
        scenario="cli-export-html",
        impl="sessiontree",
        n=wl.manifest.n,
        bytes=wl.manifest.size_bytes,
        page_bytes=out.stat().st_size,
    )


def test_cli_html_load(benchmark: BenchmarkFixture, bench: Bench, page: dict[str, Any]) -> None:
    out = page["path"]
    if not out.exists():
        pytest.skip("needs the page of test_cli_export_html")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.skip("no Chromium/chromedriver (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    benchmark.group = f"cli-html-load@{bench.label('large')}"

    def load() -> None:
        driver.get("about:blank")
        driver.get(out.resolve().as_uri())
        deadline = time.monotonic() + 120
        while driver.execute_script("return document.body && document.body.dataset.ready") != "1":
            assert time.monotonic() < deadline, "the viewer did not get ready"
            time.sleep(0.02)

    try:
        benchmark.pedantic(load, rounds=1 if not bench.real else 3)
        rows = driver.execute_script("return document.querySelectorAll('#tree .row').length")
        assert rows > 0
    finally:
        driver.quit()
    benchmark.extra_info.update(
        scenario="cli-html-load", impl="sessiontree", n=page["n"], bytes=out.stat().st_size
    )
