"""Process crashes: writers SIGKILLed at random moments lose no acknowledged entry.

A fork server (``tests/reliability/reliability_writer.py serve``) starts writer processes on demand.
Each writer opens the session for writing (cutting the torn tail the last one left),
appends entries of random size (one in ten between 64 KiB and 1 MiB, so kills land in
the middle of writes) and prints every entry id after its append returns. The test kills
it with SIGKILL at a random moment of one of three kinds: after a random number of
acknowledgements plus up to 3 ms (0 acknowledgements: during the open), near the end of
a big append (where its ``write(2)`` happens, to tear lines), or at a random time up to
20 ms after the fork. Then it checks that

- the file always opens, with at most a torn tail (never a damaged line in the middle);
- every acknowledged id is present (``flush``, ``group`` and ``fsync`` modes);
- the next writer open works: the dead process's lock is gone and its torn tail is cut;
- the persisted index (the writers keep one, ``index=0``), in whatever state a kill left
  it, gives the same entries, leaf and report as a plain scan;
- after the last run, a writer in this process appends, and a strict open of the file
  finds every acknowledged entry and no problem at all.

``SESSIONTREE_CRASH_RUNS`` (default 180) is the total number of kills, split evenly
over the three modes; ``SESSIONTREE_CRASH_SEED`` picks the random sequence.
"""

from __future__ import annotations

import contextlib
import os
import queue
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import sessiontree as st

WRITER = Path(__file__).with_name("reliability_writer.py")
MODES = ("flush", "group", "fsync")
RUNS = int(os.environ.get("SESSIONTREE_CRASH_RUNS", "180"))
SEED = int(os.environ.get("SESSIONTREE_CRASH_SEED", "20261130"))
APPENDS_PER_WRITER = 40
RUNS_PER_FILE = 20
BIG = 1 << 16
TIMEOUT = 60.0


class WriterServer:
    """The fork server, with a reader thread so no read can hang the test."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()
        assert self.next_line().startswith("ready ")

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw.decode().rstrip("\n"))
        self.lines.put("eof")

    def next_line(self) -> str:
        try:
            line = self.lines.get(timeout=TIMEOUT)
        except queue.Empty:
            pytest.fail("the writer server stopped answering")
        assert line != "eof", "the writer server died"
        return line

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((command + "\n").encode())

    def close(self) -> None:
        try:
            self.send("quit")
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.pump.join(timeout=TIMEOUT)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


class Tally:
    def __init__(self) -> None:
        self.runs = self.acked = self.torn = self.killed_before_ack = self.finished = 0
        self.lost = 0
        self.index_temps = 0  # temporary index files a kill left behind
        # How long a big append takes per byte, learnt from the writers' acknowledgements.
        self.seconds_per_byte = 2e-9


def crash_once(
    server: WriterServer, path: Path, mode: str, rng: random.Random, tally: Tally
) -> list[str]:
    """Starts one writer, kills it at a random moment; returns the ids it acknowledged."""
    server.send(f"write {path} {mode} {rng.randrange(1 << 32)} {APPENDS_PER_WRITER}")
    line = server.next_line()
    assert line.startswith("child "), line
    pid = int(line.split()[1])
    acked: list[str] = []
    sizes: list[int] = []
    finished = False

    def take(line: str) -> bool:
        """Records one line from the child; True once the child is gone."""
        nonlocal finished
        kind, _, rest = line.partition(" ")
        if kind == "begin":
            sizes.append(int(rest.split()[2]))
        elif kind == "ack":
            _, entry_id, seconds = rest.split()
            acked.append(entry_id)
            if sizes[-1] >= BIG:
                tally.seconds_per_byte = float(seconds) / sizes[-1]
        elif kind == "done":
            finished = True
        elif kind == "fail":
            pytest.fail(f"writer failed before it was killed: {rest}")
        elif kind == "exit":
            return True
        else:
            pytest.fail(f"unexpected line from the writer server: {line!r}")
        return False

    gone = False
    how = rng.random()
    if how < 0.4:
        # After a random number of acknowledgements (0: during the open).
        want = rng.randrange(APPENDS_PER_WRITER)
        while len(acked) < want and not finished and not gone:
            gone = take(server.next_line())
        delay = rng.uniform(0, 0.003)
    elif how < 0.7:
        # While a big append is under way: the likeliest moment to tear a line.
        while not (sizes and sizes[-1] >= BIG and len(sizes) > len(acked)):
            if finished or gone:
                break
            gone = take(server.next_line())
        # In the second half of the time such an append took before: encoding and
        # validation come first, the write(2) (and the sync) last.
        expected = tally.seconds_per_byte * (sizes[-1] if sizes else 0)
        delay = expected * rng.uniform(0.5, 1.05)
    else:
        delay = rng.uniform(0, 0.02)
    if not gone:
        threading.Event().wait(delay)
        with contextlib.suppress(ProcessLookupError):  # it may have just finished
            os.kill(pid, signal.SIGKILL)
        while not gone:
            gone = take(server.next_line())
    tally.runs += 1
    tally.acked += len(acked)
    tally.finished += finished
    tally.killed_before_ack += not acked
    return acked


@pytest.mark.parametrize("mode", MODES)
def test_sigkill_loses_no_acknowledged_entry(tmp_path: Path, mode: str) -> None:
    share, extra = divmod(RUNS, len(MODES))
    runs = max(1, share + (MODES.index(mode) < extra))
    rng = random.Random(f"{SEED}-{mode}")
    tally = Tally()
    server = WriterServer()
    try:
        for start in range(0, runs, RUNS_PER_FILE):
            path = tmp_path / f"crash-{start}.jsonl"
            st.JsonlSessionStorage.create(path, durability=mode).close()  # type: ignore[arg-type]
            acked_in_file: list[str] = []
            for _ in range(min(RUNS_PER_FILE, runs - start)):
                acked = crash_once(server, path, mode, rng, tally)
                acked_in_file.extend(acked)
                # The file always opens, damaged at most by a torn tail. A plain scan is
                # the truth; the persisted index (whatever state the kill left it in)
                # must agree with it.
                with st.JsonlSessionStorage.open(path, readonly=True, index=False) as ro:
                    kinds = [i.kind for i in ro.load_report.issues]
                    assert kinds in ([], ["torn_tail"]), ro.load_report
                    tally.torn += bool(kinds)
                    missing = [i for i in acked if ro.get_entry(i) is None]
                    tally.lost += len(missing)
                    assert not missing, f"acknowledged entries lost: {missing}"
                    assert len(ro) >= len(acked_in_file)
                    scanned = (len(ro), ro.get_leaf_id(), ro.load_report)
                with st.JsonlSessionStorage.open(path, readonly=True, index=0) as indexed:
                    assert (len(indexed), indexed.get_leaf_id(), indexed.load_report) == scanned
            # The dead writers left no lock behind; a writer here cuts the last torn
            # tail and appends, and the whole file is then clean.
            with st.JsonlSessionStorage.open(path, durability=mode) as writer:  # type: ignore[arg-type]
                final = st.Session(writer).append_message(st.UserMessage("survivor"))
            with st.JsonlSessionStorage.open(path, readonly=True, strict=True) as ro:
                ids = {e.id for e in ro.get_entries()}
                assert set(acked_in_file) <= ids
                assert final in ids and ro.get_leaf_id() == final
            tally.index_temps += len(list(tmp_path.glob(f"{path.name}.idx.tmp*")))
    finally:
        server.close()
    print(
        f"\ncrash[{mode}]: {tally.runs} kills, {tally.acked} acknowledged appends, "
        f"{tally.torn} torn tails, {tally.killed_before_ack} kills before any ack, "
        f"{tally.finished} writers finished, {tally.index_temps} index temp files left, "
        f"entries lost: {tally.lost}"
    )
    assert tally.lost == 0
