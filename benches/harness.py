"""What each scenario runs, for both implementations, and the peak-RSS subprocess.

The benchmark files time these functions in-process; :func:`measure_peak_rss` runs one of
them once in a fresh interpreter (``python benches/harness.py SCENARIO IMPL PATH``) and reads
that process's peak resident set size. The figure includes the
interpreter and the imports of its implementation (``import sessiontree`` or ``import
orjson``), as a user's process would.

Every scenario returns its raw result; :func:`summary` reduces it to the values both
implementations must agree on (leaf id, entry count, context length, a digest of the
context's roles and timestamps).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
IMPLS = ("sessiontree", "baseline")


@dataclass(frozen=True)
class Summary:
    """What two implementations must agree on after a scenario.

    Attributes:
        leaf: the leaf id.
        entries: the number of entries.
        context: the number of context messages (``-1`` if none was built).
        digest: a hash of the context's ``(role, timestamp)`` pairs (``""`` if none).
    """

    leaf: str | None
    entries: int
    context: int = -1
    digest: str = ""


def context_digest(pairs: Sequence[tuple[str, int]]) -> str:
    """A short hash of ``(role, timestamp)`` pairs."""
    h = hashlib.blake2b(digest_size=12)
    for role, ts in pairs:
        h.update(f"{role}:{ts};".encode())
    return h.hexdigest()


def st_pairs(messages: Sequence[Any]) -> list[tuple[str, int]]:
    return [(m.role, m.timestamp) for m in messages]


def bl_pairs(messages: Sequence[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(m["role"], m["timestamp"]) for m in messages]


# -- scenarios: sessiontree --------------------------------------------------------------


def st_open(path: str | os.PathLike[str]) -> Summary:
    """Read-only open: the index is built and every line checked well-formed."""
    from sessiontree import JsonlSessionStorage

    storage = JsonlSessionStorage.open(path, readonly=True)
    try:
        if storage.load_report.issues:
            raise AssertionError(f"load issues: {storage.load_report.issues[:3]}")
        return Summary(storage.get_leaf_id(), len(storage))
    finally:
        storage.close()


def st_resume(path: str | os.PathLike[str]) -> tuple[str | None, int, Any, Any]:
    """Writer open + the context of the leaf: what an agent does to continue a session.

    The session is returned open, as an agent continuing it keeps it (:func:`close_all`
    closes it, untimed): closing is not part of resuming.
    """
    from sessiontree import JsonlSessionStorage, Session

    session = Session(JsonlSessionStorage.open(path))
    OPEN.append(session)
    return session.get_leaf_id(), len(session), session.build_context(), session


OPEN: list[Any] = []
"""Sessions a scenario left open."""


def close_all() -> None:
    """Closes the sessions scenarios left open."""
    while OPEN:
        OPEN.pop().close()


def st_resume_summary(result: tuple[str | None, int, Any, Any]) -> Summary:
    leaf, n, ctx, _ = result
    return Summary(leaf, n, len(ctx.messages), context_digest(st_pairs(ctx.messages)))


# -- scenarios: baseline -----------------------------------------------------------------


def bl_open(path: str | os.PathLike[str]) -> Summary:
    """Reads every line into dicts and indexes them."""
    import baseline

    session = baseline.open_session(path)
    if session.issues:
        raise AssertionError(f"{session.issues} load issues")
    return Summary(session.leaf, len(session.entries))


def bl_resume(path: str | os.PathLike[str]) -> tuple[str | None, int, dict[str, Any]]:
    """Reads the file and builds the context of the leaf as dicts."""
    import baseline

    session = baseline.open_session(path)
    return session.leaf, len(session.entries), session.build_context()


def bl_resume_summary(result: tuple[str | None, int, dict[str, Any]]) -> Summary:
    leaf, n, ctx = result
    messages = ctx["messages"]
    return Summary(leaf, n, len(messages), context_digest(bl_pairs(messages)))


SCENARIOS: dict[tuple[str, str], tuple[Callable[[str], Any], Callable[[Any], Summary]]] = {
    ("open", "sessiontree"): (st_open, lambda s: s),
    ("open", "baseline"): (bl_open, lambda s: s),
    ("resume", "sessiontree"): (st_resume, st_resume_summary),
    ("resume", "baseline"): (bl_resume, bl_resume_summary),
}


# -- peak RSS ------------------------------------------------------------------------------


def measure_peak_rss(
    scenario: str, impl: str, path: str | os.PathLike[str]
) -> tuple[int, Summary, tuple[int | None, int | None]]:
    """Runs one scenario once in a fresh interpreter.

    The worker is started by a small launcher process, which waits for it and reads
    ``getrusage(RUSAGE_CHILDREN).ru_maxrss``. Started straight from the benchmark process,
    the worker's peak would include the benchmark process's own resident set: Linux keeps
    the high-water mark of the forked copy across ``exec``.

    Returns:
        the worker's peak RSS in bytes (the whole process, its close included), its
        summary, and its peaks before and after the summary was made (None where
        ``/proc`` does not tell): for ``resume``, the peak of open + ``build_context``
        alone, and the peak once the summary built every context message.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    cmd = [sys.executable, str(HERE / "harness.py"), "--launch", scenario, impl, os.fspath(path)]
    proc = subprocess.run(cmd, capture_output=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr.decode()}")
    report = json.loads(proc.stdout)
    return (
        report["peak_rss"],
        Summary(**report["summary"]),
        (report["peak_rss_run"], report["peak_rss_read"]),
    )


def _launch(argv: list[str]) -> int:
    import resource

    cmd = [sys.executable, str(HERE / "harness.py"), *argv]
    proc = subprocess.run(cmd, capture_output=True, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr.decode())
        return proc.returncode
    # This launcher has waited for exactly one child: the maximum is that child's peak.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    sys.stdout.write(json.dumps({"peak_rss": peak, **json.loads(proc.stdout)}))
    return 0


def _peak_so_far() -> int | None:
    """This process's peak RSS in bytes so far (Linux: ``VmHWM``), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _worker(argv: list[str]) -> int:
    scenario, impl, path = argv
    run, summarize = SCENARIOS[(scenario, impl)]
    result = run(path)
    # The peak of the scenario itself, before the summary reads every context message
    # (which builds each one, with its text: sessiontree builds messages on first use).
    peak_run = _peak_so_far()
    summary = summarize(result)
    peak_read = _peak_so_far()
    close_all()
    report = {"summary": summary.__dict__, "peak_rss_run": peak_run, "peak_rss_read": peak_read}
    sys.stdout.write(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    if sys.argv[1:2] == ["--launch"]:
        sys.exit(_launch(sys.argv[2:]))
    sys.exit(_worker(sys.argv[1:]))
