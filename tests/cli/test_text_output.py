"""The command's text output: long texts cut by default (``--full`` shows all), output
streamed and stopped quietly by a closed pipe, pi's shell runs shown as shell runs, and
no control character from a session ever reaching the terminal.

The escaping rule, everywhere: a control character (C0, DEL, C1) from the session shows as
``\\x..`` (ESC as ``\\x1b``); multi-line texts keep their newlines and tabs, one-line
fields (names, labels, models, types, paths) escape those too.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
from pathlib import Path

import pytest

import sessiontree as st

from .clihelp import PI_FIXTURES, Runner, clean_env, command

# A single line of 20 MB: big enough that no pipe holds it, small enough to build fast.
BIG = 20_000_000

# Terminal controls (C0 but tab and newline, DEL, C1); the colour codes the command
# writes itself (SGR) are taken out before looking for them.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SGR = re.compile("\x1b\\[[0-9;]*m")

TITLE = "\x1b]0;TITLE\x07"  # sets the terminal's title
CLEAR = "\x1b[2J"  # clears the screen
LINK = "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"  # an OSC 8 hyperlink


def shown(text: str) -> str:
    """How the command shows ``text``: every control as ``\\x..``."""
    return re.sub("[\x00-\x1f\x7f-\x9f]", lambda m: f"\\x{ord(m.group()):02x}", text)


def assert_no_controls(out: str, *, terminal: bool = False) -> None:
    rest = _SGR.sub("", out)
    if terminal:
        rest = rest.replace("\r\n", "\n")  # the terminal's own line ends
    found = _CONTROL.search(rest)
    if found is not None:
        around = rest[max(0, found.start() - 60) : found.start() + 20]
        pytest.fail(f"control {found.group()!r} in the output: {around!r}")


# -- long texts ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A session with a message of one 20 MB line, one of 2,000 short lines, and a tool
    result of 20 MB; returns its path and the big message's entry id."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path, durability="flush")) as s:
        s.append_session_info("big" + TITLE)
        s.append_message(st.UserMessage("first"))
        big_id = s.append_message(st.UserMessage("x" * BIG))
        s.append_message(st.UserMessage("\n".join(f"row {i}" for i in range(2000))))
        s.append_message(
            st.AssistantMessage(
                [st.TextContent("running"), st.ToolCall("c1", "bash", {"cmd": "yes"})],
                provider="p",
                model="m",
                stop_reason="tool_use",
            )
        )
        s.append_message(st.ToolResultMessage("c1", "bash", [st.TextContent("y" * BIG)]))
        s.append_message(st.UserMessage("last"))
    return path, big_id


def test_show_cuts_long_texts_by_default(cli: Runner, big: tuple[Path, str]) -> None:
    path, _ = big
    proc = cli("show", path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # Every message is there, but the output is a few screens, not 40 MB.
    assert "first" in out and "last" in out and "running" in out
    assert len(out) < 50_000
    lines = out.splitlines()
    cut = next(line for line in lines if line.startswith("xxx"))
    assert cut.endswith("…") and len(cut) < 10_000
    assert any(
        re.fullmatch(r"… [\d,]+ more characters \(--full shows them\)", line) for line in lines
    )
    # A message of many short lines is cut by lines.
    assert "row 0" in out and "row 1999" not in out
    assert any(re.fullmatch(r"… [\d,]+ more lines \(--full shows them\)", line) for line in lines)
    # The tool's output, folded, is cut inside its one line too.
    folded = next(line for line in lines if line.strip().startswith("yyy"))
    assert folded.endswith("…") and len(folded) < 2_000
    # --full shows it all.
    full = cli("show", path, "--full").stdout
    assert "x" * BIG in full and "y" * BIG in full and "row 1999" in full
    assert "--full shows" not in full


def test_show_entry_cuts_long_texts_unless_full(cli: Runner, big: tuple[Path, str]) -> None:
    path, big_id = big
    out = cli("show", path, big_id).stdout
    assert len(out) < 50_000 and "--full shows them" in out
    full = cli("show", path, big_id, "--full").stdout
    assert "x" * BIG in full and "more characters" not in full


def _read_then_close(args: list[str], lines: int) -> tuple[list[str], int, str]:
    """Runs the command into a pipe, reads ``lines`` lines, closes the pipe, and waits:
    the lines read, the exit status, stderr."""
    with subprocess.Popen(
        [*command(), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        got = [proc.stdout.readline().decode() for _ in range(lines)]
        proc.stdout.close()  # as `| head` does
        err = proc.stderr.read().decode()
        return got, proc.wait(timeout=120), err


def test_show_into_a_closed_pipe(big: tuple[Path, str]) -> None:
    """`show big | head`: the lines come out cut, and the reader going away ends the
    command quietly (also with --full, which would write 40 MB)."""
    path, _ = big
    got, status, err = _read_then_close(["show", str(path)], 9)
    assert got[7].startswith("xxx") and got[7].rstrip("\n").endswith("…")
    assert "--full" in got[8]
    assert status in (0, 141) and err == ""
    got, status, err = _read_then_close(["show", str(path), "--full"], 8)
    assert got[7].startswith("xxx")
    # It did not write its 40 MB: it stopped when the pipe closed, as `| head` expects.
    assert status == 141 and err == ""


def test_markdown_into_a_closed_pipe(big: tuple[Path, str], tmp_path: Path) -> None:
    path, _ = big
    got, status, err = _read_then_close(["export", str(path), "--markdown"], 2)
    assert got == ["# big\\x1b]0;TITLE\\x07\n", "\n"]
    assert status == 141 and err == ""
    # The file written with -o is the whole of it.
    out = tmp_path / "big.md"
    assert (
        subprocess.run([*command(), "export", str(path), "--markdown", "-o", str(out)]).returncode
        == 0
    )
    assert "x" * BIG in out.read_text()


def test_tree_cuts_previews_with_an_ellipsis(cli: Runner, big: tuple[Path, str]) -> None:
    path, big_id = big
    out = cli("tree", path, "--all").stdout
    line = next(x for x in out.splitlines() if x.startswith(big_id))
    assert line.endswith("…") and len(line) <= 100


# -- pi's shell runs ---------------------------------------------------------------------

E_CUSTOM = PI_FIXTURES / "e-custom.jsonl"


def test_show_draws_shell_runs(cli: Runner) -> None:
    out = cli("show", E_CUSTOM).stdout
    assert '"role"' not in out and "bash_execution" not in out
    assert "── bash · 9a3e7cd1 · 2026-11-30T17:03:53.971Z · exit 0\n  $ ls src\n  core\n" in out
    assert "· exit 0 · not sent to the model\n  $ git log --oneline -3\n" in out
    assert "· exit 101 · output truncated\n  $ cargo build\n" in out
    assert "full output: /tmp/pi-bash-7f3a9c.log" in out
    # Long output is folded like a tool's.
    assert "fn cache_leaf" not in out and "more lines (--full shows them)" in out
    one = cli("show", E_CUSTOM, "fb093377").stdout
    assert one.startswith("── bash · fb093377 · ")
    assert "  $ cargo build\n" in one and "fn cache_leaf(&mut" in one  # unfolded


def test_tree_labels_shell_runs_bash(cli: Runner) -> None:
    out = cli("tree", E_CUSTOM, "--all").stdout
    assert "bash_execution" not in out and "(role" not in out
    assert "9a3e7cd1 bash        $ ls src · exit 0: core lib.rs store" in out
    assert "fb093377 bash        $ cargo build · exit 101 · output truncated: or_config" in out


def test_shell_run_cancelled(cli: Runner, tmp_path: Path) -> None:
    path = tmp_path / "pi.jsonl"
    lines = E_CUSTOM.read_text().splitlines()[:1]
    lines.append(
        json.dumps(
            {
                "type": "message",
                "id": "b1",
                "parentId": None,
                "timestamp": "2026-11-30T17:03:54.000Z",
                "message": {
                    "role": "bashExecution",
                    "command": "sleep 100",
                    "output": "",
                    "exitCode": None,
                    "cancelled": True,
                    "truncated": False,
                    "timestamp": 1796058234000,
                },
            }
        )
    )
    path.write_text("\n".join(lines) + "\n")
    out = cli("show", path).stdout
    assert (
        "── bash · b1 · 2026-11-30T17:03:54.000Z · cancelled\n  $ sleep 100\n  (no output)" in out
    )
    assert re.search(r"^b1 +bash +\$ sleep 100 · cancelled", cli("tree", path).stdout, re.M)
    md = cli("export", path, "--markdown").stdout
    assert "## bash · `b1` · 2026-11-30T17:03:54.000Z · cancelled" in md
    assert "```console\n$ sleep 100\n```" in md


# -- terminal safety ---------------------------------------------------------------------

NAME = "N" + TITLE
LABEL = "L" + CLEAR + LINK
PROVIDER = "P" + LINK
MODEL = "M" + CLEAR + "\x9b2J"
CTYPE = "C" + CLEAR
CMTYPE = "CM" + TITLE
CWD = "/w/D" + TITLE
TOOL = "T" + CLEAR
# A Markdown link too: rendered on a terminal, it must not become an OSC 8 hyperlink.
TEXT = "hello" + TITLE + CLEAR + "\r" + LINK + " [docs](http://evil.example/)"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A session whose name, label, model, provider, custom types, cwd, tool name and
    texts hold terminal controls; the ids of its entries by what they are."""
    path = tmp_path_factory.mktemp("hostile") / "h.jsonl"
    header = st.SessionHeader.generate(cwd=CWD)
    with st.Session(st.JsonlSessionStorage.create(path, header, durability="flush")) as s:
        ids = {"name": s.append_session_info(NAME)}
        ids["model"] = s.append_model_change(PROVIDER, MODEL)
        ids["custom"] = s.append_custom_entry(CTYPE, {"k": TITLE})
        ids["custom_message"] = s.append_custom_message_entry(CMTYPE, TEXT, display=True)
        ids["user"] = s.append_message(st.UserMessage(TEXT))
        s.append_label(ids["user"], LABEL)
        ids["assistant"] = s.append_message(
            st.AssistantMessage(
                [st.TextContent(TEXT), st.ToolCall("c1", TOOL, {"a": TITLE})],
                provider=PROVIDER,
                model=MODEL,
                usage=st.Usage(input=1, output=1, total_tokens=2),
                stop_reason="tool_use",
            )
        )
        ids["tool_result"] = s.append_message(
            st.ToolResultMessage("c1", TOOL, [st.TextContent(TEXT)])
        )
    return path, ids


# What each command shows of the hostile session, escaped.
EXPECTED = {
    "tree": [NAME, LABEL, PROVIDER, MODEL, CTYPE, CMTYPE],
    "show": [NAME, PROVIDER, MODEL, CMTYPE, TOOL],
    "stats": [NAME, PROVIDER, MODEL],
    "export": [NAME, CWD, LABEL, PROVIDER, MODEL, CMTYPE, CTYPE, TOOL],
}


def _commands(path: Path, ids: dict[str, str]) -> list[tuple[str, list[str], list[str]]]:
    p = str(path)
    return [
        ("tree", ["tree", p], EXPECTED["tree"]),
        ("tree --all", ["tree", p, "--all"], EXPECTED["tree"]),
        ("show", ["show", p], EXPECTED["show"]),
        ("show --full", ["show", p, "--full"], EXPECTED["show"]),
        ("show ID (model)", ["show", p, ids["model"]], [PROVIDER, MODEL]),
        ("show ID (custom)", ["show", p, ids["custom"]], [CTYPE]),
        ("show ID (label)", ["show", p, ids["user"]], [LABEL]),
        ("show ID (assistant)", ["show", p, ids["assistant"]], [PROVIDER, MODEL, TOOL]),
        ("show ID (tool)", ["show", p, ids["tool_result"]], [TOOL]),
        ("show --branch", ["show", p, ids["tool_result"], "--branch"], [LABEL, CTYPE]),
        ("stats", ["stats", p], EXPECTED["stats"]),
        ("export --markdown", ["export", p, "--markdown"], EXPECTED["export"]),
    ]


CASES = [
    name
    for name, _, _ in _commands(
        Path("x"), dict.fromkeys(("model", "custom", "user", "assistant", "tool_result"), "x")
    )
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode", ["pipe", "color"])
def test_no_control_reaches_the_output(
    cli: Runner, hostile: tuple[Path, dict[str, str]], case: str, mode: str
) -> None:
    path, ids = hostile
    _, args, fields = next(c for c in _commands(path, ids) if c[0] == case)
    extra = ["--color", "always"] if mode == "color" else []
    proc = cli(*args, *extra)
    assert proc.returncode == 0, proc.stderr
    assert_no_controls(proc.stdout)
    for field in fields:
        assert shown(field) in proc.stdout, (field, proc.stdout)


def _on_a_terminal(args: list[str]) -> str:
    """The command's output with stdout on a pseudo-terminal (colour, Markdown)."""
    main, side = pty.openpty()
    env = clean_env(TERM="xterm-256color")
    proc = subprocess.Popen([*command(), "--no-pager", *args], stdout=side, env=env)
    os.close(side)
    chunks = []
    while True:
        try:
            data = os.read(main, 1 << 16)
        except OSError:  # EIO: the other side is closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode()


@pytest.mark.parametrize("case", CASES)
def test_no_control_reaches_a_terminal(hostile: tuple[Path, dict[str, str]], case: str) -> None:
    path, ids = hostile
    _, args, fields = next(c for c in _commands(path, ids) if c[0] == case)
    out = _on_a_terminal(args)
    assert_no_controls(out, terminal=True)
    plain = _SGR.sub("", out)
    for field in fields:
        assert shown(field) in plain, (field, plain)


def test_json_output_escapes_del_and_c1_controls(cli: Runner, tmp_path: Path) -> None:
    """``--json`` keeps UTF-8 but escapes every control: JSON escapes C0 itself, and DEL and
    the C1 controls (U+009B is a one-character CSI to some terminals) are escaped too."""
    name = "n\x9b2J\x7f\x85é"
    path = tmp_path / "c1.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path, durability="flush")) as s:
        s.append_session_info(name)
        s.append_message(st.UserMessage(name))
    for args in (
        ["tree", str(path)],
        ["show", str(path)],
        ["stats", str(path)],
        ["ls", str(tmp_path)],
    ):
        proc = cli(*args, "--json")
        assert proc.returncode == 0, proc.stderr
        assert not re.search("[\x00-\x1f\x7f-\x9f]", proc.stdout.replace("\n", "")), args
        assert "é" in proc.stdout  # non-ASCII text stays as it is
        assert name in json.dumps(json.loads(proc.stdout), ensure_ascii=False), args
