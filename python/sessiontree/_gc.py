"""The cyclic garbage collector paused around bulk builds, in one place.

Reading a session builds many objects at once: entries, messages, blocks, or a framework's
item dicts (10^5 and more for a big session). None of them is garbage yet, but CPython's
collector (not incremental) would scan them all, several times: once in each young
collection while they are young, and in every full collection it starts because the heap
grew by a quarter. Measured: a third of a cold ``build_context``, 28 % of an OpenAI batch
``add_items`` of 100k items. Reference counting frees everything as usual while the
collector is paused; only cycles wait.

When the paused block made many objects, they are then moved to the oldest generation
(``gc.freeze()`` then ``gc.unfreeze()``: two list splices, no scan), as if they had
survived their young collections, so the next young collection does not scan them in one
go; garbage among them goes at the next full collection. A block that made few objects
leaves the generations as they were (freezing after every small read would keep young
collections, and so cyclic garbage collection, from ever running). Nothing is done when
the collector was off already or the application froze objects itself.
"""

from __future__ import annotations

import gc

__all__ = ["paused_gc"]

# Objects tracked by the collector a paused block must have made for its objects to be
# moved to the oldest generation (ten young collections' worth at the default threshold).
_BULK: int = 7_000


class paused_gc:
    """``with paused_gc():`` runs the block with the cyclic collector paused (see the
    module's docstring); reentrant, and a no-op when the collector is off.

    ``bulk=True`` moves what the block made to the oldest generation whatever its count
    (a build known to be big, made in steps between which other code allocates too)."""

    __slots__ = ("_bulk", "_was_on")

    def __init__(self, *, bulk: bool = False) -> None:
        self._bulk = bulk

    def __enter__(self) -> None:
        self._was_on = gc.isenabled()
        if self._was_on:
            gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._was_on:
            if (self._bulk or gc.get_count()[0] > _BULK) and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()
