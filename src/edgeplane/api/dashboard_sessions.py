"""The dashboard's sessions: a signed-in browser holds a random session id in an HTTP-only cookie; the database holds
only the id's hash, whose user, which API token when the session was opened with one, and when it ends.

A session is a third way to present the credentials the API already knows, not a new kind of caller: opened with a
password it is the user (as the global API key is), opened with an API token it is that token, read again at each
request, so that a token revoked or narrowed ends or narrows its sessions at once (``edgeplane.api.auth``).

A cookie goes with every request the browser makes, including ones another site makes it send; so a request with
the session cookie that may change something must also carry the session's CSRF token in ``X-CSRF-Token``, which
only the dashboard's own pages can read (the answer to ``GET /session``). The CSRF token is derived from the session
id with HMAC: nothing more to store, and it does not reveal the id.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.orm import Session

from edgeplane.api.credentials import secret_hash
from edgeplane.store.models import DashboardSession

SESSION_COOKIE = "edgeplane_session"
CSRF_HEADER = "x-csrf-token"
# How long a session lasts after sign in, however it is used: a working day, then sign in again.
SESSION_LIFETIME = timedelta(hours=12)


@dataclass(frozen=True, slots=True)
class OpenedSession:
    """A session just opened: the cookie's value (shown once, never stored) and when it ends."""

    session_id: str
    expires_on: datetime


def open_session(session: Session, *, user_id: str, token_id: str | None, now: datetime | None = None) -> OpenedSession:
    """Records a new session of ``user_id`` (as the API token ``token_id`` when given), in the caller's
    transaction. Expired sessions are removed on the way: the table holds only live ones and the just-ended."""
    now = now or datetime.now(UTC)
    session.execute(delete(DashboardSession).where(DashboardSession.expires_on <= now))
    session_id = secrets.token_urlsafe(32)
    expires_on = now + SESSION_LIFETIME
    session.add(
        DashboardSession(
            id_hash=secret_hash(session_id), user_id=user_id, token_id=token_id, created_on=now, expires_on=expires_on
        )
    )
    session.flush()
    return OpenedSession(session_id, expires_on)


def live_session(session: Session, session_id: str, *, now: datetime | None = None) -> DashboardSession | None:
    """The session whose cookie holds ``session_id``, unless it ended (expired or signed out)."""
    record = session.get(DashboardSession, secret_hash(session_id))
    if record is None or _aware(record.expires_on) <= (now or datetime.now(UTC)):
        return None
    return record


def close_session(session: Session, session_id: str) -> None:
    """Ends the session (sign out), in the caller's transaction; nothing when it is not there."""
    session.execute(delete(DashboardSession).where(DashboardSession.id_hash == secret_hash(session_id)))


def csrf_token(session_id: str) -> str:
    """The CSRF token of the session: what a state-changing request with its cookie must carry."""
    return hmac.new(session_id.encode("utf-8"), b"edgeplane dashboard csrf", hashlib.sha256).hexdigest()


def csrf_token_matches(session_id: str, presented: str | None) -> bool:
    """True when ``presented`` is the session's CSRF token (constant-time)."""
    return presented is not None and hmac.compare_digest(csrf_token(session_id), presented)


def _aware(moment: datetime) -> datetime:
    # SQLite gives back naive datetimes (stored as UTC); PostgreSQL aware ones.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
