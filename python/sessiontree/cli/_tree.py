"""``sessiontree tree``: a session's tree of entries, drawn with box-drawing characters.

Layout: a chain of entries each with one child is drawn in one column; a branch point's
children are drawn below it with ``├─``/``└─`` and their chains indented. The path from
the root to the leaf is drawn with heavy lines (``┣━``, ``┃``), the leaf is marked, and
inside a chain only the *anchors* are always shown — the chain's first and last entries,
labelled entries, compactions, branch summaries, the leaf, ``--around``'s neighbourhood —
while longer runs between them collapse into ``… 1,204 entries …`` (``--all`` shows them).

Speed: the drawing starts from :meth:`SessionStorage.get_parent_positions` (the shape of
the tree, one int per entry, no entry built) and builds only the entries it prints, chain
by chain, so the first screen of a million-entry session is written while the rest is
still being walked.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import operator
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from .. import (
    BranchSummaryEntry,
    CompactionEntry,
    JsonlSessionStorage,
    SessionError,
    SessionTreeEntry,
)
from ._describe import KIND_STYLES, entry_text, kind_of
from ._output import Output, cell_width, fit, json_text, open_output, safe_line
from ._target import Options, open_readonly, resolve

SCHEMA = "tree"

# A run of more than COLLAPSE plain entries between two anchors is cut to its first and
# last KEEP entries around one "… N entries …" line.
COLLAPSE: Final = 6
KEEP: Final = 2
# Entries are built and written in batches of this many rows.
BATCH: Final = 512
KIND_WIDTH: Final = 11
# Shorter names for the kind column (``--json`` keeps the full ones).
SHORT_KINDS: Final = {
    "branch_summary": "summary",
    "custom_message": "custom_msg",
    "compaction_summary": "compaction",
    "bash_execution": "bash",
}
ID_WIDTH: Final = 16


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", nargs="?", metavar="SESSION")
    p.add_argument(
        "--depth", type=int, metavar="N", help="draw at most N levels of branches below the root"
    )
    p.add_argument("--around", metavar="ID", help="only the branch through ID and what follows it")
    p.add_argument(
        "-C",
        "--context",
        type=int,
        default=5,
        metavar="N",
        help="with --around: entries shown on each side of ID (default 5)",
    )
    p.add_argument("--all", action="store_true", help="collapse nothing")


@dataclass(frozen=True)
class _Row:
    """One output line: an entry (``pos`` >= 0) or a collapsed run/branches (``count``)."""

    prefix: str
    pos: int = -1
    count: int = 0
    branches: int = 0
    depth: int = 0


class _Path:
    """The positions from the root down to one entry, as a few intervals.

    Most entries are appended right after their parent (parent position = own - 1); a
    path runs down such a stretch in one interval and jumps only at the *irregular*
    entries, so a million-entry path is a few dozen intervals, found by bisection.
    """

    def __init__(self, shape: _Shape, end: int) -> None:
        los: list[int] = []
        his: list[int] = []
        irregular = shape.irregular
        x = end
        while x >= 0:
            k = bisect.bisect_right(irregular, x) - 1
            # Everything after the last irregular entry up to x hangs in one line.
            y = irregular[k] if k >= 0 else 0
            los.append(y)
            his.append(x)
            x = shape.par[y]
        los.reverse()
        his.reverse()
        self._los = los
        self._his = his

    def __contains__(self, pos: int) -> bool:
        i = bisect.bisect_right(self._los, pos) - 1
        return i >= 0 and pos <= self._his[i]


class _Shape:
    """The tree's shape from parent positions, with the marks drawing needs."""

    def __init__(self, storage: JsonlSessionStorage) -> None:
        self.par = par = storage.get_parent_positions()
        self.n = n = len(par)
        # Entries whose parent is not the entry just before them (C-speed scan): with
        # them, every child list and path is known without a pass in Python.
        self.irregular: list[int] = list(
            itertools.compress(range(n), map(operator.ne, par, range(-1, n - 1)))
        )
        self.extra: dict[int, list[int]] = {}
        for i in self.irregular:
            self.extra.setdefault(par[i], []).append(i)
        leaf_id = storage.get_leaf_id()
        self.leaf = -1
        if leaf_id is not None:
            found = storage.get_positions([leaf_id])[0]
            self.leaf = -1 if found is None else found
        self.leaf_path = _Path(self, self.leaf)
        self.labels = storage.get_labels()
        ids = list(self.labels)
        for kind in ("compaction", "branch_summary"):
            ids.extend(e.id for e in storage.find_entries(kind))
        marked = {p for p in storage.get_positions(ids) if p is not None}
        if self.leaf >= 0:
            marked.add(self.leaf)
        self.marked = marked
        self._sizes: list[int] | None = None

    def on_path(self, pos: int) -> bool:
        """Whether ``pos`` is on the path from the root to the leaf."""
        return pos in self.leaf_path

    def count(self, x: int) -> int:
        """How many children position ``x`` has (``-1``: how many roots)."""
        nxt = x + 1
        regular = 1 if nxt < self.n and self.par[nxt] == x else 0
        more = self.extra.get(x)
        return regular + (len(more) if more else 0)

    def children(self, x: int) -> list[int]:
        """The children of position ``x`` (``-1``: the roots), in file order."""
        nxt = x + 1
        out = [nxt] if nxt < self.n and self.par[nxt] == x else []
        more = self.extra.get(x)
        if more:
            out.extend(more)
        return out

    def only_child(self, x: int) -> int:
        return self.children(x)[0]

    def sizes(self) -> list[int]:
        """Subtree sizes (entries in each subtree, itself included)."""
        if self._sizes is None:
            par = self.par
            size = [1] * self.n
            for i in range(self.n - 1, -1, -1):
                p = par[i]
                if p >= 0:
                    size[p] += size[i]
            self._sizes = size
        return self._sizes

    def leaves_under(self, x: int) -> int:
        # Branch count shown in summaries: leaves below x, walked without recursion.
        stack = [x]
        leaves = 0
        while stack:
            y = stack.pop()
            kids = self.children(y)
            if not kids:
                leaves += 1
            stack.extend(kids)
        return leaves


class _Layout:
    """Turns the shape into rows, chain by chain (a generator: the first rows come out
    before the rest of the tree is walked)."""

    def __init__(
        self,
        shape: _Shape,
        *,
        collapse: bool,
        depth: int | None,
        around: int | None,
        context: int,
    ) -> None:
        self.shape = shape
        self.collapse = collapse
        self.depth = depth
        self.around = around
        self.keep: set[int] = set()
        self.path_to_around = _Path(shape, -1 if around is None else around)
        if around is not None:
            self._mark_around(around, context)

    def _mark_around(self, target: int, context: int) -> None:
        shape = self.shape
        x = target
        for _ in range(context + 1):
            if x < 0:
                break
            self.keep.add(x)
            x = shape.par[x]
        frontier = [target]
        for _ in range(context):
            frontier = [c for y in frontier for c in shape.children(y)]
            self.keep.update(frontier)

    def rows(self) -> Iterator[list[_Row]]:
        shape = self.shape
        # (start position or -1 - size for a summary, first-line prefix, later-lines
        # prefix, depth or branch count for a summary, inside --around's subtree)
        stack: list[tuple[int, str, str, int, bool]] = []
        self._push_children(stack, -1, "", 0, inside=self.around is None, top=True)
        while stack:
            start, first, rest, depth, inside = stack.pop()
            if start < 0:  # branches not drawn
                yield [_Row(first, count=-start - 1, branches=depth)]
                continue
            chain = [start]
            x = start
            while shape.count(x) == 1:
                x = shape.only_child(x)
                chain.append(x)
            yield from self._chain_rows(chain, first, rest, depth)
            end = chain[-1]
            if shape.count(end) > 1:
                inside = inside or (self.around is not None and self.around in chain)
                self._push_children(stack, end, rest, depth, inside=inside, top=False)

    def _push_children(
        self,
        stack: list[tuple[int, str, str, int, bool]],
        x: int,
        rest: str,
        depth: int,
        *,
        inside: bool,
        top: bool,
    ) -> None:
        """Pushes the children of branch point ``x`` (``-1``: the roots).

        One child continues the chain in the same column — the *mainline*: the one on the
        way to the leaf (or to ``--around``'s entry), else the newest. The others are side
        branches drawn before it, one level in (``├─``), with the column's line running on
        past them down to the mainline. So a session that branched a thousand times, each
        time going back a few entries and carrying on, stays one column wide.
        """
        shape = self.shape
        kids = shape.children(x)
        if not kids:
            return
        if inside:
            on, off = kids, []
        else:  # above --around's entry: only the child on the way to it
            on = [k for k in kids if k in self.path_to_around]
            off = [k for k in kids if k not in self.path_to_around]
        main = next((k for k in on if shape.on_path(k)), None)
        if not inside or main is None:
            main = on[-1] if on else None
        sides = [k for k in on if k != main]
        if self.depth is not None and depth + 1 > self.depth:
            sides, off = [], sorted(off + sides)
        del top
        # (position, or -1 - entries for the summary of `off`; depth or branch count)
        order: list[tuple[int, int]] = [(k, depth + 1) for k in sides]
        if off:
            size = sum(shape.sizes()[k] for k in off)
            order.append((-size - 1, sum(shape.leaves_under(k) for k in off)))
        active = next((i for i, (k, _) in enumerate(order) if k >= 0 and shape.on_path(k)), -1)
        if main is not None and shape.on_path(main):
            active = len(order)
        items: list[tuple[int, str, str, int, bool]] = []
        for i, (k, d) in enumerate(order):
            if i < active:
                conn, cont = "┠─ ", "┃  "
            elif i == active:
                conn, cont = "┣━ ", "│  "
            else:
                conn, cont = "├─ ", "│  "
            if main is None and i == len(order) - 1:  # nothing below: close the column
                conn = {"┣━ ": "┗━ ", "├─ ": "└─ ", "┠─ ": "┖─ "}[conn]
                cont = "   "
            items.append((k, rest + conn, rest + cont, d, inside))
        if main is not None:
            items.append((main, rest, rest, depth, inside))
        stack.extend(reversed(items))

    def _chain_rows(
        self, chain: list[int], first: str, rest: str, depth: int
    ) -> Iterator[list[_Row]]:
        shape = self.shape
        if self.collapse:
            marked, keep = shape.marked, self.keep
            anchors = [0]
            anchors.extend(
                i for i in range(1, len(chain) - 1) if chain[i] in marked or chain[i] in keep
            )
            if len(chain) > 1:
                anchors.append(len(chain) - 1)
        else:
            anchors = list(range(len(chain)))
        batch: list[_Row] = []

        def entry(i: int) -> _Row:
            return _Row(first if i == 0 else rest, pos=chain[i], depth=depth)

        prev = -1
        for a in anchors:
            gap = a - prev - 1
            if gap > COLLAPSE:
                batch.extend(entry(i) for i in range(prev + 1, prev + 1 + KEEP))
                batch.append(_Row(rest, count=gap - 2 * KEEP, depth=depth))
                batch.extend(entry(i) for i in range(a - KEEP, a))
            else:
                batch.extend(entry(i) for i in range(prev + 1, a))
            batch.append(entry(a))
            prev = a
            if len(batch) >= BATCH:
                yield batch
                batch = []
        if batch:
            yield batch


def _around_position(storage: JsonlSessionStorage, entry_id: str) -> int:
    pos = storage.get_positions([entry_id])[0]
    if pos is None:
        raise SessionError("not_found", f"entry {entry_id!r} not found")
    return pos


def run(args: argparse.Namespace, opts: Options) -> int:
    path = resolve(opts, args.session)
    color_mode = "never" if args.json else opts.color
    storage = open_readonly(opts, path, color=color_mode != "never")
    with storage:
        shape = _Shape(storage)
        around = None if args.around is None else _around_position(storage, args.around)
        if args.depth is not None and args.depth < 0:
            raise SessionError("invalid_argument", "--depth must not be negative")
        layout = _Layout(
            shape,
            collapse=not args.all and not args.json,
            depth=args.depth,
            around=around,
            context=max(0, args.context),
        )
        if args.json:
            with open_output(color_mode="never", pager=False) as out:
                _write_json(out, storage, path, shape, layout)
            return 0
        with open_output(color_mode=opts.color, pager=opts.pager) as out:
            _write_text(out, storage, shape, layout, around)
    return 0


def _header(storage: JsonlSessionStorage) -> tuple[str, str | None]:
    return storage.get_metadata().id, storage.get_session_name()


def _write_text(
    out: Output, storage: JsonlSessionStorage, shape: _Shape, layout: _Layout, around: int | None
) -> None:
    sid, name = _header(storage)
    leaf_id = None if shape.leaf < 0 else storage.get_entries_at([shape.leaf])[0].id
    title = f"{name} · " if name else ""
    head = safe_line(f"{title}session {sid} · {shape.n:,} entries · leaf {leaf_id or '—'}")
    out.line(out.paint(fit(head, out.width), "bold"))
    if shape.n == 0:
        out.line(out.paint("(no entries)", "dim"))
        return
    for batch in layout.rows():
        entries = storage.get_entries_at([r.pos for r in batch if r.pos >= 0])
        it = iter(entries)
        for row in batch:
            if row.pos < 0:
                out.line(_summary_line(out, row))
            else:
                out.line(_entry_line(out, shape, row, next(it), around))


def _summary_line(out: Output, row: _Row) -> str:
    if row.branches:
        s = "es" if row.branches != 1 else ""
        text = f"… {row.count:,} entries in {row.branches:,} branch{s} …"
    else:
        text = f"… {row.count:,} entr{'ies' if row.count != 1 else 'y'} …"
    return out.paint(row.prefix, "grey") + out.paint(
        fit(text, out.width - cell_width(row.prefix)), "dim"
    )


def _entry_line(
    out: Output, shape: _Shape, row: _Row, entry: SessionTreeEntry, around: int | None
) -> str:
    on_path = shape.on_path(row.pos)
    kind = kind_of(entry)
    shown_kind = safe_line(SHORT_KINDS.get(kind, kind))
    eid = fit(safe_line(entry.id), ID_WIDTH)
    suffix = ""
    label = shape.labels.get(entry.id)
    if label:
        label = safe_line(label)
    if label:
        suffix += "  " + out.paint(f"[{label}]", "bold yellow")
    if row.pos == shape.leaf:
        suffix += "  " + out.paint("◀ leaf", "bold reverse")
    if around is not None and row.pos == around:
        suffix += "  " + out.paint("◀ here", "bold underline")
    plain_suffix = 0
    if label:
        plain_suffix += 4 + cell_width(label)
    if row.pos == shape.leaf:
        plain_suffix += 8
    if around is not None and row.pos == around:
        plain_suffix += 8
    room = out.width - cell_width(row.prefix) - len(eid) - KIND_WIDTH - 2 - plain_suffix
    # One character more than there is room for, so that a cut text ends in "…".
    text = fit(entry_text(entry, max(room, 1) + 1), room)
    kind_style = KIND_STYLES.get(kind)
    if isinstance(entry, (CompactionEntry, BranchSummaryEntry)):
        kind_style = "bold " + (kind_style or "")
    body_style = None if on_path else "dim"
    return (
        out.paint(row.prefix, "bold" if on_path else "grey")
        + out.paint(eid, "grey")
        + " "
        + out.paint(shown_kind.ljust(KIND_WIDTH), kind_style.strip() if kind_style else None)
        + " "
        + out.paint(text, body_style)
        + suffix
    )


def _write_json(
    out: Output, storage: JsonlSessionStorage, path: str, shape: _Shape, layout: _Layout
) -> None:
    sid, name = _header(storage)
    leaf_id = None if shape.leaf < 0 else storage.get_entries_at([shape.leaf])[0].id
    head = {
        "session": {"id": sid, "path": path, "name": name},
        "entry_count": shape.n,
        "leaf_id": leaf_id,
    }
    text = json_text(head, indent=2)
    out.write(text[:-2] + ',\n  "nodes": [')
    first = True
    for batch in layout.rows():
        entries = storage.get_entries_at([r.pos for r in batch if r.pos >= 0])
        it = iter(entries)
        for row in batch:
            if row.pos < 0:
                continue
            entry = next(it)
            node = {
                "id": entry.id,
                "parent_id": entry.parent_id,
                "type": entry.type,
                "kind": kind_of(entry),
                "depth": row.depth,
                "children": shape.count(row.pos),
                "label": shape.labels.get(entry.id),
                "on_leaf_path": shape.on_path(row.pos),
                "is_leaf": row.pos == shape.leaf,
                "timestamp": entry.timestamp,
                "text": entry_text(entry),
            }
            out.write(("\n    " if first else ",\n    ") + json_text(node))
            first = False
    out.write("\n  ]\n}\n" if not first else "]\n}\n")
