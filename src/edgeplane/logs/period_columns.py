"""A sealed request-journal period's records in columns: what the intake publishes to the log bus, and what a log
store gives its readers from a period it holds as a segment (``LogStore.adopt_period``); and the columns this process
converted last, kept for the next reads.

The period's frames (``request_journal.read_period``) are read into ``RequestRows`` and become record batches, per
dataset in the order they are stored: its ``http_requests`` records (its rows, ``RequestRows.batch``, or when a text
Arrow refuses, the same rows as dictionaries in columns with ``batch_of_any_rows``; and its rows kept whole, a
firewall match or a number beyond 64 bits, in columns too, loose where they do not fit the schema), then its
``firewall_events`` records. The conversion is a function of the file's bytes alone, so converting a period again
gives the same records in the same order: a store that dropped a period's columns from memory reads them anew. That
makes this conversion part of the log store's format: a period a store holds must convert to the same records, in
the same order, in every later release (``tests/logs/test_period_format.py`` holds a period of format 4 to its
records).

``CONVERTED`` keeps the columns of the periods converted last in this process, up to ``CONVERTED_BYTES`` of Arrow
buffers, keyed by the period's file (device, inode, modification time) and dataset: the intake converts a period
once, and the log store that adopts it and every read-only view of that store in the process (the jobs') read those
columns rather than convert the file again. A period a job reads long after (catching up after an outage), a tail or
an analytics scan converts anew.
"""

from __future__ import annotations

import collections
import os
import threading
from pathlib import Path
from typing import Final

import pyarrow as pa
import structlog
from isal.isal_zlib import crc32  # the same CRC-32 as zlib's, many times faster

from edgeplane.logs.record_columns import batch_of_any_rows
from edgeplane.logs.request_journal import read_frames, read_period
from edgeplane.logs.request_rows import HTTP_REQUESTS, RequestRows
from edgeplane.waf.events import FIREWALL_EVENTS

log = structlog.get_logger(__name__)

_UNCONVERTED = (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError)

PeriodParts = list[tuple[str, list[pa.RecordBatch]]]
CONVERTED_BYTES: Final = 64 << 20


class PeriodChecksumError(ValueError):
    """A period's file does not have the checksum it had when a log store adopted it: it was damaged since."""


def period_columns(path: Path, *, checksum: int | None = None) -> PeriodParts:
    """The records of the sealed period at ``path`` in columns, as ``(dataset, batches)``: ``http_requests``, then
    ``firewall_events`` (either may hold no batch). A frame that cannot be read ends the period with a warning (the
    frames before it are kept). With ``checksum`` (the file's CRC-32 when a log store adopted it), a file whose bytes
    no longer have it raises ``PeriodChecksumError``. Raises ``FileNotFoundError`` when the file is gone, and
    ``ValueError``, ``IndexError`` or ``TypeError`` for a period that cannot be converted at all."""
    if checksum is None:
        frames = read_period(path)
    else:
        data = path.read_bytes()
        if crc32(data) != checksum:
            raise PeriodChecksumError(f"the period {path.name} does not have the checksum it was adopted with")
        frames, _end = read_frames(data)
    rows = RequestRows()
    for kind, payload in frames:
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


class ConvertedPeriods:
    """The columns of the periods converted last, up to ``limit`` bytes of Arrow buffers, least recently used dropped
    first (the newest is kept whatever its size); safe to use from several threads."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept: collections.OrderedDict[tuple[int, int, int, str], tuple[list[pa.RecordBatch], int]] = (
            collections.OrderedDict()
        )
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, status: os.stat_result, dataset: str) -> list[pa.RecordBatch] | None:
        """The columns kept of ``dataset``'s records in the period whose file ``status`` describes, if any."""
        key = _key(status, dataset)
        with self._lock:
            kept = self._kept.get(key)
            if kept is None:
                return None
            self._kept.move_to_end(key)
            return kept[0]

    def keep(self, status: os.stat_result, dataset: str, batches: list[pa.RecordBatch]) -> None:
        """Keeps ``dataset``'s records of the period whose file ``status`` describes, for the next reads."""
        key = _key(status, dataset)
        nbytes = sum(batch.nbytes for batch in batches)
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._kept[key] = (batches, nbytes)
            self._bytes += nbytes
            while self._bytes > self.limit and len(self._kept) > 1:
                _, (_, dropped) = self._kept.popitem(last=False)
                self._bytes -= dropped

    def forget(self, status: os.stat_result) -> None:
        """Drops what is kept of the period whose file ``status`` describes (retention deleted it)."""
        with self._lock:
            for key in [key for key in self._kept if key[:3] == _key(status, "")[:3]]:
                self._bytes -= self._kept.pop(key)[1]


def _key(status: os.stat_result, dataset: str) -> tuple[int, int, int, str]:
    return (status.st_dev, status.st_ino, status.st_mtime_ns, dataset)


CONVERTED: Final = ConvertedPeriods(CONVERTED_BYTES)
