"""The PostgreSQL server of a test run: the one ``SESSIONTREE_PG_DSN`` names, or a
throwaway cluster started by ``pg-cluster.sh`` beside this file (and stopped at the end).

A real server, never a mock. Without either (no DSN, no PostgreSQL binaries) the tests
that need it skip, except under CI (``CI=true``), where they fail: CI must run them.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

SCRIPT = pathlib.Path(__file__).with_name("pg-cluster.sh")


@dataclass
class PgServer:
    """A server the tests may use: its conninfo, and the cluster directory when this run
    started it (so tests can restart it), else ``None``."""

    dsn: str
    cluster_dir: str | None = None

    def admin(self) -> object:
        """A new autocommit psycopg connection to the server."""
        import psycopg

        return psycopg.connect(self.dsn, autocommit=True)

    def restart(self) -> None:
        """Restarts the server (only a cluster this run started)."""
        assert self.cluster_dir is not None, "restart needs a cluster started by the tests"
        subprocess.run([str(SCRIPT), "restart", self.cluster_dir], check=True, timeout=120)


def _no_server(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the PostgreSQL tests, but {why}")
    pytest.skip(f"no PostgreSQL server: {why}")


def pg_server_for_run() -> Iterator[PgServer]:
    """Yields the run's server (the body of the ``pg_server`` session fixture)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _no_server("psycopg is not installed (pip install 'sessiontree[postgres]')")
    dsn = os.environ.get("SESSIONTREE_PG_DSN")
    if dsn:
        yield PgServer(dsn, os.environ.get("SESSIONTREE_PG_DIR") or None)
        return
    if shutil.which("initdb") is None and not list(
        pathlib.Path("/usr/lib/postgresql").glob("*/bin/initdb")
    ):
        _no_server("SESSIONTREE_PG_DSN is not set and initdb is not installed")
    out = subprocess.run(
        [str(SCRIPT), "start"], capture_output=True, text=True, timeout=180, check=False
    )
    if out.returncode != 0:
        _no_server(f"pg-cluster.sh start failed: {out.stderr.strip()[-500:]}")
    dsn = out.stdout.strip().splitlines()[-1]
    cluster = dsn_dir = None
    for line in out.stdout.splitlines():
        if line.startswith("dir="):
            dsn_dir = line[4:]
    cluster = dsn_dir
    try:
        yield PgServer(dsn, cluster)
    finally:
        if cluster:
            subprocess.run([str(SCRIPT), "stop", cluster], timeout=120, check=False)


def fresh_schema(server: PgServer) -> Iterator[str]:
    """Yields a new schema name (the tables are made on first use) and drops it after."""
    name = "t_" + uuid.uuid4().hex[:16]
    yield name
    import psycopg

    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
    except psycopg.Error:
        pass  # a test that broke the server leaves its schema; the cluster is throwaway
