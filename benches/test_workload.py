"""The generator writes valid sessiontree files, deterministically, with every feature the
benches rely on; the baseline agrees with sessiontree on them."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import baseline
import pytest
import workload
from harness import bl_pairs, context_digest, st_pairs

import sessiontree as st


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, workload.Manifest]:
    path = tmp_path_factory.mktemp("wl") / "small.jsonl"
    return path, workload.generate(path, 1500, seed=7)


def test_generated_file_opens_strictly_with_the_manifest_counts(
    small: tuple[Path, workload.Manifest],
) -> None:
    path, m = small
    with st.JsonlSessionStorage.open(path, readonly=True, strict=True) as storage:
        assert storage.load_report == st.LoadReport((), 0)
        assert len(storage) == m.n == 1500
        assert storage.get_leaf_id() == m.leaf_id
        assert storage.get_metadata().id == m.session_id
        assert storage.get_session_name() == m.name
        assert len(storage.get_labels()) == m.labels
        stats = storage.get_session_stats()
        assert stats.entry_count == m.n
        assert stats.message_count == m.counts["message"]
        assert stats.user_message_count == m.counts["role:user"]
        assert stats.assistant_message_count == m.counts["role:assistant"]
        assert stats.tool_result_count == m.counts["role:tool_result"]
        assert stats.input_tokens == m.tokens["input"]
        assert stats.total_tokens == m.tokens["total_tokens"]
        assert math.isclose(stats.cost_total, m.tokens["cost"], rel_tol=1e-9)
        for kind in ("leaf", "branch_summary", "compaction", "label", "session_info"):
            assert len(storage.find_entries(kind)) == m.counts[kind] > 0, kind
        # Every branch summary hangs under the entry the leaf moved back to.
        for summary in storage.find_entries("branch_summary"):
            assert isinstance(summary, st.BranchSummaryEntry)
            assert summary.parent_id == summary.from_id


def test_every_feature_is_present(small: tuple[Path, workload.Manifest]) -> None:
    _, m = small
    assert m.compactions == 3
    assert m.branches >= 3
    assert 0 < m.branch_summaries < m.branches
    for kind in ("model_change", "thinking_level_change", "custom", "custom_message"):
        assert m.counts[kind] > 0, kind
    assert m.fork_target is not None


def test_tool_results_are_1_to_8_kb(small: tuple[Path, workload.Manifest]) -> None:
    path, _ = small
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        sizes = [
            len(e.message.content[0].text.encode())
            for e in storage.find_entries("message")
            if isinstance(e, st.MessageEntry) and isinstance(e.message, st.ToolResultMessage)
        ]
    assert sizes
    assert min(sizes) >= 1024
    assert max(sizes) <= 8 * 1024 * 4  # chars are 1-8k; a few multi-byte ones
    assert sum(sizes) / len(sizes) > 3000


def test_same_seed_same_bytes(tmp_path: Path, small: tuple[Path, workload.Manifest]) -> None:
    path, _ = small
    again = tmp_path / "again.jsonl"
    workload.generate(again, 1500, seed=7)
    other = tmp_path / "other.jsonl"
    workload.generate(other, 1500, seed=8)

    def digest(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    assert digest(again) == digest(path)
    assert digest(other) != digest(path)


def test_baseline_agrees_with_sessiontree(small: tuple[Path, workload.Manifest]) -> None:
    path, m = small
    bl = baseline.open_session(path)
    assert bl.issues == 0
    assert bl.leaf == m.leaf_id
    with st.Session(st.JsonlSessionStorage.open(path, readonly=True)) as session:
        ctx = session.build_context()
        st_stats = session.get_session_stats()
        # Other leaves too: every branch summary target and the fork target.
        targets = [e.id for e in session.storage.find_entries("branch_summary")]
        targets.append(m.fork_target)
        for target in targets:
            ours = session.storage.get_path_to_root_or_compaction(target)
            theirs = bl.path_to_root_or_compaction(target)
            assert [e.id for e in ours] == [e["id"] for e in theirs]
    bl_ctx = bl.build_context()
    assert len(ctx.messages) == len(bl_ctx["messages"]) > 0
    assert context_digest(st_pairs(ctx.messages)) == context_digest(bl_pairs(bl_ctx["messages"]))
    assert ctx.thinking_level == bl_ctx["thinking_level"]
    assert ctx.model is not None
    assert (ctx.model.provider, ctx.model.model_id) == bl_ctx["model"]
    assert list(ctx.active_tool_names or ()) == bl_ctx["active_tool_names"]
    bl_stats = bl.stats()
    for field in ("entry_count", "message_count", "input_tokens", "total_tokens"):
        assert getattr(st_stats, field) == bl_stats[field], field
    assert math.isclose(st_stats.cost_total, bl_stats["cost_total"], rel_tol=1e-9)


def test_cache_reuses_and_repairs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONTREE_BENCH_CACHE", str(tmp_path))
    first = workload.cached_session(300, seed=3)
    mtime = first.path.stat().st_mtime_ns
    assert workload.cached_session(300, seed=3).path.stat().st_mtime_ns == mtime
    with open(first.path, "ab") as f:  # a damaged cache entry is regenerated
        f.write(b"{")
    again = workload.cached_session(300, seed=3)
    assert again.path.stat().st_size == first.manifest.size_bytes


def test_small_sessions_are_valid(tmp_path: Path) -> None:
    # The repository benches use sessions of a few entries: every size must be a valid file.
    for n in (0, 1, 4, 5, 17, 39, 40, 41, 63, 120):
        path = tmp_path / f"s{n}.jsonl"
        m = workload.generate(path, n, seed=n)
        with st.JsonlSessionStorage.open(path, readonly=True, strict=True) as storage:
            assert len(storage) == n
            assert storage.get_leaf_id() == m.leaf_id
        bl = baseline.open_session(path)
        assert (len(bl.entries), bl.issues) == (n, 0)
