"""Search: find what was said in any session, with one query language everywhere.

:meth:`SessionRepo.search <sessiontree.SessionRepo.search>` searches every session of a
repository, :meth:`Session.search <sessiontree.Session.search>` one session (every
branch); both return :class:`SearchHit` values, best first. The tokeniser and the query
language live once, in the Rust engine (``rust/engine/search``); the file repositories scan
(or use their index, :mod:`sessiontree.search.index`), PostgreSQL asks its GIN index for
candidates, and every backend checks candidates with the same matcher, so the answers are
the same everywhere.

The query language (``docs/search.md``):

* words match whole tokens, case-insensitively; tokens are cut at Unicode word
  boundaries and at punctuation, so ``snake_case``, ``dotted.names`` and
  ``paths/like/this`` also match by their parts; every word must appear in the entry;
* ``"quoted phrases"`` match consecutive tokens (a word with parts is such a phrase);
* ``-word`` (or ``-"a phrase"``) excludes entries that have it;
* a trailing ``*`` matches a prefix: ``retr*``.

>>> [h.snippet for h in _demo().search("retry back*")]
['We will **retry** with exponential **backoff**.']
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timezone
from typing import Any, Final, Literal, TypeAlias

from .. import _core
from .._util import check_text
from ..errors import SessionError

__all__ = [
    "SEARCH_ORDERS",
    "SearchHit",
    "SearchOrder",
    "SearchPlan",
    "search_plan",
    "search_tokens",
]

SearchOrder: TypeAlias = Literal["relevance", "newest"]
"""How hits are ordered: best score first (then newest), or newest first."""

SEARCH_ORDERS: Final[tuple[str, ...]] = ("relevance", "newest")
"""The allowed values of ``order``."""

MAX_LIMIT: Final = 10_000
"""The largest ``limit`` a search accepts."""


@dataclasses.dataclass(frozen=True, slots=True)
class SearchHit:
    """One entry that matched a search.

    Attributes:
        session_id: the session (in a pi repository, pi's session id).
        entry_id: the entry (open it with ``session.get_entry(entry_id)``).
        entry_type: the entry's type (``"message"``, ``"compaction"``, ``"label"``, ...).
        role: the message's role for a message entry, else ``None``.
        timestamp: the entry's time (``None`` if it does not read as one).
        snippet: the text around the first match, at most about 200 characters, white
            space folded, ``…`` where cut, every match between ``**`` marks.
        marks: the ``(start, end)`` character offsets of each marked match in
            ``snippet`` (the text between the ``**``).
        score: the relevance (higher is better); it depends on the entry alone, so every
            backend gives the same.
        on_branch: whether the entry is on its session's current branch (the path from
            the leaf to the root).
    """

    session_id: str
    entry_id: str
    entry_type: str
    role: str | None
    timestamp: datetime | None
    snippet: str
    marks: tuple[tuple[int, int], ...]
    score: float
    on_branch: bool

    def to_json(self) -> dict[str, Any]:
        """The hit as JSON-able values (``timestamp`` as ISO 8601 UTC), the shape of
        ``sessiontree search --json``."""
        return {
            "session_id": self.session_id,
            "entry_id": self.entry_id,
            "entry_type": self.entry_type,
            "role": self.role,
            "timestamp": None if self.timestamp is None else _iso(self.timestamp),
            "snippet": self.snippet,
            "marks": [list(m) for m in self.marks],
            "score": self.score,
            "on_branch": self.on_branch,
        }


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def search_tokens(text: str) -> list[str]:
    """The tokens of ``text`` as search sees them: lowercased, in order.

    >>> search_tokens("Retry snake_case in «Café» 東京")
    ['retry', 'snake', 'case', 'in', 'café', '東', '京']
    """
    if not isinstance(text, str):
        raise SessionError("invalid_argument", f"text must be a str, not {type(text).__name__}")
    check_text("text", text)
    tokens: list[str] = _core.search_tokens(text)
    return tokens


# --------------------------------------------------------------------------- the plan


@dataclasses.dataclass(frozen=True, slots=True)
class SearchPlan:
    """A search's checked arguments (made by :func:`search_plan`), what a repository's
    search implementation receives."""

    query: str
    terms: tuple[tuple[tuple[str, ...], bool, bool], ...]
    roles: tuple[str, ...] | None
    types: tuple[str, ...] | None
    since_ms: int | None
    until_ms: int | None
    cwd: str | None
    session_id: str | None
    branch_only: bool
    order: SearchOrder
    limit: int

    def wants(self, session_id: str) -> bool:
        """Whether the session ``session_id`` is searched (``session_id=`` given)."""
        return self.session_id is None or session_id == self.session_id

    def scan(
        self,
        sources: Sequence[tuple[str, str | bytes]],
        branch_of: Callable[[str, Sequence[str]], set[str]],
        *,
        whole: bool = False,
        limits: Any = None,
        threads: int = 1,
        branches: Callable[[dict[str, list[str]]], dict[str, set[str]]] | None = None,
    ) -> list[SearchHit]:
        """Scans session documents: ``sources`` are ``(session id, path or document
        bytes)``, each a header line then entry lines; ``branch_of(session id, entry
        ids)`` tells which of those entries are on the session's current branch.

        ``whole``: the documents hold every line of their sessions (read with
        ``limits``, a :class:`~sessiontree.storage.Limits`), so the engine tells most
        hits' branch from them and ``branch_of`` is asked only for the rest (on up to
        ``threads`` threads). ``branches({session id: entry ids})``, when given, is asked
        first, for all of them at once; the sessions it leaves out go to ``branch_of``."""
        caps = {} if limits is None else limits.kwargs()
        raw = _core.search_documents(
            self.query,
            list(sources),
            roles=None if self.roles is None else list(self.roles),
            types=None if self.types is None else list(self.types),
            since_ms=self.since_ms,
            until_ms=self.until_ms,
            newest=self.order == "newest",
            limit=None if self.branch_only else self.limit,
            whole=whole,
            max_line_bytes=caps.get("max_line_bytes"),
            max_id_bytes=caps.get("max_id_bytes"),
        )
        return self.finish(raw, branch_of, threads=threads, branches=branches)

    def finish(
        self,
        raw: Iterable[tuple[Any, ...]],
        branch_of: Callable[[str, Sequence[str]], set[str]],
        *,
        threads: int = 1,
        branches: Callable[[dict[str, list[str]]], dict[str, set[str]]] | None = None,
    ) -> list[SearchHit]:
        """Turns the engine's hit tuples (best first) into :class:`SearchHit` values,
        marking (and with ``branch_only`` keeping only) those on their current branch:
        as the engine told it, else as ``branches`` (all at once) or ``branch_of`` (a
        session at a time, on up to ``threads`` threads) tells."""
        rows = list(raw)
        by_session: dict[str, list[str]] = {}
        for r in rows:
            if r[9] is None:
                by_session.setdefault(r[1], []).append(r[2])
        on: dict[str, set[str]] = {}
        if branches is not None and by_session:
            on = branches(by_session)
            by_session = {sid: ids for sid, ids in by_session.items() if sid not in on}
        if threads > 1 and len(by_session) > 1:
            with ThreadPoolExecutor(max_workers=min(threads, len(by_session))) as pool:
                told = pool.map(branch_of, by_session, by_session.values())
                on.update(zip(by_session, told, strict=True))
        else:
            on.update((sid, branch_of(sid, ids)) for sid, ids in by_session.items())
        out: list[SearchHit] = []
        for _doc, sid, eid, etype, role, ts, score, snippet, marks, told in rows:
            on_branch = eid in on[sid] if told is None else bool(told)
            if self.branch_only and not on_branch:
                continue
            out.append(
                SearchHit(
                    session_id=sid,
                    entry_id=eid,
                    entry_type=etype,
                    role=role,
                    timestamp=_parse_time(ts),
                    snippet=snippet,
                    marks=tuple((int(a), int(b)) for a, b in marks),
                    score=float(score),
                    on_branch=on_branch,
                )
            )
            if len(out) == self.limit:
                break
        return out


def _parse_time(ts: str) -> datetime | None:
    try:
        t = datetime.fromisoformat(ts.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def _time_ms(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        t = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
    elif isinstance(value, date):
        t = datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
    elif isinstance(value, str):
        check_text(name, value)
        try:
            t = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise SessionError(
                "invalid_argument",
                f"{name} must be an ISO 8601 date or time such as 2026-11-01 (got {value!r})",
            ) from None
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
    else:
        raise SessionError(
            "invalid_argument",
            f"{name} must be a datetime, a date, an ISO 8601 str or None, "
            f"not {type(value).__name__}",
        )
    return int(t.timestamp() * 1000)


def _names(name: str, value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Iterable) or not all(isinstance(v, str) for v in value):
        raise SessionError("invalid_argument", f"{name} must be a sequence of str or None")
    out = tuple(value)
    for v in out:
        check_text(name, v)
    return out


def search_plan(
    query: object,
    *,
    roles: object = None,
    types: object = None,
    since: object = None,
    until: object = None,
    cwd: object = None,
    session_id: object = None,
    branch_only: object = False,
    order: object = "relevance",
    limit: object = 50,
) -> SearchPlan:
    """Checks a search's arguments (see :meth:`SessionRepo.search
    <sessiontree.SessionRepo.search>`) and parses the query.

    Raises:
        SessionError: ``invalid_argument`` for a bad query or argument.
    """
    if not isinstance(query, str):
        raise SessionError("invalid_argument", f"query must be a str, not {type(query).__name__}")
    check_text("query", query)
    terms = tuple(
        (tuple(tokens), bool(prefix), bool(negated))
        for tokens, prefix, negated in _core.search_terms(query)
    )
    if order not in SEARCH_ORDERS:
        raise SessionError(
            "invalid_argument", f"order must be 'relevance' or 'newest' (got {order!r})"
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise SessionError(
            "invalid_argument", f"limit must be an int from 1 to {MAX_LIMIT} (got {limit!r})"
        )
    if not isinstance(branch_only, bool):
        raise SessionError("invalid_argument", "branch_only must be a bool")
    cwd_text: str | None = None
    if cwd is not None:
        if not isinstance(cwd, (str, os.PathLike)) or not isinstance(os.fspath(cwd), str):
            raise SessionError("invalid_argument", "cwd must be a str, os.PathLike or None")
        cwd_text = os.fspath(cwd)
        check_text("cwd", cwd_text)
    if session_id is not None:
        if not isinstance(session_id, str):
            raise SessionError("invalid_argument", "session_id must be a str or None")
        check_text("session_id", session_id)
    return SearchPlan(
        query=query,
        terms=terms,
        roles=_names("roles", roles),
        types=_names("types", types),
        since_ms=_time_ms("since", since),
        until_ms=_time_ms("until", until),
        cwd=cwd_text,
        session_id=session_id,
        branch_only=branch_only,
        order=order,  # type: ignore[arg-type]  # checked above
        limit=limit,
    )


def branch_members(storage: Any, entry_ids: Sequence[str]) -> set[str]:
    """Which of ``entry_ids`` are on ``storage``'s current branch (leaf to root)."""
    leaf = storage.get_leaf_id()
    if leaf is None or not entry_ids:
        return set()
    parents = storage.get_parent_positions()
    positions = storage.get_positions([leaf, *entry_ids])
    on: set[int] = set()
    p = positions[0]
    while p is not None and p >= 0 and p not in on:
        on.add(p)
        p = parents[p]
    return {
        eid for eid, q in zip(entry_ids, positions[1:], strict=True) if q is not None and q in on
    }


def _demo() -> Any:
    from ..model.messages import UserMessage
    from ..repo import InMemorySessionRepo

    repo = InMemorySessionRepo()
    with repo.create(cwd="/w") as s:
        s.append_message(UserMessage("We will retry with exponential backoff."))
    return repo
