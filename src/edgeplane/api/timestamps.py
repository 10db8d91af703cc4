"""Timestamps in the v4 form: RFC 3339 in UTC with microseconds and a ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(moment: datetime | None) -> str | None:
    """``2026-11-21T10:00:00.000000Z``, or None."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # SQLite keeps no zone; everything is stored in UTC
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
