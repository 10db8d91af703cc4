"""The configuration database of the delivery lease tests: SQLite in the test's directory, and PostgreSQL on a real
server started once per test module."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest

from edgeplane.store.database import Database, default_database_url
from tests.support.postgres import PostgresServer

_databases = count()


@pytest.fixture(scope="module")
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
        url = request.getfixturevalue("postgres").fresh_database(f"logs_{next(_databases)}")
    database = Database(url)
    database.migrate()
    yield database
    database.close()
