"""The delivery process that ``edgeplane serve`` starts: takes the edge workers' request journals (into their log
stores, this process being the stores' one writer, or to the log bus, ``edgeplane.logs.bus_publisher``), follows the
configuration, and runs the enabled Logpush jobs: over the log stores of all edge workers, or, with a bus, over its
streams for the jobs this process holds a lease on (``edgeplane.logs.job_leases``). A node of the role ``edge`` runs
only the intake, one of the role ``delivery`` only the jobs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from collections.abc import Callable, Sequence

import pyarrow as pa
import structlog

from edgeplane.config import Settings, redacted_url
from edgeplane.configuration.snapshot import SnapshotHolder, read_delivery_snapshot
from edgeplane.logs.arrivals import Arrivals
from edgeplane.logs.bus_connection import BusConnection, BusUnavailable
from edgeplane.logs.bus_publisher import BusPublisher
from edgeplane.logs.bus_source import BusSource
from edgeplane.logs.bus_streams import StreamLimits, ensure_streams
from edgeplane.logs.database_cursors import DatabaseCursors
from edgeplane.logs.datasets import DATASETS
from edgeplane.logs.delivery import DeliveryService
from edgeplane.logs.destinations import DestinationPolicy
from edgeplane.logs.job_leases import JobLeases, default_owner
from edgeplane.logs.journal_intake import JournalIntake
from edgeplane.logs.log_store import LogReader, SegmentedLogStore
from edgeplane.logs.partitions import journal_directory, journal_workers, partition_directory
from edgeplane.logs.request_journal import seal_leftovers
from edgeplane.logs.seal_watch import SealWatch
from edgeplane.propagation.channel import followed_channel
from edgeplane.propagation.follower import ConfigurationFollower
from edgeplane.store.database import Database
from edgeplane.store.job_status import DatabaseJobStatus

log = structlog.get_logger(__name__)

# Jobs are reconciled with the configuration when it changes, and this often besides (a job that stopped on an
# error is started again).
RECONCILE_SECONDS = 5.0
# How often the journals are looked at for sealed periods: without a watch of the seals (``SealWatch``), and with one
# (in case a seal was missed).
INTAKE_SECONDS = 0.1
INTAKE_WATCHED_SECONDS = 2.0


def open_partition_stores(
    settings: Settings, workers: int, *, running: int | None = None
) -> dict[int, SegmentedLogStore]:
    """The log store of the partition of every worker whose journal is taken (``journal_owners``), writable, by
    worker."""
    partition_workers = journal_owners(settings, workers, running=running)
    return {
        worker: SegmentedLogStore(
            partition_directory(settings.data_dir, worker),
            retention_bytes=settings.logs.retention_bytes,
            retention_seconds=settings.logs.retention_seconds,
            datasets=DATASETS,
        )
        for worker in partition_workers
    }


def journal_owners(settings: Settings, workers: int, *, running: int | None = None) -> list[int]:
    """The edge workers whose journals are taken: the ``workers`` configured, and any other worker that left a
    journal (before ``edge_workers`` was lowered). A worker that does not run (``running``: how many do, ``workers``
    by default) has no one writing its journal, so what it left unsealed is sealed here."""
    running = workers if running is None else running
    owners = sorted(set(range(workers)) | set(journal_workers(settings.data_dir)))
    for worker in owners:
        if worker >= running:
            seal_leftovers(journal_directory(settings.data_dir, worker))
    return owners


def journal_intake(settings: Settings, stores: dict[int, SegmentedLogStore]) -> JournalIntake:
    """The intake of each worker's journal into its partition's store."""
    return JournalIntake({journal_directory(settings.data_dir, worker): store for worker, store in stores.items()})


def ingest_journals(settings: Settings, workers: int) -> int:
    """Takes what the request journals hold into the log stores now, with no delivery process running (``edgeplane
    serve``, after the delivery process stopped: it may have been stopped before it was ready); returns how many
    records that was."""
    stores = open_partition_stores(settings, workers, running=0)  # every worker has stopped
    try:
        return journal_intake(settings, stores).ingest()
    finally:
        for store in stores.values():
            store.close()


async def run_delivery(
    settings: Settings, database_url: str, *, workers: int, intake: bool = True, deliver: bool = True
) -> None:
    """Takes the journals of this machine's edge workers (``intake``) and runs the Logpush jobs (``deliver``) until
    SIGINT or SIGTERM. Without a log bus, the journals go into this machine's log stores and every job reads them;
    with one (``settings.bus``), the journals are published to its streams and the jobs this process holds a lease
    on read them there."""
    # Arrow's kernels run on the calling thread either way; its thread pools would only compete with the edge workers.
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    database = Database(database_url)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    arrivals = Arrivals()  # rung by the intake: idle jobs wait for it rather than look at the stores
    bus = _open_bus(settings, "intake" if intake and not deliver else "delivery")
    background: list[asyncio.Task[None]] = []
    if bus is not None:
        background.append(asyncio.create_task(_ensure_streams(bus, settings, stopping), name="bus-streams"))
    stores: dict[int, SegmentedLogStore] = {}
    ingesting: asyncio.Task[None] | None = None
    watch: SealWatch | None = None
    if intake:
        if bus is None:
            stores = await asyncio.to_thread(open_partition_stores, settings, workers)
            journals = journal_intake(settings, stores)
        else:
            journals = await asyncio.to_thread(bus_intake, settings, workers, BusPublisher(bus))
        watch = SealWatch.open(journals.stores)
        ingesting = asyncio.create_task(_ingest_journals(journals, stopping, watch, arrivals))
    try:
        if not deliver:
            await stopping.wait()
        elif bus is None:
            await _deliver(settings, database, lambda: _partitions(settings, stores), arrivals, stopping, leases=None)
        else:
            # The owner names this process and this start: a restart that got the same pid is another owner.
            owner = f"{settings.node_name or default_owner()}:{os.getpid()}:{secrets.token_hex(4)}"
            leases = JobLeases(database, owner, ttl_seconds=settings.bus.lease_seconds)
            source = BusSource(bus, DatabaseCursors(database, leases))
            await _deliver(settings, database, lambda: [source], arrivals, stopping, leases=leases)
    finally:
        stopping.set()
        if ingesting is not None:
            await ingesting  # ends with a last ingest: the edge workers have stopped and sealed their journals
        if watch is not None:
            watch.close()
        for task in background:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for store in stores.values():
            await asyncio.to_thread(store.close)
        if bus is not None:
            await asyncio.to_thread(bus.close)
        database.close()


def _open_bus(settings: Settings, part: str) -> BusConnection | None:
    """The connection to the log bus, when there is one; it connects (and reconnects) in the background."""
    if settings.bus.url is None:
        return None
    return BusConnection(settings.bus.servers, name=f"edgeplane-{part}-{settings.node_name or os.getpid()}")


def stream_limits(settings: Settings) -> StreamLimits:
    """The streams' settings, from ``[bus]``."""
    return StreamLimits(
        replicas=settings.bus.stream_replicas,
        max_age_seconds=settings.bus.retention_seconds,
        max_bytes=settings.bus.retention_bytes,
        duplicate_window_seconds=min(settings.bus.duplicate_window_seconds, settings.bus.retention_seconds),
    )


async def _ensure_streams(bus: BusConnection, settings: Settings, stopping: asyncio.Event) -> None:
    """Creates (or updates) the datasets' streams, trying again until the bus answers: until then, publishing and
    reading fail and are tried again by their own loops."""
    pause = 0.5
    while not stopping.is_set():
        try:
            await asyncio.to_thread(ensure_streams, bus, DATASETS, stream_limits(settings))
        except BusUnavailable as error:
            log.warning("cannot set up the log bus's streams; trying again", error=str(error), pause=pause)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), pause)
            pause = min(pause * 2, 10.0)
            continue
        log.info(
            "log bus streams ready",
            servers=[redacted_url(server) for server in settings.bus.servers],
            replicas=settings.bus.stream_replicas,
        )
        return


def bus_intake(settings: Settings, workers: int, publisher: BusPublisher) -> JournalIntake:
    """The intake of the journal of every worker whose journal is taken (``journal_owners``) to the bus, under this
    node's name (the publications' keys)."""
    return JournalIntake(
        {journal_directory(settings.data_dir, worker): publisher for worker in journal_owners(settings, workers)},
        node_id=settings.node_name or f"pid{os.getpid()}",
    )


def _partitions(settings: Settings, stores: dict[int, SegmentedLogStore]) -> list[LogReader]:
    """Read-only views of the partitions' stores for the jobs, with the writer's retention bounds (a job's retention
    watch estimates by them)."""
    return [
        SegmentedLogStore(
            partition_directory(settings.data_dir, worker),
            writable=False,
            retention_bytes=settings.logs.retention_bytes,
            retention_seconds=settings.logs.retention_seconds,
        )
        for worker in stores
    ]


async def _deliver(
    settings: Settings,
    database: Database,
    partitions: Callable[[], Sequence[LogReader]],
    arrivals: Arrivals,
    stopping: asyncio.Event,
    *,
    leases: JobLeases | None,
) -> None:
    """Runs the enabled Logpush jobs (with ``leases``, those this process holds) over ``partitions``, following the
    configuration, until ``stopping``."""
    # The delivery process's view: the jobs and zones, and no firewall compiled (delivery evaluates none).
    snapshots = SnapshotHolder(await asyncio.to_thread(read_delivery_snapshot, database))
    configuration_changed = asyncio.Event()
    following = ConfigurationFollower(
        database,
        snapshots,
        read=read_delivery_snapshot,
        role="delivery",
        channel=followed_channel(settings.data_dir, settings.role),
        on_change=configuration_changed.set,
    )
    follower = asyncio.create_task(following.run())
    views = partitions()
    service = DeliveryService(
        lambda: views,
        DatabaseJobStatus(database),
        policy=DestinationPolicy.from_settings(settings),
        retry_max_seconds=settings.logs.upload_retry_max_seconds,
        arrivals=arrivals,
        leases=leases,
    )
    keeper = asyncio.create_task(service.keep_leases(), name="delivery-leases")
    try:
        while not stopping.is_set():
            configuration_changed.clear()
            service.reconcile(snapshots.current)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_first(stopping, configuration_changed), RECONCILE_SECONDS)
    finally:
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper
        await service.stop()
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower


async def _first(*events: asyncio.Event) -> None:
    """Returns once any of ``events`` is set."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


async def _ingest_journals(
    intake: JournalIntake, stopping: asyncio.Event, watch: SealWatch | None, arrivals: Arrivals | None = None
) -> None:
    """Takes sealed journal periods into the stores as they are sealed (``watch``; without one, every
    ``INTAKE_SECONDS``) until ``stopping``, then once more; rings ``arrivals`` when it took records (they are
    written, hence readable, when ``ingest`` returns)."""
    while True:
        stopped = stopping.is_set()
        if watch is not None:
            watch.sealed.clear()  # before looking: a seal while looking wakes the next wait
        try:
            taken = await asyncio.to_thread(intake.ingest)
        except Exception:  # a bug, or a journal directory that cannot be listed: logged, and tried again
            log.exception("request journal intake failed")
            taken = 0
        if taken and arrivals is not None:
            arrivals.ring()
        if stopped:
            return
        if taken:
            continue
        if watch is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), INTAKE_SECONDS)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_first(stopping, watch.sealed), INTAKE_WATCHED_SECONDS)
