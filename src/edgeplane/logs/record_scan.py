"""A zone's records of a time range, read from every edge worker's log store for the API's analytics and security
events. It only reads (``writable=False``, as ``logs tail``): it saves no cursor and holds nothing back from
retention, and it never touches the edge's request path.

A scan is bounded: it reads at most ``scan_limit`` of the newest records of each partition. When the range reaches
further back than that (the first record read is already inside the range), it raises ``ScanLimitError`` rather
than answer counts that silently miss records; a shorter range starts later and fits.

Records retention deleted are not there to read. ``ScannedRecords.retained_since`` says so: when a partition lost
records to retention and the oldest one it still holds is inside the range, the answer covers the range from that
time only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from edgeplane.logs.datasets import load_dataset
from edgeplane.logs.log_store import PositionLostError, SegmentedLogStore
from edgeplane.logs.partitions import partitions_under
from edgeplane.logs.record_columns import ZONE_NAME, arrow_schema, column_or_nulls

_READ_RECORDS = 50_000


class ScanLimitError(Exception):
    """The range holds more records than a scan reads: the caller should ask for a shorter one."""

    def __init__(self, scan_limit: int) -> None:
        self.scan_limit = scan_limit
        super().__init__(
            f"the range holds more than the {scan_limit} newest records a scan reads; choose a shorter one"
        )


@dataclass(frozen=True, slots=True)
class ScannedRecords:
    """The records kept (in ``columns``, every block's schema made the same), how many were read, and, when retention
    deleted records of the range, the time (Unix nanoseconds) from which the answer is complete."""

    table: pa.Table
    scanned: int
    retained_since: int | None


def scan_records(
    data_dir: Path,
    dataset_name: str,
    *,
    zone_name: str,
    time_field: str,
    since_ns: int,
    until_ns: int,
    columns: Sequence[str],
    scan_limit: int,
) -> ScannedRecords:
    """The records of ``zone_name`` whose ``time_field`` is in ``[since_ns, until_ns)``, from every partition under
    ``data_dir``. Raises ``ScanLimitError`` when a partition holds records of the range older than its newest
    ``scan_limit``; ``UnknownDatasetError`` for an unknown dataset."""
    dataset = load_dataset(dataset_name)
    full = arrow_schema(dataset)
    schema = pa.schema([full.field(name) for name in dict.fromkeys((*columns, time_field, ZONE_NAME))])
    scan = _Scan(dataset.name, schema, zone_name, time_field, since_ns, until_ns)
    for path in partitions_under(data_dir):
        with SegmentedLogStore(path, writable=False) as store:
            scan.read_partition(store, scan_limit)
    return ScannedRecords(pa.Table.from_batches(scan.kept, schema=schema), scan.scanned, scan.retained_since)


class _Scan:
    """One scan's criteria and what it has kept so far, partition after partition."""

    def __init__(
        self, dataset: str, schema: pa.Schema, zone_name: str, time_field: str, since_ns: int, until_ns: int
    ) -> None:
        self.dataset = dataset
        self.schema = schema
        self.zone_name = zone_name
        self.time_field = time_field
        self.since_ns = since_ns
        self.until_ns = until_ns
        self.kept: list[pa.RecordBatch] = []
        self.scanned = 0
        self.retained_since: int | None = None

    def read_partition(self, store: SegmentedLogStore, scan_limit: int) -> None:
        """Keeps the matching records among the newest ``scan_limit`` of ``store``'s stream."""
        end = store.end_position(self.dataset)
        oldest = store.oldest_position(self.dataset)
        position = max(oldest, end - scan_limit)
        skipped = position > oldest
        first = True
        while position < end:
            try:
                batch = store.read_columns(self.dataset, position, max_records=_READ_RECORDS, columns=self.schema.names)
            except PositionLostError as lost:  # retention deleted it meanwhile: go on from what is left
                position, oldest, first, skipped = lost.oldest_position, lost.oldest_position, True, False
                continue
            if batch.next_position == position:
                break
            for part in batch.parts:
                times = column_or_nulls(part, self.time_field, pa.int64())
                if first and part.num_rows:
                    first = False
                    self._check_start(times[0].as_py(), scan_limit if skipped else None, lost=oldest > 0)
                self._keep(part, times)
            self.scanned += batch.next_position - position
            position = batch.next_position

    def _check_start(self, earliest: int | None, skipped_beyond: int | None, *, lost: bool) -> None:
        """The first record read: inside the range after records the scan limit skipped, the answer would miss
        some (``ScanLimitError``, ``skipped_beyond`` being the limit); inside it after records retention deleted, the
        answer is complete from it."""
        if earliest is None:
            return
        if skipped_beyond is not None and earliest >= self.since_ns:
            raise ScanLimitError(skipped_beyond)
        if lost and earliest > self.since_ns:
            self.retained_since = max(self.retained_since or 0, earliest)

    def _keep(self, part: pa.RecordBatch, times: pa.Array) -> None:
        mask = pc.and_(
            pc.equal(column_or_nulls(part, ZONE_NAME, pa.string()), self.zone_name),
            pc.and_(pc.greater_equal(times, self.since_ns), pc.less(times, self.until_ns)),
        )
        chosen = part.filter(pc.fill_null(mask, False))
        if chosen.num_rows:
            arrays = [_typed(chosen, field) for field in self.schema]
            self.kept.append(pa.RecordBatch.from_arrays(arrays, schema=self.schema))


def _typed(batch: pa.RecordBatch, field: pa.Field) -> pa.Array:
    """The column of ``field`` in ``batch``, of the field's type; a loose column (values that did not fit the field
    when they were written: ``record_columns.batch_of_any_rows``) counts as missing."""
    column = column_or_nulls(batch, field.name, field.type)
    return column if column.type == field.type else pa.nulls(batch.num_rows, type=field.type)
