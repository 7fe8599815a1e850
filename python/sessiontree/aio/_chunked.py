"""Big results built in a worker thread a chunk at a time, letting the loop run between.

A worker thread does not free the event loop by itself: the objects of a result (an
entry, a message, a tree node each) are made holding the GIL, and one engine call that
makes 100,000 of them holds it for tens of milliseconds, during which the loop's thread
cannot run. The functions here give the same results as the ``Session`` methods they
stand in for, but ask the engine for at most :data:`CHUNK` entries per call and release
the GIL between chunks (``time.sleep(0)``), so a loop waiting for it gets it within a
chunk (about half a millisecond), not at the end of the call. The interpreter itself
hands the GIL over at least every ``sys.getswitchinterval()`` (5 ms by default) when a
thread asks for it; the explicit releases make the usual wait much shorter.

They are used only for the engine-backed storages whose reading methods are the
package's own (a subclass that overrides one of them is read through its own methods),
and only where the result is big: a branch or tree of at most :data:`CHUNK` entries is
read in one call, as by the sync method.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from .._gc import paused_gc

if TYPE_CHECKING:
    from ..context import SessionContextBuildOptions
    from ..model.entries import SessionTreeEntry
    from ..model.types import SessionContext, TreeNode
    from ..session import Session
    from ..storage import SessionStorage

__all__ = ["CHUNK", "build_context", "get_branch", "get_tree"]

CHUNK: Final = 1000
"""Entries (or tree nodes) made per step: about 0.3-0.8 ms of GIL on the 2-core machine
of ``benches/RESULTS.md`` (an entry costs 0.3-0.8 us to make, a tree node ~1.5 us)."""

# The methods a storage must not override for its reads to be chunked here.
_READS: Final = (
    "get_path_to_root_or_compaction",
    "get_branch_entries",
    "get_context_state_entries",
    "get_entries_at",
    "get_parent_positions",
    "get_labels",
    "get_positions",
    "get_tree",
    "get_leaf_id",
    "__len__",
)
_chunkable_classes: dict[type, bool] = {}


class _Steps:
    """The pauses of one chunked build: :meth:`step` releases the GIL for a moment, so
    a thread waiting for it (the event loop's) takes it.

    The cyclic garbage collector stays off for the whole build, as for one engine read
    (``storage.engine._read_entries``): left on, it would run a full collection each
    time the heap grew by a quarter (several during a 100k-entry tree, each holding the
    GIL for tens of milliseconds). Turned back on, it would then scan every object the
    build made in its next young collection, in one go (CPython's collector is not
    incremental): 300k objects of a 100k-entry tree, 25-50 ms holding the GIL. So the
    build's objects, with every other young object of the process, are moved to the
    oldest generation first (``gc.freeze()`` then ``gc.unfreeze()``: two list splices,
    no scan), as if they had survived their young collections; garbage among them is
    collected by the next full collection, when the interpreter decides to run one.
    Skipped when the application froze objects itself (``gc.get_freeze_count()``), and
    nothing is done to a collector that was off already.
    """

    __slots__ = ("_paused",)

    def __enter__(self) -> _Steps:
        self._paused = paused_gc(bulk=True)  # only results past BULK_INLINE_ENTRIES
        self._paused.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._paused.__exit__(*exc)

    def step(self) -> None:
        time.sleep(0)


def chunkable(storage: SessionStorage) -> bool:
    """Whether ``storage`` is engine-backed with the package's own reading methods."""
    cls = type(storage)
    known = _chunkable_classes.get(cls)
    if known is None:
        from ..storage.engine import _EngineStorage

        known = issubclass(cls, _EngineStorage) and all(
            getattr(cls, name) is getattr(_EngineStorage, name) for name in _READS
        )
        _chunkable_classes[cls] = known
    return known


def _entries_at(
    storage: SessionStorage, positions: list[int], steps: _Steps
) -> list[SessionTreeEntry]:
    out: list[SessionTreeEntry] = []
    for start in range(0, len(positions), CHUNK):
        if start:
            steps.step()
        out += storage.get_entries_at(positions[start : start + CHUNK])
    return out


def _branch(
    storage: SessionStorage, leaf_id: str | None, known: Mapping[str, SessionTreeEntry] | None
) -> list[SessionTreeEntry]:
    """``storage.get_branch_entries(leaf_id, known=known)``, chunked."""
    if leaf_id is not None and (
        not isinstance(leaf_id, str) or storage.get_positions([leaf_id])[0] is None
    ):
        # An unknown or malformed id: the storage's own call says what it makes of it.
        return storage.get_branch_entries(leaf_id, known=known)
    engine = storage._engine  # type: ignore[attr-defined]
    positions: list[int] = engine.path_indices(leaf_id, True)
    if len(positions) <= CHUNK:
        return storage.get_branch_entries(leaf_id, known=known)
    with _Steps() as steps:
        if not known:
            return _entries_at(storage, positions, steps)
        id_of = engine.id_of
        ids: list[str] = []
        for start in range(0, len(positions), CHUNK):
            if start:
                steps.step()
            ids += [id_of(p) for p in positions[start : start + CHUNK]]
        missing = [p for p, entry_id in zip(positions, ids, strict=True) if entry_id not in known]
        made = iter(_entries_at(storage, missing, steps))
        return [known[entry_id] if entry_id in known else next(made) for entry_id in ids]


def get_branch(session: Session, leaf_id: str | None = None) -> list[SessionTreeEntry]:
    """``session.get_branch(leaf_id)``, chunked on an engine storage."""
    storage = session.storage
    if not chunkable(storage) or (leaf_id is not None and not isinstance(leaf_id, str)):
        return session.get_branch(leaf_id)
    leaf = storage.get_leaf_id() if leaf_id is None else leaf_id
    return _branch(storage, leaf, None)


def get_tree(session: Session) -> list[TreeNode]:
    """``session.get_tree()``, chunked on an engine storage: the entries a chunk at a
    time, then the nodes bottom-up (as ``SessionStorage.get_tree`` does), releasing the
    GIL every :data:`CHUNK` nodes."""
    from ..model.types import TreeNode

    storage = session.storage
    if not chunkable(storage):
        return session.get_tree()
    parents = storage.get_parent_positions()
    n = len(parents)
    if n <= CHUNK:
        return session.get_tree()
    labels = storage.get_labels()
    with _Steps() as steps:
        entries = _entries_at(storage, list(range(n)), steps)
        # Children lists made only for entries that have children (most have one child,
        # in a long chain): kids[i] is None until then.
        kids: list[list[TreeNode] | None] = [None] * n
        roots: list[TreeNode] = []
        label_of = labels.get
        for i in range(n - 1, -1, -1):
            if not i % CHUNK:
                steps.step()
            entry = entries[i]
            mine = kids[i]
            if mine is None:
                node = TreeNode(entry, (), label_of(entry.id))
            else:
                mine.reverse()
                node = TreeNode(entry, mine, label_of(entry.id))
                kids[i] = None
            p = parents[i]
            if p < 0 or p >= i:
                roots.append(node)
            else:
                siblings = kids[p]
                if siblings is None:
                    kids[p] = [node]
                else:
                    siblings.append(node)
        roots.reverse()
        return roots


class _ChunkedReads:
    """The storage as ``ContextCache.build`` sees it, with the branch read chunked."""

    __slots__ = ("_storage",)

    def __init__(self, storage: SessionStorage) -> None:
        self._storage = storage

    def get_leaf_id(self) -> str | None:
        return self._storage.get_leaf_id()

    def __len__(self) -> int:
        return len(self._storage)

    def get_branch_entries(
        self, leaf_id: str | None, *, known: Mapping[str, SessionTreeEntry] | None = None
    ) -> list[SessionTreeEntry]:
        return _branch(self._storage, leaf_id, known)

    def get_context_state_entries(self, leaf_id: str | None) -> list[SessionTreeEntry]:
        return self._storage.get_context_state_entries(leaf_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)


def build_context(
    session: Session, options: SessionContextBuildOptions | None = None
) -> SessionContext:
    """``session.build_context(options)``, with the branch read chunked on an engine
    storage (what a first build, or a rebuild after a leaf move, costs)."""
    from ..context.incremental import ContextCache

    storage = session.storage
    if not chunkable(storage):
        return session.build_context(options)
    # Session.build_context, handing the cache the chunking view of the storage.
    merged = session.merge_context_build_options(options)
    with session._atomic:
        cache = session._context_cache
        if cache is None:
            cache = session._context_cache = ContextCache()
        context = cache.build(_ChunkedReads(storage), merged)  # type: ignore[arg-type]
        assert context is not None
        return context
