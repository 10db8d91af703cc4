"""How close the log store's retention is to a Logpush job's undelivered records, told before it deletes them.

While a job cannot deliver (its destination is down, or slower than the traffic), its records wait in the log store,
which keeps at most ``retention_bytes`` per dataset and partition (and, when set, nothing older than
``retention_seconds``): past that, the oldest segment goes, delivered or not. A :class:`RetentionWatch` looks, every
few seconds, at the segment that holds each partition's first undelivered record and estimates when retention will
delete it:

- by size: the bytes the partition can still take before that segment is the oldest one over the bound
  (``SegmentedLogStore.retention_outlook``), divided by the rate at which it grows (the records appended per second
  since the last look, times the bytes a record takes in those segments);
- by age: what ``retention_seconds`` leaves that segment, once it is no longer written.

The nearer of the two, over the partitions, is the gauge ``edgeplane_logpush_retention_seconds_left`` (``+Inf``
while nothing is undelivered or nothing grows), beside ``edgeplane_logpush_undelivered_records``. Below
``warn_seconds`` the job's status says so (``error_message``, with ``last_error``), at most once a minute, and a
warning is logged: an operator sees the loss coming, not only after it (``PositionLostError``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Final, Protocol

import structlog
from prometheus_client import Gauge

from edgeplane.logs.log_store import RetentionOutlook

log = structlog.get_logger(__name__)

SECONDS_LEFT = Gauge(
    "edgeplane_logpush_retention_seconds_left",
    "Estimated seconds before retention deletes records the job has not delivered (+Inf: no such deadline).",
    ["job"],
    multiprocess_mode="min",
)
UNDELIVERED = Gauge(
    "edgeplane_logpush_undelivered_records",
    "Records after the job's last confirmed upload.",
    ["job"],
    multiprocess_mode="max",
)

WARN_SECONDS: Final = 600.0  # warn in the job's status when retention is this close
LOOK_SECONDS: Final = 5.0  # how often the partitions are looked at
_WARN_AGAIN_SECONDS: Final = 60.0


class Partition(Protocol):
    """What the watch reads of a partition's log store (or of the log bus's streams)."""

    def end_position(self, dataset: str) -> int: ...

    def lag_records(self, dataset: str, position: int) -> int: ...

    def retention_outlook(self, dataset: str, position: int) -> RetentionOutlook: ...


class StatusWarnings(Protocol):
    """Where the warning goes: the job's status (``JobStatus.failed``)."""

    def failed(self, job_id: int, when: datetime, message: str) -> None: ...


class RetentionWatch:
    """Watches one job's undelivered records in its partitions (see the module docstring)."""

    def __init__(
        self,
        job_id: int,
        dataset: str,
        partitions: Sequence[Partition],
        status: StatusWarnings,
        *,
        warn_seconds: float = WARN_SECONDS,
        look_seconds: float = LOOK_SECONDS,
    ) -> None:
        self.job_id = job_id
        self.dataset = dataset
        self.partitions = list(partitions)
        self.status = status
        self.warn_seconds = warn_seconds
        self.look_seconds = look_seconds
        self._label = str(job_id)
        self._looked = -math.inf  # monotonic time of the last look
        self._warned = -math.inf
        self._ends: dict[int, tuple[float, int]] = {}  # partition -> (time, end position) at the last look

    def observe(self, confirmed: Mapping[int, int], *, now: float | None = None) -> float | None:
        """Looks at the partitions when ``look_seconds`` passed since the last look, given each partition's first
        undelivered position; returns the estimated seconds left (``math.inf``: no deadline), or None when it did
        not look. Blocking (file system calls): run it on a worker thread."""
        now = time.monotonic() if now is None else now
        if now - self._looked < self.look_seconds:
            return None
        self._looked = now
        undelivered = 0
        left = math.inf
        for index, store in enumerate(self.partitions):
            position = confirmed.get(index)
            if position is None:
                continue
            try:
                end = store.end_position(self.dataset)
                outlook = store.retention_outlook(self.dataset, position)
                held = store.lag_records(self.dataset, position)
                previous = self._ends.get(index)
                # records appended since the last look (positions need not be record offsets: the log bus's are not)
                grown = store.lag_records(self.dataset, previous[1]) if previous is not None else 0
            except OSError as error:
                log.warning("cannot look at a log store partition", job=self.job_id, error=str(error))
                continue
            self._ends[index] = (now, end)
            undelivered += held
            if not held:
                continue
            left = min(left, _seconds_left(outlook, previous, now, grown))
        UNDELIVERED.labels(self._label).set(undelivered)
        SECONDS_LEFT.labels(self._label).set(left)
        if left < self.warn_seconds and now - self._warned >= _WARN_AGAIN_SECONDS:
            self._warned = now
            message = (
                f"{undelivered} undelivered records will be deleted by the log store's retention in about "
                f"{max(0, round(left))} s at the current rate; see docs/log-store.md (Retention)"
            )
            log.warning("retention is near undelivered records", job=self.job_id, seconds_left=round(left))
            self.status.failed(self.job_id, datetime.now(UTC), message)
        return left


def _seconds_left(outlook: RetentionOutlook, previous: tuple[float, int] | None, now: float, grown: int) -> float:
    """The nearer of the deadlines by size and by age for one partition, which grew by ``grown`` records since the
    ``previous`` look."""
    left = math.inf if outlook.seconds_left is None else outlook.seconds_left
    if outlook.bytes_left <= 0:
        return min(left, 0.0)
    if previous is not None and outlook.held_records > 0:
        then, _earlier_end = previous
        elapsed = now - then
        if elapsed > 0 and grown > 0:
            bytes_per_second = grown / elapsed * (outlook.held_bytes / outlook.held_records)
            left = min(left, outlook.bytes_left / bytes_per_second)
    return left
