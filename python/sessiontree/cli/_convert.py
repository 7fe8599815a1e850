"""``sessiontree convert``: a session file in the other dialect (sessiontree ↔ pi), or pi's
old v1/v2 files as v3, written as a new file (``sessiontree.dialects.pi.convert_file``)."""

from __future__ import annotations

import argparse
import os

from .. import JsonlSessionStorage
from ..dialects.pi import convert_file
from ._output import open_output
from ._target import SUFFIX, Options, plural, resolve, shown

SCHEMA = "convert"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="SESSION")
    p.add_argument(
        "--to",
        choices=("pi", "sessiontree"),
        required=True,
        help="the dialect to write: pi (pi's v3, which pi can resume) or sessiontree",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="the new file (default <stem>.<dialect>.jsonl beside the session)",
    )


def _describe(path: str) -> tuple[tuple[str, int], int]:
    """The file's dialect and format version, and its entry count."""
    storage = JsonlSessionStorage.open(path, readonly=True)
    try:
        return (storage.dialect, storage.format_version), len(storage)
    finally:
        storage.close()


def run(args: argparse.Namespace, opts: Options) -> int:
    path = resolve(opts, args.session)
    stem = path[: -len(SUFFIX)] if path.endswith(SUFFIX) else path
    dest = os.path.abspath(args.output) if args.output else f"{stem}.{args.to}{SUFFIX}"
    before, _ = _describe(path)
    convert_file(path, dest, to=args.to)
    after, count = _describe(dest)
    doc = {
        "source": {"path": path, "dialect": before[0], "version": before[1]},
        "output": {"path": dest, "dialect": after[0], "version": after[1], "entry_count": count},
    }
    with open_output(color_mode="never" if args.json else opts.color, pager=False) as out:
        if args.json:
            out.json(doc)
        else:
            out.line(
                f"converted {shown(path)} ({before[0]} v{before[1]}) into "
                + out.paint(shown(dest), "bold")
                + f" ({after[0]} v{after[1]}, {plural(count, 'entry', 'entries')}); "
                "the original is unchanged"
            )
    return 0
