"""The one interface every destination implements, and the rules object names follow."""

from __future__ import annotations

from datetime import datetime
from typing import Final, Protocol

GZIP: Final = "application/gzip"
MAX_OBJECT_NAME_LENGTH: Final = 512


class Destination(Protocol):
    """Where a Logpush job's batches go. An upload either returns (the destination confirmed it: the object is
    durable and complete, or the endpoint answered 2xx) or raises ``DestinationFailure``; nothing in between.

    Uploading the same ``object_name`` twice replaces the first object (file, S3) or posts it again (HTTPS), so a
    retried batch does not leave a second copy where names identify objects.
    """

    async def put(
        self,
        object_name: str,
        body: bytes,
        *,
        content_type: str = GZIP,
        content_encoding: str | None = None,
        when: datetime | None = None,
    ) -> None:
        """Upload one gzip batch as ``object_name`` (relative, ``/``-separated) under the destination's directory
        or prefix, with ``{DATE}`` in it expanded for ``when`` (default: now, UTC).

        Raises ``DestinationUnavailable`` (retry later) or ``DestinationRejected`` (retrying will not help), and
        ``ValueError`` for an ``object_name`` that ``check_object_name`` refuses."""
        ...

    async def write_challenge(self, filename: str, text: str) -> None:
        """Write the ownership challenge ``text`` as ``filename`` where the batches go. Raises like ``put``."""
        ...

    async def close(self) -> None:
        """Release connections and threads; the destination is not used afterwards."""
        ...


def check_object_name(name: str) -> str:
    """``name`` when it is a relative ``/``-separated path of at most ``MAX_OBJECT_NAME_LENGTH`` characters with no
    empty, ``.`` or ``..`` segment, backslash or control character; raises ``ValueError`` otherwise (a programming
    error of the caller, not a destination failure)."""
    if not name or len(name) > MAX_OBJECT_NAME_LENGTH:
        raise ValueError(f"object name must have 1 to {MAX_OBJECT_NAME_LENGTH} characters")
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in name) or "\\" in name:
        raise ValueError(f"object name {name!r} has a control character or a backslash")
    if any(segment in ("", ".", "..") for segment in name.split("/")):
        raise ValueError(f"object name {name!r} must be relative, with no empty, '.' or '..' segment")
    return name
