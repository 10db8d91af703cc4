"""The intake of the edge's records: the sealed periods of the edge workers' request journals, appended to their log
stores (in the delivery process, the stores' one writer).

Each sealed period (``edgeplane.edge.request_journal``) becomes one Arrow record batch of ``http_requests`` rows
(``RequestRows.batch``), appended to the store of the worker that journalled it; rows no batch can hold (a text Arrow
refuses) and the rows kept whole (a firewall match) go to the store as dictionaries, which it keeps as JSON lines;
``firewall_events`` records as a batch of their own. Once the store has written a period's records (``flush`` waits
for its flusher), the period's file is deleted. A store that refuses (its disk fell behind) leaves the file in place,
and the next ``take`` tries again: nothing the journal holds is dropped. A chunk that cannot be read (a damaged file)
ends its period with a warning; the chunks before it are taken.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import structlog
from prometheus_client import Counter

from edgeplane.edge.request_journal import delete_sealed, read_sealed, sealed_periods
from edgeplane.edge.request_log import HTTP_REQUESTS
from edgeplane.edge.request_rows import Chunk, RequestRows
from edgeplane.logs.log_store import LogStore, LogStoreError
from edgeplane.logs.record_columns import batch_of_rows
from edgeplane.waf.events import FIREWALL_EVENTS

log = structlog.get_logger(__name__)

_UNCONVERTED = (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError)

RECORDS_REFUSED = Counter(
    "edgeplane_log_records_refused_total",
    "Log records the log store refused for a while (its disk fell behind); they stay in the journal and are retried.",
    ["dataset"],
)
RECORDS_EMITTED = Counter("edgeplane_log_records_emitted_total", "Log records appended to the log store.", ["dataset"])


class StoreRefused(Exception):
    """The store refused a period's records; its file stays for the next ``take``."""


class JournalIntake:
    """Takes sealed journal periods into log stores: ``stores`` maps each journal directory to the store its rows
    go to."""

    def __init__(self, stores: Mapping[Path, LogStore]) -> None:
        self.stores = dict(stores)
        self._counters = {
            dataset: (RECORDS_EMITTED.labels(dataset), RECORDS_REFUSED.labels(dataset))
            for dataset in (HTTP_REQUESTS, FIREWALL_EVENTS)
        }

    def take(self) -> int:
        """Appends every sealed period's records to its store, oldest first, waits until the stores have written
        them, and deletes the periods' files; returns how many records that was. Blocks on the disk: an asyncio
        caller runs it in a thread."""
        count = 0
        for directory, store in self.stores.items():
            taken: list[int] = []
            for period in sealed_periods(directory):
                try:
                    count += self._append_period(store, directory, period)
                except StoreRefused:
                    break
                taken.append(period)
            if taken and store.flush(timeout=None):
                for period in taken:
                    delete_sealed(directory, period)
        return count

    def _append_period(self, store: LogStore, directory: Path, period: int) -> int:
        rows = RequestRows()
        for data in read_sealed(directory, period):
            try:
                rows.extend(Chunk.decode(data))
            except ValueError as error:  # the rest of the period is skipped
                log.warning(
                    "request journal chunk unreadable", directory=str(directory), period=period, error=str(error)
                )
                break
        try:
            batch = rows.batch()
        except _UNCONVERTED:
            count = self._append(store, HTTP_REQUESTS, None, rows.records)
        else:
            count = self._append(store, HTTP_REQUESTS, batch, rows.records) if batch is not None else 0
        if rows.odd:
            count += self._append(store, HTTP_REQUESTS, None, lambda: rows.odd)
        if rows.events:
            events = rows.events
            count += self._append(store, FIREWALL_EVENTS, batch_of_rows(FIREWALL_EVENTS, events), lambda: events)
        return count

    def _append(
        self,
        store: LogStore,
        dataset: str,
        batch: pa.RecordBatch | None,
        dictionaries: Callable[[], list[dict[str, Any]]],
    ) -> int:
        """Appends ``batch``; when there is none, or the store refuses its shape, the records ``dictionaries()``
        returns. Raises ``StoreRefused`` when the store refuses them."""
        emitted, refused = self._counters[dataset]
        count = 0
        try:
            if batch is not None:
                count = batch.num_rows
                try:
                    store.append_columns(dataset, batch)
                except ValueError:
                    batch = None
            if batch is None:
                records = dictionaries()
                count = len(records)
                store.append_rows(dataset, records)
        except LogStoreError as error:
            refused.inc(count)
            log.warning("log store refused the request journal's records", dataset=dataset, error=str(error))
            raise StoreRefused from None
        emitted.inc(count)
        return count
