"""The conformance kit: our storages and repositories pass it, a small dict storage
written here passes it, and deliberately broken ones are caught with a report that says
which contract broke, why, and with which call."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st
from sessiontree.testing import (
    REPO_CONTRACTS,
    STORAGE_CONTRACTS,
    ConformanceError,
    check_repo,
    check_storage,
)

from .dict_storage import DictSessionStorage, dict_factories


def memory_factories() -> tuple[Any, Any]:
    def reopen(storage: st.SessionStorage) -> st.SessionStorage:
        assert isinstance(storage, st.InMemorySessionStorage)
        data = storage.to_jsonl()
        storage.close()
        return st.InMemorySessionStorage.from_jsonl(data)

    return st.InMemorySessionStorage, reopen


def jsonl_factories(directory: Path, durability: str = "group") -> tuple[Any, Any]:
    def new(header: st.SessionHeader) -> st.SessionStorage:
        path = directory / f"{header.id}.jsonl"
        return st.JsonlSessionStorage.create(path, header, durability=durability)  # type: ignore[arg-type]

    def reopen(storage: st.SessionStorage) -> st.SessionStorage:
        assert isinstance(storage, st.JsonlSessionStorage)
        storage.close()
        return st.JsonlSessionStorage.open(storage.path, durability=durability)  # type: ignore[arg-type]

    return new, reopen


def jsonl_repos(directory: Path) -> tuple[Any, Any]:
    count = iter(range(10_000))

    def new() -> st.SessionRepo:
        return st.JsonlSessionRepo(directory / f"repo-{next(count)}")

    def reopen(repo: st.SessionRepo) -> st.SessionRepo:
        assert isinstance(repo, st.JsonlSessionRepo)
        return st.JsonlSessionRepo(repo.root_dir)

    return new, reopen


# --------------------------------------------------------------------------- passing


@pytest.mark.parametrize("durability", ["none", "group"])
def test_the_jsonl_storage_passes(tmp_path: Path, durability: str) -> None:
    report = check_storage(*jsonl_factories(tmp_path, durability))
    assert report.ok and not report.skipped
    assert [r.contract for r in report.results] == [c.name for c in STORAGE_CONTRACTS]


def test_the_memory_storage_passes() -> None:
    report = check_storage(*memory_factories())
    assert report.ok and len(report.passed) == len(STORAGE_CONTRACTS)


def test_a_dict_storage_written_in_python_passes() -> None:
    report = check_storage(*dict_factories())
    assert report.ok and len(report.passed) == len(STORAGE_CONTRACTS), str(report)


def test_the_repositories_pass(tmp_path: Path) -> None:
    jsonl = check_repo(*jsonl_repos(tmp_path))
    assert jsonl.ok and len(jsonl.passed) == len(REPO_CONTRACTS)
    memory = check_repo(st.InMemorySessionRepo)
    assert memory.ok
    assert [(r.contract, r.reason) for r in memory.skipped] == [
        ("reopen", "no reopen factory was given")
    ]


def test_without_reopen_the_contracts_that_need_it_are_skipped() -> None:
    report = check_storage(st.InMemorySessionStorage)
    assert report.ok
    assert [r.contract for r in report.skipped] == ["reopen"]
    assert "SKIPPED reopen" in str(report) and "no reopen factory was given" in str(report)


# One test per contract: the pytest-friendly way (``only=``).
@pytest.mark.parametrize("contract", STORAGE_CONTRACTS, ids=str)
def test_each_contract_alone(contract: Any) -> None:
    report = check_storage(*dict_factories(), only=[contract])
    assert [r.contract for r in report.results] == [contract.name]


# --------------------------------------------------------------------------- broken ones


class FirstLabelWins(DictSessionStorage):
    """Broken: the first label entry for a target wins (FORMAT.md says the last)."""

    def get_label(self, entry_id: str) -> str | None:
        self._require(entry_id)
        for e in self.find_entries("label"):
            if isinstance(e, st.LabelEntry) and e.target_id == entry_id:
                return e.label
        return None


class AcceptsDuplicates(DictSessionStorage):
    """Broken: appends an entry with a used id (overwriting the first)."""

    def append_entry(self, entry: st.SessionTreeEntry) -> None:
        self._check()
        self._entries[entry.id] = entry


class IgnoresCompactions(DictSessionStorage):
    """Broken: the branch is never cut at a compaction."""

    def get_path_to_root_or_compaction(self, leaf_id: str | None) -> list[st.SessionTreeEntry]:
        return self.get_path_to_root(leaf_id)


class ForgetsTheLeafMove(DictSessionStorage):
    """Broken: a leaf entry does not move the leaf when the session is read back."""

    def get_leaf_id(self) -> str | None:
        self._check()
        entries = [e for e in self._entries.values() if e.type != "leaf"]
        return entries[-1].id if entries else None


def broken(cls: type[DictSessionStorage]) -> tuple[Any, Any]:
    database: dict[str, dict[str, object]] = {}

    def new(header: st.SessionHeader) -> DictSessionStorage:
        DictSessionStorage.create(database, header)
        return cls(database, header.id)

    return new, None


def test_a_broken_label_rule_is_reported_readably() -> None:
    with pytest.raises(ConformanceError) as err:
        check_storage(*broken(FirstLabelWins))
    report = err.value.report
    assert [r.contract for r in report.failures] == ["labels"]
    text = str(err.value)
    assert text.startswith("sessiontree conformance of storage FirstLabelWins: ")
    assert "1 failed" in text
    failure = report.failures[0]
    assert failure.reason == "get_label: the last label entry wins: expected 'two', got 'one'"
    assert failure.call is not None
    assert failure.call.startswith("storage.get_label(") and failure.call.endswith("-> 'one'")
    # The report puts the failure first, with its reason and the call.
    lines = text.splitlines()
    assert lines[1].startswith("FAILED  labels: labels are file-wide: the last label entry")
    assert lines[2] == f"        why: {failure.reason}"
    assert lines[3] == f"        last call: {failure.call}"


def test_accepting_duplicate_ids_is_reported() -> None:
    report = check_storage(*broken(AcceptsDuplicates), raise_on_failure=False)
    failed = {r.contract: r for r in report.failures}
    assert "duplicate_id" in failed and "unknown_parent" in failed
    dup = failed["duplicate_id"]
    assert dup.reason.startswith("expected SessionError code 'duplicate_id', but the call returned")
    assert dup.call is not None and dup.call.startswith("storage.append_entry(CustomEntry(")
    assert failed["unknown_parent"].reason.startswith("expected SessionError code 'not_found'")


def test_a_path_that_ignores_compactions_is_reported() -> None:
    report = check_storage(*broken(IgnoresCompactions), raise_on_failure=False)
    failed = {r.contract: r for r in report.failures}
    assert "compaction_cuts" in failed
    assert failed["compaction_cuts"].reason.startswith(
        "cut at first_kept_entry_id (an ancestor): expected ["
    )


def test_a_leaf_that_forgets_moves_is_reported() -> None:
    report = check_storage(*broken(ForgetsTheLeafMove), raise_on_failure=False)
    failed = {r.contract: r for r in report.failures}
    assert "leaf_moves" in failed
    assert failed["leaf_moves"].reason.startswith("the leaf after set_leaf_id(a): expected")


def test_a_factory_that_makes_no_storage_is_reported() -> None:
    report = check_storage(lambda header: "not a storage", raise_on_failure=False)  # type: ignore[arg-type,return-value]
    assert not report.passed
    assert report.failures[0].reason == "the factory returned str, not a SessionStorage"


class UnlockedRepo(st.InMemorySessionRepo):
    """Broken: a second open of an open session is allowed, and list is oldest first."""

    def open(self, ref: st.SessionRef) -> st.Session:
        with self._lock:
            record = self._record(ref)
            return st.Session(record.storage.share())

    def list(self, **kwargs: Any) -> list[st.SessionMetadata]:
        return list(reversed(super().list(**kwargs)))


def test_a_broken_repository_is_reported() -> None:
    report = check_repo(UnlockedRepo, raise_on_failure=False)
    failed = {r.contract: r for r in report.failures}
    assert set(failed) == {"single_writer", "list"}
    lock = failed["single_writer"]
    assert lock.reason.startswith("expected SessionError code 'locked', but the call returned")
    assert lock.call is not None and lock.call.startswith("repo.open('kit-lock') -> <Session")
    assert failed["list"].reason == (
        "list() order (newest first): expected ['kit-old', 'kit-new'], got ['kit-new', 'kit-old']"
    )


# --------------------------------------------------------------------------- the entry point


def test_only_checks_its_argument() -> None:
    with pytest.raises(st.SessionError) as err:
        check_storage(st.InMemorySessionStorage, only=["no_such_contract"])
    assert err.value.code == "invalid_argument" and "no_such_contract" in str(err.value)
    with pytest.raises(st.SessionError):
        check_storage("not callable")  # type: ignore[arg-type]


def test_the_error_is_an_assertion_error_and_the_report_is_kept() -> None:
    report = check_storage(*broken(FirstLabelWins), raise_on_failure=False)
    assert not report.ok
    with pytest.raises(AssertionError) as err:
        report.raise_for_failures()
    assert isinstance(err.value, ConformanceError) and err.value.report is report
    passed = len(report.passed)
    assert repr(report) == (
        f"<ConformanceReport storage FirstLabelWins: {passed} passed, 1 failed, 1 skipped>"
    )


def test_the_kit_needs_no_pytest_and_is_not_loaded_by_the_package() -> None:
    code = (
        "import sys, sessiontree; a = 'sessiontree.testing' in sys.modules; "
        "import sessiontree.testing as t; "
        "r = t.check_storage(sessiontree.InMemorySessionStorage); "
        "print(a, 'pytest' in sys.modules, r.ok)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "True"]
