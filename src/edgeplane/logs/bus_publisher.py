"""The write side of the log bus: a sealed journal period's record batches committed to the dataset's JetStream
stream, acknowledged before the intake deletes its local copy.

``commit_columns(dataset, batches, key)`` serialises each batch as the log store does (an Arrow IPC stream,
``record_columns.encode_batch``), splits a batch whose message would not fit (the server's ``max_payload`` and the
stream's ``max_msg_size``) into halves until each does, and publishes the messages in order, one at a time, each
with ``Nats-Msg-Id: {key}/{batch}.{first}+{count}`` (the batch's number in the commit, the message's first record
in the batch and its number of records). It returns only once JetStream has
acknowledged every message (a ``PubAck``: stored by the stream, on a quorum of its replicas). The next message is
sent only once the one before is acknowledged, so a commit's records are stored in order.

The key makes a commit idempotent: the same records committed again under the same key (the intake crashed between
the acknowledgement and its delete, or a message was stored but its acknowledgement lost) are recognised by the
stream within its duplicate window and acknowledged without being stored again. The split depends only on the
records and the size bound, so a retry names its messages as the first try did; should the bound change between
the two (a server with another ``max_payload``), the retry's messages hold other ranges of records under other ids,
and are stored: records the first try stored are then stored twice, never dropped. A failure (not connected, no
stream answering, a timeout, an error answer) raises ``BusUnavailable`` after the messages before it were stored:
the caller keeps its copy and commits it again later under the same key, and the messages stored already are
recognised, not stored twice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

import pyarrow as pa
from nats.js import JetStreamContext
from nats.js.api import PubAck

from edgeplane.logs.bus_connection import BusConnection, BusUnavailable
from edgeplane.logs.bus_streams import (
    MAX_RECORDS_PER_MESSAGE,
    MESSAGE_ID_HEADER,
    RECORDS_HEADER,
    stream_name,
    stream_subject,
)
from edgeplane.logs.record_columns import Compression, conform, encode_batch

_HEADER_ROOM: Final = 4096  # what a message's headers and the protocol's line take beside its payload, at most
_KEY: Final = re.compile(r"[!-~]{1,200}")  # printable ASCII without spaces: a header value as it is


class BusPublisher:
    """Commits record batches to the log bus's streams (see the module docstring); satisfies the intake's
    ``ColumnSink``."""

    def __init__(
        self, connection: BusConnection, *, compression: Compression = "zstd", max_message_bytes: int | None = None
    ) -> None:
        """``max_message_bytes`` bounds a message's payload below what the server and the stream take (tests);
        by default the bound is theirs."""
        self.connection = connection
        self.compression = compression
        self.max_message_bytes = max_message_bytes
        self._stream_limits: dict[str, int] = {}  # each stream's max_msg_size, read once

    def commit_columns(self, dataset: str, batches: Sequence[pa.RecordBatch], key: str | None = None) -> None:
        """Publishes the records of ``batches`` in order under the idempotency key ``key`` and returns once every
        message is acknowledged. Raises ``ValueError`` for a missing or malformed key (printable ASCII, no space,
        at most 200 characters), an unknown dataset, or a batch that does not fit the dataset's schema; and
        ``BusUnavailable`` when the bus did not acknowledge them all (commit again under the same key)."""
        if key is None or not _KEY.fullmatch(key):
            raise ValueError(f"a commit to the log bus needs a key of printable ASCII without spaces, not {key!r}")
        subject = stream_subject(dataset)
        stream = stream_name(dataset)
        parts = [conform(dataset, batch) for batch in batches if batch.num_rows]
        if not parts:
            return
        limit = self._message_limit(stream)
        for number, part in enumerate(parts):
            first = 0
            for payload, count in self._messages(part, limit):
                # The id names the records the message holds (part, first record, count), not its place in a
                # split: a retry split otherwise (the server's limit changed in between) publishes new ids, which
                # duplicates records rather than have the stream drop a larger message as a duplicate of a smaller.
                headers = {MESSAGE_ID_HEADER: f"{key}/{number}.{first}+{count}", RECORDS_HEADER: str(count)}
                self.connection.run(
                    lambda jetstream, payload=payload, headers=headers: _publish(  # type: ignore[misc]
                        jetstream, subject, payload, stream, headers, self.connection.timeout
                    )
                )
                first += count

    def _message_limit(self, stream: str) -> int:
        """The largest payload a message of ``stream`` may have."""
        if stream not in self._stream_limits:
            self._stream_limits[stream] = self.connection.run(lambda jetstream: _max_message_size(jetstream, stream))
        bounds = [self.connection.max_payload() - _HEADER_ROOM]
        if self._stream_limits[stream] > 0:
            bounds.append(self._stream_limits[stream] - _HEADER_ROOM)
        if self.max_message_bytes is not None:
            bounds.append(self.max_message_bytes)
        return max(1, min(bounds))

    def _messages(self, batch: pa.RecordBatch, limit: int) -> list[tuple[bytes, int]]:
        """``batch`` as the payloads of messages of at most ``limit`` bytes and ``MAX_RECORDS_PER_MESSAGE``
        records, in order, with their record counts: the whole batch, or its halves split again until each fits.
        Raises ``BusUnavailable`` for a single record larger than ``limit`` (raise the server's
        ``max_payload``)."""
        if batch.num_rows > MAX_RECORDS_PER_MESSAGE:
            return self._halves(batch, limit)
        payload = encode_batch(batch, self.compression)
        if len(payload) <= limit:
            return [(bytes(payload), batch.num_rows)]
        if batch.num_rows == 1:
            raise BusUnavailable(
                f"a record of {len(payload)} bytes does not fit a message of the log bus ({limit} bytes): "
                "raise the servers' max_payload"
            )
        return self._halves(batch, limit)

    def _halves(self, batch: pa.RecordBatch, limit: int) -> list[tuple[bytes, int]]:
        middle = batch.num_rows // 2
        return self._messages(batch.slice(0, middle), limit) + self._messages(batch.slice(middle), limit)


async def _publish(
    jetstream: JetStreamContext, subject: str, payload: bytes, stream: str, headers: dict[str, str], ack_seconds: float
) -> PubAck:
    return await jetstream.publish(subject, payload, timeout=ack_seconds, stream=stream, headers=headers)


async def _max_message_size(jetstream: JetStreamContext, stream: str) -> int:
    info = await jetstream.stream_info(stream)
    return int(info.config.max_msg_size or -1)
