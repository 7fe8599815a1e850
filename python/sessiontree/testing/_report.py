"""What a conformance run found: one result per contract, and a report that reads well."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["ConformanceError", "ConformanceReport", "ContractResult"]

Outcome = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True)
class ContractResult:
    """How one contract went.

    Attributes:
        contract: the contract's name (``"duplicate_id"``, ``"compaction_cuts"``, ...).
        summary: what the contract says, and which part of the API or the file format
            (docs/format.md) says it.
        outcome: ``"passed"``, ``"failed"`` or ``"skipped"``.
        reason: for a failure, what went wrong (expected vs. got); for a skip, why.
        call: for a failure, the last call made on the storage or repository under test
            (``storage.get_label('1a2b3c4d')``), with what it returned or raised.
    """

    contract: str
    summary: str
    outcome: Outcome
    reason: str = ""
    call: str | None = None

    def __str__(self) -> str:
        head = f"{self.outcome.upper():7} {self.contract}: {self.summary}"
        if self.outcome == "passed":
            return head
        lines = [head, f"        why: {self.reason}"]
        if self.call:
            lines.append(f"        last call: {self.call}")
        return "\n".join(lines)


@dataclass(frozen=True)
class ConformanceReport:
    """Every contract's result for one implementation.

    Attributes:
        subject: what was checked (``"storage"`` or ``"repository"``, with the class name).
        results: one :class:`ContractResult` per contract run, in run order.
    """

    subject: str
    results: tuple[ContractResult, ...]

    @property
    def ok(self) -> bool:
        """True when no contract failed."""
        return not self.failures

    @property
    def failures(self) -> Sequence[ContractResult]:
        """The failed contracts."""
        return [r for r in self.results if r.outcome == "failed"]

    @property
    def passed(self) -> Sequence[ContractResult]:
        """The contracts kept."""
        return [r for r in self.results if r.outcome == "passed"]

    @property
    def skipped(self) -> Sequence[ContractResult]:
        """The contracts not run (and why, in each ``reason``)."""
        return [r for r in self.results if r.outcome == "skipped"]

    def raise_for_failures(self) -> None:
        """Raises :class:`ConformanceError` (this report) if a contract failed."""
        if not self.ok:
            raise ConformanceError(self)

    def __str__(self) -> str:
        counts = (
            f"{len(self.passed)} passed, {len(self.failures)} failed, {len(self.skipped)} skipped"
        )
        lines = [f"sessiontree conformance of {self.subject}: {counts}"]
        # Failures first: they are what a reader came for.
        lines += [str(r) for r in self.failures]
        lines += [str(r) for r in self.skipped]
        lines += [str(r) for r in self.passed]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<ConformanceReport {self.subject}: {len(self.passed)} passed, "
            f"{len(self.failures)} failed, {len(self.skipped)} skipped>"
        )


class ConformanceError(AssertionError):
    """A storage or repository broke a contract; ``str()`` is the whole report.

    An ``AssertionError``, so test runners show it as a failed assertion.

    Attributes:
        report: the :class:`ConformanceReport`.
    """

    def __init__(self, report: ConformanceReport) -> None:
        super().__init__(str(report))
        self.report = report
