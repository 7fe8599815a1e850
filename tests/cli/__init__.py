"""Tests of the ``sessiontree`` command (a package, so its ``conftest`` does not clash with
``tests/conftest.py``)."""
