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
from collections.abc import Iterable
from importlib import resources
from typing import IO, Any, Final

from .. import JsonlSessionStorage, SessionTreeEntry, entry_to_json
from ._describe import entry_text, kind_of
from ._output import fit

CHUNK: Final = 256
PREVIEW: Final = 140


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("viewer", name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _script_json(data: bytes) -> bytes:
    """JSON made safe inside a ``<script>`` element (no ``<``, ``>`` or ``&`` left)."""
    return data.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def write_html(storage: JsonlSessionStorage, out: IO[bytes]) -> dict[str, int]:
    """Writes the viewer page of ``storage`` to ``out``; returns ``entries`` and ``bytes``."""
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
    previews: list[str] = []
    for e in entries:
        k = kind_of(e)
        code = kind_code.get(k)
        if code is None:
            code = kind_code[k] = len(kind_names)
            kind_names.append(k)
        kinds.append(code)
        previews.append(fit(entry_text(e), PREVIEW))
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
        "previews": previews,
        "labels": storage.get_labels(),
    }
    csp = (
        "default-src 'none'; img-src data:; "
        f"style-src 'sha256-{_sha256(css)}'; script-src 'sha256-{_sha256(js)}'; "
        "base-uri 'none'; form-action 'none'"
    )
    title = html.escape(f"{name or header.id} · sessiontree")
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
        ).encode("utf-8")
    )
    put(b'<script type="application/json" id="st-index">')
    put(_script_json(_dumps(index)))
    put(b"</script>\n")
    for c, chunk in enumerate(_chunks(entries)):
        put(f'<script type="application/json" id="st-c{c}">'.encode("ascii"))
        put(_script_json(b"[" + b",".join(entry_to_json(e) for e in chunk) + b"]"))
        put(b"</script>\n")
    put(f"<script>{js}</script>\n</body>\n</html>\n".encode())
    return {"entries": len(entries), "bytes": written}


def _chunks(entries: list[SessionTreeEntry]) -> Iterable[list[SessionTreeEntry]]:
    for start in range(0, len(entries), CHUNK):
        yield entries[start : start + CHUNK]
