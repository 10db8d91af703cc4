"""The edge listener's HTTP/1.1 server: a small ``asyncio.Protocol`` per connection, requests framed by ``httptools``.

Why by hand: every client request crosses this path once, and after the upstream client was replaced by a lean one
(``gateway/http_transport.py``), uvicorn and the event loop around it were the largest cost in the gateway. Profiled
at concurrency 32 against anvil, the gateway spent 85 to 100 µs of CPU per request; uvicorn's own frames took 28 % of
it (ASGI scope, ``receive`` and ``send`` message dictionaries, a task per request) and its ``send``, which writes the
head and the body of a response with two ``transport.write`` calls, 16 %. Here a request is parsed straight into an
``EdgeRequest``, the handler runs as one task, and the response is one buffer and one ``transport.write``: this
module's frames, the router's checks included, are about 11 % of the gateway's CPU and its one write 13 %. Measured
with ``bench/gateway.py`` on a loaded two-core machine, old and new runs interleaved (``docs/benchmarks.md``): the
gateway's CPU per request at concurrency 32 fell from 79 to 98 µs to 65 to 70 µs (128 to 140 from 144 to 201 µs at
concurrency 1), its throughput at concurrency 32 rose by 15 to 30 %, and the added p50 at concurrency 1 went from
0.19 to 0.20 ms to 0.14 to 0.17 ms.

What it does: HTTP/1.0 and 1.1, keep-alive (HTTP/1.0 only when asked for), ``Connection: close`` both ways;
pipelined requests answered in order (reading pauses while answers are queued; more than ``MAX_PIPELINED`` read at
once are answered 429 and the connection closed); ``Expect: 100-continue``; bodies
framed by ``Content-Length`` and refused with 413 from the declared length, before any of the body is read;
timeouts for an idle keep-alive connection (closed) and for a request whose head and body do not arrive in time
(408, closed); write backpressure (a connection whose client does not read stops being read and answered until its
buffer drains); a cap on open connections (503 and closed at once); graceful shutdown (stop accepting, close idle
connections, finish the requests in flight up to a deadline, answering them with ``Connection: close``).

What it refuses, answering and closing the connection, so that no reader before or after it can take a request for
another (llhttp, in its strict mode, refuses the rest: obs-fold, whitespace before a colon, bare CR or LF, control
characters, two Content-Lengths, Content-Length with Transfer-Encoding, invalid lengths and versions):

- a head over ``max_head_bytes`` or ``max_headers`` (431), measured on every path: in the read that completes it,
  and after each read while it is still arriving (a line still arriving is held back from the parser until it ends:
  httptools joins the pieces of a header by concatenation, quadratic in their number);
- an HTTP/1.1 request without a Host header (400, RFC 9112 3.2); a second Host, Content-Length, Content-Type,
  Transfer-Encoding or Content-Encoding header (400);
- a target that is neither the origin form, the absolute form of an http or https URL without user info, nor ``*``,
  or that has a fragment (400); an absolute-form target's host takes the Host header's place (RFC 9112 3.2.2), so
  routing, the firewall's ``http.host`` and the request log see the host the target names;
- versions other than 1.0 and 1.1 (505); CONNECT and protocol upgrades (``Connection: upgrade`` with ``Upgrade``,
  WebSocket's handshake among them: 501, since llhttp reads what follows their head as the other protocol, whatever
  Content-Length says); a Transfer-Encoding (411 for chunked, 501 for anything else).

Header values lose the whitespace after them (RFC 9110 5.5; llhttp keeps it), and a HEAD request's answer has no body.

The handler is asked twice per request: ``answer_head`` with the head only, when the head is complete, so requests
refused on their head (wrong host, method or content type) are answered without reading or buffering their body; then
``handle`` with the whole body, on the loop's next turn. ``handle`` gives the answer itself when it has it at hand (a
refusal, an answer from the gateway's cache), which is written at once, without a task; otherwise it gives an awaitable,
which runs as the connection's one task. Just before an answer is handed to the socket the handler's ``commit_answer``
is called with it and its encoded size: what must outlive the process before the client can see the answer (the
request's log record, ``edgeplane.edge.request_log``) is done there. Once written, every answer to a request whose head
was read is handed to the handler's ``answered``, in batches: when ``TELL_BATCH`` answers wait, or
``TELL_DELAY_SECONDS`` after the first of them. Work the client need not wait for is done there.

Why the next turn: the requests read in one turn of the loop are then handled together and their answers written
together (uvloop writes what was queued at the end of each turn), so each turn of the loop, with its ``epoll_wait``,
serves more requests. Paired on one CPU at concurrency 16 against the previous server (a task per request), CPU per
request fell from 133.0 to 116.6 µs; handling each request as soon as it was read, with no task, cost more than the task
did (137.3 against 128.7 µs), because each turn then served fewer requests.

A full batch is told on the loop's next turn rather than at once: the answers written in a turn leave at its end
(uvloop's queued writes), so work done in the middle of a turn holds back every answer of that turn. Paired at
concurrency 16 with logs on, telling on the next turn cost 0.4 to 0.7 µs less CPU per request, and lowered the
p50 by 2 to 3 % (``docs/benchmarks.md``).

Why batches of answers: work done after each answer, even after the write, shows in the latency of the requests that
follow (it runs while the client sends its next request, and it takes the processor's caches from the request path).
Paired at concurrency 1 against the same code with logs off, the request log added 19 µs to the p50 and 21 µs of CPU per
request when it heard of each answer on the loop's next turn, and 11 µs and 14 µs in batches of 64. Under load a batch
fills within a few milliseconds, while its requests are still in the caches; batches of 50 ms at any load cost 3 µs more
per request at concurrency 16.

Every answer the server makes itself, and the 500 that replaces a handler's exception, is a JSON-RPC error object with
``id: null``, since JSON-RPC is what this edge speaks.

When the server closes a connection on which the client may still be sending (a refused body, a malformed request),
it answers, shuts its side down and reads and discards what still arrives for up to ``LINGER_SECONDS``, so that the
client reads the answer instead of a connection reset.

What it does not do: HTTP/2, TLS (terminate it in a proxy in front; TLS in the edge is a later issue), upgrades
(WebSocket) and chunked request bodies (see above): every JSON-RPC client in use sends ``Content-Length``, and a
declared length lets the body limit be enforced before reading.
"""

from __future__ import annotations

import asyncio
import collections
import http
import re
import resource
import socket
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Final, Protocol, TypeVar, cast
from urllib.parse import unquote

import httptools
import structlog

from edgeplane.bounded_memo import BoundedMemo
from edgeplane.jsonrpc.envelope import encode
from edgeplane.jsonrpc.errors import INTERNAL_ERROR, INVALID_REQUEST

log = structlog.get_logger(__name__)

DEFAULT_IDLE_SECONDS = 30.0  # a keep-alive connection with no request in progress
DEFAULT_READ_SECONDS = 15.0  # from the first byte of a request to its last
DEFAULT_GRACE_SECONDS = 5.0  # how long a shutdown waits for requests in flight
DEFAULT_MAX_HEAD_BYTES = 64 * 1024  # request line and headers
DEFAULT_MAX_HEADERS = 100  # header lines in a request (Apache's LimitRequestFields)
DEFAULT_MAX_CONNECTIONS = 10_000  # open client connections; see ``connection_limit``
MAX_PIPELINED = 100  # requests read and waiting for their answers on one connection
LINGER_SECONDS = 2.0  # how long input is drained after the server closed a connection the client may still send on
# The handler hears of written answers (``answered``) in batches: this many, or this long after the first of them.
TELL_BATCH = 64
TELL_DELAY_SECONDS = 0.05
TELL_AT_ONCE_BYTES = 256 * 1024  # an answer this large is told on the next turn, with the batch it joins

# The headers the edge itself reads (framing, routing, the request log), noted in one pass over a request's headers
# when its ``EdgeRequest`` is made (``EdgeRequest.noted``, at these indices): one dictionary look-up per header,
# where asking for each of them by name (``EdgeRequest.header``) walks the headers once per name.
NOTED_HEADERS: Final = (
    b"host",
    b"content-type",
    b"content-length",
    b"transfer-encoding",
    b"expect",
    b"user-agent",
    b"referer",
    b"x-requested-with",
)
HOST, CONTENT_TYPE, CONTENT_LENGTH, TRANSFER_ENCODING, EXPECT, USER_AGENT, REFERER, REQUESTED_WITH = range(
    len(NOTED_HEADERS)
)
# Content-Encoding is looked up in the same pass, at the index after them, and kept apart (``content_encoding``):
# the request log's C rows read ``noted`` and expect exactly ``NOTED_HEADERS``.
_CONTENT_ENCODING: Final = len(NOTED_HEADERS)
_NOTED_SLOTS: Final = len(NOTED_HEADERS) + 1
_NOTED_INDEX: Final = {name: index for index, name in enumerate((*NOTED_HEADERS, b"content-encoding"))}
# Headers a request may carry once only: with two of them, which one counts would depend on who reads the request
# (the router, the firewall, the node), so such a request is refused.
_ONCE_ONLY: Final = frozenset({HOST, CONTENT_TYPE, CONTENT_LENGTH, TRANSFER_ENCODING, _CONTENT_ENCODING})

_JSON = b"application/json"
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


@dataclass(slots=True)
class EdgeRequest:
    """One HTTP request as the handler sees it; ``body`` is empty until the whole body has been read."""

    method: str
    path: str  # percent-decoded, without the query string
    query_string: bytes
    headers: list[tuple[bytes, bytes]]  # names in lower case, in the order received
    http_version: str
    client: tuple[str, int] | None
    server: tuple[str, int] | None
    content_length: int = 0
    body: bytes = b""
    raw_path: str = ""  # as sent (percent-encoded), without the query string: what routes and what the WAF inspects
    context: object = None  # the handler's own, from ``answer_head`` to ``answered``
    # The first value of each of ``NOTED_HEADERS`` (None when absent), at its index there. The server puts the
    # host of an absolute-form target (``POST http://host/path``) in place of the Host header's (RFC 9112, 3.2.2).
    noted: list[bytes | None] = field(init=False, repr=False, compare=False)
    content_encoding: bytes | None = field(init=False, repr=False, compare=False)  # its first value, or None
    # The name of a header of ``_ONCE_ONLY`` that the request has more than once (the server refuses it), or None.
    repeated: bytes | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        noted: list[bytes | None] = [None] * _NOTED_SLOTS
        index_of = _NOTED_INDEX.get
        repeated = None
        for name, value in self.headers:
            index = index_of(name)
            if index is not None:
                if noted[index] is None:
                    noted[index] = value
                elif index in _ONCE_ONLY:
                    repeated = name
        self.content_encoding = noted.pop()
        self.noted = noted
        self.repeated = repeated
        if not self.raw_path:
            self.raw_path = self.path  # a request made without the server (the server sets both)

    def header(self, name: bytes) -> bytes | None:
        """The first value of a header (``name`` in lower case), or None; for the headers of ``NOTED_HEADERS``,
        ``noted`` has it at hand."""
        for key, value in self.headers:
            if key == name:
                return value
        return None


@dataclass(slots=True)
class EdgeResponse:
    """An answer: status, body and any headers besides Content-Type, Content-Length and Connection. Never changed
    once made (shared answers are module constants); not frozen only because a frozen dataclass costs twice as much
    to make, and the edge makes one per request."""

    status: int
    body: bytes
    content_type: bytes = _JSON
    headers: tuple[tuple[bytes, bytes], ...] = ()


# An answer as the server tells the handler of it, once written: the request, the response, the bytes written (head
# and body) and when (Unix nanoseconds). A plain tuple: the server makes one per request.
Answer = tuple[EdgeRequest, EdgeResponse, int, int]


class EdgeHandler(Protocol):
    """The application the server runs."""

    def answer_head(self, request: EdgeRequest) -> EdgeResponse | None:
        """An answer decided by the request head alone (the body not read), or None to read the body."""

    def handle(self, request: EdgeRequest) -> EdgeResponse | Awaitable[EdgeResponse]:
        """The answer to a request ``answer_head`` let through, with its whole body: the answer itself when it is at
        hand, else an awaitable of it."""

    def commit_answer(self, request: EdgeRequest, response: EdgeResponse, sent_bytes: int) -> None:
        """Called just before an answer to a request whose head was read is handed to the socket, ``sent_bytes``
        of head and body (and with 0 for an answer dropped because the client went away first): what must outlive
        the process before the client can see the answer (the request's log record) is done here. Runs on the
        request's path: it must be quick and make no system call."""

    def answered(self, answers: list[Answer]) -> None:
        """Called after the writes with a batch of the answers to requests whose head was read (the handler's own,
        and the server's refusals), in the order written: each as ``(request, response, sent_bytes, written_ns)``,
        ``sent_bytes`` of head and body written at ``written_ns`` (Unix nanoseconds; 0 bytes: dropped, the client
        went away first). The requests' bodies are gone by then. The list is the handler's to keep."""


def jsonrpc_error(
    status: int, code: int, message: str, *, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> EdgeResponse:
    """An HTTP answer whose body is a JSON-RPC error object with ``id: null``."""
    body = encode({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})
    return EdgeResponse(status, body, headers=headers)


_INTERNAL_ERROR = jsonrpc_error(500, INTERNAL_ERROR, "internal error")
_BAD_REQUEST = jsonrpc_error(400, INVALID_REQUEST, "malformed HTTP request")
_BAD_TARGET = jsonrpc_error(
    400, INVALID_REQUEST, "malformed request target; send a path (/v1/<network>) or an http:// URL, without a fragment"
)
_NO_HOST = jsonrpc_error(400, INVALID_REQUEST, "an HTTP/1.1 request needs one Host header")
_VERSION_NOT_SUPPORTED = jsonrpc_error(505, INVALID_REQUEST, "HTTP version not supported; use HTTP/1.1")
_BUSY = jsonrpc_error(503, INVALID_REQUEST, "too many connections; try again later")
_LENGTH_REQUIRED = jsonrpc_error(
    411, INVALID_REQUEST, "chunked request bodies are not accepted; send the body with Content-Length"
)
_CODING_NOT_IMPLEMENTED = jsonrpc_error(
    501, INVALID_REQUEST, "transfer coding not implemented; send the body with Content-Length"
)
_UPGRADE_NOT_IMPLEMENTED = jsonrpc_error(501, INVALID_REQUEST, "CONNECT and protocol upgrades are not implemented")
_TOO_MANY_PIPELINED = jsonrpc_error(
    429, INVALID_REQUEST, f"more than {MAX_PIPELINED} pipelined requests; wait for answers before sending more"
)
_TIMED_OUT = jsonrpc_error(408, INVALID_REQUEST, "the request did not arrive in time")

_status_lines: dict[int, bytes] = {}


def _status_line(status: int) -> bytes:
    line = _status_lines.get(status)
    if line is None:
        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        line = _status_lines[status] = f"HTTP/1.1 {status} {phrase}\r\n".encode("latin-1")
    return line


def encode_response(response: EdgeResponse, *, keep_alive: bool, http_10: bool, head_only: bool = False) -> bytes:
    """The whole response, head and body, as one buffer; the head alone with ``head_only`` (the answer to a HEAD
    request, whose Content-Length is that of the body it would have had: RFC 9110, 9.3.2)."""
    parts = [
        _status_line(response.status),
        b"content-type: ",
        response.content_type,
        b"\r\ncontent-length: %d\r\n" % len(response.body),
    ]
    for name, value in response.headers:
        parts += (name, b": ", value, b"\r\n")
    if not keep_alive:
        parts.append(b"connection: close\r\n")
    elif http_10:
        parts.append(b"connection: keep-alive\r\n")
    parts += (b"\r\n", b"" if head_only else response.body)
    return b"".join(parts)


@dataclass(slots=True)
class _Pending:
    """A request waiting for its turn to be answered, or an answer already decided."""

    request: EdgeRequest | None
    answer: EdgeResponse | None
    keep_alive: bool
    http_10: bool
    head_only: bool = False  # a HEAD request: its answer has no body


class HttpServer:
    """Serves ``handler`` on a listening socket; see the module docstring for what it does and does not do."""

    def __init__(
        self,
        handler: EdgeHandler,
        *,
        max_body_bytes: int,
        max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES,
        max_headers: int = DEFAULT_MAX_HEADERS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        read_seconds: float = DEFAULT_READ_SECONDS,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
    ) -> None:
        """``max_head_bytes`` and ``max_headers`` bound a request's head (answered 431 beyond), ``max_body_bytes`` its
        body (413); ``max_connections`` the open client connections (see ``connection_limit``); ``idle_seconds`` a
        keep-alive connection without a request, and a client that reads nothing of its answers; ``read_seconds`` a
        request from its first byte to its last (408)."""
        self.handler = handler
        self.max_body_bytes = max_body_bytes
        self.max_head_bytes = max_head_bytes
        self.max_headers = max_headers
        self.connection_limit = connection_limit(max_connections)
        self.idle_seconds = idle_seconds
        self.read_seconds = read_seconds
        self.grace_seconds = grace_seconds
        self.too_large = jsonrpc_error(413, INVALID_REQUEST, f"request body larger than {max_body_bytes} bytes")
        self.head_too_large = jsonrpc_error(
            431, INVALID_REQUEST, f"request head larger than {max_head_bytes} bytes or {max_headers} headers"
        )
        self.stopping = False
        self._connections: set[_HttpConnection] = set()
        self._stop: asyncio.Event | None = None
        self._all_closed: asyncio.Event | None = None
        # answers written and not yet told (``_tell``): request, answer, bytes written, when
        self._to_tell: list[Answer] = []
        self._tell_timer: asyncio.Handle | None = None  # the batch's timer, or its call on the next turn
        self._tell_soon = False  # whether that is the call on the next turn

    async def serve(self, sock: socket.socket) -> None:
        """Accepts connections on ``sock`` (bound and listening) until ``shutdown``; returns when they are all closed.

        Requests in flight at shutdown are finished for up to ``grace_seconds``; then the remaining connections are
        aborted and their handlers cancelled.
        """
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._all_closed = asyncio.Event()
        if self.stopping:
            self._stop.set()
        server = await loop.create_server(lambda: self.protocol(loop), sock=sock, backlog=2048)
        sweeper = loop.create_task(self._sweep(loop))
        try:
            await self._stop.wait()
        finally:
            try:
                server.close()
                sweeper.cancel()
                for connection in list(self._connections):
                    connection.shut_down()
                if self._connections:
                    self._all_closed.clear()
                    try:
                        async with asyncio.timeout(self.grace_seconds):
                            await self._all_closed.wait()
                    except TimeoutError:
                        log.warning("requests still in flight at the end of the shutdown", count=len(self._connections))
                    for connection in list(self._connections):
                        connection.abort()
                await server.wait_closed()
            finally:
                self._tell_all()  # the handler hears of every answer written before ``serve`` returns

    def protocol(self, loop: asyncio.AbstractEventLoop) -> asyncio.Protocol:
        """A new connection's protocol (``serve`` makes one per accepted connection): bytes in through
        ``data_received``, answers out through its transport's ``write``. Over ``connection_limit``, it answers 503
        and closes at once."""
        return _HttpConnection(self, loop)

    def shutdown(self) -> None:
        """Starts a graceful shutdown: ``serve`` stops accepting and returns once the connections are closed."""
        self.stopping = True
        if self._stop is not None:
            self._stop.set()

    def _add(self, connection: _HttpConnection) -> None:
        self._connections.add(connection)

    def _tell(self, request: EdgeRequest, answer: EdgeResponse, sent_bytes: int) -> None:
        """Tells the handler of an answer once it is written, in batches: once ``TELL_BATCH`` answers wait, or
        ``TELL_DELAY_SECONDS`` after the first of them (see the module docstring)."""
        request.body = b""  # not needed any more; a batch should not hold bodies
        told = self._to_tell
        told.append((request, answer, sent_bytes, time.time_ns()))
        if len(told) >= TELL_BATCH or sent_bytes > TELL_AT_ONCE_BYTES:
            # A batch holds a bounded number of answers, and no large one for long. It is told on the loop's next
            # turn, once the answers of this one are written (see the module docstring).
            if not self._tell_soon:
                if self._tell_timer is not None:
                    self._tell_timer.cancel()
                self._tell_timer = asyncio.get_running_loop().call_soon(self._tell_all)
                self._tell_soon = True
        elif len(told) == 1:
            self._tell_timer = asyncio.get_running_loop().call_later(TELL_DELAY_SECONDS, self._tell_all)

    def _tell_all(self) -> None:
        if self._tell_timer is not None:
            self._tell_timer.cancel()
            self._tell_timer = None
        self._tell_soon = False
        told, self._to_tell = self._to_tell, []
        if not told:
            return
        try:
            self.handler.answered(told)  # one call a batch: the handler's work per answer is a loop's, not a call's
        except Exception:
            log.exception("edge handler failed after answering", answers=len(told))

    def _forget(self, connection: _HttpConnection) -> None:
        self._connections.discard(connection)
        if not self._connections and self._all_closed is not None:
            self._all_closed.set()

    async def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        # One timer for all connections: per-request timers cost more than a look at every connection a few times
        # a second, and the timeouts need no better precision than a quarter of the shortest.
        interval = min(max(min(self.idle_seconds, self.read_seconds, LINGER_SECONDS) / 4, 0.02), 1.0)
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for connection in list(self._connections):
                connection.check_time(now)


class _HttpConnection(asyncio.Protocol):
    """One client connection: parses requests, runs the handler for one at a time, writes answers in order."""

    def __init__(self, server: HttpServer, loop: asyncio.AbstractEventLoop) -> None:
        self._server = server
        self._handler = server.handler
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpRequestParser(self)
        self._client: tuple[str, int] | None = None
        self._local: tuple[str, int] | None = None
        self._queue: collections.deque[_Pending] = collections.deque()
        self._task: asyncio.Handle | asyncio.Task[None] | None = None  # the handler's turn to come, or its task
        self._busy = False  # a handler is making an answer
        self._input_closed = False  # no more requests are read; the connection closes after the queued answers
        self._refused = False  # input was refused part-way: the client may still be sending
        self._client_done = False  # the client shut its side down
        self._closing = False  # no more answers are written
        self._lingering = False  # closing: writing shut down, input drained and discarded
        self._lost = False
        self._reading_paused = False
        self._writing_paused = False
        # The request being read.
        self._in_message = False
        self._in_head = False
        self._held = bytearray()  # a line of the head that has not ended yet, held back from the parser
        self._head_received = 0  # bytes of the reads that left the head unfinished
        self._fed = 0  # the size of the read being parsed
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._request: EdgeRequest | None = None
        self._answer: EdgeResponse | None = None  # decided from the head; the body is discarded
        self._body: list[bytes] = []
        # Times (loop time), looked at by the server's sweeper.
        self._idle_since = loop.time()
        self._message_since = 0.0
        self._linger_since = 0.0
        self._progress_at = 0.0  # the last time the client was seen reading buffered output
        self._buffered = 0

    # -- asyncio.Protocol ---------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        self._client = _address(transport.get_extra_info("peername"))
        local = _address(transport.get_extra_info("sockname"))
        self._local = local if local is None else _LOCAL_ADDRESSES(local)
        if len(self._server._connections) >= self._server.connection_limit:
            # Refused before it holds anything but its socket; the client may not have sent its request yet, so
            # the answer is not lost to a reset.
            self._input_closed = self._closing = True
            self._transport.write(encode_response(_BUSY, keep_alive=False, http_10=False))
            self._transport.close()
            return
        self._server._add(self)
        if self._server.stopping:
            self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = self._closing = True
        self._queue.clear()
        if not self._busy:
            self._server._forget(self)
        # else the handler finishes, its answer is dropped, and the connection is forgotten then

    def data_received(self, data: bytes) -> None:
        if self._input_closed:
            return  # draining before a close, or input after the request the connection closes after
        if self._in_head:
            # A head that arrives in pieces reaches the parser a line at a time at most: httptools joins the pieces
            # of a header by concatenation, so a header trickled a byte at a time would cost time quadratic in its
            # size.
            held = self._held
            if b"\n" not in data:
                held += data
                if len(held) > self._server.max_head_bytes:
                    self._refuse(self._server.head_too_large)
                return
            if held:
                data = bytes(held) + data
                held.clear()
        self._fed = len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # The request was queued as any other; what follows is another protocol, not spoken here.
            self._input_closed = True
            self._advance()
            return
        except httptools.HttpParserError:
            if not self._input_closed:
                self._refuse(_BAD_REQUEST, self._request)
            return
        if self._in_head and not self._input_closed:
            self._head_received += len(data)
            if self._head_received > self._server.max_head_bytes and self._head_over_limit(data):
                self._refuse(self._server.head_too_large)

    def _head_over_limit(self, data: bytes) -> bool:
        """Whether the unfinished head is over a limit: its headers so far, or the line still arriving (the bytes
        after the last line end of ``data``, the read just parsed)."""
        server = self._server
        headers, limit = self._headers, server.max_head_bytes
        unfinished = len(data) - data.rfind(b"\n") - 1
        return len(headers) > server.max_headers or unfinished > limit or _head_size(self._url, headers) > limit

    def eof_received(self) -> bool:
        self._client_done = True
        if self._lingering or self._in_message or not (self._busy or self._queue):
            return False  # nothing (more) to answer: the transport closes
        self._input_closed = True
        return True  # answer what was asked, then close

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._note_progress()
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._advance()

    # -- httptools callbacks ---------------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._input_closed:
            return
        self._in_message = self._in_head = True
        self._head_received = 0
        self._message_since = self._loop.time()
        self._url = b""
        self._headers = []
        self._body = []
        self._answer = None

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        # llhttp leaves out the whitespace before a value but keeps the whitespace after it, which is not part of
        # the value either (RFC 9110, 5.5).
        self._headers.append((name.lower(), value.rstrip()))

    def on_headers_complete(self) -> None:
        if self._input_closed:
            return
        self._in_head = False
        server, headers, url = self._server, self._headers, self._url
        # The head is within what was read since it began: measured only when that could be over the limit.
        if len(headers) > server.max_headers or (
            self._head_received + self._fed > server.max_head_bytes and _head_size(url, headers) > server.max_head_bytes
        ):
            self._refuse(server.head_too_large)
            return
        parser = self._parser
        version = parser.get_http_version()
        request = EdgeRequest(
            method=_METHODS(parser.get_method()),
            path="",
            query_string=b"",
            headers=headers,
            http_version=_VERSIONS.get(version, version),
            client=self._client,
            server=self._local,
        )
        self._request = request
        try:
            request.path, request.raw_path, request.query_string, authority = _TARGETS(url)
        except ValueError:
            request.path = request.raw_path = url.decode("latin-1")
            self._refuse(_BAD_TARGET, request)
            return
        noted = request.noted
        host = noted[HOST]
        if version not in _VERSIONS:
            self._refuse(_VERSION_NOT_SUPPORTED, request)
            return
        if parser.should_upgrade():
            # CONNECT, or Connection: upgrade with Upgrade: llhttp takes what follows the head for the other
            # protocol, whatever Content-Length says, where a reader that does not upgrade takes it for the body.
            self._refuse(_UPGRADE_NOT_IMPLEMENTED, request)
            return
        repeated = request.repeated
        if repeated is not None:
            name = repeated.decode("latin-1")
            self._refuse(jsonrpc_error(400, INVALID_REQUEST, f"more than one {name} header"), request)
            return
        if host is None and version == "1.1":
            self._refuse(_NO_HOST, request)
            return
        if authority is not None:
            noted[HOST] = authority  # the target's host wins over the Host header's (RFC 9112, 3.2.2)
        coding = noted[TRANSFER_ENCODING]
        if coding is not None:
            self._refuse(_LENGTH_REQUIRED if coding.lower() == b"chunked" else _CODING_NOT_IMPLEMENTED, request)
            return
        length, expect_value = noted[CONTENT_LENGTH], noted[EXPECT]
        # An HTTP/1.0 client does not know 100 Continue (RFC 9110, 10.1.1).
        expect = expect_value is not None and expect_value.lower() == b"100-continue" and version == "1.1"
        request.content_length = size = int(length) if length else 0  # httptools has checked it is a number
        limit = server.max_body_bytes
        try:
            answer = self._handler.answer_head(request)
        except Exception:
            log.exception("edge handler failed", path=request.path)
            answer = _INTERNAL_ERROR
        if answer is None and size > limit:
            answer = server.too_large
        if answer is not None:
            if size and (expect or size > limit):
                self._refuse(answer, request)  # answered before the body is sent or read; the connection closes
            else:
                self._answer = answer  # the body is read and discarded, and the connection kept
        elif expect and size and not (self._busy or self._queue):
            # Only when nothing is being answered: a 100 must not overtake the answers to earlier requests (the
            # client sends the body after a while anyway).
            cast(asyncio.Transport, self._transport).write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        if self._answer is None and not self._input_closed:
            self._body.append(body)

    def on_message_complete(self) -> None:
        request = self._request
        if self._input_closed or request is None:
            return
        self._in_message = False
        self._request = None
        if self._answer is None:
            body = self._body
            request.body = body[0] if len(body) == 1 else b"".join(body)
        self._body = []
        keep_alive = self._parser.should_keep_alive()
        self._queue.append(
            _Pending(request, self._answer, keep_alive, request.http_version == "1.0", request.method == "HEAD")
        )
        self._answer = None
        if self._busy:
            self._update_reading()  # pipelined: stop reading until the queue is answered
            if len(self._queue) > MAX_PIPELINED:
                # Reading pauses between reads only: one read of small requests would queue thousands, each
                # many times its size in memory.
                self._refuse(_TOO_MANY_PIPELINED)
        else:
            self._advance()

    # -- answering -------------------------------------------------------------------------------------------------

    def _advance(self) -> None:
        """Answers queued requests in order while nothing is in progress and the client reads; then waits."""
        queue = self._queue
        while queue and not (self._busy or self._writing_paused or self._closing):
            pending = queue.popleft()
            request = pending.request
            if pending.answer is not None:
                sent_bytes = self._send(pending.answer, pending)
                if request is not None:
                    self._server._tell(request, pending.answer, sent_bytes)
                continue
            assert request is not None
            # Handled on the loop's next turn, not here: requests that arrive together are then handled together
            # and their answers written together, which costs the loop less per request than answering each as it
            # is read (measured: see the module docstring).
            self._busy = True
            self._task = self._loop.call_soon(self._handle, pending, request)
        if self._busy or self._closing:
            return
        if not queue and not self._in_message:
            if self._input_closed or self._server.stopping:
                self._close()
                return
            self._idle_since = self._loop.time()
        self._update_reading()

    def _handle(self, pending: _Pending, request: EdgeRequest) -> None:
        try:
            answer = self._handler.handle(request)
        except Exception:
            log.exception("edge handler failed", path=request.path)
            answer = _INTERNAL_ERROR
        if isinstance(answer, EdgeResponse):
            self._finish(pending, request, answer)
        else:
            self._task = self._loop.create_task(self._run(pending, request, answer))

    async def _run(self, pending: _Pending, request: EdgeRequest, answering: Awaitable[EdgeResponse]) -> None:
        try:
            answer = await answering
        except Exception:
            log.exception("edge handler failed", path=request.path)
            answer = _INTERNAL_ERROR
        except BaseException:  # cancelled (``abort``), or the process is going down: no answer
            self._task = None
            self._busy = False
            raise
        self._finish(pending, request, answer)

    def _finish(self, pending: _Pending, request: EdgeRequest, answer: EdgeResponse) -> None:
        """Writes the handler's answer (unless the client went away), tells the handler, and goes on."""
        self._task = None
        self._busy = False
        if self._lost:
            self._server._forget(self)
            self._commit(request, answer, 0)
            self._server._tell(request, answer, 0)
            return
        self._server._tell(request, answer, self._send(answer, pending))
        self._advance()

    def _send(self, answer: EdgeResponse, pending: _Pending) -> int:
        """Writes ``answer`` to ``pending``, once the handler has committed it (``commit_answer``); returns its size
        (0 when the connection is closing and it is not written)."""
        request = pending.request
        if self._closing:
            if request is not None:
                self._commit(request, answer, 0)
            return 0
        # The last answer the connection will give says so.
        keep_alive = pending.keep_alive and not self._server.stopping and not (self._input_closed and not self._queue)
        data = encode_response(answer, keep_alive=keep_alive, http_10=pending.http_10, head_only=pending.head_only)
        if request is not None:
            try:
                self._handler.commit_answer(request, answer, len(data))
            except Exception:  # the answer goes out all the same
                log.exception("edge handler failed to commit an answer", path=request.path)
        cast(asyncio.Transport, self._transport).write(data)
        if not keep_alive:
            self._close()
        return len(data)

    def _commit(self, request: EdgeRequest, answer: EdgeResponse, sent_bytes: int) -> None:
        try:
            self._handler.commit_answer(request, answer, sent_bytes)
        except Exception:  # the answer goes out all the same
            log.exception("edge handler failed to commit an answer", path=request.path)

    def _refuse(self, answer: EdgeResponse, request: EdgeRequest | None = None) -> None:
        """Answers with ``answer`` after what is queued (to ``request``, when its head was read), reads no more
        requests and closes the connection."""
        self._input_closed = self._refused = True
        self._in_message = self._in_head = False
        self._request = None
        self._held.clear()
        self._queue.append(_Pending(request, answer, False, False))
        self._advance()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._lost:
            return
        pause = (self._writing_paused or bool(self._queue)) and not self._lingering
        if pause != self._reading_paused and not transport.is_closing():
            self._reading_paused = pause
            if pause:
                transport.pause_reading()
            else:
                transport.resume_reading()
                self._message_since = self._loop.time()  # the time a request may take counts while it is read

    # -- closing ---------------------------------------------------------------------------------------------------

    def _close(self) -> None:
        """Closes once the buffered answers are written; lingers when the client may still be sending."""
        transport = self._transport
        if transport is None or self._closing:
            return
        self._closing = self._input_closed = True
        self._note_progress()
        may_be_sending = self._refused or self._in_message or bool(self._queue)
        self._queue.clear()
        if self._client_done or not may_be_sending or not transport.can_write_eof():
            transport.close()
            return
        # Closing with unread input makes the kernel send a reset, which can destroy the answer before the client
        # has read it; so writing is shut down and the input drained until the client closes or time is up.
        self._lingering = True
        self._linger_since = self._loop.time()
        transport.write_eof()
        if self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()

    def shut_down(self) -> None:
        """The server is stopping: closes now when idle, else after the answer in progress."""
        if not (self._busy or self._queue or self._in_message):
            self._close()

    def abort(self) -> None:
        """Drops the connection at once and cancels its handler."""
        if self._task is not None:
            self._task.cancel()
        if self._transport is not None and not self._lost:
            self._transport.abort()
        self._lost = self._closing = True
        self._server._forget(self)

    def check_time(self, now: float) -> None:
        """Enforces the timeouts: idle, reading a request, a client that does not read, lingering."""
        transport = self._transport
        if transport is None or self._lost:
            return
        if self._writing_paused or self._closing:
            buffered = transport.get_write_buffer_size()
            if buffered < self._buffered or buffered == 0:
                self._progress_at = now
            self._buffered = buffered
            if now - self._progress_at > self._server.idle_seconds:
                transport.abort()  # the client has not read anything for that long
            elif self._lingering and buffered:
                self._linger_since = now  # the drain starts when the answer is out
            elif self._lingering and now - self._linger_since > LINGER_SECONDS:
                transport.abort()
        elif self._in_message:
            if not self._reading_paused and now - self._message_since > self._server.read_seconds:
                self._refuse(_TIMED_OUT, self._request)
        elif not (self._busy or self._queue) and now - self._idle_since > self._server.idle_seconds:
            self._close()

    def _note_progress(self) -> None:
        self._progress_at = self._loop.time()
        self._buffered = cast(asyncio.Transport, self._transport).get_write_buffer_size()


def _head_size(url: bytes, headers: list[tuple[bytes, bytes]]) -> int:
    """About the size of a request head: its target, and each header line (name, value, separator and line end)."""
    return len(url) + sum(len(name) + len(value) for name, value in headers) + 4 * len(headers)


# The absolute form of a target: ``http://host[:port]/path?query``; its authority without user info.
_ABSOLUTE_FORM: Final = re.compile(rb"(?i:https?)://([^/?#@]+)(/[^#]*|\?[^#]*|)")


def _target(url: bytes) -> tuple[str, str, bytes, bytes | None]:
    """A request target's path (percent-decoded), its path as sent, its query string, and the authority of an
    absolute-form target (``host[:port]``; None for the origin form). Raises ValueError for anything else than the
    origin form, the absolute form of an http or https URL and ``*``, and for a fragment (``#``), which a client
    never sends (RFC 9112, 3.2)."""
    authority = None
    if url[:1] != b"/":
        if url == b"*":
            return "*", "*", b"", None
        absolute = _ABSOLUTE_FORM.fullmatch(url)
        if absolute is None:
            raise ValueError("not a request target")
        authority, url = absolute.group(1), absolute.group(2)
        url = b"/" + url if url[:1] != b"/" else url
    elif b"#" in url:
        raise ValueError("a request target has no fragment")
    path, _, query = url.partition(b"?")
    text = path.decode("latin-1")
    return unquote(text) if "%" in text else text, text, query, authority


# Targets and methods recur from request to request (see ``edgeplane.bounded_memo``).
_TARGETS = BoundedMemo(_target)
_METHODS: BoundedMemo[bytes, str] = BoundedMemo(bytes.decode)  # httptools accepts only known (ASCII) methods


def connection_limit(max_connections: int) -> int:
    """How many client connections a server keeps open: ``max_connections``, or three quarters of the process's
    limit on open files when that is lower, so that the rest (upstream connections, journals, the database) are
    not starved by clients."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return max_connections
    return max(1, min(max_connections, soft * 3 // 4))


def _address(value: object) -> tuple[str, int] | None:
    if isinstance(value, tuple) and len(value) >= 2:
        return _ADDRESS_TEXTS(str(value[0])), int(value[1])
    return None


_Value = TypeVar("_Value")


def _same(value: _Value) -> _Value:
    return value


# The addresses of connections recur (a client's many connections, every connection's local address) and so do HTTP
# versions: one object each, which the request log's rows compare by identity (see ``edgeplane.bounded_memo``).
_ADDRESS_TEXTS: BoundedMemo[str, str] = BoundedMemo(_same)
_LOCAL_ADDRESSES: BoundedMemo[tuple[str, int], tuple[str, int]] = BoundedMemo(_same)
_VERSIONS: Final = {"1.1": "1.1", "1.0": "1.0"}
