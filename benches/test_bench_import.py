"""``import sessiontree`` in a fresh interpreter, against ``import baseline`` (orjson + stdlib).

The timed call starts a fresh interpreter that imports the module. The figure reported is
that time minus a bare interpreter's start (``python -c pass``, timed in the same test), both
medians; ``python -X importtime`` 's cumulative figure for the module is kept beside it.

Both modules are byte-compiled first, as ``pip install`` compiles a wheel's modules:
otherwise an environment with ``PYTHONDONTWRITEBYTECODE`` (or a read-only checkout) would
time the compiler on every import, which no installed package pays.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import time

import pytest
from harness import HERE, IMPLS
from pytest_benchmark.fixture import BenchmarkFixture

from conftest import Bench

MODULES = {"sessiontree": "sessiontree", "baseline": "baseline"}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    return env


def _run(code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-c", code],
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )


def _timed(code: str) -> float:
    start = time.perf_counter()
    _run(code)
    return time.perf_counter() - start


def importtime_us(module: str) -> int:
    """Cumulative microseconds ``-X importtime`` reports for ``module``."""
    err = _run(f"import {module}", "-X", "importtime").stderr
    for line in err.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s*(\S+)$", line)
        if m and m.group(2) == module:
            return int(m.group(1))
    raise AssertionError(f"{module} not in -X importtime output:\n{err}")


def _compile(module: str) -> None:
    """Byte-compile ``module`` (a package: all of it) where it is imported from."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    if spec.submodule_search_locations:
        for where in spec.submodule_search_locations:
            assert compileall.compile_dir(where, quiet=1), module
    else:
        assert compileall.compile_file(spec.origin, quiet=1), module


@pytest.mark.parametrize("impl", IMPLS)
def test_import(benchmark: BenchmarkFixture, bench: Bench, impl: str) -> None:
    """Time to import the package in a new process, interpreter start subtracted."""
    module = MODULES[impl]
    benchmark.group = "import"
    rounds = 15 if bench.real else 1
    code = f"import {module}"
    _compile(module)
    _timed(code)  # warm the file system cache for both
    bare = statistics.median(_timed("pass") for _ in range(rounds))
    benchmark.pedantic(_timed, args=(code,), rounds=rounds, iterations=1)
    cumulative = statistics.median(importtime_us(module) for _ in range(min(rounds, 7)))
    # The module must really be importable and be what we think it is.
    out = _run(f"import {module}; print({module}.__file__)").stdout.strip()
    assert out.endswith(("__init__.py", "baseline.py"))
    benchmark.extra_info.update(
        scenario="import", impl=impl, bare_interpreter=bare, importtime_us=cumulative
    )
