"""When a job's batches go: at once when full, at the job's interval with what they hold, and after a failed upload
again within ``retry_max_seconds`` (``logs.upload_retry_max_seconds``). The end-to-end tests run the real service,
where the interval is at least 30 s (the API's bound) and the retry pause grows to a minute; here both are short."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import pytest

from edgeplane.configuration.logpush_jobs import LogpushJobDefinition
from edgeplane.configuration.snapshot import DeliverySnapshot, ZoneRoute
from edgeplane.logs.delivery import DeliveryService, JobDelivery, plan_job
from edgeplane.logs.destinations import DestinationPolicy, DestinationUnavailable
from edgeplane.logs.log_store import ColumnBatch, SegmentedLogStore
from tests.support.recorded_job_status import RecordedJobStatus

HTTP = "http_requests"
JOB_ID = 7
SNAPSHOT = DeliverySnapshot(version=1, zones={"z1": ZoneRoute("z1", "example.com", "acct", "free")})


class RecordingDestination:
    """Keeps the records of each upload; fails the first ``failures`` uploads as an unreachable store would."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.uploads: list[list[bytes]] = []

    async def put(self, object_name: str, body: bytes, **_: Any) -> None:
        if self.failures:
            self.failures -= 1
            raise DestinationUnavailable("the store is down")
        self.uploads.append(gzip.decompress(body).splitlines())

    async def close(self) -> None:
        pass


class WatchedStore(SegmentedLogStore):
    """A real store that notes where each read of columns started: a read from the end shows that delivery has
    taken every record and done with them what it does (the same task reads again only after an upload it chose)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, writable=False)
        self.reads_from: list[int] = []

    def read_columns(
        self,
        dataset: str,
        position: int,
        max_records: int = 10_000,
        max_bytes: int = 8 << 20,
        columns: Collection[str] | None = None,
    ) -> ColumnBatch:
        self.reads_from.append(position)
        return super().read_columns(dataset, position, max_records, max_bytes, columns)


def stored(directory: Path, count: int) -> WatchedStore:
    """A store holding ``count`` records of zone example.com, with the job's cursor at its start."""
    with SegmentedLogStore(directory) as store:
        store.append_rows(HTTP, [{"RayID": f"{index:016x}", "ZoneName": "example.com"} for index in range(count)])
        store.flush()
        store.save_cursor(HTTP, JOB_ID, 0)
    return WatchedStore(directory)


async def deliver_until(delivery: JobDelivery, done: Callable[[], bool], seconds: float) -> float:
    """Runs ``delivery`` until ``done()``, at most ``seconds``; how long that took."""
    started = time.monotonic()
    task = asyncio.create_task(delivery.run())
    try:
        while not done():
            assert time.monotonic() - started < seconds, "not delivered in time"
            assert not task.done(), task.exception()
            await asyncio.sleep(0.01)
        return time.monotonic() - started
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def job(max_records: int, interval: float) -> LogpushJobDefinition:
    # The API keeps max_upload_interval_seconds within 30..300; the plan takes any number.
    return LogpushJobDefinition(
        id=JOB_ID,
        dataset=HTTP,
        account_id="acct",
        zone_id="z1",
        filter=None,
        output_options={"field_names": ["RayID"]},
        destination_conf="file:///tmp/unused",
        max_upload_records=max_records,
        max_upload_interval_seconds=interval,  # type: ignore[arg-type]
    )


async def test_full_batches_go_at_once_and_the_rest_waits(tmp_path: Path) -> None:
    destination = RecordingDestination()
    store = stored(tmp_path, 2500)
    with store:
        delivery = JobDelivery(plan_job(job(1000, 3600), SNAPSHOT), [store], destination, RecordedJobStatus())  # type: ignore[arg-type]
        # Read from the end: the last 500 are in the batch being collected, and would have gone before this read.
        await deliver_until(delivery, lambda: 2500 in store.reads_from, seconds=30)
    assert [len(upload) for upload in destination.uploads] == [1000, 1000]


async def test_a_batch_that_is_not_full_goes_at_the_interval(tmp_path: Path) -> None:
    destination = RecordingDestination()
    with stored(tmp_path, 200) as store:
        delivery = JobDelivery(plan_job(job(1000, 0.5), SNAPSHOT), [store], destination, RecordedJobStatus())  # type: ignore[arg-type]
        took = await deliver_until(delivery, lambda: bool(destination.uploads), seconds=30)
    assert [len(upload) for upload in destination.uploads] == [200]
    assert took >= 0.5


async def test_a_failed_upload_is_tried_again_within_the_longest_pause(tmp_path: Path) -> None:
    destination = RecordingDestination(failures=4)
    status = RecordedJobStatus()
    with stored(tmp_path, 1000) as store:
        plan = plan_job(job(1000, 3600), SNAPSHOT)
        delivery = JobDelivery(plan, [store], destination, status, retry_max_seconds=0.05)  # type: ignore[arg-type]
        took = await deliver_until(delivery, lambda: status.completions > 0, seconds=30)
    assert [len(upload) for upload in destination.uploads] == [1000]
    assert status.failures == ["the store is down"] * 4
    assert status.completions == 1
    assert took < 1 + 2 + 4 + 8  # what the four pauses would have been, doubling from 1 s


class SlowDestination(RecordingDestination):
    """Takes a while to confirm each upload: a clean stop arrives while one is under way."""

    def __init__(self) -> None:
        super().__init__()
        self.started = asyncio.Event()

    async def put(self, object_name: str, body: bytes, **options: Any) -> None:
        self.started.set()
        await asyncio.sleep(0.5)
        await super().put(object_name, body, **options)


async def test_a_clean_stop_lets_the_batch_being_uploaded_finish_and_its_cursor_be_saved(tmp_path: Path) -> None:
    destination = SlowDestination()
    with stored(tmp_path, 1000) as store:
        service = DeliveryService(
            lambda: [store],
            RecordedJobStatus(),
            policy=DestinationPolicy(file_root=tmp_path),
            destination_factory=lambda conf: destination,  # type: ignore[arg-type,return-value]
        )
        enabled = dataclasses.replace(job(1000, 3600), enabled=True)
        service.reconcile(DeliverySnapshot(version=1, zones=SNAPSHOT.zones, logpush_jobs=(enabled,)))
        await asyncio.wait_for(destination.started.wait(), 30)
        await service.stop()
        assert [len(upload) for upload in destination.uploads] == [1000]
        assert store.load_cursor(HTTP, JOB_ID) == 1000  # nothing of it is delivered again at the next start
