"""Two delivery services sharing the Logpush jobs through leases, over one log stream whose cursors are kept in the
database, delivering to file destinations: every record is delivered, the jobs are split between them, and when one
dies its jobs are taken over from the last saved cursor, repeating at most the batch it had in flight."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import json
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from edgeplane.configuration.logpush_jobs import LogpushJobDefinition
from edgeplane.configuration.snapshot import DeliverySnapshot, ZoneRoute
from edgeplane.logs.database_cursors import DatabaseCursors
from edgeplane.logs.delivery import DeliveryService
from edgeplane.logs.destination_conf import parse_destination_conf
from edgeplane.logs.destinations import Destination, DestinationPolicy, open_destination
from edgeplane.logs.job_leases import JobLeases
from edgeplane.logs.log_store import SegmentedLogStore
from edgeplane.store.database import Database
from edgeplane.store.delivery_models import JobLease
from tests.support.recorded_job_status import RecordedJobStatus
from tests.support.shared_cursor_store import SharedCursorStore

HTTP = "http_requests"
TTL = 1.0
JOB_IDS = (1, 2, 3, 4)
BATCH = 50  # records per upload
WAIT = 30.0  # the bound of what comes true eventually, with the margin of a stalled machine
MARGIN = 5.0  # beyond a time the code promises (the lease's), what a stalled machine may add


@dataclass
class Member:
    """A delivery process: its service, leases and keeper."""

    service: DeliveryService
    leases: JobLeases
    cursors: DatabaseCursors
    status: RecordedJobStatus
    keeper: asyncio.Task[None]


def snapshot(destinations: Path) -> DeliverySnapshot:
    jobs = tuple(
        LogpushJobDefinition(
            id=job_id,
            dataset=HTTP,
            account_id="acct",
            zone_id="z1",
            enabled=True,
            output_options={"field_names": ["RayID"]},
            destination_conf=f"file://{destinations}/job{job_id}",
            max_upload_records=BATCH,
            max_upload_interval_seconds=0.2,  # type: ignore[arg-type]  # the API keeps it to 30..300
        )
        for job_id in JOB_IDS
    )
    return DeliverySnapshot(version=1, zones={"z1": ZoneRoute("z1", "example.com", "acct", "free")}, logpush_jobs=jobs)


class HangingAfterUpload:
    """A file destination that, once ``hang`` is set, writes each object and then never returns: the upload is
    done, but its job never hears so and never saves its cursor (a process dying between the two)."""

    def __init__(self, destination: Destination, hang: asyncio.Event, hung: list[str]) -> None:
        self.destination = destination
        self.hang = hang
        self.hung = hung

    async def put(self, object_name: str, body: bytes, **content: Any) -> None:
        await self.destination.put(object_name, body, **content)
        if self.hang.is_set():
            self.hung.append(object_name)
            await asyncio.Event().wait()

    async def close(self) -> None:
        await self.destination.close()


@contextlib.asynccontextmanager
async def member(
    database: Database,
    owner: str,
    stream: Path,
    destinations: Path,
    wrap: Callable[[Destination], Destination] = lambda destination: destination,
) -> AsyncIterator[Member]:
    leases = JobLeases(database, owner, ttl_seconds=TTL)
    cursors = DatabaseCursors(database, leases)
    view = SharedCursorStore(stream, cursors)
    status = RecordedJobStatus()
    policy = DestinationPolicy(file_root=destinations)
    service = DeliveryService(
        lambda: [view],
        status,
        policy=policy,
        destination_factory=lambda conf: wrap(open_destination(parse_destination_conf(conf), policy=policy)),
        leases=leases,
    )
    service.reconcile(snapshot(destinations))
    keeper = asyncio.create_task(service.keep_leases())
    try:
        yield Member(service, leases, cursors, status, keeper)
    finally:
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper
        await service.stop()
        view.close()


def append(writer: SegmentedLogStore, first: int, count_: int) -> None:
    writer.append_rows(
        HTTP, [{"RayID": f"{index:016x}", "ZoneName": "example.com"} for index in range(first, first + count_)]
    )
    assert writer.flush(timeout=10)


def delivered(destinations: Path, job_id: int) -> Counter[str]:
    """How often each record (by RayID) was uploaded for the job."""
    seen: Counter[str] = Counter()
    for path in (destinations / f"job{job_id}").rglob("*.log.gz"):
        for line in gzip.decompress(path.read_bytes()).splitlines():
            seen[json.loads(line)["RayID"]] += 1
    return seen


async def wait_for(done: Callable[[], bool], seconds: float, what: str) -> float:
    started = time.monotonic()
    while not done():
        assert time.monotonic() - started < seconds, f"not in time: {what}"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


def every_record(destinations: Path, records: int) -> Callable[[], bool]:
    expected = {f"{index:016x}" for index in range(records)}
    return lambda: all(set(delivered(destinations, job_id)) == expected for job_id in JOB_IDS)


def held(*members: Member) -> list[int]:
    return [sum(m.leases.holds(job_id) for job_id in JOB_IDS) for m in members]


async def test_a_dead_services_jobs_are_taken_over_from_the_saved_cursor(database: Database, tmp_path: Path) -> None:
    stream, destinations = tmp_path / "stream", tmp_path / "destinations"
    hang, hung = asyncio.Event(), list[str]()
    with SegmentedLogStore(stream) as writer:
        writer.flush()
        async with (
            member(database, "a", stream, destinations) as first,
            member(database, "b", stream, destinations, lambda d: HangingAfterUpload(d, hang, hung)) as second,
        ):
            await wait_for(lambda: held(first, second) == [2, 2], WAIT, "the jobs split 2/2")
            await wait_for(
                lambda: all(first.cursors.load(HTTP, job_id) is not None for job_id in JOB_IDS), WAIT, "cursors opened"
            )
            append(writer, 0, 1000)
            await wait_for(every_record(destinations, 1000), WAIT, "the first records delivered")

            # "b" dies with a batch of each of its jobs uploaded but its cursor not saved; its leases stay until
            # they expire.
            second_jobs = [job_id for job_id in JOB_IDS if second.leases.holds(job_id)]
            hang.set()
            append(writer, 1000, 1000)
            await wait_for(lambda: len(hung) == 2, WAIT, "a batch of each of b's jobs uploaded")
            second.keeper.cancel()
            await second.service.stop(release=False)
            # Once b's leases expired and at a's next claim; the bound is the margin of a stalled machine.
            await wait_for(lambda: held(first) == [4], TTL + MARGIN, "the survivor holding every job")
            append(writer, 2000, 500)
            await wait_for(every_record(destinations, 2500), WAIT, "every record delivered")
            assert first.status.failures == []
            assert second.status.failures == []
    for job_id in JOB_IDS:
        repeated = sum(times - 1 for times in delivered(destinations, job_id).values())
        if job_id in second_jobs:  # the batch in flight, delivered again by the new owner
            assert 0 < repeated <= BATCH, f"job {job_id}: {repeated} records delivered twice"
        else:
            assert repeated == 0


@pytest.mark.xfail(
    strict=False, reason="known race (issue 36): a stalled owner's job sometimes uploads once more before it ends"
)
async def test_a_stalled_owners_jobs_end_quietly_at_their_next_save(database: Database, tmp_path: Path) -> None:
    stream, destinations = tmp_path / "stream", tmp_path / "destinations"
    with SegmentedLogStore(stream) as writer:
        writer.flush()
        async with member(database, "stalled", stream, destinations) as stalled:
            await wait_for(lambda: held(stalled) == [4], WAIT, "one owner holding every job")
            stalled.keeper.cancel()  # it renews nothing more, but its jobs run on, as in a process that hangs
            await wait_for(lambda: not any(map(stalled.leases.holds, JOB_IDS)), WAIT, "its leases running out")
            async with member(database, "taker", stream, destinations) as taker:
                await wait_for(lambda: held(taker) == [4], WAIT, "the other taking every job")
                await wait_for(lambda: _delivery_tasks() == 4, WAIT, "the stalled owner's jobs ending")
                append(writer, 0, 300)
                await wait_for(every_record(destinations, 300), WAIT, "every record delivered")
                assert stalled.status.failures == []
                assert taker.status.failures == []
    for job_id in JOB_IDS:
        assert set(delivered(destinations, job_id).values()) == {1}


def _delivery_tasks() -> int:
    """The jobs being delivered in this process, by every service."""
    return sum(1 for task in asyncio.all_tasks() if task.get_name().startswith("logpush-") and not task.done())


async def test_a_joining_service_gets_a_share_and_a_clean_stop_hands_over_at_once(
    database: Database, tmp_path: Path
) -> None:
    stream, destinations = tmp_path / "stream", tmp_path / "destinations"
    with SegmentedLogStore(stream) as writer:
        writer.flush()
        async with member(database, "a", stream, destinations) as first:
            await wait_for(lambda: held(first) == [4], WAIT, "the only service holding every job")
            async with member(database, "b", stream, destinations) as second:
                await wait_for(lambda: held(first, second) == [2, 2], WAIT, "the jobs split 2/2 after b joined")
                await wait_for(lambda: _delivery_tasks() == 4, WAIT, "each job delivered once")
            with database.session() as session:  # given back, not left to expire
                assert session.scalars(select(JobLease.job_id).where(JobLease.owner == "b")).all() == []
            await wait_for(lambda: held(first) == [4], WAIT, "a holding every job again")
            append(writer, 0, 200)
            await wait_for(every_record(destinations, 200), WAIT, "every record delivered")


async def test_jobs_stop_when_the_leases_cannot_be_renewed_and_start_again_when_they_can(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream, destinations = tmp_path / "stream", tmp_path / "destinations"
    with SegmentedLogStore(stream) as writer:
        writer.flush()
        async with member(database, "a", stream, destinations) as only:
            await wait_for(lambda: _delivery_tasks() == 4, WAIT, "every job running")

            def unreachable(job_ids: object) -> frozenset[int]:
                raise OperationalError("SELECT", {}, ConnectionError("the database is unreachable"))

            with monkeypatch.context() as outage:
                outage.setattr(only.leases, "claim", unreachable)
                # Once the leases could not be renewed for the lease time; the margin of a stalled machine besides.
                await wait_for(lambda: _delivery_tasks() == 0, TTL + MARGIN, "the jobs stopping")
            await wait_for(lambda: _delivery_tasks() == 4, WAIT, "the jobs running again")
            assert only.status.failures == []


async def _until(condition: Callable[[], bool], seconds: float = WAIT) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true"
        await asyncio.sleep(0.01)


class _SlowSecondClaim:
    """Leases that hold every job, whose second claim waits until released: a configuration change lands while it
    runs."""

    ttl_seconds = 3.0
    owner = "me"

    def __init__(self) -> None:
        self.claiming = threading.Event()
        self.go_on = threading.Event()
        self.claims = 0

    def heartbeat(self) -> None:
        pass

    def claim(self, jobs: Any) -> frozenset[int]:
        self.claims += 1
        if self.claims == 2:
            self.claiming.set()
            self.go_on.wait(5)
        return frozenset(jobs)

    def holds(self, job_id: int) -> bool:
        return True

    def lost(self, job_id: int) -> None:
        pass

    def release_all(self) -> None:
        pass


async def test_a_claim_that_ran_across_a_change_never_brings_back_the_configuration_before_it(
    tmp_path: Path,
) -> None:
    leases = _SlowSecondClaim()
    before = snapshot(tmp_path)
    service = DeliveryService(
        lambda: [],
        RecordedJobStatus(),
        policy=DestinationPolicy(file_root=tmp_path),
        leases=leases,  # type: ignore[arg-type]
    )
    service.reconcile(before)
    keeper = asyncio.create_task(service.keep_leases())
    try:
        await _until(lambda: leases.claims >= 1)
        service._jobs_changed.set()  # the keeper's next turn, now
        await _until(leases.claiming.is_set)
        jobs = tuple(dataclasses.replace(job, enabled=job.id != JOB_IDS[0]) for job in before.logpush_jobs)
        service.reconcile(dataclasses.replace(before, version=2, logpush_jobs=jobs))  # the operator disables one
        assert JOB_IDS[0] not in service._running
        leases.go_on.set()
        await _until(lambda: leases.claims >= 3)  # the slow claim ended, and the keeper reconciled after it
        assert JOB_IDS[0] not in service._running
        assert service._snapshot is not None
        assert service._snapshot.version == 2
    finally:
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper
        await service.stop(release=False)
