"""Delivery: every enabled Logpush job reads the log store from its cursor, keeps the records its zone and filter
select, formats them, and uploads them in gzip batches to its destination.

Guarantees (docs/log-store.md): at least once. A batch is uploaded under one object name (kept for every retry);
only after the destination confirmed it are the job's cursors saved, so a crash or an outage re-reads the batch in
flight and nothing before it. A batch is flushed when the first of ``max_upload_records``, ``max_upload_bytes``
(of formatted output) and ``max_upload_interval_seconds`` is reached; an empty one is not uploaded. Failed uploads
are retried with an exponential backoff capped at ``logs.upload_retry_max_seconds``; the job's ``last_complete``,
``last_error`` and ``error_message`` say what happened. The records of every edge worker's store (partition) are
read; cursors are per partition.

Records come in one form, record batches (``edgeplane.logs.record_columns``), and are selected a read at a time:
the zone check and the filter are vectorised over the batch (``edgeplane.logs.filter_columns``), and only the
records kept, and only the columns the job writes, are formatted.

The work on records (decoding, filter, format, gzip) runs in a worker thread, in a process of its own
(``edgeplane serve`` starts it), so that it never competes with the edge for the event loop. Over a shared log
stream, several such processes share the jobs through leases (``edgeplane.logs.job_leases``, docs/delivery-leases.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import structlog
from prometheus_client import Counter, Gauge

from edgeplane.configuration.logpush_jobs import LogpushJobDefinition
from edgeplane.configuration.snapshot import DeliverySnapshot
from edgeplane.logs.arrivals import Arrivals
from edgeplane.logs.column_format import ColumnEncoder, compile_column_encoder
from edgeplane.logs.datasets import Dataset, load_dataset
from edgeplane.logs.destination_conf import parse_destination_conf
from edgeplane.logs.destinations import (
    Destination,
    DestinationFailure,
    DestinationPolicy,
    DestinationRejected,
    open_destination,
)
from edgeplane.logs.filter_columns import compile_column_filter
from edgeplane.logs.filter_parser import parse_filter
from edgeplane.logs.job_leases import JobLeases, LeaseLostError
from edgeplane.logs.log_store import LogReader, PositionAheadError, PositionLostError
from edgeplane.logs.output_options import output_options_from_logpull, parse_logpull_options, parse_output_options
from edgeplane.logs.record_columns import ZONE_NAME, column_or_nulls, combined, loose_values, rows_of
from edgeplane.logs.record_format import SAMPLE_KEY_FIELD, RecordFormatter, compile_formatter, gzip_batch, object_name
from edgeplane.logs.retention_watch import RetentionWatch

log = structlog.get_logger(__name__)

BATCHES = Counter("edgeplane_logpush_batches_total", "Batches uploaded.", ["job"])
RECORDS = Counter("edgeplane_logpush_records_total", "Records uploaded.", ["job"])
BYTES = Counter("edgeplane_logpush_bytes_total", "Compressed bytes uploaded.", ["job"])
FAILURES = Counter("edgeplane_logpush_failures_total", "Failed uploads (each retry counts).", ["job"])
LAG = Gauge("edgeplane_logpush_lag_records", "Records not yet read by the job.", ["job"], multiprocess_mode="max")

_READ_RECORDS = 20_000
_READ_BYTES = 64 << 20  # a bound that lets a read take _READ_RECORDS records of any usual size
_IDLE_SECONDS = 0.2  # how often a job with nothing to send looks at the store without a doorbell (``Arrivals``)
_RUNG_IDLE_SECONDS = 5.0  # and with one: a safety net, should a ring ever be missed
_BACKOFF_FIRST = 1.0
BACKOFF_MAX_SECONDS = 60.0  # the default of ``logs.upload_retry_max_seconds``
# The most formatted output a batch holds in memory, whatever max_upload_bytes allows (up to 1 GB): a batch is
# flushed at this size at the latest, so each running job holds at most about this much.
MAX_BATCH_BYTES = 100 << 20
# How long a clean stop waits for the batches being uploaded (less than the supervisor's grace period for a child).
STOP_DRAIN_SECONDS = 5.0


class JobStatus(Protocol):
    """Where a job's outcomes are recorded (the configuration database)."""

    def completed(self, job_id: int, when: datetime) -> None: ...

    def failed(self, job_id: int, when: datetime, message: str) -> None: ...


@dataclass(slots=True)
class Batch:
    """Formatted records waiting for upload, and where each partition's cursor goes once they are uploaded."""

    encoded: list[bytes] = field(default_factory=list)
    size: int = 0
    positions: dict[int, int] = field(default_factory=dict)
    first: int | None = None
    last: int = 0


@dataclass(frozen=True, slots=True)
class JobPlan:
    """A job compiled for delivery: which records it takes and how it writes them."""

    job_id: int
    dataset: Dataset
    zone_names: frozenset[str] | None  # None: every zone
    select: Callable[[pa.RecordBatch], pa.Array | None]  # zone and filter over a block in columns; None: all of it
    needed: tuple[str, ...]  # what ``select`` and the formatter read of a block
    encode_columns: ColumnEncoder  # the job's output written a block at a time
    sample_rate: float
    formatter: RecordFormatter
    max_records: int
    max_bytes: int
    interval: float
    destination_conf: str


def plan_job(job: LogpushJobDefinition, snapshot: DeliverySnapshot) -> JobPlan:
    """Compiles a job of the snapshot. Raises the logs package's errors for a job that no longer validates."""
    dataset = load_dataset(job.dataset)
    tree = parse_filter(job.filter, dataset) if job.filter else None
    column_predicate = compile_column_filter(tree, dataset) if tree is not None else None
    if job.output_options is not None:
        options = parse_output_options(job.output_options, dataset)
    elif job.logpull_options:
        options = output_options_from_logpull(parse_logpull_options(job.logpull_options, dataset))
    else:
        options = parse_output_options(None, dataset)
    formatter = compile_formatter(options, dataset)
    if job.zone_id:
        zone = snapshot.zones.get(job.zone_id)
        zone_names: frozenset[str] | None = frozenset({zone.zone_name}) if zone else frozenset()
    else:
        zone_names = frozenset(z.zone_name for z in snapshot.zones.values() if z.account_id == job.account_id)
    zone_set = pa.array(sorted(zone_names), type=pa.string()) if zone_names is not None else None

    def select(batch: pa.RecordBatch) -> pa.Array | None:
        mask = None
        if zone_set is not None:
            mask = pc.is_in(column_or_nulls(batch, ZONE_NAME, pa.string()), value_set=zone_set)
        if column_predicate is not None:
            passed = column_predicate(batch)
            mask = passed if mask is None else pc.and_(mask, passed)
        return mask

    return JobPlan(
        job_id=job.id,
        dataset=dataset,
        zone_names=zone_names,
        select=select,
        encode_columns=compile_column_encoder(options, dataset),
        sample_rate=options.sample_rate,
        needed=tuple(
            dict.fromkeys(
                (ZONE_NAME, *(c.key for c in (tree.conditions() if tree else ())), *formatter.fields, SAMPLE_KEY_FIELD)
            )
        ),
        formatter=formatter,
        max_records=job.max_upload_records or 100_000,
        max_bytes=min(job.max_upload_bytes or MAX_BATCH_BYTES, MAX_BATCH_BYTES),
        interval=float(job.max_upload_interval_seconds or 30),
        destination_conf=job.destination_conf,
    )


class JobDelivery:
    """Delivers one job until cancelled."""

    def __init__(
        self,
        plan: JobPlan,
        partitions: Sequence[LogReader],
        destination: Destination,
        status: JobStatus,
        *,
        retry_max_seconds: float = BACKOFF_MAX_SECONDS,
        arrivals: Arrivals | None = None,
    ) -> None:
        """``arrivals``: the doorbell rung when records become readable (without it, an idle job looks at the
        store every ``_IDLE_SECONDS``)."""
        self.plan = plan
        self.arrivals = arrivals
        self.partitions = list(partitions)
        self.destination = destination
        self.status = status
        self.retry_max_seconds = retry_max_seconds
        self._label = str(plan.job_id)
        self._failing = False
        self._unreadable = False  # a read failed (the log bus did not answer) and none succeeded since
        self._retention = RetentionWatch(plan.job_id, plan.dataset.name, self.partitions, status)
        self._confirmed: dict[int, int] = {}  # each partition's first record not yet confirmed by an upload
        # Whether a batch is being uploaded or its cursors saved; and whether to stop once it is (a clean stop).
        self.handing_over = False
        self.finishing = False

    async def run(self) -> None:
        """Collects and uploads batches forever."""
        dataset = self.plan.dataset.name
        positions = {
            index: await asyncio.to_thread(store.open_cursor, dataset, self.plan.job_id)
            for index, store in enumerate(self.partitions)
        }
        self._confirmed = positions
        try:
            while not self.finishing:
                batch = await self._collect(positions)
                self.handing_over = True  # from here to the cursor's save, a clean stop lets the job finish
                try:
                    if batch.encoded:
                        await self._upload(batch)
                    await asyncio.to_thread(self._save_cursors, batch.positions)
                finally:
                    self.handing_over = False
                positions.update(batch.positions)
                await asyncio.to_thread(self._retention.observe, positions)
        finally:
            await self.destination.close()

    async def _collect(self, positions: dict[int, int]) -> Batch:
        plan = self.plan
        batch = Batch(positions=dict(positions))
        deadline = time.monotonic() + plan.interval
        arrivals = self.arrivals
        while True:
            bell = arrivals.bell() if arrivals is not None else None  # before reading: a ring after it is not missed
            progressed = await asyncio.to_thread(self._read_into, batch)
            if len(batch.encoded) >= plan.max_records or batch.size >= plan.max_bytes:
                return batch
            if time.monotonic() >= deadline:
                return batch
            if not progressed:
                left = max(0.0, deadline - time.monotonic())
                if bell is None:
                    await asyncio.sleep(min(_IDLE_SECONDS, left))
                else:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(min(_RUNG_IDLE_SECONDS, left)):
                            await bell.wait()

    def _read_into(self, batch: Batch) -> bool:
        """Reads what each partition has (bounded by the batch's limits); returns whether anything was read."""
        plan = self.plan
        dataset = plan.dataset.name
        progressed = False
        lag = 0
        lag_known = True  # a partition the bus did not let read leaves the gauge as it was, not at 0
        for index, store in enumerate(self.partitions):
            room = plan.max_records - len(batch.encoded)
            if room <= 0 or batch.size >= plan.max_bytes:
                break
            position = batch.positions[index]
            try:
                read = store.read_columns(
                    dataset,
                    position,
                    max_records=min(room, _READ_RECORDS),
                    max_bytes=_READ_BYTES,
                    columns=plan.needed,
                )
            except PositionLostError as lost:
                log.error("records were deleted by retention before delivery", job=plan.job_id, lost=lost.lost)
                batch.positions[index] = lost.oldest_position
                continue
            except PositionAheadError:
                # Past the end: the stream (or the store) was deleted and made anew. Its records are all new to
                # this job: read from the oldest (at least once), rather than wait for it to grow past the cursor.
                oldest = store.oldest_position(dataset)
                log.error(
                    "the job's position is past the end of its stream, which was made anew; reading it from its start",
                    job=plan.job_id,
                    position=position,
                    oldest=oldest,
                )
                batch.positions[index] = oldest
                continue
            except OSError as error:  # the log bus did not answer (``BusUnavailable``): read again at the next look
                if not self._unreadable:
                    log.warning("partition not readable; reading again later", job=plan.job_id, error=str(error))
                self._unreadable = True
                lag_known = False
                continue
            if self._unreadable:
                log.info("partition readable again", job=plan.job_id)
                self._unreadable = False
            if not read.parts:
                continue
            progressed = True
            at = read.position
            for group in _runs(read.parts):
                block = combined(group, plan.needed)
                mask = plan.select(block)
                if plan.sample_rate < 1:
                    mask = _sampled(block, mask, plan.formatter.keep)
                if mask is None:
                    chosen, offsets = block, range(block.num_rows)
                else:
                    indices = pc.indices_nonzero(mask)
                    chosen, offsets = block.take(indices), indices.to_pylist()
                encoded = plan.encode_columns(chosen)
                for offset, line in zip(offsets, encoded, strict=True):
                    self._add(batch, line, at + offset)
                at += block.num_rows
            batch.positions[index] = read.next_position
            try:
                lag += store.lag_records(dataset, read.next_position)
            except OSError:  # the bus did not answer
                lag_known = False
        if lag_known:
            LAG.labels(self._label).set(lag)
        return progressed

    @staticmethod
    def _add(batch: Batch, encoded: bytes, position: int) -> None:
        batch.encoded.append(encoded)
        batch.size += len(encoded)
        if batch.first is None:
            batch.first = position
        batch.last = position

    async def _upload(self, batch: Batch) -> None:
        plan = self.plan
        body = await asyncio.to_thread(lambda: gzip_batch([plan.formatter.join(batch.encoded)]))
        name = object_name("", plan.job_id, batch.first or 0, batch.last, datetime.now(UTC))
        # An HTTPS receiver gets the records' own type, gzip as the transfer encoding; stores keep .log.gz objects.
        over_https = plan.destination_conf.startswith("https://")
        content: dict[str, Any] = (
            {"content_type": "application/x-ndjson", "content_encoding": "gzip"} if over_https else {}
        )
        longest = self.retry_max_seconds
        pause = min(_BACKOFF_FIRST, longest)
        while True:
            try:
                await self.destination.put(name, body, **content)
            except DestinationFailure as error:
                FAILURES.labels(self._label).inc()
                message = str(error) or type(error).__name__
                if not self._failing:
                    log.warning("upload failed; retrying", job=plan.job_id, error=message)
                self._failing = True
                await asyncio.to_thread(self.status.failed, plan.job_id, datetime.now(UTC), message)
                await asyncio.to_thread(self._retention.observe, self._confirmed)
                slow = 4 if isinstance(error, DestinationRejected) else 1
                await asyncio.sleep(min(longest, pause * slow) * random.uniform(0.8, 1.2))
                pause = min(longest, pause * 2)
                continue
            break
        if self._failing:
            log.info("uploads succeed again", job=plan.job_id)
        self._failing = False
        BATCHES.labels(self._label).inc()
        RECORDS.labels(self._label).inc(len(batch.encoded))
        BYTES.labels(self._label).inc(len(body))
        await asyncio.to_thread(self.status.completed, plan.job_id, datetime.now(UTC))

    def _save_cursors(self, positions: dict[int, int]) -> None:
        for index, position in positions.items():
            self.partitions[index].save_cursor(self.plan.dataset.name, self.plan.job_id, position)


def _enabled_jobs(snapshot: DeliverySnapshot) -> frozenset[int]:
    return frozenset(job.id for job in snapshot.logpush_jobs if job.enabled)


def _sampled(block: pa.RecordBatch, mask: pa.Array | None, keep: Callable[[dict[str, Any]], bool]) -> pa.Array:
    """``mask`` narrowed by the sampling decision, which depends only on a record's ``RayID``; a record without
    one is decided on its needed columns (the per-record path decides it on the whole record)."""
    candidates = range(block.num_rows) if mask is None else pc.indices_nonzero(mask).to_pylist()
    ray_ids = loose_values(column_or_nulls(block, SAMPLE_KEY_FIELD, pa.string()))
    kept = [False] * block.num_rows
    rows: list[dict[str, Any]] | None = None
    for index in candidates:
        ray_id = ray_ids[index]
        if type(ray_id) is str:
            kept[index] = keep({SAMPLE_KEY_FIELD: ray_id})
        else:
            rows = rows if rows is not None else rows_of(block)
            kept[index] = keep({k: v for k, v in rows[index].items() if v is not None})
    return pa.array(kept, type=pa.bool_())


def _runs(parts: list[pa.RecordBatch]) -> list[tuple[pa.RecordBatch, ...]]:
    """``parts`` grouped into runs of consecutive batches that can be worked on at once: a column two batches share
    has one type in both (a loose column, ``record_columns.batch_of_any_rows``, starts a run of its own)."""
    runs: list[tuple[pa.RecordBatch, ...]] = []
    batches: list[pa.RecordBatch] = []
    types: dict[str, pa.DataType] = {}
    for part in parts:
        schema = part.schema
        if any(types.get(name, type_) != type_ for name, type_ in zip(schema.names, schema.types, strict=True)):
            runs.append(tuple(batches))
            batches, types = [], {}
        batches.append(part)
        types.update(zip(schema.names, schema.types, strict=True))
    if batches:
        runs.append(tuple(batches))
    return runs


class DeliveryService:
    """Runs one ``JobDelivery`` per enabled job of the current snapshot, restarting it when the job changes. Each
    job's destination is held to ``policy`` (the operator's, from the settings); a failed upload is tried again
    after at most ``retry_max_seconds``.

    With ``leases`` (several delivery processes share the jobs: ``edgeplane.logs.job_leases``), only the jobs whose
    lease this process holds run, and ``keep_leases`` keeps the leases and the running jobs in step. A job whose
    cursor save finds its lease lost (``LeaseLostError``) ends there: its new owner delivers it."""

    def __init__(
        self,
        partitions: Callable[[], Sequence[LogReader]],
        status: JobStatus,
        *,
        policy: DestinationPolicy,
        destination_factory: Callable[[str], Destination] | None = None,
        retry_max_seconds: float = BACKOFF_MAX_SECONDS,
        arrivals: Arrivals | None = None,
        leases: JobLeases | None = None,
    ) -> None:
        self._partitions = partitions
        self._arrivals = arrivals
        self._leases = leases
        self._snapshot: DeliverySnapshot | None = None
        self._stopped = False
        self._claiming: asyncio.Future[Any] | None = None  # the keeper's claim under way, awaited by ``stop``
        # Set when the enabled jobs change: the keeper claims at once rather than at its next turn, so that a new
        # job starts as soon as the configuration says so, as it does without leases.
        self._jobs_changed = asyncio.Event()
        self._status = status
        self._retry_max_seconds = retry_max_seconds
        self._destination = destination_factory or (
            lambda conf: open_destination(parse_destination_conf(conf), policy=policy)
        )
        self._running: dict[int, tuple[LogpushJobDefinition, asyncio.Task[None]]] = {}
        self._deliveries: dict[int, JobDelivery] = {}  # the running jobs' deliveries, for a clean stop

    def reconcile(self, snapshot: DeliverySnapshot) -> None:
        """Starts, restarts and stops job deliveries to match ``snapshot`` (and, with leases, the leases held)."""
        if self._stopped:
            return
        previous, self._snapshot = self._snapshot, snapshot
        if previous is None or _enabled_jobs(previous) != _enabled_jobs(snapshot):
            self._jobs_changed.set()
        leases = self._leases
        wanted = {
            job.id: job for job in snapshot.logpush_jobs if job.enabled and (leases is None or leases.holds(job.id))
        }
        for job_id in list(self._running):
            job, task = self._running[job_id]
            if task.done() and not task.cancelled() and task.exception() is not None:
                # a delivery that stopped on an error (a damaged segment, say): say why, then start it again
                error = task.exception()
                log.error("Logpush job stopped; restarting it", job=job_id, error=f"{type(error).__name__}: {error}")
                self._status.failed(job_id, datetime.now(UTC), f"delivery stopped: {error}")
            if wanted.get(job_id) != job or task.done():
                task.cancel()
                del self._running[job_id]
                self._deliveries.pop(job_id, None)
        for job_id, job in wanted.items():
            if job_id in self._running:
                continue
            try:
                plan = plan_job(job, snapshot)
                destination = self._destination(plan.destination_conf)
            except Exception as error:  # the job was valid when stored; say why it cannot run and leave it
                log.error("cannot run Logpush job", job=job_id, error=str(error))
                self._status.failed(job_id, datetime.now(UTC), f"cannot run the job: {error}")
                continue
            delivery = JobDelivery(
                plan,
                self._partitions(),
                destination,
                self._status,
                retry_max_seconds=self._retry_max_seconds,
                arrivals=self._arrivals,
            )
            self._running[job_id] = (job, asyncio.create_task(self._deliver(delivery), name=f"logpush-{job_id}"))
            self._deliveries[job_id] = delivery

    async def _deliver(self, delivery: JobDelivery) -> None:
        job_id = delivery.plan.job_id
        try:
            await delivery.run()
        except LeaseLostError:
            log.info("Logpush job's lease was lost; its new owner delivers it", job=job_id)
            if self._leases is not None:
                self._leases.lost(job_id)

    async def keep_leases(self) -> None:
        """Keeps this process's leases until cancelled or ``stop`` (run it as a task; without leases it returns at
        once): every third of the lease time, renews them and claims a fair share of the enabled jobs, then stops
        the jobs whose lease was lost and starts those won. A database error is logged and the claim tried again;
        the jobs stop once their leases could not be renewed for the lease time (another may own them by then)."""
        leases = self._leases
        if leases is None:
            return
        period = leases.ttl_seconds / 3
        failing = False
        while not self._stopped:
            snapshot = self._snapshot
            claiming: asyncio.Future[Any]
            self._jobs_changed.clear()
            if snapshot is None:  # no configuration yet: be counted as a member all the same
                claiming = asyncio.ensure_future(asyncio.to_thread(leases.heartbeat))
            else:
                jobs = sorted(_enabled_jobs(snapshot))
                claiming = asyncio.ensure_future(asyncio.to_thread(leases.claim, jobs))
            self._claiming = claiming
            try:
                # Shielded: cancelling the keeper cannot stop the thread, and ``stop`` waits for what it claims.
                await asyncio.shield(claiming)
            except Exception as error:
                if not failing:
                    log.warning(
                        "cannot renew the Logpush job leases; retrying", error=f"{type(error).__name__}: {error}"
                    )
                failing = True
            else:
                if failing:
                    log.info("the Logpush job leases are renewed again")
                failing = False
            latest = self._snapshot  # the configuration may have changed while the claim ran: never go back to before
            if latest is not None:
                self.reconcile(latest)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._jobs_changed.wait(), period)

    async def stop(self, *, release: bool = True) -> None:
        """Stops every delivery (a batch being uploaded is finished first, for a while; a batch not yet uploaded is
        read again next time) and, with leases, gives them
        back so that the other processes take the jobs at once. ``release=False`` leaves the leases as a crash
        would: they are taken over when they expire."""
        self._stopped = True
        # A job uploading a batch, or saving its cursors, finishes that (for at most ``STOP_DRAIN_SECONDS``), so that
        # a clean stop delivers nothing twice; a job collecting records stops at once (nothing is sent yet).
        handing_over = []
        for job_id, (_job, task) in self._running.items():
            delivery = self._deliveries.get(job_id)
            if delivery is not None and delivery.handing_over and not task.done():
                delivery.finishing = True
                handing_over.append(task)
            else:
                task.cancel()
        if handing_over:
            await asyncio.wait(handing_over, timeout=STOP_DRAIN_SECONDS)
        for _job, task in self._running.values():
            task.cancel()
        for _job, task in self._running.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._running.clear()
        self._deliveries.clear()
        if self._leases is None or not release:
            return
        if self._claiming is not None:  # a claim under way would take leases after they were given back
            with contextlib.suppress(Exception):  # and one stuck on the database is not waited for past the ttl
                await asyncio.wait_for(asyncio.shield(self._claiming), self._leases.ttl_seconds)
        try:
            await asyncio.to_thread(self._leases.release_all)
        except Exception as error:  # they expire on their own
            log.warning("cannot give back the Logpush job leases", error=f"{type(error).__name__}: {error}")
