"""The ``http_requests`` record of every request the edge answers, and the ``firewall_events`` records of every
firewall match, appended to the log store.

Built from what the edge knows when it answers: the client, the request line and headers, the zone, the response
and its timings, and what the gateway's response cache did (``CacheCacheStatus``). Fields the edge cannot know (bot
scores, TLS details) are left out of the record and appear as the dataset's missing values in the output.
``ClientCountry`` and ``ClientASN`` are what the router
found for the client (``edgeplane.edge.client_location``: a trusted header or a MaxMind database). A request the
firewall matched has its ``Security*`` fields set and one ``firewall_events`` record per match
(``edgeplane.waf.events``), sharing its ``RayID``.

Emission never blocks the request and does all its work on the event loop's thread, after the client has its answer
(the router emits from ``answered``, which the edge's HTTP server calls once the answer is written). ``emit`` adds
the answered request (its ``Exchange``) to the period's ``RequestRows`` at once: the texts as a shape, the numbers
as machine integers, nothing that holds the request (whose body may be large). Every ``flush_interval`` (50 ms) the
rows added since the last look go to the write-ahead journal (``edgeplane.edge.request_journal``); every
``convert_interval`` (1 s), or just after the answer that makes ``max_rows`` rows, ``flush`` turns the period's rows
into one Arrow record batch, which the store serialises and hands to its flusher thread to write. Without a journal
(tests, scripts) every flush is a conversion.

Why on the loop's thread: a thread that converts records while the loop serves requests takes the interpreter's
lock at every point the loop lets go of it (each socket call), which cost the edge more than the conversion itself
(see ``docs/log-store.md``). A store that refuses (its disk stalled) is counted in a metric, not raised. Rows a
batch cannot hold (a text Arrow refuses) go to the store as dictionaries, which it keeps as JSON lines.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Callable
from typing import Any, Final

import pyarrow as pa
import structlog
from prometheus_client import Counter

from edgeplane.edge.http_server import EdgeRequest, EdgeResponse
from edgeplane.edge.request_journal import RequestJournal
from edgeplane.edge.request_rows import NUMBER_COLUMNS, SHAPE_COLUMNS, Chunk, RequestRows, protocol, record_of
from edgeplane.logs.log_store import LogStore, LogStoreError
from edgeplane.logs.record_columns import batch_of_rows
from edgeplane.store.snapshot import ZoneRoute
from edgeplane.waf.events import FIREWALL_EVENTS, firewall_event_records, security_fields
from edgeplane.waf.firewall import ALLOWED, Verdict

HTTP_REQUESTS: Final = "http_requests"
_UNCONVERTED: Final = (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError)

log = structlog.get_logger(__name__)

# The fields of an ``http_requests`` record the edge fills, besides ``ClientRequestScheme``, ``ClientRequestSource``
# and ``EdgeRequestHost`` (the same for every request, or a copy of another field).
HTTP_REQUEST_COLUMNS: Final = ("RayID", *SHAPE_COLUMNS, *NUMBER_COLUMNS, "EdgeTimeToFirstByteMs")

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

    def __init__(
        self,
        store: LogStore,
        *,
        journal: RequestJournal | None = None,
        flush_interval: float = 0.05,
        convert_interval: float = 1.0,
        max_rows: int = 8192,
    ) -> None:
        """Rows go to ``journal`` every ``flush_interval`` seconds and to the store every ``convert_interval``
        (every ``flush_interval`` without a journal), or just after the answer that makes ``max_rows`` rows wait."""
        self.store = store
        self.journal = journal
        self.flush_interval = flush_interval
        self.convert_interval = convert_interval if journal is not None else flush_interval
        self.max_rows = max_rows
        # (emitted, refused) counters by dataset, labelled once rather than per append.
        self._counters = {
            dataset: (RECORDS_EMITTED.labels(dataset), RECORDS_REFUSED.labels(dataset))
            for dataset in (HTTP_REQUESTS, FIREWALL_EVENTS)
        }
        self._rows = RequestRows()
        self._period_started = time.monotonic()
        self._unconfirmed = -1  # the last journal period whose rows the store may not have written yet (-1: none)
        self._timer: asyncio.Handle | None = None  # the next look at the rows
        self._timer_loop: asyncio.AbstractEventLoop | None = None  # the loop it was scheduled on

    def emit(self, request: EdgeRequest, response: EdgeResponse, exchange: Exchange) -> None:
        """Records one answered request; called on the thread of the event loop that serves it. Outside an event
        loop (a script, a test) its records go to the store at once."""
        rows = self._rows
        # The row's texts (a shape, see ``request_rows.SHAPE``) and numbers (``request_rows.NUMBER_COLUMNS``), built
        # here rather than by helper functions: at some 7,000 requests a second on one core, each call saved is
        # measurable.
        client, headers, zone = request.client, dict(request.headers), exchange.zone
        shape = (
            client[0] if client else "",
            exchange.host,
            request.method,
            request.path,
            request.query_string,
            request.http_version,
            headers.get(b"user-agent"),
            headers.get(b"referer"),
            headers.get(b"x-requested-with"),
            response.content_type,
            request.server,
            exchange.country,
            exchange.asn,
            zone.zone_name if zone else "",
            exchange.cache_status,
        )
        origin_status, origin_duration_ms = exchange.origin_status, exchange.origin_duration_ms
        numbers = (
            client[1] if client else 0,
            request.content_length,
            response.status,
            len(response.body),
            exchange.sent_bytes,
            exchange.started_ns,
            exchange.ended_ns,
            -1 if origin_status is None else origin_status,
            -1 if origin_duration_ms is None else origin_duration_ms,
        )
        if exchange.verdict.matches:  # rare: a firewall match
            rows.odd.append(record_of(shape, exchange.ray_id, numbers) | security_fields(exchange.verdict))
            rows.events.extend(_events(request, response, exchange))
        elif not rows.add(shape, exchange.ray_id, numbers):  # a number beyond 64 bits: kept whole
            rows.odd.append(record_of(shape, exchange.ray_id, numbers))
        full = len(rows.rays) + len(rows.odd) >= self.max_rows
        timer_loop = self._timer_loop
        if not full and self._timer is not None and timer_loop is not None and timer_loop.is_running():
            # The look to come takes this row: its loop runs, so it is the loop emitting (one per thread), and
            # asking for the running loop (a system call, to check the process) is not needed.
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._timer is not None and self._timer_loop is loop:
            self._timer.cancel()  # full (otherwise the pending look took the row, above): convert at once instead
        self._timer_loop = loop  # a timer of a loop that has ended never runs: the next emit schedules another
        self._timer = loop.call_soon(self._look, True) if full else loop.call_later(self.flush_interval, self._look)

    def _look(self, convert: bool = False) -> None:
        """Every ``flush_interval`` while rows wait (or at once, ``convert``, when ``max_rows`` wait): the new rows to
        the journal, or, once the period is over, the period's rows to the store; then the journal files the store
        has written are deleted."""
        self._timer = None
        journal = self.journal
        if convert or journal is None or time.monotonic() - self._period_started >= self.convert_interval:
            self._convert()
        else:
            chunk = self._rows.chunk()
            if chunk is not None:
                journal.write(chunk.encode())
        self._confirm()
        loop = self._timer_loop
        if (len(self._rows) or self._unconfirmed >= 0) and loop is not None and loop.is_running():
            self._timer = loop.call_later(self.flush_interval, self._look)

    def flush(self) -> None:
        """Hands every record emitted so far to the store now (also on shutdown, before the store closes)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._convert()

    def _convert(self) -> None:
        """Ends the period: its rows to the store, as one batch."""
        rows, self._rows = self._rows, RequestRows()
        self._period_started = time.monotonic()
        if self.journal is not None:
            self._unconfirmed = self.journal.next_period()
        self._append_rows(rows)

    def recover(self) -> int:
        """Appends the rows the journal holds from a process that did not stop cleanly, waits until the store has
        written them, and deletes their files; returns how many records that was. Called once, at start."""
        if self.journal is None:
            return 0
        periods = self.journal.periods()
        count = 0
        for period in periods:
            rows = RequestRows()
            for data in self.journal.read(period):
                try:
                    rows.extend(Chunk.decode(data))
                except ValueError as error:  # the rest of the period is skipped
                    log.warning("request journal chunk unreadable", period=period, error=str(error))
                    break
            count += len(rows) + len(rows.events)
            self._append_rows(rows)
        if periods and self.store.flush(timeout=None):
            self.journal.discard_now(periods[-1])
        return count

    def close(self) -> None:
        """After the store has closed (so it wrote everything): deletes the journal's files and stops its thread."""
        if self.journal is not None:
            self.journal.close()
            self.journal.discard_now(self.journal.period)

    def _confirm(self) -> None:
        """Deletes the journal files of the periods the store has written (a look at the store, without waiting)."""
        if self._unconfirmed >= 0 and self.journal is not None and self.store.flush(timeout=0):
            self.journal.discard(self._unconfirmed)
            self._unconfirmed = -1

    def _append_rows(self, rows: RequestRows) -> None:
        try:
            batch = rows.batch()
        except _UNCONVERTED:
            self._append(HTTP_REQUESTS, None, rows.records)
        else:
            if batch is not None:
                self._append(HTTP_REQUESTS, batch, rows.records)
        if rows.odd:
            self._append(HTTP_REQUESTS, None, lambda: rows.odd)
        if rows.events:
            events = rows.events
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
        "ClientRequestProtocol": protocol(request.http_version),
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


def _text(value: bytes | None) -> str:
    return value.decode("latin-1") if value else ""
