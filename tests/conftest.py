"""Fixtures shared by the suite: the configuration database, on SQLite and on a real PostgreSQL server the suite
starts itself (once per test process). A directory or module that needs another database defines its own."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest

from edgeplane.store.database import Database, default_database_url
from tests.support.postgres import PostgresServer

_databases = count()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A migrated database, once on each."""
    if request.param == "sqlite":
        url = default_database_url(tmp_path)
    else:
        url = request.getfixturevalue("postgres").fresh_database(f"test_{next(_databases)}")
    database = Database(url)
    database.migrate()
    yield database
    database.close()
