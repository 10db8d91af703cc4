"""Configuration announcements through PostgreSQL's LISTEN/NOTIFY: when the configuration database is PostgreSQL,
the API also announces each new version on the database's channel ``edgeplane_config``, so that a follower on
another machine (with no way to the API's local socket) applies it at once too. A follower on the API's machine
hears both; applying is by version, so the second is a no-op."""

from __future__ import annotations

from collections.abc import AsyncIterator

from sqlalchemy import make_url, text
from sqlalchemy.orm import Session

from edgeplane.store.database import Database

NOTIFY_CHANNEL = "edgeplane_config"


def announces_in_database(database: Database) -> bool:
    """Whether ``database`` carries announcements (PostgreSQL does; SQLite has no such thing)."""
    return database.engine.dialect.name == "postgresql"


def announce_in_database(session: Session, version: int) -> None:
    """Announces ``version`` to every listener when ``session`` commits (PostgreSQL only)."""
    session.execute(text("SELECT pg_notify(:channel, :payload)"), {"channel": NOTIFY_CHANNEL, "payload": str(version)})


async def database_announcements(database: Database) -> AsyncIterator[int]:
    """The versions announced on the database's channel, from the moment this listens; ends (or raises
    ``psycopg.Error``) when the connection is lost. A payload that is not a version is skipped."""
    import psycopg  # only a follower of a PostgreSQL database needs it

    url = make_url(database.url).set(drivername="postgresql")
    connection = await psycopg.AsyncConnection.connect(url.render_as_string(hide_password=False), autocommit=True)
    async with connection:
        await connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
        async for notification in connection.notifies():
            if notification.payload.isdigit():
                yield int(notification.payload)
