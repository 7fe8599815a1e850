"""The Python side's portable paths (issue 26, item 4), forced on Linux: the package works
where ``fcntl`` does not exist (Windows) and where ``/proc`` is not there (macOS, Windows).
`make check-targets` compiles the engine for those platforms; these run the Python code
they would take."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

import sessiontree as st
from sessiontree.cli import _progress
from sessiontree.errors import SessionError
from sessiontree.model.messages import UserMessage


def _write_session(repo: st.JsonlSessionRepo) -> str:
    session = repo.create()
    session.append_message(UserMessage(content="hello", timestamp=0))
    sid = session.id
    session.close()
    return sid


def test_a_session_is_deleted_without_fcntl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = st.JsonlSessionRepo(tmp_path)
    a = _write_session(repo)
    b = _write_session(repo)
    monkeypatch.setitem(sys.modules, "fcntl", None)  # `import fcntl` raises ImportError
    with pytest.raises(ImportError):
        import fcntl  # noqa: F401
    repo.delete(a)
    assert [m.id for m in repo.list()] == [b]
    assert not any(a in p.name for p in tmp_path.iterdir())
    with pytest.raises(SessionError) as exc:
        repo.delete(a)
    assert exc.value.code == "not_found"


def _plain_progress(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], path: Path
) -> str:
    """Opens ``path`` under the progress bar for longer than its polling period, without
    the ``cli`` extra's rich (the plain bar writes its text as is), and returns stderr."""
    monkeypatch.setitem(sys.modules, "rich.console", None)  # its import raises ImportError

    def load() -> int:
        with path.open("rb") as f:
            f.read(3_000_000)
            time.sleep(4 * _progress._POLL_S)
            return f.tell()

    assert _progress.with_progress(str(path), 5_000_000, False, load) == 3_000_000
    return capsys.readouterr().err


@pytest.fixture
def big(tmp_path: Path) -> Path:
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"x" * 5_000_000)
    return path


@pytest.mark.skipif(not os.path.isdir("/proc/self/fdinfo"), reason="needs Linux's /proc")
def test_the_bar_shows_how_far_the_read_is_from_proc(
    big: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _plain_progress(monkeypatch, capsys, big)
    assert "Reading big.jsonl: 3.0 of 5.0 MB" in err


def test_the_bar_pulses_without_proc(
    big: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    err = _plain_progress(monkeypatch, capsys, big)
    assert "Reading big.jsonl: … of 5.0 MB" in err
    assert "3.0 of" not in err
