"""The configuration database: SQLite in the data directory by default, PostgreSQL by URL, migrated with Alembic
at start."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, make_url, text
from sqlalchemy.orm import Session, sessionmaker

# Imported for their side effect: registering the rulesets, previous WAF and delivery lease tables with the models'
# metadata.
import edgeplane.store.delivery_models
import edgeplane.store.previous_waf_models
import edgeplane.store.ruleset_models  # noqa: F401

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def default_database_url(data_dir: Path) -> str:
    """The embedded default: a SQLite file in the data directory."""
    return f"sqlite:///{data_dir / 'edgeplane.db'}"


def _normalise(url: str) -> str:
    # "postgresql://" means the psycopg 3 driver here (the one edgeplane ships).
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def open_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets foreign keys and write-ahead logging."""
    url = _normalise(url)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(connection: Any, _record: Any) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


# The PostgreSQL advisory lock that serialises migrations (an arbitrary number, edgeplane's own).
_MIGRATION_LOCK = 0x6564676570


def migrate(engine: Engine) -> None:
    """Brings the schema to the latest migration."""
    # Imported here: only the supervisor migrates, and alembic is a third of what a child process would import.
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            # Nodes of a cluster start together and each migrates: one at a time, the others then find it done.
            # The lock is the transaction's, released at its end.
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


# What a SQLite file's stat says of its writes: (modification time in ns, size, inode); None when it does not exist.
FileState = tuple[int, int, int] | None


class Database:
    """An engine and its sessions."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = open_engine(url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._files = _sqlite_files(self.engine)

    def change_marker(self) -> tuple[FileState, ...] | None:
        """Something that differs after any commit to the database, read without asking the database: for a SQLite
        file, the stat of the file and of its write-ahead log (every commit writes one of them). None when there is
        no such thing (PostgreSQL, an in-memory SQLite): ask the database."""
        if not self._files:
            return None
        return tuple(_file_state(path) for path in self._files)

    def migrate(self) -> None:
        """Brings the schema to the latest migration."""
        migrate(self.engine)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session committed when the block ends without error, rolled back otherwise."""
        with self._sessions() as session, session.begin():
            yield session

    def close(self) -> None:
        """Closes every pooled connection."""
        self.engine.dispose()


def _sqlite_files(engine: Engine) -> tuple[str, ...]:
    """A SQLite database's file and its write-ahead log; none for another database or an in-memory one."""
    url = make_url(engine.url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return ()
    path = os.path.abspath(url.database)
    return (path, path + "-wal")


def _file_state(path: str) -> FileState:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size, status.st_ino)
