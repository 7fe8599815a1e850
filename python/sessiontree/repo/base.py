"""The repository interface and the argument checks every repository shares."""

from __future__ import annotations

import abc
import builtins
import os
import re
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any, Final, Literal, TypeAlias

from .._util import check_text, uuid7
from ..errors import SessionError
from ..model.entries import (
    SessionHeader,
    SessionTreeEntry,
    header_to_json,
)
from ..model.types import SessionMetadata
from ..search import SearchHit, SearchOrder, SearchPlan, search_plan
from ..session import Session

__all__ = ["FORK_POSITIONS", "ForkPosition", "SessionRef", "SessionRepo", "is_valid_session_id"]


ForkPosition: TypeAlias = Literal["before", "at"]
"""Where a fork starts relative to its target entry."""

FORK_POSITIONS: Final[tuple[str, ...]] = ("before", "at")
"""The allowed values of ``position`` in :meth:`SessionRepo.fork`."""

SessionRef: TypeAlias = SessionMetadata | str
"""A session named by its :class:`SessionMetadata` (from ``list``) or by its id."""

# ``fullmatch`` rather than ``$``: ``$`` also matches before a trailing newline.
_SESSION_ID_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_SUFFIX: Final = ".jsonl"

_MIN_TIME: Final = datetime.min.replace(tzinfo=timezone.utc)

# --------------------------------------------------------------------------- argument checks


def is_valid_session_id(session_id: object) -> bool:
    """Tell whether ``session_id`` is usable as a session id (and so as a file name).

    A session id is 1-128 ASCII letters, digits, ``.``, ``_`` or ``-``, starting with a
    letter or digit: ``^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$``. That rules out path
    separators, ``..``, hidden names and names too long for a file system.

    Args:
        session_id: the candidate.

    Returns:
        True if it is a ``str`` matching the pattern.

    >>> is_valid_session_id("0192f3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b"), is_valid_session_id("../x")
    (True, False)
    """
    return isinstance(session_id, str) and _SESSION_ID_RE.fullmatch(session_id) is not None


def _check_session_id(session_id: object) -> str:
    if not isinstance(session_id, str):
        raise SessionError(
            "invalid_argument", f"a session id must be a str, not {type(session_id).__name__}"
        )
    if _SESSION_ID_RE.fullmatch(session_id) is None:
        shown = session_id if len(session_id) <= 60 else session_id[:57] + "..."
        raise SessionError(
            "invalid_id",
            f"{shown!r} is not a valid session id (1-128 characters of A-Z a-z 0-9 . _ -, "
            "starting with a letter or digit)",
        )
    return session_id


def _ref_id(ref: object) -> str:
    if isinstance(ref, SessionMetadata):
        return _check_session_id(ref.id)
    if isinstance(ref, str):
        return _check_session_id(ref)
    raise SessionError(
        "invalid_argument",
        f"a session reference must be a SessionMetadata or a session id, not {type(ref).__name__}",
    )


def _new_header(
    cwd: object, name: object, parent_session: object, metadata: object, session_id: object
) -> SessionHeader:
    """Checks ``create``'s arguments and builds the new session's header."""
    if cwd is None:
        cwd_text = os.getcwd()
    elif isinstance(cwd, (str, os.PathLike)):
        cwd_text = os.fspath(cwd)
        if not isinstance(cwd_text, str):
            raise SessionError("invalid_argument", "cwd must be a str path, not bytes")
    else:
        raise SessionError(
            "invalid_argument", f"cwd must be a str or os.PathLike, not {type(cwd).__name__}"
        )
    if name is not None and not isinstance(name, str):
        raise SessionError(
            "invalid_argument", f"name must be a str or None, not {type(name).__name__}"
        )
    if parent_session is not None and not isinstance(parent_session, str):
        raise SessionError(
            "invalid_argument",
            f"parent_session must be a str or None, not {type(parent_session).__name__}",
        )
    for arg, text in (("cwd", cwd_text), ("name", name), ("parent_session", parent_session)):
        if text is not None:
            check_text(arg, text)
    sid = uuid7() if session_id is None else _check_session_id(session_id)
    header = SessionHeader.generate(
        cwd=cwd_text,
        parent_session=parent_session,
        metadata=metadata,  # type: ignore[arg-type]  # SessionHeader validates it
        session_id=sid,
    )
    # Encoded once here, so metadata no file can hold (a lone surrogate, NaN) is refused
    # before a repository makes any file or folder for the session.
    header_to_json(header)
    return header


def _check_list_args(cwd: object, limit: object) -> str | None:
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise SessionError(
                "invalid_argument", f"limit must be an int or None, not {type(limit).__name__}"
            )
        if limit < 0:
            raise SessionError("invalid_argument", f"limit must not be negative (got {limit})")
    if cwd is None:
        return None
    if isinstance(cwd, (str, os.PathLike)):
        text = os.fspath(cwd)
        if isinstance(text, str):
            # No header can hold it (a header is UTF-8), so the filter is refused as
            # create(cwd=...) refuses it, not answered with an empty listing.
            check_text("cwd", text)
            return os.path.normpath(text)
    raise SessionError(
        "invalid_argument", f"cwd must be a str, os.PathLike or None, not {type(cwd).__name__}"
    )


def _check_fork_args(entry_id: object, position: object) -> None:
    if position not in FORK_POSITIONS:
        raise SessionError(
            "invalid_argument", f"position must be 'before' or 'at' (got {position!r})"
        )
    if entry_id is not None:
        if not isinstance(entry_id, str):
            raise SessionError(
                "invalid_argument",
                f"entry_id must be a str or None, not {type(entry_id).__name__}",
            )
        check_text("entry_id", entry_id)


def newest_first_key(meta: SessionMetadata) -> tuple[datetime, datetime, str]:
    """The order of a listing (reversed): the last change, then creation, then the id, so
    sessions with equal times still come out in one order everywhere (the listing cache
    keeps full rows for the sessions a listing shows first)."""
    return (meta.modified or _MIN_TIME, meta.created or _MIN_TIME, meta.id)


def _select(
    rows: Iterable[SessionMetadata], cwd: str | None, limit: int | None
) -> list[SessionMetadata]:
    if cwd is not None:
        # A file whose header could not be read has no known cwd ("") and is kept in
        # every filtered listing, so a broken session is never hidden.
        rows = [m for m in rows if not m.cwd or os.path.normpath(m.cwd) == cwd]
    out = sorted(
        rows,
        key=newest_first_key,
        reverse=True,
    )
    return out if limit is None else out[:limit]


# --------------------------------------------------------------------------- the interface


class SessionRepo(abc.ABC):
    """Many sessions: create, open, list, delete and fork them.

    ``open`` (and the session returned by ``create`` and ``fork``) is a writer: while it is
    open, a second ``open`` of the same session raises ``locked``, and so does ``delete``.
    Close sessions (or use them as context managers) when done.
    """

    @abc.abstractmethod
    def create(
        self,
        *,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a new, empty session and open it.

        Args:
            cwd: the working directory the session belongs to; defaults to ``os.getcwd()``.
            name: an initial name, written as a ``session_info`` entry.
            parent_session: the id of the session this one derives from.
            metadata: application data for the header (a JSON object).
            session_id: the id to use; a new UUIDv7 by default.

        Returns:
            The open session.

        Raises:
            SessionError: ``invalid_id`` for an unsafe ``session_id`` (nothing is created),
                ``exists`` if the id is taken, ``invalid_argument`` for a bad value.
        """

    @abc.abstractmethod
    def open(self, ref: SessionRef) -> Session:
        """Open a session as its writer.

        Args:
            ref: a :class:`SessionMetadata` from :meth:`list`, or a session id.

        Raises:
            SessionError: ``not_found`` for an unknown session, ``locked`` if it is already
                open for writing, ``invalid_id`` for an unsafe id.
        """

    @abc.abstractmethod
    def list(
        self, *, cwd: str | os.PathLike[str] | None = None, limit: int | None = None
    ) -> builtins.list[SessionMetadata]:
        """Every session's metadata, newest ``modified`` first.

        Args:
            cwd: keep only the sessions of this working directory.
            limit: return at most this many.

        Raises:
            SessionError: ``invalid_argument`` for a negative ``limit``.
        """

    @abc.abstractmethod
    def delete(self, ref: SessionRef) -> None:
        """Delete a session and everything derived from it.

        Raises:
            SessionError: ``not_found`` for an unknown session, ``locked`` while a writer
                has it open.
        """

    @abc.abstractmethod
    def fork(
        self,
        source: SessionRef,
        *,
        entry_id: str | None = None,
        position: ForkPosition = "before",
    ) -> Session:
        """Copy a session (or one branch of it) into a new session and open that.

        The entries are chosen by :func:`get_entries_to_fork` and copied first, with their
        ids and timestamps. Then, so the fork shows the source's labels (for the copied
        entries) and session name, ``label`` and ``session_info`` entries are appended
        after the copied entries wherever the copied ones do not already say so (new
        ids, the current time), followed by a ``leaf`` entry if the leaf would otherwise
        not be where it belongs: the source's leaf for a full copy, else the last copied
        entry. The new header gets a new id, the current time, ``parent_session`` = the
        source id, and the source's ``cwd`` and ``metadata``. The source may be open,
        even by a writer.

        Args:
            source: the session to fork.
            entry_id: the fork target; ``None`` copies everything.
            position: ``"before"`` or ``"at"`` the target.

        Raises:
            SessionError: ``not_found`` (unknown session or entry), ``invalid_fork_target``,
                ``invalid_argument``.
        """

    # -- search ------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        roles: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        session_id: str | None = None,
        branch_only: bool = False,
        order: SearchOrder = "relevance",
        limit: int = 50,
    ) -> builtins.list[SearchHit]:
        """Find the entries of every session that match ``query``, best first.

        The query language (the same on every repository; ``docs/search.md``): words
        match whole tokens case-insensitively (``snake_case``, ``dotted.names`` and
        ``paths/like/this`` also by their parts), every word must appear in the entry,
        ``"quoted phrases"`` match consecutive tokens, ``-word`` excludes, a trailing
        ``*`` matches a prefix. Searched: the decoded text of messages (user and
        assistant text, thinking, tool-call names and arguments, tool results), custom
        messages, compaction and branch summaries, labels and session names; never JSON
        keys, ids, timestamps or image data.

        Args:
            query: what to find.
            roles: keep only messages of these roles (``"user"``, ``"assistant"``,
                ``"tool_result"``, ...).
            types: keep only entries of these types (``"message"``, ``"compaction"``, ...).
            since: keep entries at or after this time (a datetime, a date, or ISO 8601;
                naive times are UTC).
            until: keep entries before this time.
            cwd: keep only the sessions of this working directory.
            session_id: search only this session.
            branch_only: keep only entries on their session's current branch.
            order: ``"relevance"`` (best score, then newest) or ``"newest"``.
            limit: the most hits to return (1 to 10,000).

        Returns:
            The hits, best first.

        Raises:
            SessionError: ``invalid_argument`` for a bad query (nothing to find, an
                unbalanced quote, too many terms) or argument.

        >>> import sessiontree as st
        >>> repo = st.InMemorySessionRepo()
        >>> with repo.create(cwd="/w") as s:
        ...     _ = s.append_message(st.UserMessage("Retry with backoff?"))
        >>> [(h.role, h.snippet) for h in repo.search("retry")]
        [('user', '**Retry** with backoff?')]
        """
        plan = search_plan(
            query,
            roles=roles,
            types=types,
            since=since,
            until=until,
            cwd=cwd,
            session_id=session_id,
            branch_only=branch_only,
            order=order,
            limit=limit,
        )
        return self._search(plan)

    def read_entry(self, ref: SessionRef, entry_id: str) -> SessionTreeEntry | None:
        """One entry of a session, read without taking the session's writer lock (so
        it works while an agent is writing it): how a search hit is opened.

        The default opens the session (``locked`` while a writer has it); the
        repositories of this package read it without opening a writer.

        Raises:
            SessionError: ``not_found`` for an unknown session, ``invalid_id``.
        """
        _check_fork_args(entry_id, "at")
        with self.open(ref) as session:
            return session.get_entry(entry_id)

    def _search(self, plan: SearchPlan) -> builtins.list[SearchHit]:
        """Runs a checked search. The default opens every listed session in turn (a
        session open elsewhere for writing raises ``locked``); the repositories of this
        package read their sessions without opening them."""
        docs: builtins.list[tuple[str, bytes]] = []
        members: dict[str, set[str]] = {}
        for meta in self.list(cwd=plan.cwd):
            if not plan.wants(meta.id):
                continue
            with self.open(meta) as session:
                doc = session.storage.search_document()
                if isinstance(doc, str):
                    with open(doc, "rb") as f:
                        doc = f.read()
                docs.append((meta.id, doc))
                members[meta.id] = (
                    {e.id for e in session.storage.get_path_to_root(session.get_leaf_id())}
                    if session.get_leaf_id() is not None
                    else set()
                )
        return plan.scan(docs, lambda sid, ids: members[sid] & set(ids))
