"""The request log's write-ahead journal: what the edge answered reaches the store even when the process dies between
two conversions, and the journal's files go once the store holds their rows."""

from __future__ import annotations

import asyncio
import marshal
import struct
from array import array
from pathlib import Path
from typing import Any

import pytest

from edgeplane.edge import request_journal
from edgeplane.edge.request_journal import RequestJournal
from edgeplane.edge.request_log import HTTP_REQUESTS, RequestLog
from edgeplane.edge.request_rows import NUMBER_COLUMNS, Chunk
from edgeplane.logs.log_store import SegmentedLogStore
from edgeplane.waf.events import FIREWALL_EVENTS
from edgeplane.waf.firewall import Verdict
from tests.edge.test_request_log import emit, probe_match
from tests.edge.test_request_log_flushes import _PLAIN, answer, flushed_alone
from tests.support.memory_log_store import MemoryLogStore


async def _settle(journal: RequestJournal) -> None:
    """Closes the journal: what it was sent is written (by its thread, if a slow write started one)."""
    journal.close()
    await asyncio.sleep(0)


async def _until(check: Any, seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not within the time allowed"
        await asyncio.sleep(0.01)  # files and a store's end: nothing to wait on


def test_chunks_are_read_back_whole_and_a_cut_frame_ends_the_file(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path)
    journal.write(b"one")
    journal.write(b"two" * 100)
    journal.close()
    assert journal.periods() == [0]
    assert journal.read(0) == [b"one", b"two" * 100]
    path = tmp_path / f"{0:016d}.journal"
    data = path.read_bytes()
    path.write_bytes(data[:-1])  # the last write cut short by a crash
    assert journal.read(0) == [b"one"]
    path.write_bytes(data[:8] + b"ONE" + data[11:])  # a damaged first chunk: nothing after it is trusted
    assert journal.read(0) == []


def test_quick_writes_are_on_the_callers_thread(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path)
    journal.write(b"one")
    assert journal.read(0) == [b"one"]  # there at once: no thread between
    assert not journal.threaded
    journal.close()


def test_after_a_slow_write_the_journal_writes_on_its_own_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that took longer than ``SLOW_WRITE_SECONDS`` (the disk stalling) hands every later write and deletion
    to the journal's thread; they keep their order."""
    monkeypatch.setattr(request_journal, "SLOW_WRITE_SECONDS", -1.0)  # every write is slow
    journal = RequestJournal(tmp_path)
    journal.write(b"first")
    assert journal.threaded
    journal.write(b"second")
    journal.next_period()
    journal.write(b"third")
    journal.discard(0)
    journal.write(b"fourth")
    journal.close()
    assert not journal.threaded
    assert journal.periods() == [1]
    assert journal.read(1) == [b"third", b"fourth"]


def test_periods_go_on_from_the_files_found_and_discard_deletes_up_to_one(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path)
    journal.write(b"a")
    assert journal.next_period() == 0
    journal.write(b"b")
    journal.close()
    again = RequestJournal(tmp_path)
    assert again.periods() == [0, 1]
    assert again.period == 2  # a new process never appends to an old file
    again.write(b"c")
    again.discard(1)
    again.close()
    assert again.periods() == [2]
    assert again.read(2) == [b"c"]


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
    assert chunk.rays == ["a" * 16, "b" * 16, "c" * 16]


def _answers(count: int, **changes: Any) -> list[Any]:
    return [answer(number, {**_PLAIN, "query": b"n=%d" % (number % 3), **changes}) for number in range(count)]


async def test_rows_of_a_process_that_died_are_recovered_from_the_journal(tmp_path: Path) -> None:
    each = _answers(25)
    expected = await asyncio.to_thread(lambda: [flushed_alone(one) for one in each])  # outside a loop: one by one
    store = MemoryLogStore()
    log = RequestLog(store, journal=RequestJournal(tmp_path), flush_interval=0.01, convert_interval=3600)  # type: ignore[arg-type]
    for number, one in enumerate(each):
        log.emit([one])
        if number % 10 == 9:
            await asyncio.sleep(0.05)  # a look: the rows so far go to the journal, in several chunks
    assert log.journal is not None
    journal = log.journal
    await _until(lambda: sum(Chunk.decode(data).count for data in journal.read(0)) == 25)
    await _settle(journal)
    assert HTTP_REQUESTS not in store.records  # the period is not over: nothing in the store yet
    # The process dies here. The next one reads the journal back into its store and deletes the files.
    fresh = MemoryLogStore()
    recovering = RequestLog(fresh, journal=RequestJournal(tmp_path))  # type: ignore[arg-type]
    assert recovering.recover() == 25
    assert fresh.records[HTTP_REQUESTS] == expected
    assert RequestJournal(tmp_path).periods() == []


async def test_a_firewall_match_and_an_odd_row_are_journalled_too(tmp_path: Path) -> None:
    store = MemoryLogStore()
    log = RequestLog(store, journal=RequestJournal(tmp_path), flush_interval=0.01, convert_interval=3600)  # type: ignore[arg-type]
    emit(log, verdict=Verdict(matches=(probe_match(),)))
    request, response, _sent_bytes, written_ns = _answers(1)[0]
    log.emit([(request, response, 1 << 70, written_ns)])  # no 64-bit column holds what it sent: kept whole
    assert log.journal is not None
    journal = log.journal
    await _until(lambda: sum(len(Chunk.decode(data).odd) for data in journal.read(0)) == 2)
    await _settle(journal)
    fresh = MemoryLogStore()
    assert RequestLog(fresh, journal=RequestJournal(tmp_path)).recover() == 3  # type: ignore[arg-type]
    blocked, odd = fresh.records[HTTP_REQUESTS]
    assert blocked["SecurityAction"] == "log"
    assert odd["EdgeResponseBytes"] == 1 << 70
    assert len(fresh.records[FIREWALL_EVENTS]) == 1


async def test_the_journal_files_go_once_the_store_wrote_the_period(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path / "journal")
    with SegmentedLogStore(tmp_path / "store") as store:
        log = RequestLog(store, journal=journal, flush_interval=0.01, convert_interval=0.5)
        log.emit(_answers(5))
        await _until(lambda: journal.periods() == [0])  # journalled
        assert store.end_position(HTTP_REQUESTS) == 0  # not yet converted
        await _until(lambda: store.end_position(HTTP_REQUESTS) == 5)  # converted and written by the store
        await _until(lambda: journal.periods() == [])  # then its file deleted
    log.close()


async def test_closing_writes_everything_and_leaves_no_journal(tmp_path: Path) -> None:
    journal = RequestJournal(tmp_path / "journal")
    store = SegmentedLogStore(tmp_path / "store")
    log = RequestLog(store, journal=journal, flush_interval=0.01, convert_interval=3600)
    log.emit(_answers(7))
    await asyncio.sleep(0.05)
    log.flush()
    store.close()
    log.close()
    assert journal.periods() == []
    assert SegmentedLogStore(tmp_path / "store", writable=False).end_position(HTTP_REQUESTS) == 7
