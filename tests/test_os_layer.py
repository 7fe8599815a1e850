"""Which OS layer the extension was built with (issue 26, item 4): `make test-portable`
runs the whole suite on the engine's portable path, and this proves it did."""

from __future__ import annotations

import os
import sys

import sessiontree
from sessiontree import _core


def test_the_suite_runs_on_the_os_layer_it_was_asked_for() -> None:
    if os.environ.get("SESSIONTREE_EXPECT_PORTABLE") == "1":
        assert _core.LINUX_FAST is False
        assert os.sep + ".portable" + os.sep in sessiontree.__file__
    elif sys.platform == "linux":
        # The default Linux build keeps its speed-ups (statx, copy_file_range, inotify).
        assert _core.LINUX_FAST is True
