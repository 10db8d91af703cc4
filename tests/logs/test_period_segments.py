"""Sealed request-journal periods as the log store's segments (``SegmentedLogStore.adopt_period``): the intake hands
a period's file to the store, which links it into each dataset it has records of, and readers read the period's
columns (``period_columns``) in order with the blocks of ``.seg`` segments written before or after it. Real journals,
real stores, real files."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeplane.edge.exchange import Exchange
from edgeplane.edge.request_log import RequestLog
from edgeplane.logs import log_store
from edgeplane.logs.journal_intake import JournalIntake
from edgeplane.logs.log_store import PositionLostError, SegmentedLogStore
from edgeplane.logs.period_columns import PeriodParts, period_columns
from edgeplane.logs.record_columns import batch_of_any_rows, lines_of, rows_of
from edgeplane.logs.request_journal import RequestJournal, sealed_path, sealed_periods
from edgeplane.logs.request_rows import HTTP_REQUESTS
from edgeplane.waf.events import FIREWALL_EVENTS
from edgeplane.waf.firewall import Verdict
from tests.edge.test_request_log import probe_match
from tests.edge.test_request_log_flushes import _PLAIN, answer

HTTP = HTTP_REQUESTS
EVENTS = FIREWALL_EVENTS
DATASETS = (HTTP, EVENTS)
_BEYOND_64_BITS = 1 << 70  # a response size no 64-bit column holds: the row is kept whole, in a batch of its own


class Periods:
    """An edge worker's journal in ``directory``, sealing periods of numbered requests: request ``n`` has the RayID
    ``f"{n:016x}"``, and so has its firewall event."""

    def __init__(self, directory: Path) -> None:
        self.journal = RequestJournal(directory)
        self.log = RequestLog(self.journal, seal_interval=3600)
        self.number = 0

    @property
    def directory(self) -> Path:
        return self.journal.directory

    def seal(
        self, count: int, *, events: Sequence[int] = (), whole: Sequence[int] = ()
    ) -> tuple[Path, dict[str, list[str]]]:
        """Seals a period of ``count`` requests (those at the indexes ``events`` with a firewall match, those at
        ``whole`` with a size no 64-bit column holds); its file, and the RayIDs each dataset gets from it, in the
        order it stores them (the rows, then the rows kept whole: a match or an odd size keeps a row whole)."""
        answers = []
        rows: list[str] = []
        kept_whole: list[str] = []
        matched: list[str] = []
        for index in range(count):
            number = self.number
            self.number += 1
            request, response, sent_bytes, written_ns = answer(number, _PLAIN)
            ray_id = f"{number:016x}"
            if index in events:
                exchange = request.context
                assert isinstance(exchange, Exchange)
                exchange.verdict = Verdict(matches=(probe_match(),))
                matched.append(ray_id)
            if index in whole:
                sent_bytes = _BEYOND_64_BITS
            if index in whole or index in events:
                kept_whole.append(ray_id)
            else:
                rows.append(ray_id)
            answers.append((request, response, sent_bytes, written_ns))
        self.log.emit(answers)  # outside an event loop: sealed at once
        path = sealed_path(self.directory, self.journal.period - 1)
        assert path.exists()
        return path, {HTTP: rows + kept_whole, EVENTS: matched}


def column_rows(parts: Sequence[pa.RecordBatch]) -> list[dict[str, Any]]:
    return [row for part in parts for row in rows_of(part)]


def period_rows(parts: PeriodParts, dataset: str) -> list[dict[str, Any]]:
    return column_rows(dict(parts)[dataset])


def read_all(store: SegmentedLogStore, dataset: str, position: int = 0, **limits: Any) -> list[dict[str, Any]]:
    """Every record from ``position`` to the end, read in as many ``read_columns`` as ``limits`` allow."""
    found: list[dict[str, Any]] = []
    end = store.end_position(dataset)
    while position < end:
        batch = store.read_columns(dataset, position, **limits)
        assert batch.position == position
        assert batch.next_position > position, "a read from before the end returns at least one record"
        taken = column_rows(batch.parts)
        assert len(taken) == batch.next_position - position
        found.extend(taken)
        position = batch.next_position
    return found


def ray_ids(store: SegmentedLogStore, dataset: str, position: int = 0, **limits: Any) -> list[str]:
    return [row["RayID"] for row in read_all(store, dataset, position, **limits)]


def read_lines(store: SegmentedLogStore, dataset: str, position: int = 0) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while position < store.end_position(dataset):
        batch = store.read(dataset, position, max_records=4)
        found.extend(orjson.loads(line) for line in batch.records)
        position = batch.next_position
    return found


def commit_records(store: SegmentedLogStore, dataset: str, ray_ids: Sequence[str]) -> None:
    """Commits records of ``ray_ids`` in columns, as a store written before periods were adopted holds them."""
    rows = [{"RayID": ray_id, "ClientRequestHost": "old.example"} for ray_id in ray_ids]
    if dataset == EVENTS:
        rows = [{"RayID": ray_id, "Action": "block"} for ray_id in ray_ids]
    store.commit_columns(dataset, [batch_of_any_rows(dataset, rows)])


def links(store_directory: Path, dataset: str) -> list[Path]:
    return sorted((store_directory / dataset).glob(f"*{log_store.PERIOD_SUFFIX}"))


@pytest.fixture
def periods(tmp_path: Path) -> Periods:
    return Periods(tmp_path / "edge-0.journal")


# -- 1. the intake's periods, read ------------------------------------------------------------------------------


def test_ingested_periods_read_as_their_columns_and_positions_continue(tmp_path: Path, periods: Periods) -> None:
    store_directory = tmp_path / "store"
    first, first_ids = periods.seal(5, events=[1, 3], whole=[2])
    first_parts = period_columns(first)
    with SegmentedLogStore(store_directory) as store:
        intake = JournalIntake({periods.directory: store})
        assert intake.ingest() == 5 + 2
        assert sealed_periods(periods.directory) == []
        assert (store.end_position(HTTP), store.end_position(EVENTS)) == (5, 2)
        for dataset in DATASETS:
            assert column_rows(store.read_columns(dataset, 0).parts) == period_rows(first_parts, dataset)
            assert [row["RayID"] for row in period_rows(first_parts, dataset)] == first_ids[dataset]

        second, second_ids = periods.seal(3, events=[0])
        second_parts = period_columns(second)
        assert intake.ingest() == 3 + 1
        assert (store.end_position(HTTP), store.end_position(EVENTS)) == (8, 3)
        assert (store.oldest_position(HTTP), store.oldest_position(EVENTS)) == (0, 0)
        for dataset, start in ((HTTP, 5), (EVENTS, 2)):
            batch = store.read_columns(dataset, start)
            assert (batch.position, batch.next_position) == (start, store.end_position(dataset))
            assert column_rows(batch.parts) == period_rows(second_parts, dataset)
        expected = {
            dataset: period_rows(first_parts, dataset) + period_rows(second_parts, dataset) for dataset in DATASETS
        }
        assert ray_ids(store, HTTP) == first_ids[HTTP] + second_ids[HTTP]
        assert ray_ids(store, EVENTS) == first_ids[EVENTS] + second_ids[EVENTS]

        with SegmentedLogStore(store_directory, writable=False) as reader:  # beside the writer: converts the files
            for dataset in DATASETS:
                assert read_all(reader, dataset) == expected[dataset]
                assert read_all(reader, dataset, 1, max_records=2) == expected[dataset][1:]
                assert reader.end_position(dataset) == store.end_position(dataset)

        for dataset in DATASETS:  # as JSON lines: the same records
            lines = [
                orjson.loads(line)
                for part in (*dict(first_parts)[dataset], *dict(second_parts)[dataset])
                for line in lines_of(part)
            ]
            assert read_lines(store, dataset) == lines
            assert [line["RayID"] for line in lines] == [row["RayID"] for row in expected[dataset]]
    with SegmentedLogStore(store_directory, writable=False) as reader:  # and once the writer is gone
        for dataset in DATASETS:
            assert read_all(reader, dataset) == expected[dataset]
            assert [orjson.loads(line) for line in reader.read(dataset, 0).records] == read_lines(reader, dataset)


# -- 2. the journal's file is the segment ------------------------------------------------------------------------


def test_the_store_holds_the_journals_file_itself_in_each_dataset(tmp_path: Path, periods: Periods) -> None:
    store_directory = tmp_path / "store"
    matched, _ = periods.seal(4, events=[0, 2])
    plain, _ = periods.seal(2)
    written = {path: (path.stat().st_ino, path.read_bytes()) for path in (matched, plain)}
    with SegmentedLogStore(store_directory) as store:
        assert JournalIntake({periods.directory: store}).ingest() == 4 + 2 + 2
    first_http, second_http = links(store_directory, HTTP)
    (first_events,) = links(store_directory, EVENTS)  # the second period has no firewall event
    assert (first_http.name, second_http.name) == (f"{0:020d}-4.period", f"{4:020d}-2.period")
    assert first_events.name == f"{0:020d}-2.period"
    inode, content = written[matched]
    for link in (first_http, first_events):
        status = link.stat()
        assert status.st_ino == inode  # not rewritten: one file, named in both datasets
        assert status.st_nlink == 2  # the journal's name is gone
        assert link.read_bytes() == content
    assert second_http.stat().st_ino == written[plain][0]
    assert second_http.stat().st_nlink == 1
    # the empty segments each dataset started with gave way to the periods
    assert sorted(path.name for path in (store_directory / EVENTS).glob("*.seg")) == []
    assert sorted(path.name for path in (store_directory / HTTP).glob("*.seg")) == []


# -- 3. a store written before the upgrade ----------------------------------------------------------------------


def test_a_store_of_segments_continues_with_periods_and_segments_after_them(tmp_path: Path, periods: Periods) -> None:
    store_directory = tmp_path / "store"
    with SegmentedLogStore(store_directory) as store:  # as the release before wrote it
        commit_records(store, HTTP, ["c0", "c1", "c2"])
        commit_records(store, EVENTS, ["e0"])
        store.append_rows(HTTP, [{"RayID": "a3"}, {"RayID": "a4"}])
    expected: dict[str, list[str]] = {HTTP: ["c0", "c1", "c2", "a3", "a4"], EVENTS: ["e0"]}
    with SegmentedLogStore(store_directory) as store:
        assert (store.end_position(HTTP), store.end_position(EVENTS)) == (5, 1)
        intake = JournalIntake({periods.directory: store})
        for count, events in ((3, [1]), (2, []), (4, [0, 3])):
            _path, ids = periods.seal(count, events=events)
            assert intake.ingest() == count + len(events)
            for dataset in DATASETS:
                expected[dataset] += ids[dataset]
        assert (store.end_position(HTTP), store.end_position(EVENTS)) == (14, 4)
        assert links(store_directory, HTTP)[0].name == f"{5:020d}-3.period"  # after the segment's records
        for dataset in DATASETS:
            for max_records in (1, 2, 3, 100):  # across the boundary, in every cut
                assert ray_ids(store, dataset, max_records=max_records) == expected[dataset]
            for position in range(len(expected[dataset])):
                assert ray_ids(store, dataset, position, max_records=2) == expected[dataset][position:]

        commit_records(store, HTTP, ["c14", "c15"])  # after a period: the writer starts a segment at the stream's end
        commit_records(store, EVENTS, ["e4"])
        store.append_rows(HTTP, [{"RayID": "a16"}])
        assert store.flush(timeout=10)
        expected[HTTP] += ["c14", "c15", "a16"]
        expected[EVENTS] += ["e4"]
        assert (store_directory / HTTP / f"{14:020d}.seg").exists()
        assert ray_ids(store, HTTP, 12) == expected[HTTP][12:]
    with SegmentedLogStore(store_directory) as store:  # reopened writable: recovers the segment after the periods
        for dataset in DATASETS:
            assert ray_ids(store, dataset) == expected[dataset]
        _path, ids = periods.seal(1, events=[0])
        assert JournalIntake({periods.directory: store}).ingest() == 2
        expected[HTTP] += ids[HTTP]
        expected[EVENTS] += ids[EVENTS]
        assert links(store_directory, HTTP)[-1].name == f"{17:020d}-1.period"
    with SegmentedLogStore(store_directory, writable=False) as reader:
        for dataset in DATASETS:
            assert ray_ids(reader, dataset) == expected[dataset]
            assert ray_ids(reader, dataset, max_records=1) == expected[dataset]
    with SegmentedLogStore(store_directory) as store:  # a period last: the next commit starts a segment after it
        commit_records(store, HTTP, ["c18"])
        assert ray_ids(store, HTTP, 16) == [*expected[HTTP][16:], "c18"]


# -- 4. a crash between the adoption and the journal's delete -------------------------------------------------------


def test_a_period_adopted_again_is_not_taken_twice(tmp_path: Path, periods: Periods) -> None:
    store_directory = tmp_path / "store"
    path, ids = periods.seal(3, events=[1])
    parts = period_columns(path)
    with SegmentedLogStore(store_directory) as store:
        assert store.adopt_period(path, parts) == {HTTP: 3, EVENTS: 1}
        assert store.adopt_period(path, parts) == {HTTP: 0, EVENTS: 0}  # the intake died before the delete
        assert (store.end_position(HTTP), store.end_position(EVENTS)) == (3, 1)
    with SegmentedLogStore(store_directory) as store:  # the delivery process restarted
        assert JournalIntake({periods.directory: store}).ingest() == 0
        assert sealed_periods(periods.directory) == []  # and now the journal lets go of it
        held = links(store_directory, HTTP)[0]
        os.link(held, path)  # the journal's name back, as a crash before its delete would have left it
        assert JournalIntake({periods.directory: store}).ingest() == 0
        assert sealed_periods(periods.directory) == []
        for dataset in DATASETS:
            assert ray_ids(store, dataset) == ids[dataset]
        assert len(links(store_directory, HTTP)) == len(links(store_directory, EVENTS)) == 1


def test_a_period_taken_by_one_dataset_before_a_crash_goes_to_the_other_only(tmp_path: Path, periods: Periods) -> None:
    store_directory = tmp_path / "store"
    path, ids = periods.seal(4, events=[0, 3])
    parts = period_columns(path)
    with SegmentedLogStore(store_directory) as store:
        assert store.adopt_period(path, [(HTTP, dict(parts)[HTTP])]) == {HTTP: 4}  # died before the second link
    with SegmentedLogStore(store_directory) as store:
        assert JournalIntake({periods.directory: store}).ingest() == 2  # the events, and only them
        for dataset in DATASETS:
            assert ray_ids(store, dataset) == ids[dataset]


def test_an_empty_segment_beside_a_period_is_ignored_and_cleaned(tmp_path: Path, periods: Periods) -> None:
    store_directory = tmp_path / "store"
    with SegmentedLogStore(store_directory) as store:
        commit_records(store, HTTP, ["c0"])
        intake = JournalIntake({periods.directory: store})
        _path, first = periods.seal(2)
        _path, second = periods.seal(3)
        intake.ingest()
    expected = ["c0", *first[HTTP], *second[HTTP]]
    # what a crash between a period's link and the removal of the empty segment it replaced leaves
    for base in (1, 3):
        (store_directory / HTTP / f"{base:020d}.seg").touch()
    # and what a crash in the middle of copying a period (where the file system links none) leaves
    (store_directory / HTTP / f".{6:020d}-2.period.copying").write_bytes(b"half a period")
    with SegmentedLogStore(store_directory, writable=False) as reader:
        assert ray_ids(reader, HTTP) == expected
        assert reader.end_position(HTTP) == 6
    with SegmentedLogStore(store_directory) as store:
        assert ray_ids(store, HTTP) == expected
        assert sorted(path.name for path in (store_directory / HTTP).glob("*.seg")) == [f"{0:020d}.seg"]
        assert list((store_directory / HTTP).glob(".*")) == []
        _path, third = periods.seal(1)
        assert JournalIntake({periods.directory: store}).ingest() == 1
        assert ray_ids(store, HTTP) == expected + third[HTTP]


def test_an_empty_segment_after_a_period_gives_way_to_the_next_period(tmp_path: Path, periods: Periods) -> None:
    store_directory = tmp_path / "store"
    with SegmentedLogStore(store_directory) as store:
        _path, first = periods.seal(2)
        JournalIntake({periods.directory: store}).ingest()
    (store_directory / HTTP / f"{2:020d}.seg").touch()  # a roll that created the next segment, then nothing
    with SegmentedLogStore(store_directory) as store:
        assert store.end_position(HTTP) == 2
        _path, second = periods.seal(2)
        assert JournalIntake({periods.directory: store}).ingest() == 2
        assert not (store_directory / HTTP / f"{2:020d}.seg").exists()
        assert [path.name for path in links(store_directory, HTTP)] == [f"{0:020d}-2.period", f"{2:020d}-2.period"]
        assert ray_ids(store, HTTP) == first[HTTP] + second[HTTP]


# -- 5. retention ------------------------------------------------------------------------------------------------


def test_retention_by_size_deletes_periods_in_each_dataset(tmp_path: Path, periods: Periods) -> None:
    store_directory = tmp_path / "store"
    ids: dict[str, list[str]] = {HTTP: [], EVENTS: []}
    with SegmentedLogStore(store_directory, retention_bytes=1) as store:
        intake = JournalIntake({periods.directory: store})
        for count in (3, 2, 4):
            _path, each = periods.seal(count, events=[0])
            intake.ingest()
            for dataset in DATASETS:
                ids[dataset] += each[dataset]
        oldest = links(store_directory, HTTP)[0]
        descriptor = os.open(oldest, os.O_RDONLY)
    try:  # closed: synced, and retention looked
        assert os.fstat(descriptor).st_nlink == 0  # gone from both datasets: the file is no more
    finally:
        os.close(descriptor)
    with SegmentedLogStore(store_directory, writable=False) as reader:
        assert (reader.oldest_position(HTTP), reader.oldest_position(EVENTS)) == (5, 2)  # the newest is kept
        for dataset, oldest_position in ((HTTP, 5), (EVENTS, 2)):
            with pytest.raises(PositionLostError) as lost:
                reader.read_columns(dataset, 0)
            assert (lost.value.oldest_position, lost.value.lost) == (oldest_position, oldest_position)
            with pytest.raises(PositionLostError):
                reader.read(dataset, oldest_position - 1)
            assert ray_ids(reader, dataset, oldest_position) == ids[dataset][oldest_position:]
    with SegmentedLogStore(store_directory) as store:
        with pytest.raises(PositionLostError) as lost:
            store.read_columns(HTTP, 1)
        assert lost.value.oldest_position == 5


def test_retention_by_cursors_drops_a_periods_links_one_dataset_at_a_time(tmp_path: Path, periods: Periods) -> None:
    store_directory = tmp_path / "store"
    with SegmentedLogStore(store_directory) as store:
        intake = JournalIntake({periods.directory: store})
        _first, first = periods.seal(2, events=[1])
        _second, second = periods.seal(3, events=[0, 2])
        intake.ingest()
        (first_link,) = [path for path in links(store_directory, HTTP) if path.name.startswith(f"{0:020d}")]
        descriptor = os.open(first_link, os.O_RDONLY)
        assert os.fstat(descriptor).st_nlink == 2
        store.save_cursor(HTTP, 1, 2)  # past the first period
        store.save_cursor(EVENTS, 1, 0)  # not
    try:
        assert os.fstat(descriptor).st_nlink == 1  # the events still hold the file
        assert [path.name for path in links(store_directory, HTTP)] == [f"{2:020d}-3.period"]
        assert len(links(store_directory, EVENTS)) == 2
        with SegmentedLogStore(store_directory) as store:
            with pytest.raises(PositionLostError) as lost:
                store.read_columns(HTTP, 0)
            assert lost.value.oldest_position == 2
            assert ray_ids(store, HTTP, 2) == second[HTTP]
            assert ray_ids(store, EVENTS) == first[EVENTS] + second[EVENTS]
            store.save_cursor(EVENTS, 1, 1)
        assert os.fstat(descriptor).st_nlink == 0  # no dataset holds it any more
        assert len(links(store_directory, EVENTS)) == 1
    finally:
        os.close(descriptor)


# -- 6. byte bounds, projections and the columns kept --------------------------------------------------------------


def test_a_periods_file_size_is_shared_among_its_records_in_a_reads_byte_bound(
    tmp_path: Path, periods: Periods
) -> None:
    store_directory = tmp_path / "store"
    path, ids = periods.seal(10)
    size = path.stat().st_size
    share = size / 10
    with SegmentedLogStore(store_directory) as store:
        JournalIntake({periods.directory: store}).ingest()
        for records in (1, 3, 7):
            batch = store.read_columns(HTTP, 0, max_bytes=int(records * share + share / 2))
            assert batch.next_position == records
        assert store.read_columns(HTTP, 0, max_bytes=1).next_position == 1  # at least one
        assert store.read_columns(HTTP, 4, max_bytes=size).next_position == 10
        assert ray_ids(store, HTTP, max_bytes=int(2 * share)) == ids[HTTP]
        assert ray_ids(store, HTTP, 3, max_bytes=1) == ids[HTTP][3:]


def test_a_projection_reads_the_columns_asked_for_from_periods_and_segments(tmp_path: Path, periods: Periods) -> None:
    store_directory = tmp_path / "store"
    with SegmentedLogStore(store_directory) as store:
        commit_records(store, HTTP, ["c0", "c1"])
        _path, ids = periods.seal(3, whole=[1])
        JournalIntake({periods.directory: store}).ingest()
        wanted = {"RayID", "EdgeResponseBytes"}
        batch = store.read_columns(HTTP, 0, columns=wanted)
        assert batch.next_position == 5
        for part in batch.parts:
            assert set(part.schema.names) <= wanted
        assert [row["RayID"] for row in column_rows(batch.parts)] == ["c0", "c1", *ids[HTTP]]
        sizes = [row.get("EdgeResponseBytes") for row in column_rows(batch.parts)]
        assert sizes[-1] == 1 << 70  # the row kept whole, in its loose column
        assert sizes[2:4] == [100, 102]
        with SegmentedLogStore(store_directory, writable=False) as reader:
            again = reader.read_columns(HTTP, 3, columns=["RayID"])
            assert [part.schema.names for part in again.parts] == [["RayID"]] * len(again.parts)
            assert [row["RayID"] for row in column_rows(again.parts)] == ids[HTTP][1:]


def test_periods_beyond_the_columns_kept_are_converted_again_alike(
    tmp_path: Path, periods: Periods, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_directory = tmp_path / "store"
    conversions: list[Path] = []

    def counted(path: Path) -> PeriodParts:
        conversions.append(path)
        return period_columns(path)

    monkeypatch.setattr(log_store, "period_columns", counted)
    with SegmentedLogStore(store_directory) as store:
        intake = JournalIntake({periods.directory: store})
        for count in (3, 4, 2):
            periods.seal(count, events=[0], whole=[1])
            intake.ingest()
        kept = {dataset: read_all(store, dataset, max_records=2) for dataset in DATASETS}
        assert conversions == []  # the columns the intake gave: no period read again
    monkeypatch.setattr(log_store, "_PERIOD_CACHE_BYTES", 1)  # one period's columns at a time
    with SegmentedLogStore(store_directory) as store:
        for _round in range(2):
            for dataset in DATASETS:
                assert read_all(store, dataset, max_records=2) == kept[dataset]
                assert read_all(store, dataset, 4) == kept[dataset][4:]
        assert len(conversions) > 2 * len(set(conversions))  # dropped and converted again
        _path, more = periods.seal(2)
        JournalIntake({periods.directory: store}).ingest()
        assert ray_ids(store, HTTP, 9) == more[HTTP]


# -- 7. where the file system links none ---------------------------------------------------------------------------


@pytest.mark.parametrize("refusal", [errno.EXDEV, errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK])
def test_a_period_that_cannot_be_linked_is_copied_synced_first(
    tmp_path: Path, periods: Periods, monkeypatch: pytest.MonkeyPatch, refusal: int
) -> None:
    store_directory = tmp_path / "store"
    path, ids = periods.seal(3, events=[2])
    original = path.read_bytes()
    synced: set[int] = set()
    real_fsync = os.fsync

    def no_link(source: Any, target: Any, **options: Any) -> None:
        raise OSError(refusal, os.strerror(refusal))

    def fsync(descriptor: int) -> None:
        synced.add(os.fstat(descriptor).st_ino)
        real_fsync(descriptor)

    monkeypatch.setattr(os, "link", no_link)
    monkeypatch.setattr(os, "fsync", fsync)
    with SegmentedLogStore(store_directory) as store:
        assert JournalIntake({periods.directory: store}).ingest() == 4
        for dataset in DATASETS:
            (copy,) = links(store_directory, dataset)
            assert copy.read_bytes() == original
            assert copy.stat().st_ino in synced  # the copy's bytes synced before it had its name
            assert copy.stat().st_nlink == 1
            assert ray_ids(store, dataset) == ids[dataset]
    assert not path.exists()
    assert [name for name in os.listdir(store_directory / HTTP) if name.startswith(".")] == []
    with SegmentedLogStore(store_directory, writable=False) as reader:
        for dataset in DATASETS:
            assert ray_ids(reader, dataset) == ids[dataset]


def test_another_link_error_leaves_the_period_in_the_journal(
    tmp_path: Path, periods: Periods, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_directory = tmp_path / "store"
    _path, ids = periods.seal(2)
    with SegmentedLogStore(store_directory) as store:
        intake = JournalIntake({periods.directory: store})
        with monkeypatch.context() as patch:

            def full(source: Any, target: Any, **options: Any) -> None:
                raise OSError(errno.ENOSPC, "No space left on device")

            patch.setattr(os, "link", full)
            assert intake.ingest() == 0
            assert len(sealed_periods(periods.directory)) == 1
            assert store.end_position(HTTP) == 0
        assert intake.ingest() == 2
        assert ray_ids(store, HTTP) == ids[HTTP]


def test_a_copied_period_adopted_again_is_not_taken_twice(
    tmp_path: Path, periods: Periods, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, ids = periods.seal(3, events=[0])
    parts = period_columns(path)

    def no_link(source: Any, target: Any, **options: Any) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_link)
    with SegmentedLogStore(tmp_path / "store") as store:
        assert store.adopt_period(path, parts) == {HTTP: 3, EVENTS: 1}
        store.adopt_period(path, parts)  # the intake died before it deleted the journal's name
        assert ray_ids(store, HTTP) == ids[HTTP]
        assert ray_ids(store, EVENTS) == ids[EVENTS]


# -- 8. any sequence of operations, against a model ----------------------------------------------------------------

_adopt = st.tuples(
    st.just("adopt"),
    st.integers(1, 6),
    st.sets(st.integers(0, 5), max_size=3),  # the requests with a firewall event
    st.sets(st.integers(0, 5), max_size=1),  # a request kept whole
    st.booleans(),  # adopted again: the intake died before it deleted the period from its journal
)
_commit = st.tuples(st.just("commit"), st.sampled_from(DATASETS), st.integers(1, 5))
_append = st.tuples(st.just("append"), st.integers(1, 3))
_reopen = st.tuples(st.just("reopen"))
_read = st.tuples(
    st.just("read"), st.sampled_from(DATASETS), st.floats(0, 1), st.integers(1, 8), st.booleans(), st.booleans()
)
_operations = st.lists(st.one_of(_adopt, _commit, _append, _reopen, _read), min_size=1, max_size=14)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_operations, st.booleans())
def test_any_sequence_of_periods_and_commits_reads_as_the_model(operations: list[Any], small_cache: bool) -> None:
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as patch:
        if small_cache:
            patch.setattr(log_store, "_PERIOD_CACHE_BYTES", 1)
        _run(Path(directory), operations)


def _run(directory: Path, operations: list[Any]) -> None:
    periods = Periods(directory / "edge-0.journal")
    store_directory = directory / "store"
    model: dict[str, list[str]] = {HTTP: [], EVENTS: []}
    store = SegmentedLogStore(store_directory, flush_interval=3600, sync_interval=3600)
    committed_number = 0
    try:
        for operation in operations:
            kind = operation[0]
            if kind == "adopt":
                _, count, events, whole, again = operation
                path, ids = periods.seal(count, events=sorted(events), whole=sorted(whole))
                parts = period_columns(path)
                taken = store.adopt_period(path, parts)
                assert taken == {dataset: len(ids[dataset]) for dataset in DATASETS if ids[dataset]}
                if again:
                    assert store.adopt_period(path, parts) == dict.fromkeys(taken, 0)
                path.unlink()
                for dataset in DATASETS:
                    model[dataset] += ids[dataset]
            elif kind == "commit":
                _, dataset, count = operation
                given = [f"c{committed_number + index}" for index in range(count)]
                committed_number += count
                commit_records(store, dataset, given)
                model[dataset] += given
            elif kind == "append":
                rows = [{"RayID": f"c{committed_number + index}"} for index in range(operation[1])]
                committed_number += len(rows)
                store.append_rows(HTTP, rows)
                assert store.flush(timeout=10)
                model[HTTP] += [row["RayID"] for row in rows]
            elif kind == "reopen":
                store.close()
                store = SegmentedLogStore(store_directory, flush_interval=3600, sync_interval=3600)
            else:
                _, dataset, where, max_records, read_only, lines = operation
                expected = model[dataset]
                position = int(where * len(expected))
                reader = SegmentedLogStore(store_directory, writable=False) if read_only else store
                try:
                    assert reader.end_position(dataset) == len(expected)
                    if lines:
                        batch = reader.read(dataset, position, max_records=max_records)
                        found = [orjson.loads(line)["RayID"] for line in batch.records]
                    else:
                        columns = reader.read_columns(dataset, position, max_records=max_records)
                        found = [row["RayID"] for row in column_rows(columns.parts)]
                    assert found == expected[position : position + max_records]
                    assert ray_ids(reader, dataset, position, max_records=max_records) == expected[position:]
                finally:
                    if read_only:
                        reader.close()
        for dataset in DATASETS:
            assert ray_ids(store, dataset) == model[dataset]
    finally:
        store.close()
    with SegmentedLogStore(store_directory, writable=False) as reader:
        for dataset in DATASETS:
            assert ray_ids(reader, dataset) == model[dataset]


# -- faults found: each test says what should hold, and fails until it does ------------------------------------------


def test_a_period_whose_directory_sync_failed_is_taken_at_the_next_ingest(
    tmp_path: Path, periods: Periods, monkeypatch: pytest.MonkeyPatch
) -> None:
    _path, ids = periods.seal(2, events=[0])
    with SegmentedLogStore(tmp_path / "store", datasets=DATASETS) as store:  # the streams exist: their segments too
        intake = JournalIntake({periods.directory: store})
        with monkeypatch.context() as patch:

            def failing(path: Path) -> None:
                raise OSError(errno.EIO, "Input/output error")

            patch.setattr(log_store, "_sync_directory", failing)
            assert intake.ingest() == 0  # the disk failed: the period stays in the journal
        assert len(sealed_periods(periods.directory)) == 1
        assert intake.ingest() == 3
        for dataset in DATASETS:
            assert ray_ids(store, dataset) == ids[dataset]


def test_a_read_only_store_sees_the_same_retention_outlook_as_the_writer(tmp_path: Path, periods: Periods) -> None:
    store_directory = tmp_path / "store"
    with SegmentedLogStore(store_directory) as store:
        intake = JournalIntake({periods.directory: store})
        for count in (3, 4):
            periods.seal(count)
            intake.ingest()
        with SegmentedLogStore(store_directory, writable=False) as reader:
            for position in (0, 3, 5):
                written = store.retention_outlook(HTTP, position)
                assert written.held_bytes > 0
                assert reader.retention_outlook(HTTP, position) == written
