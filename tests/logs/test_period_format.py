"""A sealed journal period is a segment of the log store for as long as retention keeps it, so the conversion of its
frames to records (``period_columns``) is part of the store's format: a later release must read a period an earlier
one adopted as the same records, in the same order, or the positions that jobs' cursors saved would point at other
records. ``data/period-format-4.sealed`` is a period of the journal's format 4 as the edge wrote it (six requests,
one with a firewall match and one with a size no 64-bit column holds, both kept whole), and
``data/period-format-4.json`` its records as this release reads them."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from edgeplane.logs.journal_intake import JournalIntake
from edgeplane.logs.log_store import SegmentedLogStore
from edgeplane.logs.period_columns import period_columns
from edgeplane.logs.record_columns import rows_of
from edgeplane.logs.request_journal import sealed_path
from edgeplane.logs.request_rows import HTTP_REQUESTS
from edgeplane.waf.events import FIREWALL_EVENTS

DATA = Path(__file__).parent / "data"

pytestmark = pytest.mark.skipif(sys.byteorder != "little", reason="a period is in the byte order of its machine")


def as_written(records: Any) -> Any:
    """Records as the JSON file holds them."""
    return json.loads(json.dumps(records, sort_keys=True, default=str))


def expected() -> dict[str, list[dict[str, Any]]]:
    return json.loads((DATA / "period-format-4.json").read_text())  # type: ignore[no-any-return]


def test_a_period_of_format_4_converts_to_the_same_records() -> None:
    converted = {
        dataset: [row for batch in batches for row in rows_of(batch)]
        for dataset, batches in period_columns(DATA / "period-format-4.sealed")
    }
    assert as_written(converted) == expected()


def test_a_period_of_format_4_reads_back_from_a_store_as_the_same_records(tmp_path: Path) -> None:
    journal = tmp_path / "edge-0.journal"
    journal.mkdir()
    shutil.copyfile(DATA / "period-format-4.sealed", sealed_path(journal, 0))
    with SegmentedLogStore(tmp_path / "store") as store:
        assert JournalIntake({journal: store}).ingest() == 7
    with SegmentedLogStore(tmp_path / "store", writable=False) as reader:
        read = {
            dataset: [row for batch in reader.read_columns(dataset, 0).parts for row in rows_of(batch)]
            for dataset in (HTTP_REQUESTS, FIREWALL_EVENTS)
        }
    assert as_written(read) == expected()
