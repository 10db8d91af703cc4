"""The edge's HTTP/1.1 server against real loopback sockets, driven byte by byte as a client would."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeplane.edge import http_server, refusals
from edgeplane.edge.http_server import EdgeRequest, EdgeResponse, HttpLimits, HttpServer, Refusal

TIMEOUT = 5.0


# -- a handler and a client ------------------------------------------------------------------------------------------


@dataclass
class Recorder:
    """Echoes each request as JSON; special paths sleep, raise, wait for a release, or answer a large body. Paths
    under ``/now`` are answered at once (no awaitable); every answer ``commit_answer`` is given is kept in ``told``.
    The server's refusals are worded as the edge's router words them (``edgeplane.edge.refusals``)."""

    requests: list[EdgeRequest] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    told: list[tuple[str, int]] = field(default_factory=list)
    heard: asyncio.Event = field(default_factory=asyncio.Event)  # set by ``commit_answer``
    sent: list[int] = field(default_factory=list)  # the sizes ``commit_answer`` was given, in order

    def answer_head(self, request: EdgeRequest) -> EdgeResponse | None:
        if request.path == "/refuse":
            return EdgeResponse(403, b'{"refused":true}')
        if request.path == "/raise-early":
            raise RuntimeError("a bug in answer_head")
        return None

    def handle(self, request: EdgeRequest) -> EdgeResponse | Awaitable[EdgeResponse]:
        if request.path == "/now/raise":
            raise RuntimeError("a bug in handle, before any awaitable")
        if request.path.startswith("/now"):
            self.requests.append(request)
            return EdgeResponse(200, json.dumps({"path": request.path, "at_once": True}).encode())
        return self._handle(request)

    def refusal_answer(self, refusal: Refusal, request: EdgeRequest | None, limits: HttpLimits) -> EdgeResponse:
        return refusals.refusal_answer(refusal, request, limits)

    def commit_answer(self, request: EdgeRequest, response: EdgeResponse, sent_bytes: int) -> None:
        self.told.append((request.path, response.status))
        self.sent.append(sent_bytes)
        self.heard.set()

    async def _handle(self, request: EdgeRequest) -> EdgeResponse:
        self.requests.append(request)
        path = request.path
        if path.startswith("/sleep/"):
            await asyncio.sleep(float(path.removeprefix("/sleep/")))
        elif path == "/raise":
            raise RuntimeError("a bug in handle")
        elif path == "/wait":
            self.started.set()
            await self.release.wait()
        elif path.startswith("/big/"):
            size = int(path.removeprefix("/big/"))
            return EdgeResponse(
                200, bytes(index % 251 for index in range(size)), content_type=b"application/octet-stream"
            )
        answer = {
            "method": request.method,
            "path": path,
            "query": request.query_string.decode(),
            "body": request.body.decode(),
            "port": request.client[1] if request.client else None,
        }
        return EdgeResponse(200, json.dumps(answer).encode())


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    raw: bytes  # the whole response as read, head and body

    def json(self) -> dict[str, object]:
        document = json.loads(self.body)
        assert isinstance(document, dict)
        return document


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.setblocking(False)
    return sock


@contextlib.asynccontextmanager
async def running(
    handler: Recorder, *, max_body_bytes: int = 64 * 1024, **options: float
) -> AsyncIterator[tuple[HttpServer, int]]:
    sock = listening_socket()
    port = sock.getsockname()[1]
    server = HttpServer(handler, max_body_bytes=max_body_bytes, **options)
    task = asyncio.create_task(server.serve(sock))
    try:
        yield server, port
    finally:
        server.shutdown()
        await asyncio.wait_for(task, TIMEOUT)


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


def post(path: str, body: bytes = b"{}", *, version: str = "1.1", headers: str = "") -> bytes:
    head = f"POST {path} HTTP/{version}\r\nHost: localhost\r\nContent-Length: {len(body)}\r\n{headers}\r\n"
    return head.encode() + body


async def read_response(reader: asyncio.StreamReader) -> Response:
    async with asyncio.timeout(TIMEOUT):
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")[:-2]
        headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
        body = await reader.readexactly(int(headers["content-length"]))
    return Response(int(status_line.split()[1]), headers, body, head + body)


async def closed_by_server(reader: asyncio.StreamReader, within: float = TIMEOUT) -> bool:
    async with asyncio.timeout(within):
        try:
            return await reader.read() == b""
        except ConnectionResetError:
            return True


# -- keep-alive, pipelining, Connection ------------------------------------------------------------------------------


async def test_keep_alive_answers_several_requests_on_one_connection() -> None:
    handler = Recorder()
    async with running(handler) as (_, port):
        reader, writer = await connect(port)
        answers = []
        for index in range(3):
            writer.write(post("/v1/echo", f'{{"n":{index}}}'.encode()))
            answers.append(await read_response(reader))
        writer.close()
    assert [answer.status for answer in answers] == [200, 200, 200]
    assert [answer.json()["body"] for answer in answers] == ['{"n":0}', '{"n":1}', '{"n":2}']
    assert len({answer.json()["port"] for answer in answers}) == 1
    assert all("connection" not in answer.headers for answer in answers)


async def test_pipelined_requests_are_answered_in_order() -> None:
    handler = Recorder()
    async with running(handler) as (_, port):
        reader, writer = await connect(port)
        writer.write(post("/sleep/0.1") + post("/sleep/0") + post("/refuse") + post("/echo?a=1", b"last"))
        answers = [await read_response(reader) for _ in range(4)]
        writer.close()
    assert [answer.status for answer in answers] == [200, 200, 403, 200]
    assert answers[0].json()["path"] == "/sleep/0.1"
    assert answers[1].json()["path"] == "/sleep/0"
    assert answers[3].json() | {"port": None} == {
        "method": "POST",
        "path": "/echo",
        "query": "a=1",
        "body": "last",
        "port": None,
    }


async def test_answers_at_hand_and_awaited_answers_keep_their_order() -> None:
    handler = Recorder()
    paths = ["/sleep/0.05", "/now/1", "/sleep/0", "/now/2", "/refuse", "/now/3"]
    async with running(handler) as (_, port):
        reader, writer = await connect(port)
        writer.write(b"".join(post(path) for path in paths))
        answers = [await read_response(reader) for _ in paths]
        writer.write(post("/now/4"))
        last = await read_response(reader)
        writer.close()
    assert [answer.json()["path"] for answer in answers if answer.status == 200] == [
        "/sleep/0.05",
        "/now/1",
        "/sleep/0",
        "/now/2",
        "/now/3",
    ]
    assert last.json() == {"path": "/now/4", "at_once": True}
    # ``commit_answer`` is given every answered request before its answer is out, in order, with the bytes written
    assert handler.told == [(path, 403 if path == "/refuse" else 200) for path in paths] + [("/now/4", 200)]
    assert handler.sent == [len(answer.raw) for answer in [*answers, last]]


async def test_commit_answer_is_given_an_answer_the_client_left_before() -> None:
    handler = Recorder()
    async with running(handler) as (_, port):
        _, writer = await connect(port)
        writer.write(post("/sleep/0.2"))
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.close()
        await asyncio.wait_for(handler.heard.wait(), TIMEOUT)
    assert handler.told == [("/sleep/0.2", 200)]


async def test_answers_never_written_are_committed_with_no_bytes() -> None:
    # A shutdown closes the connection after the answer being made: the answers already decided for the requests
    # pipelined behind it (one from its head, one the server's refusal) are never written, and committed with 0.
    handler = Recorder()
    async with running(handler) as (server, port):
        reader, writer = await connect(port)
        writer.write(post("/wait") + post("/refuse") + b"POST /no-host HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
        await asyncio.wait_for(handler.started.wait(), TIMEOUT)
        await asyncio.sleep(0.05)
        server.shutdown()
        handler.release.set()
        answer = await read_response(reader)
        assert await closed_by_server(reader)
        writer.close()
    assert answer.headers["connection"] == "close"
    assert handler.told == [("/wait", 200), ("/refuse", 403), ("/no-host", 400)]
    assert handler.sent == [len(answer.raw), 0, 0]


async def test_a_failing_commit_answer_leaves_the_connection_serving() -> None:
    class Failing(Recorder):
        def commit_answer(self, request: EdgeRequest, response: EdgeResponse, sent_bytes: int) -> None:
            raise RuntimeError("a bug in commit_answer")

    async with running(Failing()) as (_, port):
        reader, writer = await connect(port)
        answers = []
        for path in ("/now/1", "/echo", "/now/2"):
            writer.write(post(path))
            answers.append(await read_response(reader))
        writer.close()
    assert [answer.status for answer in answers] == [200, 200, 200]


async def test_client_connection_close_is_honoured() -> None:
    async with running(Recorder()) as (_, port):
        reader, writer = await connect(port)
        writer.write(post("/echo", headers="Connection: close\r\n"))
        answer = await read_response(reader)
        assert await closed_by_server(reader)
        writer.close()
    assert answer.status == 200
    assert answer.headers["connection"] == "close"


async def test_http_10_closes_unless_keep_alive_is_asked_for() -> None:
    async with running(Recorder()) as (_, port):
        reader, writer = await connect(port)
        writer.write(post("/echo", version="1.0"))
        plain = await read_response(reader)
        assert await closed_by_server(reader)
        writer.close()

        reader, writer = await connect(port)
        writer.write(post("/echo", version="1.0", headers="Connection: keep-alive\r\n"))
        kept = await read_response(reader)
        writer.write(post("/echo", b"again", version="1.0", headers="Connection: keep-alive\r\n"))
        again = await read_response(reader)
        writer.close()
    assert (plain.status, plain.headers["connection"]) == (200, "close")
    assert (kept.status, kept.headers["connection"]) == (200, "keep-alive")
    assert again.json()["body"] == "again"


# -- errors ----------------------------------------------------------------------------------------------------------


async def test_body_over_the_limit_is_refused_before_it_is_sent() -> None:
    handler = Recorder()
    async with running(handler, max_body_bytes=1024) as (_, port):
        reader, writer = await connect(port)
        writer.write(post("/echo", b"x" * 10)[:-10].replace(b"Content-Length: 10", b"Content-Length: 10000000"))
        writer.write(b"[" * 100)  # a little of the ten megabytes; the rest is never sent
        answer = await read_response(reader)
        assert await closed_by_server(reader)
        writer.close()
    assert answer.status == 413
    assert answer.headers["connection"] == "close"
    assert answer.json()["error"] == {"code": -32600, "message": "request body larger than 1024 bytes"}
    assert handler.requests == []


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"NOT HTTP AT ALL\r\n\r\n", id="request line"),
        pytest.param(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", id="content-length"),
        pytest.param(b"POST / HTTP/1.1\r\nno colon here\r\n\r\n", id="header line"),
        pytest.param(b"\x00\x01\x02 / HTTP/1.1\r\n\r\n", id="binary"),
    ],
)
async def test_malformed_request_is_answered_400_and_closed(raw: bytes) -> None:
    async with running(Recorder()) as (_, port):
        reader, writer = await connect(port)
        writer.write(raw)
        answer = await read_response(reader)
        assert await closed_by_server(reader)
        writer.close()
    assert answer.status == 400
    assert answer.json()["error"] == {"code": -32600, "message": "malformed HTTP request"}


async def test_malformed_request_after_a_good_one_is_answered_after_it() -> None:
    async with running(Recorder()) as (_, port):
        reader, writer = await connect(port)
        writer.write(post("/sleep/0.05") + b"NOT HTTP\r\n\r\n")
        first, second = await read_response(reader), await read_response(reader)
        assert await closed_by_server(reader)
        writer.close()
    assert (first.status, second.status) == (200, 400)


async def test_chunked_request_body_is_answered_411() -> None:
    async with running(Recorder()) as (_, port):
        reader, writer = await connect(port)
        writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        answer = await read_response(reader)
        assert await closed_by_server(reader)
        writer.close()
    assert answer.status == 411


async def test_request_head_over_the_limit_is_answered_431() -> None:
    async with running(Recorder()) as (_, port):
        reader, writer = await connect(port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
        for _ in range(20):
            writer.write(b"X-Padding: " + b"p" * 8000 + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0.001)
        answer = await read_response(reader)
        writer.close()
    assert answer.status == 431


@pytest.mark.parametrize("path", ["/raise", "/raise-early", "/now/raise"])
async def test_handler_exception_is_a_500_with_a_jsonrpc_error_and_the_connection_lives(path: str) -> None:
    async with running(Recorder()) as (_, port):
        reader, writer = await connect(port)
        writer.write(post(path))
        failed = await read_response(reader)
        writer.write(post("/echo"))
        after = await read_response(reader)
        writer.close()
    assert failed.status == 500
    assert failed.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "internal error"}}
    assert after.status == 200


class PlainRefusals(Recorder):
    """Words the server's refusals in plain text, naming the refusal and the limit it is about."""

    def refusal_answer(self, refusal: Refusal, request: EdgeRequest | None, limits: HttpLimits) -> EdgeResponse:
        text = f"{refusal.name} {limits.max_body_bytes} {limits.max_head_bytes} {limits.max_headers}"
        return EdgeResponse(refusal.status, text.encode(), content_type=b"text/plain")


@pytest.mark.parametrize(
    ("sent", "status", "named"),
    [
        (post("/echo", b"x" * 2000), 413, "BODY_TOO_LARGE"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"h" * 5000 + b"\r\n\r\n", 431, "HEAD_TOO_LARGE"),
        (b"GET / HTTP/1.1\r\n\r\n", 400, "NO_HOST"),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 411, "CHUNKED"),
        (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, "VERSION_NOT_SUPPORTED"),
        (post("/raise"), 500, "HANDLER_FAILED"),
        (post("/raise-early"), 500, "HANDLER_FAILED"),
        (post("/now/raise"), 500, "HANDLER_FAILED"),
    ],
)
async def test_the_server_refuses_in_its_handlers_words(sent: bytes, status: int, named: str) -> None:
    # The server decides what it refuses and with which status; what the answer says is the handler's alone.
    async with running(PlainRefusals(), max_body_bytes=1000, max_head_bytes=4096, max_headers=20) as (_, port):
        reader, writer = await connect(port)
        writer.write(sent)
        answer = await read_response(reader)
        writer.close()
    assert answer.status == status
    assert answer.headers["content-type"] == "text/plain"
    assert answer.body == f"{named} 1000 4096 20".encode()


async def test_a_connection_over_the_limit_is_refused_in_the_handlers_words() -> None:
    async with running(PlainRefusals(), max_connections=1) as (_, port):
        first_reader, first_writer = await connect(port)
        first_writer.write(post("/now/first"))
        assert (await read_response(first_reader)).status == 200
        reader, writer = await connect(port)
        answer = await read_response(reader)
        writer.close()
        first_writer.close()
    assert answer.status == 503
    assert answer.body.startswith(b"TOO_MANY_CONNECTIONS ")


async def test_refused_request_with_a_small_body_keeps_the_connection() -> None:
    async with running(Recorder()) as (_, port):
        reader, writer = await connect(port)
        writer.write(post("/refuse", b"x" * 500))
        refused = await read_response(reader)
        writer.write(post("/echo", b"next"))
        after = await read_response(reader)
        writer.close()
    assert refused.status == 403
    assert after.json()["body"] == "next"


# -- timeouts --------------------------------------------------------------------------------------------------------


async def test_idle_keep_alive_connection_is_closed() -> None:
    async with running(Recorder(), idle_seconds=0.2) as (_, port):
        reader, writer = await connect(port)
        started = asyncio.get_running_loop().time()  # before the answer, after which the connection's idle time starts
        writer.write(post("/echo"))
        answer = await read_response(reader)
        assert await closed_by_server(reader, within=30.0)  # the bound only ends a connection never closed
        waited = asyncio.get_running_loop().time() - started
        writer.close()
    assert answer.status == 200
    assert waited >= 0.2 - 0.01  # not before the idle time (a loop's timer may run a clock tick early)


async def test_request_that_does_not_arrive_in_time_is_answered_408() -> None:
    async with running(Recorder(), read_seconds=0.2) as (_, port):
        reader, writer = await connect(port)
        writer.write(post("/echo", b"x" * 100)[:-50])  # the head and half the body
        answer = await read_response(reader)
        assert await closed_by_server(reader, within=3.0)
        writer.close()
    assert answer.status == 408


async def test_a_head_trickled_slower_than_the_request_timeout_is_answered_408() -> None:
    lines = 100
    async with running(Recorder(), read_seconds=0.3) as (_, port):
        reader, writer = await connect(port)
        started = asyncio.get_running_loop().time()  # before the request's deadline starts on the server
        writer.write(b"POST /echo HTTP/1.1\r\nHost: localhost\r\n")
        sent = [0]

        async def trickle() -> None:
            with contextlib.suppress(ConnectionError):
                for index in range(lines):  # a header line every 50 ms: never idle, never done
                    writer.write(b"X-Slow-%d: 1\r\n" % index)
                    sent[0] += 1
                    await writer.drain()
                    await asyncio.sleep(0.05)

        trickling = asyncio.create_task(trickle())
        answer = await read_response(reader)
        waited = asyncio.get_running_loop().time() - started
        sent_before_the_answer = sent[0]
        assert await closed_by_server(reader, within=30.0)
        trickling.cancel()
        writer.close()
    assert answer.status == 408
    assert sent_before_the_answer < lines  # answered at the request's deadline, not once the head was all sent
    assert waited >= 0.3 - 0.01  # not before it (a loop's timer may run a clock tick early)


# -- Expect, backpressure, shutdown ----------------------------------------------------------------------------------


async def test_expect_100_continue() -> None:
    async with running(Recorder()) as (_, port):
        reader, writer = await connect(port)
        writer.write(post("/echo", b"", headers="Expect: 100-continue\r\n").replace(b"Length: 0", b"Length: 4"))
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
        writer.write(b"body")
        answer = await read_response(reader)
        writer.close()
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert answer.json()["body"] == "body"


async def test_large_answer_reaches_a_slow_reader_whole() -> None:
    size = 8 * 1024 * 1024
    expected = bytes(index % 251 for index in range(size))
    async with running(Recorder(), idle_seconds=2.0) as (_, port):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sock.connect(("127.0.0.1", port))
        sock.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=sock, limit=16 * 1024)
        writer.write(post(f"/big/{size}") + post("/echo", b"behind"))
        async with asyncio.timeout(60):
            head = await reader.readuntil(b"\r\n\r\n")
            received = bytearray()
            while len(received) < size:
                received += await reader.read(min(256 * 1024, size - len(received)))
                await asyncio.sleep(0.005)  # a reader slower than the loopback
        behind = await read_response(reader)
        writer.close()
    assert b"content-length: %d" % size in head
    assert received == expected
    assert behind.json()["body"] == "behind"


async def test_graceful_shutdown_finishes_the_request_in_flight() -> None:
    handler = Recorder()
    sock = listening_socket()
    port = sock.getsockname()[1]
    server = HttpServer(handler, max_body_bytes=1024)
    serving = asyncio.create_task(server.serve(sock))
    busy_reader, busy_writer = await connect(port)
    idle_reader, idle_writer = await connect(port)
    busy_writer.write(post("/wait"))
    await asyncio.wait_for(handler.started.wait(), TIMEOUT)

    server.shutdown()
    assert await closed_by_server(idle_reader)  # an idle connection is closed at once
    with pytest.raises(ConnectionRefusedError):
        await connect(port)  # no longer accepting
    assert not serving.done()
    handler.release.set()
    answer = await read_response(busy_reader)
    assert await closed_by_server(busy_reader)
    await asyncio.wait_for(serving, TIMEOUT)
    busy_writer.close()
    idle_writer.close()
    assert (answer.status, answer.headers["connection"]) == (200, "close")


async def test_shutdown_aborts_what_is_still_running_after_the_grace_period() -> None:
    handler = Recorder()
    async with running(handler, grace_seconds=0.2) as (server, port):
        reader, writer = await connect(port)
        writer.write(post("/wait"))
        await asyncio.wait_for(handler.started.wait(), TIMEOUT)
        server.shutdown()
        assert await closed_by_server(reader, within=2.0)
        writer.close()


# -- framing does not depend on how the bytes arrive -------------------------------------------------------------------

STREAM = (
    post("/a?x=1", b'{"first":1}')
    + b"GET /b HTTP/1.1\r\nHost: localhost\r\n\r\n"
    + post("/c", b"[" + b"1," * 300 + b"1]", headers="X-Extra: yes\r\n")
)
EXPECTED = [("POST", "/a", "x=1", '{"first":1}'), ("GET", "/b", "", ""), ("POST", "/c", "", "[" + "1," * 300 + "1]")]


async def _send_in_pieces(pieces: list[bytes]) -> list[tuple[object, ...]]:
    async with running(Recorder()) as (_, port):
        reader, writer = await connect(port)
        writer.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.001)
        answers = [(await read_response(reader)).json() for _ in EXPECTED]
        writer.close()
    return [(answer["method"], answer["path"], answer["query"], answer["body"]) for answer in answers]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(st.lists(st.integers(min_value=1, max_value=len(STREAM) - 1), max_size=12, unique=True))
def test_any_split_of_the_byte_stream_gives_the_same_requests(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STREAM)]
    pieces = [STREAM[start:end] for start, end in itertools.pairwise(bounds)]
    assert asyncio.run(_send_in_pieces(pieces)) == EXPECTED


_HEADER_NAMES = st.sampled_from([*http_server.NOTED_HEADERS, b"accept", b"x-other", b"cookie"])


@given(st.lists(st.tuples(_HEADER_NAMES, st.binary(max_size=8)), max_size=12))
def test_noted_headers_are_the_first_value_of_each(headers: list[tuple[bytes, bytes]]) -> None:
    request = EdgeRequest("POST", "/", b"", headers, "1.1", None, None)
    first = {name: value for name, value in reversed(headers)}
    assert request.noted == [first.get(name) for name in http_server.NOTED_HEADERS]
