"""A conformance kit for your own ``SessionStorage`` or ``SessionRepo``.

One call runs every contract of the API and the file format (docs/format.md) that a
storage (or a repository) must keep, and says in plain words which broke, why, and with
which call::

    from sessiontree.testing import check_storage

    def reopen(storage):
        session_id = storage.get_metadata().id
        storage.close()
        return MyStorage.open(session_id)

    print(check_storage(MyStorage.create, reopen))  # MyStorage.create(header) -> storage

It needs no test runner: a broken contract raises :class:`ConformanceError` (an
``AssertionError``, so pytest, unittest and plain scripts all show the report). For one
test per contract, parametrize over :data:`STORAGE_CONTRACTS` / :data:`REPO_CONTRACTS`
and pass ``only=[contract]``.

Not imported by ``import sessiontree``: ``import sessiontree.testing``.
"""

from __future__ import annotations

from ._report import ConformanceError, ConformanceReport, ContractResult
from .repo import REPO_CONTRACTS, check_repo
from .search import SEARCH_QUERIES, plant_search_corpus, search_answers
from .storage import STORAGE_CONTRACTS, check_storage

__all__ = [
    "REPO_CONTRACTS",
    "SEARCH_QUERIES",
    "STORAGE_CONTRACTS",
    "ConformanceError",
    "ConformanceReport",
    "ContractResult",
    "check_repo",
    "check_storage",
    "plant_search_corpus",
    "search_answers",
]
