"""The ``http_requests`` record of every request the edge answers, and the ``firewall_events`` records of every
firewall match, written to the request journal, which the delivery process takes into the log store.

Built from what the edge knows when it answers: the client, the request line and headers, the zone, the response
and its timings, and what the gateway's response cache did (``CacheCacheStatus``). Fields the edge cannot know (bot
scores, TLS details) are left out of the record and appear as the dataset's missing values in the output.
``ClientCountry`` and ``ClientASN`` are what the router
found for the client (``edgeplane.edge.client_location``: a trusted header or a MaxMind database). A request the
firewall matched has its ``Security*`` fields set and one ``firewall_events`` record per match
(``edgeplane.waf.events``), sharing its ``RayID``. The ``WAF*AttackScore`` fields are the request's attack scores when
they were computed (a rule read them, or a Logpush job of the zone logs them: ``score_logging_zones``), else 100.

Emission never blocks the request and does all its work on the event loop's thread, after the client has its answer
(the router emits from ``answered``, which the edge's HTTP server calls with a batch of answers once they are
written). ``emit`` adds the batch's requests (each with its ``Exchange``) to the period's ``RequestRows`` at once, in
one loop: the texts as a shape, the numbers as packed machine integers, nothing that holds the request (whose body
may be large); the rare rows kept whole (a firewall match) come back to it to build. Every ``flush_interval``
(50 ms) the rows added since the last look go to the journal (``edgeplane.edge.request_journal``) and are
forgotten; every ``seal_interval`` (1 s), or just after the answer that makes ``max_rows`` rows, the period's file is
sealed, and the delivery process turns its rows into one Arrow record batch for the log store
(``edgeplane.edge.journal_intake``). Outside an event loop (a script, a test) every emit is journalled and sealed at
once.

Why on the loop's thread: a thread that handles records while the loop serves requests takes the interpreter's lock
at every point the loop lets go of it (each socket call), which cost the edge more than the work itself (see
``docs/log-store.md``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Final

from edgeplane.edge.exchange import Exchange
from edgeplane.edge.http_server import REFERER, USER_AGENT, Answer, EdgeRequest, EdgeResponse
from edgeplane.edge.request_journal import RequestJournal
from edgeplane.edge.request_rows import NUMBER_COLUMNS, SHAPE_COLUMNS, RequestRows, protocol, record_of
from edgeplane.logs.datasets import Dataset, load_dataset
from edgeplane.logs.errors import LogsError
from edgeplane.logs.output_options import parse_logpull_options, parse_output_options
from edgeplane.store.snapshot import ConfigSnapshot
from edgeplane.waf.events import ATTACK_SCORE_FIELDS, attack_score_fields, firewall_event_records, security_fields

HTTP_REQUESTS: Final = "http_requests"

# The fields of an ``http_requests`` record the edge fills, besides ``ClientRequestScheme``, ``ClientRequestSource``
# and ``EdgeRequestHost`` (the same for every request, or a copy of another field).
HTTP_REQUEST_COLUMNS: Final = ("RayID", *SHAPE_COLUMNS, *NUMBER_COLUMNS, "EdgeTimeToFirstByteMs", *ATTACK_SCORE_FIELDS)


class RequestLog:
    """Journals one ``http_requests`` record per answered request, and the ``firewall_events`` records of its
    firewall matches (see the module docstring for when and how)."""

    def __init__(
        self,
        journal: RequestJournal,
        *,
        flush_interval: float = 0.05,
        seal_interval: float = 1.0,
        max_rows: int = 8192,
    ) -> None:
        """Rows go to ``journal`` every ``flush_interval`` seconds, and its period is sealed ``seal_interval``
        seconds after its first rows were journalled, or just after the answer that makes ``max_rows`` rows."""
        self.journal = journal
        self.flush_interval = flush_interval
        self.seal_interval = seal_interval
        self.max_rows = max_rows
        self._rows = RequestRows()
        self._period_rows = 0  # rows of the period already journalled
        self._period_started = 0.0  # when its first rows were journalled
        self._timer: asyncio.Handle | None = None  # the next look at the rows
        self._timer_loop: asyncio.AbstractEventLoop | None = None  # the loop it was scheduled on

    def emit(self, answers: list[Answer], start: Callable[[EdgeRequest, int], object] | None = None) -> None:
        """Records a batch of answered requests; called on the thread of the event loop that serves them. A request
        whose ``Exchange`` was not started is started with ``start(request, written_ns)`` first (without ``start``,
        it is not logged). Outside an event loop (a script, a test) the records are journalled and sealed at once."""
        rows = self._rows
        leftovers, unstarted = rows.add_answers(answers)
        if unstarted and start is not None:  # rare: refused before the router saw the request
            for request, _response, _sent_bytes, written_ns in unstarted:
                start(request, written_ns)
            leftovers += rows.add_answers(unstarted)[0]
        for (request, response, _sent_bytes, _written_ns), exchange, shape, numbers in leftovers:
            record = record_of(shape, exchange.ray_id, numbers)
            verdict = exchange.verdict
            if verdict.matches:
                record |= security_fields(verdict)
                rows.events.extend(_events(request, response, exchange))
            if verdict.scores is not None:
                record |= attack_score_fields(verdict.scores)
            rows.odd.append(record)
        full = self._period_rows + len(rows) >= self.max_rows
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
            self._timer.cancel()  # full (otherwise the pending look took the rows, above): seal at once instead
        self._timer_loop = loop  # a timer of a loop that has ended never runs: the next emit schedules another
        self._timer = loop.call_soon(self._look, True) if full else loop.call_later(self.flush_interval, self._look)

    def _look(self, seal: bool = False) -> None:
        """Every ``flush_interval`` while the period is open (or at once, ``seal``, when ``max_rows`` wait): the new
        rows to the journal; then, once the period is over, its seal."""
        self._timer = None
        self._journal_rows()
        if seal or time.monotonic() - self._period_started >= self.seal_interval:
            self._seal()
        loop = self._timer_loop
        if (len(self._rows) or self._period_rows) and loop is not None and loop.is_running():
            self._timer = loop.call_later(self.flush_interval, self._look)

    def flush(self) -> None:
        """Journals every record emitted so far, seals the period now, and returns once the journal has written
        and sealed them, on its thread too (after a slow write): for shutdown, scripts and tests, which then find
        the period sealed on disk. The loop's own looks (every ``flush_interval``) never wait so."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._journal_rows()
        self._seal()
        self.journal.flush()

    def close(self) -> None:
        """Journals and seals what waits, and closes the journal once it has written them all (on shutdown)."""
        self.flush()
        self.journal.close()

    def _journal_rows(self) -> None:
        chunk = self._rows.take_chunk()
        if chunk is None:
            return
        if not self._period_rows:
            self._period_started = time.monotonic()
        self._period_rows += chunk.count + len(chunk.odd)
        self.journal.write(chunk.encode())

    def _seal(self) -> None:
        if self._period_rows:
            self.journal.seal()
            self._rows = RequestRows()  # a new period numbers its shapes afresh
            self._period_rows = 0


def score_logging_zones(snapshot: ConfigSnapshot) -> frozenset[str]:
    """The ids of the zones whose requests' attack scores an enabled ``http_requests`` Logpush job logs: its field
    list names a ``WAF*AttackScore`` field or is empty (every field), or its filter names one. The edge scores every
    request of these zones that reaches the firewall stage; a job that no longer validates counts for nothing."""
    dataset = load_dataset(HTTP_REQUESTS)
    zones: set[str] = set()
    for job in snapshot.logpush_jobs:
        if not job.get("enabled") or job.get("dataset") != HTTP_REQUESTS or not _logs_attack_scores(job, dataset):
            continue
        if job.get("zone_id"):
            zones.add(job["zone_id"])
        else:
            zones.update(zone.zone_id for zone in snapshot.zones.values() if zone.account_id == job.get("account_id"))
    return frozenset(zones)


def _logs_attack_scores(job: dict[str, Any], dataset: Dataset) -> bool:
    try:
        if job.get("output_options") is not None:
            fields = parse_output_options(job["output_options"], dataset).field_names
        elif job.get("logpull_options"):
            fields = parse_logpull_options(job["logpull_options"], dataset).fields
        else:
            fields = ()
    except LogsError:
        return False
    if not fields or not set(fields).isdisjoint(ATTACK_SCORE_FIELDS):
        return True
    filter_text = str(job.get("filter") or "")
    return any(name in filter_text for name in ATTACK_SCORE_FIELDS)


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
