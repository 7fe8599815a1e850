"""The contracts every :class:`~sessiontree.SessionStorage` keeps (API.md "Storages",
"Errors", "Stats"; FORMAT.md "The leaf", "Paths"), and :func:`check_storage`."""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from ..context import build_session_context, derive_session_context_state
from ..model.entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    SessionTreeEntry,
    ThinkingLevelChangeEntry,
)
from ..model.messages import (
    AssistantMessage,
    Cost,
    CustomMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ..model.types import SessionStats, TreeNode
from ..session import Session
from ..storage import SessionStorage
from ._harness import (
    Contract,
    Failure,
    Skip,
    Tracer,
    expect,
    expect_equal,
    expect_error,
    run_contracts,
    show,
)
from ._report import ConformanceReport

__all__ = ["STORAGE_CONTRACTS", "StorageHarness", "check_storage"]

NewStorage = Callable[[SessionHeader], SessionStorage]
ReopenStorage = Callable[[SessionStorage], SessionStorage]

_ENTRY_ID: Final = re.compile(r"[0-9a-f]{8}")
_MS: Final = 1_767_225_600_000  # message timestamps (Unix ms), fixed so runs compare


def _ts(i: int) -> str:
    return f"2026-01-02T03:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z"


class StorageHarness:
    """What a storage contract works with: fresh storages (traced), reopening, and
    builders of entries.

    Args:
        new: ``new(header) -> storage``: a new, empty storage holding ``header``.
        reopen: ``reopen(storage) -> storage``: closes ``storage`` and opens what it
            holds again (``None``: the contracts that need it are skipped).
        log: where traced calls are written (the report shows the last).
    """

    def __init__(
        self,
        new: NewStorage,
        reopen: ReopenStorage | None,
        log: list[str],
        made: list[str] | None = None,
    ) -> None:
        self._new = new
        self._made_types = made if made is not None else []
        self._reopen = reopen
        self._tracer = Tracer("storage", log)
        self.made: list[SessionStorage] = []
        self._clock = 0
        self._count = 0

    def header(self) -> SessionHeader:
        self._count += 1
        return SessionHeader.generate(
            cwd="/conformance", metadata={"kit": "sessiontree.testing", "n": self._count}
        )

    def new(self, header: SessionHeader | None = None) -> Any:
        """A new storage from the factory (traced: its calls are logged)."""
        storage = self._new(header or self.header())
        if not isinstance(storage, SessionStorage):
            raise Failure(f"the factory returned {type(storage).__name__}, not a SessionStorage")
        self.made.append(storage)
        if not self._made_types:
            self._made_types.append(type(storage).__name__)
        return self._tracer.wrap(storage)

    def reopen(self, storage: Any) -> Any:
        """The same session, closed and opened again through the reopen factory."""
        if self._reopen is None:
            raise Skip("no reopen factory was given")
        again = self._reopen(storage.raw)
        if not isinstance(again, SessionStorage):
            raise Failure(f"reopen returned {type(again).__name__}, not a SessionStorage")
        self.made.append(again)
        return self._tracer.wrap(again)

    def stamp(self) -> str:
        self._clock += 1
        return _ts(self._clock)

    def add(self, storage: Any, cls: type[SessionTreeEntry], **fields: Any) -> SessionTreeEntry:
        """Appends a ``cls`` entry under the leaf (or ``parent_id=``) and returns it."""
        fields.setdefault("parent_id", storage.raw.get_leaf_id())
        fields.setdefault("id", storage.raw.create_entry_id())
        fields.setdefault("timestamp", self.stamp())
        entry = cls(**fields)
        storage.append_entry(entry)
        return entry

    def user(self, storage: Any, text: str, **fields: Any) -> SessionTreeEntry:
        return self.add(storage, MessageEntry, message=UserMessage(text, timestamp=_MS), **fields)

    def assistant(
        self, storage: Any, text: str, usage: Usage | None = None, **fields: Any
    ) -> SessionTreeEntry:
        message = AssistantMessage(
            [TextContent(text)], "anthropic", "claude", usage=usage or Usage(), timestamp=_MS
        )
        return self.add(storage, MessageEntry, message=message, **fields)

    def close_all(self) -> None:
        for storage in self.made:
            # The report is about the contracts, not the cleanup.
            with contextlib.suppress(Exception):
                storage.close()


STORAGE_CONTRACTS: list[Contract[StorageHarness]] = []
"""Every storage contract, in run order (each has ``name`` and ``summary``); pass names to
``check_storage(..., only=...)``, or parametrize a test over them."""


def _contract(name: str, summary: str) -> Callable[[Callable[[StorageHarness], None]], Any]:
    def register(fn: Callable[[StorageHarness], None]) -> Callable[[StorageHarness], None]:
        STORAGE_CONTRACTS.append(Contract(name, summary, fn))
        return fn

    return register


def _ids(entries: Iterable[SessionTreeEntry]) -> list[str]:
    return [e.id for e in entries]


def _usage(n: int, cost: float) -> Usage:
    return Usage(
        input=n,
        output=2 * n,
        cache_read=3 * n,
        cache_write=4 * n,
        total_tokens=10 * n,
        cost=Cost(input=cost, total=cost),
    )


def _every_kind(h: StorageHarness, s: Any) -> list[SessionTreeEntry]:
    """Appends one entry of every type (and every message role); returns them in order."""
    out = [h.user(s, "hello")]
    out.append(
        h.add(
            s,
            MessageEntry,
            message=AssistantMessage(
                [TextContent("calling"), ToolCall("call_1", "bash", {"cmd": "ls"})],
                "openai",
                "gpt-5",
                usage=_usage(5, 0.5),
                stop_reason="tool_use",
                timestamp=_MS,
            ),
        )
    )
    out.append(
        h.add(
            s,
            MessageEntry,
            message=ToolResultMessage(
                "call_1", "bash", [TextContent("a b")], details={"exit": 0}, timestamp=_MS
            ),
        )
    )
    out.append(
        h.add(s, MessageEntry, message=CustomMessage("note", "shown", details=[1], timestamp=_MS))
    )
    out.append(h.add(s, ThinkingLevelChangeEntry, thinking_level="high"))
    out.append(h.add(s, ModelChangeEntry, provider="google", model_id="gemini"))
    out.append(h.add(s, ActiveToolsChangeEntry, active_tool_names=["read", "bash"]))
    out.append(h.add(s, CustomEntry, custom_type="app", data={"nested": {"k": [1, 2.5, None]}}))
    out.append(
        h.add(s, CustomMessageEntry, custom_type="hint", content="remember", details={"d": 1})
    )
    out.append(h.add(s, LabelEntry, target_id=out[0].id, label="start"))
    out.append(h.add(s, SessionInfoEntry, name="kit session"))
    out.append(
        h.add(
            s,
            CompactionEntry,
            summary="so far",
            first_kept_entry_id=out[2].id,
            tokens_before=1234,
            details={"files": ["a"]},
            usage=_usage(1, 0.1),
        )
    )
    out.append(
        h.add(
            s,
            BranchSummaryEntry,
            from_id=out[1].id,
            summary="elsewhere",
            details=None,
            usage=_usage(2, 0.2),
            from_hook=True,
        )
    )
    out.append(
        h.add(
            s,
            CompactionEntry,
            summary="tail kept",
            first_kept_entry_id=None,
            tokens_before=99,
            retained_tail=[UserMessage("kept", timestamp=_MS)],
        )
    )
    return out


def _same_entries(got: list[SessionTreeEntry], want: list[SessionTreeEntry], what: str) -> None:
    expect_equal(_ids(got), _ids(want), f"{what} (ids)")
    for g, w in zip(got, want, strict=True):
        expect(g == w, f"{what}: entry {w.id} came back as {show(g)}, appended as {show(w)}")


# --------------------------------------------------------------------------- contracts


@_contract("header", "get_metadata() returns the header the storage was made with (API)")
def _header(h: StorageHarness) -> None:
    header = h.header()
    s = h.new(header)
    got = s.get_metadata()
    expect(isinstance(got, SessionHeader), f"get_metadata() returned {type(got).__name__}")
    expect_equal(got, header, "get_metadata()")


@_contract("empty", "a new storage has no entries, no leaf, no name, zero stats")
def _empty(h: StorageHarness) -> None:
    s = h.new()
    expect_equal(len(s), 0, "len(storage)")
    expect_equal(s.get_leaf_id(), None, "get_leaf_id()")
    expect_equal(s.get_entries(), [], "get_entries()")
    expect_equal(s.get_session_name(), None, "get_session_name()")
    expect_equal(s.get_children(None), [], "get_children(None)")
    expect_equal(s.get_path_to_root(None), [], "get_path_to_root(None)")
    expect_equal(s.get_path_to_root_or_compaction(None), [], "get_path_to_root_or_compaction(None)")
    expect_equal(s.get_session_stats(), SessionStats(), "get_session_stats()")


@_contract("entry_ids", "create_entry_id() gives 8 lowercase hex digits, unused (file format)")
def _entry_ids(h: StorageHarness) -> None:
    s = h.new()
    used = {h.user(s, "x").id}
    for _ in range(200):
        i = s.create_entry_id()
        expect(isinstance(i, str) and _ENTRY_ID.fullmatch(i) is not None, f"bad id {i!r}")
        expect(i not in used, f"create_entry_id() gave {i!r}, already used in this session")
        used.add(i)
        h.user(s, "y", id=i)


@_contract(
    "append_and_read",
    "every entry type comes back from get_entry equal to what was appended; the leaf "
    "follows each append; get_entries() is file order (API: Entries, Storages)",
)
def _append_and_read(h: StorageHarness) -> None:
    s = h.new()
    appended = _every_kind(h, s)
    # Each was appended under the leaf the storage reported, so a leaf that did not
    # follow an append shows as a wrong parent.
    for before, entry in itertools.pairwise(appended):
        expect_equal(entry.parent_id, before.id, f"the leaf after appending a {before.type}")
    expect_equal(s.get_leaf_id(), appended[-1].id, "the leaf after the last append")
    expect_equal(len(s), len(appended), "len(storage)")
    for entry in appended:
        got = s.get_entry(entry.id)
        expect(got == entry, f"get_entry({entry.id!r}) returned {show(got)}, not {show(entry)}")
    _same_entries(s.get_entries(), appended, "get_entries()")


@_contract(
    "append_message",
    "append_message(message) appends a message entry under the leaf with a fresh id and "
    "returns it (SessionStorage.append_message)",
)
def _append_message(h: StorageHarness) -> None:
    s = h.new()
    first = h.user(s, "one")
    message = UserMessage("two", timestamp=_MS)
    entry = s.append_message(message)
    expect(isinstance(entry, MessageEntry), f"append_message returned {show(entry)}")
    expect_equal(entry.message, message, "the returned entry's message")
    expect_equal(entry.parent_id, first.id, "the returned entry's parent_id")
    expect(entry.id != first.id, "append_message reused an id")
    expect_equal(s.get_leaf_id(), entry.id, "the leaf after append_message")
    expect_equal(s.get_entry(entry.id), entry, "get_entry of the appended message")


@_contract(
    "duplicate_id",
    "appending an entry whose id is used raises duplicate_id and writes nothing (API)",
)
def _duplicate_id(h: StorageHarness) -> None:
    s = h.new()
    a = h.user(s, "a")
    b = h.user(s, "b")
    before = s.get_entries()
    again = CustomEntry(custom_type="dup", id=a.id, parent_id=b.id, timestamp=h.stamp())
    expect_error("duplicate_id", s.append_entry, again)
    expect_equal(len(s), 2, "len(storage) after the refused append")
    expect_equal(s.get_leaf_id(), b.id, "the leaf after the refused append")
    _same_entries(s.get_entries(), before, "the entries after the refused append")


@_contract(
    "unknown_parent",
    "appending an entry whose parent_id is not in the session raises not_found and writes "
    "nothing (API)",
)
def _unknown_parent(h: StorageHarness) -> None:
    s = h.new()
    a = h.user(s, "a")
    orphan = CustomEntry(custom_type="x", id="0badf00d", parent_id="feedface", timestamp=h.stamp())
    expect_error("not_found", s.append_entry, orphan)
    expect_equal(len(s), 1, "len(storage) after the refused append")
    expect_equal(s.get_leaf_id(), a.id, "the leaf after the refused append")
    expect_equal(s.get_entry("0badf00d"), None, "get_entry of the refused entry")


@_contract(
    "leaf_moves",
    "set_leaf_id appends a leaf entry (parent: the old leaf, target: the new one); None "
    "moves before the first entry; an unknown id is not_found (file format: The leaf)",
)
def _leaf_moves(h: StorageHarness) -> None:
    s = h.new()
    a = h.user(s, "a")
    b = h.assistant(s, "b")
    s.set_leaf_id(a.id)
    expect_equal(s.get_leaf_id(), a.id, "the leaf after set_leaf_id(a)")
    expect_equal(len(s), 3, "len(storage): set_leaf_id appends a leaf entry")
    leaves = s.find_entries("leaf")
    expect(len(leaves) == 1 and isinstance(leaves[0], LeafEntry), f"leaf entries: {show(leaves)}")
    expect_equal(leaves[0].parent_id, b.id, "the leaf entry's parent_id (the leaf it left)")
    expect_equal(leaves[0].target_id, a.id, "the leaf entry's target_id")
    c = h.user(s, "c")
    expect_equal(c.parent_id, a.id, "a new entry hangs under the moved leaf")
    expect_equal(_ids(s.get_children(a.id)), [b.id, c.id], "get_children(a) (file order)")
    s.set_leaf_id(None)
    expect_equal(s.get_leaf_id(), None, "the leaf after set_leaf_id(None)")
    root = h.user(s, "new root", parent_id=None)
    expect_equal(_ids(s.get_children(None)), [a.id, root.id], "get_children(None): the roots")
    n = len(s)
    expect_error("not_found", s.set_leaf_id, "feedface")
    expect_equal(len(s), n, "len(storage) after set_leaf_id(unknown)")
    expect_equal(s.get_leaf_id(), root.id, "the leaf after set_leaf_id(unknown)")


@_contract(
    "unknown_ids",
    "get_entry(unknown) is None; every other method given an unknown id raises not_found "
    "(API: Errors)",
)
def _unknown_ids(h: StorageHarness) -> None:
    s = h.new()
    h.user(s, "a")
    expect_equal(s.get_entry("feedface"), None, "get_entry(unknown)")
    expect_error("not_found", s.get_label, "feedface")
    expect_error("not_found", s.get_path_to_root, "feedface")
    expect_error("not_found", s.get_path_to_root_or_compaction, "feedface")
    expect_error("not_found", s.get_children, "feedface")
    expect_error("not_found", s.get_entries, since="feedface")


@_contract(
    "paths",
    "get_path_to_root runs root first along parent_id; get_children is file order "
    "(file format: Paths)",
)
def _paths(h: StorageHarness) -> None:
    s = h.new()
    a = h.user(s, "a")
    b = h.assistant(s, "b")
    c = h.user(s, "c")
    s.set_leaf_id(b.id)
    d = h.user(s, "d")
    e = h.assistant(s, "e")
    expect_equal(_ids(s.get_path_to_root(c.id)), [a.id, b.id, c.id], "get_path_to_root(c)")
    expect_equal(_ids(s.get_path_to_root(e.id)), [a.id, b.id, d.id, e.id], "get_path_to_root(e)")
    expect_equal(
        _ids(s.get_path_to_root_or_compaction(e.id)),
        [a.id, b.id, d.id, e.id],
        "get_path_to_root_or_compaction(e) without a compaction",
    )
    expect_equal(_ids(s.get_children(b.id)), [c.id, d.id], "get_children(b)")
    expect_equal(_ids(s.get_children(e.id)), [], "get_children of a leaf")
    expect_equal(_ids(s.get_children(None)), [a.id], "get_children(None)")


@_contract(
    "compaction_cuts",
    "get_path_to_root_or_compaction cuts at the nearest compaction: from its "
    "first_kept_entry_id when that is an ancestor, else from the compaction; from the "
    "compaction when it has a retained tail (file format: Paths)",
)
def _compaction_cuts(h: StorageHarness) -> None:
    s = h.new()
    a = h.user(s, "a")
    b = h.assistant(s, "b")
    c = h.user(s, "c")
    k1 = h.add(s, CompactionEntry, summary="s1", first_kept_entry_id=b.id, tokens_before=10)
    d = h.assistant(s, "d")
    got = _ids(s.get_path_to_root_or_compaction(d.id))
    expect_equal(got, [b.id, c.id, k1.id, d.id], "cut at first_kept_entry_id (an ancestor)")
    k2 = h.add(s, CompactionEntry, summary="s2", first_kept_entry_id=None, tokens_before=10)
    e = h.user(s, "e")
    got = _ids(s.get_path_to_root_or_compaction(e.id))
    expect_equal(got, [k2.id, e.id], "the nearest compaction wins; first_kept null: from it")
    s.set_leaf_id(a.id)
    side = h.user(s, "side")
    k3 = h.add(s, CompactionEntry, summary="s3", first_kept_entry_id=c.id, tokens_before=10)
    f = h.user(s, "f")
    got = _ids(s.get_path_to_root_or_compaction(f.id))
    expect_equal(got, [k3.id, f.id], "first_kept_entry_id not an ancestor: from the compaction")
    expect_equal(
        _ids(s.get_path_to_root(f.id)), [a.id, side.id, k3.id, f.id], "get_path_to_root ignores"
    )
    s.set_leaf_id(d.id)
    k4 = h.add(
        s,
        CompactionEntry,
        summary="s4",
        first_kept_entry_id=b.id,
        tokens_before=10,
        retained_tail=[UserMessage("t", timestamp=_MS)],
    )
    g = h.user(s, "g")
    got = _ids(s.get_path_to_root_or_compaction(g.id))
    expect_equal(got, [k4.id, g.id], "a compaction with a retained tail: from the compaction")
    expect_equal(
        _ids(s.get_path_to_root_or_compaction(k1.id)),
        [b.id, c.id, k1.id],
        "the path of the compaction itself",
    )


@_contract(
    "labels",
    "labels are file-wide: the last label entry for a target wins, a null label clears it "
    "(file format: Paths)",
)
def _labels(h: StorageHarness) -> None:
    s = h.new()
    a = h.user(s, "a")
    b = h.assistant(s, "b")
    expect_equal(s.get_label(a.id), None, "get_label of an unlabelled entry")
    h.add(s, LabelEntry, target_id=a.id, label="one")
    h.add(s, LabelEntry, target_id=b.id, label="bee")
    h.add(s, LabelEntry, target_id=a.id, label="two")
    expect_equal(s.get_label(a.id), "two", "get_label: the last label entry wins")
    s.set_leaf_id(None)
    h.add(s, LabelEntry, target_id=b.id, label=None, parent_id=None)
    expect_equal(s.get_label(b.id), None, "a null label (on another branch) clears it")
    expect_equal(s.get_label(a.id), "two", "get_label(a) after clearing b")
    expect_equal(s.get_labels(), {a.id: "two"}, "get_labels()")


@_contract(
    "session_name",
    "the last session_info entry (on any branch) names the session; a null name clears it",
)
def _session_name(h: StorageHarness) -> None:
    s = h.new()
    h.add(s, SessionInfoEntry, name="first")
    a = h.user(s, "a")
    expect_equal(s.get_session_name(), "first", "get_session_name()")
    s.set_leaf_id(None)
    h.add(s, SessionInfoEntry, name="second", parent_id=None)
    s.set_leaf_id(a.id)
    expect_equal(s.get_session_name(), "second", "get_session_name(): the last one wins")
    h.add(s, SessionInfoEntry, name=None)
    expect_equal(s.get_session_name(), None, "get_session_name() after a null name")


@_contract(
    "find_and_filter",
    "find_entries(type) and get_entries(type, since=, limit=, reverse=) select in file "
    "order; a negative limit is invalid_argument (API: Storages)",
)
def _find_and_filter(h: StorageHarness) -> None:
    s = h.new()
    made = []
    for i in range(6):
        made.append(h.user(s, f"u{i}"))
        made.append(h.add(s, CustomEntry, custom_type="c", data=i))
    users = [e for e in made if e.type == "message"]
    customs = [e for e in made if e.type == "custom"]
    _same_entries(s.find_entries("message"), users, "find_entries('message')")
    _same_entries(s.find_entries("custom"), customs, "find_entries('custom')")
    expect_equal(s.find_entries("compaction"), [], "find_entries of an absent type")
    _same_entries(s.get_entries("custom"), customs, "get_entries('custom')")
    _same_entries(s.get_entries(since=made[3].id), made[4:], "get_entries(since=) (exclusive)")
    _same_entries(s.get_entries(limit=3), made[:3], "get_entries(limit=3)")
    _same_entries(s.get_entries(reverse=True), made[::-1], "get_entries(reverse=True)")
    _same_entries(
        s.get_entries("message", since=made[2].id, limit=2),
        users[2:4],
        "get_entries('message', since=, limit=2)",
    )
    _same_entries(
        s.get_entries("custom", limit=2, reverse=True),
        customs[::-1][:2],
        "get_entries('custom', limit=2, reverse=True)",
    )
    expect_equal(s.get_entries(limit=0), [], "get_entries(limit=0)")
    expect_error("invalid_argument", s.get_entries, limit=-1)


@_contract(
    "stats",
    "get_session_stats counts every branch: message entries by role, and usage of "
    "assistant messages, compactions and branch summaries (API: Stats)",
)
def _stats(h: StorageHarness) -> None:
    s = h.new()
    a = h.user(s, "a")
    h.assistant(s, "b", usage=_usage(10, 1.0))
    s.set_leaf_id(a.id)
    h.assistant(s, "b2", usage=_usage(1, 0.5))
    h.add(
        s,
        MessageEntry,
        message=ToolResultMessage("c1", "bash", [TextContent("ok")], timestamp=_MS),
    )
    h.add(
        s,
        CompactionEntry,
        summary="s",
        first_kept_entry_id=None,
        tokens_before=5,
        usage=_usage(100, 2.0),
    )
    h.add(s, BranchSummaryEntry, from_id=a.id, summary="b", usage=_usage(1000, 4.0))
    h.add(s, CustomEntry, custom_type="x")
    got = s.get_session_stats()
    want: dict[str, float] = {
        "entry_count": len(s),
        "message_count": 4,
        "user_message_count": 1,
        "assistant_message_count": 2,
        "tool_result_count": 1,
        "input_tokens": 1111,
        "output_tokens": 2222,
        "cache_read_tokens": 3333,
        "cache_write_tokens": 4444,
        "total_tokens": 11110,
        "cost_total": 7.5,
    }
    for field, w in want.items():
        g = getattr(got, field)
        expect(
            g == w or (field == "cost_total" and abs(g - w) < 1e-9),
            f"get_session_stats().{field}: expected {w}, got {g}",
        )


@_contract(
    "context",
    "Session.build_context over the storage: the latest compaction's summary, the kept "
    "entries, then the rest; thinking level, model and tools from the whole path (API)",
)
def _context(h: StorageHarness) -> None:
    s = h.new()
    h.add(s, ThinkingLevelChangeEntry, thinking_level="low")
    h.add(s, ModelChangeEntry, provider="openai", model_id="gpt-5")
    h.user(s, "old")
    kept = h.user(s, "kept")
    h.assistant(s, "reply")
    h.add(s, CompactionEntry, summary="summary", first_kept_entry_id=kept.id, tokens_before=9)
    h.user(s, "after")
    context = Session(s.raw).build_context()
    got = [(m.role, getattr(m, "content", getattr(m, "summary", None))) for m in context.messages]
    texts = [(r, c if isinstance(c, str) else c[0].text) for r, c in got]  # type: ignore[index]
    expect_equal(
        texts,
        [
            ("compaction_summary", "summary"),
            ("user", "kept"),
            ("assistant", "reply"),
            ("user", "after"),
        ],
        "the context's messages",
    )
    expect_equal(context.thinking_level, "low", "the context's thinking level")
    expect_equal(
        (context.model.provider, context.model.model_id) if context.model else None,
        ("anthropic", "claude"),
        "the context's model (the last assistant message's)",
    )
    path = s.get_path_to_root_or_compaction(s.get_leaf_id())
    expect_equal(build_session_context(path).messages, context.messages, "a cold build")


@_contract(
    "reopen",
    "closed and opened again, the storage holds the same header, entries, leaf (also "
    "moved back, or before the first entry), labels, name and stats (file format: The leaf)",
)
def _reopen(h: StorageHarness) -> None:
    header = h.header()
    s = h.new(header)
    entries = _every_kind(h, s)
    s.set_leaf_id(entries[3].id)
    before = (s.get_entries(), s.get_leaf_id(), s.get_labels(), s.get_session_name())
    stats = s.get_session_stats()
    again = h.reopen(s)
    expect_equal(again.get_metadata(), header, "get_metadata() after reopening")
    _same_entries(again.get_entries(), before[0], "get_entries() after reopening")
    expect_equal(again.get_leaf_id(), before[1], "the leaf after reopening (moved back)")
    expect_equal(again.get_labels(), before[2], "get_labels() after reopening")
    expect_equal(again.get_session_name(), before[3], "get_session_name() after reopening")
    expect_equal(again.get_session_stats(), stats, "get_session_stats() after reopening")
    again.set_leaf_id(None)
    third = h.reopen(again)
    expect_equal(third.get_leaf_id(), None, "a leaf before the first entry, after reopening")
    new_root = h.user(third, "root again")
    expect_equal(new_root.parent_id, None, "an append after reopening hangs under the leaf")
    expect_equal(len(third), len(before[0]) + 2, "len(storage) after appending to the reopened")


@_contract(
    "close",
    "close() is idempotent; any call after it raises closed; the storage is a context "
    "manager that closes it (API: Errors)",
)
def _close(h: StorageHarness) -> None:
    s = h.new()
    a = h.user(s, "a")
    s.close()
    s.close()
    expect_error("closed", s.get_leaf_id)
    expect_error("closed", s.get_entries)
    expect_error("closed", s.get_entry, a.id)
    expect_error("closed", s.get_session_stats)
    expect_error(
        "closed",
        s.append_entry,
        CustomEntry(custom_type="x", id="0c105ed0", parent_id=None, timestamp=h.stamp()),
    )
    expect_error("closed", lambda: len(s))
    other = h.new()
    with other.raw as inside:
        expect(inside is other.raw, "`with storage as x` must bind the storage itself")
    expect_error("closed", other.get_leaf_id)


@_contract("atomic", "atomic() is a re-entrant lock for read-then-write sequences")
def _atomic(h: StorageHarness) -> None:
    s = h.new()
    lock = s.atomic()
    with lock, s.atomic():
        h.user(s, "inside")
    expect_equal(len(s), 1, "len(storage) after appending under atomic()")


def _shape(nodes: Sequence[TreeNode]) -> list[Any]:
    return [(n.entry.id, n.label, _shape(n.children)) for n in nodes]


@_contract(
    "fast_paths",
    "the optional methods a storage may override (get_tree, get_branch_entries, "
    "get_context_state_entries, get_entries_at, ...) agree with SessionStorage's "
    "defaults, which use only the required methods",
)
def _fast_paths(h: StorageHarness) -> None:
    s = h.new()
    entries = _every_kind(h, s)
    s.set_leaf_id(entries[4].id)
    h.user(s, "branch")
    raw = s.raw
    base = SessionStorage
    leaf = s.get_leaf_id()
    expect_equal(_shape(s.get_tree()), _shape(base.get_tree(raw)), "get_tree()")
    _same_entries(
        s.get_branch_entries(leaf, known={e.id: e for e in entries[:3]}),
        raw.get_path_to_root_or_compaction(leaf),
        "get_branch_entries(leaf, known=...)",
    )
    for target in (leaf, entries[-1].id, entries[2].id):
        got = derive_session_context_state(s.get_context_state_entries(target))
        want = derive_session_context_state(base.get_context_state_entries(raw, target))
        expect_equal(got, want, f"the state from get_context_state_entries({target!r})")
    got_e, got_p = s.get_entries_with_parents()
    want_e, want_p = base.get_entries_with_parents(raw)
    _same_entries(got_e, want_e, "get_entries_with_parents() entries")
    expect_equal(got_p, want_p, "get_entries_with_parents() parents")
    expect_equal(s.get_parent_positions(), want_p, "get_parent_positions()")
    _same_entries(
        s.get_entries_at([3, 0, 3]), base.get_entries_at(raw, [3, 0, 3]), "get_entries_at"
    )
    expect_error("invalid_argument", s.get_entries_at, [len(s)])
    ids = [entries[5].id, "feedface", entries[0].id]
    expect_equal(s.get_positions(ids), base.get_positions(raw, ids), "get_positions()")
    expect_equal(s.get_labels(), base.get_labels(raw), "get_labels()")
    expect_equal(s.get_newest_timestamp(), base.get_newest_timestamp(raw), "get_newest_timestamp()")
    for role in ("user", "assistant", "tool_result", "branch_summary"):
        expect_equal(
            s.get_first_message(role),
            base.get_first_message(raw, role),
            f"get_first_message({role!r})",
        )


@_contract(
    "session_api",
    "every Session method works over the storage: appends of each kind, labels, names, "
    "leaf moves with a branch summary, the tree (API: Session)",
)
def _session_api(h: StorageHarness) -> None:
    s = h.new()
    session = Session(s.raw)
    first = session.append_message(UserMessage("hi", timestamp=_MS))
    session.append_thinking_level_change("medium")
    session.append_model_change("openai", "gpt-5")
    session.append_active_tools_change(["read"])
    session.append_custom_entry("k", {"v": 1})
    session.append_custom_message_entry("c", "text")
    session.append_label(first, "mark")
    session.append_session_info("named")
    summary_id = session.move_to(first, {"summary": "went back", "details": {"n": 1}})
    expect(summary_id is not None, "move_to with a summary returned None")
    summary = session.get_entry(summary_id or "")
    expect(isinstance(summary, BranchSummaryEntry), f"the summary entry is {show(summary)}")
    expect_equal(summary.from_id, first, "the branch summary's from_id")  # type: ignore[union-attr]
    expect_equal(session.get_leaf_id(), summary_id, "the leaf after move_to with a summary")
    expect_equal(session.get_label(first), "mark", "Session.get_label")
    expect_equal(session.get_session_name(), "named", "Session.get_session_name")
    tree = session.get_tree()
    expect_equal(len(tree), 1, "one root")
    expect_equal(
        [n.entry.type for n in tree[0].children],
        ["thinking_level_change", "branch_summary"],
        "the first entry's children (file order)",
    )
    expect_equal(tree[0].label, "mark", "the root node's label")
    context = session.build_context()
    expect_equal(
        [m.role for m in context.messages], ["user", "branch_summary"], "the context's roles"
    )
    expect_error("not_found", session.move_to, "feedface")
    expect_error("not_found", session.append_label, "feedface", "x")


# --------------------------------------------------------------------------- the entry point


def check_storage(
    new: NewStorage,
    reopen: ReopenStorage | None = None,
    *,
    only: Iterable[str | Contract[StorageHarness]] | None = None,
    raise_on_failure: bool = True,
) -> ConformanceReport:
    """Runs every storage contract of the API and the file format on your ``SessionStorage``.

    Each contract gets fresh storages from ``new``; everything it made is closed after.

    Args:
        new: ``new(header) -> SessionStorage``: a new, empty storage for a new session
            with that :class:`~sessiontree.SessionHeader` (it must keep it).
        reopen: ``reopen(storage) -> SessionStorage``: close ``storage`` and open the
            same session again, as a later process would (``None`` skips the contracts
            that need it).
        only: run just these contracts (names or items of :data:`STORAGE_CONTRACTS`).
        raise_on_failure: raise :class:`ConformanceError` when a contract failed (else
            only return the report).

    Returns:
        The :class:`ConformanceReport` (``str()`` it for a readable summary).

    Raises:
        ConformanceError: a contract failed (an ``AssertionError``; its message is the
            report, each failure with the reason and the last call made).

    >>> from sessiontree import InMemorySessionStorage
    >>> report = check_storage(
    ...     InMemorySessionStorage,
    ...     lambda s: InMemorySessionStorage.from_jsonl(s.to_jsonl()),
    ... )
    >>> report.ok, len(report.failures)
    (True, 0)
    """
    if not callable(new) or (reopen is not None and not callable(reopen)):
        from ..errors import SessionError

        raise SessionError("invalid_argument", "new and reopen must be callables")
    made: list[str] = []
    results = run_contracts(
        STORAGE_CONTRACTS,
        only,
        lambda log: StorageHarness(new, reopen, log, made),
        StorageHarness.close_all,
    )
    # Named after what the factory made (a factory is often a lambda).
    name = made[0] if made else getattr(new, "__qualname__", type(new).__name__)
    report = ConformanceReport(f"storage {name}", results)
    if raise_on_failure:
        report.raise_for_failures()
    return report
