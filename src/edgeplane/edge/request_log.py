"""The ``http_requests`` record of every request the edge answers, and the ``firewall_events`` records of every
firewall match, appended to the log store.

Built from what the edge knows when it answers: the client, the request line and headers, the zone, the response
and its timings. Fields the edge cannot know (bot scores, TLS details, cache status) are left out of the record and
appear as the dataset's missing values in the output. ``ClientCountry`` and ``ClientASN`` are what the router
found for the client (``edgeplane.edge.client_location``: a trusted header or a MaxMind database). Emission never
blocks the request: the record is built after the response is written, in bulk, as a dictionary; the store buffers
it and turns whole blocks of records into columns on its flusher thread (``append_rows``), and a store that refuses
(its disk stalled) is counted in a metric, not raised. A request the firewall matched has its ``Security*`` fields
set and one ``firewall_events`` record per match (``edgeplane.waf.events``), sharing its ``RayID``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from typing import Any

from prometheus_client import Counter

from edgeplane.edge.http_server import EdgeRequest, EdgeResponse
from edgeplane.logs.log_store import LogStore, LogStoreError
from edgeplane.store.snapshot import ZoneRoute
from edgeplane.waf.events import FIREWALL_EVENTS, firewall_event_records, security_fields
from edgeplane.waf.firewall import ALLOWED, Verdict

HTTP_REQUESTS = "http_requests"

RECORDS_REFUSED = Counter(
    "edgeplane_log_records_refused_total", "Log records the log store refused (its disk fell behind).", ["dataset"]
)
RECORDS_EMITTED = Counter("edgeplane_log_records_emitted_total", "Log records appended to the log store.", ["dataset"])


_RAY_PREFIX = int.from_bytes(os.urandom(4), "big")
_ray_counter = itertools.count(int.from_bytes(os.urandom(4), "big"))


def new_ray_id() -> str:
    """A request id: 16 lowercase hex characters, unique across processes (a random prefix per process and a
    counter; no system call per request)."""
    return f"{_RAY_PREFIX:08x}{next(_ray_counter) & 0xFFFFFFFF:08x}"


class RequestLog:
    """Appends one ``http_requests`` record per answered request. The record is built and appended just after the
    response is written (a callback scheduled on the loop), in bulk with the others of the same moment, so that
    logging adds nothing to the time a client waits."""

    def __init__(self, store: LogStore) -> None:
        self.store = store
        # (emitted, refused) counters by dataset, labelled once rather than per append.
        self._counters = {
            dataset: (RECORDS_EMITTED.labels(dataset), RECORDS_REFUSED.labels(dataset))
            for dataset in (HTTP_REQUESTS, FIREWALL_EVENTS)
        }
        self._waiting: list[tuple[EdgeRequest, EdgeResponse, int, dict[str, Any]]] = []
        self._scheduled = False

    def emit(self, request: EdgeRequest, response: EdgeResponse, **details: Any) -> None:
        """Records one answered request (see ``record`` for ``details``)."""
        ended_ns = time.time_ns()
        self._waiting.append((request, response, ended_ns, details))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._flush()
            return
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)

    def _flush(self) -> None:
        waiting, self._waiting = self._waiting, []
        self._scheduled = False
        self._append(
            HTTP_REQUESTS,
            [
                self.record(request, response, ended_ns=ended_ns, **details)
                for request, response, ended_ns, details in waiting
            ],
        )
        events = [
            event
            for request, response, ended_ns, details in waiting
            if details.get("verdict", ALLOWED).matches
            for event in self.events(request, response, ended_ns=ended_ns, **details)
        ]
        if events:
            self._append(FIREWALL_EVENTS, events)

    def _append(self, dataset: str, records: list[dict[str, Any]]) -> None:
        emitted, refused = self._counters[dataset]
        try:
            self.store.append_rows(dataset, records)
        except LogStoreError:
            refused.inc(len(records))
            return
        emitted.inc(len(records))

    def events(
        self,
        request: EdgeRequest,
        response: EdgeResponse,
        *,
        ray_id: str,
        started_ns: int,
        zone: ZoneRoute | None,
        host: str,
        verdict: Verdict = ALLOWED,
        origin_status: int | None = None,
        ended_ns: int,
        client_country: str = "",
        client_asn: int = 0,
        **_: Any,
    ) -> list[dict[str, Any]]:
        """The ``firewall_events`` records of one request (none when the firewall matched nothing). Each
        carries ``ZoneName`` (not a field of the dataset), by which delivery gives a zone's jobs their records."""
        if not verdict.matches:
            return []
        referer = _text(request.header(b"referer"))
        referer_scheme, _sep, rest = referer.partition("://")
        referer_host, _sep, referer_target = rest.partition("/")
        referer_path, _sep, referer_query = ("/" + referer_target if rest else "").partition("?")
        common: dict[str, Any] = {
            "ClientIP": request.client[0] if request.client else "",
            "ClientRequestHost": host,
            "ClientRequestMethod": request.method,
            "ClientRequestPath": request.path,
            "ClientRequestQuery": request.query_string.decode("latin-1"),
            "ClientRequestProtocol": f"HTTP/{request.http_version}",
            "ClientRequestScheme": "http",
            "ClientRequestUserAgent": _text(request.header(b"user-agent")),
            "ClientRefererHost": referer_host if rest else "",
            "ClientRefererPath": referer_path,
            "ClientRefererQuery": referer_query,
            "ClientRefererScheme": referer_scheme if rest else "",
            "RayID": ray_id,
            "OriginatorRayID": "00",
            "ZoneName": zone.zone_name if zone else "",
        }
        if origin_status is not None:
            common["OriginResponseStatus"] = origin_status
        if client_country:
            common["ClientCountry"] = client_country
        if client_asn:
            common["ClientASN"] = client_asn
        return firewall_event_records(verdict, common, datetime_ns=started_ns, edge_status=response.status)

    def record(
        self,
        request: EdgeRequest,
        response: EdgeResponse,
        *,
        ray_id: str,
        started_ns: int,
        zone: ZoneRoute | None,
        host: str,
        origin_status: int | None = None,
        origin_duration_ms: int | None = None,
        verdict: Verdict = ALLOWED,
        ended_ns: int,
        client_country: str = "",
        client_asn: int = 0,
    ) -> dict[str, Any]:
        """The ``http_requests`` record of one request."""
        client_ip, client_port = request.client if request.client else ("", 0)
        server_ip = request.server[0] if request.server else ""
        query = request.query_string.decode("latin-1")
        uri = request.path + ("?" + query if query else "")
        body_bytes = len(response.body)
        record: dict[str, Any] = {
            "RayID": ray_id,
            "ZoneName": zone.zone_name if zone else "",
            "ClientIP": client_ip,
            "ClientSrcPort": client_port,
            "ClientRequestHost": host,
            "EdgeRequestHost": host,
            "ClientRequestMethod": request.method,
            "ClientRequestPath": request.path,
            "ClientRequestURI": uri,
            "ClientRequestProtocol": f"HTTP/{request.http_version}",
            "ClientRequestScheme": "http",
            "ClientRequestSource": "eyeball",
            "ClientRequestUserAgent": _text(request.header(b"user-agent")),
            "ClientRequestReferer": _text(request.header(b"referer")),
            "ClientXRequestedWith": _text(request.header(b"x-requested-with")),
            "ClientRequestBytes": request.content_length,
            "EdgeResponseStatus": response.status,
            "EdgeResponseBodyBytes": body_bytes,
            "EdgeResponseBytes": body_bytes + 128 + sum(len(k) + len(v) + 4 for k, v in response.headers),
            "EdgeResponseContentType": response.content_type.decode("latin-1"),
            "EdgeStartTimestamp": started_ns,
            "EdgeEndTimestamp": ended_ns,
            "EdgeTimeToFirstByteMs": max(0, (ended_ns - started_ns) // 1_000_000),
            "EdgeServerIP": server_ip,
        }
        if origin_status is not None:
            record["OriginResponseStatus"] = origin_status
        if origin_duration_ms is not None:
            record["OriginResponseDurationMs"] = origin_duration_ms
        if verdict.matches:
            record.update(security_fields(verdict))
        if client_country:
            record["ClientCountry"] = client_country
        if client_asn:
            record["ClientASN"] = client_asn
        return record


def _text(value: bytes | None) -> str:
    return value.decode("latin-1") if value else ""
