"""The edge's HTTP handling against hostile input: what a client that sends each request gets back.

The server is driven sans-IO: bytes go in through its connection protocol's ``data_received``, in any split, and what
it writes to its transport is read back as responses. Rows are raw requests, as an attacker would send them; the
router behind the server has a stand-in gateway (it answers 200 and records what reached it) and a firewall that
blocks any request whose ``http.host`` is ``blocked.example.com`` and logs any whose ``http.request.uri.path`` is
not ``/v1/mainnet``: a request that reaches the gateway must leave no log match, so it was seen by the firewall as
the request that was routed. (The firewall sees refused requests too: their refusal comes after it has run.)
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import Awaitable
from dataclasses import dataclass, field

import h11
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from edgeplane.body_document import BodyDocument
from edgeplane.configuration.snapshot import EdgeSnapshot, SnapshotHolder, ZoneRoute
from edgeplane.edge import refusals
from edgeplane.edge.exchange import Exchange
from edgeplane.edge.http_server import HOST, EdgeRequest, EdgeResponse, HttpLimits, HttpServer, Refusal
from edgeplane.edge.request_log import RequestLog
from edgeplane.edge.router import EdgeRouter
from edgeplane.gateway.service import GatewayResponse
from edgeplane.waf.firewall import Verdict, compile_firewall
from tests.support.journalled_store import JournalledStore

MAX_BODY = 4096
CALL = b'{"jsonrpc":"2.0","id":7,"method":"eth_blockNumber","params":[]}'
ZONE = ZoneRoute(zone_id="z" * 32, zone_name="example.com", account_id="a" * 32, plan="enterprise")
HOSTS = ("rpc.example.com", "blocked.example.com", "127.0.0.1")
GUARD = {"action": "block", "expression": 'http.host eq "blocked.example.com"', "id": "g" * 32}
PATH_WATCH = {"action": "log", "expression": 'http.request.uri.path ne "/v1/mainnet"', "id": "p" * 32}


# -- a transport, a connection, and what a client reads --------------------------------------------------------------


@dataclass
class WireTransport:
    """What a connection's protocol writes, and how it asked to close; reading pauses as the server asks."""

    protocol: asyncio.Protocol | None = None
    written: bytearray = field(default_factory=bytearray)
    closed: bool = False  # close, abort or write_eof: the server ended its side
    reading: bool = True

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after the close"
        self.written += data

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            asyncio.get_running_loop().call_soon(self._lost)

    def abort(self) -> None:
        self.close()

    def write_eof(self) -> None:
        self.closed = True

    def can_write_eof(self) -> bool:
        return True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"peername": ("198.51.100.7", 40000), "sockname": ("127.0.0.1", 8787)}.get(name, default)

    def _lost(self) -> None:
        if self.protocol is not None:
            self.protocol.connection_lost(None)


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def message(self) -> str:
        document = json.loads(self.body)
        assert isinstance(document, dict)
        return str(document["error"]["message"])


@dataclass
class Outcome:
    responses: list[Response]
    closed: bool  # the server ended the connection before the client did


def read_responses(data: bytes, *, head_requests: int = 0) -> list[Response]:
    """The responses in ``data`` (interim 1xx ones left out); the first ``head_requests`` have no body."""
    responses: list[Response] = []
    while data:
        head, separator, data = data.partition(b"\r\n\r\n")
        assert separator, f"an unfinished response head: {head!r}"
        status_line, *lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split()[1])
        if status < 200:
            continue
        headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
        size = 0 if len(responses) < head_requests else int(headers["content-length"])
        assert len(data) >= size, "a truncated response body"
        responses.append(Response(status, headers, data[:size]))
        data = data[size:]
    return responses


async def settle() -> None:
    for _ in range(8):
        await asyncio.sleep(0)


async def send(server: HttpServer, chunks: list[bytes], *, head_requests: int = 0) -> Outcome:
    """Sends ``chunks`` on one new connection, one read each, waiting while the server does not read; then waits
    for the answers and reports whether the server closed the connection by itself."""
    transport = WireTransport()
    protocol = server.protocol(asyncio.get_running_loop())
    transport.protocol = protocol
    protocol.connection_made(transport)  # type: ignore[arg-type]
    for chunk in chunks:
        for _ in range(200):
            if transport.reading or transport.closed:
                break
            await asyncio.sleep(0)
        if transport.closed:
            break
        protocol.data_received(chunk)
        await settle()
    await quiet(transport)
    closed = transport.closed
    if not closed:
        protocol.connection_lost(None)  # the client goes away
    return Outcome(read_responses(bytes(transport.written), head_requests=head_requests), closed)


async def quiet(transport: WireTransport) -> None:
    """Waits until the server has written all it will write without more input (a few turns without a write)."""
    written, still = len(transport.written), 0
    while still < 3:
        await settle()
        still = still + 1 if len(transport.written) == written else 0
        written = len(transport.written)


# -- a router behind the server ----------------------------------------------------------------------------------------


class StandInGateway:
    """Answers every request at once with 200, recording the network and body that reached it."""

    def __init__(self) -> None:
        self.pools = {"mainnet": object()}
        self.seen: list[tuple[str, bytes]] = []

    def respond(self, network: str, body: BodyDocument) -> GatewayResponse:
        self.seen.append((network, body.raw))
        return GatewayResponse(200, b'{"jsonrpc":"2.0","id":7,"result":"0x10"}')

    def unknown_network(self, network: str) -> GatewayResponse:
        return GatewayResponse(404, json.dumps({"error": {"message": f"unknown network {network!r}"}}).encode())


class WatchedRouter(EdgeRouter):
    """The router, keeping the firewall's verdict of each request it handles."""

    verdicts: list[Verdict]

    def handle(self, request: EdgeRequest) -> EdgeResponse | Awaitable[EdgeResponse]:
        answer = super().handle(request)
        assert isinstance(request.context, Exchange)
        self.verdicts.append(request.context.verdict)
        return answer


def edge_server(request_log: RequestLog | None = None, **limits: int) -> tuple[HttpServer, StandInGateway]:
    gateway = StandInGateway()
    snapshot = EdgeSnapshot(
        web3_hostnames=dict.fromkeys(HOSTS, ZONE),
        firewalls={ZONE.zone_id: compile_firewall({"http_request_firewall_managed": [PATH_WATCH, GUARD]})},
    )
    router = WatchedRouter(gateway, SnapshotHolder(snapshot), request_log)  # type: ignore[arg-type]
    router.verdicts = []
    return HttpServer(router, max_body_bytes=MAX_BODY, **limits), gateway


def request(
    target: str = "/v1/mainnet",
    *,
    host: str | None = "rpc.example.com",
    headers: str = "",
    body: bytes = CALL,
    version: str = "HTTP/1.1",
    method: str = "POST",
    length: bool = True,
    content_type: str = "application/json",
) -> bytes:
    head = f"{method} {target} {version}\r\n"
    if host is not None:
        head += f"Host: {host}\r\n"
    head += f"Content-Type: {content_type}\r\n"
    if length:
        head += f"Content-Length: {len(body)}\r\n"
    return (head + headers + "\r\n").encode("latin-1") + body


MANY_HEADERS = "".join(f"X-H{index}: {index}\r\n" for index in range(10_000))

# raw request, status, fragment of the error message (or None), whether the server closes the connection
ROWS = [
    pytest.param(request(), 200, None, False, id="plain"),
    # -- the head's limits, however the head arrives (here: in one read)
    pytest.param(
        request(headers="X-Big: " + "b" * 100_000 + "\r\n"), 431, "request head larger", True, id="100 KB header"
    ),
    pytest.param(request(headers=MANY_HEADERS), 431, "100 headers", True, id="10000 headers"),
    pytest.param(request(headers=MANY_HEADERS[: MANY_HEADERS.index("X-H98:")]), 431, None, True, id="101 headers"),
    pytest.param(request(headers=MANY_HEADERS[: MANY_HEADERS.index("X-H97:")]), 200, None, False, id="100 headers"),
    pytest.param(request(headers="X-Big: " + "b" * 60_000 + "\r\n"), 200, None, False, id="60 KB header"),
    # -- Host
    pytest.param(request(host=None), 400, "needs one Host header", True, id="HTTP/1.1 without Host"),
    pytest.param(request(headers="Host: rpc.example.com\r\n"), 400, "more than one host", True, id="two Hosts"),
    pytest.param(request(headers="HOST: other.example\r\n"), 400, "more than one host", True, id="two Hosts, other"),
    pytest.param(request(host=None, version="HTTP/1.0"), 200, None, True, id="HTTP/1.0 without Host"),
    pytest.param(request(host="RPC.Example.com:8787"), 200, None, False, id="Host with case and port"),
    pytest.param(request(host="rpc.example.com \t"), 200, None, False, id="Host with trailing whitespace"),
    pytest.param(request(host="rpc.example.com:x"), 400, "malformed Host", False, id="Host with a bad port"),
    pytest.param(request(host="evil@rpc.example.com"), 400, "malformed Host", False, id="Host with user info"),
    pytest.param(request(host="rpc.example.com/v1"), 400, "malformed Host", False, id="Host with a path"),
    pytest.param(request(host="rpc.example.com:80:80"), 400, "malformed Host", False, id="Host with two ports"),
    # -- an absolute-form target's host wins over Host (RFC 9112, 3.2.2)
    pytest.param(request("http://rpc.example.com/v1/mainnet", host="nowhere.example"), 200, None, False, id="absolute"),
    pytest.param(
        request("HTTPS://rpc.example.com:443/v1/mainnet?a=1", host="x"), 200, None, False, id="absolute https"
    ),
    pytest.param(
        request("http://nowhere.example/v1/mainnet"), 404, "'nowhere.example'", False, id="absolute elsewhere"
    ),
    pytest.param(request("http://blocked.example.com/v1/mainnet"), 403, None, False, id="absolute host to firewall"),
    pytest.param(request("http://rpc.example.com/v1/mainnet", host=None), 400, "Host", True, id="absolute no Host"),
    pytest.param(request("http://a@rpc.example.com/v1/mainnet"), 400, "request target", True, id="absolute user info"),
    pytest.param(request("http:///v1/mainnet"), 400, "request target", True, id="absolute without host"),
    pytest.param(request("http://rpc.example.com:x/v1/mainnet"), 400, "malformed Host", False, id="absolute bad port"),
    pytest.param(request("ftp://rpc.example.com/v1/mainnet"), 400, None, True, id="absolute other scheme"),
    pytest.param(request("rpc.example.com:80"), 400, None, True, id="authority form"),
    # -- Content-Encoding: the body is not decoded, so a coded one is refused
    pytest.param(request(headers="Content-Encoding: gzip\r\n"), 415, "content encoding", False, id="gzip"),
    pytest.param(request(headers="Content-Encoding: identity, gzip\r\n"), 415, None, False, id="identity, gzip"),
    pytest.param(request(headers="Content-Encoding: Identity\r\n"), 200, None, False, id="identity"),
    pytest.param(
        request(headers="Content-Encoding: identity\r\nContent-Encoding: gzip\r\n"),
        400,
        "more than one content-encoding",
        True,
        id="identity then gzip",
    ),
    # -- one spelling of a network's path: routing and the firewall see the path as sent
    pytest.param(request("/v1/mainnet?x=1&y"), 200, None, False, id="query"),
    *(
        pytest.param(request(path), 404, "unknown network", False, id=path)
        for path in (
            "/v1/mainnet/",
            "/v1/mainnet%2f",
            "/v1/mainnet%2F",
            "/v1/mainnet///",
            "/v1//mainnet",
            "/v1/./mainnet",
            "/v1/%2e/mainnet",
            "/v1/../v1/mainnet",
            "/v1/%6dainnet",
            "/v1/MAINNET",
            "/v1/mainnet;x",
            "/v1/mainnet%00",
            "/v1/mainnet%20",
            "/v1/mainnet%3Fx=1",
            "/v1/mainnet%23x",
        )
    ),
    *(
        pytest.param(request(path), 404, "not found", False, id=path)
        for path in ("//v1/mainnet", "/V1/mainnet", "/%761/mainnet", "/./v1/mainnet", "/v1")
    ),
    pytest.param(request("/v1/mainnet#x"), 400, "fragment", True, id="fragment"),
    pytest.param(request("/v1/mainnet\x00"), 400, "malformed HTTP request", True, id="NUL in the path"),
    pytest.param(request("/v1/main net"), 400, None, True, id="space in the path"),
    # -- framing: what one reader could take for another request than the next reader
    pytest.param(request(headers="Transfer-Encoding: chunked\r\n"), 400, None, True, id="Content-Length and chunked"),
    pytest.param(request(headers=f"Content-Length: {len(CALL)}\r\n"), 400, None, True, id="two equal lengths"),
    pytest.param(request(headers="Content-Length: 3\r\n"), 400, None, True, id="two different lengths"),
    pytest.param(
        request(length=False, headers=f"Content-Length: {len(CALL)}, {len(CALL)}\r\n"),
        400,
        None,
        True,
        id="length list",
    ),
    pytest.param(request(length=False, headers=f"Content-Length: +{len(CALL)}\r\n"), 400, None, True, id="length +"),
    pytest.param(request(length=False, headers="Content-Length: -1\r\n"), 400, None, True, id="length -"),
    pytest.param(request(length=False, headers="Content-Length: 0x40\r\n"), 400, None, True, id="length hex"),
    pytest.param(
        request(length=False, headers="Content-Length: 99999999999999999999\r\n"), 400, None, True, id="length overflow"
    ),
    pytest.param(
        request(length=False, headers="Transfer-Encoding: chunked\r\n", body=b"ffffffffffffffffffff\r\n"),
        411,
        "chunked",
        True,
        id="chunked, size overflow",
    ),
    pytest.param(
        request(
            length=False, headers="Transfer-Encoding: chunked\r\n", body=b"2;" + b"x" * 100_000 + b"\r\n{}\r\n0\r\n\r\n"
        ),
        411,
        None,
        True,
        id="chunked, long extension",
    ),
    pytest.param(
        request(length=False, headers="Transfer-Encoding: Chunked\r\n", body=b""), 411, None, True, id="Chunked"
    ),
    pytest.param(request(length=False, headers="Transfer-Encoding: gzip\r\n", body=b""), 501, None, True, id="TE gzip"),
    pytest.param(
        request(length=False, headers="Transfer-Encoding: chunked, identity\r\n", body=b""),
        400,
        None,
        True,
        id="TE list",
    ),
    pytest.param(
        request(length=False, headers="Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", body=b""),
        400,
        None,
        True,
        id="two TEs",
    ),
    pytest.param(
        request(length=False, version="HTTP/1.0", headers="Transfer-Encoding: chunked\r\n", body=b"0\r\n\r\n"),
        411,
        None,
        True,
        id="TE in HTTP/1.0",
    ),
    pytest.param(request(headers="X-Folded: a\r\n b\r\n"), 400, None, True, id="obs-fold"),
    pytest.param(request(headers="X-Space : a\r\n"), 400, None, True, id="space before colon"),
    pytest.param(request().replace(b"\r\n", b"\n"), 400, None, True, id="bare LF"),
    pytest.param(request(headers="X-A: a\rX-B: b\r\n"), 400, None, True, id="bare CR"),
    pytest.param(request(headers="X-A: a\x00b\r\n"), 400, None, True, id="NUL in a value"),
    pytest.param(request(headers="X-A: a\x01b\r\n"), 400, None, True, id="control in a value"),
    pytest.param(request(headers="X(A): a\r\n"), 400, None, True, id="bad name"),
    pytest.param(request(headers=": a\r\n"), 400, None, True, id="empty name"),
    pytest.param(request(headers="X-A: caf\xe9\r\n"), 200, None, False, id="obs-text in a value"),
    pytest.param(
        request(content_type="application/json\r\nContent-Type: text/plain"), 400, "content-type", True, id="two types"
    ),
    # -- the request line
    pytest.param(request(version="HTTP/2.0"), 505, "version", True, id="HTTP/2.0"),
    pytest.param(request(version="HTTP/1.2"), 400, None, True, id="HTTP/1.2"),
    pytest.param(request(version="HTTP/1.1 x"), 400, None, True, id="request-line garbage"),
    pytest.param(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400, None, True, id="HTTP/2 preface"),
    pytest.param(request(method="post"), 400, None, True, id="lower-case method"),
    pytest.param(request(method="BREW"), 400, None, True, id="unknown method"),
    pytest.param(request(method="CONNECT"), 501, "CONNECT", True, id="CONNECT"),
    pytest.param(
        request(headers="Connection: upgrade\r\nUpgrade: websocket\r\n"),
        501,
        "upgrades",
        True,
        id="upgrade with a body",
    ),
    pytest.param(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400, None, True, id="TLS hello"),
]


@pytest.mark.parametrize(("raw", "status", "message", "closes"), ROWS)
async def test_hostile_requests(raw: bytes, status: int, message: str | None, closes: bool) -> None:
    server, gateway = edge_server()
    outcome = await send(server, [raw])
    (response,) = outcome.responses
    assert response.status == status
    if message is not None:
        assert message in response.message()
    assert outcome.closed == closes
    # Only a request the server and router let through reaches the gateway, for mainnet, and the firewall saw its
    # path as /v1/mainnet.
    assert gateway.seen == ([("mainnet", raw[-len(CALL) :])] if status == 200 else [])
    if status == 200:
        assert isinstance(server.handler, WatchedRouter)
        (verdict,) = server.handler.verdicts
        assert verdict.matches == ()
    if status == 415 and "content encoding" in (message or ""):
        assert response.headers["accept-encoding"] == "identity"


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(request(headers="X-Big: " + "b" * 100_000 + "\r\n"), id="100 KB header"),
        pytest.param(request(headers=MANY_HEADERS[: MANY_HEADERS.index("X-H1000:")]), id="many headers"),
        pytest.param(request("/v1/" + "a" * 100_000), id="100 KB target"),
    ],
)
@pytest.mark.parametrize("size", [1, 7, 1000, 16_384, 65_536])
async def test_head_limits_hold_however_the_head_arrives(raw: bytes, size: int) -> None:
    server, gateway = edge_server()
    chunks = [raw[start : start + size] for start in range(0, len(raw), size)]
    outcome = await send(server, chunks)
    assert [response.status for response in outcome.responses] == [431]
    assert outcome.closed
    assert gateway.seen == []


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(st.lists(st.integers(min_value=1, max_value=64_000), max_size=8, unique=True))
def test_a_head_within_the_limits_passes_however_it_arrives(cuts: list[int]) -> None:
    raw = request(headers="X-Big: " + "b" * 40_000 + "\r\n" + MANY_HEADERS[: MANY_HEADERS.index("X-H96:")])
    bounds = [0, *sorted(cut for cut in cuts if cut < len(raw)), len(raw)]

    async def run() -> Outcome:
        server, _ = edge_server()
        return await send(server, [raw[start:end] for start, end in itertools.pairwise(bounds)])

    outcome = asyncio.run(run())
    assert [response.status for response in outcome.responses] == [200]


async def test_the_request_log_records_the_host_an_absolute_form_target_names() -> None:
    store = JournalledStore()
    request_log = store.log()
    server, _ = edge_server(request_log)
    answers = [
        (await send(server, [raw])).responses[0].status
        for raw in (
            request("http://rpc.example.com/v1/mainnet", host="nowhere.example"),
            request("http://blocked.example.com/v1/mainnet", host="rpc.example.com"),
        )
    ]
    request_log.flush()
    records = store.records["http_requests"]
    assert answers == [200, 403]
    assert [(record["ClientRequestHost"], record["EdgeResponseStatus"]) for record in records] == [
        ("rpc.example.com", 200),
        ("blocked.example.com", 403),
    ]


async def test_limits_are_settings() -> None:
    server, _ = edge_server(max_head_bytes=2048, max_headers=5)
    big, many = request(headers="X-Big: " + "b" * 2048 + "\r\n"), request(headers="A: 1\r\nB: 2\r\nC: 3\r\n")
    answers = [(await send(server, [raw])).responses[0] for raw in (big, many, request(headers="A: 1\r\nB: 2\r\n"))]
    assert [answer.status for answer in answers] == [431, 431, 200]
    assert "2048 bytes or 5 headers" in answers[0].message()


async def test_a_head_request_gets_a_head_without_a_body_and_the_connection_stays_in_step() -> None:
    server, _ = edge_server()
    outcome = await send(server, [request(method="HEAD", body=b"", length=False) + request()], head_requests=1)
    head, after = outcome.responses
    assert head.status == 405
    assert head.body == b""
    assert int(head.headers["content-length"]) > 0  # the length of the body a GET would have had
    assert after.status == 200


async def test_an_http_10_expect_is_not_answered_100() -> None:
    server, _ = edge_server()
    raw = request(version="HTTP/1.0", headers="Expect: 100-continue\r\n")
    head, body = raw[: raw.index(b"\r\n\r\n") + 4], raw[raw.index(b"\r\n\r\n") + 4 :]
    transport = WireTransport()
    protocol = server.protocol(asyncio.get_running_loop())
    protocol.connection_made(transport)  # type: ignore[arg-type]
    protocol.data_received(head)
    await settle()
    assert bytes(transport.written) == b""
    protocol.data_received(body)
    await settle()
    assert [response.status for response in read_responses(bytes(transport.written))] == [200]


async def test_connections_over_the_limit_are_answered_503_and_closed() -> None:
    server, _ = edge_server(max_connections=2)
    loop = asyncio.get_running_loop()
    kept = [WireTransport(), WireTransport()]
    for transport in kept:
        server.protocol(loop).connection_made(transport)  # type: ignore[arg-type]
    refused = WireTransport()
    server.protocol(loop).connection_made(refused)  # type: ignore[arg-type]
    (response,) = read_responses(bytes(refused.written))
    assert (response.status, refused.closed) == (503, True)
    assert response.headers["connection"] == "close"
    assert not any(transport.closed for transport in kept)


# -- a handler that accepts every request: the server's own framing ----------------------------------------------------


@dataclass
class Accepting:
    """Accepts every request and answers 200 at once, recording what it was given."""

    requests: list[EdgeRequest] = field(default_factory=list)
    parsed: list[Parsed] = field(default_factory=list)  # as handled

    def answer_head(self, request: EdgeRequest) -> EdgeResponse | None:
        return None

    def handle(self, request: EdgeRequest) -> EdgeResponse | Awaitable[EdgeResponse]:
        self.requests.append(request)
        self.parsed.append(_served(request))
        return EdgeResponse(200, b"{}")

    def refusal_answer(self, refusal: Refusal, request: EdgeRequest | None, limits: HttpLimits) -> EdgeResponse:
        return refusals.refusal_answer(refusal, request, limits)

    def commit_answer(self, request: EdgeRequest, response: EdgeResponse, sent_bytes: int) -> None:
        pass


async def test_a_read_of_many_pipelined_requests_is_cut_off() -> None:
    handler = Accepting()
    server = HttpServer(handler, max_body_bytes=MAX_BODY)
    outcome = await send(server, [b"".join(request(f"/{index}") for index in range(1000))])
    statuses = [response.status for response in outcome.responses]
    assert statuses == [200] * (len(statuses) - 1) + [429]
    assert 100 <= len(handler.requests) <= 102
    assert outcome.closed


async def test_pipelined_requests_after_a_refusal_are_not_read() -> None:
    handler = Accepting()
    server = HttpServer(handler, max_body_bytes=MAX_BODY)
    smuggled = request(headers="Transfer-Encoding: chunked\r\n") + request("/smuggled")
    outcome = await send(server, [request("/first") + smuggled])
    assert [response.status for response in outcome.responses] == [200, 400]
    assert [seen.raw_path for seen in handler.requests] == ["/first"]
    assert outcome.closed


# -- against a reference parser: never another request than h11 reads ------------------------------------------------
#
# Byte streams of one to three requests, made from a grammar that mixes valid and hostile pieces (methods, targets,
# versions, header names, separators, values, line ends, bodies, lengths), split into arbitrary reads. What the
# server hands its handler is compared with what h11 reads from the same bytes: every request the server accepts
# must be the request h11 reads at that place (method, target, host, headers, body). The server may refuse what h11
# accepts (it is stricter: chunked bodies, HTTP/2.0, two Host headers, control characters, ...), never the reverse.

Parsed = tuple[bytes, bytes, bytes | None, list[tuple[bytes, bytes]], bytes]  # method, target, host, headers, body

_TOKEN = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _mostly(valid: st.SearchStrategy[str], hostile: st.SearchStrategy[str]) -> tuple[st.SearchStrategy[str], ...]:
    """The valid pieces alone (for a request drawn valid), and the valid ones four times in five (for one drawn
    hostile: several pieces, so it has often one hostile piece or more)."""
    return valid, st.one_of(valid, valid, valid, valid, hostile)


_METHODS = _mostly(
    st.sampled_from(["POST", "POST", "GET", "PUT", "OPTIONS", "DELETE"]), st.sampled_from(["post", "BREW", "CONNECT"])
)
_TARGETS = _mostly(
    st.sampled_from(["/v1/mainnet", "/v1/mainnet?x=1", "/", "*", "http://h.example/p?q=1", "HTTP://h.example:81"]),
    st.one_of(
        st.sampled_from(["/a#f", "https://u@h.example/", "h.example:80", "/%2e%2E/%00", "//x", "ftp://x/"]),
        # Not a space: llhttp reads ``POST /  HTTP/1.1`` (two spaces) as ``POST / HTTP/1.1`` where h11 refuses it;
        # the request is the same either way, and the edge never passes a request line on.
        st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7F), max_size=10).map(lambda text: "/" + text),
    ),
)
_VERSIONS = _mostly(
    st.sampled_from(["HTTP/1.1", "HTTP/1.1", "HTTP/1.1", "HTTP/1.0"]),
    st.sampled_from(["HTTP/2.0", "HTTP/1.2", "http/1.1", "HTTP/1.1 ", "HTTP/1", ""]),
)
_NAMES = _mostly(
    st.one_of(
        st.sampled_from(
            [
                "Host",
                "host",
                "Content-Length",
                "Content-Type",
                "Transfer-Encoding",
                "Connection",
                "Expect",
                "Content-Encoding",
                "Upgrade",
                "X-A",
            ]
        ),
        st.text(st.sampled_from(_TOKEN), min_size=1, max_size=6),
    ),
    st.text(st.sampled_from(_TOKEN + ' ()<>@,;:\\"/[]?={}\t\x00\x7f'), max_size=6),
)
_VALUES = _mostly(
    st.one_of(
        st.sampled_from(["h.example", "h.example:8", "0", "1", "2", "chunked", "close", "keep-alive", "100-continue"]),
        st.sampled_from(["identity", "gzip", "", "1, 1", "a\tb", " x ", "upgrade", "websocket", "Upgrade, close"]),
        st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=8),
    ),
    st.text(st.characters(max_codepoint=0xFF), max_size=8),
)
_SEPARATORS = _mostly(st.just(": "), st.sampled_from([":", " : ", ":\t", ":  ", ""]))
_LINE_ENDS = _mostly(st.just("\r\n"), st.sampled_from(["\n", "\r", "\r\n ", "\r\n\t", "\r\r\n"]))


@st.composite
def _requests(draw: st.DrawFn) -> bytes:
    hostile = draw(st.booleans())

    def piece(pieces: tuple[st.SearchStrategy[str], ...]) -> str:
        return draw(pieces[hostile])

    head = f"{piece(_METHODS)} {piece(_TARGETS)} {piece(_VERSIONS)}{piece(_LINE_ENDS)}"
    if not (hostile and draw(st.booleans())):
        head += f"Host: h.example{piece(_LINE_ENDS)}"
    for _ in range(draw(st.integers(0, 3))):
        name = piece(_NAMES)
        if not hostile and name.lower() in ("host", "content-length", "transfer-encoding"):
            continue  # (a valid request has one Host and one length)
        head += f"{name}{piece(_SEPARATORS)}{piece(_VALUES)}{piece(_LINE_ENDS)}"
    body = draw(st.binary(max_size=12))
    if not (hostile and draw(st.booleans())):
        head += f"Content-Length: {len(body)}\r\n"
    return (head + "\r\n").encode("latin-1") + body


def _reference(data: bytes) -> list[Parsed]:
    """The requests h11 reads from ``data`` up to its first error, the end of the data, or the end of the connection
    (h11 closes after an HTTP/1.0 request; the edge keeps it open when asked, so h11 goes on afresh then).

    Given llhttp's one leniency: CR and LF bytes before a request line are skipped (RFC 9112, 2.2 asks a server to
    skip empty lines there; llhttp skips a lone CR or LF too). The request read after them is the same either way."""
    found: list[Parsed] = []
    while True:
        data = data.lstrip(b"\r\n") if found else data
        if not data:
            return found  # (no more bytes: h11 takes empty data for the end of the connection)
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=1 << 20)
        connection.receive_data(data)
        start: h11.Request | None = None
        body = b""
        try:
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    return found
                if isinstance(event, h11.Request):
                    start = event
                elif isinstance(event, h11.Data):
                    body += bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    break
        except h11.RemoteProtocolError:
            return found
        assert start is not None
        found.append(_parsed(start, body))
        # An answer that is neither 101 nor 2xx declines an Upgrade or CONNECT (h11 then reads on as HTTP).
        connection.send(h11.Response(status_code=404, headers=[("content-length", "0")]))
        connection.send(h11.EndOfMessage())
        keep_alive = (connection.our_state is h11.DONE and connection.their_state is h11.DONE) or (
            start.http_version == b"1.0"
            and any(
                token.strip().lower() == b"keep-alive"
                for name, value in start.headers
                if name == b"connection"
                for token in value.split(b",")
            )
        )
        if not keep_alive:
            return found
        data = connection.trailing_data[0]


def _parsed(start: h11.Request, body: bytes) -> Parsed:
    headers = [(bytes(name), bytes(value)) for name, value in start.headers]
    target = bytes(start.target)
    host = dict(headers).get(b"host")
    if not target.startswith(b"/") and target != b"*":  # the absolute form: its host wins
        host = target.partition(b"://")[2].split(b"/", 1)[0].split(b"?", 1)[0]
        target = target.partition(b"://")[2][len(host) :]
        target = target if target.startswith(b"/") else b"/" + target
    path, _, query = target.partition(b"?")  # the edge keeps no empty query: ``/?`` is ``/``
    return (bytes(start.method), path + (b"?" + query if query else b""), host, headers, body)


def _served(request: EdgeRequest) -> Parsed:
    target = request.raw_path.encode("latin-1") + (b"?" + request.query_string if request.query_string else b"")
    return (request.method.encode(), target, request.noted[HOST], list(request.headers), request.body)


@settings(
    max_examples=int(os.environ.get("HTTP_FUZZ_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(_requests(), min_size=1, max_size=3), st.lists(st.integers(min_value=1, max_value=400), max_size=5))
def test_the_server_never_reads_another_request_than_the_reference(requests: list[bytes], cuts: list[int]) -> None:
    data = b"".join(requests)
    bounds = [0, *sorted({cut for cut in cuts if cut < len(data)}), len(data)]
    handler = Accepting()

    async def run() -> Outcome:
        server = HttpServer(handler, max_body_bytes=MAX_BODY)
        return await send(server, [data[start:end] for start, end in itertools.pairwise(bounds)])

    outcome = asyncio.run(run())
    served = handler.parsed
    reference = _reference(data)
    event(f"served {len(served)} of the {len(reference)} requests h11 reads")
    assert served == reference[: len(served)], "the server read a request h11 reads otherwise, or not at all"
    for response in outcome.responses[len(served) :]:
        assert response.status >= 400
    if len(outcome.responses) > len(served):
        assert outcome.closed  # after refusing a malformed request, the server reads nothing more
