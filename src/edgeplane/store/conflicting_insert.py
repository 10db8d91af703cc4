"""An INSERT that says what to do with a row whose key is already there (``ON CONFLICT``): SQLAlchemy has it per
dialect only, and the configuration database is SQLite or PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def conflicting_insert(session: Session, table: Any) -> postgresql.Insert | sqlite.Insert:
    """An insert into ``table`` (a model or a table) for the session's database, with ``on_conflict_do_nothing``
    and ``on_conflict_do_update``. Raises ``ValueError`` for a database other than SQLite and PostgreSQL."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise ValueError(f"no ON CONFLICT insert for a {dialect} database")
