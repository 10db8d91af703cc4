"""The delivery process that ``edgeplane serve`` starts: follows the configuration, and runs every enabled Logpush
job over the log stores of all edge workers."""

from __future__ import annotations

import asyncio
import contextlib
import signal

import pyarrow as pa

from edgeplane.config import Settings
from edgeplane.logs.datasets import DATASETS
from edgeplane.logs.delivery import DeliveryService
from edgeplane.logs.log_store import SegmentedLogStore
from edgeplane.logs.partitions import partition_directory
from edgeplane.store.database import Database
from edgeplane.store.job_status import DatabaseJobStatus
from edgeplane.store.snapshot import SnapshotHolder, follow_configuration, read_snapshot

RECONCILE_SECONDS = 0.5


async def run_delivery(settings: Settings, database_url: str, *, workers: int) -> None:
    """Delivers until SIGINT or SIGTERM."""
    # Arrow's kernels run on the calling thread either way; its thread pools would only compete with the edge workers.
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    database = Database(database_url)
    snapshots = SnapshotHolder(await asyncio.to_thread(read_snapshot, database))
    follower = asyncio.create_task(follow_configuration(database, snapshots))
    for worker in range(workers):
        for dataset in DATASETS:
            (partition_directory(settings.data_dir, worker) / dataset).mkdir(parents=True, exist_ok=True)
    partitions = [
        SegmentedLogStore(partition_directory(settings.data_dir, worker), writable=False) for worker in range(workers)
    ]
    service = DeliveryService(lambda: partitions, DatabaseJobStatus(database))
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    try:
        while not stopping.is_set():
            service.reconcile(snapshots.current)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), RECONCILE_SECONDS)
    finally:
        await service.stop()
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        database.close()
