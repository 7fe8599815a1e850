"""``sessiontree export``: a session as a self-contained HTML page, a branch as Markdown,
or a branch as a JSONL session file."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

from .. import JsonlSessionStorage, SessionError, SessionHeader
from .._util import now_iso
from ..repo.fork import fork_file
from ._copy import dialect_of, write_session
from ._markdown import render
from ._output import open_output
from ._target import Options, open_readonly, plural, resolve, shown

SCHEMA = "export"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", nargs="?", metavar="SESSION")
    fmt = p.add_mutually_exclusive_group(required=True)
    fmt.add_argument("--html", action="store_true", help="the whole session as one HTML page")
    fmt.add_argument("--markdown", "--md", action="store_true", help="a branch as Markdown")
    fmt.add_argument(
        "--jsonl",
        action="store_true",
        help="a branch as a new JSONL session (what `fork --at` copies)",
    )
    fmt.add_argument(
        "--copy",
        action="store_true",
        help="the whole session byte for byte (also out of a PostgreSQL repository)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="where to write (default: stdout)")
    p.add_argument(
        "--leaf", metavar="ID", help="the branch ending at ID (default: the session's leaf)"
    )
    p.add_argument(
        "--compress",
        choices=("auto", "always", "never"),
        default="auto",
        help="with --html: deflate the entries in the page (auto: sessions of 4 MB or more)",
    )


def run(args: argparse.Namespace, opts: Options) -> int:
    path = resolve(opts, args.session)
    if (args.jsonl or args.copy) and not args.output:
        raise SessionError(
            "invalid_argument", "--jsonl and --copy need --output FILE (a new session file)"
        )
    if args.html and not args.output and sys.stdout.isatty():
        raise SessionError(
            "invalid_argument", "--html writes a page: give --output FILE or redirect stdout"
        )
    storage = open_readonly(opts, path, color=opts.color != "never")
    with storage:
        leaf = args.leaf if args.leaf is not None else storage.get_leaf_id()
        if args.leaf is not None and storage.get_entry(args.leaf) is None:
            raise SessionError("not_found", f"entry {args.leaf!r} not found")
        if args.html:
            doc = _html(storage, args.output, args.compress)
        elif args.markdown:
            doc = _markdown(storage, leaf, args.output)
        elif args.copy:
            doc = _copy_bytes(path, len(storage), args.output)
        else:
            doc = _jsonl(storage, leaf, args.output)
    fmt = "html" if args.html else "markdown" if args.markdown else "copy" if args.copy else "jsonl"
    doc = {"source": path, "format": fmt, **doc}
    if args.json:
        with open_output(
            color_mode="never", pager=False, stream=sys.stderr if not args.output else None
        ) as out:
            out.json(doc)
    elif args.output:
        sys.stderr.write(
            f"wrote {shown(doc['output'])} ({plural(doc['bytes'], 'byte')}, "
            f"{plural(doc['entries'], 'entry', 'entries')})\n"
        )
    return 0


def _copy_bytes(path: str, entries: int, output: str) -> dict[str, Any]:
    """The session's bytes as they are (a PostgreSQL session's rows, line for line) in a
    new file, written under a temporary name and linked into place (never over a file)."""
    with open(path, "rb") as f:
        data = f.read()
    final = os.path.abspath(output)
    if os.path.lexists(final):
        raise SessionError("exists", f"{final} already exists")
    tmp = f"{final}.{os.getpid()}.tmp"
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, final)
    except FileExistsError as exc:
        raise SessionError("exists", f"{final} already exists") from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return {"output": final, "entries": entries, "bytes": len(data)}


def _html(storage: JsonlSessionStorage, output: str | None, compress: str) -> dict[str, Any]:
    from ._html import write_html

    if output is None:
        stats = write_html(storage, sys.stdout.buffer, compress=compress)
        sys.stdout.buffer.flush()
        return {"output": None, **stats}
    tmp = output + ".tmp"
    with open(tmp, "wb") as f:
        stats = write_html(storage, f, compress=compress)
    os.replace(tmp, output)
    return {"output": os.path.abspath(output), **stats}


def _markdown(storage: JsonlSessionStorage, leaf: str | None, output: str | None) -> dict[str, Any]:
    entries = storage.get_path_to_root(leaf) if leaf is not None else []
    chunks = render(
        storage.get_metadata(), storage.get_session_name(), entries, storage.get_labels(), leaf
    )
    written = 0
    if output is None:
        for c in chunks:
            sys.stdout.write(c)
            written += len(c.encode("utf-8"))
        sys.stdout.flush()
        return {"output": None, "entries": len(entries), "bytes": written}
    tmp = output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for c in chunks:
            f.write(c)
            written += len(c.encode("utf-8"))
    os.replace(tmp, output)
    return {"output": os.path.abspath(output), "entries": len(entries), "bytes": written}


def _jsonl(storage: JsonlSessionStorage, leaf: str | None, output: str) -> dict[str, Any]:
    """The branch ending at ``leaf`` as a new session file: exactly what ``fork --at leaf``
    writes (``sessiontree.repo.fork.fork_file``): the branch cut at the nearest compaction,
    then the ``label``/``session_info``/``leaf`` entries that give the copy the source's
    labels, name and leaf, in the source's dialect (a pi file gives a pi file, whose
    ``parentSession`` is the source's path, as pi writes it). ``entries`` counts every
    entry of the new file, as ``check`` and ``fork`` count them."""
    final = os.path.abspath(output)
    if os.path.lexists(final):
        raise SessionError("exists", f"{final} already exists")
    header = storage.get_metadata()
    dialect = dialect_of(storage)
    new_id = SessionHeader.generate(cwd=header.cwd).id
    parent = storage.path if dialect == "pi" else header.id
    if leaf is None:
        # No branch (an empty session, or its leaf moved to before the first entry).
        new_header = SessionHeader(
            id=new_id,
            timestamp=now_iso(),
            cwd=header.cwd,
            parent_session=parent,
            metadata=header.metadata,
        )
        write_session(final, new_header, [], dialect=dialect)
        n, last = 0, None
    else:
        with contextlib.closing(
            fork_file(
                storage,
                final,
                new_id,
                leaf,
                "at",
                durability="fsync",
                limits=None,
                parent_session=parent,
            )
        ) as dest:
            n, last = len(dest), dest.get_leaf_id()
    return {
        "output": final,
        "entries": n,
        "bytes": os.stat(final).st_size,
        "session_id": new_id,
        "leaf_id": last,
    }
