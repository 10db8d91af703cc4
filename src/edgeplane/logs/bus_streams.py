"""The log bus's streams: one JetStream stream per dataset, its name, its subject and its limits.

| dataset | stream | subject |
| --- | --- | --- |
| ``http_requests`` | ``EDGEPLANE_HTTP_REQUESTS`` | ``edgeplane.logs.http_requests`` |
| ``firewall_events`` | ``EDGEPLANE_FIREWALL_EVENTS`` | ``edgeplane.logs.firewall_events`` |

Each stream takes its one subject, is kept in files (``file`` storage) on ``replicas`` servers (3 in a cluster of
three, 1 on a single server), and keeps messages under *limits* retention: the oldest go once the stream holds more
than ``max_bytes`` or once they are older than ``max_age_seconds``, delivered or not (the bus keeps no cursor; the
jobs' cursors live in the database). ``duplicate_window_seconds`` is how long the stream remembers each message's
``Nats-Msg-Id``: a message published again under the same id within it is acknowledged and not stored again (the
publisher's idempotency, ``bus_publisher``). Every node sets the streams up at start; one whose settings would lower
a limit of an existing stream leaves it as it is, with a warning (lowering it would delete undelivered records).
``max_message_bytes`` bounds a message (the publisher splits record batches to fit it and the server's
``max_payload``). Direct gets are allowed, so that readers fetch a message by its sequence from any replica.

A message is one Arrow IPC stream of one record batch (``record_columns.encode_batch``) of at most
``MAX_RECORDS_PER_MESSAGE`` records, with the headers ``Nats-Msg-Id`` (the publisher's key and the records the message
holds) and ``Edgeplane-Records`` (its number of records). A reader's position addresses a record inside a
message by those 24 bits (``bus_source``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import structlog
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig, StreamInfo
from nats.js.errors import NotFoundError

from edgeplane.logs.bus_connection import BusConnection
from edgeplane.logs.record_columns import schema_of

log = structlog.get_logger(__name__)

INDEX_BITS: Final = 24  # a position is ``stream sequence << INDEX_BITS | index of the record in its message``
MAX_RECORDS_PER_MESSAGE: Final = (1 << INDEX_BITS) - 1
MESSAGE_ID_HEADER: Final = "Nats-Msg-Id"
RECORDS_HEADER: Final = "Edgeplane-Records"

_SUBJECT_PREFIX = "edgeplane.logs."
_STREAM_PREFIX = "EDGEPLANE_"


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """What each dataset's stream keeps and how (see the module docstring)."""

    replicas: int = 1
    max_age_seconds: float = 7 * 86400.0
    max_bytes: int = 1 << 30
    duplicate_window_seconds: float = 600.0
    max_message_bytes: int = 8 << 20

    def __post_init__(self) -> None:
        if not 1 <= self.replicas <= 5:
            raise ValueError(f"a stream has 1 to 5 replicas, not {self.replicas}")
        if self.max_age_seconds <= 0 or self.max_bytes <= 0 or self.max_message_bytes <= 0:
            raise ValueError("a stream's max_age_seconds, max_bytes and max_message_bytes must be positive")
        if not 0 < self.duplicate_window_seconds <= self.max_age_seconds:
            raise ValueError("a stream's duplicate window must be positive and at most its max age")


def stream_name(dataset: str) -> str:
    """The stream of ``dataset``; ``ValueError`` for a name that is not a dataset."""
    _check_dataset(dataset)
    return _STREAM_PREFIX + dataset.upper()


def stream_subject(dataset: str) -> str:
    """The subject records of ``dataset`` are published to; ``ValueError`` for a name that is not a dataset."""
    _check_dataset(dataset)
    return _SUBJECT_PREFIX + dataset


def stream_dataset(stream: str) -> str:
    """The dataset of one of the bus's streams (``stream_name``'s inverse); ``ValueError`` for another name."""
    dataset = stream.removeprefix(_STREAM_PREFIX).lower()
    if stream != _STREAM_PREFIX + dataset.upper():
        raise ValueError(f"not a stream of the log bus: {stream!r}")
    _check_dataset(dataset)
    return dataset


def stream_config(dataset: str, limits: StreamLimits) -> StreamConfig:
    """The configuration of ``dataset``'s stream."""
    return StreamConfig(
        name=stream_name(dataset),
        description=f"edgeplane log records of {dataset}, as Arrow IPC streams",
        subjects=[stream_subject(dataset)],
        retention=RetentionPolicy.LIMITS,
        discard=DiscardPolicy.OLD,
        max_bytes=limits.max_bytes,
        max_age=limits.max_age_seconds,
        max_msg_size=limits.max_message_bytes,
        storage=StorageType.FILE,
        num_replicas=limits.replicas,
        duplicate_window=limits.duplicate_window_seconds,
        allow_direct=True,
    )


def ensure_streams(connection: BusConnection, datasets: Iterable[str], limits: StreamLimits) -> None:
    """Creates each dataset's stream, or updates it to ``limits`` when it exists with others, as long as the update
    takes nothing away: a node whose settings hold smaller limits (fewer bytes, a shorter age, a smaller message,
    fewer replicas) than the stream leaves it as it is and says so, since shrinking a shared stream would delete
    records no job has delivered (an operator shrinks it on purpose with the NATS tools). Raises
    ``BusUnavailable`` when the bus does not answer or refuses (a change JetStream cannot make, such as the
    storage type, or more replicas than it has servers)."""
    for dataset in datasets:
        config = stream_config(dataset, limits)
        connection.run(lambda jetstream, config=config: _ensure(jetstream, config))  # type: ignore[misc]


async def _ensure(jetstream: JetStreamContext, config: StreamConfig) -> StreamInfo:
    assert config.name is not None
    try:
        info = await jetstream.stream_info(config.name)
    except NotFoundError:
        return await jetstream.add_stream(config)
    if not _differs(info.config, config):
        return info
    smaller = _shrinking(info.config, config)
    if smaller:
        log.warning(
            "this node's [bus] settings would shrink the log bus stream; it is left as it is",
            stream=config.name,
            smaller=smaller,
        )
        return info
    return await jetstream.update_stream(config)


# The limits of a stream whose lowering deletes or refuses records, and whose "no limit" is 0, -1 or None.
_LIMITS = ("max_bytes", "max_age", "max_msg_size", "num_replicas")


def _shrinking(current: StreamConfig, wanted: StreamConfig) -> list[str]:
    """The limits ``wanted`` sets lower than ``current`` has them."""

    def bound(value: Any) -> float:
        return float("inf") if value is None or value <= 0 else float(value)

    return [name for name in _LIMITS if bound(getattr(wanted, name)) < bound(getattr(current, name))]


def _differs(current: StreamConfig, wanted: StreamConfig) -> bool:
    fields = (
        "subjects",
        "max_bytes",
        "max_age",
        "max_msg_size",
        "num_replicas",
        "duplicate_window",
        "allow_direct",
        "storage",
        "retention",
        "discard",
    )
    return any(getattr(current, name) != getattr(wanted, name) for name in fields)


def _check_dataset(dataset: str) -> None:
    if schema_of(dataset) is None:
        raise ValueError(f"no such dataset: {dataset!r}")
