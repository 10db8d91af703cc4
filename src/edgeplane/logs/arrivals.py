"""The delivery process's doorbell: rung when records became readable in the log store, so that Logpush jobs with
nothing to send wait for it instead of reading the store again and again.

The intake (``edgeplane.logs.journal_intake``) takes sealed journal periods into the stores and rings once they are
written; each idle job waits for the next ring, or for its batch's deadline, whichever comes first. A job takes the
bell *before* it reads (``bell``) and waits on that one: a ring between its read and its wait is not missed.
Without a doorbell (a job driven by a test, or by a process that appends to the store itself) jobs look at the
store every ``_IDLE_SECONDS`` as before (``edgeplane.logs.delivery``).

Written here: an ``asyncio.Event`` per ring is the whole mechanism; a library would add nothing.
"""

from __future__ import annotations

import asyncio

__all__ = ["Arrivals"]


class Arrivals:
    """Rung when new records are readable; waited on by idle jobs (see the module docstring). Use from one event
    loop."""

    def __init__(self) -> None:
        self._bell = asyncio.Event()

    def bell(self) -> asyncio.Event:
        """The bell the next ring rings: take it before looking at the store, then ``wait`` on it."""
        return self._bell

    def ring(self) -> None:
        """New records are readable: wakes every job waiting on the current bell, and hangs a new one."""
        self._bell.set()
        self._bell = asyncio.Event()
