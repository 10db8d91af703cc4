"""The log store's column blocks: records appended as dictionaries, read back as record batches or as JSON lines."""

from __future__ import annotations

import errno
import os
import time
import zlib
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeplane.logs import log_store
from edgeplane.logs.log_store import ColumnBatch, LogStoreFullError, SegmentedLogStore
from edgeplane.logs.record_columns import (
    batch_of_any_rows,
    batch_of_columns,
    decode_block,
    encode_rows,
    lines_of,
    rows_of,
)

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
        assert [type(part) for part in batch.parts] == [pa.RecordBatch, pa.RecordBatch, pa.RecordBatch]
        assert as_rows(batch) == rows(0, 15)
        assert read_all_columns(store, 3, max_records=4) == rows(3, 12)


def test_records_that_do_not_fit_the_schema_are_kept_in_loose_columns(tmp_path: Path) -> None:
    odd = [{"RayID": "a", "EdgeResponseStatus": "not a number"}, {"RayID": "b", "NotAField": 1}]
    huge = [{"RayID": "c", "ClientASN": 1 << 70}]
    with SegmentedLogStore(tmp_path) as store:
        store.append_rows(HTTP, odd)
        store.append_rows(HTTP, huge)
        store.flush()
        assert store.end_position(HTTP) == 3
        parts = store.read_columns(HTTP, 0).parts
        assert all(isinstance(part, pa.RecordBatch) for part in parts)
        assert parts[0].schema.field("RayID").type == pa.string()  # the columns that fit keep their type
        assert parts[0].schema.field("EdgeResponseStatus").type == pa.binary()  # the others are loose
        assert as_rows(store.read_columns(HTTP, 0)) == [*odd, *huge]  # exactly, the integer beyond 64 bits too
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


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
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


# -- faults (found in review) ---------------------------------------------------------------------------------------


def test_a_record_no_encoder_takes_is_kept_and_the_flusher_survives(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path) as store:
        store.append_rows(HTTP, [{"RayID": "a"}, {"RayID": "b", "ClientRequestPath": "/\udc80"}])  # a lone surrogate
        assert store.flush(timeout=5)
        store.append_rows(HTTP, [{"RayID": "c"}])
        assert store.flush(timeout=5)
        lines = store.read(HTTP, 0).records
    assert [orjson.loads(line)["RayID"] for line in lines] == ["a", "b", "c"]
    assert orjson.loads(lines[1])["ClientRequestPath"] == "/\\udc80"


def test_values_of_another_type_are_kept_as_written() -> None:
    for row in ({"EdgeResponseStatus": 1.5}, {"BotTags": "abc"}, {"EdgeResponseCompressionRatio": 1}):
        assert encode_rows(HTTP, [row]) is None, row
    payload = encode_rows(HTTP, [{"BotTags": []}, {"RayID": "a"}])
    assert payload is not None
    assert lines_of(decode_block(payload)) == [b'{"BotTags":[]}', b'{"RayID":"a"}']


def test_the_buffer_bound_counts_what_rows_hold(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path, max_buffer_bytes=1 << 20, flush_interval=3600, flush_bytes=1 << 30) as store:
        big = {"RayID": "a", "ClientRequestUserAgent": "x" * 16_000}
        accepted = 0
        for _ in range(1000):
            try:
                store.append_rows(HTTP, [big])
            except LogStoreFullError:
                break
            accepted += 1
        assert 50 <= accepted <= 70  # 1 MiB of 16 kB records, not 1 MiB of 512-byte guesses
        assert store.stats().buffered_bytes <= 1 << 20


def test_a_reader_recovers_from_a_torn_tail_once_the_writer_cut_it(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path) as store:
        for start in (0, 10, 20):
            store.append_rows(HTTP, rows(start, 10))
            store.flush()
    segment = next((tmp_path / HTTP).glob("*.seg"))
    with open(segment, "r+b") as file:  # complete in size, garbage inside: what a power loss can leave
        file.seek(segment.stat().st_size - 50)
        file.write(b"\0" * 50)
    reader = SegmentedLogStore(tmp_path, writable=False)
    assert read_all_columns(reader) == rows(0, 20)  # stops before the bad block, no error
    with SegmentedLogStore(tmp_path) as writer:
        assert writer.end_position(HTTP) == 20
        writer.append_rows(HTTP, rows(20, 15))
        writer.flush()
        assert read_all_columns(reader, 20) == rows(20, 15)
        assert reader.end_position(HTTP) == 35


def test_a_roll_that_failed_half_way_is_finished_before_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = log_store._sync_directory
    failures = [OSError(errno.EIO, "injected")]

    def sync_directory(path: Path) -> None:
        if failures:
            raise failures.pop()
        real(path)

    with SegmentedLogStore(tmp_path, segment_bytes=1000, flush_interval=3600) as store:
        store.append(
            HTTP, [orjson.dumps({"RayID": f"line{i}", "ClientRequestPath": "/" + "x" * 100}) for i in range(5)]
        )
        assert store.flush(timeout=5)
        monkeypatch.setattr(log_store, "_sync_directory", sync_directory)
        store.append_rows(HTTP, [{"RayID": "row0", "EdgeResponseStatus": 200}])  # a column block: needs a roll
        store._wake.set()  # one flush attempt, which fails in the roll; the record waits
        deadline = time.monotonic() + 5
        while store.stats().write_errors == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.stats().write_errors == 1
        store.append_rows(HTTP, [{"RayID": "row1", "NotAField": 1}])  # a line, which would fit the old segment
        assert store.flush(timeout=5)
    reader = SegmentedLogStore(tmp_path, writable=False)
    assert reader.end_position(HTTP) == 7
    assert [orjson.loads(line)["RayID"] for line in reader.read(HTTP, 0).records][5:] == ["row0", "row1"]
    with SegmentedLogStore(tmp_path) as again:
        assert again.end_position(HTTP) == 7


# Record batches given as they are (``append_columns``, the edge's way).


def columns_of(start: int, count: int) -> pa.RecordBatch:
    batch = batch_of_columns(
        HTTP,
        {
            "RayID": [f"{i:016x}" for i in range(start, start + count)],
            "ZoneName": ["example.com"] * count,
            "EdgeResponseStatus": [200 + i % 3 for i in range(start, start + count)],
            "ClientRequestPath": [f"/v1/{i}" for i in range(start, start + count)],
            "ClientCountry": ["us" if i % 2 else None for i in range(start, start + count)],
        },
    )
    assert batch is not None
    return batch


def test_record_batches_are_kept_as_given_and_read_both_ways(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path) as store:
        store.append_columns(HTTP, columns_of(0, 100))
        store.append(HTTP, [orjson.dumps(rows(100, 1)[0])])
        store.append_rows(HTTP, rows(101, 9))
        store.append_columns(HTTP, columns_of(110, 10))
        assert store.flush(timeout=5)
        assert store.stats().appended_records == 120
        assert read_all_columns(store) == rows(0, 120)
        assert [orjson.loads(line) for line in store.read(HTTP, 0, max_records=500).records] == rows(0, 120)


def test_a_batch_takes_the_dataset_fields_and_their_metadata(tmp_path: Path) -> None:
    batch = pa.RecordBatch.from_pydict(
        {"RayID": ["a"], "Cookies": ['{"session":"x"}']},
        schema=pa.schema([("RayID", pa.string()), ("Cookies", pa.string())]),
    )
    with SegmentedLogStore(tmp_path) as store:
        store.append_columns(HTTP, batch)
        assert store.flush(timeout=5)
        (line,) = store.read(HTTP, 0).records
    assert orjson.loads(line) == {"RayID": "a", "Cookies": {"session": "x"}}


@pytest.mark.parametrize(
    ("name", "array"),
    [("NotAField", pa.array(["x"])), ("EdgeResponseStatus", pa.array(["200"])), ("RayID", pa.array([1]))],
)
def test_a_batch_with_a_foreign_or_mistyped_column_is_refused(tmp_path: Path, name: str, array: pa.Array) -> None:
    with SegmentedLogStore(tmp_path) as store:
        with pytest.raises(ValueError, match=name):
            store.append_columns(HTTP, pa.RecordBatch.from_arrays([array], names=[name]))
        assert store.flush(timeout=5)
        assert store.end_position(HTTP) == 0
        assert store.stats().appended_records == 0


def test_a_large_batch_becomes_several_blocks(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path) as store:
        store.append_columns(HTTP, columns_of(0, 20_000))
        assert store.flush(timeout=5)
        batch = store.read_columns(HTTP, 0, max_records=50_000, max_bytes=1 << 30)
        assert [part.num_rows for part in batch.parts] == [8192, 8192, 3616]
        assert read_all_columns(store, 0, max_records=5000) == rows(0, 20_000)


def test_a_full_buffer_refuses_a_whole_batch(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path, flush_interval=3600, max_buffer_bytes=4096, flush_bytes=1 << 20) as store:
        with pytest.raises(LogStoreFullError, match="1000 records refused"):
            store.append_columns(HTTP, columns_of(0, 1000))
        assert store.stats().refused_records == 1000
        store.append_columns(HTTP, columns_of(0, 10))
        assert store.flush(timeout=5)
        assert read_all_columns(store) == rows(0, 10)


def test_a_failed_write_of_a_batch_keeps_it_and_what_follows_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = log_store._write_all
    failures = [OSError(errno.ENOSPC, "injected")]

    def write_all(descriptor: int, *parts: bytes | memoryview) -> None:
        if failures and log_store._HEADER.unpack(bytes(parts[0][:20]))[2] == 20:  # the block of the batch
            raise failures.pop()
        real(descriptor, *parts)

    monkeypatch.setattr(log_store, "_write_all", write_all)
    with SegmentedLogStore(tmp_path, flush_interval=3600) as store:
        store.append(HTTP, [orjson.dumps(row) for row in rows(0, 5)])
        store.append_columns(HTTP, columns_of(5, 20))  # this write fails once
        store.append(HTTP, [orjson.dumps(row) for row in rows(25, 5)])
        store._wake.set()
        deadline = time.monotonic() + 5
        while store.stats().write_errors == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.stats().write_errors == 1
        assert store.end_position(HTTP) == 5  # the lines before it were written
        assert store.flush(timeout=5)
        assert read_all_columns(store) == rows(0, 30)


@pytest.mark.parametrize("taken", [0, 3, 6, 10])
def test_a_short_gathered_write_is_finished_piece_by_piece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, taken: int
) -> None:
    """``writev`` may take fewer bytes than it was given: the rest follows, in order."""
    real_writev = os.writev

    def short_writev(descriptor: int, parts: Any) -> int:
        return real_writev(descriptor, [b"".join(bytes(part) for part in parts)[:taken]])

    monkeypatch.setattr(os, "writev", short_writev)
    path = tmp_path / "out"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        log_store._write_all(descriptor, b"header", memoryview(pa.py_buffer(b"payload")))
    finally:
        os.close(descriptor)
    assert path.read_bytes() == b"headerpayload"


# One form on disk: every block the store writes is a column block; blocks of lines are only read.


def block_magics(directory: Path) -> list[bytes]:
    magics: list[bytes] = []
    for segment in sorted((directory / HTTP).glob("*.seg")):
        data = segment.read_bytes()
        byte = 0
        while byte < len(data):
            magic, length, _, _ = log_store._HEADER.unpack_from(data, byte)
            magics.append(magic)
            byte += log_store.HEADER_BYTES + length
    return magics


def test_every_form_of_append_writes_column_blocks(tmp_path: Path) -> None:
    given = [b"", b"not json", b'{"RayID":"x","pad":null}', b"[1,2]"]
    with SegmentedLogStore(tmp_path) as store:
        store.append(HTTP, given)
        store.append_rows(HTTP, [{"RayID": "a", "NotAField": 1}, {}])
        store.append_rows(HTTP, rows(0, 3))
        store.append_columns(HTTP, columns_of(3, 2))
        assert store.flush(timeout=5)
        assert store.read(HTTP, 0, max_records=4).records == given  # bytes come back as they were given
        assert as_rows(store.read_columns(HTTP, 0, max_records=6)) == [
            {"_line": ""},
            {"_line": "not json"},
            {"RayID": "x"},
            {"_line": "[1,2]"},
            {"RayID": "a", "NotAField": 1},
            {},
        ]
        assert read_all_columns(store, 6) == rows(0, 5)
    assert set(block_magics(tmp_path)) == {b"EPLC"}


def test_blocks_of_lines_an_earlier_release_wrote_are_still_read(tmp_path: Path) -> None:
    lines = [orjson.dumps(row) for row in rows(0, 3)]
    payload = b"\n".join(lines)
    header = log_store._HEADER.pack(b"EPLB", len(payload), 3, 0)
    (tmp_path / HTTP).mkdir()
    (tmp_path / HTTP / "00000000000000000000.seg").write_bytes(
        header + log_store._CRC.pack(zlib.crc32(payload, zlib.crc32(header))) + payload
    )
    with SegmentedLogStore(tmp_path) as store:
        assert store.end_position(HTTP) == 3
        assert store.read(HTTP, 0).records == lines
        store.append_rows(HTTP, rows(3, 2))
        assert store.flush(timeout=5)
        assert read_all_columns(store) == rows(0, 5)
        assert read_all_columns(store, 1, max_records=1) == rows(1, 4)
    assert block_magics(tmp_path) == [b"EPLB", b"EPLC"]


# Commits: the intake's one durable hop.


def test_a_commit_is_readable_and_durable_when_it_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(log_store.os, "fsync", lambda descriptor: (synced.append(descriptor), real_fsync(descriptor)))
    with SegmentedLogStore(tmp_path, flush_interval=3600, sync_interval=3600) as store:
        store.commit_columns(HTTP, [columns_of(0, 10), batch_of_any_rows(HTTP, [{"RayID": "x", "NotAField": 1}])])
        assert synced  # before it returned, with no flusher involved
        assert store.stats().flushes == 0
        assert store.end_position(HTTP) == 11
        reader = SegmentedLogStore(tmp_path, writable=False)
        assert read_all_columns(reader) == [*rows(0, 10), {"RayID": "x", "NotAField": 1}]
        store.commit_columns(HTTP, [])  # nothing to commit
        assert store.end_position(HTTP) == 11


def test_a_failed_commit_leaves_the_stream_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = log_store._write_all
    failures = [OSError(errno.EIO, "injected")]

    def write_all(descriptor: int, *parts: bytes | memoryview) -> None:
        real(descriptor, *parts[:1])  # half of it reaches the file
        if failures:
            raise failures.pop()
        real(descriptor, *parts[1:])

    with SegmentedLogStore(tmp_path) as store:
        store.commit_columns(HTTP, [columns_of(0, 5)])
        monkeypatch.setattr(log_store, "_write_all", write_all)
        with pytest.raises(OSError, match="injected"):
            store.commit_columns(HTTP, [columns_of(5, 5)])
        assert store.end_position(HTTP) == 5  # none of it
        store.commit_columns(HTTP, [columns_of(5, 5)])  # the intake's next try
        assert read_all_columns(store) == rows(0, 10)
    with SegmentedLogStore(tmp_path) as reopened:
        assert reopened.end_position(HTTP) == 10


def test_commits_roll_segments_and_keep_offsets(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path, segment_bytes=4000) as store:
        for start in range(0, 300, 30):
            store.commit_columns(HTTP, [columns_of(start, 30)])
            store.append_columns(HTTP, columns_of(1000 + start, 1))  # the flusher's appends interleave
            assert store.flush(timeout=5)
    assert len(list((tmp_path / HTTP).glob("*.seg"))) > 2
    with SegmentedLogStore(tmp_path, writable=False) as reader:
        expected = [row for start in range(0, 300, 30) for row in (*rows(start, 30), *rows(1000 + start, 1))]
        assert read_all_columns(reader, max_records=70) == expected


def test_a_commit_refuses_a_column_of_the_wrong_type(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path) as store:
        with pytest.raises(ValueError, match="EdgeResponseStatus"):
            store.commit_columns(HTTP, [pa.RecordBatch.from_pydict({"EdgeResponseStatus": pa.array(["200"])})])
        assert store.end_position(HTTP) == 0
