"""The intake of the edge's records, the one durable hop between the request journal and its readers: each sealed
period of an edge worker's journal (``edgeplane.logs.request_journal``, the pipeline's buffer) becomes part of that
worker's log store as it is, or is published to the log bus, and then leaves the journal (in the delivery process,
the stores' one writer).

A period is first read into columns (``period_columns``: its ``http_requests`` records, then its
``firewall_events``). A log store (a ``PeriodSink``) then *adopts* the period's file for its ``http_requests``
records: ``fsync``ed, named in the dataset's stream, readable (``LogStore.adopt_period``); the columns only spare its
readers converting it again. No request record is written a second time: the journal's file is the store's segment.
Its firewall events, few and small, are committed in columns (``commit_columns``), so that they keep their own,
compact retention. The log bus (a ``ColumnSink``, ``bus_publisher.BusPublisher``, NATS JetStream, when edge and
delivery run on different nodes) is given every part in columns (``commit_columns``), acknowledged when the call
returns. Once every part of a period is taken, its name in the journal is deleted: at every moment each accepted
record is in the journal or taken, and no thread or buffer copies it in between. A store or bus that refuses
(``OSError``: a full or failing disk, an unreachable bus) leaves the period in the journal, and a later ``ingest``
goes on from the part that failed; after a restart, a store does not take twice the period that is already its newest
(its firewall events, committed in columns, may be stored twice if the process died after committing them), and the
bus recognises the parts it has (below); the journal of that worker is not taken further meanwhile, so records keep
their order. A frame that cannot be read (a damaged file) ends its period with a warning, and the frames before it are
taken (a frame a kill cut short was never committed: the journal's reader stops before it); a period that cannot be
converted at all is quarantined as ``<period>.unreadable`` with an error in the log, and the others go on. Only the
edge worker's bound on an untaken backlog (``logs.retention_bytes``) ever drops journalled records.

Given a ``node_id``, each part committed to the bus carries an idempotency key, ``{node id}/{worker}/{period}.{seal}/
{part}`` (the worker's journal directory without ``.journal``, the period's number and the time its file was sealed,
``sealed_identity``, and the part's number): a crash between a commit and the period's delete commits the period
again under the same keys, which the bus recognises and does not store twice.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

import pyarrow as pa
import structlog
from prometheus_client import Counter

from edgeplane.config import NODE_NAME_PATTERN
from edgeplane.logs.log_store import LogStoreError
from edgeplane.logs.period_columns import PeriodParts, period_columns
from edgeplane.logs.request_journal import delete_sealed, quarantine, sealed_identity, sealed_path, sealed_periods
from edgeplane.logs.request_rows import HTTP_REQUESTS
from edgeplane.waf.events import FIREWALL_EVENTS

log = structlog.get_logger(__name__)

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
    """Where the intake commits a period's records in columns: the log bus (``bus_publisher.BusPublisher``), which
    needs the key, or a log store. Durable, or acknowledged, when ``commit_columns`` returns; an ``OSError`` (or
    ``LogStoreError``) when not."""

    def commit_columns(self, dataset: str, batches: Sequence[pa.RecordBatch], key: str | None = None) -> None: ...


@runtime_checkable
class PeriodSink(ColumnSink, Protocol):
    """A sink that takes a period's file as it is for its ``http_requests`` records (a log store,
    ``LogStore.adopt_period``), and the rest in columns. Durable when ``adopt_period`` returns; an ``OSError`` (or
    ``LogStoreError``) when not."""

    def adopt_period(self, path: Path, dataset: str, batches: Sequence[pa.RecordBatch]) -> int: ...


class JournalIntake:
    """Takes sealed journal periods into log stores or the log bus: ``stores`` maps each journal directory to the
    sink its periods go to. With ``node_id`` (the name of this node, unique among the nodes that commit to one log
    bus), each commit of columns carries an idempotency key (see the module docstring); without it, none."""

    def __init__(self, stores: Mapping[Path, PeriodSink | ColumnSink], *, node_id: str | None = None) -> None:
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
        """Hands every sealed period to its sink, oldest first, and deletes the periods from their journals; returns
        how many records that was. Blocks on the disk (a ``fsync`` per period): an asyncio caller runs it in a
        thread."""
        count = 0
        for directory, store in self.stores.items():
            for period in sealed_periods(directory):
                try:
                    parts = period_columns(sealed_path(directory, period))
                    key = self._key(directory, period)
                except FileNotFoundError:  # deleted meanwhile (the edge worker's bound on an untaken backlog)
                    continue
                except (ValueError, IndexError, TypeError, OSError) as error:
                    self._parts_taken.pop((directory, period), None)
                    _quarantine(directory, period, error)
                    continue
                committed, whole = self._take(store, directory, period, parts, key)
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

    def _take(
        self,
        store: PeriodSink | ColumnSink,
        directory: Path,
        period: int,
        parts: PeriodParts,
        commit_key: str | None,
    ) -> tuple[int, bool]:
        """Hands a sink a period's parts it has not taken yet: to a log store, the period's file for its
        ``http_requests`` records and the other parts in columns; to the bus, every part in columns (each under
        ``{commit_key}/{part}`` when there is a key). How many records that was, and whether every part is now taken
        (when one fails, the next ingest goes on from that part)."""
        key = (directory, period)
        count = 0
        for part, (dataset, batches) in enumerate(parts):
            records = sum(batch.num_rows for batch in batches)
            if part < self._parts_taken.get(key, 0) or not records:
                continue  # committed by an earlier ingest, before a later part failed; or nothing to commit
            emitted, refused = self._counters[dataset]
            try:
                if isinstance(store, PeriodSink) and dataset == HTTP_REQUESTS:
                    records = store.adopt_period(sealed_path(directory, period), dataset, batches)
                elif commit_key is None:
                    store.commit_columns(dataset, batches)
                else:
                    store.commit_columns(dataset, batches, f"{commit_key}/{part}")
            except (OSError, LogStoreError) as error:
                refused.inc(records)
                log.warning("log store did not take the request journal's records", dataset=dataset, error=str(error))
                return count, False
            emitted.inc(records)
            count += records
            self._parts_taken[key] = part + 1
        return count, True


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
