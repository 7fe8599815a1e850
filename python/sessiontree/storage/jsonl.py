"""``JsonlSessionStorage``: a session in a JSONL file, on the engine."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .. import _core
from .._util import fspath_arg
from ..errors import SessionError
from ..model.entries import SessionHeader
from .engine import Limits, _check_durability, _EngineStorage, _index, _limits, _make_header

if TYPE_CHECKING:
    from typing import Literal

    from .base import Durability

__all__ = ["JsonlSessionStorage"]


class JsonlSessionStorage(_EngineStorage):
    """A session in an append-only JSONL file.

    Use :meth:`create` for a new file and :meth:`open` for an existing one. A writer
    holds the file's single-writer lock until :meth:`close`.
    """

    def __init__(
        self, engine: _core.Engine, durability: str = "group", readonly: bool = False
    ) -> None:
        if not isinstance(engine, _core.Engine):
            # The seed builds this storage from a path; point such callers to the factories.
            raise SessionError(
                "invalid_argument",
                "use JsonlSessionStorage.create(path) or JsonlSessionStorage.open(path)",
            )
        super().__init__(engine)
        self._durability = durability
        self._readonly = readonly
        self._may_append = not readonly

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        header: SessionHeader | None = None,
        *,
        durability: Durability = "group",
        limits: Limits | None = None,
        index: bool | int = True,
        dialect: Literal["sessiontree", "pi"] = "sessiontree",
    ) -> JsonlSessionStorage:
        """Creates a new session file (mode 0600); ``exists`` if the file is there.

        Args:
            path: the file to create.
            header: the header to write (a new one by default).
            durability: ``none``, ``flush``, ``group`` or ``fsync``.
            limits: size limits.
            index: keep a persisted index once the file is large (see :meth:`open`).
            dialect: ``"pi"`` writes the file in pi's dialect (a v3 pi session that pi
                can resume); entries are the same objects either way.
        """
        file = fspath_arg("path", path)
        mode = _check_durability(durability)
        if dialect not in ("sessiontree", "pi"):
            # Checked here too: the engine takes only a str (a bare TypeError otherwise).
            raise SessionError(
                "invalid_argument", f'dialect must be "sessiontree" or "pi", not {dialect!r}'
            )
        engine = _core.Engine.create(
            file,
            _make_header(header),
            mode,
            **_limits(limits),
            **_index(index),
            dialect=dialect,
        )
        return cls(engine, mode, False)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        readonly: bool = False,
        strict: bool = False,
        durability: Durability = "group",
        limits: Limits | None = None,
        index: bool | int = True,
    ) -> JsonlSessionStorage:
        """Opens a session file.

        Args:
            path: the session file.
            readonly: take no lock and never change the file (see :meth:`refresh`).
            strict: raise ``corrupt`` on any problem instead of skipping and reporting it.
            durability: ``none``, ``flush``, ``group`` or ``fsync`` (writers).
            limits: size limits.
            index: use and keep a persisted index ``<file>.idx`` for files of 128 KiB or
                more (an int sets that threshold in bytes; ``False`` never reads or writes
                one). The index only saves the reopen scan: it is checked against the
                file and rebuilt when stale, torn or foreign, and the JSONL file stays the
                only source of truth. Read-only opens write it too (best effort) but never
                touch the session file.

        Raises:
            SessionError: ``not_found``, ``corrupt``, ``locked``, ``io``, ...
        """
        file = fspath_arg("path", path)
        mode = _check_durability(durability)
        engine = _core.Engine.open(
            file,
            bool(readonly),
            bool(strict),
            mode,
            **_limits(limits),
            **_index(index),
        )
        return cls(engine, mode, bool(readonly))

    @property
    def path(self) -> str:
        """The session file."""
        return str(self._engine.path)

    @property
    def readonly(self) -> bool:
        """True when opened read-only."""
        return self._readonly

    @property
    def durability(self) -> str:
        """The durability mode of appends."""
        return self._durability

    @property
    def index_status(self) -> str:
        """What the persisted index did at open: ``unused``, ``loaded``, ``created`` or
        ``rebuilt`` (one was there but stale, torn or foreign)."""
        return self._engine.index_status

    @property
    def torn_path(self) -> str | None:
        """Where a writer open saved a torn last line, if it cut one."""
        p = self._engine.torn_path
        return None if p is None else str(p)

    def refresh(self) -> int:
        """Reads lines another writer appended since opening (read-only storages).

        Returns:
            the number of new entries.
        """
        self._check()
        return self._engine.refresh()

    def search_document(self) -> str:
        """The file's path (a writer flushes first): a search reads the file."""
        self._check()
        if not self._readonly:
            self.flush()
        return self.path

    def _refuse_append(self) -> None:
        self._check()  # closed comes first
        raise SessionError("readonly", f"{self.path} is open read-only")

    def __repr__(self) -> str:
        if self.closed:
            state = "closed"
        else:
            state = f"{len(self)} entries, {'read-only' if self._readonly else self._durability}"
        return f"<JsonlSessionStorage {self.path!r} {state}>"
