"""``sessiontree schema``: the JSON Schema of a command's ``--json`` output."""

from __future__ import annotations

import argparse
import json
from importlib import resources
from typing import Any, Final

from ._output import open_output
from ._target import Options, UsageError

NAMES: Final = (
    "ls",
    "search",
    "tree",
    "show",
    "stats",
    "check",
    "repair",
    "fork",
    "export",
    "import",
    "convert",
)


def load(name: str) -> dict[str, Any]:
    """The schema of ``name``'s ``--json`` output (from ``schemas/<name>.schema.json``)."""
    if name not in NAMES:
        raise UsageError(f"no schema {name!r}: one of {', '.join(NAMES)}")
    text = (
        resources.files(__package__)
        .joinpath("schemas")
        .joinpath(f"{name}.schema.json")
        .read_text("utf-8")
    )
    doc: dict[str, Any] = json.loads(text)
    return doc


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="COMMAND", choices=NAMES, help=", ".join(NAMES))


def run(args: argparse.Namespace, opts: Options) -> int:
    with open_output(color_mode="never", pager=False) as out:
        out.json(load(args.name))
    return 0
