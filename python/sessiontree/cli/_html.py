"""The self-contained HTML viewer (``sessiontree export --html``).

One file: the page skeleton, CSS and JavaScript from ``viewer/`` inline, the session as
JSON data blocks. An index block (ids, parent positions, kinds, one-line previews,
labels) is parsed at load; the entries themselves are in blocks of :data:`CHUNK` entries
that the page parses only when it shows or searches them, so a 100k-entry session opens
in seconds.

Safety: session text reaches the page only inside ``<script type="application/json">``
blocks, with ``<``, ``>`` and ``&`` written as ``\\u003c``, ``\\u003e`` and ``\\u0026`` (so
``</script>`` or ``<!--`` cannot appear in them), and the script puts it into the page as
text nodes only. The Content-Security-Policy allows no network access and only the
page's own style and script, by hash.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import zlib
from collections.abc import Iterable
from importlib import resources
from typing import IO, Any, Final

from .. import JsonlSessionStorage, SessionTreeEntry, entry_to_json
from ._describe import kind_of

CHUNK: Final = 256
COMPRESS_BYTES: Final = 4_000_000
"""``compress="auto"`` deflates the entry chunks of session files at least this big."""
# zlib level 3: within a few per cent of level 6's size at about twice its speed here.
_LEVEL: Final = 3


def _asset(name: str) -> str:
    return (
        resources.files(__package__).joinpath("viewer").joinpath(name).read_text(encoding="utf-8")
    )


def _sha256(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _script_json(data: bytes) -> bytes:
    """JSON made safe inside a ``<script>`` element (no ``<``, ``>`` or ``&`` left)."""
    return data.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def write_html(
    storage: JsonlSessionStorage, out: IO[bytes], *, compress: str = "auto"
) -> dict[str, int]:
    """Writes the viewer page of ``storage`` to ``out``.

    Args:
        storage: the session.
        out: a binary stream.
        compress: ``always``, ``never``, or ``auto`` (files of :data:`COMPRESS_BYTES` or
            more): deflate and base64-encode the entry chunks. A browser reads a page of a
            third of the size in a third of the time; the page inflates the chunks it needs
            (``DecompressionStream``).

    Returns:
        ``entries`` (the number written), ``bytes`` (the page's size) and ``compressed``
        (1 or 0).
    """
    css = _asset("viewer.css")
    js = _asset("viewer.js")
    body = _asset("viewer.html")
    header = storage.get_metadata()
    name = storage.get_session_name()
    entries, parents = storage.get_entries_with_parents()
    leaf_id = storage.get_leaf_id()
    positions = {e.id: i for i, e in enumerate(entries)} if leaf_id is not None else {}
    leaf = -1 if leaf_id is None else positions.get(leaf_id, -1)

    kind_names: list[str] = []
    kind_code: dict[str, int] = {}
    kinds: list[int] = []
    for e in entries:
        k = kind_of(e)
        code = kind_code.get(k)
        if code is None:
            code = kind_code[k] = len(kind_names)
            kind_names.append(k)
        kinds.append(code)
    index = {
        "format": "sessiontree-viewer",
        "version": 1,
        "session": {
            "id": header.id,
            "cwd": header.cwd,
            "timestamp": header.timestamp,
            "parent_session": header.parent_session,
            "name": name,
        },
        "chunk": CHUNK,
        "leaf": leaf,
        "ids": [e.id for e in entries],
        "parents": parents,
        "kinds": kinds,
        "kind_names": kind_names,
        "labels": storage.get_labels(),
    }
    csp = (
        "default-src 'none'; img-src data:; "
        f"style-src 'sha256-{_sha256(css)}'; script-src 'sha256-{_sha256(js)}'; "
        "base-uri 'none'; form-action 'none'"
    )
    # The name when there is one; else the id, once (the page says "session <id>").
    title = html.escape(f"{name or 'session ' + header.id} · sessiontree")
    written = 0

    def put(data: bytes) -> None:
        nonlocal written
        out.write(data)
        written += len(data)

    put(
        (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
            '<meta name="referrer" content="no-referrer">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<meta name="generator" content="sessiontree export --html">\n'
            f"<title>{title}</title>\n<style>{css}</style>\n</head>\n<body>\n{body}"
        ).encode()
    )
    put(b'<script type="application/json" id="st-index">')
    put(_script_json(_dumps(index)))
    put(b"</script>\n")
    if compress == "auto":
        try:
            deflate = os.stat(storage.path).st_size >= COMPRESS_BYTES
        except OSError:
            deflate = False
    else:
        deflate = compress == "always"
    for c, chunk in enumerate(_chunks(entries)):
        data = b"[" + b",".join(entry_to_json(e) for e in chunk) + b"]"
        if deflate:
            put(f'<script type="text/plain" data-enc="deflate" id="st-c{c}">'.encode("ascii"))
            put(base64.b64encode(zlib.compress(data, _LEVEL)))
        else:
            put(f'<script type="application/json" id="st-c{c}">'.encode("ascii"))
            put(_script_json(data))
        put(b"</script>\n")
    put(f"<script>{js}</script>\n</body>\n</html>\n".encode())
    return {"entries": len(entries), "bytes": written, "compressed": int(deflate)}


def _chunks(entries: list[SessionTreeEntry]) -> Iterable[list[SessionTreeEntry]]:
    for start in range(0, len(entries), CHUNK):
        yield entries[start : start + CHUNK]
