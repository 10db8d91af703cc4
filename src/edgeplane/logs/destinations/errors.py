"""How an upload to a destination fails: worth retrying, or not until the user changes something.

Every destination raises only these. ``str()`` is a message fit for the job's ``error_message``: it names the
destination by its redacted conf and never holds a secret (an S3 secret key or an HTTPS header value).
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# 408 Request Timeout, 425 Too Early and 429 Too Many Requests say "later"; every other 4xx says "not like this".
_TRANSIENT_CLIENT_STATUSES = frozenset({408, 425, 429})


class DestinationFailure(Exception):
    """An upload that the destination did not confirm; ``str()`` says why, for the job's ``error_message``."""


class DestinationUnavailable(DestinationFailure):
    """A failure that may pass by itself: connection refused or reset, a timeout, a 5xx, 429 or throttling answer,
    a full disk, a name that does not resolve to an allowed address now. Retry later with backoff; ``retry_after``
    is the delay in seconds the destination asked for, if it asked for one."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class DestinationRejected(DestinationFailure):
    """A failure that repeats until the user changes the job or the destination: wrong credentials, a missing
    bucket, access denied, a certificate that does not verify, an address or directory the policy refuses."""


def failure_for_status(status: int, message: str, *, retry_after: float | None = None) -> DestinationFailure:
    """The failure a non-2xx HTTP ``status`` means: ``DestinationUnavailable`` for 5xx, 408, 425 and 429,
    ``DestinationRejected`` for every other status."""
    if status >= 500 or status in _TRANSIENT_CLIENT_STATUSES:
        return DestinationUnavailable(message, retry_after=retry_after)
    return DestinationRejected(message)


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """The delay a ``Retry-After`` header asks for, in seconds (delta-seconds or an HTTP date); ``None`` when the
    header is absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
