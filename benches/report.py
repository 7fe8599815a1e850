"""Runs the benchmark suite for real and prints one Markdown table (also written to
``benches/RESULTS.md``).

Usage::

    .venv/bin/python benches/report.py                  # 10k / 100k entries, 1,000 sessions
    .venv/bin/python benches/report.py --bench-size=1m  # + 1M entries, 10,000 sessions
    .venv/bin/python benches/report.py --from-json run.json   # re-render a saved run
    .venv/bin/python benches/report.py -- -k resume     # extra pytest arguments after --

Columns: the scenario; sessiontree's and the baseline's figure (median time per call; mean
for appends, which are amortised; GB/s beside open times); ratio = baseline time /
sessiontree time (above 1: sessiontree is faster); peak RSS of a fresh process running the
scenario once (sessiontree / baseline); the target from issue 9 and whether it is met.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "RESULTS.md"
TIMES = "\u00d7"  # the multiplication sign


# -- formatting ----------------------------------------------------------------------------


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "—"
    return f"{n / 1e6:.0f} MB"


def fmt_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "—"
    return f"{ratio:.1f}{TIMES}" if ratio >= 1 else f"{ratio:.2g}{TIMES}"


def fmt_n(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return f"{n:,}"


# -- machine -------------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def machine() -> dict[str, str]:
    """CPU model, cores, RAM, Python, OS and the code measured."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in _read("/proc/cpuinfo").splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown",
    )
    mem = next(
        (
            int(line.split()[1]) * 1024
            for line in _read("/proc/meminfo").splitlines()
            if line.startswith("MemTotal:")
        ),
        0,
    )
    os_name = next(
        (
            line.split("=", 1)[1].strip().strip('"')
            for line in _read("/etc/os-release").splitlines()
            if line.startswith("PRETTY_NAME=")
        ),
        platform.system(),
    )
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        commit += " (with uncommitted changes)" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count() or 0
    return {
        "CPU": cpu,
        "cores": f"{os.cpu_count()} logical ({affinity} usable)",
        "RAM": f"{mem / 2**30:.1f} GiB",
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "OS": f"{os_name}, {platform.system()} {platform.release()} ({platform.machine()})",
        "commit": commit,
    }


# -- rows ----------------------------------------------------------------------------------


@dataclass
class Row:
    """One table row: a benchmark group with both implementations."""

    group: str
    benches: dict[str, dict[str, Any]]

    def info(self, key: str, impl: str = "sessiontree") -> Any:
        return self.benches.get(impl, {}).get("extra_info", {}).get(key)

    @property
    def scenario(self) -> str:
        for b in self.benches.values():
            return str(b["extra_info"].get("scenario", self.group))
        return self.group

    def figure(self, impl: str) -> float | None:
        """Seconds per call (median; mean for appends; interpreter start subtracted for
        imports)."""
        b = self.benches.get(impl)
        if b is None:
            return None
        stats = b["stats"]
        if self.scenario.startswith("append"):
            return float(stats["mean"])
        if self.scenario == "newest-20-first":
            return float(b["extra_info"]["first_call"])
        if self.scenario == "import":
            return float(stats["median"]) - float(b["extra_info"]["bare_interpreter"])
        return float(stats["median"])

    def ratio(self) -> float | None:
        st, bl = self.figure("sessiontree"), self.figure("baseline")
        if not st or bl is None or st <= 0:
            return None
        return bl / st


def label(row: Row) -> str:
    n = row.info("n") or row.info("n", "baseline") or 0
    size = row.info("bytes") or row.info("bytes", "baseline")
    mb = f", {size / 1e6:.0f} MB" if size else ""
    ctx = row.info("context")
    s = row.scenario
    if s == "resume":
        return f"resume: open {fmt_n(n)} entries{mb} + build context ({ctx:,} msgs)"
    if s == "open":
        return f"open {fmt_n(n)} entries{mb} (read-only, no index)"
    if s == "reopen":
        return f"reopen unchanged {fmt_n(n)} entries{mb}"
    if s == "append-flush":
        return f"append 1 message, `flush`, at {fmt_n(n)} entries"
    if s == "append-fsync":
        return "append 1 message, `fsync`"
    if s == "append-group":
        return "append 1 message, `group` (amortised)"
    if s == "newest-20":
        return f"newest 20 entries, `get_entries(limit=20, reverse=True)` ({fmt_n(n)})"
    if s == "newest-20-first":
        return f"newest 20 entries, first call after open, a fresh process ({fmt_n(n)})"
    if s == "resume-indexed":
        return f"resume with index: open {fmt_n(n)} entries{mb} + build context ({ctx:,} msgs)"
    if s == "branch-tail-20":
        return f"newest 20 entries of the branch, `get_entry` walk ({fmt_n(n)})"
    if s == "build-context":
        return f"cold build_context of {ctx:,} messages (open {fmt_n(n)} session)"
    if s == "agent-turn":
        return f"agent turn: append user + assistant, build_context ({fmt_n(n)} entries)"
    if s == "get-tree":
        return f"get_tree of {fmt_n(n)} entries"
    if s == "fork":
        copied = row.info("copied")
        return f"fork at an entry of a {fmt_n(n)} session ({copied:,} entries copied)"
    if s == "list":
        return f"list {n:,} sessions (sessiontree: cached)"
    if s == "import":
        return "`import sessiontree` (baseline: `import baseline` = orjson + stdlib)"
    if s == "cli-ls":
        return f"`sessiontree ls` of {n:,} sessions (cached), a fresh process"
    if s == "cli-tree-first-screen":
        return f"`sessiontree tree`: first 50 lines of a {fmt_n(n)}-entry session{mb}"
    if s == "cli-export-html":
        page = row.info("page_bytes")
        return f"`sessiontree export --html` of {fmt_n(n)} entries{mb} ({fmt_bytes(page)} page)"
    if s == "cli-html-load":
        return f"headless Chromium opens that page ({fmt_n(n)} entries{mb})"
    return row.group


Check = Callable[[Row], tuple[str, bool | None]]


def _time_target(limit: float) -> Check:
    def check(row: Row) -> tuple[str, bool | None]:
        st = row.figure("sessiontree")
        return f"≤ {fmt_time(limit)}", None if st is None else st <= limit

    return check


def _resume(row: Row) -> tuple[str, bool | None]:
    if row.info("n") != 100_000:
        return "—", None
    # The peak of open + build_context itself (the harness then reads every message).
    st, rss = row.figure("sessiontree"), row.info("peak_rss_run") or row.info("peak_rss")
    indexed = row.scenario == "resume-indexed"
    limit = 0.1 if indexed else 0.25
    ok = None if st is None or rss is None else (st <= limit and rss <= 120e6)
    return f"≤ {fmt_time(limit)} ({'with' if indexed else 'no'} index), ≤ 120 MB", ok


def _build_context(row: Row) -> tuple[str, bool | None]:
    st, ratio = row.figure("sessiontree"), row.ratio()
    ok = None if st is None or ratio is None else (st <= 0.08 and ratio >= 2)
    return f"≤ 80 ms and ≥ 2{TIMES}", ok


def _open(row: Row) -> tuple[str, bool | None]:
    st, n, size = row.figure("sessiontree"), row.info("n"), row.info("bytes")
    if n == 1_000_000:
        rss = row.info("peak_rss")
        ok = None if st is None or rss is None else st <= 1.8 and rss <= 300e6
        return "≤ 1.8 s, ≤ 300 MB", ok
    if n != 100_000:
        # The target is "≥ 2 GB/s at 100k and 1M"; smaller files are shown only.
        return "— (≥ 2 GB/s at 100k)", None
    return "≥ 2 GB/s", None if not st or not size else size / st >= 2e9


def _reopen(row: Row) -> tuple[str, bool | None]:
    if row.info("n") != 1_000_000:
        return "— (≤ 50 ms at 1M)", None
    return _time_target(0.05)(row)


def _fsync(row: Row) -> tuple[str, bool | None]:
    st, bare = row.figure("sessiontree"), row.figure("bare-fdatasync")
    paired = row.info("interleaved_mean_ratio")
    if paired is not None:
        # The ratio of appends alternated with bare syncs, immune to disk-latency drift;
        # the control is two bare writers alternated the same way (the method's floor).
        control = row.info("control_mean_ratio")
        text = (
            f"≤ 1.05{TIMES} bare write+fdatasync: {paired:.2f}{TIMES} interleaved "
            f"(median {row.info('interleaved_median_ratio'):.2f}{TIMES}; bare "
            f"{fmt_time(row.info('interleaved_bare_mean'))}"
            + ("" if control is None else f"; bare against bare {control:.2f}{TIMES}")
            + ")"
        )
        return text, paired <= 1.05
    if st is None or not bare:
        return f"≤ 1.05{TIMES} bare fdatasync", None
    return (
        f"≤ 1.05{TIMES} bare fdatasync ({fmt_time(bare)}): {st / bare:.2f}{TIMES}",
        st / bare <= 1.05,
    )


def _list(row: Row) -> tuple[str, bool | None]:
    n = row.info("n")
    if n == 1000:
        return _time_target(0.03)(row)
    if n == 10_000:
        return _time_target(0.3)(row)
    return "—", None


TARGETS: dict[str, Check] = {
    "agent-turn": _time_target(1e-3),
    "build-context": _build_context,
    "resume": _resume,
    "resume-indexed": _resume,
    "open": _open,
    "reopen": _reopen,
    "append-flush": _time_target(3e-6),
    "append-group": _time_target(3e-6),
    "append-fsync": _fsync,
    "newest-20": _time_target(50e-6),
    "newest-20-first": _time_target(50e-6),
    "branch-tail-20": _time_target(1e-3),
    "get-tree": _time_target(0.15),
    "fork": _time_target(0.06),
    "list": _list,
    "import": _time_target(0.02),
    # Issue 12: "the first screen in well under a second" (at 1M entries); "a 100k-entry
    # session must open in a browser in a few seconds".
    "cli-ls": _time_target(1.0),
    "cli-tree-first-screen": _time_target(0.5),
    "cli-export-html": _time_target(60.0),
    "cli-html-load": _time_target(3.0),
}
ORDER = list(TARGETS)


def rows_from(data: dict[str, Any]) -> list[Row]:
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for b in data["benchmarks"]:
        impl = b["extra_info"].get("impl") or (b["params"] or {}).get("impl")
        groups.setdefault(b["group"] or b["name"], {})[impl] = b
    rows = [Row(g, benches) for g, benches in groups.items()]

    def key(row: Row) -> tuple[int, int]:
        s = row.scenario
        return (ORDER.index(s) if s in ORDER else len(ORDER), int(row.info("n") or 0))

    return sorted(rows, key=key)


def cell(row: Row, impl: str) -> str:
    t = row.figure(impl)
    text = fmt_time(t)
    size = row.info("bytes", impl)
    if t and size and row.scenario in ("open", "reopen", "resume"):
        text += f" ({size / t / 1e9:.2f} GB/s)"
    return text


def table(data: dict[str, Any]) -> str:
    lines = [
        "| scenario | sessiontree | baseline | ratio | peak RSS (st / baseline) | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows_from(data):
        ratio = row.ratio()
        rss_st, rss_bl = row.info("peak_rss"), row.info("peak_rss", "baseline")
        rss = (
            "—"
            if rss_st is None and rss_bl is None
            else f"{fmt_bytes(rss_st)} / {fmt_bytes(rss_bl)}"
        )
        run_st, read_st = row.info("peak_rss_run"), row.info("peak_rss_read")
        if row.scenario.startswith("resume") and run_st is not None:
            # sessiontree's context builds each message on first use: the peak of open +
            # build_context, then the peak once every message was read (the cross-check).
            rss = f"{fmt_bytes(run_st)}, {fmt_bytes(read_st)} all read / {fmt_bytes(rss_bl)}"
        check = TARGETS.get(row.scenario)
        target, ok = check(row) if check else ("—", None)
        met = "—" if ok is None else ("yes" if ok else "**no**")
        lines.append(
            f"| {label(row)} | {cell(row, 'sessiontree')} | {cell(row, 'baseline')} | "
            f"{fmt_ratio(ratio)} | {rss} | {target} | {met} |"
        )
    return "\n".join(lines)


def render(data: dict[str, Any], info: dict[str, str], when: str) -> str:
    machine_lines = "\n".join(f"- **{k}**: {v}" for k, v in info.items())
    return (
        f"# sessiontree benchmark results\n\n"
        f"Run {when} with `python benches/report.py` (see `benches/README.md`).\n\n"
        f"{machine_lines}\n\n{table(data)}\n\n"
        "Figures: median time per call (appends: mean, amortised; import: fresh interpreter "
        "with the import minus a bare interpreter, medians). Ratio = baseline / sessiontree. "
        "Peak RSS: one fresh process running the scenario once (interpreter and imports "
        "included). The baseline is `benches/baseline.py` (orjson, dicts).\n"
    )


def _python() -> str:
    # Prefer an interpreter that can import sessiontree (the project venv).
    check = subprocess.run([sys.executable, "-c", "import sessiontree"], capture_output=True)
    venv = ROOT / ".venv" / "bin" / "python"
    if check.returncode != 0 and venv.exists():
        return str(venv)
    return sys.executable


def run_suite(extra: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        cmd = [
            _python(),
            "-m",
            "pytest",
            str(HERE),
            "--bench-real",
            f"--benchmark-json={out}",
            "-q",
            "-p",
            "no:cacheprovider",
            *extra,
        ]
        print("$", " ".join(cmd), file=sys.stderr)
        proc = subprocess.run(cmd, cwd=ROOT)
        if not out.exists():
            raise SystemExit(f"the benchmark run wrote no results (exit {proc.returncode})")
        if proc.returncode != 0:
            print(f"warning: pytest exited with {proc.returncode}", file=sys.stderr)
        return json.loads(out.read_text())  # type: ignore[no-any-return]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--bench-size", choices=("default", "1m"), default=None)
    parser.add_argument("--from-json", type=Path, help="render a saved --benchmark-json file")
    parser.add_argument("--save-json", type=Path, help="keep the raw pytest-benchmark JSON here")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    info = machine()
    if args.from_json:
        data = json.loads(args.from_json.read_text())
    else:
        extra = list(args.pytest_args)
        if args.bench_size:
            extra.append(f"--bench-size={args.bench_size}")
        before = os.getloadavg()[0]
        data = run_suite(extra)
        # Other jobs on a shared machine skew absolute figures: say how busy it was.
        data["sessiontree_load"] = [before, os.getloadavg()[0]]
        if args.save_json:
            args.save_json.write_text(json.dumps(data))
    if "sessiontree_load" in data:
        # Other jobs on a shared machine skew absolute figures: say how busy it was.
        before, after = data["sessiontree_load"]
        info["load average"] = f"{before:.1f} before the run, {after:.1f} after"
    when = data.get("datetime") or dt.datetime.now(dt.timezone.utc).isoformat()
    text = render(data, info, when[:19].replace("T", " ") + " UTC")
    print(text)
    if not args.no_write:
        RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
