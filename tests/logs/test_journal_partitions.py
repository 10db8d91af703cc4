"""The delivery process writes every partition that has a journal: also of an edge worker that no longer runs (after
``edge_workers`` was lowered), whose unsealed journal it seals first, since no one else will."""

from __future__ import annotations

from pathlib import Path

from edgeplane.config import Settings
from edgeplane.edge.request_log import RequestLog
from edgeplane.logs.delivery_process import ingest_journals, open_partition_stores
from edgeplane.logs.log_store import SegmentedLogStore
from edgeplane.logs.partitions import journal_directory, journal_workers, partition_directory
from edgeplane.logs.request_journal import RequestJournal
from edgeplane.logs.request_rows import HTTP_REQUESTS
from tests.edge.test_request_log import emit


def test_a_journal_left_by_a_worker_that_no_longer_runs_is_sealed_and_taken(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    for worker in (0, 2):  # worker 2 ran before edge_workers went down to 1; it died with rows journalled
        journal = RequestJournal(journal_directory(tmp_path, worker))
        log = RequestLog(journal, seal_interval=3600)
        emit(log, ray_id=f"{worker:016x}")  # outside a loop: journalled and sealed at once
        emit(RequestLog(journal), ray_id=f"{worker + 10:016x}")
        journal.close()
    (journal_directory(tmp_path, 2) / f"{9:016d}.journal").write_bytes(b"")  # an unsealed leftover, empty
    assert journal_workers(tmp_path) == [0, 2]
    stores = open_partition_stores(settings, workers=1)
    assert sorted(stores) == [0, 2]
    assert not (journal_directory(tmp_path, 2) / f"{9:016d}.journal").exists()  # sealed
    for store in stores.values():
        store.close()
    assert ingest_journals(settings, workers=1) == 4
    for worker in (0, 2):
        store = SegmentedLogStore(partition_directory(tmp_path, worker), writable=False)
        assert store.end_position(HTTP_REQUESTS) == 2
        assert list(journal_directory(tmp_path, worker).iterdir()) == []
