"""Writing a session file from entries read elsewhere: ``repair --clean``, ``import`` and
``export --jsonl`` all go through :func:`write_session`.

The file is written under a hidden temporary name in the destination's directory,
synced, and only then given its name (``link``, which refuses an existing file, or
``rename`` over the original for ``repair --in-place``), so it appears whole or not at all.
Entries go through ``JsonlSessionStorage.append_entry``, which checks each one, in the
order the reader returned them: what the reader kept of the source, and nothing else. The
copy is written in the source's dialect (a pi file stays a pi file pi can resume); only
``convert`` changes a session's dialect.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from typing import Final, Literal

from .. import (
    JsonlSessionStorage,
    LeafEntry,
    SessionError,
    SessionHeader,
    SessionTreeEntry,
    entry_from_dict,
    entry_to_dict,
)
from ..model.entries import FORMAT_VERSION, header_from_dict, header_to_dict

_TMP_PREFIX: Final = ".sessiontree-write-"

Dialect = Literal["sessiontree", "pi"]


def dialect_of(storage: object) -> Dialect:
    """The dialect ``storage`` reads (``"pi"`` for pi's files, of any version): the one a
    copy of it is written in, so pi can still resume what a command wrote for it."""
    return "pi" if getattr(storage, "dialect", None) == "pi" else "sessiontree"


def header_copy(header: SessionHeader, *, session_id: str | None = None) -> SessionHeader:
    """``header`` in this format's current version (a pi v1/v2 header becomes v3), with
    the fields no reader knows (pi v1's ``branchedFrom``) kept."""
    fields = dict(header_to_dict(header))
    fields["version"] = FORMAT_VERSION
    if session_id is not None:
        fields["id"] = session_id
    return header_from_dict(fields)


def _fixed(entry: SessionTreeEntry, known: set[str]) -> SessionTreeEntry:
    """``entry`` as it can be appended after ``known``: a ``leaf`` entry whose target the
    reader did not know (reported ``unknown_leaf_target``, and so leaving the leaf where
    it was) points at the leaf it leaves, which is what it did; a parent the copy lacks
    makes the entry a root, as the reader did."""
    bad_parent = entry.parent_id is not None and entry.parent_id not in known
    bad_target = (
        isinstance(entry, LeafEntry)
        and entry.target_id is not None
        and entry.target_id not in known
    )
    if not bad_parent and not bad_target:
        return entry
    d = dict(entry_to_dict(entry))
    if bad_parent:
        d["parent_id"] = None
    if bad_target:
        d["target_id"] = d["parent_id"]
    return entry_from_dict(d)


def copy_entries(entries: Iterable[SessionTreeEntry], dest: JsonlSessionStorage) -> int:
    """Appends ``entries`` to ``dest`` in order (see :func:`_fixed`); returns the count."""
    known: set[str] = set()
    n = 0
    for entry in entries:
        if entry.id in known:
            continue  # the reader keeps the first of a duplicated id
        fixed = _fixed(entry, known)
        dest.append_entry(fixed)
        known.add(fixed.id)
        n += 1
    return n


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_session(
    dest: str,
    header: SessionHeader,
    entries: Iterable[SessionTreeEntry],
    *,
    leaf_id: str | None = None,
    replace: bool = False,
    dialect: Dialect = "sessiontree",
) -> int:
    """Writes a new session file ``dest`` atomically; returns the number of entries.

    Args:
        dest: the file to write; refused (``exists``) if it exists, unless ``replace``.
        header: its header.
        entries: its entries, parents first.
        leaf_id: where the leaf must end; a ``leaf`` entry is appended if the copied
            entries leave it elsewhere (``None``: wherever they leave it).
        replace: rename over ``dest`` (``repair --in-place``, after the caller kept the
            original).
        dialect: the dialect to write (the source's: see :func:`dialect_of`); ``"pi"``
            writes a pi v3 file.
    """
    directory = os.path.dirname(os.path.abspath(dest))
    if not replace and os.path.lexists(dest):
        raise SessionError("exists", f"{dest} already exists")
    tmp = os.path.join(directory, f"{_TMP_PREFIX}{os.getpid()}-{os.path.basename(dest)}")
    if os.path.lexists(tmp):
        os.unlink(tmp)
    storage = JsonlSessionStorage.create(
        tmp, header, durability="none", index=False, dialect=dialect
    )
    try:
        try:
            n = copy_entries(entries, storage)
            if leaf_id is not None and storage.get_leaf_id() != leaf_id:
                storage.set_leaf_id(leaf_id)
            storage.flush()
        finally:
            storage.close()
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, dest)
        else:
            try:
                os.link(tmp, dest)
            except FileExistsError:
                raise SessionError("exists", f"{dest} already exists") from None
            os.unlink(tmp)
        _fsync_dir(directory)
        return n
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
