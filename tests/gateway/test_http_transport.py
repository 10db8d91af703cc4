"""The upstream HTTP transport against real loopback servers: an aiohttp server, and raw sockets for odd answers."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from edgeplane.gateway.http_transport import HttpTransport, HttpTransportError

BODY = b'{"jsonrpc":"2.0","method":"eth_chainId","params":[],"id":1}'
ANSWER = b'{"jsonrpc":"2.0","id":1,"result":"0x1"}'
TIMEOUT = 5.0


# -- servers ---------------------------------------------------------------------------------------------------------


class EchoServer:
    """An aiohttp server that answers with the body it got and notes the client port of every request."""

    def __init__(self) -> None:
        self.client_ports: list[int] = []
        self.delay = 0.0
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def echo(self, request: web.Request) -> web.StreamResponse:
        self.client_ports.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        body = await request.read()
        if self.delay:
            await asyncio.sleep(self.delay)
        return web.Response(body=body, content_type="application/json")

    async def chunked(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(body), 7):
            await response.write(body[start : start + 7])
        await response.write_eof()
        return response

    async def closing(self, request: web.Request) -> web.StreamResponse:
        self.client_ports.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        return web.Response(body=await request.read(), headers={"Connection": "close"})

    async def failing(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        return web.Response(status=503, body=b"busy")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/", self.echo)
        app.router.add_post("/chunked", self.chunked)
        app.router.add_post("/close", self.closing)
        app.router.add_post("/503", self.failing)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> bytes | None:
    """One request's body, or None when the client closed the connection first."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    return await reader.readexactly(length)


def answer(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


class RawServer:
    """A bare TCP server; ``handler`` plays the server's side of each connection. Counts connections and requests."""

    def __init__(self, handler: Callable[[RawServer, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]):
        self.handler = handler
        self.connections = 0
        self.requests = 0
        self.server: asyncio.Server | None = None
        self.url = ""

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(self, reader, writer)
        finally:
            writer.close()

    async def read(self, reader: asyncio.StreamReader) -> bytes | None:
        body = await read_request(reader)
        if body is not None:
            self.requests += 1
        return body

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/"


@pytest.fixture
async def echo_server() -> AsyncIterator[EchoServer]:
    server = EchoServer()
    await server.start()
    yield server
    assert server.runner is not None
    await server.runner.cleanup()


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[..., Awaitable[RawServer]]]:
    servers: list[RawServer] = []

    async def start(
        handler: Callable[[RawServer, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    ) -> RawServer:
        server = RawServer(handler)
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        assert server.server is not None
        server.server.close()


@pytest.fixture
async def transports() -> AsyncIterator[Callable[..., HttpTransport]]:
    made: list[HttpTransport] = []

    def make(url: str, **options: float) -> HttpTransport:
        transport = HttpTransport(url, **options)  # type: ignore[arg-type]
        made.append(transport)
        return transport

    yield make
    for transport in made:
        transport.close()


# -- keep-alive and the pool -----------------------------------------------------------------------------------------


async def test_one_connection_serves_many_sequential_requests(
    echo_server: EchoServer, transports: Callable[..., HttpTransport]
) -> None:
    transport = transports(echo_server.url + "/")
    for index in range(20):
        body = b'{"id":%d}' % index
        assert await transport.post(body, timeout_seconds=TIMEOUT) == (200, body)
    assert len(set(echo_server.client_ports)) == 1


async def test_concurrent_requests_use_several_connections_up_to_the_bound(
    echo_server: EchoServer, transports: Callable[..., HttpTransport]
) -> None:
    echo_server.delay = 0.05
    transport = transports(echo_server.url + "/", max_connections=4)
    bodies = [b'{"id":%d}' % index for index in range(12)]
    answers = await asyncio.gather(*(transport.post(body, timeout_seconds=TIMEOUT) for body in bodies))
    assert answers == [(200, body) for body in bodies]
    assert len(set(echo_server.client_ports)) == 4


async def test_the_status_is_returned_whatever_it_is(
    echo_server: EchoServer, transports: Callable[..., HttpTransport]
) -> None:
    transport = transports(echo_server.url + "/503")
    assert await transport.post(BODY, timeout_seconds=TIMEOUT) == (503, b"busy")
    assert await transport.post(BODY, timeout_seconds=TIMEOUT) == (503, b"busy")


async def test_connection_close_answers_are_read_and_the_connection_is_not_reused(
    echo_server: EchoServer, transports: Callable[..., HttpTransport]
) -> None:
    transport = transports(echo_server.url + "/close")
    for _ in range(3):
        assert await transport.post(BODY, timeout_seconds=TIMEOUT) == (200, BODY)
    assert len(set(echo_server.client_ports)) == 3


async def test_a_connection_the_server_closed_while_idle_is_replaced(
    raw_server: Callable[..., Awaitable[RawServer]], transports: Callable[..., HttpTransport]
) -> None:
    async def closes_when_idle(server: RawServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                body = await asyncio.wait_for(server.read(reader), 0.05)
            except TimeoutError:
                return  # idle too long: close
            if body is None:
                return
            writer.write(answer(body))

    server = await raw_server(closes_when_idle)
    transport = transports(server.url)
    assert await transport.post(BODY, timeout_seconds=TIMEOUT) == (200, BODY)
    await asyncio.sleep(0.2)
    # Not idempotent: the closed connection must be noticed before anything is written.
    assert await transport.post(BODY, timeout_seconds=TIMEOUT) == (200, BODY)
    assert (server.connections, server.requests) == (2, 2)


# -- answers -----------------------------------------------------------------------------------------------------------


async def test_chunked_answers_are_joined(echo_server: EchoServer, transports: Callable[..., HttpTransport]) -> None:
    transport = transports(echo_server.url + "/chunked")
    body = b'{"jsonrpc":"2.0","id":1,"result":"' + b"ab" * 5000 + b'"}'
    assert await transport.post(body, timeout_seconds=TIMEOUT) == (200, body)
    assert await transport.post(BODY, timeout_seconds=TIMEOUT) == (200, BODY)


FRAMINGS = [
    ("content-length", answer(ANSWER), True),
    (
        "chunked, in pieces",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n"
        + ANSWER[:5]
        + b"\r\n%x\r\n" % (len(ANSWER) - 5)
        + ANSWER[5:]
        + b"\r\n0\r\n\r\n",
        True,
    ),
    ("an interim 100 Continue first", b"HTTP/1.1 100 Continue\r\n\r\n" + answer(ANSWER), True),
    ("Connection: close", answer(ANSWER).replace(b"OK\r\n", b"OK\r\nConnection: close\r\n", 1), False),
    ("no length: the body ends with the connection", b"HTTP/1.1 200 OK\r\n\r\n" + ANSWER, False),
    ("HTTP/1.0", answer(ANSWER).replace(b"HTTP/1.1", b"HTTP/1.0", 1), False),
]


@pytest.mark.parametrize(("framing", "raw_answer", "kept_alive"), FRAMINGS, ids=[row[0] for row in FRAMINGS])
async def test_answer_framings(
    framing: str,
    raw_answer: bytes,
    kept_alive: bool,
    raw_server: Callable[..., Awaitable[RawServer]],
    transports: Callable[..., HttpTransport],
) -> None:
    async def answers(server: RawServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.read(reader) is not None:
            for start in range(0, len(raw_answer), 16):  # in pieces, so framing cannot rely on one read
                writer.write(raw_answer[start : start + 16])
                await writer.drain()
            if not kept_alive:
                return

    server = await raw_server(answers)
    transport = transports(server.url)
    for _ in range(2):
        assert await transport.post(BODY, timeout_seconds=TIMEOUT) == (200, ANSWER)
    assert server.connections == (1 if kept_alive else 2)


MALFORMED = [
    ("not HTTP", b"hello there\r\n\r\n"),
    ("a bad status line", b"HTTP/1.1 OK 200\r\nContent-Length: 2\r\n\r\n{}"),
    ("a bad chunk size", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"),
    ("a body cut short", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}"),
    ("headers cut short", b"HTTP/1.1 200 OK\r\nContent-Len"),
]


@pytest.mark.parametrize(("case", "raw_answer"), MALFORMED, ids=[row[0] for row in MALFORMED])
async def test_malformed_answers_are_transport_errors(
    case: str,
    raw_answer: bytes,
    raw_server: Callable[..., Awaitable[RawServer]],
    transports: Callable[..., HttpTransport],
) -> None:
    async def garbles(server: RawServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await server.read(reader) is not None:
            writer.write(raw_answer)
            await writer.drain()
            await asyncio.sleep(0.05)  # then close

    server = await raw_server(garbles)
    transport = transports(server.url)
    with pytest.raises(HttpTransportError):
        await transport.post(BODY, timeout_seconds=TIMEOUT, idempotent=True)
    assert server.requests == 1  # a request that got an answer, even a broken one, is not sent again


OVERSIZED = [
    # (case, answer, the transport's max_answer_bytes)
    ("a body over the bound", answer(b"x" * 2048), 1024),
    (
        "a chunked body over the bound",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" + b"x" * 2048,
        1024,
    ),
    ("an endless body with no length", b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 4096, 1024),
    (
        "headers over 64 KiB",
        b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"p" * 70_000 + b"\r\nContent-Length: 2\r\n\r\n{}",
        1024,
    ),
]


@pytest.mark.parametrize(("case", "raw_answer", "bound"), OVERSIZED, ids=[row[0] for row in OVERSIZED])
async def test_answers_over_the_bounds_fail_and_close_the_connection(
    case: str,
    raw_answer: bytes,
    bound: int,
    raw_server: Callable[..., Awaitable[RawServer]],
    transports: Callable[..., HttpTransport],
) -> None:
    async def floods(server: RawServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await server.read(reader) is not None:
            writer.write(raw_answer)
            await writer.drain()
            await asyncio.sleep(1)  # the connection stays open: the transport must give up by itself

    server = await raw_server(floods)
    transport = transports(server.url, max_answer_bytes=bound)
    with pytest.raises(HttpTransportError, match=r"an answer (larger than 1024 bytes|whose headers exceed)"):
        await transport.post(BODY, timeout_seconds=TIMEOUT, idempotent=True)
    assert server.requests == 1


async def test_an_answer_within_the_bound_is_read_whole(
    echo_server: EchoServer, transports: Callable[..., HttpTransport]
) -> None:
    transport = transports(echo_server.url, max_answer_bytes=len(BODY))
    assert await transport.post(BODY, timeout_seconds=TIMEOUT) == (200, BODY)


# -- failures ----------------------------------------------------------------------------------------------------------


async def test_a_slow_answer_times_out_and_the_next_request_works(
    echo_server: EchoServer, transports: Callable[..., HttpTransport]
) -> None:
    transport = transports(echo_server.url + "/")
    echo_server.delay = 1.0
    with pytest.raises(HttpTransportError, match="timed out"):
        await transport.post(BODY, timeout_seconds=0.1)
    echo_server.delay = 0.0
    assert await transport.post(BODY, timeout_seconds=TIMEOUT) == (200, BODY)


async def test_a_refused_connection_is_a_transport_error(transports: Callable[..., HttpTransport]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = transports(f"http://127.0.0.1:{port}/")
    with pytest.raises(HttpTransportError, match="cannot connect"):
        await transport.post(BODY, timeout_seconds=TIMEOUT)


@pytest.mark.parametrize(("idempotent", "outcome", "requests_seen"), [(False, "error", 2), (True, "answer", 3)])
async def test_a_request_that_may_have_reached_the_server_is_resent_only_when_idempotent(
    idempotent: bool,
    outcome: str,
    requests_seen: int,
    raw_server: Callable[..., Awaitable[RawServer]],
    transports: Callable[..., HttpTransport],
) -> None:
    async def drops_the_second_request(
        server: RawServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        body = await server.read(reader)
        if body is not None:
            writer.write(answer(body))
            await server.read(reader)  # read it, then close without answering

    server = await raw_server(drops_the_second_request)
    transport = transports(server.url)
    assert await transport.post(BODY, timeout_seconds=TIMEOUT) == (200, BODY)
    if outcome == "error":
        with pytest.raises(HttpTransportError, match="before an answer"):
            await transport.post(BODY, timeout_seconds=TIMEOUT, idempotent=idempotent)
    else:
        assert await transport.post(BODY, timeout_seconds=TIMEOUT, idempotent=idempotent) == (200, BODY)
    assert server.requests == requests_seen


async def test_a_closed_transport_refuses_requests(
    echo_server: EchoServer, transports: Callable[..., HttpTransport]
) -> None:
    transport = transports(echo_server.url + "/")
    assert await transport.post(BODY, timeout_seconds=TIMEOUT) == (200, BODY)
    transport.close()
    with pytest.raises(HttpTransportError, match="closed"):
        await transport.post(BODY, timeout_seconds=TIMEOUT)


def test_the_url_must_be_http_or_https() -> None:
    with pytest.raises(ValueError, match="http"):
        HttpTransport("ws://127.0.0.1:8545/")
