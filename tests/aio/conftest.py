"""Fixtures of the async API's tests."""

from __future__ import annotations

import pytest

from .aiohelp import ThreadRecordingStorage


@pytest.fixture
def recording() -> ThreadRecordingStorage:
    return ThreadRecordingStorage()
