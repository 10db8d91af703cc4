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
    needed = list(dict.fromkeys((*columns, time_field, ZONE_NAME)))
    schema = pa.schema([full.field(name) for name in needed])
    kept: list[pa.RecordBatch] = []
    scanned = 0
    retained_since: int | None = None
    for path in partitions_under(data_dir):
        store = SegmentedLogStore(path, writable=False)
        end = store.end_position(dataset.name)
        oldest = store.oldest_position(dataset.name)
        position = max(oldest, end - scan_limit)
        skipped = position > oldest
        first = True
        while position < end:
            try:
                batch = store.read_columns(dataset.name, position, max_records=_READ_RECORDS, columns=needed)
            except PositionLostError as lost:
                position, oldest, first = lost.oldest_position, lost.oldest_position, True
                continue
            if batch.next_position == position:
                break
            for part in batch.parts:
                times = column_or_nulls(part, time_field, pa.int64())
                if first and part.num_rows:
                    first = False
                    earliest = times[0].as_py()
                    if earliest is not None and earliest > since_ns:
                        if skipped:
                            raise ScanLimitError(scan_limit)
                        if oldest > 0:  # retention deleted what came before it
                            retained_since = max(retained_since or 0, earliest)
                mask = pc.and_(
                    pc.equal(column_or_nulls(part, ZONE_NAME, pa.string()), zone_name),
                    pc.and_(pc.greater_equal(times, since_ns), pc.less(times, until_ns)),
                )
                chosen = part.filter(pc.fill_null(mask, False))
                if chosen.num_rows:
                    arrays = [_typed(chosen, field) for field in schema]
                    kept.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
            scanned += batch.next_position - position
            position = batch.next_position
    return ScannedRecords(pa.Table.from_batches(kept, schema=schema), scanned, retained_since)


def _typed(batch: pa.RecordBatch, field: pa.Field) -> pa.Array:
    """The column of ``field`` in ``batch``, of the field's type; a loose column (values that did not fit the field
    when they were written: ``record_columns.batch_of_any_rows``) counts as missing."""
    column = column_or_nulls(batch, field.name, field.type)
    return column if column.type == field.type else pa.nulls(batch.num_rows, type=field.type)
