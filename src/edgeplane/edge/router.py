"""The edge listener's router: host and path routing, HTTP checks, and the gateway.

The checks, in order: ``/healthz`` answers at once; any other path but ``/v1/<network>`` is 404; then the Host must be
well-formed (400) and a web3 hostname (404), the network must exist (404), the method must be POST (405, with
``Allow: POST``), the content type JSON (415), the body not coded (415 for a Content-Encoding other than ``identity``,
with ``Accept-Encoding: identity``), and the body within the server's ``max_body_bytes`` (413, answered by
``HttpServer`` once the checks here have passed, before the body is read). Each answer is a JSON-RPC error object
with ``id: null``. All of them are decided from the request head; only a request that passes reaches the gateway,
with its body. The router also words what the server refuses by itself (``refusal_answer``: a malformed request, a
head or body too large, a timeout, ...): the server decides and knows only HTTP, and the words are the router's, in
the same JSON-RPC form (``edgeplane.edge.refusals``).

A WebSocket handshake (``GET /v1/<network>`` with ``Upgrade: websocket``, when ``websocket_limits`` are given) goes
through the same host and network checks and the zone's firewall, without the POST and content type ones; once they
pass it is accepted (``edgeplane.edge.websocket``) and each message on the socket is answered by the gateway as a
body would be (``edgeplane.edge.socket_messages``).

Paths are routed as sent, percent-encoding and all: ``/v1/mainnet`` is mainnet, and ``/v1/mainnet/``,
``/v1/mainnet%2f``, ``/v1/%6dainnet`` or ``/v1/./mainnet`` are networks of those names, which do not exist (404). So
each network has one spelling, and the firewall's ``http.request.uri.path`` (the path as sent) is the path that was
routed: a rule written for ``/v1/mainnet`` sees every request that reaches mainnet.

The zone's firewall (``edgeplane.waf.firewall``) sees every request of the zone, whatever its path or method, as the
hosted product's does: a scanner probing ``/wp-admin`` is a security event. For a zone with a firewall, a refusal
decided from the head (404, 405, 415) waits until the body is read (within ``max_body_bytes``; a larger one is
answered 413 by ``HttpServer`` and not evaluated) and the firewall has run; a request it blocks gets the block,
the others their refusal. Requests for hosts that are no web3 hostname, or with a malformed Host, have no zone and
are refused at once. A blocked request is answered with the rule's custom response, or 403 and a JSON-RPC error
object (code -32003, the request's ``id`` when the body is a JSON-RPC request, else null) whose ``data`` holds the
ray id. The verdict goes into the request's log records: the ``Security*`` fields of ``http_requests`` and one
``firewall_events`` record per match. When a Logpush job of the zone logs the attack scores (the snapshot's
``attack_score_zones``), the request is scored (with or without a firewall) and the scores go into its record.

The client's country and ASN (``edgeplane.edge.client_location``) are found once per request, for the firewall's
``ip.src.country`` / ``ip.src.asnum`` and the log records' ``ClientCountry`` / ``ClientASN``.

Every answer but ``/healthz`` carries the request's ray id in a ``cf-ray`` header (``<16 hex digits>-EDG``), whether
or not request logging is on: it is what a user quotes to find a request, in the logs or in a firewall block.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from typing import Final

import structlog

from edgeplane.body_document import BodyDocument, NotJson
from edgeplane.bounded_memo import BoundedMemo
from edgeplane.configuration.snapshot import EdgeSnapshot, SnapshotHolder
from edgeplane.edge.client_location import ClientLocator
from edgeplane.edge.exchange import NOT_LOGGED, Exchange, new_ray_id
from edgeplane.edge.head_follower import HeadFollower
from edgeplane.edge.http_server import (
    CONTENT_TYPE,
    HOST,
    EdgeRequest,
    EdgeResponse,
    HttpLimits,
    Refusal,
    UpgradedSession,
)
from edgeplane.edge.refusals import jsonrpc_error, refusal_answer
from edgeplane.edge.request_log import RequestLog
from edgeplane.edge.socket_messages import GatewayMessages
from edgeplane.edge.websocket import WebSocketLimits, WebSocketSession, accept
from edgeplane.gateway.request_facts import JsonRpcReader
from edgeplane.gateway.service import Gateway, GatewayResponse
from edgeplane.jsonrpc.envelope import encode
from edgeplane.jsonrpc.errors import INVALID_REQUEST
from edgeplane.metrics import RATELIMIT_ACTIONS
from edgeplane.rate_table import RateTable
from edgeplane.rules import RequestFields
from edgeplane.waf.events import recorded_action
from edgeplane.waf.firewall import Verdict, scored_verdict
from edgeplane.waf.rate_limits import SOURCE as RATELIMIT_SOURCE
from edgeplane.waf.rate_limits import now_ms, origin_score

log = structlog.get_logger(__name__)

FIREWALL_BLOCKED: Final = -32003
RATE_LIMITED: Final = -32005  # the JSON-RPC code nodes and hosted providers answer "limit exceeded" with

_HEALTHY = EdgeResponse(200, b'{"status":"ok"}')
_WRONG_METHOD_HEADERS = ((b"allow", b"POST"),)
_UNSUPPORTED_MEDIA_TYPE = jsonrpc_error(
    415, INVALID_REQUEST, "unsupported media type; use Content-Type: application/json"
)
_MALFORMED_HOST = jsonrpc_error(400, INVALID_REQUEST, "malformed Host header")
# A coded body (gzip, ...) is refused rather than decoded: the firewall and the gateway read the body as sent, and a
# decompressor would need its own bounds against a small body that inflates without end.
_UNSUPPORTED_ENCODING = jsonrpc_error(
    415,
    INVALID_REQUEST,
    "unsupported content encoding; send the body without Content-Encoding",
    headers=((b"accept-encoding", b"identity"),),
)


class EdgeRouter:
    """The edge listener's handler for ``HttpServer``: routes a request to the gateway or refuses it."""

    def __init__(
        self,
        gateway: Gateway,
        snapshots: SnapshotHolder[EdgeSnapshot],
        request_log: RequestLog | None = None,
        locator: ClientLocator | None = None,
        *,
        counters: RateTable | None = None,
        jsonrpc_reader: JsonRpcReader | None = None,
        websocket_limits: WebSocketLimits | None = None,
        head_poll_seconds: float = 1.0,
    ) -> None:
        """``locator`` finds the client's country and ASN; without one they are unknown. ``counters``: the node's
        rate counters; without them rate limiting rules do not run. ``jsonrpc_reader``: the gateway's reading of a
        request as JSON-RPC for the firewall's ``edgeplane.jsonrpc.*`` fields (with its cost table); without one
        the fields cost nothing. ``websocket_limits``: the bounds of a WebSocket at ``/v1/<network>``; without
        them a WebSocket handshake is refused like any other GET (405). ``head_poll_seconds``: how often a
        network's ``newHeads`` follower polls for new blocks while it has subscribers."""
        self.gateway = gateway
        self.counters = counters
        self.jsonrpc_reader = jsonrpc_reader
        self.snapshots = snapshots
        self.websocket_limits = websocket_limits
        self.head_poll_seconds = head_poll_seconds
        self._head_followers: dict[str, HeadFollower] = {}  # one per network, made at its first socket
        self.request_log = request_log
        self.locator = locator or ClientLocator()
        # Journals a request's log records; ``HttpServer`` calls it just before it writes the answer, so they are
        # journalled before the client can see it. The request log's own ``commit``, called without a frame of the
        # router's; it starts the exchange of a request the router did not see (refused by the server before the
        # router saw it, a body too large say, or the handler failed early) with ``_start``.
        self.commit_answer: Callable[[EdgeRequest, EdgeResponse, int], None] = _no_log
        if request_log is not None:
            request_log.start = self._start
            self.commit_answer = request_log.commit

    def answer_head(self, request: EdgeRequest) -> EdgeResponse | None:
        """The answer to a request that does not reach the gateway, decided from its head; None for one that does."""
        if request.raw_path == "/healthz":
            request.context = NOT_LOGGED
            return _HEALTHY
        response = self._refusal(request)
        if response is None:
            return None
        exchange = self._exchange(request)
        if exchange.zone is not None and self.snapshots.current.firewall(exchange.zone.zone_id) is not None:
            exchange.refusal = response  # answered by ``handle`` once the firewall has run
            return None
        exchange = self._start(request, time.time_ns())
        return _with_ray(response, exchange.ray_id)

    def refusal_answer(self, refusal: Refusal, request: EdgeRequest | None, limits: HttpLimits) -> EdgeResponse:
        """The answer to what ``HttpServer`` refuses by itself, worded as a JSON-RPC error object
        (``edgeplane.edge.refusals``)."""
        return refusal_answer(refusal, request, limits)

    def _exchange(self, request: EdgeRequest) -> Exchange:
        """The request's exchange, made once: ``answer_head`` makes it, ``handle`` reuses it."""
        exchange = request.context
        if not isinstance(exchange, Exchange):
            host, valid = _host(request)
            exchange = request.context = Exchange(host, self.snapshots.current.web3_zone(host) if valid else None)
            path = request.raw_path
            if path.startswith("/v1/"):  # the network asked for, as sent, served or not
                exchange.network = path[4:]
        return exchange

    def _refusal(self, request: EdgeRequest) -> EdgeResponse | None:
        # The path as sent, percent-encoding and all (see the module docstring).
        path = request.raw_path
        if not path.startswith("/v1/"):
            return jsonrpc_error(404, INVALID_REQUEST, f"not found: {path}; use POST /v1/<network>")
        exchange = self._exchange(request)
        if exchange.zone is None:
            if not _host(request)[1]:
                return _MALFORMED_HOST
            return jsonrpc_error(404, INVALID_REQUEST, f"no web3 gateway is configured for host {exchange.host!r}")
        network = path[4:]
        if network not in self.gateway.pools:
            unknown = self.gateway.unknown_network(network)
            return EdgeResponse(unknown.status, unknown.body)
        if request.upgrade and self.websocket_limits is not None:
            return None  # a WebSocket handshake: no body, and its messages are JSON-RPC (``_upgrade``)
        if request.method != "POST":
            return jsonrpc_error(
                405,
                INVALID_REQUEST,
                f"method {request.method} not allowed; use POST",
                headers=_WRONG_METHOD_HEADERS,
            )
        if not _is_json(request):
            return _UNSUPPORTED_MEDIA_TYPE
        coding = request.content_encoding
        if coding is not None and coding.strip().lower() != b"identity":
            return _UNSUPPORTED_ENCODING
        return None

    def handle(self, request: EdgeRequest) -> EdgeResponse | Awaitable[EdgeResponse]:
        """The answer to a request ``answer_head`` let through: the firewall's refusal, the refusal ``answer_head``
        left for after the firewall, or the gateway's answer (at once when the gateway has it at hand)."""
        exchange = self._start(request, time.time_ns())
        body = BodyDocument(request.body)  # parsed once, by the first reader: the firewall, its refusal, the gateway
        zone = exchange.zone
        snapshot = self.snapshots.current
        firewall = snapshot.firewall(zone.zone_id) if zone is not None else None
        scored = zone is not None and zone.zone_id in snapshot.attack_score_zones
        if firewall is not None:
            verdict = exchange.verdict = firewall.evaluate(
                self._fields(request, exchange, body), score=scored, counters=self.counters
            )
            if verdict.matches and firewall.rate_limits:
                _count_actions(verdict)
            if verdict.blocked:
                exchange.rpc_method, exchange.rpc_requests = _asked(body)
                if verdict.response is None:
                    exchange.rpc_error_code = RATE_LIMITED if verdict.rate_limited else FIREWALL_BLOCKED
                refusal = _refusal(verdict, exchange.ray_id, body)
                if verdict.pending:  # a later rule refused a request an earlier one counts by its answer
                    self._count_answer(verdict, refusal.status, reached_origin=False)
                return refusal
        elif scored:
            exchange.verdict = scored_verdict(self._fields(request, exchange, body))
        if exchange.refusal is not None:
            if exchange.verdict.pending:
                self._count_answer(exchange.verdict, exchange.refusal.status, reached_origin=False)
            return _with_ray(exchange.refusal, exchange.ray_id)
        if request.upgrade and self.websocket_limits is not None:
            return self._upgrade(request, exchange, self.websocket_limits)
        answer = self.gateway.respond(exchange.network, body)
        if isinstance(answer, GatewayResponse):
            return self._response(answer, exchange)
        return self._awaited(answer, exchange)

    def _upgrade(self, request: EdgeRequest, exchange: Exchange, limits: WebSocketLimits) -> EdgeResponse:
        """The answer to a WebSocket handshake that passed the checks and the firewall: the socket's messages are
        answered by the gateway for the path's network (``edgeplane.edge.socket_messages``)."""
        network = exchange.network
        heads = self._head_followers.get(network)
        if heads is None:
            heads = self._head_followers[network] = HeadFollower(self.gateway, network, self.head_poll_seconds)
        messages = GatewayMessages(self.gateway, network, heads, max_subscriptions=limits.max_subscriptions)

        def open_session(transport: asyncio.Transport, on_closed: Callable[[UpgradedSession], None]) -> UpgradedSession:
            return WebSocketSession(transport, messages, limits, asyncio.get_running_loop(), on_closed)

        return accept(request, open_session, headers=((b"cf-ray", exchange.ray_id.encode() + b"-EDG"),))

    async def _awaited(self, answering: Awaitable[GatewayResponse], exchange: Exchange) -> EdgeResponse:
        return self._response(await answering, exchange)

    def _response(self, answer: GatewayResponse, exchange: Exchange) -> EdgeResponse:
        exchange.cache_status = answer.cache_status
        exchange.rpc_method, exchange.rpc_requests = answer.method, answer.requests
        exchange.rpc_error_code, exchange.upstream = answer.error_code, answer.upstream
        if answer.cache_status != "hit":
            exchange.origin_status = answer.status
            exchange.origin_duration_ms = (time.time_ns() - exchange.started_ns) // 1_000_000
        if exchange.verdict.pending:
            self._count_answer(exchange.verdict, answer.status, reached_origin=bool(answer.upstream))
        return EdgeResponse(answer.status, answer.body, headers=((b"cf-ray", exchange.ray_id.encode() + b"-EDG"),))

    def _count_answer(
        self, verdict: Verdict, status: int, *, reached_origin: bool, headers: tuple[tuple[bytes, bytes], ...] = ()
    ) -> None:
        """Counts what the rate limiting rules that count by the answer owe for this request: its answer's status
        and headers set for their counting expressions, only when it reached a node for ``requests_to_origin``."""
        counters = self.counters
        if counters is None:
            return
        now = now_ms()
        for pending in verdict.pending:
            limit = pending.limit
            if limit.requests_to_origin and not reached_origin:
                continue
            pending.request.set_response(status, headers)
            score = origin_score(limit, headers) if limit.score_header else 0
            try:
                limit.count(counters, pending, score, now)
            except Exception:  # a counting expression never raises; the table's errors are bugs, not the client's
                log.exception("a rate limiting rule could not count an answer")

    def _start(self, request: EdgeRequest, started_ns: int) -> Exchange:
        """The request's exchange, started: its start time, a ray id, and the client's country and ASN."""
        exchange = self._exchange(request)
        exchange.started_ns = started_ns
        exchange.ray_id = new_ray_id()
        location = self.locator.locate(request)
        exchange.country, exchange.asn = location.country, location.asn
        return exchange

    def _fields(self, request: EdgeRequest, exchange: Exchange, body: BodyDocument) -> RequestFields:
        client_ip, client_port = request.client if request.client else ("", 0)
        fields = RequestFields.from_http(
            method=request.method,
            scheme="http",
            host=exchange.host,
            raw_path=request.raw_path,
            query=request.query_string.decode("latin-1"),
            headers=request.headers,
            body=request.body,
            body_document=body,
            client_ip=client_ip,
            client_port=client_port,
            server_port=request.server[1] if request.server else 80,
            http_version=request.http_version,
            country=exchange.country,
            asn=exchange.asn,
            ray_id=exchange.ray_id,
        )
        if self.jsonrpc_reader is not None:
            fields.jsonrpc_reader = self.jsonrpc_reader
        return fields


def _refusal(verdict: Verdict, ray_id: str, body: BodyDocument) -> EdgeResponse:
    """The answer to a request the firewall blocked: the rule's custom response, or a JSON-RPC error (-32005 and
    429 from a rate limiting rule, with ``Retry-After``; -32003 and 403 from any other)."""
    headers: tuple[tuple[bytes, bytes], ...] = ((b"cf-ray", ray_id.encode() + b"-EDG"),)
    retry_after = -(-verdict.retry_after_ms // 1000) if verdict.rate_limited else 0
    if verdict.rate_limited:
        headers += ((b"retry-after", str(max(1, retry_after)).encode()),)
    if verdict.response is not None:
        custom = verdict.response
        return EdgeResponse(custom.status, custom.content, content_type=custom.content_type, headers=headers)
    if verdict.rate_limited:
        limited = {
            "code": RATE_LIMITED,
            "message": "rate limited: too many requests",
            "data": {"ray_id": ray_id, "retry_after_seconds": max(1, retry_after)},
        }
        answer = encode({"jsonrpc": "2.0", "id": _request_id(body), "error": limited})
        return EdgeResponse(verdict.status, answer, headers=headers)
    error = {"code": FIREWALL_BLOCKED, "message": "request blocked by the firewall", "data": {"ray_id": ray_id}}
    answer = encode({"jsonrpc": "2.0", "id": _request_id(body), "error": error})
    return EdgeResponse(verdict.status, answer, headers=headers)


def _count_actions(verdict: Verdict) -> None:
    """Counts the rate limiting rules' actions in ``edgeplane_ratelimit_actions_total``."""
    for match in verdict.matches:
        if match.source == RATELIMIT_SOURCE:
            RATELIMIT_ACTIONS.labels(match.rule_id, recorded_action(match.action)).inc()


def _asked(body: BodyDocument) -> tuple[str, int]:
    """What a request the gateway never read asked, for its record, as the gateway would log it: the JSON-RPC
    method (a batch's first request's; "" without one) and the number of requests (a batch's length, 0 for a body
    that is not a JSON-RPC object or batch)."""
    try:
        document = body.document()
    except NotJson:
        return "", 0
    if isinstance(document, dict):
        first, requests = document, 1
    elif isinstance(document, list) and document:
        first, requests = document[0], len(document)
    else:
        return "", 0
    method = first.get("method") if isinstance(first, dict) else None
    return (method if isinstance(method, str) else ""), requests


def _request_id(body: BodyDocument) -> str | int | None:
    """The ``id`` of a single JSON-RPC request, or None (a batch, or a body that is not a JSON-RPC request)."""
    try:
        document = body.document()
    except NotJson:
        return None
    if isinstance(document, dict):
        value = document.get("id")
        if isinstance(value, str | int) and not isinstance(value, bool):
            return value
    return None


def _with_ray(response: EdgeResponse, ray_id: str) -> EdgeResponse:
    return EdgeResponse(
        response.status,
        response.body,
        content_type=response.content_type,
        headers=(*response.headers, (b"cf-ray", ray_id.encode() + b"-EDG")),
    )


def _host(request: EdgeRequest) -> tuple[str, bool]:
    """The request's host (``_host_name``): the Host header's, or the absolute-form target's that the server put in
    its place; without either (HTTP/1.0), the address the client connected to."""
    value = request.noted[HOST]
    if value is None:
        return (request.server[0] if request.server else ""), True
    return _HOSTS(value)


# A Host header, or the authority of an absolute-form target: a DNS name or an IP address, and a port (RFC 9110,
# 7.2; stricter than RFC 3986's reg-name, which also allows sub-delimiters and percent-encoding).
_HOST_SYNTAX: Final = re.compile(r"(?:\[[0-9a-f:.]+\]|[a-z0-9._-]*)(?::[0-9]{1,5})?")


def _host_name(value: bytes) -> tuple[str, bool]:
    """The host of a Host header, lower case, without the port or an IPv6 address's brackets; and whether the
    header is well-formed (a malformed one is refused with 400, as RFC 9112, 3.2 asks, and routes nowhere)."""
    host = value.decode("latin-1").lower()
    valid = _HOST_SYNTAX.fullmatch(host) is not None
    if host.startswith("["):
        return (host[1 : host.find("]")] if "]" in host else host), valid
    return (host.rsplit(":", 1)[0] if ":" in host else host), valid


_HOSTS = BoundedMemo(_host_name)  # hosts recur from request to request (see ``edgeplane.bounded_memo``)


def _is_json(request: EdgeRequest) -> bool:
    value = request.noted[CONTENT_TYPE]
    return value is not None and _JSON_TYPES(value)


def _names_json(content_type: bytes) -> bool:
    return content_type.split(b";", 1)[0].strip().lower() == b"application/json"


_JSON_TYPES = BoundedMemo(_names_json)  # content types recur from request to request


def _no_log(request: EdgeRequest, response: EdgeResponse, sent_bytes: int) -> None:
    """``commit_answer`` without a request log."""
