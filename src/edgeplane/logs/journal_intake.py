"""The intake of the edge's records: the sealed periods of the edge workers' request journals, appended to their log
stores (in the delivery process, the stores' one writer). Each sealed period (``edgeplane.logs.request_journal``: its
frames, or the chunks of a period of the earlier format, read into ``RequestRows``) becomes one Arrow record batch of
``http_requests`` rows (``RequestRows.batch``), appended to the store of the worker that journalled it; rows no batch
can hold (a text Arrow refuses) and the rows kept whole (a firewall match) go to the store as dictionaries, which it
keeps in columns too (loose ones for what does not fit the schema); ``firewall_events`` records as a batch of their own.
Once the store has written a period's records (``flush``), the period's file is deleted. A store that refuses (its disk
fell behind) leaves the file in place, and a later ``ingest`` tries again, from the part it refused (a period goes in up
to three parts: its batch, its rows kept whole, its firewall events; those the store took are not appended again); a
store that has not written them within ``FLUSH_WAIT_SECONDS`` keeps the files too, and its journal is not taken further
until it has (so nothing is appended twice). A frame that cannot be read (a damaged file) ends its period with a
warning, and the frames before it are taken (a frame a kill cut short was never committed: the journal's reader stops
before it); a period that cannot be converted at all is quarantined as ``<period>.unreadable`` with an error in the log,
and the others go on. Only the edge worker's bound on an untaken backlog (``logs.retention_bytes``) ever drops
journalled records.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import structlog
from prometheus_client import Counter

from edgeplane.logs.log_store import LogStore, LogStoreError
from edgeplane.logs.record_columns import batch_of_rows
from edgeplane.logs.request_journal import delete_sealed, quarantine, read_sealed, sealed_periods
from edgeplane.logs.request_rows import HTTP_REQUESTS, RequestRows
from edgeplane.waf.events import FIREWALL_EVENTS

log = structlog.get_logger(__name__)

_UNCONVERTED = (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError)

RECORDS_REFUSED = Counter(
    "edgeplane_log_records_refused_total",
    "Log records the log store refused (its disk fell behind), counted at each try; they stay in the journal.",
    ["dataset"],
)
RECORDS_EMITTED = Counter("edgeplane_log_records_emitted_total", "Log records appended to the log store.", ["dataset"])


FLUSH_WAIT_SECONDS = 10.0  # how long an ingest waits for a store to write what it appended


class StoreRefused(Exception):
    """The store refused a period's records; its file stays for a later ``ingest``."""


class JournalIntake:
    """Takes sealed journal periods into log stores: ``stores`` maps each journal directory to the store its rows
    go to."""

    def __init__(self, stores: Mapping[Path, LogStore]) -> None:
        self.stores = dict(stores)
        self._counters = {
            dataset: (RECORDS_EMITTED.labels(dataset), RECORDS_REFUSED.labels(dataset))
            for dataset in (HTTP_REQUESTS, FIREWALL_EVENTS)
        }
        # Periods appended to a store that had not written them when the ingest ended: deleted once it has.
        self._unconfirmed: dict[Path, list[int]] = {}
        # How many parts of a period the store took before it refused one: the next ingest goes on from there.
        self._parts_taken: dict[tuple[Path, int], int] = {}

    def ingest(self) -> int:
        """Appends every sealed period's records to its store, oldest first, waits until the stores have written
        them, and deletes the periods' files; returns how many records that was. Blocks on the disk (up to
        ``FLUSH_WAIT_SECONDS`` a store): an asyncio caller runs it in a thread."""
        count = 0
        for directory, store in self.stores.items():
            waiting = self._unconfirmed.pop(directory, [])
            if waiting:
                if not store.flush(timeout=0):
                    self._unconfirmed[directory] = waiting
                    continue  # nothing more for this store until it has written what it has
                _delete(directory, waiting)
            taken: list[int] = []
            try:
                for period in sealed_periods(directory):
                    try:
                        appended, whole = self._append_period(store, directory, period)
                    except (ValueError, IndexError, TypeError, OSError) as error:
                        self._parts_taken.pop((directory, period), None)
                        _quarantine(directory, period, error)
                        continue
                    count += appended
                    if not whole:
                        break  # the store refused a part: the rest of this period, and the next, wait
                    self._parts_taken.pop((directory, period), None)
                    taken.append(period)
            finally:
                if taken:
                    if store.flush(timeout=FLUSH_WAIT_SECONDS):
                        _delete(directory, taken)
                    else:
                        log.warning("log store slow to write: the journal waits", directory=str(directory))
                        self._unconfirmed[directory] = taken
        return count

    def _append_period(self, store: LogStore, directory: Path, period: int) -> tuple[int, bool]:
        """Appends a period's parts the store has not taken yet: how many records that was, and whether the store
        took them all (when it refuses one, the next ingest goes on from that part)."""
        rows = RequestRows()
        for kind, payload in read_sealed(directory, period):
            try:
                rows.add_frame(kind, payload)
            except ValueError as error:  # the rest of the period is skipped
                reason = str(error)
                log.warning("request journal frame unreadable", directory=str(directory), period=period, error=reason)
                break
        key = (directory, period)
        count = 0
        for part, append in enumerate(self._parts(store, rows)):
            if part < self._parts_taken.get(key, 0):
                continue  # ingested by an earlier ingest, before the store refused a later part
            try:
                count += append()
            except StoreRefused:
                return count, False
            self._parts_taken[key] = part + 1
        return count, True

    def _parts(self, store: LogStore, rows: RequestRows) -> list[Callable[[], int]]:
        """The appends of a period's parts, in order: its batch (or, when no batch holds its rows, the rows as
        dictionaries), its rows kept whole, its firewall events. Each returns how many records it appended."""

        def requests() -> int:
            try:
                batch = rows.batch()
            except _UNCONVERTED:
                return self._append(store, HTTP_REQUESTS, None, rows.records)
            return self._append(store, HTTP_REQUESTS, batch, rows.records) if batch is not None else 0

        def kept_whole() -> int:
            return self._append(store, HTTP_REQUESTS, None, lambda: rows.whole_records) if rows.whole_records else 0

        def events() -> int:
            if not rows.events:
                return 0
            batch = batch_of_rows(FIREWALL_EVENTS, rows.events)
            return self._append(store, FIREWALL_EVENTS, batch, lambda: rows.events)

        return [requests, kept_whole, events]

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


def _delete(directory: Path, periods: list[int]) -> None:
    for period in periods:
        try:
            delete_sealed(directory, period)
        except OSError as error:  # taken again later: its records stored twice
            log.warning("request journal period not deleted", directory=str(directory), period=period, error=str(error))


def _quarantine(directory: Path, period: int, error: Exception) -> None:
    """Renames a period that cannot be taken to ``<period>.unreadable``, out of the intake's way."""
    log.error(
        "request journal period unreadable: quarantined",
        directory=str(directory),
        period=period,
        error=f"{error.__class__.__name__}: {error}",
    )
    with contextlib.suppress(OSError):
        quarantine(directory, period)
