"""Session storages: the ``SessionStorage`` interface and the two engine-backed storages.

``InMemorySessionStorage`` and ``JsonlSessionStorage`` run on the same Rust engine: one
keeps its JSONL document in memory, the other in a file. Entries stay raw bytes in the
engine and become Python objects only when asked for.

Rooms: :mod:`.base` (the interface), :mod:`.engine` (what the engine-backed storages
share), :mod:`.memory` and :mod:`.jsonl`.
"""

from __future__ import annotations

from .base import DURABILITY_MODES, Durability, SessionStorage
from .engine import Limits
from .jsonl import JsonlSessionStorage
from .memory import InMemorySessionStorage

__all__ = [
    "DURABILITY_MODES",
    "Durability",
    "InMemorySessionStorage",
    "JsonlSessionStorage",
    "Limits",
    "SessionStorage",
]
