"""``get_parent_positions``, ``get_entries_at`` and ``get_positions``: the tree's shape by
file-order position, without building entries (what ``sessiontree tree`` draws from).
The engine storages and the pure-Python defaults (a storage implementing only the
abstract methods) must agree with ``get_entries_with_parents``."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_custom_storage import DictSessionStorage

import sessiontree as st


def _fill(session: st.Session) -> None:
    a = session.append_message(st.UserMessage("a"))
    b = session.append_message(st.UserMessage("b"))
    session.append_label(a, "first")
    session.move_to(a)
    session.append_message(st.UserMessage("c"))
    session.move_to(None)
    session.append_message(st.UserMessage("another root"))
    session.move_to(b)
    session.append_message(st.UserMessage("d"))


@pytest.fixture(params=["memory", "jsonl", "custom"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> st.SessionStorage:
    made: st.SessionStorage
    if request.param == "memory":
        made = st.InMemorySessionStorage()
    elif request.param == "jsonl":
        made = st.JsonlSessionStorage.create(tmp_path / "s.jsonl")
    else:
        made = DictSessionStorage()
    _fill(st.Session(made))
    return made


def test_positions_agree_with_entries_with_parents(storage: st.SessionStorage) -> None:
    entries, parents = storage.get_entries_with_parents()
    assert storage.get_parent_positions() == parents
    assert parents.count(-1) == 2
    assert storage.get_entries_at(range(len(entries))) == entries
    assert storage.get_entries_at([3, 0]) == [entries[3], entries[0]]
    ids = [e.id for e in entries]
    assert storage.get_positions(ids) == list(range(len(ids)))
    assert storage.get_positions(["nope", ids[2]]) == [None, 2]


@pytest.mark.parametrize("bad", [-1, 10_000, True, 1.5])
def test_entries_at_refuses_bad_positions(storage: st.SessionStorage, bad: object) -> None:
    with pytest.raises(st.SessionError) as err:
        storage.get_entries_at([bad])  # type: ignore[list-item]
    assert err.value.code == "invalid_argument"
