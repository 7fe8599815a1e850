"""The plain-Python baseline: what a careful developer writes with orjson in an afternoon.

Every line becomes a dict, entries are indexed by id, the leaf is replayed as FORMAT.md
says, paths are walked leaf → root with the compaction rule, and the context is a list of
message dicts. It follows the format's robustness rules that cost nothing extra to follow
(torn last line, malformed lines skipped, first of duplicate ids wins, unknown leaf targets
ignored), so comparing against it is comparing like with like. It does no caching beyond
what it holds in memory after ``open_session``.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

Entry = dict[str, Any]


def iso_now() -> str:
    """Now as ISO-8601 UTC with milliseconds and ``Z``."""
    ms = time.time_ns() // 1_000_000
    sec, milli = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)) + f".{milli:03d}Z"


def iso_to_ms(text: str) -> int:
    """An entry timestamp (ISO-8601) as Unix milliseconds."""
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000 + 0.5)


class BaselineSession:
    """One session file read fully into dicts.

    Attributes:
        path: the file.
        header: the header line as a dict.
        entries: every entry in file order.
        by_id: entries by id.
        leaf: the current leaf id.
        issues: how many lines were skipped (malformed, duplicate, torn ...).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.header: Entry = {}
        self.entries: list[Entry] = []
        self.by_id: dict[str, Entry] = {}
        self.leaf: str | None = None
        self.issues = 0
        self._fh: Any = None
        self._fd = -1
        self._last_sync = 0.0

    # -- loading -------------------------------------------------------------------------

    def _load(self) -> None:
        with open(self.path, "rb") as f:
            first = f.readline()
            if not first.endswith(b"\n"):
                raise ValueError(f"{self.path}: no header line")
            header = orjson.loads(first)
            if not isinstance(header, dict) or header.get("type") != "session":
                raise ValueError(f"{self.path}: bad header")
            if header.get("version", 0) > 3:
                raise ValueError(f"{self.path}: unsupported version {header.get('version')}")
            self.header = header
            entries = self.entries
            by_id = self.by_id
            leaf = None
            for line in f:
                if not line.endswith(b"\n"):
                    self.issues += 1  # torn tail: not an entry
                    break
                if not line.strip():
                    continue
                try:
                    entry = orjson.loads(line)
                except orjson.JSONDecodeError:
                    self.issues += 1
                    continue
                if not isinstance(entry, dict):
                    self.issues += 1
                    continue
                entry_id = entry.get("id")
                if not isinstance(entry_id, str) or not entry_id or entry_id in by_id:
                    self.issues += 1
                    continue
                parent = entry.get("parent_id")
                if parent is not None and parent not in by_id:
                    entry["parent_id"] = None  # dangling parent: a root of its own
                    self.issues += 1
                by_id[entry_id] = entry
                entries.append(entry)
                if entry.get("type") == "leaf":
                    target = entry.get("target_id")
                    if target is None or target in by_id:
                        leaf = target
                    else:
                        self.issues += 1
                else:
                    leaf = entry_id
            self.leaf = leaf

    # -- paths ---------------------------------------------------------------------------

    def path_to_root(self, entry_id: str | None) -> list[Entry]:
        """Root → ``entry_id``."""
        out: list[Entry] = []
        by_id = self.by_id
        while entry_id is not None:
            entry = by_id[entry_id]
            out.append(entry)
            entry_id = entry["parent_id"]
        out.reverse()
        return out

    def path_to_root_or_compaction(self, entry_id: str | None) -> list[Entry]:
        """Root-or-compaction → ``entry_id``, as FORMAT.md "Paths" defines it."""
        out: list[Entry] = []
        by_id = self.by_id
        while entry_id is not None:
            entry = by_id[entry_id]
            out.append(entry)
            if entry["type"] == "compaction":
                if entry.get("retained_tail") is not None:
                    break
                first_kept = entry.get("first_kept_entry_id")
                if first_kept is None:
                    break
                mark = len(out)
                cur = entry["parent_id"]
                found = False
                while cur is not None:
                    e = by_id[cur]
                    out.append(e)
                    if cur == first_kept:
                        found = True
                        break
                    cur = e["parent_id"]
                if not found:
                    del out[mark:]
                break
            entry_id = entry["parent_id"]
        out.reverse()
        return out

    def branch_tail(self, count: int) -> list[Entry]:
        """The newest ``count`` entries of the current branch, newest first."""
        out: list[Entry] = []
        entry_id = self.leaf
        while entry_id is not None and len(out) < count:
            entry = self.by_id[entry_id]
            out.append(entry)
            entry_id = entry["parent_id"]
        return out

    def newest(self, count: int) -> list[Entry]:
        """The newest ``count`` entries in file order, newest first."""
        return self.entries[: -count - 1 : -1] if count else []

    # -- tree ----------------------------------------------------------------------------

    def tree(self) -> list[dict[str, Any]]:
        """Root nodes ``{"entry", "children", "label"}`` in file order, children likewise."""
        labels: dict[str, str] = {}
        for e in self.entries:
            if e.get("type") == "label":
                target, text = e.get("target_id"), e.get("label")
                if isinstance(text, str):
                    labels[target] = text
                else:
                    labels.pop(target, None)
        nodes: dict[str, dict[str, Any]] = {}
        roots: list[dict[str, Any]] = []
        for e in self.entries:
            node = {"entry": e, "children": [], "label": labels.get(e["id"])}
            nodes[e["id"]] = node
            parent = e.get("parent_id")
            (roots if parent is None else nodes[parent]["children"]).append(node)
        return roots

    # -- context -------------------------------------------------------------------------

    def build_context(self, leaf: str | None = None) -> dict[str, Any]:
        """The context at ``leaf`` (default: the current leaf) as plain dicts."""
        leaf = self.leaf if leaf is None else leaf
        thinking_level = "off"
        model: tuple[str, str] | None = None
        tools: list[str] | None = None
        for entry in self.path_to_root(leaf):
            kind = entry["type"]
            if kind == "thinking_level_change":
                thinking_level = entry["thinking_level"]
            elif kind == "model_change":
                model = (entry["provider"], entry["model_id"])
            elif kind == "message" and entry["message"].get("role") == "assistant":
                model = (entry["message"]["provider"], entry["message"]["model"])
            elif kind == "active_tools_change":
                tools = entry["active_tool_names"]
        branch = self.path_to_root_or_compaction(leaf)
        return {
            "messages": messages_of(default_transform(branch)),
            "thinking_level": thinking_level,
            "model": model,
            "active_tool_names": tools,
        }

    # -- stats ---------------------------------------------------------------------------

    def stats(self) -> dict[str, float]:
        """Counts and usage over every entry (every branch)."""
        s = dict.fromkeys(
            (
                "entry_count",
                "message_count",
                "user_message_count",
                "assistant_message_count",
                "tool_result_count",
                "input_tokens",
                "output_tokens",
                "cache_read_tokens",
                "cache_write_tokens",
                "total_tokens",
            ),
            0,
        )
        cost = 0.0
        s["entry_count"] = len(self.entries)
        for entry in self.entries:
            kind = entry["type"]
            usage = None
            if kind == "message":
                s["message_count"] += 1
                message = entry["message"]
                role = message.get("role")
                if role == "user":
                    s["user_message_count"] += 1
                elif role == "assistant":
                    s["assistant_message_count"] += 1
                    usage = message.get("usage")
                elif role == "tool_result":
                    s["tool_result_count"] += 1
            elif kind in ("compaction", "branch_summary"):
                usage = entry.get("usage")
            if usage:
                s["input_tokens"] += usage["input"]
                s["output_tokens"] += usage["output"]
                s["cache_read_tokens"] += usage["cache_read"]
                s["cache_write_tokens"] += usage["cache_write"]
                s["total_tokens"] += usage["total_tokens"]
                cost += usage["cost"]["total"]
        return {**s, "cost_total": cost}

    # -- appending -----------------------------------------------------------------------

    def _writer(self) -> Any:
        if self._fh is None:
            self._fh = open(self.path, "ab")  # noqa: SIM115 - held until close()
            self._fd = self._fh.fileno()
            self._last_sync = time.monotonic()
        return self._fh

    def new_id(self) -> str:
        """8 lowercase hex digits not used in this session."""
        while True:
            candidate = f"{random.getrandbits(32):08x}"
            if candidate not in self.by_id:
                return candidate

    def append(self, type_: str, fields: dict[str, Any], durability: str = "flush") -> str:
        """Appends one entry under the leaf and moves the leaf to it.

        Args:
            type_: the entry type.
            fields: the fields besides the base ones.
            durability: ``flush`` (write to the OS), ``fsync`` (and sync), ``group``
                (flush, and sync when the last sync is a second old).
        """
        entry: Entry = {
            "type": type_,
            "id": self.new_id(),
            "parent_id": self.leaf,
            "timestamp": iso_now(),
        }
        entry.update(fields)
        fh = self._writer()
        fh.write(orjson.dumps(entry) + b"\n")
        fh.flush()
        if durability == "fsync":
            os.fsync(self._fd)
        elif durability == "group":
            now = time.monotonic()
            if now - self._last_sync >= 1.0:
                os.fsync(self._fd)
                self._last_sync = now
        self.by_id[entry["id"]] = entry
        self.entries.append(entry)
        self.leaf = entry["id"]
        return entry["id"]

    def append_user_message(self, text: str, durability: str = "flush") -> str:
        """Appends a user message entry."""
        message = {"role": "user", "content": text, "timestamp": time.time_ns() // 1_000_000}
        return self.append("message", {"message": message}, durability)

    def close(self) -> None:
        """Closes the append handle (the file stays as written)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def open_session(path: str | os.PathLike[str]) -> BaselineSession:
    """Reads a session file into a :class:`BaselineSession`."""
    session = BaselineSession(path)
    session._load()
    return session


def create_session(path: str | os.PathLike[str], cwd: str = "/tmp") -> BaselineSession:
    """Writes a new session file with only a header."""
    header = {
        "type": "session",
        "version": 3,
        "id": str(uuid.uuid4()),
        "timestamp": iso_now(),
        "cwd": cwd,
        "parent_session": None,
        "metadata": None,
    }
    with open(path, "xb") as f:
        f.write(orjson.dumps(header) + b"\n")
    session = BaselineSession(path)
    session.header = header
    return session


def default_transform(path: list[Entry]) -> list[Entry]:
    """The latest compaction on ``path`` applied (API.md "Context building")."""
    last = -1
    for i in range(len(path) - 1, -1, -1):
        if path[i]["type"] == "compaction":
            last = i
            break
    if last < 0:
        return path
    compaction = path[last]
    out = [compaction]
    first_kept = compaction.get("first_kept_entry_id")
    if compaction.get("retained_tail") is None and first_kept is not None:
        keeping = False
        for entry in path[:last]:
            if entry["id"] == first_kept:
                keeping = True
            if keeping and entry["type"] != "compaction":
                out.append(entry)
    out.extend(path[last + 1 :])
    return out


def messages_of(entries: Iterable[Entry]) -> list[dict[str, Any]]:
    """The context messages of context entries, as dicts."""
    out: list[dict[str, Any]] = []
    for entry in entries:
        kind = entry["type"]
        if kind == "message":
            out.append(entry["message"])
        elif kind == "custom_message":
            out.append(
                {
                    "role": "custom",
                    "custom_type": entry["custom_type"],
                    "content": entry["content"],
                    "display": entry.get("display", True),
                    "details": entry.get("details"),
                    "timestamp": iso_to_ms(entry["timestamp"]),
                }
            )
        elif kind == "compaction":
            out.append(
                {
                    "role": "compaction_summary",
                    "summary": entry["summary"],
                    "tokens_before": entry["tokens_before"],
                    "timestamp": iso_to_ms(entry["timestamp"]),
                }
            )
            out.extend(entry.get("retained_tail") or ())
        elif kind == "branch_summary":
            out.append(
                {
                    "role": "branch_summary",
                    "summary": entry["summary"],
                    "from_id": entry["from_id"],
                    "timestamp": iso_to_ms(entry["timestamp"]),
                }
            )
    return out


def fork(source: str | os.PathLike[str], entry_id: str, dest_dir: str | os.PathLike[str]) -> Path:
    """Copies the path to ``entry_id`` (``position="at"``) into a new session file.

    Returns:
        the new file, ``<dest_dir>/<new id>.jsonl``.
    """
    src = open_session(source)
    path = src.path_to_root_or_compaction(entry_id)
    new_id = str(uuid.uuid4())
    header = {
        "type": "session",
        "version": 3,
        "id": new_id,
        "timestamp": iso_now(),
        "cwd": src.header.get("cwd"),
        "parent_session": src.header["id"],
        "metadata": src.header.get("metadata"),
    }
    dest = Path(dest_dir) / f"{new_id}.jsonl"
    with open(dest, "xb") as f:
        f.write(orjson.dumps(header) + b"\n")
        for i, entry in enumerate(path):
            if i == 0 and entry["parent_id"] is not None:
                entry = {**entry, "parent_id": None}
            f.write(orjson.dumps(entry) + b"\n")
        f.flush()
        os.fsync(f.fileno())
    return dest


def session_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What a session list shows for one file: header fields, counts, name, first message."""
    meta: dict[str, Any] = {"path": os.fspath(path), "error": None}
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            header = orjson.loads(f.readline())
            entries = messages = 0
            name = None
            first = None
            modified = header["timestamp"]
            for line in f:
                if not line.endswith(b"\n") or not line.strip():
                    continue
                try:
                    entry = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                entries += 1
                modified = max(modified, entry.get("timestamp", modified))
                kind = entry.get("type")
                if kind == "message":
                    messages += 1
                    message = entry["message"]
                    if first is None and message.get("role") == "user":
                        content = message.get("content")
                        if isinstance(content, str):
                            first = content
                        else:
                            first = "".join(
                                b.get("text", "") for b in content if b.get("type") == "text"
                            )
                elif kind == "session_info":
                    name = entry.get("name")
    except (OSError, ValueError, KeyError) as exc:
        meta["error"] = str(exc)
        return meta
    meta.update(
        id=header["id"],
        cwd=header.get("cwd"),
        created=header["timestamp"],
        modified=modified,
        name=name,
        parent_session=header.get("parent_session"),
        entry_count=entries,
        message_count=messages,
        first_message=first,
        size_bytes=size,
    )
    return meta


def list_sessions(root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Metadata of every ``*.jsonl`` session in ``root``, newest ``modified`` first."""
    out = [session_metadata(p) for p in Path(root).glob("*.jsonl")]
    out.sort(key=lambda m: m.get("modified") or "", reverse=True)
    return out
