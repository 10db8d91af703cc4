"""A wake-up for the journal intake when an edge worker seals a journal period: the seal is a rename into the
worker's journal directory (``<period>.journal`` to ``<period>.sealed``), which Linux's inotify reports as it happens,
so the delivery process takes a period at once instead of looking at every directory ten times a second.

Linux only (through libc's ``inotify_*`` functions); elsewhere, or when the kernel refuses a watch, ``SealWatch.open``
answers None and the caller looks at the directories on a timer as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import sys
from collections.abc import Iterable
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

_IN_MOVED_TO = 0x00000080
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000


class SealWatch:
    """Watches journal directories for sealed periods: ``sealed`` is set when one was sealed since it was cleared."""

    def __init__(self, descriptor: int) -> None:
        self._descriptor = descriptor
        self.sealed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def open(cls, directories: Iterable[Path]) -> SealWatch | None:
        """A watch of ``directories`` (each created when missing), read on the running loop; None where inotify is
        not available (logged)."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            descriptor = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if descriptor < 0:
            log.warning("no inotify for the journal intake; it looks on a timer", errno=ctypes.get_errno())
            return None
        for directory in directories:
            directory.mkdir(parents=True, exist_ok=True)
            if libc.inotify_add_watch(descriptor, os.fsencode(directory), _IN_MOVED_TO) < 0:
                log.warning(
                    "no inotify watch of a journal directory; the intake looks on a timer",
                    directory=str(directory),
                    errno=ctypes.get_errno(),
                )
                os.close(descriptor)
                return None
        watch = cls(descriptor)
        watch._loop = asyncio.get_running_loop()
        watch._loop.add_reader(descriptor, watch._drain)
        return watch

    def _drain(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._descriptor, 65536):
                pass
        self.sealed.set()

    def close(self) -> None:
        """Stops watching."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._descriptor)
        os.close(self._descriptor)
