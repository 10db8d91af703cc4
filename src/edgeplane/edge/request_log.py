"""The ``http_requests`` record of every request the edge answers, and the ``firewall_events`` records of every
firewall match, written to the request journal, which the delivery process takes into the log store.

Built from what the edge knows when it answers: the client, the request line and headers, the zone, the response
and its timings, and what the gateway's response cache did (``CacheCacheStatus``). Fields the edge cannot know (bot
scores, TLS details) are left out of the record and appear as the dataset's missing values in the output.
``ClientCountry`` and ``ClientASN`` are what the router
found for the client (``edgeplane.edge.client_location``: a trusted header or a MaxMind database). A request the
firewall matched has its ``Security*`` fields set and one ``firewall_events`` record per match
(``edgeplane.waf.events``), sharing its ``RayID``. The ``WAF*AttackScore`` fields are the request's attack scores when
they were computed (a rule read them, or a Logpush job of the zone logs them: the edge snapshot's
``attack_score_zones``), else 100.

**Accepted**: the edge's HTTP server calls the router's ``commit_answer`` (which is ``commit`` here) just before it
hands an answer to the socket, and ``commit`` writes the request's records into the journal's shared mapping
(``edgeplane.logs.request_journal``) before returning. So every answer a client may have received has its records in
the kernel's page cache, where the death of any edgeplane process leaves them. ``commit`` makes no system call: an
ordinary row is the number of its shape (a dictionary look-up; a new shape is one more frame, once per period) and the
row's frame (``request_rows.ROW_FRAME``) written into the mapping, by the C module ``row_writer`` where it is built
and by ``commit_in_python`` otherwise (and for every other row). The rare rows kept whole (a firewall match, computed
scores, a number beyond 64 bits, a ray id of another form) are ``marshal``'d with their events into a frame of their
own. The period is sealed ``seal_interval`` (1 s) after it opened, on a timer of the event loop, or on the loop's next
turn once it holds the space of ``max_rows`` rows, or at once when its mapping is full; the delivery process turns its
rows into one Arrow record batch for the log store (``edgeplane.logs.journal_intake``). Outside an event loop (a
script, a test) every ``emit`` is sealed at once.

Why before the write and one row at a time: a record built after the answer (as this module did, in batches, up to
50 ms later) lived only in the process's memory until it was journalled, and a ``kill -9`` lost the last 100 to
150 ms of records. Building the row on the send path is the same work the batch did, a row at a time; what it costs
the request is measured by ``bench/pipeline.py --part emission`` (``docs/benchmarks.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import marshal
import struct
import time
from collections.abc import Callable
from typing import Any, Final

from prometheus_client import Counter

from edgeplane.edge.exchange import NOT_LOGGED, Exchange
from edgeplane.edge.http_server import (
    NOTED_HEADERS,
    REFERER,
    REQUESTED_WITH,
    USER_AGENT,
    Answer,
    EdgeRequest,
    EdgeResponse,
)
from edgeplane.logs.request_journal import COMMIT_MARK, ROW, SHAPE, WHOLE, RequestJournal
from edgeplane.logs.request_rows import (
    NUMBER_COLUMNS,
    ROW_FRAME,
    ROW_PAYLOAD,
    SHAPE_COLUMNS,
    Shape,
    protocol,
    record_of,
)
from edgeplane.waf.events import ATTACK_SCORE_FIELDS, attack_score_fields, firewall_event_records, security_fields
from edgeplane.waf.firewall import ALLOWED

try:
    from edgeplane.edge import row_writer
except ImportError:  # built without a C compiler: ``commit_in_python`` writes every row
    row_writer = None  # type: ignore[assignment]

# The fields of an ``http_requests`` record the edge fills, besides ``ClientRequestScheme``, ``ClientRequestSource``
# and ``EdgeRequestHost`` (the same for every request, or a copy of another field).
HTTP_REQUEST_COLUMNS: Final = ("RayID", *SHAPE_COLUMNS, *NUMBER_COLUMNS, "EdgeTimeToFirstByteMs", *ATTACK_SCORE_FIELDS)

RECORDS_LOST = Counter(
    "edgeplane_log_records_lost_total",
    "Request records the edge could not journal (no journal period could be opened: a full disk).",
)
_ROW_FRAME: Final = ROW_FRAME  # module globals, read once per row
_ROW_SIZE: Final = ROW_FRAME.size
_ROW_LENGTH: Final = ROW_PAYLOAD.size
_RAY_LENGTH: Final = 16  # the ray ids ``new_ray_id`` makes; a row frame holds one of this length
_SHAPE_NUMBER: Final = struct.Struct("=I")
_now_ns: Final = time.time_ns


class RequestLog:
    """Journals one ``http_requests`` record per answered request, and the ``firewall_events`` records of its
    firewall matches, before the answer is written (see the module docstring)."""

    def __init__(self, journal: RequestJournal, *, seal_interval: float = 1.0, max_rows: int = 8192) -> None:
        """The journal's period is sealed ``seal_interval`` seconds after it opened, or once it holds the space of
        ``max_rows`` rows (on the loop's next turn: rows, shapes and records kept whole all count), or when its
        mapping is full."""
        self.journal = journal
        self.seal_interval = seal_interval
        self.max_rows = max_rows
        self.lost = 0  # records no period could hold (a full disk)
        # Starts the exchange of a request the router did not see (``commit``); the router sets it.
        self.start: Callable[[EdgeRequest, int], object] | None = None
        self._shapes: dict[Shape, int] = {}  # the open period's shapes, by number
        # Where the hot path's rows end in the open period: the journal's ``limit`` (its zeros written ahead), or
        # about ``max_rows`` rows (``_rows_end``: the rows beyond it go the slow way, which asks for the seal); 0
        # while no period is open.
        self._limit = 0
        self._rows_end = 0
        self._sealing = False  # the open period's seal asked for, on the loop's next turn
        self._timer: asyncio.Handle | None = None  # the open period's seal
        # The C module's writer (``row_writer.c``), which writes the ordinary rows and hands the rest to
        # ``commit_in_python``. While a period is attached to it, its ``end`` is the period's, not the journal's.
        self._writer: row_writer.RowWriter | None = None
        # Writes the records of an answer about to be written (``commit_in_python``): the C writer's ``commit``
        # when the module is built, which does the same.
        self.commit: Callable[..., None] = self.commit_in_python
        if row_writer is not None:
            self._writer = row_writer.RowWriter(
                exchange_type=Exchange,
                allowed=ALLOWED,
                slow=self.commit_in_python,
                noted_count=len(NOTED_HEADERS),
                user_agent=USER_AGENT,
                referer=REFERER,
                requested_with=REQUESTED_WITH,
            )
            self.commit = self._writer.commit

    def commit_in_python(
        self, request: EdgeRequest, response: EdgeResponse, sent_bytes: int, written_ns: int = 0
    ) -> None:
        """Writes the records of an answer about to be written (``sent_bytes`` of head and body; 0: dropped, the
        client went away) into the journal; on return they outlive the process. ``written_ns`` (Unix nanoseconds)
        is when, now when 0. A request whose ``Exchange`` was not started is started with ``start(request,
        written_ns)`` first (without ``start``, it is not logged); one marked ``NOT_LOGGED`` is not logged. The
        edge's HTTP server calls this (as the router's ``commit_answer``, through ``commit``) just before it writes
        each answer."""
        if self._writer is None:
            self._commit(request, response, sent_bytes, written_ns)
            return
        self._detach()
        try:
            self._commit(request, response, sent_bytes, written_ns)
        finally:
            self._attach()

    def _attach(self) -> None:
        """Hands the open period (if any) to the C writer."""
        journal, writer = self.journal, self._writer
        if writer is not None and journal.mapping is not None:
            writer.attach(journal.mapping, self._shapes, journal.end, self._limit)

    def _detach(self) -> None:
        """Takes the open period back from the C writer (if it has it), with the rows it wrote."""
        writer = self._writer
        if writer is not None and writer.attached:
            self.journal.end = writer.end
            writer.detach()

    def _commit(self, request: EdgeRequest, response: EdgeResponse, sent_bytes: int, written_ns: int) -> None:
        if not written_ns:
            written_ns = _now_ns()
        exchange = request.context
        if exchange.__class__ is not Exchange or not exchange.ray_id:
            if exchange is NOT_LOGGED or self.start is None:  # rare: refused before the router saw the request
                return
            self.start(request, written_ns)
            exchange = request.context
            if exchange.__class__ is not Exchange:
                return
        client, noted, zone = request.client, request.noted, exchange.zone
        shape = (
            client[0] if client else "",
            exchange.host,
            request.method,
            request.path,
            request.query_string,
            request.http_version,
            noted[USER_AGENT],
            noted[REFERER],
            noted[REQUESTED_WITH],
            response.content_type,
            request.server,
            exchange.country,
            exchange.asn,
            zone.zone_name if zone else "",
            exchange.cache_status,
            exchange.network,
            exchange.rpc_method,
            exchange.rpc_requests,
            exchange.rpc_error_code,
            exchange.upstream,
        )
        journal = self.journal
        number = self._shapes.get(shape)
        end = journal.end
        if number is not None and exchange.verdict is ALLOWED and end + _ROW_SIZE <= self._limit:
            ray = exchange.ray_id.encode()
            try:
                _ROW_FRAME.pack_into(
                    journal.mapping,  # type: ignore[arg-type]  # not None: ``limit`` is 0 without a mapping
                    end,
                    _ROW_LENGTH,
                    ROW,
                    *numbers_of((request, response, sent_bytes, written_ns), exchange),
                    ray,
                    number,
                    COMMIT_MARK,
                )
            except struct.error:  # a number beyond 64 bits: kept whole, below
                journal.scrub(end, _ROW_SIZE)
            else:
                if len(ray) == _RAY_LENGTH:
                    journal.end = end + _ROW_SIZE
                    return
                journal.scrub(end, _ROW_SIZE)  # a ray id that is not 16 characters: kept whole
        self._commit_slowly(request, response, exchange, shape, (sent_bytes, written_ns))

    def _commit_slowly(
        self,
        request: EdgeRequest,
        response: EdgeResponse,
        exchange: Exchange,
        shape: Shape,
        sent: tuple[int, int],
    ) -> None:
        """``commit`` for the rest: the first row of a period or of a shape, a full mapping, a record kept whole."""
        numbers = numbers_of((request, response, *sent), exchange)
        row: bytes | None = None
        ray = exchange.ray_id.encode()
        if exchange.verdict is ALLOWED and len(ray) == _RAY_LENGTH and b"\n" not in ray:
            with contextlib.suppress(struct.error):
                row = ROW_PAYLOAD.pack(*numbers, ray, 0)
        whole = b""
        if row is None:
            record = record_of(shape, exchange.ray_id, numbers)
            verdict = exchange.verdict
            events = []
            if verdict.matches:
                record |= security_fields(verdict)
                events = _events(request, response, exchange)
            if verdict.scores is not None:
                record |= attack_score_fields(verdict.scores)
            whole = marshal.dumps((record, events))
        for _attempt in range(2):  # the second in the next period, when the open one is full
            if self.journal.mapping is None and not self._open():
                break
            if row is None:
                if self.journal.append(WHOLE, whole):
                    self._appended()
                    return
            else:
                number = self._shape_number(shape)
                if number is not None and self.journal.append(ROW, row[:-4] + _SHAPE_NUMBER.pack(number)):
                    self._appended()
                    return
            self.seal()
        self.lost += 1
        RECORDS_LOST.inc()

    def _shape_number(self, shape: Shape) -> int | None:
        """The shape's number in the open period, its frame appended first when it is new; None when the period
        has no room for that frame."""
        number = self._shapes.get(shape)
        if number is None:
            number = len(self._shapes)
            if not self.journal.append(SHAPE, marshal.dumps(shape)):
                return None
            self._shapes[shape] = number
        return number

    def _appended(self) -> None:
        """After the slow way appended a frame (which may have written zeros ahead): past the rows the period should
        hold, its seal is asked for."""
        self._limit = min(self.journal.limit, self._rows_end)
        if self.journal.end > self._rows_end and not self._sealing:
            self._sealing = True
            self._seal_soon()

    def _open(self) -> bool:
        """Opens the journal's next period, and schedules its seal on the running loop (if any)."""
        journal = self.journal
        if not journal.open():
            return False
        self._rows_end = journal.end + self.max_rows * _ROW_SIZE
        self._limit = min(journal.limit, self._rows_end)
        with contextlib.suppress(RuntimeError):  # outside a loop: ``emit`` seals at once
            self._timer = asyncio.get_running_loop().call_later(self.seal_interval, self.seal)
        return True

    def _seal_soon(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # outside a loop: ``emit`` seals at once
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_soon(self.seal)

    def emit(self, answers: list[Answer], start: Callable[[EdgeRequest, int], object] | None = None) -> None:
        """``commit`` for a list of answers, as ``(request, response, sent_bytes, written_ns)``; outside an event
        loop (a script, a test) the period is sealed at once."""
        if start is not None:
            self.start = start
        for request, response, sent_bytes, written_ns in answers:
            self.commit(request, response, sent_bytes, written_ns)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.seal()

    def seal(self) -> None:
        """Seals the journal's open period now (if one is open), for the delivery process to take."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._detach()
        if self.journal.mapping is not None:
            self.journal.seal()
        self._shapes = {}
        self._limit = self._rows_end = 0
        self._sealing = False

    def flush(self) -> None:
        """Seals the open period now: for shutdown, scripts and tests, which then find its records sealed on disk
        (they are in the journal, where a crash leaves them, from the moment ``commit`` returns)."""
        self.seal()

    def close(self) -> None:
        """Seals the open period and closes the journal (on shutdown)."""
        self.seal()
        self.journal.close()


def numbers_of(answer: Answer, exchange: Exchange) -> tuple[int, ...]:
    """The numbers of an answer's row, in the order of ``NUMBER_COLUMNS`` (what ``commit_in_python`` packs, and the
    C writer reads for itself)."""
    request, response, sent_bytes, written_ns = answer
    origin_status, origin_duration_ms = exchange.origin_status, exchange.origin_duration_ms
    return (
        request.client[1] if request.client else 0,
        request.content_length,
        response.status,
        len(response.body),
        sent_bytes,
        exchange.started_ns,
        written_ns,
        -1 if origin_status is None else origin_status,
        -1 if origin_duration_ms is None else origin_duration_ms,
    )


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
