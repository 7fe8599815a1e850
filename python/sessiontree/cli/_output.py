"""Where the command's output goes and how it looks: colour, width, the pager, JSON.

Conventions (docs/cli.md): colour only when stdout is a terminal and ``NO_COLOR`` is unset
(``--color always|never`` overrides both); a pager (``$SESSIONTREE_PAGER``, ``$PAGER`` or
``less -FRX``) only when stdout is a terminal, never with ``--json`` or ``--no-pager``.
Lines are written as they are made, so a pager shows the first screen of a long output
before the rest exists.

Styling is plain ANSI SGR written here rather than through rich: ``tree --all`` of a
million-entry session prints a million lines, and a formatted string per line is what
keeps that a matter of seconds. rich draws the progress bar and Markdown (``show`` on a
terminal).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, Final

# SGR parameters by style name; styles combine with spaces ("bold cyan").
_SGR: Final[dict[str, str]] = {
    "bold": "1",
    "dim": "2",
    "italic": "3",
    "underline": "4",
    "reverse": "7",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
    "grey": "90",
}

ROLE_STYLES: Final[dict[str, str]] = {
    "user": "bold cyan",
    "assistant": "bold green",
    "tool_result": "yellow",
    "custom": "magenta",
    "compaction_summary": "bold blue",
    "branch_summary": "bold blue",
}


def no_color_requested() -> bool:
    """``NO_COLOR`` set to anything but the empty string (https://no-color.org)."""
    return bool(os.environ.get("NO_COLOR"))


# Characters that do not take exactly one cell: wide East Asian ones (and emoji), and
# combining marks. Looking for them with one regex keeps the common case at C speed.
_NOT_ONE_CELL: Final = re.compile(
    "[\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u0610-\u061a\u064b-\u065f"
    "\u0900-\u0903\u093a-\u094f\u1100-\u115f\u1ab0-\u1aff\u1dc0-\u1dff"
    "\u200b-\u200f\u20d0-\u20ff\u2e80-\u303e\u3041-\ua4cf\uac00-\ud7a3"
    "\uf900-\ufaff\ufe00-\ufe0f\ufe20-\ufe6f\uff00-\uff60\uffe0-\uffe6"
    "\U0001f000-\U0001faff\U00020000-\U0003fffd]"
)


def cell_width(text: str) -> int:
    """Terminal cells ``text`` takes: wide (CJK) characters count 2, combining marks 0."""
    if text.isascii() or _NOT_ONE_CELL.search(text) is None:
        return len(text)
    n = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def fit(text: str, cells: int) -> str:
    """``text`` cut to at most ``cells`` terminal cells, ending in ``…`` when cut."""
    if cells <= 0:
        return ""
    # No character takes more than two cells, and combining marks are rare: looking at
    # the first 2 * cells characters is enough, however long the text.
    head = text[: 2 * cells + 2]
    if head.isascii() or _NOT_ONE_CELL.search(head) is None:
        return text if len(text) <= cells else head[: cells - 1] + "…"
    if len(head) == len(text) and cell_width(head) <= cells:
        return text
    out: list[str] = []
    used = 0
    for ch in head:
        w = (
            0
            if unicodedata.combining(ch)
            else (2 if unicodedata.east_asian_width(ch) in "WF" else 1)
        )
        if used + w > cells - 1:
            return "".join(out) + "…"
        out.append(ch)
        used += w
    return "".join(out)


# Terminal controls: the C0 set, DEL and the C1 set (0x9b is a one-byte CSI).
_CONTROLS: Final = re.compile("[\x00-\x1f\x7f-\x9f]")
# The same but tab and newline, which a multi-line text keeps.
_CONTROLS_BUT_LAYOUT: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _escape(m: re.Match[str]) -> str:
    return f"\\x{ord(m.group()):02x}"


def safe_text(text: str) -> str:
    """``text`` (a message, a tool's output: several lines) with every terminal control
    but tab and newline — ESC, BEL, CR, the rest of C0, DEL, the C1 set — made visible as
    ``\\x..`` (ESC shows as ``\\x1b``): session content must never drive the terminal.

    >>> safe_text("a\\x1b[2Jb\\n")
    'a\\\\x1b[2Jb\\n'
    """
    return _CONTROLS_BUT_LAYOUT.sub(_escape, text)


def safe_line(text: str) -> str:
    """``text`` (a name, label, model, path: one line) with every control, tab and
    newline included, made visible as ``\\x..``, so it stays one line and cannot drive
    the terminal.

    >>> safe_line("name\\x1b]0;TITLE\\x07\\n")
    'name\\\\x1b]0;TITLE\\\\x07\\\\x0a'
    """
    if text.isprintable():  # no control in it (the common case, at C speed)
        return text
    return _CONTROLS.sub(_escape, text)


def one_line(text: str) -> str:
    """``text`` as a one-line preview: every run of whitespace (newlines included) made
    one space, and the remaining controls made visible as ``\\x..`` (as :func:`safe_line`
    does), so a message cannot move the cursor."""
    return _CONTROLS.sub(_escape, " ".join(text.split()))


@dataclass(frozen=True)
class Clip:
    """What :func:`clip` kept of a text, and what it left out.

    Attributes:
        text: the kept head (whole lines, the last one possibly cut).
        more_lines: lines after the last kept one.
        more_chars: characters left out (the cut line's rest included).
        cut_line: whether the last kept line was cut in the middle.
    """

    text: str
    more_lines: int = 0
    more_chars: int = 0
    cut_line: bool = False

    @property
    def cut(self) -> bool:
        return self.more_chars > 0

    def note(self) -> str:
        """``… 3 more lines (--full shows them)`` (empty when nothing was cut)."""
        if not self.cut:
            return ""
        parts = []
        if self.more_lines:
            parts.append(f"{self.more_lines:,} more line{'s' if self.more_lines != 1 else ''}")
        if self.cut_line or not self.more_lines:
            parts.append(f"{self.more_chars:,} more characters")
        return f"… {', '.join(parts)} (--full shows them)"


def clip(text: str, lines: int, chars: int) -> Clip:
    """The first ``lines`` lines of ``text``, and of them at most ``chars`` characters; the
    rest is only counted (at C speed), so a text of 100 MB costs what its head costs.

    A line cut in the middle ends in ``…``.

    >>> clip("a\\nb\\nc", 2, 100)
    Clip(text='a\\nb', more_lines=1, more_chars=1, cut_line=False)
    >>> clip("x" * 10, 5, 4)
    Clip(text='xxxx…', more_lines=0, more_chars=6, cut_line=True)
    """
    n = 0
    start = 0  # where the line after the n-th newline begins
    while n < lines:
        nl = text.find("\n", start, chars + 1)
        if nl < 0:
            break
        n += 1
        start = nl + 1
    if n == lines or start > chars:  # whole lines up to a newline
        end = start - 1
        if end < 0 or end + 1 >= len(text):
            return Clip(text)
        rest = len(text) - end - 1
        more = text.count("\n", end + 1) + (0 if text.endswith("\n") else 1)
        return Clip(text[:end], more, rest, False)
    if len(text) <= chars:
        return Clip(text)
    after = text.count("\n", chars)
    more = after - 1 if text.endswith("\n") else after
    return Clip(text[:chars] + "…", max(more, 0), len(text) - chars, True)


# Lines longer than this are escaped and written in slices of this many characters.
_SLICE: Final = 1 << 16


class Output:
    """The command's standard output.

    Attributes:
        color: whether ANSI styles are written.
        terminal: whether stdout is a terminal (pager, Markdown rendering, widths).
        width: the width lines are cut to (terminal columns, else ``$COLUMNS`` or 120).
    """

    def __init__(self, stream: IO[str], *, color: bool, terminal: bool, width: int) -> None:
        self.stream = stream
        self.color = color
        self.terminal = terminal
        self.width = max(width, 20)

    def paint(self, text: str, style: str | None) -> str:
        """``text`` in ``style`` (names from ``_SGR`` joined by spaces) when colour is on."""
        if not self.color or not style or not text:
            return text
        codes = ";".join(_SGR[s] for s in style.split())
        return f"\x1b[{codes}m{text}\x1b[0m"

    def line(self, text: str = "") -> None:
        self.stream.write(text + "\n")

    def write(self, text: str) -> None:
        self.stream.write(text)

    def text(self, text: str, *, style: str | None = None, indent: str = "") -> None:
        """Writes ``text`` (several lines, from the session) line by line, each with
        ``indent`` and ``style``, its controls shown as ``\\x..`` (:func:`safe_text`;
        a ``\\r\\n`` ends a line as ``\\n`` does).

        Nothing is built whole: lines go out as they are cut from ``text``, and a line of
        megabytes in slices, so ``| head`` stops it after its first slice.
        """
        n = len(text)
        pos = 0
        while pos < n:
            nl = text.find("\n", pos)
            end = n if nl < 0 else nl
            stop = end - 1 if end > pos and text[end - 1] == "\r" and nl >= 0 else end
            if stop - pos <= _SLICE:
                self.stream.write(self.paint(indent + safe_text(text[pos:stop]), style) + "\n")
            else:
                self.stream.write(indent)
                for i in range(pos, stop, _SLICE):
                    piece = safe_text(text[i : min(i + _SLICE, stop)])
                    self.stream.write(self.paint(piece, style))
                self.stream.write("\n")
            pos = end + 1

    def json(self, doc: Any) -> None:
        """One JSON document, pretty-printed, UTF-8 (non-ASCII kept)."""
        self.stream.write(json_text(doc, indent=2) + "\n")

    def json_line(self, doc: Any) -> None:
        """One JSON document on one line (for streamed lists)."""
        self.stream.write(json_text(doc, separators=(",", ":")) + "\n")


# JSON escapes C0 controls itself; DEL and the C1 controls (U+009B is a one-character CSI
# to some terminals) it would write raw with ensure_ascii=False.
_JSON_RAW_CONTROLS: Final = re.compile("[\x7f-\x9f]")


def json_text(doc: Any, **options: Any) -> str:
    """``doc`` as JSON for a terminal or a pipe: UTF-8 kept, every control character escaped
    (``\\u007f``-style for DEL and C1, which ``json`` leaves raw)."""
    text = json.dumps(doc, ensure_ascii=False, **options)
    return _JSON_RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _want_color(mode: str, stream: IO[str]) -> bool:
    if mode == "always":
        return True
    if mode == "never":
        return False
    if no_color_requested() or os.environ.get("TERM") == "dumb":
        return False
    return _isatty(stream)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _pager_command() -> list[str] | None:
    for var in ("SESSIONTREE_PAGER", "PAGER"):
        value = os.environ.get(var)
        if value is not None:
            value = value.strip()
            # An empty pager, or cat, means "no pager" (as git does).
            if not value or value == "cat":
                return None
            return shlex.split(value)
    less = shutil.which("less")
    return [less] if less else None


@contextmanager
def open_output(
    *, color_mode: str = "auto", pager: bool = True, stream: IO[str] | None = None
) -> Iterator[Output]:
    """The output of one command run, through a pager when that applies.

    Args:
        color_mode: ``auto``, ``always`` or ``never``.
        pager: allow a pager (it is used only when stdout is a terminal).
        stream: where to write (stdout by default).
    """
    out_stream = stream if stream is not None else sys.stdout
    terminal = _isatty(out_stream)
    color = _want_color(color_mode, out_stream)
    if terminal:
        width = shutil.get_terminal_size((100, 24)).columns
    else:
        try:
            width = int(os.environ.get("COLUMNS", ""))
        except ValueError:
            width = 120
    command = _pager_command() if (pager and terminal) else None
    if command is None:
        yield Output(out_stream, color=color, terminal=terminal, width=width)
        out_stream.flush()
        return
    env = dict(os.environ)
    # F: quit when it fits one screen; R: pass colours through; X: leave the screen as is.
    env.setdefault("LESS", "FRX")
    env.setdefault("LV", "-c")
    try:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, env=env)
    except OSError:
        yield Output(out_stream, color=color, terminal=terminal, width=width)
        out_stream.flush()
        return
    assert proc.stdin is not None
    pipe = io.TextIOWrapper(proc.stdin, encoding="utf-8", errors="replace", line_buffering=False)
    try:
        yield Output(pipe, color=color, terminal=terminal, width=width)
        pipe.flush()
    except BrokenPipeError:
        pass  # the reader quit the pager: not an error
    finally:
        with contextlib.suppress(BrokenPipeError):
            pipe.close()
        while True:
            try:
                proc.wait()
                break
            except KeyboardInterrupt:
                continue  # less handles ^C itself; wait for it to exit
