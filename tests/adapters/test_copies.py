"""The copier the adapters hand items out with (``_core.copy_json``): every dict and list
new, everything else shared, the cyclic collector paused during the copy and left as the
caller had it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from sessiontree import _core


@pytest.fixture
def gc_state() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def _containers(value: object) -> Iterator[object]:
    if isinstance(value, dict):
        yield value
        for inner in value.values():
            yield from _containers(inner)
    elif isinstance(value, list):
        yield value
        for inner in value:
            yield from _containers(inner)


def test_every_dict_and_list_is_new_and_leaves_are_shared() -> None:
    text = "é" * 5000
    item = {
        "type": "message",
        "content": [{"text": text, "annotations": [], "logprobs": [[1.5, None]]}],
        "n": 10**30,
        "flag": True,
    }
    copy = _core.copy_json(item)
    assert copy == item
    assert list(copy) == list(item)  # key order kept
    originals = {id(c) for c in _containers(item)}
    assert not originals & {id(c) for c in _containers(copy)}
    assert copy["content"][0]["text"] is text
    copy["content"][0]["annotations"].append("changed")
    copy["content"].append({})
    assert item["content"] == [{"text": text, "annotations": [], "logprobs": [[1.5, None]]}]


def test_copy_json_items_copies_each_item_into_a_new_list() -> None:
    items = [{"a": [1]}, [{"b": 2}], "text", 3, None]
    copies = _core.copy_json_items(items)
    assert copies == items and copies is not items
    assert copies[0] is not items[0] and copies[0]["a"] is not items[0]["a"]
    assert copies[1][0] is not items[1][0]
    assert copies[2] is items[2]


def test_other_types_are_shared_not_copied() -> None:
    class Sub(dict[str, int]):
        pass

    sub = Sub(x=1)
    pair = (1, [2])
    copy = _core.copy_json({"sub": sub, "pair": pair})
    assert copy["sub"] is sub and copy["pair"] is pair


def test_the_collector_is_left_as_the_caller_had_it(gc_state: None) -> None:
    gc.enable()
    _core.copy_json_items([{"a": [1]}])
    assert gc.isenabled()
    gc.disable()
    _core.copy_json_items([{"a": [1]}])
    assert not gc.isenabled()
    gc.enable()
    with pytest.raises(RecursionError):
        deep: list[object] = []
        for _ in range(20_000):
            deep = [deep]
        _core.copy_json(deep)
    assert gc.isenabled()
