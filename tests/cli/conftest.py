"""Fixtures of the command's tests; they live in ``clihelp`` with the helpers."""

from .clihelp import cli, demo, schema, write_lines

__all__ = ["cli", "demo", "schema", "write_lines"]
