"""The request log's journal and its intake: what the edge answered reaches the store even when the edge worker dies
between two seals, and a period's file goes once the store holds its rows."""

from __future__ import annotations

import asyncio
import marshal
import os
import struct
import time
from array import array
from pathlib import Path
from typing import Any

import pytest

from edgeplane.edge import journal_intake, request_journal
from edgeplane.edge.journal_intake import JournalIntake
from edgeplane.edge.request_journal import (
    RequestJournal,
    delete_sealed,
    read_sealed,
    seal_leftovers,
    sealed_periods,
)
from edgeplane.edge.request_log import HTTP_REQUESTS, RequestLog
from edgeplane.edge.request_rows import NUMBER_COLUMNS, Chunk
from edgeplane.logs.log_store import LogStoreFullError, SegmentedLogStore
from edgeplane.waf.events import FIREWALL_EVENTS
from edgeplane.waf.firewall import Verdict
from tests.edge.test_request_log import emit, probe_match
from tests.edge.test_request_log_flushes import _PLAIN, answer, flushed_alone
from tests.support.journalled_store import JournalledStore
from tests.support.memory_log_store import MemoryLogStore

both_ways = pytest.mark.usefixtures("journal_writes")  # once on the caller's thread, once on the journal's


async def _until(check: Any, seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not within the time allowed"
        await asyncio.sleep(0.01)  # files and a store's end: nothing to wait on


def _open_file(directory: Path, period: int) -> Path:
    return directory / f"{period:016d}.journal"


@both_ways
def test_chunks_are_read_back_whole_and_a_cut_frame_ends_the_file(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path)
    journal.write(b"one")
    journal.write(b"two" * 100)
    journal.seal()
    journal.close()
    assert sealed_periods(tmp_path) == [0]
    assert read_sealed(tmp_path, 0) == [b"one", b"two" * 100]
    path = tmp_path / f"{0:016d}.sealed"
    data = path.read_bytes()
    path.write_bytes(data[:-1])  # the last write cut short by a crash
    assert read_sealed(tmp_path, 0) == [b"one"]
    path.write_bytes(data[:8] + b"ONE" + data[11:])  # a damaged first chunk: nothing after it is trusted
    assert read_sealed(tmp_path, 0) == []


def test_quick_writes_are_on_the_callers_thread(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path)
    journal.write(b"one")
    assert _open_file(tmp_path, 0).stat().st_size == 8 + 3  # there at once: no thread between
    assert not journal.threaded
    journal.seal()
    assert sealed_periods(tmp_path) == [0]
    journal.close()


def test_after_a_slow_write_the_journal_writes_on_its_own_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that took longer than ``SLOW_WRITE_SECONDS`` (the disk stalling) hands every later write and seal to
    the journal's thread; they keep their order."""
    monkeypatch.setattr(request_journal, "SLOW_WRITE_SECONDS", -1.0)  # every write is slow
    journal = RequestJournal(tmp_path)
    journal.write(b"first")
    assert journal.threaded
    journal.write(b"second")
    journal.seal()
    journal.write(b"third")
    journal.seal()
    journal.write(b"fourth")
    journal.close()
    assert not journal.threaded
    assert sealed_periods(tmp_path) == [0, 1]
    assert read_sealed(tmp_path, 0) == [b"first", b"second"]
    assert read_sealed(tmp_path, 1) == [b"third"]
    assert _open_file(tmp_path, 2).exists()  # not sealed: closed with the process


def _stall_the_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write to a file waits longer than ``SLOW_WRITE_SECONDS`` first, as on a disk that stalls."""
    real_write = os.write

    def stalling_write(descriptor: int, data: bytes) -> int:
        time.sleep(max(request_journal.SLOW_WRITE_SECONDS, 0.0) + 0.02)
        return real_write(descriptor, data)

    monkeypatch.setattr(request_journal.os, "write", stalling_write)


def test_flush_returns_once_the_journals_thread_has_written_and_sealed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stall_the_disk(monkeypatch)
    journal = RequestJournal(tmp_path)
    journal.write(b"first")  # slow: the journal's thread takes over
    assert journal.threaded
    journal.write(b"second")
    journal.seal()
    journal.write(b"third")
    journal.flush()
    assert sealed_periods(tmp_path) == [0]
    assert read_sealed(tmp_path, 0) == [b"first", b"second"]
    assert _open_file(tmp_path, 1).stat().st_size == 8 + len(b"third")
    journal.close()


async def test_a_request_logs_flush_on_a_stalling_disk_leaves_its_rows_sealed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``RequestLog.flush`` (shutdown, scripts) means flushed even when the disk stalls: the period is sealed on disk
    when it returns, and ``close`` leaves nothing behind."""
    journal = RequestJournal(tmp_path)
    log = RequestLog(journal, flush_interval=3600)
    _stall_the_disk(monkeypatch)
    log.emit(_answers(3))
    log.flush()  # the first write is slow: the thread takes over
    assert journal.threaded
    log.emit(_answers(2))
    log.flush()  # on the thread, and still sealed on return
    assert sealed_periods(tmp_path) == [0, 1]
    log.emit(_answers(4))
    log.close()
    assert sealed_periods(tmp_path) == [0, 1, 2]
    monkeypatch.undo()
    store = JournalledStore(tmp_path)
    assert len(store.records[HTTP_REQUESTS]) == 9


@both_ways
def test_a_new_journal_seals_what_a_dead_writer_left_and_numbers_on(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path)
    journal.write(b"a")
    journal.seal()
    journal.write(b"b")
    journal.close()  # the process dies with period 1 open
    again = RequestJournal(tmp_path)
    assert sealed_periods(tmp_path) == [0, 1]
    assert read_sealed(tmp_path, 1) == [b"b"]
    assert again.period == 2  # a new process never appends to an old file
    again.write(b"c")
    again.seal()
    again.close()
    assert sealed_periods(tmp_path) == [0, 1, 2]
    assert seal_leftovers(tmp_path) == []


@both_ways
def test_a_failed_write_is_cut_off_and_tried_again_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    failures = iter([False, True, True, False, False, False])

    def write(descriptor: int, data: bytes) -> int:
        if next(failures, False):
            real_write(descriptor, bytes(data)[:5])  # part of it reached the file
            raise OSError(28, "No space left on device")
        return real_write(descriptor, data)

    monkeypatch.setattr(request_journal.os, "write", write)
    journal = RequestJournal(tmp_path)
    journal.write(b"one")
    journal.write(b"two")  # fails
    journal.write(b"three")  # "two" fails again; both wait
    journal.flush()
    assert journal.write_errors == 2
    journal.seal()  # written at last, in order
    journal.close()
    assert read_sealed(tmp_path, 0) == [b"one", b"two", b"three"]


@both_ways
def test_a_backlog_over_its_bound_loses_its_oldest_periods(tmp_path: Path) -> None:
    """While the delivery process takes nothing, the sealed periods are bounded: the oldest go first."""
    journal = RequestJournal(tmp_path, max_backlog_bytes=250)
    for period in range(5):
        journal.write(bytes([period]) * 92)  # 100 bytes with the frame
        journal.seal()
    journal.flush()
    assert sealed_periods(tmp_path) == [3, 4]
    delete_sealed(tmp_path, 3)  # taken
    delete_sealed(tmp_path, 4)
    for _ in range(2):
        journal.write(b"x" * 92)
        journal.seal()
    journal.flush()
    assert sealed_periods(tmp_path) == [5, 6]  # the taken ones no longer count
    journal.close()


@both_ways
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


@both_ways
async def test_rows_of_a_worker_that_died_reach_the_store(tmp_path: Path) -> None:
    each = _answers(25)
    expected = await asyncio.to_thread(lambda: [flushed_alone(one) for one in each])  # outside a loop: one by one
    journal = RequestJournal(tmp_path)
    log = RequestLog(journal, flush_interval=0.01, seal_interval=3600)
    for number, one in enumerate(each):
        log.emit([one])
        if number % 10 == 9:
            await asyncio.sleep(0.05)  # a look: the rows so far go to the journal, in several chunks
    await _until(lambda: _open_file(tmp_path, 0).exists() and _open_file(tmp_path, 0).stat().st_size > 0)
    await asyncio.sleep(0.05)
    journal.close()
    assert sealed_periods(tmp_path) == []  # the period is not over: nothing for the intake yet
    # The worker dies here. The next one seals what it left; the intake takes it into the store.
    store = JournalledStore(tmp_path)
    assert store.records[HTTP_REQUESTS] == expected
    assert os.listdir(tmp_path) == []


@both_ways
async def test_a_firewall_match_and_an_odd_row_are_journalled_too(tmp_path: Path) -> None:
    store = JournalledStore(tmp_path)
    log = store.log(flush_interval=0.01, seal_interval=3600)
    emit(log, verdict=Verdict(matches=(probe_match(),)))
    request, response, _sent_bytes, written_ns = _answers(1)[0]
    log.emit([(request, response, 1 << 70, written_ns)])  # no 64-bit column holds what it sent: kept whole
    await asyncio.sleep(0.05)
    store.journal.close()  # dies
    fresh = JournalledStore(tmp_path)
    blocked, odd = fresh.records[HTTP_REQUESTS]
    assert blocked["SecurityAction"] == "log"
    assert odd["EdgeResponseBytes"] == 1 << 70
    assert len(fresh.records[FIREWALL_EVENTS]) == 1


@both_ways
async def test_a_period_goes_to_a_real_store_once_sealed_and_its_file_then(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path / "journal")
    with SegmentedLogStore(tmp_path / "store") as store:
        intake = JournalIntake({journal.directory: store})
        log = RequestLog(journal, flush_interval=0.01, seal_interval=0.3)
        log.emit(_answers(5))
        await _until(lambda: _open_file(journal.directory, 0).exists())  # journalled
        assert intake.take() == 0  # not sealed yet
        assert store.end_position(HTTP_REQUESTS) == 0
        await _until(lambda: sealed_periods(journal.directory) == [0])
        assert intake.take() == 5  # appended, written by the store ...
        assert store.end_position(HTTP_REQUESTS) == 5
        assert list(journal.directory.iterdir()) == []  # ... and then the file deleted
    log.close()


@both_ways
def test_a_damaged_chunk_ends_its_period_and_the_chunks_before_it_are_taken(tmp_path: Path) -> None:
    store = JournalledStore(tmp_path)
    log = store.log(flush_interval=3600)
    log.emit(_answers(3))
    log._journal_rows()  # one chunk ...
    store.journal.write(b"\x00 not a chunk")  # ... a damaged one ...
    log.emit(_answers(2))
    log.flush()  # ... and one after it, sealed
    assert len(store.records[HTTP_REQUESTS]) == 3
    assert os.listdir(tmp_path) == []


@both_ways
async def test_closing_seals_everything(tmp_path: Path) -> None:
    store = JournalledStore(tmp_path)
    log = store.log(flush_interval=0.01, seal_interval=3600)
    log.emit(_answers(7))
    await asyncio.sleep(0.05)
    log.emit(_answers(2))
    log.close()
    assert len(store.records[HTTP_REQUESTS]) == 9
    assert os.listdir(tmp_path) == []


@both_ways
def test_a_period_that_cannot_be_taken_is_set_aside_and_the_rest_go_on(tmp_path: Path) -> None:
    first, second = JournalledStore(tmp_path / "a"), JournalledStore(tmp_path / "b")
    emit(first.log(), ray_id="000000000000000a")
    (tmp_path / "a" / f"{1:016d}.sealed").mkdir()  # cannot be read
    emit(RequestLog(RequestJournal(tmp_path / "a")), ray_id="000000000000000b")  # period 2
    emit(second.log(), ray_id="000000000000000c")
    memory = MemoryLogStore()
    intake = JournalIntake({tmp_path / "a": memory, tmp_path / "b": memory})  # type: ignore[dict-item]
    assert intake.take() == 3
    assert intake.take() == 0  # nothing twice
    assert [record["RayID"] for record in memory.records[HTTP_REQUESTS]] == [
        "000000000000000a",
        "000000000000000b",
        "000000000000000c",
    ]
    assert os.listdir(tmp_path / "a") == [f"{1:016d}.unreadable"]


class SlowStore(MemoryLogStore):
    """Has not written what it was given until ``written`` is set."""

    written = False

    def flush(self, timeout: float | None = None) -> bool:
        return self.written


@both_ways
def test_periods_a_slow_store_has_not_written_stay_and_are_not_appended_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_intake, "FLUSH_WAIT_SECONDS", 0.0)
    store = SlowStore()
    journalled = JournalledStore(tmp_path, store=store)
    emit(journalled.log())
    intake = journalled.intake
    assert intake.take() == 1
    assert sealed_periods(tmp_path) == [0]  # kept until the store has written it
    emit(journalled.log())
    assert intake.take() == 0  # the store is behind: nothing more for it, and nothing again
    store.written = True
    assert intake.take() == 1  # period 0's file deleted first, then period 1 taken
    assert sealed_periods(tmp_path) == []
    assert intake.take() == 0
    assert len(store.records[HTTP_REQUESTS]) == 2


@both_ways
def test_the_backlog_bound_counts_what_an_earlier_process_left(tmp_path: Path) -> None:
    earlier = RequestJournal(tmp_path)
    for period in range(3):
        earlier.write(bytes([period]) * 92)  # 100 bytes with the frame
        earlier.seal()
    earlier.close()
    later = RequestJournal(tmp_path, max_backlog_bytes=250)
    later.write(b"x" * 92)
    later.seal()
    later.flush()
    assert sealed_periods(tmp_path) == [2, 3]
    later.close()


class _RefusingRowsOnce(MemoryLogStore):
    """Takes batches, and refuses the first records appended one by one (the rows kept whole)."""

    def __init__(self) -> None:
        super().__init__()
        self.refusals = 1

    def append_rows(self, dataset: str, rows: list[dict[str, Any]]) -> None:
        if self.refusals:
            self.refusals -= 1
            raise LogStoreFullError("full")
        super().append_rows(dataset, rows)


@both_ways
def test_a_period_the_store_took_in_part_goes_on_from_the_part_it_refused(tmp_path: Path) -> None:
    """A period whose batch the store took and whose rows kept whole it refused: the next take appends those rows,
    not the batch again."""
    store = _RefusingRowsOnce()
    journalled = JournalledStore(tmp_path, store=store)
    log = journalled.log()
    request, response, _sent_bytes, written_ns = _answers(1)[0]
    log.emit([*_answers(3), (request, response, 1 << 70, written_ns)])  # three rows in the batch, one kept whole
    intake = journalled.intake
    assert intake.take() == 3  # the batch; the rows kept whole refused
    assert sealed_periods(tmp_path) == [0]
    assert intake.take() == 1  # the rows kept whole, and only they
    assert sealed_periods(tmp_path) == []
    assert len(store.records[HTTP_REQUESTS]) == 4
    assert store.batches[HTTP_REQUESTS] == 1
