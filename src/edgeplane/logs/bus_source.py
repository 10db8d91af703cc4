"""The read side of the log bus: the datasets' JetStream streams read the way delivery reads a log store partition
(``read_columns``, ``end_position``, cursors, retention), so that a Logpush job reads the bus as it reads the store.

**Positions.** A position is an ``int``: ``stream_sequence << 24 | index``, the record ``index`` (from 0) of the
message at ``stream_sequence`` (``bus_streams.INDEX_BITS``; a message holds fewer than 2**24 records). So a read
bounded by records or bytes may stop inside a message, and the next one goes on from there. Positions grow with the
records but are not counts of records: the end of a message is the start of the next one (``(sequence + 1) << 24``),
``end_position`` is ``(last sequence + 1) << 24`` and ``oldest_position`` ``first sequence << 24``; position 0
means the first message. The records between two positions are estimated by ``lag_records``, from the number of
records of the messages read so far (each message says it in its ``Edgeplane-Records`` header); delivery reports
its lag with it.

**Reads.** A message is fetched by its sequence with JetStream's direct get (any replica answers; one request and
its payload, no consumer state on the server). A message no replica has is either past the end (nothing to read
yet), or before the stream's first sequence (deleted by the stream's limits: ``PositionLostError``, as the store
raises it, with the oldest position to go on from), which the stream's state tells apart. Messages are decoded once
(``record_columns.decode_block``, every column) into a ``MessageCache`` bounded by bytes and shared by every job of
the process: jobs that read the same records at about the same time fetch and decompress them once. Each read
returns the columns asked for.

**Cursors** are not kept in the bus: each job's position lives in a ``SharedCursors`` given to the source (the
database, beside the job's lease), saved once the job's destination confirmed its upload. An error the cursor store
raises (a lost lease) propagates to the job as it is.

Every failure of the bus is ``BusUnavailable`` (an ``OSError``): the job retries its read later. A message that is
not one the publisher writes (anyone allowed to publish on the subject could send one) is skipped with an error in
the log, never a reason for every job to stop.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final, Protocol

import pyarrow as pa
import structlog
from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg, StreamInfo
from nats.js.errors import NotFoundError
from prometheus_client import Counter

from edgeplane.logs.bus_connection import BusConnection
from edgeplane.logs.bus_streams import INDEX_BITS, stream_dataset, stream_name
from edgeplane.logs.log_store import (
    ColumnBatch,
    PositionAheadError,
    PositionLostError,
    RetentionOutlook,
)
from edgeplane.logs.record_columns import batch_of_given_lines, conform, decode_block, lines_given

log = structlog.get_logger(__name__)

MESSAGES_SKIPPED = Counter(
    "edgeplane_log_bus_messages_skipped_total",
    "Messages of the log bus's streams that are not records edgeplane publishes (not Arrow, not the dataset's "
    "columns), skipped by delivery.",
    ["dataset"],
)

CACHE_BYTES: Final = 256 << 20  # decoded messages kept for the jobs of one process
STATE_SECONDS: Final = 0.5  # how long a stream's state answers ``end_position`` and ``lag_records``
_INDEX_MASK: Final = (1 << INDEX_BITS) - 1
_NO_RECORDS: Final = pa.record_batch([], schema=pa.schema([]))  # what a skipped message holds
_COUNTS_KEPT: Final = 100_000  # the record counts of the messages decoded last, for ``lag_records``
_EXACT_SPAN: Final = 4096  # up to this many messages ahead, ``lag_records`` adds the counts it knows one by one


def position_of(sequence: int, index: int = 0) -> int:
    """The position of record ``index`` of the message at ``sequence``."""
    if sequence < 0 or not 0 <= index <= _INDEX_MASK:
        raise ValueError(f"no position for record {index} of message {sequence}")
    return sequence << INDEX_BITS | index


def message_of(position: int) -> tuple[int, int]:
    """The ``(stream sequence, record index)`` a position addresses; position 0 is the first message's first record."""
    if position < 0:
        raise ValueError(f"a position is not negative: {position}")
    sequence, index = position >> INDEX_BITS, position & _INDEX_MASK
    return (1, 0) if sequence == 0 else (sequence, index)


class SharedCursors(Protocol):
    """Where the jobs' positions are kept, shared by the delivery nodes (the database). ``save`` may raise an error
    of its own (the job's lease was lost): it reaches the job as it is."""

    def load(self, dataset: str, job_id: int) -> int | None: ...

    def save(self, dataset: str, job_id: int, position: int) -> None: ...

    def delete(self, dataset: str, job_id: int) -> None: ...


@dataclass(frozen=True, slots=True)
class BusMessage:
    """A decoded message of a stream: its records (every column), the size of its payload and when the stream
    stored it (Unix seconds)."""

    sequence: int
    records: pa.RecordBatch
    payload_bytes: int
    stored_at: float


class MessageCache:
    """Decoded messages by stream and sequence, the least recently used dropped once they hold more than
    ``max_bytes`` (their decoded size). Thread-safe: one is shared by every job of a process."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"a cache's bound is not negative: {max_bytes}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, int], tuple[BusMessage, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, stream: str, sequence: int) -> BusMessage | None:
        """The message at ``sequence`` of ``stream`` if it is kept (now the most recently used), else None."""
        with self._lock:
            entry = self._entries.get((stream, sequence))
            if entry is None:
                return None
            self._entries.move_to_end((stream, sequence))
            return entry[0]

    def put(self, stream: str, message: BusMessage) -> None:
        """Keeps ``message``, dropping the least recently used beyond the bound (it too, when larger alone)."""
        size = message.records.nbytes
        with self._lock:
            key = (stream, message.sequence)
            if key in self._entries:
                return
            self._entries[key] = (message, size)
            self._bytes += size
            while self._bytes > self.max_bytes and self._entries:
                _key, (_message, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped


@dataclass(frozen=True, slots=True)
class _State:
    first: int  # the first sequence held (last + 1 when none is)
    last: int  # the last sequence stored (0: none ever)
    messages: int
    bytes: int
    max_bytes: int
    max_age_seconds: float | None
    read_at: float


class BusSource:
    """The log bus's streams as one partition for delivery (see the module docstring)."""

    def __init__(
        self,
        connection: BusConnection,
        cursors: SharedCursors,
        *,
        cache: MessageCache | None = None,
        state_seconds: float = STATE_SECONDS,
    ) -> None:
        """``cache`` is shared by the sources of a process (a new one by default); ``state_seconds`` is how long a
        stream's state read from the bus answers ``end_position`` and ``lag_records``."""
        self.connection = connection
        self.state_seconds = state_seconds
        self.cursors = cursors
        self.cache = cache if cache is not None else MessageCache()
        self._states: dict[str, _State] = {}
        self._seen: dict[str, tuple[int, int]] = {}  # stream -> (messages decoded, their records)
        self._counts: dict[str, dict[int, int]] = {}  # stream -> records of each message decoded (the latest ones)
        self._lock = threading.Lock()

    # -- reading --------------------------------------------------------------------------------------------------

    def read_columns(
        self,
        dataset: str,
        position: int,
        max_records: int = 10_000,
        max_bytes: int = 8 << 20,
        columns: Collection[str] | None = None,
    ) -> ColumnBatch:
        """The records from ``position`` on, in order, as record batches (``ColumnBatch``): at most
        ``max_records``, and messages counted by their payload's size, shared equally among their records, up to
        ``max_bytes`` (at least one record when any is readable). With ``columns``, a batch holds only those of
        its columns (at least one). Raises ``PositionLostError`` when the stream's limits deleted the message at
        ``position``, ``PositionAheadError`` for a position after the end, ``BusUnavailable`` when the bus does not
        answer. A message that is not one the publisher writes (not Arrow, not the dataset's columns) is skipped,
        logged and counted (``edgeplane_log_bus_messages_skipped_total``)."""
        stream = stream_name(dataset)
        sequence, index = message_of(position)
        parts: list[pa.RecordBatch] = []
        taken = 0
        taken_bytes = 0.0
        while taken < max_records and taken_bytes < max_bytes:
            message = self._message(stream, sequence)
            if message is None:
                if not parts:
                    self._check_missing(dataset, stream, position, sequence)
                break
            count = message.records.num_rows
            if index >= count:  # a position at a message's end: the next message's start
                sequence, index = sequence + 1, 0
                continue
            share = message.payload_bytes / count
            wanted = min(count - index, max_records - taken)
            kept = min(wanted, max(int((max_bytes - taken_bytes) // share), 0 if taken else 1))
            if kept:
                parts.append(_projected(message.records.slice(index, kept), columns))
                taken += kept
                taken_bytes += kept * share
            if index + kept < count:
                index += kept
                break
            sequence, index = sequence + 1, 0
        if not parts:
            return ColumnBatch([], position, position)
        return ColumnBatch(parts, position, position_of(sequence, index))

    def _check_missing(self, dataset: str, stream: str, position: int, sequence: int) -> None:
        """Raises for a message that is not there because retention deleted it, or that cannot be there yet; returns
        when it is merely not stored yet (or a replica has not caught up)."""
        state = self._state(stream, fresh=True)
        if sequence < state.first:
            oldest = position_of(state.first)
            lost = self._records_between(stream, sequence, message_of(position)[1], state.first)
            raise PositionLostError(dataset, position, oldest, lost=lost)
        if sequence > state.last + 1:
            raise PositionAheadError(dataset, position, position_of(state.last + 1))

    def _message(self, stream: str, sequence: int) -> BusMessage | None:
        """The message at ``sequence``, from the cache or the bus; None when no replica that answered has it."""
        message = self.cache.get(stream, sequence)
        if message is not None:
            return message
        raw = self.connection.run(lambda jetstream: _direct_get(jetstream, stream, sequence))
        if raw is None or raw.data is None:
            return None
        dataset = stream_dataset(stream)
        try:
            records = decode_block(raw.data)
            given = lines_given(records)  # records published as bytes: in columns, as the store gives them
            records = batch_of_given_lines(dataset, given) if given is not None else conform(dataset, records)
            if records.num_rows > _INDEX_MASK:
                raise ValueError(f"{records.num_rows} records, more than a position can address")
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as error:
            # Not a message the publisher writes (anyone allowed to publish on the subject could send one): it is
            # skipped, loudly, rather than stop every job that reads past it.
            MESSAGES_SKIPPED.labels(dataset).inc()
            log.error(
                "a log bus message is not one edgeplane publishes; skipped",
                stream=stream,
                sequence=sequence,
                error=f"{type(error).__name__}: {error}",
            )
            records = _NO_RECORDS
        stored_at = raw.time.timestamp() if raw.time is not None else time.time()
        message = BusMessage(sequence, records, len(raw.data), stored_at)
        self.cache.put(stream, message)
        with self._lock:
            seen, seen_records = self._seen.get(stream, (0, 0))
            self._seen[stream] = (seen + 1, seen_records + records.num_rows)
            counts = self._counts.setdefault(stream, {})
            counts[sequence] = records.num_rows
            if len(counts) > _COUNTS_KEPT:
                del counts[next(iter(counts))]
        return message

    def end_position(self, dataset: str) -> int:
        """The position the next message published will start at (read within the last half second)."""
        return position_of(self._state(stream_name(dataset)).last + 1)

    def oldest_position(self, dataset: str) -> int:
        """The position of the oldest record still held (``end_position`` when none is)."""
        state = self._state(stream_name(dataset), fresh=True)
        return position_of(state.first if state.messages else state.last + 1)

    def lag_records(self, dataset: str, position: int) -> int:
        """About how many records follow ``position`` (exact for a message read already, the mean of the messages
        read so far for the others); 0 at or after the end."""
        stream = stream_name(dataset)
        state = self._state(stream)
        sequence, index = message_of(position)
        if sequence < state.first:
            sequence, index = state.first, 0
        return self._records_between(stream, sequence, index, state.last + 1)

    def _records_between(self, stream: str, sequence: int, index: int, end: int) -> int:
        """About how many records the messages from record ``index`` of ``sequence`` up to sequence ``end`` hold."""
        if sequence >= end:
            return 0
        mean = self._mean_records(stream, end - 1)
        with self._lock:
            counts = self._counts.get(stream, {})
            if end - sequence <= _EXACT_SPAN:
                known = [counts[number] for number in range(sequence, end) if number in counts]
            else:  # far behind: the mean will do (delivery asks after every read)
                known = []
            first = counts.get(sequence, mean)
        # the messages decoded are counted exactly, the others by the mean
        total = sum(known) + (end - sequence - len(known)) * mean
        return max(0, round(total - min(index, first)))

    def _mean_records(self, stream: str, last: int) -> float:
        """The mean number of records of the messages decoded so far; before any was, the last message's (fetched
        for it), or 1."""
        with self._lock:
            seen, records = self._seen.get(stream, (0, 0))
        if not seen and last > 0:
            self._message(stream, last)
            with self._lock:
                seen, records = self._seen.get(stream, (0, 0))
        return records / seen if seen else 1.0

    def retention_outlook(self, dataset: str, position: int) -> RetentionOutlook:
        """How close the stream's limits are to the records from ``position`` on: the messages from the one holding
        it to the end (their bytes estimated from the stream's mean message size), what the stream may still grow
        by before that message goes (``max_bytes`` less those bytes), and what ``max_age`` leaves it."""
        stream = stream_name(dataset)
        state = self._state(stream, fresh=True)
        sequence, index = message_of(position)
        sequence = max(sequence, state.first)
        if not state.messages or sequence > state.last:
            return RetentionOutlook(0, 0, state.max_bytes, None)
        held_messages = state.last - sequence + 1
        held_bytes = round(state.bytes * held_messages / state.messages)
        held_records = self._records_between(stream, sequence, index, state.last + 1)
        seconds_left = None
        if state.max_age_seconds is not None:
            message = self._message(stream, sequence)
            if message is not None:
                seconds_left = state.max_age_seconds - (time.time() - message.stored_at)
        return RetentionOutlook(held_records, held_bytes, state.max_bytes - held_bytes, seconds_left)

    def _state(self, stream: str, *, fresh: bool = False) -> _State:
        """The stream's state, read again when older than ``state_seconds`` or when ``fresh``."""
        now = time.monotonic()
        with self._lock:
            state = self._states.get(stream)
        if state is not None and not fresh and now - state.read_at < self.state_seconds:
            return state
        info = self.connection.run(lambda jetstream: jetstream.stream_info(stream))
        state = _state_of(info, now)
        with self._lock:
            self._states[stream] = state
        return state

    # -- cursors --------------------------------------------------------------------------------------------------

    def load_cursor(self, dataset: str, job_id: int) -> int | None:
        """The job's saved position in ``dataset``, or None."""
        stream_name(dataset)
        return self.cursors.load(dataset, job_id)

    def open_cursor(self, dataset: str, job_id: int) -> int:
        """The job's saved position; for a job without one, the stream's current end, saved before it is
        returned."""
        position = self.load_cursor(dataset, job_id)
        if position is None:
            position = position_of(self._state(stream_name(dataset), fresh=True).last + 1)
            self.cursors.save(dataset, job_id, position)
        return position

    def save_cursor(self, dataset: str, job_id: int, position: int) -> None:
        """Saves the job's position (the records before it are confirmed by its destination; the bus holds them
        already)."""
        stream_name(dataset)
        self.cursors.save(dataset, job_id, position)

    def delete_cursor(self, dataset: str, job_id: int) -> None:
        """Forgets the job's position."""
        stream_name(dataset)
        self.cursors.delete(dataset, job_id)


def _projected(records: pa.RecordBatch, columns: Collection[str] | None) -> pa.RecordBatch:
    if columns is None:
        return records
    names = [name for name in records.schema.names if name in columns]
    return records.select(names or [0])


def _state_of(info: StreamInfo, now: float) -> _State:
    state, config = info.state, info.config
    max_age = config.max_age if config.max_age else None
    return _State(
        first=state.first_seq if state.messages else state.last_seq + 1,
        last=state.last_seq,
        messages=state.messages,
        bytes=state.bytes,
        max_bytes=config.max_bytes if config.max_bytes and config.max_bytes > 0 else 1 << 62,
        max_age_seconds=max_age,
        read_at=now,
    )


async def _direct_get(jetstream: JetStreamContext, stream: str, sequence: int) -> RawStreamMsg | None:
    try:
        return await jetstream.get_msg(stream, sequence, direct=True)
    except NotFoundError:
        return None
