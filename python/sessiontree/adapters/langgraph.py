"""LangGraph's checkpointer over a sessiontree repository: :class:`SessionTreeSaver`.

LangGraph writes a checkpoint (channel values, their versions, what each node has seen)
at every step of a graph, each naming the one before (``parent_config``); "time travel"
continues from an earlier one. That is a tree, and here it is a session's tree:

- one thread and checkpoint namespace is one session, ``langgraph-<h(thread)>-<h(ns)>``
  (SHA-256 digests, so any thread id gives a safe file name and database key; the exact
  ids are kept in the header's ``metadata["langgraph"]`` and checked on open);
- a checkpoint is a custom entry (``langgraph/checkpoint``) whose ancestors are the blobs
  it introduced, the pending writes of its parent checkpoint and then that parent: a
  checkpoint put from an earlier one starts a branch, so ``sessiontree tree``, the
  viewer and ``fork`` show LangGraph's history as it is;
- channel values are stored once per version (``langgraph/blob``), as the Postgres saver's
  blobs table does: a checkpoint references the blob of each channel it sees, and a blob
  is written only for the channels in ``new_versions``. A list value that extends the list
  its parent checkpoint saw (``add_messages``, ``operator.add``: any reducer that appends)
  is stored as the appended items only, with a reference to the earlier blob, so a
  growing ``messages`` channel costs what each step adds, not its whole length. The
  prefix is checked (identity, then ``==``) before a delta is written, so a reducer that
  removes or rewrites items gets a full blob: the value read back is always the value put;
- ``put_writes`` appends a ``langgraph/writes`` entry under its checkpoint.

Every value goes through the saver's ``serde`` (``dumps_typed``; the bytes as base64), so
LangGraph's serializers, encrypted ones included, work unchanged; the checkpoint's own
fields and its metadata are kept as JSON when they round-trip exactly (readable in the
file, filterable), else through ``serde`` too.

Deleting: ``delete_thread`` and ``prune(strategy="delete")`` delete the sessions.
``delete_for_runs`` appends a ``langgraph/deleted`` entry naming the checkpoints it
removes (the file is append-only; the saver no longer returns them); ``prune`` with
``keep_latest`` rewrites each session with only its latest checkpoint (its values as full
blobs) and that checkpoint's writes: written completely under a side id first, then put in
place, so a crash in between leaves the side copy, which the next open restores.

One writer: a saver opens a thread's session as its writer on first use and holds it
until :meth:`SessionTreeSaver.close`; savers of one repository in one process share it.
A saver in another process waits up to ``lock_timeout`` seconds for it, then gets
``SessionError("locked")``: one history per thread, never two diverging ones.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..errors import SessionError
from ..model.entries import CustomEntry
from ._common import (
    DEFAULT_LOCK_TIMEOUT,
    _open_or_create,
    _repo_key,
    as_async_repo,
    import_framework,
    mapped_id,
)

import_framework("langgraph.checkpoint.base", "langgraph", "SessionTreeSaver")

from langgraph.checkpoint.base import (  # noqa: E402
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.serde.base import SerializerProtocol

    from ..aio import AsyncSessionRepo
    from ..repo import SessionRepo
    from ..session import Session

__all__ = ["SessionTreeSaver"]

PREFIX: Final = "langgraph-"
"""Every session this adapter writes has an id starting so."""
_SIDE_PREFIX: Final = "langgraph.prune-"
"""The id of a session being rewritten by ``prune`` while it is put in place."""

CHECKPOINT: Final = "langgraph/checkpoint"
WRITES: Final = "langgraph/writes"
DELETED: Final = "langgraph/deleted"

_EMPTY: Final = object()
_RECENT = 8  # lists kept whole per thread for the next step's prefix check


def thread_prefix(thread_id: str) -> str:
    """The start of the session ids of ``thread_id``'s namespaces."""
    return mapped_id(PREFIX, [thread_id]) + "-"


def session_id_for(thread_id: str, checkpoint_ns: str = "") -> str:
    """The session id of a thread's namespace.

    >>> session_id_for("t1")[:10]
    'langgraph-'
    """
    return mapped_id(thread_prefix(thread_id), [checkpoint_ns])


# Bytes in JSON. Base64 costs 4/3 of any payload, but serde's msgpack of text is mostly
# printable ASCII, which can stay as it is: ``["s", text]`` keeps printable ASCII (except
# ``"`` and ``\``) and maps every other byte b to U+0100+b, two bytes of UTF-8 that need no
# escape and are never NUL (which PostgreSQL's text cannot hold). The shorter form is
# stored, so message text stays readable (and searchable) in the session.
_PLAIN = bytes(b for b in range(0x20, 0x7F) if b not in (0x22, 0x5C))
# Per byte, the high byte of its UTF-16 code unit: 0 keeps it, 1 maps it to U+0100+b. The
# text is built and read back through UTF-16-LE (low byte = the byte itself), all in C.
_HIGH = bytes(0 if b in _PLAIN else 1 for b in range(256))


def _pack_bytes(raw: bytes) -> Any:
    """``raw`` as a JSON value: base64 text, or ``["s", text]`` (see above)."""
    mapped = len(raw.translate(None, _PLAIN))
    if len(raw) + mapped + 8 < (len(raw) + 2) // 3 * 4:
        units = bytearray(2 * len(raw))
        units[0::2] = raw
        units[1::2] = raw.translate(_HIGH)
        return ["s", units.decode("utf-16-le")]
    return base64.b64encode(raw).decode("ascii")


def _unpack_bytes(packed: Any) -> bytes:
    if isinstance(packed, str):
        return base64.b64decode(packed)
    text: str = packed[1]
    return text.encode("utf-16-le")[0::2]


# ------------------------------------------------------------------------ one session


Blob = tuple[str, str]
"""A stored channel value: (the checkpoint entry holding it, the channel)."""


class _Checkpoint:
    """What a session holds of one checkpoint (its entry's data, decoded lazily)."""

    __slots__ = ("data", "metadata", "parent", "refs", "versions")

    def __init__(self, data: dict[str, Any], refs: dict[str, str]) -> None:
        self.data = data
        self.parent: str | None = data.get("parent")
        self.refs = refs  # channel -> the checkpoint entry holding the value it sees
        versions = data.get("versions")
        if versions is None:  # not repeated when the checkpoint's own fields are JSON
            packed = data["checkpoint"]
            versions = packed["j"].get("channel_versions", {}) if "j" in packed else {}
        self.versions: dict[str, Any] = versions
        self.metadata: Any = _EMPTY


class _Thread:
    """One thread namespace's session and its index: checkpoints, blobs, writes.

    Built from the session's entries on open (one pass), then kept up to date by the
    saver's own appends (it is the session's only writer).
    """

    def __init__(self, session: Session, thread_id: str, ns: str) -> None:
        self.session = session
        self.thread_id = thread_id
        self.ns = ns
        self.lock = threading.RLock()
        self.closed = False
        self.refs = 0
        self.checkpoints: dict[str, _Checkpoint] = {}
        self.blobs: dict[Blob, dict[str, Any]] = {}
        self.by_version: dict[tuple[str, Any], str] = {}
        # checkpoint id -> {(task_id, idx): (task_path, task_id, idx, channel, tag, b64)};
        # kept for a deleted checkpoint too: a later list delta may point into them.
        self.writes: dict[str, dict[tuple[str, int], tuple[str, str, int, str, str, str]]] = {}
        self.tails: dict[str, str] = {}  # checkpoint id -> last entry of its segment
        self.items: dict[Blob, list[Any]] = {}  # a list blob's own items, decoded
        self.recent: dict[Blob, list[Any]] = {}  # whole lists of the last few blobs
        self.whole: list[Any] = []  # the list last built from deltas ...
        self.whole_at: dict[Blob, int] = {}  # ... and each blob of its chain's length
        # Writes for a checkpoint not put yet: LangGraph's default ("async") durability
        # saves a checkpoint in the background while the next step's tasks put their
        # writes, so they can come first. Indexed at once, appended right after their
        # checkpoint, so the thread's tree stays one chain per branch.
        self.pending: dict[str, list[dict[str, Any]]] = {}
        self.latest: str | None = None
        for entry in session.storage.get_entries("custom"):
            if isinstance(entry, CustomEntry) and entry.custom_type.startswith("langgraph/"):
                self._index(entry.id, entry.custom_type, entry.data)
        self._reset_latest()

    def _index(self, entry_id: str, kind: str, data: Any) -> None:
        if kind == CHECKPOINT:
            cid = data["id"]
            for channel, blob in (data.get("blobs") or {}).items():
                self.blobs[(entry_id, channel)] = blob
                self.by_version[(channel, blob["v"])] = entry_id
            refs = {ch: ref or entry_id for ch, ref in data["refs"].items()}
            self.checkpoints[cid] = _Checkpoint(data, refs)
            self.tails[cid] = entry_id
        elif kind == WRITES:
            cid = data["cp"]
            rows = self.writes.setdefault(cid, {})
            for idx, channel, tag, payload in data["w"]:
                rows[(data["task"], idx)] = (data["path"], data["task"], idx, channel, tag, payload)
            if entry_id:
                self.tails[cid] = entry_id
        elif kind == DELETED:
            for cid in data["ids"]:
                self.checkpoints.pop(cid, None)

    def _reset_latest(self) -> None:
        self.latest = max(self.checkpoints) if self.checkpoints else None

    def append(self, parent: str | None, kind: str, data: Any) -> str:
        """Appends a custom entry under ``parent`` and indexes it."""
        session = self.session
        if session.get_leaf_id() != parent:
            session.move_to(parent)
        entry_id = session.append_custom_entry(kind, data)
        self._index(entry_id, kind, data)
        return entry_id

    def flush(self, cid: str) -> None:
        """Appends the writes held for checkpoint ``cid`` under it."""
        for data in self.pending.pop(cid, ()):
            self.append(self.tails.get(cid) or self.session.get_leaf_id(), WRITES, data)

    def close(self) -> None:
        if not self.closed:
            for cid in list(self.pending):
                self.flush(cid)
        self.closed = True
        self.session.close()

    # -- values ----------------------------------------------------------------------

    def is_list(self, blob: Blob) -> bool:
        data = self.blobs.get(blob)
        return data is not None and ("base" in data or bool(data.get("l")))

    def decoded_items(self, blob: Blob, serde: SerializerProtocol) -> list[Any]:
        """The items a list blob holds itself (all of a full one, the added ones of a
        delta), decoded once: the lists built from them share them."""
        items = self.items.get(blob)
        if items is None:
            data = self.blobs[blob]
            if "src" in data:  # the items are the values of these writes
                rows = self.writes[data["wcp"]]
                items = []
                for task, idx in data["src"]:
                    row = rows[(task, idx)]
                    items.extend(serde.loads_typed((row[4], _unpack_bytes(row[5]))))
            elif "base" in data:
                items = [serde.loads_typed((tag, _unpack_bytes(b))) for tag, b in data["items"]]
            else:
                items = list(serde.loads_typed((data["t"], _unpack_bytes(data["b"]))))
            self.items[blob] = items
        return items

    def list_of(self, blob: Blob, serde: SerializerProtocol) -> list[Any]:
        """The whole list a list blob stands for (a new list object).

        The list last built this way is kept with the length of every blob on its chain,
        so reading a history newest first slices it instead of walking the chain again.
        """
        chain: list[Blob] = []
        current = blob
        while True:
            n = self.whole_at.get(current)
            if n is not None:
                out = self.whole[:n]
                if not chain:
                    return out
                # A branch off the kept chain: keep what the two share.
                self.whole_at = {b: m for b, m in self.whole_at.items() if m <= n}
                break
            recent = self.recent.get(current)
            if recent is not None:
                out = list(recent)
            else:
                data = self.blobs[current]
                if "base" in data:
                    chain.append(current)
                    current = (data["base"], current[1])
                    continue
                out = list(self.decoded_items(current, serde))
            self.whole_at = {current: len(out)}
            break
        for delta in reversed(chain):
            out.extend(self.decoded_items(delta, serde))
            self.whole_at[delta] = len(out)
        self.whole = out
        return list(out)

    def remember(self, blob: Blob, value: list[Any]) -> None:
        recent = self.recent
        recent[blob] = list(value)  # a copy: a reducer may change its list in place
        if len(recent) > _RECENT:
            del recent[next(iter(recent))]

    def value_of(self, blob: Blob, serde: SerializerProtocol) -> Any:
        data = self.blobs.get(blob)
        if data is None or data.get("t") == "empty":
            return _EMPTY
        if "base" in data or data.get("l"):
            return self.list_of(blob, serde)
        return serde.loads_typed((data["t"], _unpack_bytes(data["b"])))


def _msgpack_array(raw: bytes) -> tuple[int, int] | None:
    """(length, header size) of the msgpack array ``raw`` starts with, else ``None``."""
    if not raw:
        return None
    first = raw[0]
    if 0x90 <= first <= 0x9F:
        return first & 0x0F, 1
    if first == 0xDC and len(raw) >= 3:
        return int.from_bytes(raw[1:3], "big"), 3
    if first == 0xDD and len(raw) >= 5:
        return int.from_bytes(raw[1:5], "big"), 5
    return None


# ------------------------------------------------------------- the process-wide registry

_registry: dict[tuple[Any, ...], _Thread] = {}
_registry_lock = threading.Lock()


def _header_check(session: Session, thread_id: str, ns: str) -> None:
    header = session.storage.get_metadata()
    mine = (header.metadata or {}).get("langgraph")
    if not isinstance(mine, dict) or mine != {"thread_id": thread_id, "checkpoint_ns": ns}:
        session.close()
        raise SessionError(
            "invalid_argument",
            f"session {header.id!r} does not hold LangGraph thread "
            f"{thread_id!r} (namespace {ns!r}): its header says {mine!r}",
        )


def _json_or_typed(value: Any, serde: SerializerProtocol) -> dict[str, Any]:
    """``{"j": value}`` when ``value`` comes back from JSON equal (and of the same types),
    else ``{"t": tag, "b": base64}`` through ``serde``."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        if json.loads(text) == value and "\ud800" not in text:
            return {"j": value}
    except (TypeError, ValueError):
        pass
    tag, data = serde.dumps_typed(value)
    return {"t": tag, "b": _pack_bytes(data)}


def _from_json_or_typed(packed: dict[str, Any], serde: SerializerProtocol) -> Any:
    if "j" in packed:
        return json.loads(json.dumps(packed["j"]))  # a copy the caller may change
    return serde.loads_typed((packed["t"], _unpack_bytes(packed["b"])))


# ------------------------------------------------------------------------- the saver


class SessionTreeSaver(BaseCheckpointSaver[Any]):
    """LangGraph's ``BaseCheckpointSaver`` over any sessiontree repository (JSONL
    directory, PostgreSQL, in memory): one session per thread and namespace, one entry
    per checkpoint, channel values stored once per version (list growth as deltas).

    Args:
        repo: a :class:`~sessiontree.SessionRepo` (or ``AsyncSessionRepo``).
        serde: LangGraph's serializer for values (default: LangGraph's ``JsonPlusSerializer``).
        lock_timeout: seconds to wait for a thread another process is writing before
            ``SessionError("locked")``.

    >>> from sessiontree import InMemorySessionRepo
    >>> saver = SessionTreeSaver(InMemorySessionRepo())
    >>> saver.get_tuple({"configurable": {"thread_id": "t"}}) is None
    True
    >>> saver.close()
    """

    def __init__(
        self,
        repo: SessionRepo | AsyncSessionRepo,
        *,
        serde: SerializerProtocol | None = None,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        super().__init__(serde=serde)
        if (
            isinstance(lock_timeout, bool)
            or not isinstance(lock_timeout, (int, float))
            or not lock_timeout >= 0
        ):
            raise SessionError("invalid_argument", "lock_timeout must be a number >= 0")
        self.repo: SessionRepo = as_async_repo(repo).repo
        self.lock_timeout = float(lock_timeout)
        self._key = _repo_key(self.repo)
        self._held: dict[str, _Thread] = {}
        self._lock = threading.RLock()
        self._closed = False

    def __repr__(self) -> str:
        return f"SessionTreeSaver({self.repo!r}, threads_open={len(self._held)})"

    # -- sessions --------------------------------------------------------------------

    def _thread(self, thread_id: str, ns: str, *, create: bool) -> _Thread | None:
        """The session of ``thread_id``'s namespace ``ns`` (opened now, or created when
        ``create``), or ``None`` when it does not exist."""
        if self._closed:
            raise SessionError("closed", "this SessionTreeSaver is closed")
        sid = session_id_for(thread_id, ns)
        with self._lock:
            held = self._held.get(sid)
            if held is not None and not held.closed:
                return held
            key = (*self._key, sid)
            with _registry_lock:
                shared = _registry.get(key)
                if shared is not None and not shared.closed:
                    shared.refs += 1
                    self._held[sid] = shared
                    return shared
            session = self._open(sid, thread_id, ns, create=create)
            if session is None:
                return None
            opened = _Thread(session, thread_id, ns)
            opened.refs = 1
            with _registry_lock:
                _registry[key] = opened
            self._held[sid] = opened
            return opened

    def _open(self, sid: str, thread_id: str, ns: str, *, create: bool) -> Session | None:
        meta = {"langgraph": {"thread_id": thread_id, "checkpoint_ns": ns}}
        try:
            session = _open_or_create(self.repo, sid, None, self.lock_timeout)
        except SessionError as exc:
            if exc.code != "not_found":
                raise
            if self._restore_side_copy(sid):
                return self._open(sid, thread_id, ns, create=create)
            if not create:
                return None
            session = _open_or_create(self.repo, sid, {"metadata": meta}, self.lock_timeout)
        _header_check(session, thread_id, ns)
        return session

    def _drop(self, sid: str) -> None:
        """Closes session ``sid`` for every saver of this process (before deleting it)."""
        with self._lock:
            self._held.pop(sid, None)
            with _registry_lock:
                shared = _registry.pop((*self._key, sid), None)
            if shared is not None:
                with shared.lock:
                    shared.close()

    def _session_ids(self, thread_id: str | None) -> builtins.list[str]:
        """The sessions of a thread's namespaces (every LangGraph thread's for ``None``)."""
        prefix = PREFIX if thread_id is None else thread_prefix(thread_id)
        return sorted(m.id for m in self.repo.list() if m.id.startswith(prefix))

    def _threads(self, thread_id: str | None) -> builtins.list[_Thread]:
        out = []
        for sid in self._session_ids(thread_id):
            with self._lock:
                held = self._held.get(sid)
            if held is None or held.closed:
                held = self._thread_by_sid(sid)
            if held is not None:
                out.append(held)
        return out

    def _thread_by_sid(self, sid: str) -> _Thread | None:
        """Opens a session found by listing: its header names its thread and namespace."""
        with _registry_lock:
            shared = _registry.get((*self._key, sid))
        if shared is not None and not shared.closed:  # another saver here holds it
            return self._thread(shared.thread_id, shared.ns, create=False)
        try:
            session = _open_or_create(self.repo, sid, None, self.lock_timeout)
        except SessionError as exc:
            if exc.code == "not_found":
                return None
            raise
        mine = (session.storage.get_metadata().metadata or {}).get("langgraph")
        session.close()
        if (
            not isinstance(mine, dict)
            or session_id_for(mine.get("thread_id", ""), mine.get("checkpoint_ns", "")) != sid
        ):
            return None
        return self._thread(mine["thread_id"], mine["checkpoint_ns"], create=False)

    def _delete_session(self, sid: str) -> None:
        self._drop(sid)
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                self.repo.delete(sid)
                return
            except SessionError as exc:
                if exc.code == "not_found":
                    return
                if exc.code != "locked" or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def close(self) -> None:
        """Lets go of every session this saver holds (the last holder closes it)."""
        with self._lock:
            self._closed = True
            held, self._held = self._held, {}
        for sid, thread in held.items():
            with _registry_lock:
                thread.refs -= 1
                last = thread.refs <= 0
                key = (*self._key, sid)
                if last and _registry.get(key) is thread:
                    del _registry[key]
            if last and not thread.closed:
                with thread.lock:
                    thread.close()

    def __enter__(self) -> SessionTreeSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> SessionTreeSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    # -- reading ---------------------------------------------------------------------

    def _metadata(self, thread: _Thread, cp: _Checkpoint) -> dict[str, Any]:
        if cp.metadata is _EMPTY:
            cp.metadata = _from_json_or_typed(cp.data["metadata"], self.serde)
        return dict(cp.metadata)

    def _tuple(self, thread: _Thread, cid: str) -> CheckpointTuple:
        cp = thread.checkpoints[cid]
        serde = self.serde
        checkpoint = _from_json_or_typed(cp.data["checkpoint"], serde)
        values: dict[str, Any] = {}
        for channel, ref in cp.refs.items():
            value = thread.value_of((ref, channel), serde)
            if value is not _EMPTY:
                values[channel] = value
        checkpoint["channel_values"] = values
        writes = sorted(
            thread.writes.get(cid, {}).values(), key=lambda w: writes_sort_key(w[0], w[1], w[2])
        )
        pending = [(w[1], w[3], serde.loads_typed((w[4], _unpack_bytes(w[5])))) for w in writes]
        conf = {"thread_id": thread.thread_id, "checkpoint_ns": thread.ns}
        return CheckpointTuple(
            config={"configurable": {**conf, "checkpoint_id": cid}},
            checkpoint=checkpoint,
            metadata=self._metadata(thread, cp),  # type: ignore[arg-type]
            parent_config=(
                {"configurable": {**conf, "checkpoint_id": cp.parent}} if cp.parent else None
            ),
            pending_writes=pending,
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``, else the thread's
        latest), with its pending writes in ``writes_sort_key`` order; ``None`` if none."""
        conf = config["configurable"]
        thread = self._thread(conf["thread_id"], conf.get("checkpoint_ns", "") or "", create=False)
        if thread is None:
            return None
        with thread.lock:
            cid = get_checkpoint_id(config) or thread.latest
            if cid is None or cid not in thread.checkpoints:
                return None
            return self._tuple(thread, cid)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of ``config``'s thread (and namespace, when it names
        one; every thread for ``None``), whose metadata has ``filter``'s items, older
        than ``before``'s checkpoint, at most ``limit``."""
        conf = (config or {}).get("configurable") or {}
        thread_id = conf.get("thread_id")
        if thread_id is not None and conf.get("checkpoint_ns") is not None:
            one = self._thread(thread_id, conf["checkpoint_ns"], create=False)
            threads = [] if one is None else [one]
        else:
            threads = self._threads(thread_id)
        only = conf.get("checkpoint_id")
        cursor = get_checkpoint_id(before) if before else None
        found: builtins.list[tuple[str, _Thread]] = []
        for thread in threads:
            with thread.lock:
                found.extend((cid, thread) for cid in thread.checkpoints)
        found.sort(key=lambda item: item[0], reverse=True)
        count = 0
        for cid, thread in found:
            if limit is not None and count >= limit:
                return
            if (only is not None and cid != only) or (cursor is not None and cid >= cursor):
                continue
            with thread.lock:
                cp = thread.checkpoints.get(cid)
                if cp is None:
                    continue
                if filter:
                    metadata = self._metadata(thread, cp)
                    if any(metadata.get(k) != v for k, v in filter.items()):
                        continue
                item = self._tuple(thread, cid)
            count += 1
            yield item

    # -- writing ---------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Stores a checkpoint under its parent (``config``'s ``checkpoint_id``): one entry
        holding a blob for each channel in ``new_versions`` (for a list that extends its
        parent's, the added items, or which of the parent's writes they are) and
        referencing the entries holding the other channels' values."""
        conf = config["configurable"]
        thread_id = conf["thread_id"]
        ns = conf.get("checkpoint_ns", "") or ""
        parent_id: str | None = conf.get("checkpoint_id")
        serde = self.serde
        thread = self._thread(thread_id, ns, create=True)
        assert thread is not None
        with thread.lock:
            parent = thread.checkpoints.get(parent_id) if parent_id else None
            anchor = thread.tails.get(parent_id) if parent_id else None
            if parent_id and anchor is None:
                anchor = thread.session.get_leaf_id()
            values = checkpoint["channel_values"]
            blobs: dict[str, dict[str, Any]] = {}
            lists: dict[str, builtins.list[Any]] = {}
            for channel, version in new_versions.items():
                data: dict[str, Any] = {"v": version}
                blobs[channel] = data
                if channel not in values:
                    data["t"] = "empty"
                    continue
                value = values[channel]
                base = parent.refs.get(channel) if parent is not None else None
                if type(value) is list:
                    lists[channel] = value
                    if (
                        base is not None
                        and thread.is_list((base, channel))
                        and self._delta(thread, (base, channel), parent_id, value, data)
                    ):
                        continue
                tag, raw = serde.dumps_typed(value)
                data["t"] = tag
                data["b"] = _pack_bytes(raw)
                if type(value) is list:
                    data["l"] = 1
            refs: dict[str, str] = {}
            for channel, version in checkpoint["channel_versions"].items():
                if channel in blobs:
                    refs[channel] = ""  # this entry
                elif (
                    parent is not None
                    and parent.versions.get(channel) == version
                    and channel in parent.refs
                ):
                    refs[channel] = parent.refs[channel]
                elif (channel, version) in thread.by_version:
                    refs[channel] = thread.by_version[(channel, version)]
            skeleton = {k: v for k, v in checkpoint.items() if k != "channel_values"}
            packed = _json_or_typed(skeleton, serde)
            entry = {
                "id": checkpoint["id"],
                "parent": parent_id,
                "checkpoint": packed,
                "metadata": _json_or_typed(
                    get_serializable_checkpoint_metadata(config, metadata), serde
                ),
                "refs": refs,
                "blobs": blobs,
            }
            if "j" not in packed:
                entry["versions"] = dict(checkpoint["channel_versions"])
            entry_id = thread.append(anchor, CHECKPOINT, entry)
            for channel, value in lists.items():
                thread.remember((entry_id, channel), value)
            thread.flush(checkpoint["id"])
            if thread.latest is None or checkpoint["id"] > thread.latest:
                thread.latest = checkpoint["id"]
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def _delta(
        self,
        thread: _Thread,
        base: Blob,
        parent_id: str | None,
        value: builtins.list[Any],
        data: dict[str, Any],
    ) -> bool:
        """Fills ``data`` as a delta over the list blob ``base`` when ``value`` starts with
        that list (checked: identity, then ``==``): the items added, or, when they are
        exactly the values of the parent checkpoint's writes to this channel (a node
        returning ``{"messages": [...]}``; compared as serialised bytes), which writes. A
        message is then stored once, in the write that produced it. False otherwise."""
        known = thread.list_of(base, self.serde)
        n = len(known)
        try:
            same = len(value) >= n and value[:n] == known
        except Exception:  # an item whose == raises or is not a bool: store it whole
            same = False
        if same is not True:
            return False
        added = [self.serde.dumps_typed(item) for item in value[n:]]
        data["base"] = base[0]
        src = self._from_writes(thread, parent_id, base[1], added) if added else None
        if src is not None:
            data["wcp"] = parent_id
            data["src"] = src
        else:
            data["items"] = [[tag, _pack_bytes(raw)] for tag, raw in added]
        return True

    @staticmethod
    def _from_writes(
        thread: _Thread,
        parent_id: str | None,
        channel: str,
        added: builtins.list[tuple[str, bytes]],
    ) -> builtins.list[builtins.list[Any]] | None:
        """Which of checkpoint ``parent_id``'s writes to ``channel``, in the order LangGraph
        applies them, hold exactly the items ``added`` (their bytes), else ``None``."""
        rows = thread.writes.get(parent_id or "")
        if not rows:
            return None
        mine = sorted(
            (row for row in rows.values() if row[3] == channel),
            key=lambda row: writes_sort_key(row[0], row[1], row[2]),
        )
        out: builtins.list[builtins.list[Any]] = []
        pos = 0
        for _path, task, idx, _channel, tag, payload in mine:
            raw = _unpack_bytes(payload)
            head = _msgpack_array(raw) if tag == "msgpack" else None
            if head is None:
                return None
            count, size = head
            part = added[pos : pos + count]
            if len(part) != count or any(t != tag for t, _ in part):
                return None
            if raw[size:] != b"".join(b for _, b in part):
                return None
            out.append([task, idx])
            pos += count
        return out if pos == len(added) else None

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Stores a task's writes under their checkpoint; a write already stored for the
        same task and index is kept (special channels, such as errors, are replaced)."""
        conf = config["configurable"]
        cid = conf["checkpoint_id"]
        thread = self._thread(conf["thread_id"], conf.get("checkpoint_ns", "") or "", create=True)
        assert thread is not None
        with thread.lock:
            stored = thread.writes.get(cid, {})
            rows = []
            for n, (channel, value) in enumerate(writes):
                idx = WRITES_IDX_MAP.get(channel, n)
                if idx >= 0 and (task_id, idx) in stored:
                    continue
                tag, raw = self.serde.dumps_typed(value)
                rows.append([idx, channel, tag, _pack_bytes(raw)])
            if not rows:
                return
            data = {"cp": cid, "task": task_id, "path": task_path, "w": rows}
            if cid in thread.checkpoints:
                thread.append(thread.tails[cid], WRITES, data)
            else:
                thread._index("", WRITES, data)
                thread.pending.setdefault(cid, []).append(data)

    # -- deleting, copying, pruning -----------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Deletes the thread's sessions (every namespace)."""
        for sid in self._session_ids(thread_id):
            self._delete_session(sid)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Removes the checkpoints (and their writes) whose metadata's ``run_id`` is one of
        ``run_ids``, in every thread: a ``langgraph/deleted`` entry names them."""
        wanted = set(run_ids)
        if not wanted:
            return
        for thread in self._threads(None):
            with thread.lock:
                ids = [
                    cid
                    for cid, cp in thread.checkpoints.items()
                    if self._metadata(thread, cp).get("run_id") in wanted
                ]
                if ids:
                    thread.append(thread.session.get_leaf_id(), DELETED, {"ids": sorted(ids)})
                    thread._reset_latest()

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copies every namespace of a thread to a new thread: each session's entries,
        with their ids, into a new session whose header names the source as its
        ``parent_session`` (a fork).

        Raises:
            ValueError: the target thread already has checkpoints.
        """
        if self._session_ids(target_thread_id):
            raise ValueError(f"thread {target_thread_id!r} already exists")
        for source in self._threads(source_thread_id):
            with source.lock:
                entries = source.session.storage.get_entries()
                source_id = source.session.id
                ns = source.ns
            target_id = session_id_for(target_thread_id, ns)
            meta = {"langgraph": {"thread_id": target_thread_id, "checkpoint_ns": ns}}
            target = self.repo.create(session_id=target_id, metadata=meta, parent_session=source_id)
            try:
                _copy_entries(entries, target)
            finally:
                target.close()

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"``: each namespace keeps only its latest checkpoint (its values
        written whole) and that checkpoint's writes; ``"delete"``: the threads go.

        Raises:
            ValueError: an unknown strategy.
        """
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            for thread in self._threads(thread_id):
                self._keep_latest(thread)

    def _keep_latest(self, thread: _Thread) -> None:
        serde = self.serde
        with thread.lock:
            cid = thread.latest
            sid = thread.session.id
            side_id = _SIDE_PREFIX + sid[len(PREFIX) :]
            meta = {"langgraph": {"thread_id": thread.thread_id, "checkpoint_ns": thread.ns}}
            with contextlib.suppress(SessionError):
                self.repo.delete(side_id)  # a side copy an earlier prune left
            side = self.repo.create(session_id=side_id, metadata=meta)
            try:
                if cid is not None:
                    cp = thread.checkpoints[cid]
                    blobs: dict[str, dict[str, Any]] = {}
                    for channel, ref in cp.refs.items():
                        data = thread.blobs.get((ref, channel))
                        if data is None:
                            continue
                        if "base" in data:
                            value = thread.list_of((ref, channel), serde)
                            tag, raw = serde.dumps_typed(value)
                            data = {"v": data["v"], "t": tag, "b": _pack_bytes(raw), "l": 1}
                        blobs[channel] = data
                    refs = {ch: "" for ch in cp.refs if ch in blobs}
                    side.append_custom_entry(CHECKPOINT, {**cp.data, "refs": refs, "blobs": blobs})
                    for row in thread.writes.get(cid, {}).values():
                        path, task, idx, channel, tag, payload = row
                        side.append_custom_entry(
                            WRITES,
                            {
                                "cp": cid,
                                "task": task,
                                "path": path,
                                "w": [[idx, channel, tag, payload]],
                            },
                        )
            finally:
                side.close()
        self._delete_session(sid)
        self._restore_side_copy(sid)

    def _restore_side_copy(self, sid: str) -> bool:
        """Puts a pruned session's side copy in place of ``sid`` (deleted before); False
        when there is none. Also what an open does after a crash in between."""
        side_id = _SIDE_PREFIX + sid[len(PREFIX) :]
        try:
            side = _open_or_create(self.repo, side_id, None, self.lock_timeout)
        except SessionError as exc:
            if exc.code == "not_found":
                return False
            raise
        try:
            entries = side.storage.get_entries()
            meta = side.storage.get_metadata().metadata
        finally:
            side.close()
        target = self.repo.create(session_id=sid, metadata=meta)
        try:
            _copy_entries(entries, target)
        finally:
            target.close()
        self.repo.delete(side_id)
        return True

    # -- async: the same work in a worker thread ------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple` in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list` in a worker thread."""
        items = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`put` in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`put_writes` in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread` in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`delete_for_runs` in a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`copy_thread` in a worker thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """:meth:`prune` in a worker thread."""
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))


def _copy_entries(entries: Sequence[Any], target: Session) -> None:
    """Appends ``entries`` (with their ids) to ``target``; an entry whose parent is not
    among them becomes a root."""
    import dataclasses

    storage = target.storage
    seen: set[str] = set()
    for entry in entries:
        if entry.parent_id is not None and entry.parent_id not in seen:
            entry = dataclasses.replace(entry, parent_id=None)
        storage.append_entry(entry)
        seen.add(entry.id)
