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
(the router emits from ``answered``, which the edge's HTTP server calls with a batch of answers once they are
written). ``emit`` adds the batch's requests (each with its ``Exchange``) to the period's ``RequestRows`` at once, in
one loop: the texts as a shape, the numbers as packed machine integers, nothing that holds the request (whose body
may be large); the rare rows kept whole (a firewall match) come back to it to build. Every ``flush_interval``
(50 ms) the rows added since the last look go to the write-ahead journal (``edgeplane.edge.request_journal``); every
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
import time
from collections.abc import Callable
from typing import Any, Final

import pyarrow as pa
import structlog
from prometheus_client import Counter

from edgeplane.edge.exchange import Exchange
from edgeplane.edge.http_server import REFERER, USER_AGENT, Answer, EdgeRequest, EdgeResponse
from edgeplane.edge.request_journal import RequestJournal
from edgeplane.edge.request_rows import NUMBER_COLUMNS, SHAPE_COLUMNS, Chunk, RequestRows, protocol, record_of
from edgeplane.logs.log_store import LogStore, LogStoreError
from edgeplane.logs.record_columns import batch_of_rows
from edgeplane.waf.events import FIREWALL_EVENTS, firewall_event_records, security_fields

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

    def emit(self, answers: list[Answer]) -> None:
        """Records a batch of answered requests (those whose request has an ``Exchange``); called on the thread of
        the event loop that serves them. Outside an event loop (a script, a test) their records go to the store at
        once."""
        rows = self._rows
        for (request, response, _sent_bytes, _written_ns), exchange, shape, numbers in rows.add_answers(answers):
            record = record_of(shape, exchange.ray_id, numbers)
            if exchange.verdict.matches:
                record |= security_fields(exchange.verdict)
                rows.events.extend(_events(request, response, exchange))
            rows.odd.append(record)
        full = len(rows) >= self.max_rows
        timer_loop = self._timer_loop
        if not full and self._timer is not None and timer_loop is not None and timer_loop.is_running():
            # The look to come takes these rows: its loop runs, so it is the loop emitting (one per thread), and
            # asking for the running loop (a system call, to check the process) is not needed.
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._timer is not None and self._timer_loop is loop:
            self._timer.cancel()  # full (otherwise the pending look took the rows, above): convert at once instead
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
    referer = _text(request.noted[REFERER])
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
        "ClientRequestUserAgent": _text(request.noted[USER_AGENT]),
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
