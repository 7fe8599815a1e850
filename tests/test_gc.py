"""``sessiontree._gc.paused_gc``: the collector paused around bulk builds, then the build's
objects moved out of the young generation (issue 26 and 27: full and young collections
over 10^5 fresh objects cost a third of a cold read)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from sessiontree._gc import paused_gc


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_a_bulk_build_leaves_the_young_generation_empty_and_the_collector_on() -> None:
    gc.collect()
    with paused_gc():
        assert not gc.isenabled()
        made = [[i] for i in range(20_000)]  # 20k tracked containers
        assert gc.get_count()[0] > 10_000
    assert gc.isenabled()
    assert gc.get_count()[0] < 100  # moved to the oldest generation, not scanned
    assert len(made) == 20_000


def test_a_small_block_leaves_the_generations_alone() -> None:
    gc.collect()
    with paused_gc():
        made = [[i] for i in range(100)]
    assert gc.isenabled() and gc.get_count()[0] >= 100 and len(made) == 100


def test_nested_and_already_off() -> None:
    with paused_gc():
        with paused_gc():
            pass
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()  # off before, off after


def test_a_build_known_to_be_big_is_moved_whatever_its_count() -> None:
    gc.collect()
    with paused_gc(bulk=True):
        made = [[i] for i in range(100)]
    assert gc.get_count()[0] < 50 and len(made) == 100
