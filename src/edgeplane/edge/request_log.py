"""The ``http_requests`` record of every request the edge answers, and the ``firewall_events`` records of every
firewall match, appended to the log store.

Built from what the edge knows when it answers: the client, the request line and headers, the zone, the response
and its timings, and what the gateway's response cache did (``CacheCacheStatus``). Fields the edge cannot know (bot
scores, TLS details) are left out of the record and appear as the dataset's missing values in the output.
``ClientCountry`` and ``ClientASN`` are what the router
found for the client (``edgeplane.edge.client_location``: a trusted header or a MaxMind database). A request the
firewall matched has its ``Security*`` fields set and one ``firewall_events`` record per match
(``edgeplane.waf.events``), sharing its ``RayID``.

Emission never blocks the request and does all its work on the event loop's thread, after the client has its answer (the
router emits from ``answered``, which the edge's HTTP server calls once the answer is written): ``emit`` turns the
answered request (its ``Exchange``) into a row at once, a tuple in the order of ``HTTP_REQUEST_COLUMNS`` that holds only
the values (not the request, whose body may be large); every ``flush_interval`` (or just after the answer that makes
``max_rows`` rows) ``flush`` turns the rows into one Arrow record batch, column by column at the fields' own types
(``record_columns.batch_of_columns``), which the store serialises and hands to its flusher thread to write.

Why not in the store's thread: that thread shares the interpreter's lock with the event loop, and a thread that
converts records while the loop serves requests takes the lock at every point the loop lets go of it (each socket
call), which cost the edge more than the conversion itself (see ``docs/log-store.md``). A store that refuses (its
disk stalled) is counted in a metric, not raised. Rows a conversion refuses (none should) go to the store as
dictionaries, which it keeps as JSON lines when they do not fit the schema.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Callable, Sequence
from typing import Any, Final

import pyarrow as pa
from prometheus_client import Counter

from edgeplane.bounded_memo import BoundedMemo
from edgeplane.edge.http_server import EdgeRequest, EdgeResponse
from edgeplane.logs.log_store import LogStore, LogStoreError
from edgeplane.logs.record_columns import batch_of_columns, batch_of_rows
from edgeplane.store.snapshot import ZoneRoute
from edgeplane.waf.events import FIREWALL_EVENTS, firewall_event_records, security_fields
from edgeplane.waf.firewall import ALLOWED, Verdict

HTTP_REQUESTS: Final = "http_requests"

# The fields of an ``http_requests`` row, in the order ``_row`` gives their values.
HTTP_REQUEST_COLUMNS: Final = (
    "RayID",
    "ZoneName",
    "ClientIP",
    "ClientSrcPort",
    "ClientRequestHost",
    "ClientRequestMethod",
    "ClientRequestPath",
    "ClientRequestURI",
    "ClientRequestProtocol",
    "ClientRequestUserAgent",
    "ClientRequestReferer",
    "ClientXRequestedWith",
    "ClientRequestBytes",
    "EdgeResponseStatus",
    "EdgeResponseBodyBytes",
    "EdgeResponseBytes",
    "EdgeResponseContentType",
    "EdgeStartTimestamp",
    "EdgeEndTimestamp",
    "EdgeTimeToFirstByteMs",
    "EdgeServerIP",
    "OriginResponseStatus",
    "OriginResponseDurationMs",
    "ClientCountry",
    "ClientASN",
    "CacheCacheStatus",
)
# Fields every row has the same value of, added per batch rather than per row.
HTTP_REQUEST_CONSTANTS: Final = {"ClientRequestScheme": "http", "ClientRequestSource": "eyeball"}
# Fields that repeat another field of the row (``EdgeRequestHost``: the edge serves the host the client asked for).
HTTP_REQUEST_COPIES: Final = {"EdgeRequestHost": "ClientRequestHost"}
_PROTOCOLS: Final = {"1.1": "HTTP/1.1", "1.0": "HTTP/1.0"}
# Header values recur (the same user agents); one object per value also lets ``flush`` find repeated values by
# identity (see ``edgeplane.bounded_memo``).
_HEADER_TEXTS: Final[BoundedMemo[bytes, str]] = BoundedMemo(lambda value: value.decode("latin-1"))
_UNCONVERTED: Final = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeError, KeyError, TypeError, ValueError)

RECORDS_REFUSED = Counter(
    "edgeplane_log_records_refused_total", "Log records the log store refused (its disk fell behind).", ["dataset"]
)
RECORDS_EMITTED = Counter("edgeplane_log_records_emitted_total", "Log records appended to the log store.", ["dataset"])


# A request id is the process's random 64-bit start plus its count of requests: unique across processes (the odds
# that two processes' ranges meet are those of two random 32-bit prefixes), and no system call per request.
_ray_numbers = itertools.count(int.from_bytes(os.urandom(8), "big") >> 1)


def new_ray_id() -> str:
    """A request id: 16 lowercase hex characters."""
    return "%016x" % (next(_ray_numbers) & 0xFFFF_FFFF_FFFF_FFFF)


class Exchange:
    """One request through the edge, as the router learns of it and the request log records it: made when the
    request's head is complete, filled in as it is answered. It does not hold the request (the request holds it)."""

    __slots__ = (
        "asn",
        "cache_status",
        "country",
        "ended_ns",
        "host",
        "origin_duration_ms",
        "origin_status",
        "ray_id",
        "sent_bytes",
        "started_ns",
        "verdict",
        "zone",
    )

    def __init__(self, host: str, zone: ZoneRoute | None) -> None:
        self.host = host
        self.zone = zone  # None: the host is no web3 hostname
        self.ray_id = ""
        self.started_ns = 0
        self.country = ""  # "" when unknown
        self.asn = 0  # 0 when unknown
        self.verdict: Verdict = ALLOWED
        self.origin_status: int | None = None  # None: the request never reached an upstream
        self.origin_duration_ms: int | None = None
        self.cache_status = "unknown"  # the gateway's response cache: hit, miss, bypass, dynamic; unknown if not asked
        self.ended_ns = 0  # when the answer was written (Unix nanoseconds)
        self.sent_bytes = 0  # the answer's bytes, head and body, as written


class RequestLog:
    """Appends one ``http_requests`` record per answered request, and the ``firewall_events`` records of its
    firewall matches (see the module docstring for when and how)."""

    def __init__(self, store: LogStore, *, flush_interval: float = 0.05, max_rows: int = 8192) -> None:
        """Records go to the store every ``flush_interval`` seconds, or just after the answer that makes
        ``max_rows`` rows wait."""
        self.store = store
        self.flush_interval = flush_interval
        self.max_rows = max_rows
        # (emitted, refused) counters by dataset, labelled once rather than per append.
        self._counters = {
            dataset: (RECORDS_EMITTED.labels(dataset), RECORDS_REFUSED.labels(dataset))
            for dataset in (HTTP_REQUESTS, FIREWALL_EVENTS)
        }
        self._rows: list[tuple[Any, ...]] = []
        self._security: dict[int, dict[str, Any]] = {}  # the ``Security*`` fields of matched rows, by row index
        self._events: list[dict[str, Any]] = []
        self._timer: asyncio.Handle | None = None  # the flush to come
        self._timer_loop: asyncio.AbstractEventLoop | None = None  # the loop it was scheduled on

    def emit(self, request: EdgeRequest, response: EdgeResponse, exchange: Exchange) -> None:
        """Records one answered request; called on the thread of the event loop that serves it. Outside an event
        loop (a script, a test) its records go to the store at once."""
        self._rows.append(_row(request, response, exchange))
        if exchange.verdict.matches:  # rare: a firewall match
            self._security[len(self._rows) - 1] = security_fields(exchange.verdict)
            self._events.extend(_events(request, response, exchange))
        full = len(self._rows) >= self.max_rows
        timer_loop = self._timer_loop
        if not full and self._timer is not None and timer_loop is not None and timer_loop.is_running():
            # The flush to come takes this row: its loop runs, so it is the loop emitting (one per thread), and
            # asking for the running loop (a system call, to check the process) is not needed.
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._timer is not None and self._timer_loop is loop:
            self._timer.cancel()  # full (otherwise the pending flush took the row, above): flush at once instead
        self._timer_loop = loop  # a timer of a loop that has ended never runs: the next emit schedules another
        self._timer = loop.call_soon(self.flush) if full else loop.call_later(self.flush_interval, self.flush)

    def flush(self) -> None:
        """Hands every record emitted so far to the store now (also on shutdown, before the store closes)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        rows, security, events = self._rows, self._security, self._events
        self._rows, self._security, self._events = [], {}, []
        if rows:
            self._append(HTTP_REQUESTS, _batch(rows, security), lambda: _dictionaries(rows, security))
        if events:
            self._append(FIREWALL_EVENTS, batch_of_rows(FIREWALL_EVENTS, events), lambda: events)

    def _append(
        self, dataset: str, batch: pa.RecordBatch | None, dictionaries: Callable[[], list[dict[str, Any]]]
    ) -> None:
        """Appends ``batch``; when there is none, or the store refuses its shape, the records ``dictionaries()``
        returns."""
        emitted, refused = self._counters[dataset]
        count = 0
        try:
            if batch is not None:
                count = batch.num_rows
                try:
                    self.store.append_columns(dataset, batch)
                except ValueError:
                    batch = None
            if batch is None:
                records = dictionaries()
                count = len(records)
                self.store.append_rows(dataset, records)
        except LogStoreError:
            refused.inc(count)
            return
        emitted.inc(count)


def _row(request: EdgeRequest, response: EdgeResponse, exchange: Exchange) -> tuple[Any, ...]:
    """The values of an answer's ``http_requests`` row, in the order of ``HTTP_REQUEST_COLUMNS`` (None: missing)."""
    client_ip, client_port = request.client or ("", 0)
    headers = dict(request.headers)
    user_agent = headers.get(b"user-agent")
    referer = headers.get(b"referer")
    requested_with = headers.get(b"x-requested-with")
    path, query = request.path, request.query_string
    started_ns, ended_ns = exchange.started_ns, exchange.ended_ns
    zone = exchange.zone
    return (
        exchange.ray_id,
        zone.zone_name if zone else "",
        client_ip,
        client_port,
        exchange.host,
        request.method,
        path,
        path + "?" + query.decode("latin-1") if query else path,
        _protocol(request.http_version),
        _HEADER_TEXTS(user_agent) if user_agent else "",
        _HEADER_TEXTS(referer) if referer else "",
        _HEADER_TEXTS(requested_with) if requested_with else "",
        request.content_length,
        response.status,
        len(response.body),
        exchange.sent_bytes,
        _HEADER_TEXTS(response.content_type),
        started_ns,
        ended_ns,
        max(0, (ended_ns - started_ns) // 1_000_000),
        request.server[0] if request.server else "",
        exchange.origin_status,
        exchange.origin_duration_ms,
        exchange.country or None,
        exchange.asn or None,
        exchange.cache_status,
    )


def _batch(rows: list[tuple[Any, ...]], security: dict[int, dict[str, Any]]) -> pa.RecordBatch | None:
    """The rows as one record batch; None when a value does not fit its field (none should)."""
    columns: dict[str, Sequence[Any]] = dict(zip(HTTP_REQUEST_COLUMNS, zip(*rows, strict=True), strict=True))
    for name, value in HTTP_REQUEST_CONSTANTS.items():
        columns[name] = (value,) * len(rows)
    for name, original in HTTP_REQUEST_COPIES.items():
        columns[name] = columns[original]
    for name in dict.fromkeys(name for fields in security.values() for name in fields):
        columns[name] = [security[index].get(name) if index in security else None for index in range(len(rows))]
    try:
        return batch_of_columns(HTTP_REQUESTS, columns)
    except _UNCONVERTED:
        return None


def _dictionaries(rows: list[tuple[Any, ...]], security: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as the store's dictionaries (a missing value left out), for rows no batch could hold."""
    records = []
    for index, row in enumerate(rows):
        record = {name: value for name, value in zip(HTTP_REQUEST_COLUMNS, row, strict=True) if value is not None}
        record |= HTTP_REQUEST_CONSTANTS
        for name, original in HTTP_REQUEST_COPIES.items():
            record[name] = record[original]
        records.append(record | security.get(index, {}))
    return records


def _events(request: EdgeRequest, response: EdgeResponse, exchange: Exchange) -> list[dict[str, Any]]:
    """The ``firewall_events`` records of an answer whose request the firewall matched. Each carries
    ``ZoneName`` (not a field of the dataset), by which delivery gives a zone's jobs their records."""
    referer = _text(request.header(b"referer"))
    referer_scheme, _sep, rest = referer.partition("://")
    referer_host, _sep, referer_target = rest.partition("/")
    referer_path, _sep, referer_query = ("/" + referer_target if rest else "").partition("?")
    common: dict[str, Any] = {
        "ClientIP": request.client[0] if request.client else "",
        "ClientRequestHost": exchange.host,
        "ClientRequestMethod": request.method,
        "ClientRequestPath": request.path,
        "ClientRequestQuery": request.query_string.decode("latin-1"),
        "ClientRequestProtocol": _protocol(request.http_version),
        "ClientRequestScheme": "http",
        "ClientRequestUserAgent": _text(request.header(b"user-agent")),
        "ClientRefererHost": referer_host if rest else "",
        "ClientRefererPath": referer_path,
        "ClientRefererQuery": referer_query,
        "ClientRefererScheme": referer_scheme if rest else "",
        "RayID": exchange.ray_id,
        "OriginatorRayID": "00",
        "ZoneName": exchange.zone.zone_name if exchange.zone else "",
    }
    if exchange.origin_status is not None:
        common["OriginResponseStatus"] = exchange.origin_status
    if exchange.country:
        common["ClientCountry"] = exchange.country
    if exchange.asn:
        common["ClientASN"] = exchange.asn
    return firewall_event_records(
        exchange.verdict,
        common,
        datetime_ns=exchange.started_ns,
        edge_status=response.status,
    )


def _protocol(http_version: str) -> str:
    return _PROTOCOLS.get(http_version) or f"HTTP/{http_version}"


def _text(value: bytes | None) -> str:
    return value.decode("latin-1") if value else ""
