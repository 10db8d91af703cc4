"""A small HTTP/1.1 client for JSON-RPC POSTs to one upstream URL, over a pool of keep-alive connections.

Why by hand: every forwarded request crosses this path once, and aiohttp's general client was the largest single
cost in the gateway. Profiled at concurrency 32 against anvil, ``UpstreamNode.post`` on aiohttp took 45 % of the
gateway's CPU (37 % in ``ClientSession._request`` building request objects, headers, payload and timers, 5 % in the
task it creates per request body), and the benchmark's own load generator measured aiohttp at several times the CPU
per request of a pre-built keep-alive client on the same machine. A JSON-RPC POST needs very little of HTTP: the
request head is the same every time but for ``Content-Length``, so it is built once per upstream and each request
is one ``transport.write``; answers are framed by ``httptools`` (the C parser uvicorn uses); a request is a future
and one timer, not a task.
With it, the gateway's CPU per request at concurrency 32 fell by more than half, and the upstream call from 45 % to
17 % of its CPU, nearly all of that the socket write itself (the figures of the time are in git history; the current
ones in ``docs/benchmarks.md``, "Gateway overhead").

What it does: keep-alive connections to one origin, at most ``max_connections`` of them, the most recently used
taken first (so a quiet period lets the others expire); a connection is closed on any error, on ``Connection:
close``, after a timeout, and when it has been idle longer than ``idle_seconds``; answers framed by
``Content-Length``, chunked encoding or the end of the connection, their head bounded by ``MAX_ANSWER_HEAD_BYTES``
and their body by ``max_answer_bytes`` (past either, the request fails and the connection is closed); ``http`` and
``https`` (the stdlib's default certificate checks); user and password in the URL as Basic authorization.

What it does not do: redirects, proxies, compression (it asks for ``identity``), HTTP/2, pipelining, cookies,
100-continue, or any method but POST.

Resending: a connection the server closed while it sat idle is noticed before the request is written, and another
is used; that is always safe. Once a request's bytes are written they may have reached the server, so a request that
then fails is sent again (once, on a new connection) only when the caller says it is idempotent and the failure is
a kept-alive connection that ended without a byte of answer, the usual sign that the server closed it just as the
request was written.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import ssl
from typing import cast
from urllib.parse import unquote, urlsplit

import httptools

from edgeplane import __version__

DEFAULT_MAX_CONNECTIONS = 128
# Shorter than the keep-alive timeout of most servers, so a connection is rarely closed under the request.
DEFAULT_IDLE_SECONDS = 15.0
# An answer's head and body are held in memory whole: a node that answers without end must not take the process's
# memory with it (an upstream may be a provider outside the operator's control).
DEFAULT_MAX_ANSWER_BYTES = 128 * 1024 * 1024
MAX_ANSWER_HEAD_BYTES = 64 * 1024

_BODYLESS_STATUSES = frozenset({204, 304})


class HttpTransportError(Exception):
    """The upstream could not be reached, did not answer in time, or answered with something that is not HTTP."""


class HttpTransport:
    """POSTs JSON bodies to one URL and returns ``(status, body)``; see the module docstring for the limits."""

    def __init__(
        self,
        url: str,
        *,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http:// or https:// URL: {url!r}")
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        secure = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if secure else 80)
        self._ssl = (ssl_context or ssl.create_default_context()) if secure else None
        authority = parts.netloc.rpartition("@")[2]
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        head = [
            f"POST {target} HTTP/1.1",
            f"Host: {authority}",
            f"User-Agent: edgeplane/{__version__}",
            "Content-Type: application/json",
            "Accept-Encoding: identity",
            "Connection: keep-alive",
        ]
        if parts.username is not None:
            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            head.append(f"Authorization: Basic {base64.b64encode(credentials).decode('ascii')}")
        self._head = ("\r\n".join(head) + "\r\nContent-Length: ").encode("latin-1")
        self._max_connections = max_connections
        self._idle_seconds = idle_seconds
        self._max_answer_bytes = max_answer_bytes
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[_Connection] = []  # a stack: the most recently used is taken first
        self._open = 0  # connections idle, in use or being opened
        self._waiters: collections.deque[asyncio.Future[_Connection | None]] = collections.deque()
        self._closed = False

    async def post(self, body: bytes, *, timeout_seconds: float, idempotent: bool = False) -> tuple[int, bytes]:
        """Sends ``body`` and returns the answer's status and body, whatever the status.

        ``timeout_seconds`` bounds the whole request: waiting for a connection, connecting and the answer.
        ``idempotent`` allows one resend after a connection dropped under the request (see the module docstring).
        Raises ``HttpTransportError`` when the connection cannot be made or fails, on timeout, and when the answer
        is not well-formed HTTP.
        """
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._bind(loop)
        deadline = loop.time() + timeout_seconds
        request = self._head + b"%d\r\n\r\n" % len(body) + body
        connection = self._take_idle(loop.time())
        if connection is None:
            connection = await self._acquire(deadline)
        try:
            answer = await connection.exchange(request, deadline)
        except HttpTransportError:
            self._forget(connection)
            if not (idempotent and connection.exchanges and connection.dropped_unanswered):
                raise
            connection = await self._acquire(deadline, fresh=True)
            try:
                answer = await connection.exchange(request, deadline)
            except BaseException:
                self._forget(connection)
                raise
        except BaseException:  # cancelled with the request in flight: the connection's state is unknown
            self._forget(connection)
            raise
        self._release(connection)
        return answer

    def close(self) -> None:
        """Closes every connection; requests in flight fail with ``HttpTransportError``. Later calls fail too."""
        self._closed = True
        while self._idle:
            self._forget(self._idle.pop())
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(HttpTransportError("the transport is closed"))

    # -- the pool ---------------------------------------------------------------------------------------------------

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        # Connections belong to the loop that opened them; a new loop (tests) starts with none.
        self._loop = loop
        self._idle.clear()
        self._waiters.clear()
        self._open = 0

    def _take_idle(self, now: float) -> _Connection | None:
        idle = self._idle
        while idle:
            connection = idle.pop()
            if connection.closed:
                self._forget(connection)
            elif now - connection.idle_since > self._idle_seconds:
                # Everything below on the stack has been idle longer still.
                self._forget(connection)
                while idle:
                    self._forget(idle.pop())
            else:
                return connection
        return None

    async def _acquire(self, deadline: float, *, fresh: bool = False) -> _Connection:
        loop = cast(asyncio.AbstractEventLoop, self._loop)
        while True:
            if self._closed:
                raise HttpTransportError("the transport is closed")
            if not fresh:
                idle = self._take_idle(loop.time())
                if idle is not None:
                    return idle
            if self._open < self._max_connections:
                self._open += 1
                try:
                    return await self._connect(deadline)
                except BaseException:
                    self._open -= 1
                    self._wake_one(None)
                    raise
            waiter: asyncio.Future[_Connection | None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    handed = await waiter
            except TimeoutError:
                self._give_back(waiter)
                raise HttpTransportError("timed out waiting for a free connection") from None
            except BaseException:
                self._give_back(waiter)
                raise
            if handed is None:
                continue  # a connection was closed, so one may be opened
            if handed.closed:
                self._forget(handed)
                continue
            return handed  # it has just answered a request, so even a ``fresh`` caller may use it

    def _give_back(self, waiter: asyncio.Future[_Connection | None]) -> None:
        """Passes on a connection handed to a waiter that stopped waiting at the same moment."""
        if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
            handed = waiter.result()
            if handed is None:
                self._wake_one(None)
            else:
                self._release(handed)
        else:
            waiter.cancel()

    async def _connect(self, deadline: float) -> _Connection:
        loop = cast(asyncio.AbstractEventLoop, self._loop)
        try:
            async with asyncio.timeout_at(deadline):
                _, connection = await loop.create_connection(
                    lambda: _Connection(loop, self._max_answer_bytes),
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._host if self._ssl is not None else None,
                )
        except TimeoutError:
            raise HttpTransportError("timed out connecting") from None
        except OSError as exc:
            raise HttpTransportError(f"cannot connect: {exc.strerror or exc}") from None
        return connection

    def _release(self, connection: _Connection) -> None:
        if not connection.reusable or self._closed:
            self._forget(connection)
        elif not self._wake_one(connection):
            connection.idle_since = cast(asyncio.AbstractEventLoop, self._loop).time()
            self._idle.append(connection)

    def _forget(self, connection: _Connection) -> None:
        """Closes a connection taken from the pool and frees its place."""
        connection.close()
        self._open -= 1
        self._wake_one(None)

    def _wake_one(self, handed: _Connection | None) -> bool:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(handed)
                return True
        return False


class _Connection(asyncio.Protocol):
    """One keep-alive connection: at most one request in flight, its answer parsed by ``httptools``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_answer_bytes: int) -> None:
        self._loop = loop
        self._max_answer_bytes = max_answer_bytes
        self._head_bytes = 0
        self._body_bytes = 0
        self._too_large: str | None = None  # why a callback stopped the parser
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._body: list[bytes] = []
        self._headers_complete = False
        self._framed = False  # the answer has Content-Length or Transfer-Encoding (else it ends with the connection)
        self.closed = False
        self.reusable = True
        self.exchanges = 0  # answers completed before the current request
        self.dropped_unanswered = False  # the connection ended under a request before any byte of answer
        self._answer_started = False
        self.idle_since = 0.0

    def exchange(self, request: bytes, deadline: float) -> asyncio.Future[tuple[int, bytes]]:
        """Writes a whole request; the future holds the answer or fails with ``HttpTransportError``."""
        waiter = self._loop.create_future()
        if self.closed or self._transport is None:
            waiter.set_exception(HttpTransportError("the connection is closed"))
            return waiter
        self._waiter = waiter
        self._answer_started = False
        self._timer = self._loop.call_at(deadline, self._time_out)
        self._transport.write(request)
        return waiter

    def close(self) -> None:
        self.closed = True
        self.reusable = False
        if self._transport is not None:
            self._transport.close()
        self._fail("the connection was closed")

    # -- asyncio.Protocol ---------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:
            # Bytes nobody asked for: whatever the server meant, the connection is out of step.
            self.close()
            return
        self._answer_started = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(self._too_large or f"malformed answer: {exc}")
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        status = self._parser.get_status_code() if self._headers_complete else 0
        if self._headers_complete and not self._framed and status not in _BODYLESS_STATUSES:
            self._complete(status)  # an answer without a length ends with the connection
            return
        if not self._answer_started:
            self.dropped_unanswered = True
            self._fail(f"the connection ended before an answer ({exc or 'closed by the server'})")
        else:
            self._fail(f"the connection ended in the middle of the answer ({exc or 'closed by the server'})")

    # -- httptools callbacks ---------------------------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value)
        if self._head_bytes > MAX_ANSWER_HEAD_BYTES:
            self._too_large = f"an answer whose headers exceed {MAX_ANSWER_HEAD_BYTES} bytes"
            raise httptools.HttpParserCallbackError(self._too_large)
        # Only the framing headers matter; their names are 14 and 17 bytes long.
        if len(name) in (14, 17) and name.lower() in (b"content-length", b"transfer-encoding"):
            self._framed = True

    def on_headers_complete(self) -> None:
        self._headers_complete = True

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        if self._body_bytes > self._max_answer_bytes:
            self._too_large = f"an answer larger than {self._max_answer_bytes} bytes"
            raise httptools.HttpParserCallbackError(self._too_large)
        self._body.append(body)

    def on_message_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:
            self._reset_answer()  # an interim answer; the final one follows
            return
        self.reusable = self._parser.should_keep_alive()
        self._complete(status)

    # -- answers --------------------------------------------------------------------------------------------------

    def _complete(self, status: int) -> None:
        body = b"".join(self._body)
        waiter = self._waiter
        self._settle()
        if waiter is not None and not waiter.done():
            self.exchanges += 1
            waiter.set_result((status, body))

    def _fail(self, reason: str) -> None:
        waiter = self._waiter
        self._settle()
        if waiter is not None and not waiter.done():
            waiter.set_exception(HttpTransportError(reason))

    def _time_out(self) -> None:
        self._timer = None
        self._fail("timed out waiting for the answer")
        self.close()

    def _settle(self) -> None:
        self._waiter = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._reset_answer()

    def _reset_answer(self) -> None:
        self._body = []
        self._head_bytes = 0
        self._body_bytes = 0
        self._too_large = None
        self._headers_complete = False
        self._framed = False
