"""A journal left by an earlier release is taken after an upgrade (the delivery process takes whatever sealed periods
it finds), so the journal's format is read by later releases: ``data/period-format-4.sealed`` is a period of the
journal's format 4 as the edge wrote it (six requests, one with a firewall match and one with a size no 64-bit column
holds, both kept whole), and ``data/period-format-4.json`` its records as this release takes them into the log
store."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from edgeplane.logs.journal_intake import JournalIntake
from edgeplane.logs.log_store import SegmentedLogStore
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
