"""The intake of the edge's records, the one durable hop between the request journal and the log store: each sealed
period of an edge worker's journal (``edgeplane.logs.request_journal``, the pipeline's buffer) is turned into columns
and committed to that worker's log store, and then deleted (in the delivery process, the stores' one writer).

A period (its frames, or the chunks of a period of the earlier format, read into ``RequestRows``) becomes record
batches, committed with ``LogStore.commit_columns`` (written, ``fsync``ed, then readable) in two parts: its
``http_requests`` records (its rows, ``RequestRows.batch``, or when a text Arrow refuses, the same rows as dictionaries
in columns with ``batch_of_any_rows``; and its rows kept whole, a firewall match or a number beyond 64 bits, in columns
too, loose where they do not fit the schema), then its ``firewall_events`` records. Once both are durable in the store,
the period's file is deleted: at every moment each accepted record is durable in the journal or in the store, and no
thread or buffer copies it in between. A commit the disk refuses (``OSError``: full, failing) leaves the file in place,
and a later ``ingest`` goes on from the part that failed (the parts committed are not committed again unless the
delivery process restarts in between); the journal of that worker is not taken further meanwhile, so records keep their
order. A frame that cannot be read (a damaged file) ends its period with a warning, and the frames before it are taken
(a frame a kill cut short was never committed: the journal's reader stops before it); a period that cannot be converted
at all is quarantined as ``<period>.unreadable`` with an error in the log, and the others go on. Only the edge worker's
bound on an untaken backlog (``logs.retention_bytes``) ever drops journalled records.

The intake commits to any ``ColumnSink``: a worker's ``SegmentedLogStore`` on one machine, or the log bus
(``bus_publisher.BusPublisher``, NATS JetStream) when edge and delivery run on different nodes. Given a ``node_id``,
each part is committed under an idempotency key, ``{node id}/{worker}/{period}.{seal}/{part}`` (the worker's journal
directory without ``.journal``, the period's number and the time its file was sealed, ``sealed_identity``, and the
part's number): a crash between a commit and the period's delete commits the period again under the same keys, which
the bus recognises and does not store twice. A bus that does not acknowledge (``BusUnavailable``, an ``OSError``) is
a refusal like a failing disk: the period stays, and a later ``ingest`` commits it again.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, Protocol

import pyarrow as pa
import structlog
from prometheus_client import Counter

from edgeplane.config import NODE_NAME_PATTERN
from edgeplane.logs.log_store import LogStoreError
from edgeplane.logs.record_columns import batch_of_any_rows
from edgeplane.logs.request_journal import delete_sealed, quarantine, read_sealed, sealed_identity, sealed_periods
from edgeplane.logs.request_rows import HTTP_REQUESTS, RequestRows
from edgeplane.waf.events import FIREWALL_EVENTS

log = structlog.get_logger(__name__)

_UNCONVERTED = (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError)

RECORDS_REFUSED = Counter(
    "edgeplane_log_records_refused_total",
    "Log records the log store or the bus could not commit (a failing disk, an unreachable bus), counted at each "
    "try; they stay in the journal.",
    ["dataset"],
)
RECORDS_EMITTED = Counter(
    "edgeplane_log_records_emitted_total", "Log records committed to the log store or the log bus.", ["dataset"]
)

_NODE_ID: Final = re.compile(NODE_NAME_PATTERN)  # a node's name, as the settings take it: a part of a key


class ColumnSink(Protocol):
    """Where the intake commits a period's records: a log store (``SegmentedLogStore``, which has no use for the
    key) or the log bus (``bus_publisher.BusPublisher``, which needs it). Durable, or acknowledged, when
    ``commit_columns`` returns; an ``OSError`` (or ``LogStoreError``) when not."""

    def commit_columns(self, dataset: str, batches: Sequence[pa.RecordBatch], key: str | None = None) -> None: ...


class JournalIntake:
    """Takes sealed journal periods into column sinks: ``stores`` maps each journal directory to the sink its rows
    go to. With ``node_id`` (the name of this node, unique among the nodes that commit to one log bus), each commit
    carries an idempotency key (see the module docstring); without it, commits carry none, as a log store needs."""

    def __init__(self, stores: Mapping[Path, ColumnSink], *, node_id: str | None = None) -> None:
        """Raises ``ValueError`` for a ``node_id`` that is not 1 to 64 printable ASCII characters without spaces or
        ``/``."""
        if node_id is not None and not _NODE_ID.fullmatch(node_id):
            raise ValueError(f"a node id is 1 to 64 printable ASCII characters without spaces or '/', not {node_id!r}")
        self.stores = dict(stores)
        self.node_id = node_id
        self._counters = {
            dataset: (RECORDS_EMITTED.labels(dataset), RECORDS_REFUSED.labels(dataset))
            for dataset in (HTTP_REQUESTS, FIREWALL_EVENTS)
        }
        # How many parts of a period the store committed before one failed: the next ingest goes on from there.
        self._parts_taken: dict[tuple[Path, int], int] = {}

    def ingest(self) -> int:
        """Commits every sealed period's records to its store, oldest first, and deletes the periods' files; returns
        how many records that was. Blocks on the disk (a ``fsync`` per part of a period): an asyncio caller runs it
        in a thread."""
        count = 0
        for directory, store in self.stores.items():
            for period in sealed_periods(directory):
                try:
                    parts = period_columns(directory, period)
                    key = self._key(directory, period)
                except (ValueError, IndexError, TypeError, OSError) as error:
                    self._parts_taken.pop((directory, period), None)
                    _quarantine(directory, period, error)
                    continue
                committed, whole = self._commit(store, directory, period, parts, key)
                count += committed
                if not whole:
                    break  # the disk failed: the rest of this period, and the next, wait for the next look
                self._parts_taken.pop((directory, period), None)
                _delete(directory, period)
        return count

    def _key(self, directory: Path, period: int) -> str | None:
        """The start of the keys of a period's commits (``/{part}`` follows), or None without a node id."""
        if self.node_id is None:
            return None
        worker = directory.name.removesuffix(".journal")
        return f"{self.node_id}/{worker}/{period}.{sealed_identity(directory, period)}"

    def _commit(
        self,
        store: ColumnSink,
        directory: Path,
        period: int,
        parts: list[tuple[str, list[pa.RecordBatch]]],
        commit_key: str | None,
    ) -> tuple[int, bool]:
        """Commits a period's parts the sink has not committed yet (each under ``{commit_key}/{part}`` when there
        is a key): how many records that was, and whether every part is now committed (when one fails, the next ingest
        goes on from that part)."""
        key = (directory, period)
        count = 0
        for part, (dataset, batches) in enumerate(parts):
            records = sum(batch.num_rows for batch in batches)
            if part < self._parts_taken.get(key, 0) or not records:
                continue  # committed by an earlier ingest, before a later part failed; or nothing to commit
            emitted, refused = self._counters[dataset]
            try:
                if commit_key is None:
                    store.commit_columns(dataset, batches)
                else:
                    store.commit_columns(dataset, batches, f"{commit_key}/{part}")
            except (OSError, LogStoreError) as error:
                refused.inc(records)
                log.warning("log store did not commit the request journal's records", dataset=dataset, error=str(error))
                return count, False
            emitted.inc(records)
            count += records
            self._parts_taken[key] = part + 1
        return count, True


def period_columns(directory: Path, period: int) -> list[tuple[str, list[pa.RecordBatch]]]:
    """A sealed period's records in columns, in the order they are committed: its ``http_requests`` records (its
    rows, then its rows kept whole), its firewall events."""
    rows = RequestRows()
    for kind, payload in read_sealed(directory, period):
        try:
            rows.add_frame(kind, payload)
        except ValueError as error:  # the rest of the period is skipped
            reason = str(error)
            log.warning("request journal frame unreadable", directory=str(directory), period=period, error=reason)
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


def _delete(directory: Path, period: int) -> None:
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
