"""``edgeplane logs tail`` reads every edge worker's log store, and nothing beside them."""

from __future__ import annotations

from pathlib import Path

from edgeplane.logs.partitions import journal_directory, partition_directory, partitions_under


def test_the_partitions_are_the_stores_not_the_journals(tmp_path: Path) -> None:
    assert partitions_under(tmp_path) == []
    for worker in (1, 0, 10):
        partition_directory(tmp_path, worker).mkdir(parents=True)
        journal_directory(tmp_path, worker).mkdir()
    (tmp_path / "logs" / "edge-notes").mkdir()
    assert partitions_under(tmp_path) == [partition_directory(tmp_path, worker) for worker in (0, 1, 10)]
