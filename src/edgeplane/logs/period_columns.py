"""A sealed request-journal period's records in columns: what the intake publishes to the log bus, and what a log
store gives its readers from a period it holds as a segment (``LogStore.adopt_period``).

The period's frames (``request_journal.read_period``) are read into ``RequestRows`` and become record batches, per
dataset in the order they are stored: its ``http_requests`` records (its rows, ``RequestRows.batch``, or when a text
Arrow refuses, the same rows as dictionaries in columns with ``batch_of_any_rows``; and its rows kept whole, a
firewall match or a number beyond 64 bits, in columns too, loose where they do not fit the schema), then its
``firewall_events`` records. The conversion is a function of the file's bytes alone, so converting a period again
gives the same records in the same order: a store that dropped a period's columns from memory reads them anew.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import structlog

from edgeplane.logs.record_columns import batch_of_any_rows
from edgeplane.logs.request_journal import read_period
from edgeplane.logs.request_rows import HTTP_REQUESTS, RequestRows
from edgeplane.waf.events import FIREWALL_EVENTS

log = structlog.get_logger(__name__)

_UNCONVERTED = (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError)

PeriodParts = list[tuple[str, list[pa.RecordBatch]]]


def period_columns(path: Path) -> PeriodParts:
    """The records of the sealed period at ``path`` in columns, as ``(dataset, batches)``: ``http_requests``, then
    ``firewall_events`` (either may hold no batch). A frame that cannot be read ends the period with a warning (the
    frames before it are kept). Raises ``FileNotFoundError`` when the file is gone, and ``ValueError``, ``IndexError``
    or ``TypeError`` for a period that cannot be converted at all."""
    rows = RequestRows()
    for kind, payload in read_period(path):
        try:
            rows.add_frame(kind, payload)
        except ValueError as error:  # the rest of the period is skipped
            log.warning("request journal frame unreadable", path=str(path), error=str(error))
            break
    requests: list[pa.RecordBatch] = []
    try:
        batch = rows.batch()
    except _UNCONVERTED:
        records = rows.records()
        batch = batch_of_any_rows(HTTP_REQUESTS, records) if records else None
    if batch is not None:
        requests.append(batch)
    if rows.whole_records:
        requests.append(batch_of_any_rows(HTTP_REQUESTS, rows.whole_records))
    events = [batch_of_any_rows(FIREWALL_EVENTS, rows.events)] if rows.events else []
    return [(HTTP_REQUESTS, requests), (FIREWALL_EVENTS, events)]
