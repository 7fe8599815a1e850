"""A pure-Python ``SessionStorage`` (entries in a dict) works with ``Session``.

The storage below is what a user writing another backend would write: it implements the
abstract interface and nothing else. Driven through ``Session`` it must give the same
branches, contexts, trees and stats as ``InMemorySessionStorage`` for the same operations.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

import sessiontree as st
from sessiontree._util import now_iso


class DictSessionStorage(st.SessionStorage):
    """Entries in an insertion-ordered dict; ids from a counter."""

    def __init__(self, header: st.SessionHeader | None = None) -> None:
        self._header = header or st.SessionHeader.generate()
        self._entries: dict[str, st.SessionTreeEntry] = {}
        self._leaf: str | None = None
        self._labels: dict[str, str] = {}
        self._name: str | None = None
        self._closed = False
        self._ids = itertools.count(1)
        # Leaf entries get ids of their own series, as the engine's do.
        self._leaf_ids = itertools.count(1)

    def _check(self) -> None:
        if self._closed:
            raise st.SessionError("closed", "closed")

    def _require(self, entry_id: str) -> st.SessionTreeEntry:
        entry = self._entries.get(entry_id)
        if entry is None:
            raise st.SessionError("not_found", f"entry {entry_id!r} not found")
        return entry

    def get_metadata(self) -> st.SessionHeader:
        self._check()
        return self._header

    def get_leaf_id(self) -> str | None:
        self._check()
        return self._leaf

    def set_leaf_id(self, entry_id: str | None) -> None:
        self._check()
        if entry_id is not None:
            self._require(entry_id)
        self.append_entry(
            st.LeafEntry(
                id=f"leaf{next(self._leaf_ids)}",
                parent_id=self._leaf,
                timestamp=now_iso(),
                target_id=entry_id,
            )
        )

    def create_entry_id(self) -> str:
        self._check()
        return f"{next(self._ids):08x}"

    def append_entry(self, entry: st.SessionTreeEntry) -> None:
        self._check()
        if entry.id in self._entries:
            raise st.SessionError("duplicate_id", entry.id)
        if entry.parent_id is not None:
            self._require(entry.parent_id)
        self._entries[entry.id] = entry
        if isinstance(entry, st.LabelEntry):
            if entry.label is None:
                self._labels.pop(entry.target_id, None)
            else:
                self._labels[entry.target_id] = entry.label
        elif isinstance(entry, st.SessionInfoEntry):
            self._name = entry.name
        self._leaf = entry.target_id if isinstance(entry, st.LeafEntry) else entry.id

    def get_entry(self, entry_id: str) -> st.SessionTreeEntry | None:
        self._check()
        return self._entries.get(entry_id)

    def find_entries(self, type: str) -> list[st.SessionTreeEntry]:
        self._check()
        return [e for e in self._entries.values() if e.type == type]

    def get_label(self, entry_id: str) -> str | None:
        self._check()
        self._require(entry_id)
        return self._labels.get(entry_id)

    def get_session_name(self) -> str | None:
        self._check()
        return self._name

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
        counts = {"user": 0, "assistant": 0, "tool_result": 0}
        tokens = [0, 0, 0, 0, 0]
        cost = 0.0
        messages = 0
        for e in self._entries.values():
            usage = None
            if isinstance(e, st.MessageEntry):
                messages += 1
                if e.message.role in counts:
                    counts[e.message.role] += 1
                if isinstance(e.message, st.AssistantMessage):
                    usage = e.message.usage
            elif isinstance(e, (st.CompactionEntry, st.BranchSummaryEntry)):
                usage = e.usage
            if usage is not None:
                for k, v in enumerate(
                    (
                        usage.input,
                        usage.output,
                        usage.cache_read,
                        usage.cache_write,
                        usage.total_tokens,
                    )
                ):
                    tokens[k] += v
                cost += usage.cost.total
        return st.SessionStats(
            len(self._entries),
            messages,
            counts["user"],
            counts["assistant"],
            counts["tool_result"],
            *tokens,
            cost,
        )

    def __len__(self) -> int:
        self._check()
        return len(self._entries)

    def close(self) -> None:
        self._closed = True


class CountingMemoryStorage(st.InMemorySessionStorage):
    """The engine's in-memory storage, with the same id sequence as the dict storage."""

    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(1)

    def create_entry_id(self) -> str:
        self._check()
        return f"{next(self._ids):08x}"


def norm_message(m: Any) -> Any:
    """A message without the timestamps the entry's write time decides."""
    d = st.message_to_dict(m)
    if m.role in {"compaction_summary", "branch_summary", "custom"}:
        d.pop("timestamp", None)
    return d


def norm_tree(nodes: list[st.TreeNode]) -> list[Any]:
    """Tree shape with ids, except for leaf entries (whose ids each storage picks)."""
    out: list[Any] = []
    stack: list[tuple[st.TreeNode, list[Any]]] = [(n, out) for n in reversed(nodes)]
    while stack:
        node, into = stack.pop()
        kids: list[Any] = []
        e = node.entry
        into.append(("leaf" if e.type == "leaf" else e.id, e.type, node.label, kids))
        stack.extend((c, kids) for c in reversed(node.children))
    return out


def snapshot(session: st.Session) -> dict[str, Any]:
    ctx = session.build_context()
    stats = session.get_session_stats()
    entries = [e for e in session.storage.get_entries() if e.type != "leaf"]
    return {
        "leaf": session.get_leaf_id(),
        "branch": [e.id for e in session.get_branch()],
        "root_path": [e.id for e in session.storage.get_path_to_root(session.get_leaf_id())],
        "messages": [norm_message(m) for m in ctx.messages],
        "state": (ctx.thinking_level, ctx.model, ctx.active_tool_names),
        "stats": stats,
        "len": len(session),
        "labels": session.storage.get_labels(),
        "name": session.get_session_name(),
        "tree": norm_tree(session.get_tree()),
        "entries": [(e.id, e.type, e.parent_id) for e in entries],
        "children_of_roots": [e.id for e in session.storage.get_children(None)],
        # The interface's optional fast paths: the defaults (dict storage) and the engine's
        # overrides must agree.
        "first_user": getattr(session.storage.get_first_message("user"), "id", None),
        "state_entries": sorted(
            e.id for e in session.storage.get_context_state_entries(session.get_leaf_id())
        ),
        "branch_entries": [
            e.id
            for e in session.storage.get_branch_entries(
                session.get_leaf_id(), known={e.id: e for e in entries[:3]}
            )
        ],
        "parents": session.storage.get_entries_with_parents()[1],
        "newest_is_latest": session.storage.get_newest_timestamp()
        == max((e.timestamp for e in session.storage.get_entries()), default=None),
    }


Step = Callable[[st.Session, dict[str, str]], Any]


def steps(msgs: Any) -> list[Step]:
    def put(name: str, fn: Callable[[st.Session], Any]) -> Step:
        def step(s: st.Session, ids: dict[str, str]) -> None:
            out = fn(s)
            if isinstance(out, str):
                ids[name] = out

        return step

    u = msgs.usage
    return [
        put("u1", lambda s: s.append_message(msgs.user("hello"))),
        put("a1", lambda s: s.append_message(msgs.assistant("hi", usage=u(1, 0.5)))),
        put("t", lambda s: s.append_thinking_level_change("high")),
        put("m", lambda s: s.append_model_change("openai", "gpt-4")),
        put("k", lambda s: s.append_active_tools_change(["bash"])),
        put("u2", lambda s: s.append_message(msgs.user("list files"))),
        put("tr", lambda s: s.append_message(msgs.tool_result("a b c"))),
        put("cm", lambda s: s.append_custom_message_entry("hint", "be brief")),
        put("cu", lambda s: s.append_custom_entry("note", {"n": 1})),
        lambda s, ids: s.append_label(ids["u1"], "start"),
        lambda s, ids: s.append_compaction("S1", ids["u2"], 500, usage=u(2, 0.25)),
        put("a2", lambda s: s.append_message(msgs.assistant("done", usage=u(3, 1.0)))),
        lambda s, ids: s.move_to(ids["a1"], {"summary": "left the files", "usage": u(1, 0.1)}),
        put("u3", lambda s: s.append_message(msgs.user("another way"))),
        lambda s, ids: s.append_session_info("custom backend"),
        lambda s, ids: s.append_compaction("S2", None, 9, retained_tail=[msgs.user("kept")]),
        put("u4", lambda s: s.append_message(msgs.user("after S2"))),
        lambda s, ids: s.append_label(ids["u1"], None),
        lambda s, ids: s.move_to(None),
        put("r2", lambda s: s.append_message(msgs.user("second root"))),
        lambda s, ids: s.append_label(ids["r2"], "root two"),
        lambda s, ids: s.move_to(ids["a2"]),
        put("a3", lambda s: s.append_message(msgs.assistant("back", provider="x", model="y"))),
    ]


def test_dict_storage_matches_the_engine(msgs: Any) -> None:
    options = st.SessionContextBuildOptions(
        entry_projectors={
            "note": lambda e, i, es: [st.CustomMessage("p", f"note {i}", timestamp=0)]
        }
    )
    mine = st.Session(DictSessionStorage(), options)
    engine = st.Session(CountingMemoryStorage(), options)
    mine_ids: dict[str, str] = {}
    engine_ids: dict[str, str] = {}
    for n, step in enumerate(steps(msgs)):
        step(mine, mine_ids)
        step(engine, engine_ids)
        assert mine_ids == engine_ids
        assert snapshot(mine) == snapshot(engine), f"after step {n}"
    final = snapshot(mine)
    assert final["name"] == "custom backend"
    assert final["labels"] == {mine_ids["r2"]: "root two"}
    branch = final["branch"]
    assert len(branch) == 8  # u2 tr cm cu <label> <S1> a2 a3: S1 keeps from u2
    assert [branch[i] for i in (0, 1, 2, 3, 6, 7)] == [
        mine_ids[k] for k in ("u2", "tr", "cm", "cu", "a2", "a3")
    ]
    assert mine.get_entry(branch[5]).type == "compaction"
    assert [m["role"] for m in final["messages"]] == [
        "compaction_summary",
        "user",
        "tool_result",
        "custom",
        "custom",
        "assistant",
        "assistant",
    ]
    assert final["state"] == ("high", st.ModelRef("x", "y"), ("bash",))
    assert final["stats"].total_tokens == 70
    mine.close()
    engine.close()


def test_dict_storage_errors_through_session(msgs: Any) -> None:
    session = st.Session(DictSessionStorage())
    a = session.append_message(msgs.user("a"))
    for call, code in (
        (lambda: session.move_to("nope"), "not_found"),
        (lambda: session.append_label("nope", "x"), "not_found"),
        (lambda: session.get_branch("nope"), "not_found"),
        (lambda: session.get_label("nope"), "not_found"),
        (lambda: session.move_to(None, {"summary": "s"}), "invalid_argument"),
        (lambda: session.append_thinking_level_change("ultra"), "invalid_argument"),
    ):
        with pytest.raises(st.SessionError) as exc:
            call()
        assert exc.value.code == code
    assert len(session) == 1 and session.get_leaf_id() == a
    with session:
        pass
    with pytest.raises(st.SessionError) as exc:
        session.append_message(msgs.user("b"))
    assert exc.value.code == "closed"


def test_dict_storage_deep_tree_without_recursion(msgs: Any) -> None:
    session = st.Session(DictSessionStorage())
    for i in range(5000):
        session.append_custom_entry("c", i)
    (root,) = session.get_tree()
    assert len(root.walk()) == 5000
    assert session.get_session_stats().entry_count == 5000


def test_incomplete_storage_cannot_be_built() -> None:
    class Half(st.SessionStorage):
        def get_leaf_id(self) -> str | None:
            return None

    with pytest.raises(TypeError):
        Half()  # type: ignore[abstract]


def test_storage_context_manager_and_default_labels(msgs: Any) -> None:
    with DictSessionStorage() as storage:
        session = st.Session(storage)
        a = session.append_message(msgs.user("a"))
        session.append_label(a, "L")
        assert storage.get_labels() == {a: "L"}
    with pytest.raises(st.SessionError):
        storage.get_leaf_id()
