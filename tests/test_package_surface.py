"""What a newcomer meets first: the package's public names, and the small rules that
surprised the newcomer trial of issue 25 (empty labels, the wording of errors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sessiontree as st


def test_dir_shows_only_the_public_api() -> None:
    names = dir(st)
    assert names == sorted(st.__all__)
    for private in ("TYPE_CHECKING", "annotations", "_LAZY", "_core", "storage", "model"):
        assert private not in names
    # Every name dir() shows is really there (the lazy ones load on first use).
    for name in names:
        if name not in {"ClaudeAgentSessionStore", "OpenAIAgentsSession"}:
            getattr(st, name)


def test_an_empty_label_is_refused_and_none_clears(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path, durability="flush")) as s:
        hello = s.append_message(st.UserMessage("hello"))
        s.append_label(hello, "greeting")
        before = path.read_bytes()
        with pytest.raises(st.SessionError) as err:
            s.append_label(hello, "")
        assert err.value.code == "invalid_argument"
        assert "must not be empty" in err.value.message
        assert path.read_bytes() == before  # nothing written
        assert s.get_label(hello) == "greeting"
        s.append_label(hello, None)
        assert s.get_label(hello) is None
    with pytest.raises(st.SessionError) as err:
        st.LabelEntry(id="0000000a", parent_id=None, timestamp="t", target_id="x", label="")
    assert err.value.code == "invalid_argument"


def test_a_file_holding_an_empty_label_still_loads(tmp_path: Path) -> None:
    """The rule is the constructor's: a file written elsewhere with ``""`` loads as it is."""
    path = tmp_path / "s.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path, durability="flush")) as s:
        hello = s.append_message(st.UserMessage("hello"))
        leaf = s.get_leaf_id()
    line = {
        "type": "label",
        "id": "0000abcd",
        "parent_id": leaf,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "target_id": hello,
        "label": "",
    }
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")
    with st.JsonlSessionStorage.open(path, readonly=True) as storage:
        assert storage.load_report.issues == ()
        entry = storage.get_entry("0000abcd")
        assert isinstance(entry, st.LabelEntry) and entry.label == ""
