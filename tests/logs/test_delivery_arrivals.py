"""An idle job with a doorbell (``Arrivals``, rung by the delivery process's intake) waits for it instead of reading
the store every 0.2 s, and delivers what arrives as soon as the bell rings."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from edgeplane.logs.arrivals import Arrivals
from edgeplane.logs.delivery import JobDelivery, plan_job
from edgeplane.logs.log_store import SegmentedLogStore
from tests.logs.test_delivery_batches import (
    HTTP,
    SNAPSHOT,
    RecordingDestination,
    job,
    stored,
)
from tests.support.recorded_job_status import RecordedJobStatus


async def test_an_idle_job_waits_for_the_bell_and_delivers_when_it_rings(tmp_path: Path) -> None:
    destination = RecordingDestination()
    arrivals = Arrivals()
    with stored(tmp_path, 0) as store:
        plan = plan_job(job(5, 3600), SNAPSHOT)
        delivery = JobDelivery(plan, [store], destination, RecordedJobStatus(), arrivals=arrivals)  # type: ignore[arg-type]
        task = asyncio.create_task(delivery.run())
        try:
            await asyncio.sleep(1.0)
            idle_reads = len(store.reads_from)
            assert 1 <= idle_reads <= 2  # a look at the start; without the bell, five more in that second
            with SegmentedLogStore(tmp_path) as writer:
                writer.append_rows(HTTP, [{"RayID": f"{i:016x}", "ZoneName": "example.com"} for i in range(5)])
                writer.flush()
            arrivals.ring()
            for _ in range(200):  # 2 s: less than the 5 s a job waits for a bell that does not ring
                if destination.uploads:
                    break
                assert not task.done(), task.exception()
                await asyncio.sleep(0.01)
            assert [len(upload) for upload in destination.uploads] == [5]  # a full batch, delivered on the ring
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task


def test_a_ring_hangs_a_new_bell() -> None:
    async def scenario() -> None:
        arrivals = Arrivals()
        taken = arrivals.bell()
        arrivals.ring()
        assert taken.is_set()  # a job that took this bell before the ring wakes at once
        assert not arrivals.bell().is_set()

    asyncio.run(scenario())
