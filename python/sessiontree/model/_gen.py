"""Writes the model classes' field declarations from the engine's model table.

The fields of every type are declared once, in ``rust/engine/model.rs`` (``_core.MODEL``).
Type checkers and ``dataclasses`` need them spelled out in each class body, so this module
writes them there: in ``messages.py`` and ``entries.py``, each model class holds a block
between the lines ``# Fields: generated ...`` and ``# End of generated fields.``, made from
the class's row — the attribute names, their order (the constructor's positional order),
their annotations and their defaults, and for a tagged type the property that gives its
tag (``TextContent.type``, ``UserMessage.role``).

Run ``python -m sessiontree.model._gen`` after changing the table; ``--check`` only reports
(exit status 1) a block that differs, as the test suite does.

The order is the table's rule: the fields a constructor needs, then those it defaults,
each in FORMAT.md's order, a field readers require but a constructor defaults (a message's
``timestamp``, the header's ``version``) last — unless the row names its own order
(``params``, where API.md's differs).
"""

from __future__ import annotations

import pathlib
import re
import sys
from collections.abc import Sequence
from typing import Any, Final

from .. import _core

__all__ = ["annotation", "declarations", "main", "params"]

BEGIN: Final = "    # Fields: generated from the model table (python -m sessiontree.model._gen)."
END: Final = "    # End of generated fields."

# Python's names for the value sets and block lists the table spells out.
_ONE_OF: Final = {_core.STOP_REASONS: "StopReason", _core.THINKING_LEVELS: "ThinkingLevel"}
_BLOCKS: Final = {
    ("text", "image"): "UserContentBlock",
    ("text", "thinking", "tool_call"): "AssistantContentBlock",
}
# The shared instance a nested type's empty default is.
_EMPTY: Final = {"Usage": "_ZERO_USAGE", "Cost": "_ZERO_COST"}
_CTOR_DEFAULT: Final = {"now": "field(default_factory=now_ms)", "format_version": "FORMAT_VERSION"}
_FILES: Final = ("messages.py", "entries.py")

_ROWS: Final = {row[0]: row for row in _core.MODEL}


def params(row: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """The fields of ``row`` in the constructor's order (see the module's doc)."""
    fields = row[3]
    if row[4] is not None:
        by_attr = {f[1]: f for f in fields}
        return [by_attr[a] for a in row[4]]
    needed = [f for f in fields if f[3] and f[9] is None]
    defaulted = [f for f in fields if not f[3]]
    stamped = [f for f in fields if f[3] and f[9] is not None]
    return needed + defaulted + stamped


def annotation(f: tuple[Any, ...]) -> str:
    """The Python annotation of field ``f``."""
    _key, _attr, kind, required, nullable, _omit, arg, default, _rule, _ctor = f
    text = {
        "str": "str",
        "int": "int",
        "timestamp_ms": "int",
        "number": "float",
        "bool": "bool",
        "any": "Any",
        "object": "dict[str, Any]",
        "str_list": "Sequence[str]",
        "message": "AgentMessage",
        "messages": "Sequence[AgentMessage]",
    }.get(kind)
    if kind == "one_of":
        text = _ONE_OF[arg]
    elif kind == "blocks":
        text = f"Sequence[{_BLOCKS[arg]}]"
    elif kind == "str_or_blocks":
        text = f"str | Sequence[{_BLOCKS[arg]}]"
    elif kind == "nested":
        text = arg
    assert text is not None, kind
    takes_none = nullable and (required or default == "null")
    return f"{text} | None" if takes_none and kind != "any" else text


def _default(f: tuple[Any, ...]) -> str | None:
    _key, _attr, _kind, required, _null, _omit, arg, default, _rule, ctor = f
    if required:
        return None if ctor is None else _CTOR_DEFAULT[ctor]
    if default == "{}":
        return str(_EMPTY[arg])
    text: str = default
    return {"null": "None", "true": "True", "false": "False"}.get(text, text)


def declarations(name: str) -> list[str]:
    """The field lines of class ``name`` and, for a tagged type, the property that gives
    its tag (indented, without the markers)."""
    row = _ROWS[name]
    lines = []
    for f in params(row):
        default = _default(f)
        line = f"    {f[1]}: {annotation(f)}"
        lines.append(line if default is None else f"{line} = {default}")
    tag_key, tag = row[1], row[2]
    if tag_key is not None:
        lines += [
            "",
            "    @property",
            f"    def {tag_key}(self) -> Literal[{tag!r}]:".replace("'", '"'),
            f'        """``"{tag}"``, the JSON ``{tag_key}`` of this class."""',
            f"        return {tag!r}".replace("'", '"'),
            "",
        ]
    return lines


_CLASS: Final = re.compile(r"^class (\w+)\(")


def _rewrite(text: str) -> tuple[str, list[str], list[str]]:
    """``text`` with every generated block rewritten, the classes whose block changed and
    the classes with a block."""
    out: list[str] = []
    changed: list[str] = []
    blocks: list[str] = []
    cls: str | None = None
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _CLASS.match(line)
        if m:
            cls = m.group(1)
        out.append(line)
        i += 1
        if line != BEGIN:
            continue
        if cls not in _ROWS:
            raise SystemExit(f"a generated block in {cls}, which the model table lacks")
        end = lines.index(END, i)
        blocks.append(cls)
        want = declarations(cls)
        if lines[i:end] != want:
            changed.append(cls)
        out.extend(want)
        i = end
    return "\n".join(out), changed, blocks


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite (or with ``--check`` compare) the generated blocks; 1 if any differed."""
    args = sys.argv[1:] if argv is None else list(argv)
    check = "--check" in args
    here = pathlib.Path(__file__).parent
    seen: set[str] = set()
    status = 0
    for name in _FILES:
        path = here / name
        text = path.read_text(encoding="utf-8")
        new, changed, blocks = _rewrite(text)
        seen.update(blocks)
        if changed:
            status = 1
            print(f"{name}: fields differ from the model table in {', '.join(changed)}")
            if not check:
                path.write_text(new, encoding="utf-8")
    missing = sorted(n for n in _ROWS if n not in seen)
    if missing:
        print(f"no generated fields for {', '.join(missing)}")
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
