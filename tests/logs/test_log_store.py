"""The segmented log store on real files: appends, reads, segments, crash recovery, cursors, retention, concurrency."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgeplane.logs import log_store
from edgeplane.logs.log_store import (
    LogStore,
    LogStoreBusyError,
    LogStoreClosedError,
    LogStoreFullError,
    PositionAheadError,
    PositionLostError,
    SegmentedLogStore,
)

HTTP = "http_requests"
FIREWALL = "firewall_events"


def records(start: int, count: int, size: int = 40) -> list[bytes]:
    return [b'{"RayID":"%010d","pad":"%s"}' % (i, b"x" * size) for i in range(start, start + count)]


def read_all(store: LogStore, dataset: str, position: int = 0, **limits: int) -> list[bytes]:
    found: list[bytes] = []
    while True:
        batch = store.read(dataset, position, **limits)
        if not batch.records:
            return found
        assert batch.position == position
        assert batch.next_position == position + len(batch.records)
        found.extend(batch.records)
        position = batch.next_position


def segment_files(directory: Path, dataset: str = HTTP) -> list[str]:
    return sorted(p.name for p in (directory / dataset).glob("*.seg"))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SegmentedLogStore]:
    with SegmentedLogStore(tmp_path) as opened:
        yield opened


def test_round_trip_per_dataset(store: SegmentedLogStore) -> None:
    store.append(HTTP, records(0, 100))
    store.append(FIREWALL, [b'{"Action":"block"}'])
    store.append(HTTP, records(100, 50))
    assert store.flush(timeout=5)
    assert store.end_position(HTTP) == 150
    assert store.end_position(FIREWALL) == 1
    assert read_all(store, HTTP) == records(0, 150)
    assert store.read(FIREWALL, 0).records == [b'{"Action":"block"}']
    assert store.read(HTTP, 150).records == []


def test_read_limits(store: SegmentedLogStore) -> None:
    store.append(HTTP, records(0, 100))
    store.flush()
    batch = store.read(HTTP, 10, max_records=7)
    assert batch.records == records(10, 7)
    assert batch.next_position == 17
    one_record = len(records(0, 1)[0])
    assert len(store.read(HTTP, 0, max_bytes=3 * one_record).records) == 3
    # a record larger than max_bytes still comes back, alone, so a reader always makes progress
    assert store.read(HTTP, 0, max_bytes=1).records == records(0, 1)
    assert read_all(store, HTTP, 3, max_records=9, max_bytes=5 * one_record) == records(3, 97)


def test_empty_records_and_newlines(store: SegmentedLogStore) -> None:
    store.append(HTTP, [b"", b"a", b""])
    with pytest.raises(ValueError, match="newline"):
        store.append(HTTP, [b"ok", b"not\nok"])
    store.flush()
    assert read_all(store, HTTP) == [b"", b"a", b""]


def test_position_after_end_is_an_error(store: SegmentedLogStore) -> None:
    store.append(HTTP, records(0, 3))
    store.flush()
    with pytest.raises(PositionAheadError):
        store.read(HTTP, 4)
    with pytest.raises(PositionAheadError):
        store.save_cursor(HTTP, 1, 4)


def test_segments_roll_and_are_named_by_first_offset(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path, segment_bytes=4096, compression="none") as store:
        for start in range(0, 2000, 100):
            store.append(HTTP, records(start, 100))
            store.flush()
        names = segment_files(tmp_path)
        assert len(names) > 10
        assert names[0] == "00000000000000000000.seg"
        bases = [int(name.removesuffix(".seg")) for name in names]
        assert bases == sorted(bases)
        for name in names[:-1]:
            assert (tmp_path / HTTP / name).stat().st_size <= 4096
        assert read_all(store, HTTP, max_records=333) == records(0, 2000)
        # a read starting in the middle of any segment
        assert store.read(HTTP, bases[5] + 3, max_records=2).records == records(bases[5] + 3, 2)
    with SegmentedLogStore(tmp_path, segment_bytes=4096) as reopened:
        assert reopened.end_position(HTTP) == 2000
        assert read_all(reopened, HTTP) == records(0, 2000)


def test_torn_tail_is_truncated_on_recovery_and_appends_continue(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path) as store:
        for start in (0, 10, 20):  # three flushes: three blocks
            store.append(HTTP, records(start, 10))
            store.flush()
    segment = tmp_path / HTTP / "00000000000000000000.seg"
    size = segment.stat().st_size
    os.truncate(segment, size - 25)  # the crash cut the last block in its middle

    with SegmentedLogStore(tmp_path) as store:
        assert store.end_position(HTTP) == 20
        assert read_all(store, HTTP) == records(0, 20)
        assert segment.stat().st_size < size - 25  # the torn bytes are gone
        store.append(HTTP, records(1000, 5))
        store.flush()
        assert read_all(store, HTTP) == records(0, 20) + records(1000, 5)
    with SegmentedLogStore(tmp_path) as store:
        assert read_all(store, HTTP, 18) == records(18, 2) + records(1000, 5)


@pytest.mark.parametrize("garbage", [b"\x00" * 100, b"EPLB" + b"\xff" * 40, b"x"])
def test_garbage_tail_is_ignored(tmp_path: Path, garbage: bytes) -> None:
    with SegmentedLogStore(tmp_path) as store:
        store.append(HTTP, records(0, 10))
    with open(tmp_path / HTTP / "00000000000000000000.seg", "ab") as file:
        file.write(garbage)
    reader = SegmentedLogStore(tmp_path, writable=False)
    assert reader.end_position(HTTP) == 10
    assert read_all(reader, HTTP) == records(0, 10)
    with SegmentedLogStore(tmp_path) as store:
        assert read_all(store, HTTP) == records(0, 10)
        store.append(HTTP, records(10, 1))
        store.flush()
        assert read_all(store, HTTP) == records(0, 11)


def test_a_corrupted_checksum_is_a_torn_tail(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path) as store:
        store.append(HTTP, records(0, 10))
        store.flush()
        store.append(HTTP, records(10, 10))
    segment = tmp_path / HTTP / "00000000000000000000.seg"
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF  # a bit flipped in the last block's payload
    segment.write_bytes(bytes(data))
    with SegmentedLogStore(tmp_path) as store:
        assert read_all(store, HTTP) == records(0, 10)


def test_cursors_survive_reopen(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path) as store:
        store.append(HTTP, records(0, 30))
        store.flush()
        assert store.load_cursor(HTTP, 7) is None
        store.save_cursor(HTTP, 7, 12)
        assert store.open_cursor(HTTP, 8) == 30  # a job created later starts at the current end
        assert store.load_cursor(HTTP, 8) == 30
    with SegmentedLogStore(tmp_path) as store:
        assert store.load_cursor(HTTP, 7) == 12
        assert store.open_cursor(HTTP, 7) == 12
        assert store.read(HTTP, 12, max_records=2).records == records(12, 2)
        store.delete_cursor(HTTP, 7)
        assert store.load_cursor(HTTP, 7) is None
    assert SegmentedLogStore(tmp_path, writable=False).load_cursor(HTTP, 8) == 30
    leftovers = [p.name for p in (tmp_path / HTTP / "cursors").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_retention_by_bytes_reports_the_loss(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path, segment_bytes=2048, retention_bytes=8192, sync_interval=0.01) as store:
        for start in range(0, 1000, 50):
            store.append(HTTP, records(start, 50))
            store.flush()

        def held() -> int:
            total = 0
            for path in (tmp_path / HTTP).glob("*.seg"):
                try:
                    total += path.stat().st_size
                except FileNotFoundError:  # deleted by retention meanwhile
                    continue
            return total

        deadline = time.monotonic() + 5
        while held() > 8192 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert held() <= 8192
        oldest = store.oldest_position(HTTP)
        assert 0 < oldest < 1000
        with pytest.raises(PositionLostError) as lost:
            store.read(HTTP, 5)
        assert (lost.value.position, lost.value.oldest_position, lost.value.lost) == (5, oldest, oldest - 5)
        assert read_all(store, HTTP, lost.value.oldest_position) == records(oldest, 1000 - oldest)
        assert int(segment_files(tmp_path)[0].removesuffix(".seg")) == oldest
        assert store.stats().deleted_segments > 0


def test_retention_keeps_what_a_cursor_needs_and_drops_what_all_passed(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path, segment_bytes=2048, sync_interval=0.01) as store:
        for start in range(0, 500, 50):
            store.append(HTTP, records(start, 50))
            store.flush()
        bases = [int(name.removesuffix(".seg")) for name in segment_files(tmp_path)]
        assert len(bases) > 4
        store.save_cursor(HTTP, 1, bases[3] + 1)  # inside the fourth segment
        store.save_cursor(HTTP, 2, 500)
        deadline = time.monotonic() + 5
        while store.oldest_position(HTTP) != bases[3] and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # a few more retention passes: nothing more may go
        assert store.oldest_position(HTTP) == bases[3]
        assert store.read(HTTP, bases[3] + 1, max_records=1).records == records(bases[3] + 1, 1)


def test_retention_by_age(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path, segment_bytes=2048, retention_seconds=3600, sync_interval=0.01) as store:
        for start in range(0, 300, 50):
            store.append(HTTP, records(start, 50))
            store.flush()
        names = segment_files(tmp_path)
        old = time.time() - 7200
        for name in names[:2]:
            os.utime(tmp_path / HTTP / name, (old, old))
        second = int(names[2].removesuffix(".seg"))
        deadline = time.monotonic() + 5
        while segment_files(tmp_path) != names[2:] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert segment_files(tmp_path) == names[2:]
        assert store.oldest_position(HTTP) == second


def test_the_segment_being_written_is_never_deleted(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path, segment_bytes=1 << 20, retention_bytes=10, sync_interval=0.01) as store:
        store.append(HTTP, records(0, 100))
        store.flush()
        time.sleep(0.1)
        assert read_all(store, HTTP) == records(0, 100)


def test_records_become_readable_without_a_flush(tmp_path: Path) -> None:
    """The flusher writes what was appended on its own, every ``flush_interval`` (how soon: bench/, not here)."""
    with SegmentedLogStore(tmp_path, flush_interval=0.05) as store:
        store.append(HTTP, records(0, 1))  # creates the dataset's stream
        store.flush()
        for round_ in range(5):
            store.append(HTTP, records(1 + round_, 1))
            deadline = time.monotonic() + 30  # only ends a hang
            while store.end_position(HTTP) < 2 + round_:
                assert time.monotonic() < deadline, "the flusher did not write the record"
                time.sleep(0.002)
        assert read_all(store, HTTP) == records(0, 6)


def test_append_never_waits_for_the_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the flusher's write is stuck (a stalled disk), appends still return at once: nothing they do waits
    for the disk."""
    writing, disk_back = threading.Event(), threading.Event()
    real_write_all = log_store._write_all

    def stalled_write_all(descriptor: int, *parts: bytes | memoryview) -> None:
        writing.set()
        disk_back.wait()
        real_write_all(descriptor, *parts)

    monkeypatch.setattr(log_store, "_write_all", stalled_write_all)
    with SegmentedLogStore(tmp_path, flush_interval=0.05, datasets=[HTTP]) as store:
        batch = records(0, 100)
        try:
            store.append(HTTP, batch)
            assert writing.wait(timeout=30)  # the flusher is stuck in its write

            def append_the_rest() -> None:
                for _ in range(99):
                    store.append(HTTP, batch)

            appender = threading.Thread(target=append_the_rest)
            appender.start()
            appender.join(timeout=30)  # only ends a hang
            assert not appender.is_alive(), "an append waited for the stuck write"
            assert store.end_position(HTTP) == 0  # nothing written: the disk is still stuck
        finally:
            disk_back.set()
        store.flush()
        assert store.end_position(HTTP) == 10_000


def test_a_full_buffer_refuses_the_whole_append(tmp_path: Path) -> None:
    # a flush interval of a minute stands in for a stalled disk
    with SegmentedLogStore(tmp_path, flush_interval=60, flush_bytes=1 << 30, max_buffer_bytes=2000) as store:
        store.append(HTTP, records(0, 20))  # about 1100 bytes: accepted
        with pytest.raises(LogStoreFullError):
            store.append(HTTP, records(20, 20))
        stats = store.stats()
        assert (stats.appended_records, stats.refused_records) == (20, 20)
        assert store.flush(timeout=5)
        store.append(HTTP, records(20, 20))  # room again once written
        store.flush()
        assert read_all(store, HTTP) == records(0, 40)


def test_close_writes_everything_and_refuses_more(tmp_path: Path) -> None:
    store = SegmentedLogStore(tmp_path, flush_interval=60, flush_bytes=1 << 30)
    store.append(HTTP, records(0, 500))
    store.close()
    store.close()
    with pytest.raises(LogStoreClosedError):
        store.append(HTTP, records(0, 1))
    with SegmentedLogStore(tmp_path) as reopened:
        assert read_all(reopened, HTTP) == records(0, 500)


def test_concurrent_reader_sees_whole_records_in_order(tmp_path: Path) -> None:
    total = 30_000
    with SegmentedLogStore(tmp_path, flush_interval=0.005, segment_bytes=64 * 1024) as store:
        store.append(HTTP, records(0, 1))
        store.flush()
        seen: list[bytes] = []
        errors: list[BaseException] = []

        def read_along() -> None:
            position = 0
            try:
                while position < total:
                    batch = store.read(HTTP, position, max_records=500)
                    seen.extend(batch.records)
                    position = batch.next_position
                    if not batch.records:
                        time.sleep(0.001)
            except BaseException as error:  # handed to the test's thread
                errors.append(error)

        reader = threading.Thread(target=read_along)
        reader.start()
        for start in range(1, total, 97):
            store.append(HTTP, records(start, min(97, total - start)))
            time.sleep(0.0002)
        reader.join(timeout=30)
        assert not errors
        assert seen == records(0, total)


def test_another_process_reads_with_a_read_only_store(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path, segment_bytes=4096) as writer:
        reader = SegmentedLogStore(tmp_path, writable=False)
        assert reader.end_position(HTTP) == 0
        writer.append(HTTP, records(0, 100))
        writer.flush()
        assert reader.end_position(HTTP) == 100
        assert read_all(reader, HTTP) == records(0, 100)
        writer.append(HTTP, records(100, 100))
        writer.flush()
        assert read_all(reader, HTTP, 100) == records(100, 100)
        reader.save_cursor(HTTP, 3, 150)
        assert writer.load_cursor(HTTP, 3) == 150
        with pytest.raises(LogStoreClosedError):
            reader.append(HTTP, records(0, 1))


def test_invalid_dataset_names_are_refused(store: SegmentedLogStore) -> None:
    for name in ("../etc", "Http", "", "a/b"):
        with pytest.raises(ValueError, match="dataset name"):
            store.append(name, [b"{}"])


def test_reads_cut_by_the_byte_limit_continue_exactly_where_they_stopped(tmp_path: Path) -> None:
    """Regression: a block cut short by ``max_bytes`` must end the read, or the next block is sliced from a wrong
    offset and records are skipped and repeated."""
    records = [f"{index:08d}".encode() + b"x" * 992 for index in range(30_000)]
    with SegmentedLogStore(tmp_path, datasets=["http_requests"]) as store:
        for start in range(0, len(records), 500):
            store.append("http_requests", records[start : start + 500])
            store.flush()
        position = 0
        seen: list[bytes] = []
        while position < len(records):
            batch = store.read("http_requests", position, max_records=20_000, max_bytes=8 << 20)
            assert batch.records, position
            assert batch.records == records[position : batch.next_position]
            seen.extend(batch.records)
            position = batch.next_position
        assert seen == records


@pytest.mark.parametrize("seed", [1, 2])
def test_bounded_reads_return_every_record_once_in_order(tmp_path: Path, seed: int) -> None:
    """Reads bounded by records and by bytes, over blocks and segments of every size, return the stream exactly."""
    import random

    chance = random.Random(seed)
    records = [f"{index:07d}".encode() + b"y" * chance.randint(100, 1500) for index in range(20_000)]
    with SegmentedLogStore(
        tmp_path, datasets=["http_requests"], segment_bytes=chance.choice([1 << 18, 1 << 20])
    ) as store:
        index = 0
        while index < len(records):
            count = chance.randint(1, 800)
            store.append("http_requests", records[index : index + count])
            index += count
            if chance.random() < 0.3:
                store.flush()
        store.flush()
        for max_records, max_bytes in ((2_000, 1 << 20), (500, 100_000), (7, 5_000), (10_000, 3_000)):
            position = 0
            while position < len(records):
                batch = store.read("http_requests", position, max_records=max_records, max_bytes=max_bytes)
                assert batch.records == records[position : batch.next_position]
                assert batch.records
                position = batch.next_position


def test_a_directory_has_one_writer_at_a_time(tmp_path: Path) -> None:
    """A second writable store on a directory (a second ``edgeplane serve`` on the same data directory) is refused;
    readers are not, and once the writer closes another may write."""
    first = SegmentedLogStore(tmp_path, flush_interval=0.01)
    first.append("http_requests", [b"one"])
    with pytest.raises(LogStoreBusyError, match="another writer"):
        SegmentedLogStore(tmp_path)
    reader = SegmentedLogStore(tmp_path, writable=False)
    first.close()
    assert reader.read("http_requests", 0).records == [b"one"]
    with SegmentedLogStore(tmp_path) as second:
        second.append("http_requests", [b"two"])
    assert SegmentedLogStore(tmp_path, writable=False).read("http_requests", 0).records == [b"one", b"two"]


def test_the_writer_lock_goes_with_a_writer_that_dies(tmp_path: Path) -> None:
    """The kernel lets go of a dead writer's lock: the next writer opens the directory without help."""
    code = (
        "import os, sys\n"
        "from edgeplane.logs.log_store import SegmentedLogStore\n"
        "store = SegmentedLogStore(sys.argv[1])\n"
        "store.append('http_requests', [b'before the kill'])\n"
        "store.flush()\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        with pytest.raises(LogStoreBusyError):
            SegmentedLogStore(tmp_path)
        child.kill()
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    with SegmentedLogStore(tmp_path) as store:
        assert store.read("http_requests", 0).records == [b"before the kill"]
