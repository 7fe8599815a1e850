"""The figures of issue 10 (hardening), measured in fresh child processes.

Usage::

    .venv/bin/python benches/hardening.py            # all three, sizes as in the issue
    .venv/bin/python benches/hardening.py --quick    # small sizes (a smoke test, seconds)
    .venv/bin/python benches/hardening.py fleet junk listing   # pick scenarios

- ``fleet``: threads and file descriptors of one process holding 2,000 open ``group``
  writers (each has appended once), and after closing them.
- ``junk``: peak RSS (``VmHWM``) opening a 10 MB file of 5 million one-byte junk lines
  read-only and holding its ``load_report``, against the interpreter's own peak after
  import.
- ``listing``: ``JsonlSessionRepo.list()`` of 9,000 sessions whose first prompts are
  32 KB: cold (no cache), from the cache file (a new repository object, as another
  process would), and again on the same object; and the cache file's size.

Files go to a temporary directory under ``$TMPDIR`` (about 300 MB for ``listing``),
removed afterwards. Prints one JSON object per scenario, then a Markdown table.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from typing import Any

FLEET = """
    import json, os, sys
    import sessiontree as st
    root, n = sys.argv[1], int(sys.argv[2])
    def threads():
        return len(os.listdir("/proc/self/task"))
    def fds():
        return len(os.listdir("/proc/self/fd"))
    before = {"threads": threads(), "fds": fds()}
    writers = [st.JsonlSessionStorage.create(f"{root}/s{i}.jsonl", durability="group")
               for i in range(n)]
    for w in writers:
        st.Session(w).append_message(st.UserMessage("hello"))
    opened = {"threads": threads(), "fds": fds()}
    for w in writers:
        w.close()
    closed = {"threads": threads(), "fds": fds()}
    print(json.dumps({"writers": n, "before": before, "open": opened, "closed": closed}))
"""

JUNK = """
    import json, sys
    import sessiontree as st
    def peak_mib():
        # VmHWM: this process image's own peak (ru_maxrss also counts the parent's, from
        # before the exec).
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
    base = peak_mib()
    storage = st.JsonlSessionStorage.open(sys.argv[1], readonly=True)
    at_open = peak_mib()
    report = storage.load_report
    held = peak_mib()
    print(json.dumps({
        "lines": int(sys.argv[2]), "file_mb": round(int(sys.argv[3]) / 1e6, 1),
        "baseline_mib": round(base), "peak_open_mib": round(at_open),
        "peak_report_held_mib": round(held), "issues_kept": len(report.issues),
        "counts": getattr(report, "counts", None),
    }))
"""

LISTING = """
    import json, os, sys, time
    import sessiontree as st
    root = sys.argv[1]
    cache = os.path.join(root, ".sessiontree-list-cache.json")
    if os.path.exists(cache):
        os.unlink(cache)
    def timed(fn):
        t = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - t
    repo = st.JsonlSessionRepo(root)
    rows, cold = timed(repo.list)
    size = os.path.getsize(cache) if os.path.exists(cache) else None
    _, from_cache = timed(st.JsonlSessionRepo(root).list)
    _, from_cache2 = timed(st.JsonlSessionRepo(root).list)
    _, warm = timed(repo.list)
    longest = max(len(m.first_message or "") for m in rows)
    print(json.dumps({
        "sessions": len(rows), "cold_s": round(cold, 3),
        "from_cache_file_s": round(min(from_cache, from_cache2), 3),
        "same_object_s": round(warm, 4), "cache_mib": size and round(size / 2**20, 2),
        "longest_first_message": longest,
    }))
"""


def child(code: str, *args: str, timeout: float = 3600) -> Any:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"child failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def fleet(tmp: str, quick: bool) -> dict[str, Any]:
    root = os.path.join(tmp, "fleet")
    os.mkdir(root)
    return child(FLEET, root, "100" if quick else "2000")


def junk(tmp: str, quick: bool) -> dict[str, Any]:
    import sessiontree as st

    lines = 100_000 if quick else 5_000_000
    path = os.path.join(tmp, "junk.jsonl")
    header = st.model.entries.header_to_json(st.SessionHeader.generate(cwd="/w"))
    with open(path, "wb") as f:
        f.write(header + b"\n" + b"x\n" * lines)
    return child(JUNK, path, str(lines), str(os.path.getsize(path)))


def listing(tmp: str, quick: bool) -> dict[str, Any]:
    import sessiontree as st

    n = 200 if quick else 9_000
    root = os.path.join(tmp, "repo")
    repo = st.JsonlSessionRepo(root, durability="none")
    prompt = ("Please refactor the parser so that it streams its input. " * 600)[:32_000]
    for i in range(n):
        with repo.create(cwd=f"/work/project-{i % 40}", name=None) as s:
            s.append_message(st.UserMessage(f"{i}: {prompt}"))
            s.append_message(
                st.AssistantMessage([st.TextContent("On it.")], provider="p", model="m")
            )
    return child(LISTING, root)


SCENARIOS = {"fleet": fleet, "junk": junk, "listing": listing}


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    names = [a for a in argv if not a.startswith("--")] or list(SCENARIOS)
    results = {}
    tmp = tempfile.mkdtemp(prefix="sessiontree-hardening-")
    try:
        for name in names:
            results[name] = SCENARIOS[name](tmp, quick)
            print(json.dumps({name: results[name]}), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("| scenario | figure |")
    print("|---|---|")
    if "fleet" in results:
        r = results["fleet"]
        print(
            f"| {r['writers']:,} open `group` writers | threads {r['before']['threads']} → "
            f"{r['open']['threads']}, descriptors {r['before']['fds']} → {r['open']['fds']} "
            f"(after closing: {r['closed']['threads']} threads, {r['closed']['fds']} fds) |"
        )
    if "junk" in results:
        r = results["junk"]
        print(
            f"| {r['lines']:,} junk lines ({r['file_mb']} MB), read-only open | peak RSS "
            f"{r['peak_open_mib']} MiB at open, {r['peak_report_held_mib']} MiB with the "
            f"report held (interpreter alone: {r['baseline_mib']} MiB) |"
        )
    if "listing" in results:
        r = results["listing"]
        print(
            f"| list() of {r['sessions']:,} sessions, 32 KB first prompts | cold "
            f"{r['cold_s']} s, from the cache file {r['from_cache_file_s']} s, same object "
            f"{r['same_object_s']} s; cache {r['cache_mib']} MiB |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
