"""The edge listener's HTTP/1.1 server: a small ``asyncio.Protocol`` per connection, carrying out what the
connection's sans-IO state (``edgeplane.edge.http_connection``) asks, and running the handler.

Why by hand: every client request crosses this path once, and after the upstream client was replaced by a lean one
(``gateway/http_transport.py``), uvicorn and the event loop around it were the largest cost in the gateway. Profiled
at concurrency 32 against anvil, uvicorn's own frames took 28 % of the gateway's CPU (ASGI scope, ``receive`` and
``send`` message dictionaries, a task per request) and its ``send``, which writes the head and the body of a response
with two ``transport.write`` calls, 16 %. Here a request is parsed straight into an ``EdgeRequest``, the handler runs
as one task, and the response is one buffer and one ``transport.write``: this module's frames, the router's checks
included, were about 11 % of the gateway's CPU and its one write 13 %, and the gateway's CPU per request fell by about
a fifth (the figures of the time are in git history; the current ones in ``docs/benchmarks.md``).

What HTTP it speaks, what it refuses and when a connection closes is the connection's (``HttpConnection``: framing,
pipelining, ``Expect: 100-continue``, body and head limits, keep-alive, timeouts, write flow control, lingering
closes). The protocol here is its transport: the transport's calls go in (``data_received``, ``eof_received``,
``pause_writing``, ``resume_writing``, ``connection_lost``, and the server's sweeper with the time), and the
``Step``s that come out are done (write, pause or resume reading, hand a request to the handler, close, linger,
abort). Besides: a cap on open connections (503 and closed at once); graceful shutdown (stop accepting, close idle
connections, finish the requests in flight up to a deadline, answering them with ``Connection: close``); a client
that reads nothing of its buffered answers for ``idle_seconds`` is dropped.

The handler is asked twice per request: ``answer_head`` with the head only, when the head is complete, so requests
refused on their head (wrong host, method or content type) are answered without reading or buffering their body; then
``handle`` with the whole body, on the loop's next turn. ``handle`` gives the answer itself when it has it at hand (a
refusal, an answer from the gateway's cache), which is written at once, without a task; otherwise it gives an awaitable,
which runs as the connection's one task. Every request whose head was read reaches the handler's ``commit_answer`` once,
with its answer, just before the answer is handed to the socket (with 0 bytes when the answer is dropped, the
connection gone first): what must outlive the process before the client can see the answer (the request's log record,
``edgeplane.edge.request_log``) is done there.

Why the next turn: the requests read in one turn of the loop are then handled together and their answers written
together (uvloop writes what was queued at the end of each turn), so each turn of the loop, with its ``epoll_wait``,
serves more requests. Paired on one CPU at concurrency 16 against the previous server (a task per request), CPU per
request fell by about an eighth; handling each request as soon as it was read, with no task, cost more than the task
did, because each turn then served fewer requests.

The server knows HTTP only: what it refuses (each ``Refusal`` of the connection's, the connection over the limit,
the 500 that replaces a handler's exception) is its decision, with the status it calls for, but what the answer says
is the handler's (``refusal_answer``, given the server's limits for the sizes a 413 or 431 names): the edge's router
words them in JSON-RPC (``edgeplane.edge.refusals``), another application could word them otherwise.

A WebSocket handshake that the handler accepts (its answer an ``Upgrade``) is answered 101, and the transport is
handed to the session the answer opens (``edgeplane.edge.websocket``), which the server keeps track of from then on
for its timeouts and shutdown in the HTTP connection's place; the handshake's record is committed with the 101.

What it does not do: HTTP/2, TLS (terminate it in a proxy in front; TLS in the edge is a later issue), other
upgrades than WebSocket, and chunked request bodies: every client of the edge in use sends ``Content-Length``, and a
declared length lets the body limit be enforced before reading.
"""

from __future__ import annotations

import asyncio
import resource
import socket
from collections.abc import Awaitable
from typing import Protocol, TypeAlias, TypeVar, cast

import structlog

from edgeplane.bounded_memo import BoundedMemo
from edgeplane.edge.http_connection import (
    INTERIM_CONTINUE,
    LINGER_SECONDS,
    HttpConnection,
    HttpLimits,
    Output,
    Refusal,
    Step,
)
from edgeplane.edge.http_messages import (
    CONTENT_LENGTH,
    CONTENT_TYPE,
    EXPECT,
    HOST,
    NOTED_HEADERS,
    REFERER,
    REQUESTED_WITH,
    TRANSFER_ENCODING,
    USER_AGENT,
    Answer,
    EdgeRequest,
    EdgeResponse,
    Upgrade,
    UpgradedSession,
    encode_response,
)

__all__ = [
    "CONTENT_LENGTH",
    "CONTENT_TYPE",
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_IDLE_SECONDS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_HEADERS",
    "DEFAULT_MAX_HEAD_BYTES",
    "DEFAULT_READ_SECONDS",
    "EXPECT",
    "HOST",
    "NOTED_HEADERS",
    "REFERER",
    "REQUESTED_WITH",
    "TRANSFER_ENCODING",
    "USER_AGENT",
    "Answer",
    "EdgeHandler",
    "EdgeRequest",
    "EdgeResponse",
    "HttpLimits",
    "HttpServer",
    "Refusal",
    "Upgrade",
    "UpgradedSession",
    "connection_limit",
    "encode_response",
]

log = structlog.get_logger(__name__)

DEFAULT_IDLE_SECONDS = 30.0  # a keep-alive connection with no request in progress
DEFAULT_READ_SECONDS = 15.0  # from the first byte of a request to its last
DEFAULT_GRACE_SECONDS = 5.0  # how long a shutdown waits for requests in flight
DEFAULT_MAX_HEAD_BYTES = 64 * 1024  # request line and headers
DEFAULT_MAX_HEADERS = 100  # header lines in a request (Apache's LimitRequestFields)
DEFAULT_MAX_CONNECTIONS = 10_000  # open client connections; see ``connection_limit``


class EdgeHandler(Protocol):
    """The application the server runs."""

    def answer_head(self, request: EdgeRequest) -> EdgeResponse | None:
        """An answer decided by the request head alone (the body not read), or None to read the body."""

    def handle(self, request: EdgeRequest) -> EdgeResponse | Awaitable[EdgeResponse]:
        """The answer to a request ``answer_head`` let through, with its whole body: the answer itself when it is at
        hand, else an awaitable of it."""

    def refusal_answer(self, refusal: Refusal, request: EdgeRequest | None, limits: HttpLimits) -> EdgeResponse:
        """The answer to what the server refuses (``request``, when its head was read; None for bytes that were no
        request, or a connection over the limit), with ``refusal.status``; ``limits`` are the server's. Called on
        the loop, between reads: it must be quick and must not raise."""

    def commit_answer(self, request: EdgeRequest, response: EdgeResponse, sent_bytes: int) -> None:
        """Called once for each request whose head was read, just before its answer (the handler's own, or the
        server's refusal) is handed to the socket, ``sent_bytes`` of head and body (and with 0 for an answer dropped
        because the connection went away first): what must outlive the process before the client can see the answer
        (the request's log record) is done here. Runs on the request's path: it must be quick and make no system
        call."""


# The connection's steps and states looked at here, as module constants (a global is read faster than an enum member
# through its class).
_WAIT = Step.WAIT
_HANDLE = Step.HANDLE
_ANSWER = Step.ANSWER
_CONTINUE = Step.CONTINUE
_PAUSE_READING = Step.PAUSE_READING
_RESUME_READING = Step.RESUME_READING
_LINGER = Step.LINGER
_CLOSE = Step.CLOSE
_LOST = Output.LOST
_CLOSING = Output.CLOSING
_LINGERING = Output.LINGERING

# A connection the server keeps track of: an HTTP one, or the session that took one over after a WebSocket handshake.
_Served: TypeAlias = "_HttpConnection | UpgradedSession"


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
        self.limits = HttpLimits(max_body_bytes, max_head_bytes, max_headers, read_seconds, idle_seconds)
        self.stopping = False
        self._connections: set[_Served] = set()
        self._stop: asyncio.Event | None = None
        self._all_closed: asyncio.Event | None = None

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

    def protocol(self, loop: asyncio.AbstractEventLoop) -> asyncio.Protocol:
        """A new connection's protocol (``serve`` makes one per accepted connection): bytes in through
        ``data_received``, answers out through its transport's ``write``. Over ``connection_limit``, it answers 503
        and closes at once."""
        return _HttpConnection(self, loop)

    def shutdown(self) -> None:
        """Starts a graceful shutdown: ``serve`` stops accepting and returns once the connections are closed."""
        self.stopping = True
        for connection in list(self._connections):
            connection.shut_down()  # from now on, answers say Connection: close; idle connections close now
        if self._stop is not None:
            self._stop.set()

    def refusal_answer(self, refusal: Refusal, request: EdgeRequest | None) -> EdgeResponse:
        """The answer to what a connection refuses (``request``, when its head was read), as the handler words it
        (``EdgeHandler.refusal_answer``, given the server's limits)."""
        return self.handler.refusal_answer(refusal, request, self.limits)

    def _add(self, connection: _Served) -> None:
        self._connections.add(connection)

    def _forget(self, connection: _Served) -> None:
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
    """One client connection: the transport's calls go to its ``HttpConnection``, whose steps are done here; runs
    the handler for one request at a time."""

    _transport: asyncio.Transport
    _machine: HttpConnection  # both from ``connection_made`` on, before any other call

    def __init__(self, server: HttpServer, loop: asyncio.AbstractEventLoop) -> None:
        self._server = server
        self._handler = server.handler
        self._loop = loop
        self._task: asyncio.Handle | asyncio.Task[None] | None = None  # the handler's turn to come, or its task
        # Whether the client reads what is buffered for it (looked at by the server's sweeper).
        self._progress_at = 0.0  # the last time (loop time) the client was seen reading buffered output
        self._buffered = 0

    # -- asyncio.Protocol ---------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        server = self._server
        local = _address(transport.get_extra_info("sockname"))
        self._machine = machine = HttpConnection(
            server.limits,
            self._handler.answer_head,
            server.refusal_answer,
            self._commit_dropped,
            self._loop.time,
            _address(transport.get_extra_info("peername")),
            local if local is None else _LOCAL_ADDRESSES(local),
            can_linger=self._transport.can_write_eof(),
        )
        if len(server._connections) >= server.connection_limit:
            # Refused before it holds anything but its socket; the client may not have sent its request yet, so
            # the answer is not lost to a reset.
            self._transport.write(machine.refuse_connection())
            self._transport.close()
            return
        server._add(self)
        if server.stopping:
            self._advance(machine.stop())

    def connection_lost(self, exc: Exception | None) -> None:
        self._machine.lose()
        if self._task is None:
            self._server._forget(self)
        # else the handler finishes, its answer is dropped, and the connection is forgotten then

    def data_received(self, data: bytes) -> None:
        step = self._machine.receive(data)
        if step is not _WAIT:
            self._advance(step)

    def eof_received(self) -> bool:
        return self._machine.receive_eof()  # True: answer what was asked, then close

    def pause_writing(self) -> None:
        self._note_progress()
        if self._machine.pause_writing() and not self._transport.is_closing():
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._advance(self._machine.resume_writing())

    # -- the connection's steps ----------------------------------------------------------------------------------

    def _advance(self, step: Step) -> None:
        """Does ``step`` and the steps that follow it, until the connection waits for an event."""
        machine, transport = self._machine, self._transport
        while step is not _WAIT:
            if step is _HANDLE:
                request = machine.answering
                assert request is not None  # only a refusal answers no request, and it is decided
                # Handled on the loop's next turn, not here: requests that arrive together are then handled together
                # and their answers written together, which costs the loop less per request than answering each as
                # it is read (measured: see the module docstring).
                self._task = self._loop.call_soon(self._handle, request)
                return
            if step is _ANSWER:
                answer = machine.decided
                assert answer is not None
                self._send(machine.answering, answer)
            elif step is _CONTINUE:
                transport.write(INTERIM_CONTINUE)
            elif step is _PAUSE_READING:
                if not transport.is_closing():
                    transport.pause_reading()
            elif step is _RESUME_READING:
                if not transport.is_closing():
                    transport.resume_reading()
            elif step is _LINGER:
                self._note_progress()
                transport.write_eof()
            elif step is _CLOSE:
                self._note_progress()
                transport.close()
                return
            else:  # Step.ABORT
                transport.abort()
                return
            step = machine.next_step()

    def _handle(self, request: EdgeRequest) -> None:
        try:
            answer = self._handler.handle(request)
        except Exception:
            log.exception("edge handler failed", path=request.path)
            answer = self._server.refusal_answer(Refusal.HANDLER_FAILED, request)
        if isinstance(answer, EdgeResponse):
            self._finish(request, answer)
        else:
            self._task = self._loop.create_task(self._run(request, answer))

    async def _run(self, request: EdgeRequest, answering: Awaitable[EdgeResponse]) -> None:
        try:
            answer = await answering
        except Exception:
            log.exception("edge handler failed", path=request.path)
            answer = self._server.refusal_answer(Refusal.HANDLER_FAILED, request)
        except BaseException:  # cancelled (``abort``), or the process is going down: no answer
            self._task = None
            raise
        self._finish(request, answer)

    def _finish(self, request: EdgeRequest, answer: EdgeResponse) -> None:
        """Writes the handler's answer (unless the client went away), and goes on."""
        self._task = None
        if isinstance(answer, Upgrade) and request.upgrade and self._upgrade(request, answer):
            return
        self._send(request, answer)
        machine = self._machine
        if machine.output is _LOST:
            self._server._forget(self)
            return
        step = machine.next_step()
        if step is not _WAIT:
            self._advance(step)

    def _upgrade(self, request: EdgeRequest, answer: Upgrade) -> bool:
        """Accepts a WebSocket handshake: writes the 101 and hands the transport to the session ``answer`` opens,
        which the server then keeps track of in this connection's place. False when the connection is gone."""
        machine = self._machine
        tail = machine.upgrade_tail
        if machine.output is _LOST or tail is None or answer.open_session is None:
            return False
        head = b"".join((answer.head, *(name + b": " + value + b"\r\n" for name, value in answer.headers), b"\r\n"))
        try:
            self._handler.commit_answer(request, answer, len(head))
        except Exception:
            log.exception("edge handler failed to commit an answer", path=request.path)
        machine.lose()  # no more HTTP on this connection
        transport = self._transport
        transport.write(head)
        server = self._server
        session = answer.open_session(transport, server._forget)
        transport.set_protocol(cast(asyncio.BaseProtocol, session))
        server._forget(self)
        if transport.is_closing():
            return True
        server._add(session)
        transport.resume_reading()
        session.start(bytes(tail))
        return True

    def _send(self, request: EdgeRequest | None, answer: EdgeResponse) -> None:
        """Writes ``answer`` to ``request`` once the handler has committed it (``commit_answer``); an answer the
        connection drops (it closed first) is committed with 0 bytes."""
        data = self._machine.respond(answer)
        if request is None:  # a refusal of bytes that were no request: nothing to commit
            if data is not None:
                self._transport.write(data)
            return
        if data is None:
            self._commit_dropped(request, answer)
            return
        try:
            self._handler.commit_answer(request, answer, len(data))
        except Exception:  # the answer goes out all the same
            log.exception("edge handler failed to commit an answer", path=request.path)
        self._transport.write(data)

    def _commit_dropped(self, request: EdgeRequest, answer: EdgeResponse) -> None:
        """Commits an answer that is never written (the connection closed or was lost first) with 0 bytes."""
        try:
            self._handler.commit_answer(request, answer, 0)
        except Exception:
            log.exception("edge handler failed to commit an answer", path=request.path)

    # -- closing ---------------------------------------------------------------------------------------------------

    def shut_down(self) -> None:
        """The server is stopping: closes now when idle, else after the answer in progress."""
        self._advance(self._machine.stop())

    def abort(self) -> None:
        """Drops the connection at once and cancels its handler."""
        if self._task is not None:
            self._task.cancel()
        if self._machine.output is not _LOST:
            self._transport.abort()
        self._machine.lose()
        self._server._forget(self)

    def check_time(self, now: float) -> None:
        """Enforces the timeouts: a client that does not read, and the connection's own (``check_time``)."""
        machine = self._machine
        output = machine.output
        if output is _LOST:
            return
        buffered = 0
        if machine.writing_paused or output is _CLOSING or output is _LINGERING:
            buffered = self._transport.get_write_buffer_size()
            if buffered < self._buffered or buffered == 0:
                self._progress_at = now
            self._buffered = buffered
            if now - self._progress_at > self._server.idle_seconds:
                self._transport.abort()  # the client has not read anything for that long
                return
        step = machine.check_time(now, buffered)
        if step is not _WAIT:
            self._advance(step)

    def _note_progress(self) -> None:
        self._progress_at = self._loop.time()
        self._buffered = self._transport.get_write_buffer_size()


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


# The addresses of connections recur (a client's many connections, every connection's local address): one object
# each, which the request log's rows compare by identity (see ``edgeplane.bounded_memo``).
_ADDRESS_TEXTS: BoundedMemo[str, str] = BoundedMemo(_same)
_LOCAL_ADDRESSES: BoundedMemo[tuple[str, int], tuple[str, int]] = BoundedMemo(_same)
