"""Listening sockets and the uvicorn servers that run ASGI applications on them (the API listener, the development
chain's JSON-RPC server). Sockets are bound before a server starts, so a taken port is a clear error at once, and
signals are left to the caller (several servers may share one event loop)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import resource
import socket
from collections.abc import Iterator
from typing import Any, ClassVar

import structlog
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from edgeplane.config import ApiSettings

log = structlog.get_logger(__name__)


class ListenError(OSError):
    """A listener could not bind its address."""


def bind_listener(host: str, port: int, *, share_port: bool = False) -> socket.socket:
    """A listening TCP socket. Raises ``ListenError`` saying which address could not be used.

    With ``share_port``, ``join_listener`` can open more sockets on the same address (``SO_REUSEPORT``), among which
    the kernel spreads new connections evenly: one socket per edge worker, so that no worker takes most of the
    connections (with one shared socket, the first worker awake accepts every connection that is waiting). The
    address must still be free: a port another program (or another edgeplane) listens on is an error here too.
    """
    if share_port:
        # SO_REUSEPORT would let this socket join another listener of the same user; a plain bind first tells
        # whether the address is free (and which port 0 picked).
        with _listen(host, port, share_port=False) as probe:
            port = probe.getsockname()[1]
    return _listen(host, port, share_port=share_port)


def join_listener(listener: socket.socket) -> socket.socket:
    """Another listening socket on the address of ``listener`` (bound with ``share_port``), for one more worker."""
    host, port = listener.getsockname()[:2]
    return _listen(host, port, share_port=True)


def _listen(host: str, port: int, *, share_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if share_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


class AsgiServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to its caller; run it with ``serve([socket])``. It sleeps until
    it is asked to exit (``should_exit``), where uvicorn's own loop wakes ten times a second to look (with no date
    header, and no request limit, it has nothing else to do)."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._exit = asyncio.Event()
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._exit.is_set()

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        if value:
            self._exit.set()
        else:
            self._exit.clear()

    async def main_loop(self) -> None:
        await self.on_tick(0)  # the default headers, once
        await self._exit.wait()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, bounded (uvicorn itself never closes a connection that sends nothing or half a
    request, and lets a request head grow without limit):

    - past ``max_connections`` open connections, a new one is answered 503 and closed at once, so that idle clients
      cannot take every file descriptor the process may open;
    - a connection with no request in progress is closed after ``idle_timeout_seconds`` (from its opening, and from
      the end of each answer);
    - a request's line, headers and body must all arrive within ``request_timeout_seconds`` of its first byte,
      however slowly they trickle; the connection is closed otherwise;
    - a request head over ``max_header_bytes`` is answered 431 and the connection closed.

    The body's size is the application's to bound (``edgeplane.api.endpoint``): it reads it as it streams.
    """

    limits: ClassVar[ApiSettings]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._receiving = False
        self._head_bytes = 0
        self._head_complete = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        if len(self.connections) > self.limits.max_connections:
            self._refuse(503, "Service Unavailable", "too many connections to the API; try again later")
            return
        self._arm(self.limits.idle_timeout_seconds)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self._head_complete and not self.transport.is_closing():
            self._head_bytes += len(data)
            if self._head_bytes > self.limits.max_header_bytes:
                self._refuse(431, "Request Header Fields Too Large", "request line and headers are too large")

    def on_message_begin(self) -> None:
        self._receiving = True
        self._head_complete = False
        self._head_bytes = 0
        self._arm(self.limits.request_timeout_seconds)
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._head_complete = True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._receiving = False
        self._disarm()  # the application has the request now; its answer is its own to bound
        super().on_message_complete()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)  # the next request starts now: it is not idle
        super().on_response_complete()
        if not pipelined and not self._receiving and not self.transport.is_closing():
            self._arm(self.limits.idle_timeout_seconds)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def _refuse(self, status: int, reason: str, message: str) -> None:
        """Answers a coded v4 envelope and closes the connection, whatever the parser's state."""
        self._disarm()
        body = json.dumps(
            {"success": False, "errors": [{"code": 10000 + status, "message": message}], "messages": [], "result": None}
        ).encode()
        head = (
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n"
        ).encode()
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(head + body)
        if self.cycle is not None:
            self.cycle.keep_alive = False
        self.transport.close()


def asgi_server(app: Any, *, limits: ApiSettings | None = None) -> AsgiServer:
    """A uvicorn server for ``app`` on the running loop, with httptools, no lifespan, no access log; with ``limits``,
    its connections are bounded as ``BoundedHttpProtocol`` says."""
    protocol: type[asyncio.Protocol] | str = "httptools"
    keep_alive = 30
    if limits is not None:
        protocol = type("ApiHttpProtocol", (BoundedHttpProtocol,), {"limits": limits})
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if open_files != resource.RLIM_INFINITY and limits.max_connections > open_files // 2:
            log.warning(
                "api.max_connections is more than half the open-file limit",
                max_connections=limits.max_connections,
                open_file_limit=open_files,
            )
        keep_alive = max(1, math.ceil(limits.idle_timeout_seconds))  # a fallback: the protocol's own timer is first
    config = uvicorn.Config(
        app,
        loop="none",
        http=protocol,
        ws="none",
        lifespan="off",
        access_log=False,
        log_config=None,
        server_header=False,
        date_header=False,
        proxy_headers=False,
        timeout_keep_alive=keep_alive,
    )
    return AsgiServer(config)
