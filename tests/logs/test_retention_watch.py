"""The retention watch: how close the log store's retention is to a job's undelivered records, from a real store."""

from __future__ import annotations

import math
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from edgeplane.logs.log_store import SegmentedLogStore
from edgeplane.logs.retention_watch import SECONDS_LEFT, UNDELIVERED, RetentionWatch

HTTP = "http_requests"


class Warnings:
    """The job's status as the watch writes it."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def failed(self, job_id: int, when: datetime, message: str) -> None:
        self.messages.append(message)


def rows(start: int, count: int) -> list[dict[str, Any]]:
    return [
        {"RayID": f"{i:016x}", "ZoneName": "example.com", "ClientRequestPath": f"/v1/{i}/{os.urandom(24).hex()}"}
        for i in range(start, start + count)
    ]


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = SegmentedLogStore(tmp_path, retention_bytes=1 << 20, segment_bytes=64 << 10, compression="none")
    yield opened
    opened.close()


def append(store: SegmentedLogStore, start: int, count: int) -> None:
    store.append_rows(HTTP, rows(start, count))
    assert store.flush(timeout=10)


def gauge(metric: Any, job: int) -> float:
    return float(metric.labels(str(job))._value.get())


def test_a_growing_partition_with_an_undelivered_record_gets_a_deadline_and_a_warning(
    store: SegmentedLogStore,
) -> None:
    warnings = Warnings()
    watch = RetentionWatch(7, HTTP, [store], warnings, warn_seconds=600, look_seconds=5)
    append(store, 0, 500)
    assert watch.observe({0: 0}, now=100.0) == math.inf  # no rate yet: no deadline
    assert watch.observe({0: 0}, now=101.0) is None  # looked a second ago
    append(store, 500, 2_000)
    left = watch.observe({0: 0}, now=110.0)
    assert left is not None
    assert 0 < left < 600
    outlook = store.retention_outlook(HTTP, 0)
    held_per_record = outlook.held_bytes / outlook.held_records
    assert left == pytest.approx(outlook.bytes_left / (2_000 / 10 * held_per_record))
    assert gauge(SECONDS_LEFT, 7) == pytest.approx(left)
    assert gauge(UNDELIVERED, 7) == 2_500
    assert len(warnings.messages) == 1
    assert "2500 undelivered records" in warnings.messages[0]
    watch.observe({0: 0}, now=120.0)
    assert len(warnings.messages) == 1  # warned a minute ago at most once


def test_a_delivered_partition_has_no_deadline(store: SegmentedLogStore) -> None:
    warnings = Warnings()
    watch = RetentionWatch(8, HTTP, [store], warnings, look_seconds=0)
    append(store, 0, 500)
    end = store.end_position(HTTP)
    watch.observe({0: end}, now=1.0)
    append(store, 500, 500)
    assert watch.observe({0: store.end_position(HTTP)}, now=2.0) == math.inf
    assert warnings.messages == []
    assert gauge(UNDELIVERED, 8) == 0


def test_a_partition_past_its_bound_is_due_now(tmp_path: Path) -> None:
    store = SegmentedLogStore(tmp_path, retention_bytes=1 << 20, segment_bytes=64 << 10, compression="none")
    try:
        append(store, 0, 12_000)  # more than the bound: retention deletes at its next look
        reader = SegmentedLogStore(tmp_path, writable=False, retention_bytes=1 << 20)
        oldest = reader.oldest_position(HTTP)
        outlook = reader.retention_outlook(HTTP, oldest)
        if outlook.bytes_left <= 0:  # retention has not run since the last append
            assert RetentionWatch(9, HTTP, [reader], Warnings(), look_seconds=0).observe({0: oldest}) == 0.0
        assert outlook.held_records == reader.end_position(HTTP) - oldest
    finally:
        store.close()


def test_the_age_bound_counts_for_a_segment_no_longer_written(tmp_path: Path) -> None:
    store = SegmentedLogStore(
        tmp_path, retention_bytes=1 << 30, retention_seconds=3600, segment_bytes=64 << 10, compression="none"
    )
    try:
        for start in range(0, 2_000, 500):  # blocks of 500 records: more than one segment
            append(store, start, 500)
        first = min(tmp_path.joinpath(HTTP).glob("*.seg"))
        an_hour_less_five_minutes_ago = time.time() - 3300
        os.utime(first, (an_hour_less_five_minutes_ago, an_hour_less_five_minutes_ago))
        outlook = store.retention_outlook(HTTP, 0)
        assert outlook.seconds_left == pytest.approx(300, abs=5)
        warnings = Warnings()
        left = RetentionWatch(10, HTTP, [store], warnings, look_seconds=0).observe({0: 0})
        assert left == pytest.approx(300, abs=5)
        assert len(warnings.messages) == 1
    finally:
        store.close()
