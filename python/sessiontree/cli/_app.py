"""The argument parser, the dispatch to each command, and the one place errors become a
line on stderr and an exit status."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Final

from .. import SessionError, __version__
from ._target import ENV_REPO, Options, UsageError

EXIT_OK: Final = 0
EXIT_PROBLEMS: Final = 1
EXIT_REFUSED: Final = 2
EXIT_INTERRUPTED: Final = 130
EXIT_PIPE: Final = 141

PROG: Final = "sessiontree"

DESCRIPTION = """\
See, check, repair and share LLM-agent sessions stored as sessiontree JSONL files.

SESSION is a session file, or with a repository (--repo DIR or $SESSIONTREE_REPO) a
session id or a unique prefix of one; reading commands given no SESSION take the newest
session of the repository. Reading commands never change a session file.
"""

EPILOG = """\
examples:
  sessiontree ls ~/.myagent/sessions
  sessiontree --repo ~/.myagent/sessions tree 0192f3c4
  sessiontree show chat.jsonl --full
  sessiontree check chat.jsonl && echo clean
  sessiontree export chat.jsonl --html -o chat.html

exit status: 0 ok; 1 problems found (check, repair) or nothing matched (search);
2 refused or failed (unreadable file, bad header, unknown session, wrong arguments);
130 interrupted.
The manual is docs/cli.md; `sessiontree COMMAND --help` shows each command.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line, as every other error (argparse would print the usage first).
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=30)


# (name, module, one-line help, description/epilog with examples)
COMMANDS: Final[tuple[tuple[str, str, str, str], ...]] = (
    (
        "ls",
        "_ls",
        "list the sessions of a repository, newest first",
        "examples:\n  sessiontree ls ~/.myagent/sessions\n"
        "  sessiontree ls --cwd . --limit 10\n  sessiontree ls DIR --json | jq '.sessions[].id'",
    ),
    (
        "tree",
        "_tree",
        "draw a session's tree of entries",
        "Linear runs are collapsed (… 1,204 entries …) unless --all; the current branch is\n"
        "drawn with heavy lines and the leaf marked.\n\n"
        "examples:\n  sessiontree tree chat.jsonl\n"
        "  sessiontree tree chat.jsonl --around 3f2a9c01\n"
        "  sessiontree tree chat.jsonl --depth 1\n  sessiontree tree chat.jsonl --all --json",
    ),
    (
        "show",
        "_show",
        "show the context that would go to the model, or one entry",
        "examples:\n  sessiontree show chat.jsonl            # the context of the current leaf\n"
        "  sessiontree show chat.jsonl --full     # thinking and tool output unfolded\n"
        "  sessiontree show chat.jsonl 3f2a9c01   # one entry\n"
        "  sessiontree show chat.jsonl 3f2a9c01 --raw\n"
        "  sessiontree show chat.jsonl 3f2a9c01 --branch   # every entry from the root to it",
    ),
    (
        "search",
        "_search",
        "find what was said in any session of a repository",
        "QUERY: words (all must appear, whole words, any case; snake_case and a/b also\n"
        'match by their parts), "a phrase", -excluded, prefix*. Exit status 1 when\n'
        "nothing matched. The manual: docs/search.md.\n\n"
        "examples:\n  sessiontree search 'retry backoff' ~/.myagent/sessions\n"
        "  sessiontree search '\"connection refused\"' --role tool_result --since 2026-11-01\n"
        "  sessiontree search 'decid*' --newest --json | jq '.hits[].snippet'\n"
        "  sessiontree show SESSION ENTRY_ID   # a hit in its context",
    ),
    (
        "stats",
        "_stats",
        "counts, tokens and cost of a session, per model",
        "examples:\n  sessiontree stats chat.jsonl\n  sessiontree stats chat.jsonl --json",
    ),
    (
        "check",
        "_check",
        "report every problem in session files (read-only)",
        "Exit status: 0 clean, 1 problems reported, 2 refused (bad header, unreadable).\n"
        "Never changes a byte and writes nothing beside the file.\n\n"
        "examples:\n  sessiontree check chat.jsonl\n"
        "  sessiontree check ~/.myagent/sessions --json\n"
        "  sessiontree check chat.jsonl --strict",
    ),
    (
        "repair",
        "_repair",
        "cut a torn tail; on request write a clean copy",
        "Without options: a torn last line is cut off into <file>.torn-<time> (the bytes\n"
        "are kept there). With --clean a copy without malformed or duplicate lines is\n"
        "written atomically to --output (default <file>.repaired.jsonl beside it), or with\n"
        "--in-place over the file after keeping the original as <file>.bak-<time>.\n\n"
        "examples:\n  sessiontree repair chat.jsonl --dry-run\n  sessiontree repair chat.jsonl\n"
        "  sessiontree repair chat.jsonl --clean -o fixed.jsonl\n"
        "  sessiontree repair chat.jsonl --clean --in-place",
    ),
    (
        "fork",
        "_fork",
        "copy a session, or its branch at an entry, into a new session",
        "examples:\n  sessiontree fork chat.jsonl                 # a full copy\n"
        "  sessiontree fork chat.jsonl --at 3f2a9c01   # the branch up to that entry\n"
        "  sessiontree fork chat.jsonl --before 3f2a9c01   # retry a user message",
    ),
    (
        "export",
        "_export",
        "write a session as Markdown, a JSONL branch or a self-contained HTML page",
        "examples:\n  sessiontree export chat.jsonl --html -o chat.html\n"
        "  sessiontree export chat.jsonl --markdown > chat.md\n"
        "  sessiontree export chat.jsonl --jsonl --leaf 3f2a9c01 -o branch.jsonl",
    ),
    (
        "import",
        "_import",
        "copy a JSONL session (a branch, or a pi file) into a repository",
        "examples:\n  sessiontree import branch.jsonl --repo ~/.myagent/sessions\n"
        "  sessiontree import ~/.pi/agent/sessions/--home-me-proj--/2026-…jsonl --repo DIR",
    ),
    (
        "convert",
        "_convert",
        "write a session in the other dialect (sessiontree <-> pi), or a pi v1/v2 file as v3",
        "The new file is written atomically beside the session (or -o FILE); the original\n"
        "is never changed.\n\n"
        "examples:\n  sessiontree convert chat.jsonl --to pi\n"
        "  sessiontree convert ~/.pi/agent/sessions/--home-me-proj--/2025-….jsonl --to pi",
    ),
    (
        "completion",
        "_completion",
        "print a shell completion script (bash, zsh or fish)",
        'examples:\n  eval "$(sessiontree completion bash)"\n'
        "  sessiontree completion fish > ~/.config/fish/completions/sessiontree.fish",
    ),
    (
        "schema",
        "_schema",
        "print the JSON Schema of a command's --json output",
        "examples:\n  sessiontree schema ls\n  sessiontree schema check",
    ),
)


def _common(json_flag: bool) -> _Parser:
    # Defaults are SUPPRESS so an option given before the command is not reset by the
    # subparser's default.
    common = _Parser(add_help=False)
    g = common.add_argument_group("common options")
    g.add_argument(
        "--repo",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help=f"the repository directory (default: ${ENV_REPO})",
    )
    g.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default=argparse.SUPPRESS,
        help="colour: auto (a terminal without NO_COLOR), always, never",
    )
    g.add_argument(
        "--no-pager", action="store_true", default=argparse.SUPPRESS, help="never page output"
    )
    g.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default=argparse.SUPPRESS,
        help="progress bar on stderr when loading large files (auto: a terminal, >50 MB)",
    )
    if json_flag:
        g.add_argument(
            "--json",
            action="store_true",
            default=False,
            help="machine-readable output (stable keys; `sessiontree schema CMD`)",
        )
    return common


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=_formatter,
        parents=[_common(False)],
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module, help_text, epilog in COMMANDS:
        json_flag = name not in ("completion", "schema")
        cmd = sub.add_parser(
            name,
            help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".",
            epilog=epilog,
            formatter_class=_formatter,
            parents=[_common(json_flag)],
        )
        _module(module).add_arguments(cmd)
        cmd.set_defaults(_module=module)
    return parser


def _module(name: str) -> _Command:
    return importlib.import_module(f".{name}", __package__)  # type: ignore[return-value]


class _Command:
    """What each command module provides (a protocol in all but name)."""

    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Options], int]


def _options(args: argparse.Namespace) -> Options:
    return Options(
        repo=getattr(args, "repo", None),
        color=getattr(args, "color", "auto"),
        pager=not getattr(args, "no_pager", False),
        progress=getattr(args, "progress", "auto"),
    )


def _fail(code: str, message: str) -> None:
    text = " ".join(message.split()) if "\n" in message else message
    sys.stderr.write(f"{PROG}: {code}: {text}\n")


def run(argv: Sequence[str]) -> int:
    """Parses ``argv``, runs the command, and turns every failure into one line on stderr
    with the :class:`SessionError` code (see ``docs/cli.md`` for the exit statuses)."""
    try:
        parser = build_parser()
        args = parser.parse_args(list(argv))
        if not getattr(args, "_module", None):
            parser.print_help()
            return EXIT_REFUSED
        return _module(args._module).run(args, _options(args))
    except UsageError as exc:
        _fail("usage", str(exc))
        return EXIT_REFUSED
    except SessionError as exc:
        _fail(exc.code, exc.message)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of a pipe went away (`| head`): stop quietly, as a program killed by
        # SIGPIPE would, and keep Python from complaining when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE
    except OSError as exc:
        _fail("io", f"{exc.filename + ': ' if exc.filename else ''}{exc.strerror or exc}")
        return EXIT_REFUSED
