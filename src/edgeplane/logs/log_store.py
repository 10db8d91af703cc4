"""The log store: durable, append-only, segmented streams of log records between the edge and delivery.

In the pipeline source → buffer → transform → sink (``docs/log-store.md``), the store is the buffer's durable half:
the journal intake commits each sealed journal period to a *dataset* stream (``http_requests``, ``firewall_events``)
with ``commit_columns`` (written and ``fsync``ed on the caller's thread: the one durable hop, no flusher in between),
and each Logpush job reads on from its *cursor*, which it saves once its destination has the records: the cursor is
the acknowledgement, and retention drops what every cursor has passed. Records may also be appended without
blocking, for the flusher thread to write: as an Arrow record batch (``append_columns``), as dictionaries
(``append_rows``), which the store keeps in columns, or as opaque ``bytes`` (``append``: one JSON object each, no
newline inside). Delivery reads each stream from a per-job
*cursor*, as columns (``read_columns``) or as JSON lines (``read``, whatever form the records were stored in).
``LogStore`` is the interface; ``SegmentedLogStore`` is the single-machine implementation on files. Its read side,
``LogReader``, is what delivery reads: the log bus of a cluster (``bus_source.BusSource``, NATS JetStream, cursors in
the database) is another ``LogReader``; see ``docs/log-store.md`` and ``docs/log-bus.md``.

Positions are record offsets: the first record ever appended to a dataset is at position 0, the next at 1, and so
on, forever (offsets are never reused, not even after every segment was deleted). ``end_position`` is the position
the next readable record will get.

Layout on disk::

    <directory>/<dataset>/<first offset, 20 digits>.seg    segments, oldest first
    <directory>/<dataset>/cursors/<job id>.cursor          one file per job: its position, as decimal text

A segment is a sequence of *blocks*, one per dataset per commit or flush (large ones are split): a 24-byte header
(magic, payload length, record count, first offset, CRC32 of header and payload) then the payload. The store writes one
form, magic ``EPLC``: an Arrow IPC stream of one record batch (``edgeplane.logs.record_columns``), for records given to
``commit_columns`` (serialised and written by the caller), to ``append_columns`` (serialised by the caller, so that the
flusher thread only writes) or to ``append_rows`` (converted on the flusher thread), at most ``_ROWS_PER_BLOCK`` of
them. Rows that do not fit their dataset's schema keep their odd columns loose (each value's JSON text,
``record_columns.batch_of_any_rows``), and records given as bytes (``append``) are kept as they are in one column, so
nothing is refused for its shape. Blocks of magic ``EPLB`` (the records joined by ``\\n``), which releases before this
one wrote, are still read, never written. A block is written with one ``write`` and is valid only when its CRC matches,
so a write torn by a crash is recognised; opening the store for writing truncates the last segment after its last valid
block.

Durability contract of ``commit_columns``: durable when it returns; all of the call's records or none.

Durability contract of ``append``:

- ``append`` returns once the records are in memory. The flusher thread writes them to the segment file every
  ``flush_interval`` (or sooner, when ``flush_bytes`` are buffered): from then on they are readable and a crash of
  the process (``kill -9``) no longer loses them, because they are in the operating system's page cache. A kill
  loses exactly the records appended since the last completed flush, at most ``flush_interval`` of them.
- Every ``sync_interval``, on every segment roll and on ``close``, the flusher ``fsync``s: a power loss or kernel
  crash loses at most the records appended in the last ``sync_interval + flush_interval``.
- ``save_cursor`` first makes the records before the saved position durable (it syncs if needed), so a saved cursor
  never points past the durable end of its stream.

Backpressure: the flusher may fall behind (a stalled or full disk). Records already accepted are never dropped; when
``max_buffer_bytes`` are waiting to be written, ``append`` refuses the whole call with ``LogStoreFullError`` (its
caller counts the records as refused). It never blocks: blocking would stall the caller's event loop behind one slow
disk. ``stats()`` counts the refusals too. The journal intake does not append: it commits (``commit_columns``), which
a refusing disk fails with its ``OSError``, and the intake counts the period's records as refused and leaves the
period in the journal for its next look.

Retention: after each sync the flusher deletes whole segments, oldest first, never the one being written, when the
dataset holds more than ``retention_bytes``, when a segment's newest record is older than ``retention_seconds``
(its file modification time), or when the dataset has cursors and every one of them has passed the segment (a
dataset without any cursor keeps what the two bounds allow). A read from a deleted position raises
``PositionLostError`` carrying the oldest available position and the number of records lost.

Concurrency: one writer per directory (the delivery process, which takes every edge worker's journal into its
partition). A writable store holds an exclusive ``flock`` on ``<directory>/writer.lock`` from its opening to its
``close``: a second writer, in this process or another (a second ``edgeplane serve`` on the same data directory), is
refused with ``LogStoreBusyError`` instead of corrupting the segments, and the kernel lets go of the lock when its
holder dies, so a crash leaves nothing to clean up. Readers may be other
threads of the writer's process, which see every flushed record, or other processes opening the directory with
``writable=False``, which see every record whose block is complete on disk. ``read`` never returns a partially
written record. All file I/O runs on the flusher thread, the committer's thread or the reader's thread; ``append``
does none, so it is safe to call on an event loop.
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import os
import re
import struct
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

import pyarrow as pa
from isal.isal_zlib import crc32  # the same CRC-32 as zlib's, many times faster on large blocks

from edgeplane.logs.record_columns import (
    Compression,
    batch_of_any_rows,
    batch_of_given_lines,
    batch_of_lines,
    conform,
    decode_block,
    encode_batch,
    json_text,
    lines_given,
    lines_of,
)

SEGMENT_SUFFIX: Final = ".seg"
CURSOR_SUFFIX: Final = ".cursor"
OFFSET_DIGITS: Final = 20

_MAGIC_LINES: Final = b"EPLB"  # blocks of lines: read (an earlier release wrote them), never written
_MAGIC_COLUMNS: Final = b"EPLC"
_MAGICS: Final = (_MAGIC_LINES, _MAGIC_COLUMNS)
_ROWS_PER_BLOCK: Final = 8192
_ROW_BYTES: Final = 256  # a dictionary's overhead in the buffer bound, on top of its strings (``_row_size``)
# magic, payload length, record count, first offset; then the CRC32 of these 20 bytes and the payload.
_HEADER: Final = struct.Struct("<4sIIQ")
_CRC: Final = struct.Struct("<I")
HEADER_BYTES: Final = _HEADER.size + _CRC.size
_MAX_BLOCK_PAYLOAD: Final = 1 << 20
_READ_CHUNK: Final = 1 << 20
_DATASET_NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")


class LogStoreError(Exception):
    """A log store operation that cannot be carried out; ``str()`` says why."""


class LogStoreFullError(LogStoreError):
    """``append`` refused: too many bytes are waiting to be written (the disk is behind). None of the call's records
    were accepted; the caller counts them as refused."""


class LogStoreClosedError(LogStoreError):
    """The store was closed, or was opened read-only and cannot be appended to."""


class LogStoreBusyError(LogStoreError):
    """Another writable store (in this process or another) holds the directory: it has one writer at a time."""


class PositionLostError(LogStoreError):
    """The records from ``position`` up to ``oldest_position`` were deleted by retention before they were read.

    ``lost`` is their number (given by a source whose positions are not record offsets, such as the log bus's,
    where it is an estimate). Reading again from ``oldest_position`` continues with the oldest record still held.
    """

    def __init__(self, dataset: str, position: int, oldest_position: int, *, lost: int | None = None) -> None:
        self.dataset = dataset
        self.position = position
        self.oldest_position = oldest_position
        self.lost = oldest_position - position if lost is None else lost
        super().__init__(
            f"{dataset}: position {position} was deleted by retention; the oldest available position is "
            f"{oldest_position} ({self.lost} records lost)"
        )


class PositionAheadError(LogStoreError):
    """A read from a position after the end of the stream: a cursor that does not belong to this store."""

    def __init__(self, dataset: str, position: int, end_position: int) -> None:
        self.dataset = dataset
        self.position = position
        self.end_position = end_position
        super().__init__(f"{dataset}: position {position} is after the end of the stream ({end_position})")


class CorruptSegmentError(LogStoreError):
    """A block before the end of a stream failed its checksum: the file was damaged after it was written."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Records read from one dataset: ``records[i]`` is at ``position + i``; ``next_position`` is where the next read
    continues (``position + len(records)``). An empty batch means no record is available at ``position`` yet."""

    records: list[bytes]
    position: int
    next_position: int


@dataclass(frozen=True, slots=True)
class ColumnBatch:
    """Records read from one dataset in columns: ``parts`` in order, each an Arrow record batch (records given as
    bytes, and those of blocks of lines an earlier release wrote, decoded into columns:
    ``record_columns.batch_of_given_lines``). Together they hold the records from ``position`` to ``next_position``;
    an empty batch means none is available."""

    parts: list[pa.RecordBatch]
    position: int
    next_position: int


@dataclass(frozen=True, slots=True)
class RetentionOutlook:
    """How close retention is to the records from a position on: ``held_records`` and ``held_bytes``, the records and
    bytes of the segments from the one holding that position to the end; ``bytes_left``, what the dataset may still
    grow by before retention deletes that segment (at most 0: at its next look); ``seconds_left``, what
    ``retention_seconds`` leaves that segment, None when there is no age bound or the segment is still written."""

    held_records: int
    held_bytes: int
    bytes_left: int
    seconds_left: float | None


@dataclass(frozen=True, slots=True)
class LogStoreStats:
    """Counters since the store was opened, for metrics."""

    appended_records: int
    refused_records: int
    buffered_bytes: int
    flushes: int
    syncs: int
    deleted_segments: int
    write_errors: int
    last_write_error: str


class LogReader(Protocol):
    """The read side of a log store: what delivery reads of a partition (a ``SegmentedLogStore``, or the log bus's
    streams, ``bus_source.BusSource``), from per-job cursors."""

    def end_position(self, dataset: str) -> int:
        """The position of the next record to become readable."""
        ...

    def oldest_position(self, dataset: str) -> int:
        """The position of the oldest record still held (``end_position`` when none is)."""
        ...

    def lag_records(self, dataset: str, position: int) -> int:
        """How many records follow ``position``: ``end_position - position`` (at least 0) where positions are
        record offsets, an estimate where they are not (the log bus's)."""
        ...

    def retention_outlook(self, dataset: str, position: int) -> RetentionOutlook:
        """How close retention is to the records from ``position`` on (see ``RetentionOutlook``)."""
        ...

    def read_columns(
        self,
        dataset: str,
        position: int,
        max_records: int = 10_000,
        max_bytes: int = 8 << 20,
        columns: Collection[str] | None = None,
    ) -> ColumnBatch:
        """Up to ``max_records`` readable records from ``position`` in columns (see ``ColumnBatch``; at least one
        when any is readable, even if it alone exceeds ``max_bytes``); with ``columns``, a batch may hold only those
        of its columns (a reader that needs a few of them does not decompress the others). Raises
        ``PositionLostError`` when ``position`` was deleted by retention and ``PositionAheadError`` when it is after
        ``end_position``."""
        ...

    def load_cursor(self, dataset: str, job_id: int) -> int | None:
        """The saved position of job ``job_id`` in ``dataset``, or ``None`` when it has none."""
        ...

    def open_cursor(self, dataset: str, job_id: int) -> int:
        """The job's saved position; for a job without one, the current end, saved before it is returned."""
        ...

    def save_cursor(self, dataset: str, job_id: int, position: int) -> None:
        """Save the job's position durably; the records before it are durable when this returns."""
        ...

    def delete_cursor(self, dataset: str, job_id: int) -> None:
        """Forget the job's position (a deleted job stops holding records back)."""
        ...


class LogStore(LogReader, Protocol):
    """Append-only streams of records, one per dataset, read from per-job cursors."""

    def append(self, dataset: str, records: Sequence[bytes]) -> None:
        """Accept ``records`` for ``dataset`` without blocking on I/O; raises ``LogStoreFullError`` (nothing accepted)
        when the store is behind, ``LogStoreClosedError`` when closed, ``ValueError`` for a record holding ``\\n``
        or an invalid dataset name."""
        ...

    def append_rows(self, dataset: str, rows: Sequence[dict[str, Any]]) -> None:
        """Like ``append``, for records given as dictionaries of JSON values, which the store keeps in columns.
        The dictionaries must not be changed after the call."""
        ...

    def append_columns(self, dataset: str, batch: pa.RecordBatch) -> None:
        """Like ``append``, for records given as a record batch whose columns are fields of the dataset, of their
        types (``record_columns.batch_of_columns`` builds one); a null is a missing value, and an ``object`` field's
        column holds JSON text, which is not checked. Raises ``ValueError`` for a column that is not a field of its
        type, or one named twice. The batch is serialised by the caller's thread, so the store's thread does no
        work that holds the interpreter's lock."""
        ...

    def commit_columns(self, dataset: str, batches: Sequence[pa.RecordBatch], key: str | None = None) -> None:
        """Write the records of ``batches`` in order (each as for ``append_columns``; loose columns,
        ``record_columns.batch_of_any_rows``, taken too) after the stream's end now, and make them durable before
        returning: all of them, or none (an ``OSError`` of the disk leaves the stream as it was). Blocks on the
        disk, so an asyncio caller runs it in a thread. The intake's one durable hop: a sealed journal period is
        deleted once its records are committed. ``key``, the commit's idempotency key on the log bus
        (``bus_publisher``), is not needed here: a store has one writer, which commits a period once."""
        ...

    def read(self, dataset: str, position: int, max_records: int = 10_000, max_bytes: int = 8 << 20) -> Batch:
        """Up to ``max_records`` readable records from ``position`` (at least one when any is readable, even if it
        alone exceeds ``max_bytes``). Raises ``PositionLostError`` when ``position`` was deleted by retention and
        ``PositionAheadError`` when it is after ``end_position``."""
        ...

    def flush(self, timeout: float | None = None) -> bool:
        """Block until every record appended before the call is readable; ``False`` if ``timeout`` seconds passed
        first (the disk is failing: see the store's statistics)."""
        ...

    def close(self) -> None:
        """Write and sync every accepted record, then stop; further appends raise ``LogStoreClosedError``."""
        ...


@dataclass(slots=True)
class _Published:
    """What readers may see of a stream: its segments' first offsets, and the valid length of the last one."""

    segments: tuple[int, ...]
    last_size: int
    end: int


@dataclass(frozen=True, slots=True)
class _ColumnBlock:
    """A pending block of records already serialised in columns (``append_columns``)."""

    payload: memoryview
    count: int


_Pending = bytes | dict[str, Any] | _ColumnBlock  # one record, or (a column block) many


@dataclass(slots=True)
class _Stream:
    name: str
    path: Path
    published: _Published
    pending: list[_Pending] = field(default_factory=list)
    pending_bytes: int = 0
    fd: int = -1
    unsynced: bool = False
    roll_due: bool = False  # a roll failed half way: the next write finishes it first


@dataclass(slots=True)
class _Block:
    position: int  # byte position of the header in the segment
    first: int
    count: int
    payload_length: int
    columns: bool = False

    @property
    def end_byte(self) -> int:
        return self.position + HEADER_BYTES + self.payload_length


def _lock_writer(directory: Path) -> int:
    """The descriptor holding ``directory``'s writer lock (see the module docstring); raises ``LogStoreBusyError``
    when another store holds it."""
    descriptor = os.open(directory / "writer.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise LogStoreBusyError(f"another writer has the log store {directory} open") from None
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


class SegmentedLogStore:
    """``LogStore`` on segment files under ``directory`` (created if absent). See the module docstring for the
    format, the durability contract and the concurrency rules.

    With ``writable=True`` (the default) the store recovers each dataset (truncating a torn tail) and starts its
    flusher thread; call ``close()`` (or use it as a context manager) to write and sync everything. With
    ``writable=False`` it only reads, and may be opened by another process while the writer runs.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        writable: bool = True,
        flush_interval: float = 0.05,
        flush_bytes: int = 4 << 20,
        sync_interval: float = 1.0,
        segment_bytes: int = 64 << 20,
        max_buffer_bytes: int = 64 << 20,
        retention_bytes: int = 1 << 30,
        retention_seconds: float | None = None,
        compression: Compression = "zstd",
        datasets: Sequence[str] = (),
    ) -> None:
        self.directory = Path(directory)
        self.writable = writable
        self.flush_interval = flush_interval
        self.flush_bytes = flush_bytes
        self.sync_interval = sync_interval
        self.segment_bytes = segment_bytes
        self.max_buffer_bytes = max_buffer_bytes
        self.retention_bytes = retention_bytes
        self.retention_seconds = retention_seconds
        self.compression: Compression = compression
        self._lock = threading.Lock()  # guards pending records and counters; held only for list operations
        self._write_lock = threading.Lock()  # serialises file writes, syncs and segment deletion
        self._flushed = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._streams: dict[str, _Stream] = {}
        self._buffered = 0
        self._appended_generation = 0
        self._flushed_generation = 0
        self._closed = False
        self._counters = dict.fromkeys(
            ("appended", "refused", "flushes", "syncs", "deleted", "write_errors"),
            0,
        )
        self._last_write_error = ""
        # where the last reads ended, so that sequential reads do not rescan a segment: (dataset, offset) -> block
        self._read_hints: dict[tuple[str, int], tuple[int, _Block]] = {}
        self._views: dict[str, _Published] = {}  # read-only: what was seen on disk last time
        self._verify: set[str] = set()  # read-only: datasets whose last segment is to be rescanned with CRCs
        self.directory.mkdir(parents=True, exist_ok=True)
        self._writer_lock = _lock_writer(self.directory) if writable else -1
        if writable:
            try:
                names = {e.name for e in self.directory.iterdir() if e.is_dir() and _DATASET_NAME.fullmatch(e.name)}
                for name in sorted(names | set(datasets)):
                    self._stream(name)
            except BaseException:
                os.close(self._writer_lock)
                raise
            self._thread: threading.Thread | None = threading.Thread(
                target=self._run_flusher, name="log-store-flusher", daemon=True
            )
            self._thread.start()
        else:
            self._thread = None

    # -- appending --------------------------------------------------------------------------------------------

    def append(self, dataset: str, records: Sequence[bytes]) -> None:
        """See ``LogStore.append``."""
        if not records:
            return
        size = len(records)
        for record in records:
            if b"\n" in record:
                raise ValueError("a log record must not contain a newline")
            size += len(record)
        self._accept(dataset, records, size)

    def append_rows(self, dataset: str, rows: Sequence[dict[str, Any]]) -> None:
        """See ``LogStore.append_rows``."""
        if rows:
            self._accept(dataset, rows, sum(map(_row_size, rows)))

    def append_columns(self, dataset: str, batch: pa.RecordBatch) -> None:
        """See ``LogStore.append_columns``."""
        if not batch.num_rows:
            return
        batch = conform(dataset, batch)
        blocks = [
            _ColumnBlock(encode_batch(part, self.compression), part.num_rows)
            for part in (batch.slice(start, _ROWS_PER_BLOCK) for start in range(0, batch.num_rows, _ROWS_PER_BLOCK))
        ]
        self._accept(dataset, blocks, sum(len(block.payload) for block in blocks), batch.num_rows)

    def commit_columns(self, dataset: str, batches: Sequence[pa.RecordBatch], key: str | None = None) -> None:
        """See ``LogStore.commit_columns`` (``key`` is not used): the blocks are written with one ``write``, the
        segment is ``fsync``ed, and only then are the records published to readers. Records that do not fit in what
        is left of the segment start a new one. Raises ``LogStoreClosedError`` on a closed or read-only store."""
        payloads = [
            (encode_batch(part, self.compression), part.num_rows)
            for batch in (conform(dataset, batch) for batch in batches if batch.num_rows)
            for part in (batch.slice(start, _ROWS_PER_BLOCK) for start in range(0, batch.num_rows, _ROWS_PER_BLOCK))
        ]
        if not payloads:
            return
        stream = self._streams.get(dataset) or self._writable_stream(dataset)
        with self._lock:
            if self._closed:
                raise LogStoreClosedError("the log store is closed")
        with self._write_lock:
            if stream.roll_due:
                self._roll(stream)
            published = stream.published
            if os.fstat(stream.fd).st_size != published.last_size:
                os.ftruncate(stream.fd, published.last_size)  # a write that failed half way
            size = sum(HEADER_BYTES + len(payload) for payload, _ in payloads)
            if published.last_size and size > self.segment_bytes - published.last_size:
                self._roll(stream)
                published = stream.published
            parts: list[bytes | memoryview] = []
            offset = published.end
            for payload, count in payloads:
                header = _HEADER.pack(_MAGIC_COLUMNS, len(payload), count, offset)
                parts += [header + _CRC.pack(crc32(payload, crc32(header))), payload]
                offset += count
            try:
                _write_all(stream.fd, *parts)
                os.fsync(stream.fd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(stream.fd, published.last_size)
                raise
            stream.unsynced = False
            stream.published = _Published(published.segments, published.last_size + size, offset)
        with self._lock:
            self._counters["appended"] += offset - published.end

    def _accept(self, dataset: str, items: Sequence[_Pending], size: int, count: int | None = None) -> None:
        """Queue ``items`` (``count`` records; one per item by default) for the flusher."""
        stream = self._streams.get(dataset) or self._writable_stream(dataset)
        count = len(items) if count is None else count
        with self._lock:
            if self._closed:
                raise LogStoreClosedError("the log store is closed")
            if self._buffered + size > self.max_buffer_bytes:
                self._counters["refused"] += count
                raise LogStoreFullError(
                    f"{self._buffered} bytes are waiting to be written (limit {self.max_buffer_bytes}); "
                    f"{count} records refused"
                )
            idle = not self._buffered
            stream.pending.extend(items)
            stream.pending_bytes += size
            self._buffered += size
            self._appended_generation += 1
            self._counters["appended"] += count
            if idle or self._buffered >= self.flush_bytes:
                self._wake.set()  # the flusher sleeps while nothing waits (see ``_run_flusher``)

    def flush(self, timeout: float | None = None) -> bool:
        """See ``LogStore.flush``. Raises ``LogStoreClosedError`` on a read-only store."""
        if self._thread is None:
            raise LogStoreClosedError("the log store is read-only")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            target = self._appended_generation
            self._wake.set()
            while self._flushed_generation < target and self._thread.is_alive():
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                self._flushed.wait(timeout=self.flush_interval)
                self._wake.set()
            return self._flushed_generation >= target

    def close(self) -> None:
        """See ``LogStore.close``. Safe to call twice; blocks while the last records are written and synced, so an
        asyncio caller runs it in a thread (``await asyncio.to_thread(store.close)``)."""
        with self._lock:
            self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        if self._writer_lock >= 0:
            os.close(self._writer_lock)  # lets go of the lock: another writer may open the directory
            self._writer_lock = -1

    def __enter__(self) -> SegmentedLogStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def stats(self) -> LogStoreStats:
        """The counters since the store was opened."""
        with self._lock:
            counters = dict(self._counters)
            buffered = self._buffered
        return LogStoreStats(
            appended_records=counters["appended"],
            refused_records=counters["refused"],
            buffered_bytes=buffered,
            flushes=counters["flushes"],
            syncs=counters["syncs"],
            deleted_segments=counters["deleted"],
            write_errors=counters["write_errors"],
            last_write_error=self._last_write_error,
        )

    # -- reading ----------------------------------------------------------------------------------------------

    def end_position(self, dataset: str) -> int:
        """See ``LogStore.end_position``."""
        return self._published(dataset).end

    def oldest_position(self, dataset: str) -> int:
        """See ``LogStore.oldest_position``."""
        published = self._published(dataset)
        return published.segments[0] if published.segments else published.end

    def lag_records(self, dataset: str, position: int) -> int:
        """See ``LogStore.lag_records``."""
        return max(0, self.end_position(dataset) - position)

    def retention_outlook(self, dataset: str, position: int) -> RetentionOutlook:
        """See ``LogStore.retention_outlook``: the segments' sizes and age as the file system has them (a read-only
        store must be given the writer's ``retention_bytes`` and ``retention_seconds`` for its answer to hold)."""
        published = self._published(dataset)
        segments = published.segments
        if not segments or position >= published.end:
            return RetentionOutlook(0, 0, self.retention_bytes, None)
        first = max(bisect.bisect_right(segments, position) - 1, 0)
        held_bytes = published.last_size
        age: float | None = None
        for index in range(first, len(segments) - 1):
            try:
                status = (self.directory / dataset / _segment_name(segments[index])).stat()
            except FileNotFoundError:  # deleted by retention meanwhile
                continue
            held_bytes += status.st_size
            if index == first:
                age = time.time() - status.st_mtime
        seconds_left = None if self.retention_seconds is None or age is None else self.retention_seconds - age
        return RetentionOutlook(
            published.end - segments[first], held_bytes, self.retention_bytes - held_bytes, seconds_left
        )

    def read(self, dataset: str, position: int, max_records: int = 10_000, max_bytes: int = 8 << 20) -> Batch:
        """See ``LogStore.read``. Also raises ``CorruptSegmentError`` for a damaged block before the end."""
        parts, next_position = self._read_parts(dataset, position, max_records, max_bytes, columns=False)
        records: list[bytes] = []
        for part in parts:
            records.extend(part)  # only lists of lines without columns=True
        return Batch(records, position, next_position)

    def read_columns(
        self,
        dataset: str,
        position: int,
        max_records: int = 10_000,
        max_bytes: int = 8 << 20,
        columns: Collection[str] | None = None,
    ) -> ColumnBatch:
        """See ``LogStore.read_columns``. A block kept in columns counts towards ``max_bytes`` by its encoded size,
        shared equally among its records."""
        parts, next_position = self._read_parts(dataset, position, max_records, max_bytes, columns=True, names=columns)
        return ColumnBatch(parts, position, next_position)

    def _read_parts(
        self,
        dataset: str,
        position: int,
        max_records: int,
        max_bytes: int,
        *,
        columns: bool,
        names: Collection[str] | None = None,
    ) -> tuple[list[pa.RecordBatch] | list[list[bytes]], int]:
        published = self._published(dataset)
        if position > published.end:
            raise PositionAheadError(dataset, position, published.end)
        if position == published.end or max_records <= 0:
            return [], position
        segments = published.segments
        if not segments or position < segments[0]:
            raise PositionLostError(dataset, position, segments[0] if segments else published.end)
        parts: list[Any] = []  # record batches with ``columns``, else lists of lines
        taken = 0
        taken_bytes = 0
        hint = self._read_hints.get((dataset, position))  # kept: another job may read from the same position
        index = bisect.bisect_right(segments, position) - 1
        start_byte = 0
        if hint is not None and hint[0] == segments[index]:
            start_byte = hint[1].position
        next_position = position
        last_block: tuple[int, _Block] | None = None
        while index < len(segments) and taken < max_records and taken_bytes < max_bytes:
            base = segments[index]
            limit = published.last_size if index == len(segments) - 1 else None
            try:
                blocks, stopped_at = self._read_segment(
                    dataset, base, start_byte, limit, next_position, max_records - taken, max_bytes - taken_bytes
                )
            except FileNotFoundError:
                # retention deleted the segment between our snapshot and the read
                if parts:
                    break
                oldest = self.oldest_position(dataset)
                if oldest > position:
                    raise PositionLostError(dataset, position, oldest) from None
                return self._read_parts(dataset, position, max_records, max_bytes, columns=columns, names=names)
            for block, payload in blocks:
                skip = next_position - block.first
                if skip < 0:
                    raise CorruptSegmentError(f"{dataset}: records {next_position} to {block.first} are missing")
                room = max_records - taken
                if columns:
                    if block.columns:
                        batch = _decoded(dataset, block, payload, names)
                        given = lines_given(batch)
                        if given is not None:
                            batch = batch_of_given_lines(dataset, given)
                    else:
                        batch = batch_of_given_lines(dataset, _split_lines(dataset, block, payload))
                    share = block.payload_length / block.count
                    wanted = min(block.count - skip, room)
                    kept = min(wanted, max(int((max_bytes - taken_bytes) // share), 0 if taken else 1))
                    cut = kept < wanted
                    taken_bytes += round(kept * share)
                    if kept:
                        parts.append(batch.slice(skip, kept))
                else:
                    if block.columns:
                        lines = lines_of(_decoded(dataset, block, payload))
                    else:
                        lines = _split_lines(dataset, block, payload)
                    if skip:
                        lines = lines[skip:]
                    if len(lines) > room:
                        lines = lines[:room]
                    block_bytes = sum(map(len, lines))
                    cut = False
                    if taken_bytes + block_bytes > max_bytes:
                        kept = 0
                        for line in lines:
                            if taken_bytes + len(line) > max_bytes and (taken or kept):
                                break
                            taken_bytes += len(line)
                            kept += 1
                        cut = kept < len(lines)
                        lines = lines[:kept]
                    else:
                        taken_bytes += block_bytes
                    kept = len(lines)
                    if lines:
                        if parts and isinstance(parts[-1], list):
                            parts[-1].extend(lines)
                        else:
                            parts.append(lines)
                taken += kept
                next_position += kept
                last_block = (base, block)
                # A block cut short by the byte limit ends the read: the next block starts after records not taken.
                if cut or taken >= max_records or taken_bytes >= max_bytes:
                    break
            else:
                if stopped_at is not None:
                    start_byte = stopped_at  # the segment read stopped at its byte bound: more of it to come
                else:
                    index += 1
                    start_byte = 0
                continue
            break
        if last_block is not None and next_position < last_block[1].first + last_block[1].count:
            self._remember(dataset, next_position, last_block)
        elif last_block is not None:
            after = last_block[1]
            self._remember(dataset, next_position, (last_block[0], _Block(after.end_byte, next_position, 0, 0)))
        return parts, next_position

    def _remember(self, dataset: str, position: int, hint: tuple[int, _Block]) -> None:
        if len(self._read_hints) > 256:
            self._read_hints.clear()
        self._read_hints[(dataset, position)] = hint

    def _read_segment(
        self,
        dataset: str,
        base: int,
        start_byte: int,
        limit: int | None,
        position: int,
        max_records: int,
        max_bytes: int,
    ) -> tuple[list[tuple[_Block, bytes]], int | None]:
        """The valid blocks of one segment holding records at or after ``position``, from ``start_byte`` (a block
        boundary), reading whole chunks; at most enough blocks for ``max_records`` records and ``max_bytes`` of
        payload (the blocks past either bound are neither read nor checked). Also the byte where reading stopped
        for the byte bound while the segment holds more, else None."""
        path = self.directory / dataset / _segment_name(base)
        found: list[tuple[_Block, bytes]] = []
        taken = 0
        taken_bytes = 0
        with open(path, "rb", buffering=0) as file:
            size = os.fstat(file.fileno()).st_size if limit is None else limit
            byte = start_byte
            buffer = b""
            buffer_start = byte
            while byte < size and taken < max_records and taken_bytes < max_bytes:
                if byte + HEADER_BYTES > buffer_start + len(buffer):
                    file.seek(byte)
                    buffer = file.read(min(max(_READ_CHUNK, HEADER_BYTES), size - byte))
                    buffer_start = byte
                    if len(buffer) < HEADER_BYTES:
                        break
                header_at = byte - buffer_start
                magic, length, count, first = _HEADER.unpack_from(buffer, header_at)
                end = byte + HEADER_BYTES + length
                if magic not in _MAGICS or end > size:
                    if not self.writable:
                        self._doubt(dataset, limit)
                        break  # a block still being written by the writer process, or a torn tail it will cut
                    raise CorruptSegmentError(f"{dataset}: damaged block in segment {base} at byte {byte}")
                if first + count <= position:
                    byte = end  # skip the payload unread
                    continue
                if end > buffer_start + len(buffer):
                    file.seek(byte)
                    buffer = file.read(min(max(_READ_CHUNK, HEADER_BYTES + length), size - byte))
                    buffer_start = byte
                    header_at = 0
                    if len(buffer) < HEADER_BYTES + length:
                        break
                payload_at = header_at + HEADER_BYTES
                payload = buffer[payload_at : payload_at + length]
                (crc,) = _CRC.unpack_from(buffer, header_at + _HEADER.size)
                if crc32(payload, crc32(buffer[header_at : header_at + _HEADER.size])) != crc:
                    if not self.writable:
                        self._doubt(dataset, limit)
                        break
                    raise CorruptSegmentError(f"{dataset}: block at offset {first} of segment {base} fails its CRC")
                found.append((_Block(byte, first, count, length, magic == _MAGIC_COLUMNS), payload))
                taken += first + count - max(first, position)
                taken_bytes += length
                byte = end
        stopped_at = byte if taken_bytes >= max_bytes and taken < max_records and byte < size else None
        return found, stopped_at

    def _doubt(self, dataset: str, limit: int | None) -> None:
        """A read-only reader met a bad block inside what it believed complete (a torn tail left by a crash, which
        the writer truncates when it restarts): the next look at the stream rescans its last segment, checking every
        block's CRC."""
        if limit is not None:
            self._views.pop(dataset, None)
            self._verify.add(dataset)

    def _published(self, dataset: str) -> _Published:
        stream = self._streams.get(dataset)
        if stream is not None:
            return stream.published
        if self.writable:
            return self._writable_stream(dataset).published
        return self._discover(dataset)

    def _discover(self, dataset: str) -> _Published:
        """A read-only view of ``dataset`` as it is on disk now: complete blocks only. The last segment is scanned
        from where the previous look stopped."""
        _check_dataset(dataset)
        path = self.directory / dataset
        segments = _list_segments(path)
        if not segments:
            return _Published((), 0, 0)
        last = segments[-1]
        known = self._views.get(dataset)
        start, expected = (known.last_size, known.end) if known and known.segments[-1] == last else (0, last)
        scan = _scan_headers
        if dataset in self._verify:
            self._verify.discard(dataset)
            scan, start, expected = _scan_blocks, 0, last
        try:
            blocks, valid_size = scan(path / _segment_name(last), expected, start)
        except FileNotFoundError:
            return self._discover(dataset)  # deleted by retention meanwhile: look again
        end = blocks[-1].first + blocks[-1].count if blocks else expected
        view = _Published(tuple(segments), valid_size, end)
        self._views[dataset] = view
        return view

    # -- cursors ----------------------------------------------------------------------------------------------

    def load_cursor(self, dataset: str, job_id: int) -> int | None:
        """See ``LogStore.load_cursor``."""
        try:
            text = self._cursor_path(dataset, job_id).read_text(encoding="ascii")
        except FileNotFoundError:
            return None
        return int(text.strip())

    def open_cursor(self, dataset: str, job_id: int) -> int:
        """See ``LogStore.open_cursor``."""
        position = self.load_cursor(dataset, job_id)
        if position is None:
            position = self.end_position(dataset)
            self.save_cursor(dataset, job_id, position)
        return position

    def save_cursor(self, dataset: str, job_id: int, position: int) -> None:
        """See ``LogStore.save_cursor``: written to a temporary file, fsynced, renamed over the old one, and the
        directory fsynced. Raises ``PositionAheadError`` for a position after the end."""
        end = self.end_position(dataset)
        if position > end:
            raise PositionAheadError(dataset, position, end)
        if self.writable:
            self._sync_all()
        else:
            self._sync_segment_holding(dataset, position - 1)
        path = self._cursor_path(dataset, job_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(descriptor, f"{position}\n".encode("ascii"))
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
        _sync_directory(path.parent)

    def _sync_segment_holding(self, dataset: str, position: int) -> None:
        """fsync the segment holding ``position`` (the writer syncs a segment before rolling, so earlier ones are
        durable already); ``fsync`` through a read-only descriptor syncs the file the writer writes."""
        segments = self._published(dataset).segments
        index = bisect.bisect_right(segments, position) - 1
        if position < 0 or index < 0:
            return
        try:
            descriptor = os.open(self.directory / dataset / _segment_name(segments[index]), os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def delete_cursor(self, dataset: str, job_id: int) -> None:
        """See ``LogStore.delete_cursor``."""
        path = self._cursor_path(dataset, job_id)
        path.unlink(missing_ok=True)
        if path.parent.exists():
            _sync_directory(path.parent)

    def _cursor_path(self, dataset: str, job_id: int) -> Path:
        _check_dataset(dataset)
        return self.directory / dataset / "cursors" / f"{int(job_id)}{CURSOR_SUFFIX}"

    def _cursor_positions(self, dataset: str) -> list[int]:
        folder = self.directory / dataset / "cursors"
        positions: list[int] = []
        if folder.is_dir():
            for entry in folder.glob(f"*{CURSOR_SUFFIX}"):
                try:
                    positions.append(int(entry.read_text(encoding="ascii").strip()))
                except (FileNotFoundError, ValueError):
                    continue
        return positions

    # -- the writer -------------------------------------------------------------------------------------------

    def _writable_stream(self, dataset: str) -> _Stream:
        if not self.writable:
            raise LogStoreClosedError("the log store is read-only")
        return self._stream(dataset)

    def _stream(self, dataset: str) -> _Stream:
        """The stream of ``dataset``, recovered from disk on first use (creating its directory)."""
        with self._write_lock:
            stream = self._streams.get(dataset)
            if stream is not None:
                return stream
            _check_dataset(dataset)
            path = self.directory / dataset
            path.mkdir(parents=True, exist_ok=True)
            segments = _list_segments(path)
            if not segments:
                segments = [0]
                _create_segment(path, 0)
            last = segments[-1]
            segment_path = path / _segment_name(last)
            blocks, valid_size = _scan_blocks(segment_path, last)
            if valid_size < segment_path.stat().st_size:
                os.truncate(segment_path, valid_size)  # a torn tail: the block the crash interrupted
            end = blocks[-1].first + blocks[-1].count if blocks else last
            stream = _Stream(dataset, path, _Published(tuple(segments), valid_size, end))
            stream.fd = os.open(segment_path, os.O_WRONLY | os.O_APPEND)
            self._streams[dataset] = stream
            return stream

    def _run_flusher(self) -> None:
        next_sync = time.monotonic() + self.sync_interval
        while True:
            # With nothing to write the thread sleeps until an append wakes it or a sync is due; records that wait
            # (appended while it wrote, or left by a failed write) are written every ``flush_interval``. A thread
            # that woke every ``flush_interval`` for nothing cost the edge's event loop more than the writes did:
            # each wake takes the interpreter's lock from it (see docs/log-store.md).
            with self._lock:
                idle = not self._buffered and not self._closed
            self._wake.wait(timeout=max(0.0, next_sync - time.monotonic()) if idle else self.flush_interval)
            self._wake.clear()
            with self._lock:
                closing = self._closed
            try:
                self._flush_pending()
            except Exception as error:  # a bug, not the disk: count it and keep the thread (and the store) alive
                with self._lock:
                    self._counters["write_errors"] += 1
                self._last_write_error = f"flush: {type(error).__name__}: {error}"
            now = time.monotonic()
            if closing or now >= next_sync:
                try:
                    self._sync_all()
                    self._apply_retention()
                except OSError as error:
                    # the stream stays readable; the next round tries again, and stats() shows the error
                    with self._lock:
                        self._counters["write_errors"] += 1
                    self._last_write_error = f"sync or retention: {error}"
                next_sync = now + self.sync_interval
            if closing:
                with self._write_lock:
                    for stream in self._streams.values():
                        os.close(stream.fd)
                        stream.fd = -1
                with self._lock:
                    self._flushed.notify_all()
                return

    def _flush_pending(self) -> None:
        with self._lock:
            generation = self._appended_generation
            work = [(s, s.pending, s.pending_bytes) for s in self._streams.values() if s.pending]
            for stream, _, _ in work:
                stream.pending = []
                stream.pending_bytes = 0
        unwritten: list[tuple[_Stream, list[_Pending], int]] = []
        written_bytes = 0
        for stream, records, size in work:
            written, error = self._write(stream, records)
            if error is None:
                written_bytes += size
                continue
            # sizes are taken again only for what a failed write left (rows' sizes cost a pass over their strings)
            left = records[written:]
            left_size = sum(map(_pending_size, left))
            written_bytes += size - left_size
            unwritten.append((stream, left, left_size))
            self._last_write_error = f"{stream.name}: {error}"
        with self._lock:
            for stream, records, size in unwritten:
                # keep them, ahead of what was appended meanwhile, and try again at the next flush
                stream.pending[:0] = records
                stream.pending_bytes += size
            self._buffered -= written_bytes
            self._counters["write_errors"] += len(unwritten)
            if work:
                self._counters["flushes"] += 1
            if not unwritten:
                self._flushed_generation = generation
            self._flushed.notify_all()

    def _write(self, stream: _Stream, records: list[_Pending]) -> tuple[int, OSError | None]:
        """Write ``records`` as blocks after the stream's end, rolling segments as needed, publishing each write:
        column blocks as they are, runs of bytes as blocks of one column holding them as given, runs of dictionaries
        as blocks of columns (loose ones for what does not fit the schema). Returns how many items of ``records``
        were written, and the error that stopped it, if any."""
        index = 0
        start = stream.published.end
        with self._write_lock:
            try:
                if stream.roll_due:
                    self._roll(stream)
                if os.fstat(stream.fd).st_size != stream.published.last_size:
                    # a write that failed half way left bytes after the last good block
                    os.ftruncate(stream.fd, stream.published.last_size)
                while index < len(records):
                    start = stream.published.end
                    item = records[index]
                    if isinstance(item, _ColumnBlock):
                        self._write_block(stream, item.payload, item.count)
                        index += 1
                        continue
                    rows = isinstance(item, dict)
                    kind = dict if rows else bytes
                    end = index + 1
                    while end < len(records) and isinstance(records[end], kind):
                        if rows and end - index >= _ROWS_PER_BLOCK:
                            break
                        end += 1
                    if not rows:
                        self._write_lines(stream, records[index:end])  # type: ignore[arg-type]  # a run of bytes
                    else:
                        run: list[dict[str, Any]] = records[index:end]  # type: ignore[assignment]  # dictionaries
                        try:
                            payload = encode_batch(batch_of_any_rows(stream.name, run), self.compression)
                        except Exception:  # any surprise in the conversion: the records are kept as their JSON
                            payload = None
                        if payload is None:
                            self._write_lines(stream, [json_text(row) for row in run])
                        else:
                            self._write_block(stream, payload, len(run))
                    index = end
            except OSError as error:
                # a column block is one write: published only once whole; a run of records, one item each, may
                # have been written in part
                return index + stream.published.end - start, error
        return len(records), None

    def _write_block(self, stream: _Stream, payload: memoryview, count: int) -> None:
        """Write one block of records kept in columns (``count`` of them), after a roll if the segment is full."""
        if stream.published.last_size and len(payload) > self.segment_bytes - stream.published.last_size - HEADER_BYTES:
            self._roll(stream)
        published = stream.published
        header = _HEADER.pack(_MAGIC_COLUMNS, len(payload), count, published.end)
        _write_all(stream.fd, header + _CRC.pack(crc32(payload, crc32(header))), payload)
        stream.unsynced = True
        stream.published = _Published(
            published.segments, published.last_size + HEADER_BYTES + len(payload), published.end + count
        )

    def _write_lines(self, stream: _Stream, records: Sequence[bytes]) -> None:
        """Write ``records`` (given as bytes) as column blocks of one column holding them as they are
        (``record_columns.batch_of_lines``), of at most ``_MAX_BLOCK_PAYLOAD`` bytes of records each, rolling
        segments as needed; each block is published as it lands, so that after an ``OSError`` the stream's end says
        how many were written."""
        index = 0
        while index < len(records):
            room = self.segment_bytes - stream.published.last_size - HEADER_BYTES
            take = _fit(records, index, min(_MAX_BLOCK_PAYLOAD, room))
            payload = encode_batch(batch_of_lines(records[index : index + take]), self.compression)
            while len(payload) > room and take > 1:  # the encoding's own bytes: fewer records
                take = max(1, min(take - 1, take * room // len(payload)))
                payload = encode_batch(batch_of_lines(records[index : index + take]), self.compression)
            if len(payload) > room and stream.published.last_size:
                self._roll(stream)  # the next segment takes it; a record larger than a segment gets one of its own
                continue
            self._write_block(stream, payload, take)
            index += take

    def _roll(self, stream: _Stream) -> None:
        """Start a new segment at the stream's end; the full one is synced first."""
        published = stream.published
        stream.roll_due = True  # once the new file may exist, no record may go into the old segment
        os.fsync(stream.fd)
        _create_segment(stream.path, published.end)
        descriptor = os.open(stream.path / _segment_name(published.end), os.O_WRONLY | os.O_APPEND)
        old, stream.fd = stream.fd, descriptor
        with contextlib.suppress(OSError):
            os.close(old)
        stream.unsynced = False
        stream.roll_due = False
        if published.segments[-1] != published.end:
            stream.published = _Published((*published.segments, published.end), 0, published.end)

    def _sync_all(self) -> None:
        with self._write_lock:
            synced = False
            for stream in self._streams.values():
                if stream.unsynced and stream.fd >= 0:
                    os.fsync(stream.fd)
                    stream.unsynced = False
                    synced = True
        if synced:
            with self._lock:
                self._counters["syncs"] += 1

    def _apply_retention(self) -> None:
        now = time.time()
        for stream in list(self._streams.values()):
            cursors = self._cursor_positions(stream.name)
            with self._write_lock:
                segments = list(stream.published.segments)
                sizes: dict[int, os.stat_result] = {}
                for base in segments[:-1]:
                    with contextlib.suppress(FileNotFoundError):
                        sizes[base] = (stream.path / _segment_name(base)).stat()
                total = sum(status.st_size for status in sizes.values()) + stream.published.last_size
                doomed: list[int] = []
                while len(segments) > 1:
                    base, following = segments[0], segments[1]
                    status = sizes.get(base)
                    passed = bool(cursors) and all(cursor >= following for cursor in cursors)
                    too_big = total > self.retention_bytes
                    expired = (
                        self.retention_seconds is not None
                        and status is not None
                        and now - status.st_mtime > self.retention_seconds
                    )
                    if not (passed or too_big or expired):
                        break
                    total -= status.st_size if status is not None else 0
                    doomed.append(segments.pop(0))
                if not doomed:
                    continue
                # readers taking a snapshot from now on no longer see the segments; one holding an older snapshot
                # finds a file missing and looks again
                published = stream.published
                stream.published = _Published(tuple(segments), published.last_size, published.end)
                for base in doomed:
                    (stream.path / _segment_name(base)).unlink(missing_ok=True)
                _sync_directory(stream.path)
            with self._lock:
                self._counters["deleted"] += len(doomed)


def _pending_size(item: _Pending) -> int:
    """What a pending item counts for in the buffer bound (as the append that queued it counted it)."""
    if isinstance(item, _ColumnBlock):
        return len(item.payload)
    return len(item) + 1 if isinstance(item, bytes) else _row_size(item)


def _row_size(row: dict[str, Any]) -> int:
    """What a record given as a dictionary counts for in the buffer bound: a fixed share for its numbers and keys,
    plus its strings' lengths (a request's headers can make a record large)."""
    return _ROW_BYTES + sum([len(value) for value in row.values() if type(value) is str])


def _decoded(dataset: str, block: _Block, payload: bytes, names: Collection[str] | None = None) -> pa.RecordBatch:
    """The record batch of a block kept in columns (only the columns ``names``, when given: ``decode_block``);
    ``CorruptSegmentError`` when it is not one of ``count`` records (its CRC matched, so the writer wrote it so: a
    bug, not a torn write)."""
    try:
        batch = decode_block(payload, names)
    except (pa.ArrowInvalid, OSError) as error:
        raise CorruptSegmentError(f"{dataset}: block at offset {block.first} is not a record batch: {error}") from None
    if batch.num_rows != block.count:
        raise CorruptSegmentError(f"{dataset}: block at offset {block.first} holds the wrong count")
    return batch


def _split_lines(dataset: str, block: _Block, payload: bytes) -> list[bytes]:
    """The records of a block of lines (magic ``EPLB``); ``CorruptSegmentError`` when they are not ``count``."""
    lines = payload.split(b"\n")
    if len(lines) != block.count:
        raise CorruptSegmentError(f"{dataset}: block at offset {block.first} holds the wrong count")
    return lines


def _fit(records: Sequence[bytes], index: int, budget: int) -> int:
    """How many records from ``index`` fit in a payload of ``budget`` bytes; always at least one."""
    length = len(records[index])
    end = index + 1
    count = len(records)
    while end < count:
        length += 1 + len(records[end])
        if length > budget:
            break
        end += 1
    return end - index


def _scan_blocks(path: Path, expected: int, start: int = 0) -> tuple[list[_Block], int]:
    """The valid blocks of a segment from byte ``start`` (a block boundary where offset ``expected`` begins), in
    order, and the byte position where they end: the end of the file, or where a torn or unfinished block starts."""
    blocks: list[_Block] = []
    with open(path, "rb") as file:
        file.seek(start)
        data = file.read()
    byte = 0
    while byte + HEADER_BYTES <= len(data):
        magic, length, count, first = _HEADER.unpack_from(data, byte)
        end = byte + HEADER_BYTES + length
        if magic not in _MAGICS or first != expected or count == 0 or end > len(data):
            break
        (crc,) = _CRC.unpack_from(data, byte + _HEADER.size)
        if crc32(data[byte + HEADER_BYTES : end], crc32(data[byte : byte + _HEADER.size])) != crc:
            break
        blocks.append(_Block(start + byte, first, count, length, magic == _MAGIC_COLUMNS))
        expected = first + count
        byte = end
    return blocks, start + byte


def _scan_headers(path: Path, expected: int, start: int = 0) -> tuple[list[_Block], int]:
    """Like ``_scan_blocks``, from the headers alone: the blocks that are complete on disk, their payloads neither
    read nor checked (``read`` checks each block's CRC when it reads it). A reader following a growing stream uses
    it, so that it reads each byte once rather than twice."""
    blocks: list[_Block] = []
    with open(path, "rb", buffering=0) as file:
        descriptor = file.fileno()
        size = os.fstat(descriptor).st_size
        byte = start
        while byte + HEADER_BYTES <= size:
            header = os.pread(descriptor, _HEADER.size, byte)
            if len(header) < _HEADER.size:
                break
            magic, length, count, first = _HEADER.unpack(header)
            end = byte + HEADER_BYTES + length
            if magic not in _MAGICS or first != expected or count == 0 or end > size:
                break
            blocks.append(_Block(byte, first, count, length, magic == _MAGIC_COLUMNS))
            expected = first + count
            byte = end
    return blocks, byte


def _list_segments(path: Path) -> list[int]:
    if not path.is_dir():
        return []
    bases = []
    for entry in path.iterdir():
        stem = entry.name.removesuffix(SEGMENT_SUFFIX)
        if entry.name.endswith(SEGMENT_SUFFIX) and len(stem) == OFFSET_DIGITS and stem.isdigit():
            bases.append(int(stem))
    return sorted(bases)


def _segment_name(base: int) -> str:
    return f"{base:0{OFFSET_DIGITS}d}{SEGMENT_SUFFIX}"


def _create_segment(path: Path, base: int) -> None:
    descriptor = os.open(path / _segment_name(base), os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(descriptor)
    _sync_directory(path)


def _write_all(descriptor: int, *parts: bytes | memoryview) -> None:
    """Writes ``parts`` one after the other: in one system call when the file takes them all (``writev``, without
    joining them first), else the rest a piece at a time."""
    written = os.writev(descriptor, parts)
    for part in parts:
        view = memoryview(part).cast("B")[written:]
        written = max(0, written - len(part))
        while view:
            view = view[os.write(descriptor, view) :]


def _sync_directory(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _check_dataset(dataset: str) -> None:
    if not _DATASET_NAME.fullmatch(dataset):
        raise ValueError(f"invalid dataset name {dataset!r}: lowercase letters, digits and _ only")
