"""``file://`` destinations: objects as files in a directory under the operator's file root.

A destination's directory must lie inside the root (``logs.destinations.file_root``), as written (``relative_to_root``)
and as found on disk: the path below the root is walked one directory at a time, each opened without following a
symbolic link (``O_NOFOLLOW``) relative to the one before, so a link placed anywhere below the root, even while a
write is under way, cannot lead a write outside it. The root itself may be a link (the operator's choice).

Each object is written to a temporary file beside its final name (``.<name>.<random>.tmp``), flushed to disk,
renamed into place and the directory entry flushed too: a reader sees the whole object or none of it, and a crash
leaves at most a temporary file behind. Files are created with mode 0640 (logs hold client addresses), missing
directories (such as a new ``{DATE}`` directory) with mode 0750.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import stat
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Final

from edgeplane.logs.destination_conf import FileDestination, expand_date
from edgeplane.logs.destinations.destination import GZIP, check_object_name
from edgeplane.logs.destinations.errors import DestinationFailure, DestinationRejected, DestinationUnavailable
from edgeplane.logs.errors import DestinationError

FILE_MODE: Final = 0o640
DIRECTORY_MODE: Final = 0o750
_DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# Errors that repeat until someone changes the file system or the job; the others (a full disk, an I/O error)
# may clear by themselves.
_PERMANENT_ERRNOS: Final = frozenset(
    {errno.EACCES, errno.EPERM, errno.EEXIST, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG, errno.ELOOP}
)


class FileUploader:
    """The ``Destination`` for a ``FileDestination``, confined to ``root``."""

    def __init__(self, destination: FileDestination, *, root: Path | None) -> None:
        self.destination = destination
        self.root = root

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
        if self.root is None:
            raise DestinationRejected(f"{self.destination.redacted()}: file:// destinations are not enabled")
        try:
            below = relative_to_root(expand_date(self.destination.directory, when), self.root)
        except DestinationError as error:
            raise DestinationRejected(f"{self.destination.redacted()}: {error}") from None
        *directories, name = (*below.parts, *object_name.split("/"))
        try:
            write_confined(self.root, directories, name, body)
        except OSError as error:
            raise _failure(self.destination, error) from None


def relative_to_root(directory: str, root: Path) -> PurePosixPath:
    """``directory`` (absolute) as a path below ``root``; raises ``DestinationError`` when it is not inside it (or
    is not absolute, or has a ``..`` segment)."""
    path = PurePosixPath(directory)
    if not path.is_absolute() or ".." in path.parts:
        raise DestinationError("file:// destination path must be absolute, with no '..' segment")
    top = PurePosixPath(os.path.normpath(root))
    try:
        return path.relative_to(top)
    except ValueError:
        raise DestinationError(f"file:// destinations must be directories under {top}") from None


def write_confined(root: Path, directories: list[str], name: str, body: bytes) -> None:
    """Make ``root/<directories...>/name`` hold exactly ``body``, durably and atomically, creating the directories,
    never following a symbolic link below ``root``; raises ``OSError`` (``ELOOP`` or ``ENOTDIR`` for a link in the
    way) and leaves no temporary file behind when that cannot be done."""
    os.makedirs(root, mode=DIRECTORY_MODE, exist_ok=True)
    directory = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in directories:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, DIRECTORY_MODE, dir_fd=directory)
            try:
                below = os.open(part, _DIRECTORY_FLAGS, dir_fd=directory)
            except OSError as error:
                if error.errno in (errno.ENOTDIR, errno.ELOOP) and _is_link(part, directory):
                    raise OSError(errno.ELOOP, "a symbolic link, which is not followed", part) from None
                raise
            os.close(directory)
            directory = below
        _replace_in(directory, name, body)
    finally:
        os.close(directory)


def _is_link(name: str, directory: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _replace_in(directory: int, name: str, body: bytes) -> None:
    temporary = f".{name}.{secrets.token_hex(6)}.tmp"
    descriptor = os.open(temporary, _NEW_FILE_FLAGS, FILE_MODE, dir_fd=directory)
    try:
        with os.fdopen(descriptor, "wb") as file:
            os.fchmod(file.fileno(), FILE_MODE)
            file.write(body)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=directory)
        raise
    os.fsync(directory)


def _failure(destination: FileDestination, error: OSError) -> DestinationFailure:
    reason = error.strerror or str(error)
    message = f"{destination.redacted()}: cannot write {error.filename or 'the object'}: {reason}"
    if error.errno in _PERMANENT_ERRNOS:
        return DestinationRejected(message)
    return DestinationUnavailable(message)
