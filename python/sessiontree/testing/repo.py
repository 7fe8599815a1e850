"""The contracts every :class:`~sessiontree.SessionRepo` keeps (API.md "Repositories",
"Errors"), and :func:`check_repo`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from ..model.entries import CustomEntry, LabelEntry, MessageEntry, SessionHeader
from ..model.messages import AssistantMessage, TextContent, UserMessage
from ..model.types import SessionMetadata
from ..repo import SessionRepo, is_valid_session_id
from ..session import Session
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

__all__ = ["REPO_CONTRACTS", "RepoHarness", "check_repo"]

NewRepo = Callable[[], SessionRepo]
ReopenRepo = Callable[[SessionRepo], SessionRepo]

_MS = 1_767_225_600_000
_CWD = "/conformance/project"


class RepoHarness:
    """What a repository contract works with: a fresh repository (traced) and the
    sessions it opened (closed after the contract).

    Args:
        new: ``new() -> repo``: a new, empty repository.
        reopen: ``reopen(repo) -> repo``: another repository object over the same
            sessions (``None``: the contract that needs it is skipped).
        log: where traced calls are written.
    """

    def __init__(
        self, new: NewRepo, reopen: ReopenRepo | None, log: list[str], made: list[str] | None = None
    ) -> None:
        self._new = new
        self._made_types = made if made is not None else []
        self._reopen = reopen
        self._tracer = Tracer("repo", log)
        self._session_tracer = Tracer("session", log)
        self.sessions: list[Session] = []
        self._repo: Any = None

    @property
    def repo(self) -> Any:
        """The repository under test (made on first use)."""
        if self._repo is None:
            repo = self._new()
            if not isinstance(repo, SessionRepo):
                raise Failure(f"the factory returned {type(repo).__name__}, not a SessionRepo")
            if not self._made_types:
                self._made_types.append(type(repo).__name__)
            self._repo = self._tracer.wrap(repo)
        return self._repo

    def reopened(self) -> Any:
        if self._reopen is None:
            raise Skip("no reopen factory was given")
        again = self._reopen(self.repo.raw)
        if not isinstance(again, SessionRepo):
            raise Failure(f"reopen returned {type(again).__name__}, not a SessionRepo")
        return self._tracer.wrap(again)

    def opened(self, session: object, what: str) -> Session:
        """Checks ``session`` is an open :class:`Session` and keeps it for cleanup."""
        if not isinstance(session, Session):
            raise Failure(f"{what} returned {show(session)}, not a Session")
        self.sessions.append(session)
        return session

    def create(self, **kwargs: Any) -> Session:
        kwargs.setdefault("cwd", _CWD)
        return self.opened(self.repo.create(**kwargs), "create()")

    def open(self, ref: object) -> Session:
        return self.opened(self.repo.open(ref), "open()")

    def fork(self, source: object, **kwargs: Any) -> Session:
        return self.opened(self.repo.fork(source, **kwargs), "fork()")

    def close_all(self) -> None:
        for session in self.sessions:
            # The report is about the contracts, not the cleanup.
            with contextlib.suppress(Exception):
                session.close()


REPO_CONTRACTS: list[Contract[RepoHarness]] = []
"""Every repository contract, in run order; pass names to ``check_repo(..., only=...)``."""


def _contract(name: str, summary: str) -> Callable[[Callable[[RepoHarness], None]], Any]:
    def register(fn: Callable[[RepoHarness], None]) -> Callable[[RepoHarness], None]:
        REPO_CONTRACTS.append(Contract(name, summary, fn))
        return fn

    return register


def _conversation(session: Session) -> list[str]:
    """user, assistant, user, assistant, with a label on the second user message."""
    ids = [session.append_message(UserMessage("first question", timestamp=_MS))]
    ids.append(
        session.append_message(
            AssistantMessage([TextContent("first answer")], "openai", "gpt-5", timestamp=_MS)
        )
    )
    ids.append(session.append_message(UserMessage("second question", timestamp=_MS)))
    ids.append(
        session.append_message(
            AssistantMessage([TextContent("second answer")], "openai", "gpt-5", timestamp=_MS)
        )
    )
    session.append_label(ids[2], "second")
    return ids


def _row(repo: Any, session_id: str) -> SessionMetadata:
    rows: list[SessionMetadata] = [r for r in repo.list() if r.id == session_id]
    expect(len(rows) == 1, f"list() has {len(rows)} rows for session {session_id!r}")
    return rows[0]


# --------------------------------------------------------------------------- contracts


@_contract(
    "create",
    "create() makes a new session and opens it: the header has the given cwd, metadata, "
    "parent_session and id (a valid session id by default); a name is a session_info entry",
)
def _create(h: RepoHarness) -> None:
    s = h.create(cwd=_CWD, metadata={"k": [1, 2]}, parent_session="p-1", session_id="kit-1")
    header = s.storage.get_metadata()
    expect(isinstance(header, SessionHeader), f"the header is {show(header)}")
    expect_equal(
        (header.id, header.cwd, header.metadata, header.parent_session),
        ("kit-1", _CWD, {"k": [1, 2]}, "p-1"),
        "(id, cwd, metadata, parent_session) of the new header",
    )
    expect_equal(len(s), 0, "entries of a session created without a name")
    named = h.create(name="my name")
    expect(is_valid_session_id(named.id), f"the generated id {named.id!r} is not a valid id")
    expect_equal(named.get_session_name(), "my name", "get_session_name() of a named session")
    expect_equal([e.type for e in named.storage.get_entries()], ["session_info"], "its entries")
    here = h.create(cwd=None)
    expect_equal(here.storage.get_metadata().cwd, os.getcwd(), "cwd=None means os.getcwd()")


@_contract(
    "create_errors",
    "create() refuses a taken id (exists), an unsafe id (invalid_id, nothing created) "
    "and values of the wrong type (invalid_argument)",
)
def _create_errors(h: RepoHarness) -> None:
    h.create(session_id="taken")
    expect_error("exists", h.repo.create, cwd=_CWD, session_id="taken")
    for bad in ("../escape", "", ".hidden", "a/b", "x" * 129, "sp ace"):
        expect_error("invalid_id", h.repo.create, cwd=_CWD, session_id=bad)
    expect_error("invalid_argument", h.repo.create, cwd=5)
    expect_error("invalid_argument", h.repo.create, cwd=_CWD, name=7)
    expect_equal([r.id for r in h.repo.list()], ["taken"], "the sessions after refused creates")


@_contract(
    "open",
    "open() takes an id or a SessionMetadata from list() and gives the session as it was "
    "written; unknown is not_found, unsafe invalid_id, another type invalid_argument",
)
def _open(h: RepoHarness) -> None:
    s = h.create(session_id="kit-open", name="n")
    ids = _conversation(s)
    leaf = s.get_leaf_id()
    s.close()
    again = h.open("kit-open")
    expect_equal([e.id for e in again.storage.get_entries("message")], ids, "entries after open")
    expect_equal(again.get_leaf_id(), leaf, "the leaf after open")
    expect_equal(again.get_label(ids[2]), "second", "a label after open")
    again.close()
    row = _row(h.repo, "kit-open")
    h.open(row).close()
    expect_error("not_found", h.repo.open, "no-such-session")
    expect_error("invalid_id", h.repo.open, "../kit-open")
    expect_error("invalid_argument", h.repo.open, 42)


@_contract(
    "single_writer",
    "while a session is open, a second open() and delete() raise locked; once it is "
    "closed both work (API: Errors: locked)",
)
def _single_writer(h: RepoHarness) -> None:
    s = h.create(session_id="kit-lock")
    expect_error("locked", h.repo.open, "kit-lock")
    expect_error("locked", h.repo.delete, "kit-lock")
    s.append_message(UserMessage("still writable", timestamp=_MS))
    s.close()
    h.open("kit-lock").close()
    h.repo.delete("kit-lock")


@_contract(
    "list",
    "list() gives every session's metadata, newest modified first, filtered by cwd and "
    "cut by limit; a negative limit is invalid_argument (API: Repositories)",
)
def _list(h: RepoHarness) -> None:
    old = h.create(session_id="kit-old", cwd="/conformance/a", name="old one")
    new = h.create(session_id="kit-new", cwd="/conformance/b")
    # An entry from the future makes "kit-old" the most recently modified.
    old.storage.append_entry(
        MessageEntry(
            UserMessage("later " * 300, timestamp=_MS),
            id=old.storage.create_entry_id(),
            parent_id=old.get_leaf_id(),
            timestamp="2099-01-01T00:00:00.000Z",
        )
    )
    new.append_message(UserMessage("hi", timestamp=_MS))
    old.close()
    new.close()
    rows = h.repo.list()
    expect_equal([r.id for r in rows], ["kit-old", "kit-new"], "list() order (newest first)")
    first = rows[0]
    expect_equal(
        (first.name, first.cwd, first.entry_count, first.message_count),
        ("old one", "/conformance/a", 2, 1),
        "(name, cwd, entry_count, message_count) of a row",
    )
    expect(
        isinstance(first.modified, datetime) and first.modified.tzinfo is not None,
        f"modified must be an aware datetime, got {show(first.modified)}",
    )
    expect(
        first.created is not None and first.modified.year == 2099,
        f"modified is the newest entry's time: {show(first.modified)}",
    )
    text = first.first_message or ""
    expect(
        len(text) <= 1000 and text.endswith("…") and text.startswith("later later"),
        f"first_message is the first user text cut to 1,000 characters: {show(text)}",
    )
    expect_equal([r.id for r in h.repo.list(cwd="/conformance/b")], ["kit-new"], "cwd filter")
    expect_equal(
        [r.id for r in h.repo.list(cwd="/conformance/b/")], ["kit-new"], "cwd filter (normalised)"
    )
    expect_equal([r.id for r in h.repo.list(limit=1)], ["kit-old"], "list(limit=1)")
    expect_equal(h.repo.list(limit=0), [], "list(limit=0)")
    expect_error("invalid_argument", h.repo.list, limit=-1)


@_contract(
    "delete",
    "delete() removes a session (then open and delete are not_found); others stay",
)
def _delete(h: RepoHarness) -> None:
    h.create(session_id="kit-a").close()
    h.create(session_id="kit-b").close()
    h.repo.delete("kit-a")
    expect_equal([r.id for r in h.repo.list()], ["kit-b"], "the sessions after delete")
    expect_error("not_found", h.repo.open, "kit-a")
    expect_error("not_found", h.repo.delete, "kit-a")
    h.repo.delete(_row(h.repo, "kit-b"))
    expect_equal(h.repo.list(), [], "the sessions after deleting both")


@_contract(
    "fork_full",
    "fork(source) copies every entry (ids and timestamps kept), the leaf, labels and "
    "name; the new header has a new id, parent_session = the source, its cwd and "
    "metadata; the source may stay open",
)
def _fork_full(h: RepoHarness) -> None:
    src = h.create(session_id="kit-src", name="src", metadata={"m": 1})
    ids = _conversation(src)
    src.move_to(ids[1])
    copied = src.storage.get_entries()
    fork = h.fork("kit-src")
    header = fork.storage.get_metadata()
    expect(header.id != "kit-src", "the fork kept the source's id")
    expect_equal(
        (header.parent_session, header.cwd, header.metadata),
        ("kit-src", _CWD, {"m": 1}),
        "(parent_session, cwd, metadata) of the fork's header",
    )
    got = fork.storage.get_entries()[: len(copied)]
    expect_equal(
        [(e.id, e.timestamp, e.parent_id) for e in got],
        [(e.id, e.timestamp, e.parent_id) for e in copied],
        "the copied entries (id, timestamp, parent_id)",
    )
    expect_equal(fork.get_leaf_id(), ids[1], "the fork's leaf (the source's)")
    expect_equal(fork.get_label(ids[2]), "second", "a label in the fork")
    expect_equal(fork.get_session_name(), "src", "the fork's name")
    src.append_message(UserMessage("the source is still open", timestamp=_MS))
    expect(any(r.id == fork.id for r in h.repo.list()), "the fork is listed")


@_contract(
    "fork_branch",
    "fork at/before an entry copies that branch (the first copied entry a root, the leaf "
    "the last); before a non-user message is invalid_fork_target; unknown entry or "
    "session not_found; a bad position invalid_argument (API: Repositories)",
)
def _fork_branch(h: RepoHarness) -> None:
    src = h.create(session_id="kit-branch")
    ids = _conversation(src)
    src.close()
    at = h.fork("kit-branch", entry_id=ids[1], position="at")
    got = at.storage.get_entries("message")
    expect_equal([e.id for e in got], ids[:2], "fork at the first answer: its messages")
    expect_equal(got[0].parent_id, None, "the first copied entry is a root")
    expect_equal(at.get_leaf_id(), ids[1], "the leaf of a fork at an entry")
    before = h.fork("kit-branch", entry_id=ids[2], position="before")
    got = before.storage.get_entries("message")
    expect_equal([e.id for e in got], ids[:2], "fork before the second question: its messages")
    expect_equal(before.get_leaf_id(), ids[1], "the leaf of a fork before an entry")
    empty = h.fork("kit-branch", entry_id=ids[0], position="before")
    expect_equal(empty.storage.get_entries("message"), [], "fork before the first message")
    expect_error("invalid_fork_target", h.repo.fork, "kit-branch", entry_id=ids[1])
    expect_error("not_found", h.repo.fork, "kit-branch", entry_id="feedface")
    expect_error("not_found", h.repo.fork, "no-such-session")
    expect_error("invalid_argument", h.repo.fork, "kit-branch", position="after")
    labelled = h.fork("kit-branch", entry_id=ids[3], position="at")
    expect_equal(labelled.get_label(ids[2]), "second", "a copied entry keeps its label")
    expect(
        all(
            not isinstance(e, LabelEntry) or e.target_id in ids
            for e in labelled.storage.get_entries()
        ),
        "a label entry in the fork targets an entry outside it",
    )


@_contract(
    "reopen",
    "another repository object over the same place sees the same sessions, entries and custom data",
)
def _reopen(h: RepoHarness) -> None:
    s = h.create(session_id="kit-persist", name="kept")
    _conversation(s)
    s.storage.append_entry(
        CustomEntry(
            custom_type="app",
            data={"deep": [1, {"x": None}]},
            id=s.storage.create_entry_id(),
            parent_id=s.get_leaf_id(),
            timestamp="2026-01-02T03:04:05.678Z",
        )
    )
    want = s.storage.get_entries()
    s.close()
    other = h.reopened()
    expect_equal([r.id for r in other.list()], ["kit-persist"], "list() of the reopened repo")
    again = h.opened(other.open("kit-persist"), "open()")
    expect_equal(again.storage.get_entries(), want, "the entries seen through the reopened repo")
    expect_equal(again.get_session_name(), "kept", "the name seen through the reopened repo")


# --------------------------------------------------------------------------- the entry point


def check_repo(
    new: NewRepo,
    reopen: ReopenRepo | None = None,
    *,
    only: Iterable[str | Contract[RepoHarness]] | None = None,
    raise_on_failure: bool = True,
) -> ConformanceReport:
    """Runs every repository contract of the API on your ``SessionRepo``.

    Each contract gets a new, empty repository from ``new``; the sessions it opened are
    closed after.

    Args:
        new: ``new() -> SessionRepo``: a new, empty repository.
        reopen: ``reopen(repo) -> SessionRepo``: another repository object over the same
            sessions, as a later process would make (``None`` skips that contract).
        only: run just these contracts (names or items of :data:`REPO_CONTRACTS`).
        raise_on_failure: raise :class:`ConformanceError` when a contract failed.

    Returns:
        The :class:`ConformanceReport`.

    Raises:
        ConformanceError: a contract failed (its message is the report).

    >>> from sessiontree import InMemorySessionRepo
    >>> check_repo(InMemorySessionRepo).skipped[0].reason
    'no reopen factory was given'
    """
    if not callable(new) or (reopen is not None and not callable(reopen)):
        from ..errors import SessionError

        raise SessionError("invalid_argument", "new and reopen must be callables")
    made: list[str] = []
    results = run_contracts(
        REPO_CONTRACTS, only, lambda log: RepoHarness(new, reopen, log, made), RepoHarness.close_all
    )
    # Named after what the factory made (a factory is often a lambda).
    name = made[0] if made else getattr(new, "__qualname__", type(new).__name__)
    report = ConformanceReport(f"repository {name}", results)
    if raise_on_failure:
        report.raise_for_failures()
    return report
