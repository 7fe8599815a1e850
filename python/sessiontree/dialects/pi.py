"""pi's dialect: reading, continuing and converting the session files pi writes.

The engine tells a file's dialect from its header and first entries (``storage.dialect``)
and reads pi's lines through the same arena and model as sessiontree's, so ``Session``,
``build_context``, trees, labels, names and forks work unchanged. This module holds what is
pi's alone: its names for roles (:func:`pi_role`), its conversion of a context into the
messages the model is sent (:func:`convert_to_llm`), and converting whole files between
the dialects (:func:`convert_file`). See ``docs/pi.md``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final, Literal

from .. import _core
from ..errors import SessionError
from ..model.messages import (
    BASH_EXECUTION_ROLE,
    AgentMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    TextContent,
    UnknownMessage,
    UserMessage,
)

__all__ = ["LEAF_MARKER", "Dialect", "convert_file", "convert_to_llm", "pi_role"]

Dialect = Literal["sessiontree", "pi"]
"""A dialect's name, as :attr:`SessionStorage.dialect` gives it."""

LEAF_MARKER: Final[str] = _core.PI_LEAF_MARKER
"""The ``customType`` of the ``custom`` entry that stands for a leaf move in a pi file: it
hangs under the target, so pi (whose leaf is the last entry) resumes there too, and it adds
nothing to pi's context; its ``data`` (``{"parentId": ...}``) names the leaf it moved from.
sessiontree reads it back as the :class:`~sessiontree.LeafEntry` it was."""


_COMPACTION_PREFIX: Final = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
_BRANCH_PREFIX: Final = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
_SUFFIX: Final = "\n</summary>"


def pi_role(message: AgentMessage) -> str:
    """The role of ``message`` as pi names it (``"toolResult"``, ``"bashExecution"``, ...).

    >>> pi_role(UserMessage("hi", timestamp=0))
    'user'
    """
    return _core.pi_name(message.role)


def _bash_text(data: dict[str, Any]) -> str:
    command = data.get("command", "")
    output = data.get("output", "")
    text = f"Ran `{command}`\n"
    text += f"```\n{output}\n```" if output else "(no output)"
    if data.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif data.get("exit_code") not in (None, 0):
        text += f"\n\nCommand exited with code {data.get('exit_code')}"
    if data.get("truncated") and data.get("full_output_path"):
        text += f"\n\n[Output truncated. Full output: {data['full_output_path']}]"
    return text


def convert_to_llm(messages: Iterable[AgentMessage]) -> list[AgentMessage]:
    """What pi sends the model for a context (pi's ``convertToLlm``): custom messages,
    branch and compaction summaries and shell runs become user messages; a shell run with
    ``exclude_from_context`` is left out; every other message is kept as it is.

    The texts follow pi's wording (summaries wrapped in ``<summary>`` tags); what matters
    for a model is that the same messages, in the same roles, go out.
    """
    out: list[AgentMessage] = []
    for m in messages:
        if isinstance(m, CustomMessage):
            content = m.content if isinstance(m.content, str) else tuple(m.content)
            out.append(UserMessage(content, timestamp=m.timestamp))
        elif isinstance(m, BranchSummaryMessage):
            out.append(UserMessage(_BRANCH_PREFIX + m.summary + _SUFFIX, timestamp=m.timestamp))
        elif isinstance(m, CompactionSummaryMessage):
            out.append(UserMessage(_COMPACTION_PREFIX + m.summary + _SUFFIX, timestamp=m.timestamp))
        elif isinstance(m, UnknownMessage) and m.role == BASH_EXECUTION_ROLE:
            if m.data.get("exclude_from_context"):
                continue
            ts = m.data.get("timestamp")
            out.append(
                UserMessage(
                    [TextContent(_bash_text(m.data))],
                    timestamp=ts if isinstance(ts, int) and not isinstance(ts, bool) else 0,
                )
            )
        else:
            out.append(m)
    return out


def convert_file(
    source: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    to: Dialect,
) -> Path:
    """Writes ``source`` translated into dialect ``to`` at ``dest`` (a new file; ``exists``
    if there is one), atomically: the whole copy is written under a temporary name, synced
    and then linked into place. ``source`` is never changed.

    ``to="pi"`` gives a pi v3 file (so pi's v1 and v2 files are migrated as pi migrates
    them, and a sessiontree session becomes one pi can resume); ``to="sessiontree"`` gives
    FORMAT.md's dialect. Lines no reader takes as entries (not JSON, a torn tail) are left
    out.

    Raises:
        SessionError: ``not_found`` for a missing source, ``exists``, ``corrupt`` (naming
            the line) for a line that cannot be translated, ``invalid_argument`` for an
            unknown dialect, ``io`` for other OS errors.
    """
    src, dst = Path(source), Path(dest)
    try:
        data = src.read_bytes()
    except FileNotFoundError as e:
        raise SessionError("not_found", f"{src} does not exist") from e
    except OSError as e:
        raise SessionError("io", f"reading {src}: {e.strerror}") from e
    out = _core.convert_lines(data, to)
    if dst.exists() or dst.is_symlink():
        raise SessionError("exists", f"{dst} already exists")
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(out)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, dst)
        except FileExistsError as e:
            raise SessionError("exists", f"{dst} already exists") from e
    except OSError as e:
        raise SessionError("io", f"writing {dst}: {e.strerror}") from e
    finally:
        os.unlink(tmp)
    return dst
