"""``file://`` destinations: objects as files in a directory on this machine.

Each object is written to a temporary file beside its final name (``.<name>.<random>.tmp``), flushed to disk,
renamed into place and the directory entry flushed too: a reader sees the whole object or none of it, and a crash
leaves at most a temporary file behind. Files are created with mode 0640 (logs hold client addresses); missing
directories (such as a new ``{DATE}`` directory) are created.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from edgeplane.logs.destination_conf import FileDestination, expand_date
from edgeplane.logs.destinations.destination import GZIP, check_object_name
from edgeplane.logs.destinations.errors import DestinationFailure, DestinationRejected, DestinationUnavailable

FILE_MODE: Final = 0o640
# Errors that repeat until someone changes the file system or the job; the others (a full disk, an I/O error)
# may clear by themselves.
_PERMANENT_ERRNOS: Final = frozenset(
    {errno.EACCES, errno.EPERM, errno.EEXIST, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG, errno.ELOOP}
)


class FileUploader:
    """The ``Destination`` for a ``FileDestination``."""

    def __init__(self, destination: FileDestination) -> None:
        self.destination = destination

    async def put(
        self,
        object_name: str,
        body: bytes,
        *,
        content_type: str = GZIP,
        content_encoding: str | None = None,
        when: datetime | None = None,
    ) -> None:
        """Write ``body`` atomically as ``<directory>/<object_name>`` (``{DATE}`` expanded for ``when``, default
        now). The content type and encoding are not stored: the object name's extension carries them."""
        check_object_name(object_name)
        await asyncio.to_thread(self._write, object_name, body, when or datetime.now(UTC))

    async def write_challenge(self, filename: str, text: str) -> None:
        """Write ``text`` (UTF-8) atomically as ``<directory>/<filename>``."""
        check_object_name(filename)
        await asyncio.to_thread(self._write, filename, text.encode(), datetime.now(UTC))

    async def close(self) -> None:
        """Nothing to release."""

    def _write(self, object_name: str, body: bytes, when: datetime) -> None:
        target = Path(expand_date(self.destination.directory, when), object_name)
        try:
            write_atomically(target, body)
        except OSError as error:
            raise _failure(self.destination, error) from None


def write_atomically(target: Path, body: bytes) -> None:
    """Make ``target`` hold exactly ``body``, durably, without a reader ever seeing a partial file; raises
    ``OSError`` (and leaves no temporary file behind) when that cannot be done."""
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as file:
            os.fchmod(file.fileno(), FILE_MODE)
            file.write(body)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    directory = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _failure(destination: FileDestination, error: OSError) -> DestinationFailure:
    reason = error.strerror or str(error)
    message = f"{destination.redacted()}: cannot write {error.filename or 'the object'}: {reason}"
    if error.errno in _PERMANENT_ERRNOS:
        return DestinationRejected(message)
    return DestinationUnavailable(message)
