"""Batched counts reach their counters: at once outside an event loop, within ``PUBLISH_SECONDS`` inside one, and
whenever ``publish`` is called."""

from __future__ import annotations

import asyncio

from edgeplane import batched_counts
from edgeplane.batched_counts import PUBLISH_SECONDS, BatchedCount


class Recorded:
    def __init__(self) -> None:
        self.total = 0.0
        self.calls = 0

    def inc(self, amount: float = 1) -> None:
        self.total += amount
        self.calls += 1


def test_outside_an_event_loop_every_count_is_published_at_once() -> None:
    counter = Recorded()
    count = BatchedCount(counter)
    count.add()
    count.add()
    assert counter.total == 2


async def test_inside_an_event_loop_counts_are_published_together_soon() -> None:
    first, second = Recorded(), Recorded()
    counts = BatchedCount(first), BatchedCount(second)
    for _ in range(100):
        for count in counts:
            count.add()
    assert (first.total, second.total) == (0, 0)
    await asyncio.sleep(PUBLISH_SECONDS + 0.1)
    assert (first.total, first.calls, second.total, second.calls) == (100, 1, 100, 1)
    counts[0].add()
    batched_counts.publish()  # as a stopping worker does
    assert first.total == 101
    await asyncio.sleep(PUBLISH_SECONDS + 0.1)
    assert (first.total, second.total) == (101, 100)


def test_counts_left_by_a_loop_that_ended_are_published_by_the_next() -> None:
    counter = Recorded()
    count = BatchedCount(counter)

    async def add_and_leave() -> None:
        count.add()

    async def add_and_wait() -> None:
        count.add()
        await asyncio.sleep(PUBLISH_SECONDS + 0.1)

    asyncio.run(add_and_leave())  # its loop ends before the publication it scheduled
    assert counter.total == 0
    asyncio.run(add_and_wait())
    assert counter.total == 2
