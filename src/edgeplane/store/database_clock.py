"""The database's clock in SQL: ``database_seconds()`` is the current time in seconds since 1970 as the database
server reads it. Leases compare against it, so that machines whose clocks disagree still agree on when a lease
expires. Written by hand because SQL has no portable form of it: PostgreSQL reads the epoch of ``now()`` (the start
of the transaction; transactions on leases are short), SQLite converts its Julian day (to the millisecond;
``CURRENT_TIMESTAMP`` has whole seconds only)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Double
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement


class database_seconds(FunctionElement[float]):  # named as the SQL function it stands for
    """The database's current time, in seconds since 1970."""

    type = Double()
    inherit_cache = True


@compiles(database_seconds)
def _postgresql_seconds(_element: database_seconds, _compiler: Any, **_kw: Any) -> str:
    return "CAST(EXTRACT(EPOCH FROM now()) AS DOUBLE PRECISION)"


@compiles(database_seconds, "sqlite")
def _sqlite_seconds(_element: database_seconds, _compiler: Any, **_kw: Any) -> str:
    return "((julianday('now') - 2440587.5) * 86400.0)"
