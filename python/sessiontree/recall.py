"""Recall for agents: tool functions an agent calls to search its own past sessions and
read what was said, after a compaction, a reset or in a new session.

:class:`RecallTools` binds the two tools to a repository; each has typed parameters and a
docstring written for the model, and returns compact JSON-able values:

* ``search_past_sessions(query, session_id=None, limit=10)`` → a list of
  ``{"session", "entry", "time", "role", "snippet"}`` (best first; the snippet marks the
  match with ``**``);
* ``read_past_entry(session_id, entry_id)`` → ``{"session", "entry", "time", "role",
  "type", "text"}``: the entry's whole searched text (cut at ``max_chars``).

Register them with a framework in one line (``sessiontree.adapters.recall_tools``)::

    agent = Agent(..., tools=openai_agents_recall_tools(repo))       # OpenAI Agents SDK
    agent = Agent(model, tools=pydantic_ai_recall_tools(repo))       # pydantic-ai

>>> import sessiontree as st
>>> repo = st.InMemorySessionRepo()
>>> with repo.create(cwd="/w") as s:
...     _ = s.append_message(st.UserMessage("We decided to use Postgres for the queue."))
>>> tools = RecallTools(repo)
>>> [h["snippet"] for h in tools.search_past_sessions("decided queue")]
['We **decided** to use Postgres for the **queue**.']
"""

from __future__ import annotations

from typing import Final, TypeAlias

from . import _core
from .errors import SessionError
from .model.entries import entry_to_json
from .repo import SessionRepo
from .search import SearchHit

__all__ = ["RecallEntry", "RecallHit", "RecallTools"]

DEFAULT_MAX_CHARS: Final = 20_000


# Plain dicts rather than TypedDicts: the frameworks build the tools' schemas from the
# annotations, and pydantic refuses ``typing.TypedDict`` before Python 3.12.
RecallHit: TypeAlias = dict[str, str | None]
"""One search result as the tool returns it: ``session``, ``entry``, ``time``, ``role``,
``snippet``."""

RecallEntry: TypeAlias = dict[str, str | None]
"""One entry as the tool returns it: ``session``, ``entry``, ``time``, ``role``,
``type``, ``text``."""


def hit_to_recall(hit: SearchHit) -> RecallHit:
    """The compact form of a :class:`~sessiontree.SearchHit`."""
    data = hit.to_json()
    return {
        "session": hit.session_id,
        "entry": hit.entry_id,
        "time": data["timestamp"],
        "role": hit.role if hit.role is not None else hit.entry_type,
        "snippet": hit.snippet,
    }


class RecallTools:
    """The recall tools over ``repo``: bound methods to hand to an agent framework.

    Args:
        repo: the sessions to search (any :class:`~sessiontree.SessionRepo`).
        max_results: the most hits one search returns, whatever the model asks.
        max_chars: the longest text :meth:`read_past_entry` returns (longer is cut, with
            a note saying how much was left out).
    """

    def __init__(
        self, repo: SessionRepo, *, max_results: int = 20, max_chars: int = DEFAULT_MAX_CHARS
    ) -> None:
        if not isinstance(repo, SessionRepo):
            raise SessionError("invalid_argument", "repo must be a sessiontree SessionRepo")
        self._repo = repo
        self._max_results = max_results
        self._max_chars = max_chars

    def search_past_sessions(
        self, query: str, session_id: str | None = None, limit: int = 10
    ) -> list[dict[str, str | None]]:
        """Search everything said in past sessions (messages, tool calls and results,
        summaries, labels, session names) and return the best matching entries.

        Query syntax: plain words (all must appear, any case), "an exact phrase" in double
        quotes, -word to exclude, word* for a prefix. Use distinctive words (names,
        identifiers, error messages) rather than whole sentences.

        Args:
            query: the words to look for, e.g. `retry backoff decided` or `"connection refused"`.
            session_id: search only this session (an id from an earlier result).
            limit: how many results to return (1-20).

        Returns:
            The matching entries, best first: session id, entry id, time, role and a
            snippet with the matched words between ** marks. Read an entry in full with
            read_past_entry.
        """
        n = max(1, min(int(limit), self._max_results))
        hits = self._repo.search(query, session_id=session_id, limit=n)
        return [hit_to_recall(h) for h in hits]

    def read_past_entry(self, session_id: str, entry_id: str) -> dict[str, str | None]:
        """Read the full text of one entry of a past session (from a search result).

        Args:
            session_id: the session id of a search result.
            entry_id: the entry id of a search result.

        Returns:
            The entry's time, role, type and whole text (long texts are cut).
        """
        entry = self._repo.read_entry(session_id, entry_id)
        if entry is None:
            raise SessionError(
                "not_found", f"entry {entry_id!r} not found in session {session_id!r}"
            )
        facts = _core.search_entry_texts(entry_to_json(entry).decode("utf-8"))
        if facts is None:
            facts = (entry.type, entry.id, entry.timestamp, None, [])
        etype, eid, ts, role, texts = facts
        text = "\n\n".join(texts)
        if len(text) > self._max_chars:
            left = len(text) - self._max_chars
            text = f"{text[: self._max_chars]}\n[… {left:,} more characters]"
        return {
            "session": session_id,
            "entry": eid,
            "time": ts or None,
            "role": role,
            "type": etype,
            "text": text,
        }

    def __repr__(self) -> str:
        return f"RecallTools({self._repo!r})"
