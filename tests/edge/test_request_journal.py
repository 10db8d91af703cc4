"""The request log's journal and its intake: what the edge answered reaches the store even when the edge worker dies
between two seals, and a period's file goes once the store holds its rows."""

from __future__ import annotations

import asyncio
import errno
import marshal
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from array import array
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.edge.request_log import RequestLog
from edgeplane.logs import request_journal
from edgeplane.logs.journal_intake import JournalIntake
from edgeplane.logs.log_store import SegmentedLogStore
from edgeplane.logs.request_journal import (
    COMMIT,
    COMMIT_MARK,
    FRAME_HEAD,
    ROW,
    ROWS,
    SHAPE,
    WHOLE,
    RequestJournal,
    delete_sealed,
    frame_size,
    read_frames,
    read_sealed,
    sealed_periods,
)
from edgeplane.logs.request_rows import HTTP_REQUESTS, NUMBER_COLUMNS, ROW_FRAME, ROW_PAYLOAD, Chunk
from edgeplane.waf.events import FIREWALL_EVENTS
from edgeplane.waf.firewall import Verdict
from tests.edge.test_request_log import emit, probe_match
from tests.edge.test_request_log_flushes import _PLAIN, answer, flushed_alone
from tests.support.journalled_store import JournalledStore
from tests.support.memory_log_store import MemoryLogStore


async def _until(check: Any, seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not within the time allowed"
        await asyncio.sleep(0.01)  # files and a store's end: nothing to wait on


def _open_file(directory: Path, period: int) -> Path:
    return directory / f"{period:016d}.journal"


def _frame(kind: int, payload: bytes) -> bytes:
    """A frame as the journal writes it, its bytes in the order they are stored (the commit word last)."""
    body = FRAME_HEAD.pack(len(payload), kind) + payload + COMMIT.pack(COMMIT_MARK)
    return body + bytes(frame_size(len(payload)) - len(body))


def test_frames_are_read_back_in_order_and_the_file_is_cut_to_them_when_sealed(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path)
    assert journal.append(SHAPE, b"one")
    assert journal.append(WHOLE, b"two" * 100)
    assert journal.append(*_row(1))
    assert journal.append(*_row(2))
    journal.seal()
    journal.close()
    found = read_sealed(tmp_path, 0)
    assert _one_by_one(found) == [(SHAPE, b"one"), (WHOLE, b"two" * 100), _row(1), _row(2)]
    assert found[2][0] == ROWS  # the rows that follow one another, read as one run
    assert (tmp_path / f"{0:016d}.sealed").stat().st_size == 8 + frame_size(3) + frame_size(300) + 2 * 104


def _row(seed: int) -> tuple[int, bytes]:
    return ROW, ROW_PAYLOAD.pack(*[seed] * len(NUMBER_COLUMNS), b"%016x" % seed, seed % 7)


one_frame = st.one_of(
    st.tuples(st.sampled_from([SHAPE, WHOLE]), st.binary(min_size=1, max_size=300)),
    st.integers(0, 2**32).map(_row),
)
frames = st.lists(one_frame, max_size=8)
# Runs of rows long enough for the reader's doubling windows (``_committed_rows``), between other frames.
row_run = st.tuples(st.integers(0, 2**32), st.integers(1, 150)).map(
    lambda start: [_row(start[0] + n) for n in range(start[1])]
)
long_frames = st.lists(st.one_of(row_run, one_frame.map(lambda frame: [frame])), max_size=5).map(
    lambda groups: [frame for group in groups for frame in group]
)


def _one_by_one(found: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """``read_frames``'s frames with each run of rows as its row frames' payloads, one by one."""
    each = []
    for kind, payload in found:
        if kind != ROWS:
            each.append((kind, payload))
            continue
        size = ROW_FRAME.size
        each += [(ROW, payload[at + 8 : at + size - 4]) for at in range(0, len(payload), size)]
    return each


@settings(max_examples=200, deadline=None)
@given(st.one_of(frames, long_frames), one_frame, st.data())
def test_a_frame_a_kill_cut_short_is_dropped_and_those_before_it_kept(
    written: list[tuple[int, bytes]], torn: tuple[int, bytes], data: st.DataObject
) -> None:
    """A writer killed at any byte of a frame (head, payload or commit word) leaves the frames before it readable,
    and the cut one not: its commit word is written last, and the rest of the file is zeros."""
    whole = b"".join(_frame(kind, payload) for kind, payload in written)
    cut = _frame(*torn)
    stored = data.draw(st.integers(0, FRAME_HEAD.size + len(torn[1]) + COMMIT.size - 1), label="bytes stored")
    image = b"EPJ4" + struct.pack("=I", 4) + whole + cut[:stored] + bytes(4096)
    found, end = read_frames(image)
    assert (_one_by_one(found), end) == (written, 8 + len(whole))
    with tempfile.TemporaryDirectory() as directory:  # and a worker starting on the journal seals it so
        (Path(directory) / f"{0:016d}.journal").write_bytes(image)
        again = RequestJournal(Path(directory))
        assert _one_by_one(read_sealed(Path(directory), 0)) == written
        assert (Path(directory) / f"{0:016d}.sealed").stat().st_size == 8 + len(whole)
        assert again.period == 1


@settings(max_examples=100, deadline=None)
@given(st.one_of(frames, long_frames), st.data())
def test_a_file_cut_anywhere_gives_the_whole_frames_before_the_cut(
    written: list[tuple[int, bytes]], data: st.DataObject
) -> None:
    image = b"EPJ4" + struct.pack("=I", 4) + b"".join(_frame(kind, payload) for kind, payload in written)
    cut = data.draw(st.integers(0, len(image)), label="cut")
    whole, offset = [], 8
    for kind, payload in written:  # the frames whose commit word is within the cut
        if offset + FRAME_HEAD.size + len(payload) + COMMIT.size > cut:
            break
        whole.append((kind, payload))
        offset += frame_size(len(payload))
    found, end = read_frames(image[:cut])
    assert _one_by_one(found) == whole
    assert end <= max(cut, 8)


def test_a_journal_of_the_earlier_format_is_still_read(tmp_path: Path) -> None:
    """Chunks framed by length and CRC-32, as edge workers wrote them before the mapped journal: a file a previous
    release left, sealed or not, reaches the store."""
    rows = [answer(number, {**_PLAIN, "query": b"n=%d" % number}) for number in range(3)]
    expected = [flushed_alone(one) for one in rows]
    old = b""
    for record in expected:
        payload = marshal.dumps((3, 0, [], b"", "", b"", [record], []))
        old += struct.pack("<II", len(payload), zlib.crc32(payload)) + payload
    (tmp_path / f"{0:016d}.sealed").write_bytes(old)
    (tmp_path / f"{1:016d}.journal").write_bytes(old + b"\x05\x00\x00\x00cut")  # left open, its last write cut
    store = JournalledStore(tmp_path)
    assert store.records[HTTP_REQUESTS] == expected + expected


def test_a_full_mapping_seals_its_period_and_the_next_one_holds_the_rest(tmp_path: Path) -> None:
    each = _answers(40)
    expected = [flushed_alone(one) for one in each]
    journal = RequestJournal(tmp_path, period_bytes=1024)  # about eight rows a period
    store = JournalledStore(tmp_path)
    log = RequestLog(journal)
    log.emit(each)
    assert len(sealed_periods(tmp_path)) > 4
    assert store.records[HTTP_REQUESTS] == expected


async def test_a_period_that_cannot_be_opened_loses_its_records_and_counts_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk: no period opens, the answers go out, and the records are counted lost until one opens."""

    def no_room(descriptor: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    journal = RequestJournal(tmp_path)
    log = RequestLog(journal)
    with monkeypatch.context() as patch:
        patch.setattr(request_journal.os, "pwrite", no_room)
        log.emit(_answers(3))
        assert log.lost == 3
        assert os.listdir(tmp_path) == []
    log.emit(_answers(2))
    assert log.lost == 5  # the next try waits ``REOPEN_SECONDS``
    monkeypatch.setattr(request_journal, "REOPEN_SECONDS", 0.0)
    log.emit(_answers(2))
    log.close()
    assert len(JournalledStore(tmp_path).records[HTTP_REQUESTS]) == 2


async def test_a_disk_that_fills_during_a_period_ends_it_and_keeps_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zeros written ahead of the frames run out and no more can be written: the period ends with the rows it
    has, the rows that follow are lost and counted, and none of the period's rows is."""
    journal = RequestJournal(tmp_path)
    log = RequestLog(journal, seal_interval=3600, max_rows=1 << 20)
    rows_ahead = request_journal.ZEROS_AHEAD // request_journal.ROW_FRAME_SIZE - 8  # room for the shape's frame
    first = _answers(rows_ahead)
    log.emit(first)
    assert journal.limit == request_journal.ZEROS_AHEAD  # no more zeros written yet

    def no_room(descriptor: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(request_journal.os, "pwrite", no_room)
        log.emit(_answers(20))  # the first few fit in the zeros left; then no more can be written
        lost = log.lost
        assert 0 < lost < 20
    log.close()
    assert len(JournalledStore(tmp_path).records[HTTP_REQUESTS]) == rows_ahead + 20 - lost


_WRITER = """
import sys, time
sys.path[:0] = sys.argv[2:]
from pathlib import Path
from edgeplane.logs.request_journal import RequestJournal
from edgeplane.edge.request_log import RequestLog
from tests.edge.test_request_journal import _answers
log = RequestLog(RequestJournal(Path(sys.argv[1])), seal_interval=3600, max_rows=1 << 30)
number = 0
while True:
    batch = _answers(50)
    for one in batch:
        one[0].context.ray_id = "%016x" % number
        log.commit(one[0], one[1], one[2], one[3])
        number += 1
    print(number, flush=True)  # every record up to here was committed: an answer could have gone out
"""


def test_records_committed_before_a_kill_9_reach_the_store(tmp_path: Path) -> None:
    """A real process commits records as fast as it can and is killed with SIGKILL at a random moment: every record
    it committed (it said so after committing) reaches the store, and none it did not."""
    for attempt in range(3):
        directory = tmp_path / str(attempt)
        paths = [str(Path(__file__).parents[2] / "src"), str(Path(__file__).parents[2])]
        writer = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(directory), *paths], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout is not None
        committed = int(writer.stdout.readline())  # it runs
        time.sleep(random.uniform(0.05, 0.4))
        writer.kill()
        for line in writer.stdout:
            committed = int(line)
        writer.wait()
        records = JournalledStore(directory).records[HTTP_REQUESTS]
        rays = [int(record["RayID"], 16) for record in records]
        assert rays[:committed] == list(range(committed))
        assert len(rays) < committed + 50  # those after: committed but not yet said, the last batch
        assert rays == list(range(len(rays)))


def test_a_backlog_over_its_bound_loses_its_oldest_periods(tmp_path: Path) -> None:
    """While the delivery process takes nothing, the sealed periods are bounded: the oldest go first."""
    journal = RequestJournal(tmp_path, max_backlog_bytes=250)
    for period in range(5):
        journal.append(*_row(period))  # 112 bytes with the file's head and the frame's
        journal.seal()
    assert sealed_periods(tmp_path) == [3, 4]
    delete_sealed(tmp_path, 3)  # taken
    delete_sealed(tmp_path, 4)
    for _ in range(2):
        journal.append(*_row(9))
        journal.seal()
    assert sealed_periods(tmp_path) == [5, 6]  # the taken ones no longer count
    journal.close()


def test_sealing_a_period_without_rows_makes_no_file(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path)
    journal.seal()
    journal.close()
    assert os.listdir(tmp_path) == []


def test_a_chunk_is_checked_when_read_back() -> None:
    with pytest.raises(ValueError, match="not a request journal chunk"):
        Chunk.decode(b"\x00garbage")
    with pytest.raises(ValueError, match="not a request journal chunk"):
        Chunk.decode(b"")


def test_a_chunk_of_the_first_format_is_read_with_its_numbers_packed_by_row() -> None:
    """The first journal format kept a row's numbers a column at a time; a journal a previous release left is still
    recovered."""
    rows = [tuple(range(row * 10, row * 10 + len(NUMBER_COLUMNS))) for row in range(3)]
    columns = [array("q", column).tobytes() for column in zip(*rows, strict=True)]
    first = marshal.dumps((1, 3, [], array("I", [0, 0, 0]).tobytes(), ["a" * 16, "b" * 16, "c" * 16], columns, [], []))
    chunk = Chunk.decode(first)
    packed = struct.Struct(f"={len(NUMBER_COLUMNS)}q")
    assert list(packed.iter_unpack(chunk.numbers)) == rows
    assert chunk.rays == "a" * 16 + "\n" + "b" * 16 + "\n" + "c" * 16 + "\n"


def test_a_chunk_whose_ray_ids_hold_the_separator_is_refused() -> None:
    second = marshal.dumps((2, 2, [], array("I", [0, 0]).tobytes(), ["a\nb", "c"], bytes(2 * 8 * 9), [], []))
    with pytest.raises(ValueError, match="known version"):
        Chunk.decode(second)


def _answers(count: int, **changes: Any) -> list[Any]:
    return [answer(number, {**_PLAIN, "query": b"n=%d" % (number % 3), **changes}) for number in range(count)]


async def test_rows_of_a_worker_that_died_reach_the_store(tmp_path: Path) -> None:
    each = _answers(25)
    expected = await asyncio.to_thread(lambda: [flushed_alone(one) for one in each])  # outside a loop: one by one
    journal = RequestJournal(tmp_path)
    log = RequestLog(journal, seal_interval=3600)
    for one in each:
        log.emit([one])  # in the journal on return
    _dies(log)
    assert sealed_periods(tmp_path) == []  # the period is not over: nothing for the intake yet
    # The worker dies here. The next one seals what it left; the intake takes it into the store.
    store = JournalledStore(tmp_path)
    assert store.records[HTTP_REQUESTS] == expected
    assert os.listdir(tmp_path) == []


async def test_a_firewall_match_and_an_odd_row_are_journalled_too(tmp_path: Path) -> None:
    store = JournalledStore(tmp_path)
    log = store.log(seal_interval=3600)
    emit(log, verdict=Verdict(matches=(probe_match(),)))
    request, response, _sent_bytes, written_ns = _answers(1)[0]
    log.emit([(request, response, 1 << 70, written_ns)])  # no 64-bit column holds what it sent: kept whole
    _dies(log)
    fresh = JournalledStore(tmp_path)
    blocked, odd = fresh.records[HTTP_REQUESTS]
    assert blocked["SecurityAction"] == "log"
    assert odd["EdgeResponseBytes"] == 1 << 70
    assert len(fresh.records[FIREWALL_EVENTS]) == 1


async def test_a_period_goes_to_a_real_store_once_sealed_and_its_file_then(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path / "journal")
    with SegmentedLogStore(tmp_path / "store") as store:
        intake = JournalIntake({journal.directory: store})
        log = RequestLog(journal, seal_interval=0.3)
        log.emit(_answers(5))
        await _until(lambda: _open_file(journal.directory, 0).exists())  # journalled
        assert intake.ingest() == 0  # not sealed yet
        assert store.end_position(HTTP_REQUESTS) == 0
        await _until(lambda: sealed_periods(journal.directory) == [0])
        assert intake.ingest() == 5  # appended, written by the store ...
        assert store.end_position(HTTP_REQUESTS) == 5
        assert list(journal.directory.iterdir()) == []  # ... and then the file deleted
    log.close()


def test_a_damaged_frame_ends_its_period_and_the_frames_before_it_are_taken(tmp_path: Path) -> None:
    store = JournalledStore(tmp_path)
    log = store.log()
    log.emit(_answers(3))  # three rows ...
    assert store.journal.append(WHOLE, b"\x00 not a record")  # ... a damaged one ...
    log.emit(_answers(2))
    log.flush()  # ... and two after it, sealed
    assert len(store.records[HTTP_REQUESTS]) == 3
    assert os.listdir(tmp_path) == []


async def test_closing_seals_everything(tmp_path: Path) -> None:
    store = JournalledStore(tmp_path)
    log = store.log(seal_interval=3600)
    log.emit(_answers(7))
    await asyncio.sleep(0)
    log.emit(_answers(2))
    log.close()
    assert len(store.records[HTTP_REQUESTS]) == 9
    assert os.listdir(tmp_path) == []


def test_a_period_that_cannot_be_taken_is_quarantined_and_the_rest_go_on(tmp_path: Path) -> None:
    first, second = JournalledStore(tmp_path / "a"), JournalledStore(tmp_path / "b")
    emit(first.log(), ray_id="000000000000000a")
    (tmp_path / "a" / f"{1:016d}.sealed").mkdir()  # cannot be read
    emit(RequestLog(RequestJournal(tmp_path / "a")), ray_id="000000000000000b")  # period 2
    emit(second.log(), ray_id="000000000000000c")
    memory = MemoryLogStore()
    intake = JournalIntake({tmp_path / "a": memory, tmp_path / "b": memory})  # type: ignore[dict-item]
    assert intake.ingest() == 3
    assert intake.ingest() == 0  # nothing twice
    assert [record["RayID"] for record in memory.records[HTTP_REQUESTS]] == [
        "000000000000000a",
        "000000000000000b",
        "000000000000000c",
    ]
    assert os.listdir(tmp_path / "a") == [f"{1:016d}.unreadable"]


class FailingStore(MemoryLogStore):
    """A store whose disk fails (every commit raises ``OSError``) until ``failing`` is cleared."""

    failing = True

    def commit_columns(self, dataset: str, batches: list[pa.RecordBatch]) -> None:
        if self.failing:
            raise OSError(errno.EIO, "injected")
        super().commit_columns(dataset, batches)


def test_periods_a_failing_store_did_not_commit_stay_and_are_not_committed_twice(tmp_path: Path) -> None:
    store = FailingStore()
    journalled = JournalledStore(tmp_path, store=store)
    emit(journalled.log())
    intake = journalled.intake
    assert intake.ingest() == 0
    assert sealed_periods(tmp_path) == [0]  # kept until the store has committed it
    emit(journalled.log())
    assert intake.ingest() == 0  # the disk fails: nothing taken, nothing lost
    store.failing = False
    assert intake.ingest() == 2  # both periods, in order, and their files deleted
    assert sealed_periods(tmp_path) == []
    assert intake.ingest() == 0
    assert len(store.records[HTTP_REQUESTS]) == 2


def test_a_commit_is_durable_before_its_period_is_deleted(tmp_path: Path) -> None:
    """The one durable hop: the period's file goes only once the store has written and synced its records."""
    journal = RequestJournal(tmp_path / "journal")
    emit(RequestLog(journal))
    seen: list[tuple[str, list[int]]] = []

    class Watching(SegmentedLogStore):
        def commit_columns(self, dataset: str, batches: list[pa.RecordBatch]) -> None:
            super().commit_columns(dataset, batches)
            seen.append((dataset, sealed_periods(journal.directory)))

    with Watching(tmp_path / "store", flush_interval=3600, sync_interval=3600) as store:
        assert JournalIntake({journal.directory: store}).ingest() == 1
        assert store.stats().flushes == 0  # no flusher in the way: the commit wrote it
        assert seen == [(HTTP_REQUESTS, [0])]  # committed while the period was still there
        assert sealed_periods(journal.directory) == []
    with SegmentedLogStore(tmp_path / "store", writable=False) as reader:
        assert reader.end_position(HTTP_REQUESTS) == 1


def test_the_backlog_bound_counts_what_an_earlier_process_left(tmp_path: Path) -> None:
    earlier = RequestJournal(tmp_path)
    for period in range(3):
        earlier.append(*_row(period))  # 112 bytes with the file's head and the frame's
        earlier.seal()
    earlier.close()
    later = RequestJournal(tmp_path, max_backlog_bytes=250)
    later.append(*_row(9))
    later.seal()
    assert sealed_periods(tmp_path) == [2, 3]
    later.close()


class _FailingEventsOnce(MemoryLogStore):
    """Commits a period's requests, and fails the first commit of firewall events."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    def commit_columns(self, dataset: str, batches: list[pa.RecordBatch]) -> None:
        if dataset == FIREWALL_EVENTS and self.failures:
            self.failures -= 1
            raise OSError(errno.ENOSPC, "full")
        super().commit_columns(dataset, batches)


def test_a_period_the_store_took_in_part_goes_on_from_the_part_it_refused(tmp_path: Path) -> None:
    """A period whose requests the store committed and whose firewall events it failed: the next take commits those
    events, not the requests again."""
    store = _FailingEventsOnce()
    journalled = JournalledStore(tmp_path, store=store)
    log = journalled.log()
    matched = _answers(1)[0]
    matched[0].context.verdict = Verdict(matches=(probe_match(),))
    log.emit([*_answers(2), matched])  # two rows in the batch, one kept whole with its firewall event
    intake = journalled.intake
    assert intake.ingest() == 3  # the requests; the firewall event refused
    assert sealed_periods(tmp_path) == [0]
    assert intake.ingest() == 1  # the firewall event, and only it
    assert sealed_periods(tmp_path) == []
    assert len(store.records[HTTP_REQUESTS]) == 3
    assert len(store.records[FIREWALL_EVENTS]) == 1
    assert store.batches[HTTP_REQUESTS] == 1


def _dies(log: RequestLog) -> None:
    """What the death of the log's worker leaves: its open period unsealed. (The C writer lets go of the mapping
    first, which the process's end does for it.)"""
    log._detach()
    log.journal.close()
