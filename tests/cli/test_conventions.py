"""The conventions of a good Unix tool: colour only on a terminal and never with
``NO_COLOR``, a pager only on a terminal, a progress bar on stderr for files over about
50 MB, the one-line hint when the ``cli`` extra is missing, and a library that never
imports the command."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .clihelp import Demo, Runner, clean_env, command, header

ESC = "\x1b["


def run_in_pty(
    args: list[str], env: dict[str, str], *, timeout: float = 120, answer: bytes = b""
) -> tuple[int, str]:
    """Runs the command with stdin, stdout and stderr on a pseudo-terminal; returns its
    status and everything it wrote there."""
    pid, fd = pty.fork()
    if pid == 0:  # the child
        try:
            os.execvpe(args[0], args, env)
        finally:
            os._exit(127)
    out = bytearray()
    deadline = time.monotonic() + timeout
    sent = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            elif answer and not sent and out:
                os.write(fd, answer)
                sent = True
        else:
            os.kill(pid, 9)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")


def test_no_colour_when_piped(cli: Runner, demo: Demo) -> None:
    for args in (("tree", demo.path), ("show", demo.path), ("ls", demo.dir), ("check", demo.path)):
        proc = cli(*args)
        assert proc.returncode == 0
        assert ESC not in proc.stdout and ESC not in proc.stderr, args


def test_colour_always_and_never(cli: Runner, demo: Demo) -> None:
    assert ESC in cli("tree", demo.path, "--color", "always").stdout
    assert ESC in cli("--color", "always", "ls", demo.dir).stdout
    # An explicit --color always wins over NO_COLOR (no-color.org: flags override it).
    assert ESC in cli("tree", demo.path, "--color", "always", env={"NO_COLOR": "1"}).stdout
    assert ESC not in cli("tree", demo.path, "--color", "never").stdout


def test_colour_on_a_terminal_unless_no_color(demo: Demo) -> None:
    env = clean_env(SESSIONTREE_PAGER="cat", TERM="xterm-256color")
    status, out = run_in_pty([*command(), "tree", str(demo.path)], env)
    assert status == 0 and ESC in out and "◀ leaf" in out
    status, out = run_in_pty([*command(), "tree", str(demo.path)], {**env, "NO_COLOR": "1"})
    assert status == 0 and ESC not in out and "◀ leaf" in out
    # An empty NO_COLOR does not count (no-color.org).
    status, out = run_in_pty([*command(), "tree", str(demo.path)], {**env, "NO_COLOR": ""})
    assert ESC in out


def test_pager_on_a_terminal_only(cli: Runner, demo: Demo, tmp_path: Path) -> None:
    log = tmp_path / "paged.txt"
    pager = f"{sys.executable} -c \"import sys; open({str(log)!r}, 'w').write(sys.stdin.read())\""
    env = clean_env(SESSIONTREE_PAGER=pager, TERM="xterm")
    status, out = run_in_pty([*command(), "tree", str(demo.path), "--color", "never"], env)
    assert status == 0
    assert "◀ leaf" in log.read_text()  # everything went through the pager
    assert "◀ leaf" not in out
    log.unlink()
    status, _ = run_in_pty([*command(), "tree", str(demo.path), "--no-pager"], env)
    assert status == 0 and not log.exists()
    status, _ = run_in_pty([*command(), "tree", str(demo.path), "--json"], env)
    assert status == 0 and not log.exists()  # never for --json
    assert cli("tree", demo.path, env={"SESSIONTREE_PAGER": pager}).returncode == 0
    assert not log.exists()  # not a terminal: no pager


def test_quitting_the_pager_early_is_not_an_error(tmp_path: Path) -> None:
    import sessiontree as st

    path = tmp_path / "long.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path, durability="none")) as s:
        for i in range(3000):
            s.append_message(st.UserMessage(f"m {i}"))
    # A pager that reads one line and quits.
    pager = f'{sys.executable} -c "import sys; sys.stdin.readline()"'
    env = clean_env(SESSIONTREE_PAGER=pager, TERM="xterm")
    status, out = run_in_pty([*command(), "tree", str(path), "--all"], env)
    assert status == 0
    assert "Traceback" not in out and "Broken pipe" not in out


def test_broken_pipe_is_quiet(demo: Demo, tmp_path: Path) -> None:
    import sessiontree as st

    path = tmp_path / "long.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path, durability="none")) as s:
        for i in range(3000):
            s.append_message(st.UserMessage(f"m {i}"))
    proc = subprocess.run(
        f"{' '.join(command())} tree {path} --all | head -3",
        shell=True,
        capture_output=True,
        text=True,
        env=clean_env(),
        check=False,
    )
    assert len(proc.stdout.splitlines()) == 3
    assert proc.stderr == ""


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session file of about 60 MB: 6,000 user messages of 10 kB."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    text = "x" * 10_000
    with path.open("wb") as f:
        f.write(header("big") + b"\n")
        parent = None
        for i in range(6_000):
            eid = f"{i:08x}"
            line = {
                "type": "message",
                "id": eid,
                "parent_id": parent,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"role": "user", "content": text, "timestamp": 1767225600000},
            }
            f.write(json.dumps(line, separators=(",", ":")).encode() + b"\n")
            parent = eid
    assert path.stat().st_size > 50_000_000
    return path


def test_progress_bar_on_a_large_file(big_file: Path, cli: Runner) -> None:
    env = clean_env(SESSIONTREE_PAGER="cat", TERM="xterm")
    status, out = run_in_pty([*command(), "check", str(big_file)], env)
    assert status == 0, out
    assert "Reading big.jsonl" in out  # rich's bar on the terminal (stderr)
    assert "MB" in out
    # Piped: no bar (stderr is not a terminal) ...
    proc = cli("check", big_file)
    assert proc.returncode == 0 and proc.stderr == ""
    # ... unless asked for; and never when --progress never.
    forced = cli("stats", big_file, "--progress", "always")
    assert "Reading big.jsonl" in forced.stderr and forced.returncode == 0
    status, out = run_in_pty([*command(), "check", str(big_file), "--progress", "never"], env)
    assert "Reading" not in out


def test_small_files_get_no_progress_bar(demo: Demo) -> None:
    env = clean_env(SESSIONTREE_PAGER="cat", TERM="xterm")
    status, out = run_in_pty([*command(), "check", str(demo.path)], env)
    assert status == 0 and "Reading" not in out


def test_without_the_cli_extra(tmp_path: Path, demo: Demo, big_file: Path) -> None:
    """A plain ``pip install sessiontree`` (no ``cli`` extra) has a working command: plain
    text, no Markdown rendering, a one-line progress display instead of rich's bar."""
    # A `rich` that cannot be imported stands for an installation without the extra.
    fake = tmp_path / "fake"
    (fake / "rich").mkdir(parents=True)
    (fake / "rich" / "__init__.py").write_text("raise ImportError('rich is not installed')\n")
    env = clean_env(PYTHONPATH=str(fake), SESSIONTREE_PAGER="cat", TERM="xterm")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command(), *args], capture_output=True, text=True, env=env, check=False
        )

    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("sessiontree ")
    helped = run("--help")
    assert helped.returncode == 0 and "tree" in helped.stdout
    tree = run("tree", str(demo.path))
    assert tree.returncode == 0, tree.stderr
    assert demo.leaf[:8] in tree.stdout and tree.stderr == ""
    for args in (("show", str(demo.path)), ("check", str(demo.path)), ("stats", str(demo.path))):
        proc = run(*args)
        assert proc.returncode == 0 and proc.stdout and proc.stderr == "", (args, proc.stderr)
    # On a terminal with colour: the Markdown of a message is printed as plain text.
    status, out = run_in_pty([*command(), "show", str(demo.path), "--color", "always"], env)
    assert status == 0 and "Traceback" not in out, out
    # A big file on a terminal: the plain progress line instead of rich's bar.
    status, out = run_in_pty([*command(), "check", str(big_file)], env)
    assert status == 0 and "Traceback" not in out, out
    assert "Reading big.jsonl" in out and "MB" in out


def test_the_library_does_not_import_the_command() -> None:
    code = (
        "import sys, sessiontree, sessiontree.repo; "
        "s = sessiontree.Session(sessiontree.InMemorySessionStorage()); "
        "bad = sorted(m for m in sys.modules "
        "if m == 'rich' or m.startswith(('rich.', 'sessiontree.cli'))); "
        "print(bad)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"
