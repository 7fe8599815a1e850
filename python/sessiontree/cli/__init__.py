"""The ``sessiontree`` command: list, look at, check, repair, fork, export and import
sessions without writing code.

Run ``sessiontree --help`` (or ``python -m sessiontree --help``); ``docs/cli.md`` is the
manual. Every command works on a plain ``pip install sessiontree``, in plain text; the
optional extra ``sessiontree[cli]`` (rich) adds Markdown rendering and progress bars on a
terminal. The library itself never imports this package, so ``import sessiontree`` stays
free of it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command and returns its exit status (see ``docs/cli.md``).

    Args:
        argv: the arguments after the program name (``sys.argv[1:]`` by default).

    Returns:
        0 on success, 1 when ``check`` or ``repair`` found problems, 2 when a session was
        refused or could not be read (or the arguments were wrong).
    """
    from ._app import run

    return run(sys.argv[1:] if argv is None else list(argv))
