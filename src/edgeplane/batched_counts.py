"""Prometheus counters incremented once per request, counted in plain integers and published in batches.

Why: an increment of a prometheus_client counter takes a lock and, with several edge workers, writes to a shared
memory-mapped file; on the gateway's busiest path (an answer from the response cache) the two increments of each
request cost about 2 % of the edge's CPU. A ``BatchedCount`` adds 1 to an integer instead, and
``publish`` hands each count to its counter in one increment. Inside an event loop, a count makes sure a
publication is scheduled on that loop within ``PUBLISH_SECONDS``, so a scrape sees a count at most that late; outside
one (a script, a test), every count is published at once. ``publish`` is also called when a worker stops. Counts are
made on the thread of the event loop that publishes them.
"""

from __future__ import annotations

import asyncio
from typing import Final, Protocol

import structlog

log = structlog.get_logger(__name__)

PUBLISH_SECONDS: Final = 0.25


class _Incrementable(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class BatchedCount:
    """One labelled counter (a prometheus_client child), counted in batches (see the module docstring)."""

    __slots__ = ("_counter", "_pending")

    def __init__(self, counter: _Incrementable) -> None:
        self._counter = counter
        self._pending = 0

    def add(self) -> None:
        """Counts one."""
        self._pending += 1
        if self._pending == 1:
            _waiting.append(self)
        _schedule()

    def _publish(self) -> None:
        pending, self._pending = self._pending, 0
        if pending:
            self._counter.inc(pending)


_waiting: list[BatchedCount] = []  # counts with something to publish
_scheduled_on: asyncio.AbstractEventLoop | None = None  # the loop of the publication to come (None: none is)


def publish() -> None:
    """Hands every pending count to its counter now."""
    global _scheduled_on
    _scheduled_on = None
    waiting = _waiting[:]
    _waiting.clear()
    for count in waiting:
        try:
            count._publish()
        except Exception:  # a counter that cannot count (none should): the others still publish
            log.exception("a batched count could not be published")


def _schedule() -> None:
    """Makes sure a publication is to come on the running loop (a loop that ended with one scheduled never ran it:
    another is scheduled on the next loop)."""
    global _scheduled_on
    if _scheduled_on is not None and _scheduled_on.is_running():
        return  # this thread's loop, which has one scheduled: asking for the running loop (a system call) is not needed
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        publish()
        return
    if _scheduled_on is not loop:
        _scheduled_on = loop
        loop.call_later(PUBLISH_SECONDS, publish)
