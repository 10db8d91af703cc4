"""The log store's column blocks: records appended as dictionaries, read back as record batches or as JSON lines."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeplane.logs.log_store import ColumnBatch, SegmentedLogStore
from edgeplane.logs.record_columns import lines_of, rows_of

HTTP = "http_requests"


def rows(start: int, count: int) -> list[dict[str, Any]]:
    return [
        {
            "RayID": f"{i:016x}",
            "ZoneName": "example.com",
            "EdgeResponseStatus": 200 + i % 3,
            "ClientRequestPath": f"/v1/{i}",
            **({"ClientCountry": "us"} if i % 2 else {}),
        }
        for i in range(start, start + count)
    ]


def as_rows(batch: ColumnBatch) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for part in batch.parts:
        if isinstance(part, pa.RecordBatch):
            found.extend({k: v for k, v in row.items() if v is not None} for row in rows_of(part))
        else:
            found.extend(orjson.loads(line) for line in part)
    return found


def read_all_columns(store: SegmentedLogStore, position: int = 0, **limits: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        batch = store.read_columns(HTTP, position, **limits)
        if not batch.parts:
            assert batch.next_position == position
            return found
        got = as_rows(batch)
        assert batch.next_position == position + len(got)
        found.extend(got)
        position = batch.next_position


def test_rows_are_kept_in_columns_and_read_both_ways(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path) as store:
        store.append_rows(HTTP, rows(0, 100))
        assert store.flush(timeout=5)
        batch = store.read_columns(HTTP, 0)
        assert [type(part) for part in batch.parts] == [pa.RecordBatch]
        assert batch.parts[0].num_rows == 100
        assert as_rows(batch) == rows(0, 100)
        # read() gives the same records as JSON lines
        assert [orjson.loads(line) for line in store.read(HTTP, 0).records] == rows(0, 100)
        assert store.read(HTTP, 40, max_records=3).records == lines_of(batch.parts[0].slice(40, 3))


def test_bytes_and_rows_keep_their_order(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path) as store:
        store.append_rows(HTTP, rows(0, 5))
        store.append(HTTP, [orjson.dumps(row) for row in rows(5, 5)])
        store.append_rows(HTTP, rows(10, 5))
        store.flush()
        batch = store.read_columns(HTTP, 0)
        assert [type(part) for part in batch.parts] == [pa.RecordBatch, list, pa.RecordBatch]
        assert as_rows(batch) == rows(0, 15)
        assert read_all_columns(store, 3, max_records=4) == rows(3, 12)


def test_records_that_do_not_fit_the_schema_are_kept_as_lines(tmp_path: Path) -> None:
    odd = [{"RayID": "a", "EdgeResponseStatus": "not a number"}, {"RayID": "b", "NotAField": 1}]
    huge = [{"RayID": "c", "ClientASN": 1 << 70}]
    with SegmentedLogStore(tmp_path) as store:
        store.append_rows(HTTP, odd)
        store.append_rows(HTTP, huge)
        store.flush()
        assert store.end_position(HTTP) == 3
        parts = store.read_columns(HTTP, 0).parts
        assert all(isinstance(part, list) for part in parts)
        lines = store.read(HTTP, 0).records
        assert [orjson.loads(line) for line in lines[:2]] == odd
        assert orjson.loads(lines[2])["RayID"] == "c"


def test_large_appends_become_several_blocks(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path) as store:
        store.append_rows(HTTP, rows(0, 20_000))
        store.flush()
        batch = store.read_columns(HTTP, 0, max_records=50_000, max_bytes=1 << 30)
        assert [part.num_rows for part in batch.parts] == [8192, 8192, 3616]
        assert read_all_columns(store, 0, max_records=5000) == rows(0, 20_000)


def test_the_byte_bound_cuts_column_blocks_and_reads_continue(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path) as store:
        for start in range(0, 3000, 300):
            store.append_rows(HTTP, rows(start, 300))
            store.flush()
        assert read_all_columns(store, 0, max_records=1000, max_bytes=5000) == rows(0, 3000)
        # at least one record even when one is over the bound
        assert store.read_columns(HTTP, 7, max_bytes=1).next_position == 8


def test_segments_roll_with_column_blocks(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path, segment_bytes=8000) as store:
        for start in range(0, 1000, 50):
            store.append_rows(HTTP, rows(start, 50))
            store.flush()
    assert len(list((tmp_path / HTTP).glob("*.seg"))) > 3
    with SegmentedLogStore(tmp_path, writable=False) as reader:
        assert read_all_columns(reader, 0, max_records=120) == rows(0, 1000)


def test_a_torn_column_block_is_truncated_on_recovery(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path) as store:
        store.append_rows(HTTP, rows(0, 10))
        store.flush()
        store.append_rows(HTTP, rows(10, 10))
    segment = next((tmp_path / HTTP).glob("*.seg"))
    size = segment.stat().st_size
    os.truncate(segment, size - 7)
    with SegmentedLogStore(tmp_path) as store:
        assert store.end_position(HTTP) == 10
        store.append_rows(HTTP, rows(10, 10))
        store.flush()
        assert read_all_columns(store) == rows(0, 20)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=8),
    max_records=st.integers(min_value=1, max_value=80),
    max_bytes=st.integers(min_value=1, max_value=20_000),
    as_bytes=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_bounded_column_reads_return_every_record_once(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], max_records: int, max_bytes: int, as_bytes: list[bool]
) -> None:
    directory = tmp_path_factory.mktemp("columns")
    expected: list[dict[str, Any]] = []
    with SegmentedLogStore(directory) as store:
        for index, size in enumerate(sizes):
            chunk = rows(len(expected), size)
            if as_bytes[index]:
                store.append(HTTP, [orjson.dumps(row) for row in chunk])
            else:
                store.append_rows(HTTP, chunk)
            expected.extend(chunk)
            store.flush()
        assert read_all_columns(store, 0, max_records=max_records, max_bytes=max_bytes) == expected
        assert [orjson.loads(line) for line in store.read(HTTP, 0, max_records=10_000).records] == expected
