"""A small pure-Python ``SessionStorage`` (entries in a dict), as a user would write one
for another backend, and a "database" of them so it can be reopened.

It implements only the abstract methods; every optional fast path is the interface's
default. The conformance kit must pass it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import sessiontree as st


class DictSessionStorage(st.SessionStorage):
    """One session's entries in an insertion-ordered dict, kept in ``database`` under the
    session id (so a new object over the same id "reopens" it)."""

    def __init__(self, database: dict[str, dict[str, object]], session_id: str) -> None:
        self._db = database
        self._doc = database[session_id]
        self._closed = False

    @classmethod
    def create(
        cls, database: dict[str, dict[str, object]], header: st.SessionHeader
    ) -> DictSessionStorage:
        database[header.id] = {"header": header, "entries": {}}
        return cls(database, header.id)

    @property
    def _entries(self) -> dict[str, st.SessionTreeEntry]:
        return self._doc["entries"]  # type: ignore[return-value]

    def _check(self) -> None:
        if self._closed:
            raise st.SessionError("closed", "the storage is closed")

    def _require(self, entry_id: str) -> st.SessionTreeEntry:
        entry = self._entries.get(entry_id)
        if entry is None:
            raise st.SessionError("not_found", f"entry {entry_id!r} not found")
        return entry

    def get_metadata(self) -> st.SessionHeader:
        self._check()
        return self._doc["header"]  # type: ignore[return-value]

    def get_leaf_id(self) -> str | None:
        self._check()
        leaf: str | None = None
        for e in self._entries.values():  # FORMAT.md: replay from the top
            leaf = e.target_id if isinstance(e, st.LeafEntry) else e.id
        return leaf

    def set_leaf_id(self, entry_id: str | None) -> None:
        self._check()
        if entry_id is not None:
            self._require(entry_id)
        self.append_entry(
            st.LeafEntry(
                id=self.create_entry_id(),
                parent_id=self.get_leaf_id(),
                timestamp="2026-01-01T00:00:00.000Z",
                target_id=entry_id,
            )
        )

    def create_entry_id(self) -> str:
        self._check()
        while True:
            candidate = secrets.token_hex(4)
            if candidate not in self._entries:
                return candidate

    def append_entry(self, entry: st.SessionTreeEntry) -> None:
        self._check()
        if entry.id in self._entries:
            raise st.SessionError("duplicate_id", f"entry id {entry.id!r} already exists")
        if entry.parent_id is not None:
            self._require(entry.parent_id)
        self._entries[entry.id] = entry

    def get_entry(self, entry_id: str) -> st.SessionTreeEntry | None:
        self._check()
        return self._entries.get(entry_id)

    def find_entries(self, type: str) -> list[st.SessionTreeEntry]:
        self._check()
        return [e for e in self._entries.values() if e.type == type]

    def get_label(self, entry_id: str) -> str | None:
        self._require(entry_id)
        label = None
        for e in self.find_entries("label"):
            if isinstance(e, st.LabelEntry) and e.target_id == entry_id:
                label = e.label
        return label

    def get_session_name(self) -> str | None:
        name = None
        for e in self.find_entries("session_info"):
            if isinstance(e, st.SessionInfoEntry):
                name = e.name
        return name

    def get_path_to_root(self, entry_id: str | None) -> list[st.SessionTreeEntry]:
        self._check()
        out = []
        cur = entry_id
        while cur is not None:
            entry = self._require(cur)
            out.append(entry)
            cur = entry.parent_id
        out.reverse()
        return out

    def get_path_to_root_or_compaction(self, leaf_id: str | None) -> list[st.SessionTreeEntry]:
        path = self.get_path_to_root(leaf_id)
        for i in range(len(path) - 1, -1, -1):
            c = path[i]
            if isinstance(c, st.CompactionEntry):
                if c.retained_tail is None and c.first_kept_entry_id is not None:
                    for j in range(i):
                        if path[j].id == c.first_kept_entry_id:
                            return path[j:]
                return path[i:]
        return path

    def get_children(self, entry_id: str | None) -> list[st.SessionTreeEntry]:
        self._check()
        if entry_id is not None:
            self._require(entry_id)
        return [e for e in self._entries.values() if e.parent_id == entry_id]

    def get_entries(
        self,
        type: str | None = None,
        *,
        since: str | None = None,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[st.SessionTreeEntry]:
        self._check()
        if limit is not None and limit < 0:
            raise st.SessionError("invalid_argument", f"limit must not be negative ({limit})")
        entries = list(self._entries.values())
        if since is not None:
            self._require(since)
            entries = entries[[e.id for e in entries].index(since) + 1 :]
        if type is not None:
            entries = [e for e in entries if e.type == type]
        if reverse:
            entries.reverse()
        return entries if limit is None else entries[:limit]

    def get_session_stats(self) -> st.SessionStats:
        self._check()
        roles = {"user": 0, "assistant": 0, "tool_result": 0}
        tokens = [0] * 5
        cost = 0.0
        messages = 0
        for e in self._entries.values():
            usage = None
            if isinstance(e, st.MessageEntry):
                messages += 1
                roles[e.message.role] = roles.get(e.message.role, 0) + 1
                if isinstance(e.message, st.AssistantMessage):
                    usage = e.message.usage
            elif isinstance(e, (st.CompactionEntry, st.BranchSummaryEntry)):
                usage = e.usage
            if usage is not None:
                values = (u := usage).input, u.output, u.cache_read, u.cache_write, u.total_tokens
                tokens = [t + v for t, v in zip(tokens, values, strict=True)]
                cost += usage.cost.total
        return st.SessionStats(
            len(self._entries),
            messages,
            roles["user"],
            roles["assistant"],
            roles["tool_result"],
            *tokens,
            cost,
        )

    def __len__(self) -> int:
        self._check()
        return len(self._entries)

    def close(self) -> None:
        self._closed = True


def dict_factories() -> tuple[
    Callable[[st.SessionHeader], DictSessionStorage],
    Callable[[st.SessionStorage], DictSessionStorage],
]:
    """``(new, reopen)`` for the kit, over one fresh database."""
    database: dict[str, dict[str, object]] = {}

    def new(header: st.SessionHeader) -> DictSessionStorage:
        return DictSessionStorage.create(database, header)

    def reopen(storage: st.SessionStorage) -> DictSessionStorage:
        session_id = _sid(storage)  # read before closing: a closed storage answers nothing
        storage.close()
        return DictSessionStorage(database, session_id)

    return new, reopen


def _sid(storage: st.SessionStorage) -> str:
    assert isinstance(storage, DictSessionStorage)
    header = storage._doc["header"]
    assert isinstance(header, st.SessionHeader)
    return header.id
