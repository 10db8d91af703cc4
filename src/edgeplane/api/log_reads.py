"""What the API's read endpoints over the log store share (``analytics``, ``security_events``): the time range of a
query (``since``, ``until``), its buckets, the scan of the zone's records, and the errors of each, coded.

Codes: 1001 a ``since`` or ``until`` that is not an RFC 3339 time, or ``until`` not after ``since``; 1010 a range
longer than ``MAX_RANGE``; 1011 a range holding more records than a scan reads (``record_scan``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from edgeplane.api.errors import ApiError, bad_request
from edgeplane.logs.record_scan import ScanLimitError, ScannedRecords, scan_records

MAX_RANGE: Final = timedelta(days=7, minutes=5)  # the dashboard's longest choice, and room for clocks apart
DEFAULT_RANGE: Final = timedelta(hours=24)
SCAN_LIMIT: Final = 2_000_000  # newest records read per edge worker's partition
# Bucket widths in seconds; a range takes the narrowest that makes at most MAX_BUCKETS of them.
_BUCKET_SECONDS: Final = (10, 30, 60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
MAX_BUCKETS: Final = 120
NS_PER_SECOND: Final = 1_000_000_000


@dataclass(frozen=True, slots=True)
class TimeRange:
    """``[since, until)`` in Unix nanoseconds, cut into ``count`` buckets of ``bucket_seconds``."""

    since_ns: int
    until_ns: int
    bucket_seconds: int

    @property
    def count(self) -> int:
        return max(1, math.ceil((self.until_ns - self.since_ns) / (self.bucket_seconds * NS_PER_SECOND)))

    def bucket_starts(self) -> list[str]:
        """The start of each bucket, RFC 3339."""
        return [rfc3339_ns(self.since_ns + index * self.bucket_seconds * NS_PER_SECOND) for index in range(self.count)]

    def bucket_of(self, times: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        """The bucket index of each time of the range."""
        return pc.divide(pc.subtract(times, self.since_ns), self.bucket_seconds * NS_PER_SECOND)


def rfc3339_ns(nanoseconds: int) -> str:
    """Unix nanoseconds as an RFC 3339 UTC time to the second (``2026-11-27T05:00:00Z``)."""
    return datetime.fromtimestamp(nanoseconds // NS_PER_SECOND, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(query: Mapping[str, str], name: str, default: datetime) -> datetime:
    text = query.get(name)
    if not text:
        return default
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise bad_request(f"{name} must be an RFC 3339 time (2026-11-27T05:00:00Z)", pointer=f"/{name}") from None
    if parsed.tzinfo is None:
        raise bad_request(f"{name} must name its time zone (Z or +00:00)", pointer=f"/{name}")
    return parsed


def time_range(query: Mapping[str, str], *, now: datetime | None = None) -> TimeRange:
    """The range of ``since`` and ``until`` (default: the last 24 hours up to now). Raises ``ApiError`` 1001 or 1010."""
    until = _time(query, "until", now or datetime.now(UTC))
    since = _time(query, "since", until - DEFAULT_RANGE)
    if until <= since:
        raise bad_request("until must be after since", pointer="/until")
    if until - since > MAX_RANGE:
        raise bad_request("the range is longer than 7 days; choose a shorter one", code=1010, pointer="/since")
    seconds = (until - since).total_seconds()
    width = next((w for w in _BUCKET_SECONDS if seconds / w <= MAX_BUCKETS), _BUCKET_SECONDS[-1])
    return TimeRange(int(since.timestamp()) * NS_PER_SECOND, int(until.timestamp()) * NS_PER_SECOND, width)


def scan_zone(
    data_dir: Path | None,
    dataset: str,
    zone_name: str,
    window: TimeRange,
    *,
    time_field: str,
    columns: Sequence[str],
    scan_limit: int = SCAN_LIMIT,
) -> ScannedRecords:
    """The zone's records of ``dataset`` in ``window`` (none without a data directory: a control plane run without
    edge workers, as in tests of other routes). Raises ``ApiError`` 1011."""
    try:
        return scan_records(
            data_dir if data_dir is not None else Path(os.devnull),
            dataset,
            zone_name=zone_name,
            time_field=time_field,
            since_ns=window.since_ns,
            until_ns=window.until_ns,
            columns=columns,
            scan_limit=scan_limit,
        )
    except ScanLimitError as error:
        raise ApiError(400, 1011, str(error)) from None


def nearest_rank_index(size: int, quantile: float) -> int:
    """Where the value at ``quantile`` is among ``size`` sorted values, by nearest rank: the percentile as the
    dashboard shows it, one of the values that were seen (``size`` at least 1)."""
    return min(size - 1, max(0, math.ceil(quantile * size) - 1))
