"""Sessions in PostgreSQL: the same API, engine and single-writer rule as the JSONL files.

:class:`PostgresSessionStorage` keeps one session as rows (its header and one row per
entry, each its exact JSONL line); :class:`PostgresSessionRepo` manages many. Both need
the ``postgres`` extra (psycopg 3 and psycopg_pool), imported on first use only.

Rooms: :mod:`.storage`, :mod:`.repo`, :mod:`._schema` (tables and migrations) and
:mod:`._connect` (connections, errors, the writer lock).
"""

from __future__ import annotations

from ._schema import SCHEMA_VERSION
from .repo import PostgresSessionRepo
from .storage import PostgresSessionStorage

__all__ = ["SCHEMA_VERSION", "PostgresSessionRepo", "PostgresSessionStorage"]
