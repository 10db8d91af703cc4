"""Listening sockets and the uvicorn servers that run ASGI applications on them (the API listener, the development
chain's JSON-RPC server). Sockets are bound before a server starts, so a taken port is a clear error at once, and
signals are left to the caller (several servers may share one event loop)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn


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
    """A uvicorn server that leaves signal handling to its caller; run it with ``serve([socket])``."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def asgi_server(app: Any) -> AsgiServer:
    """A uvicorn server for ``app`` on the running loop, with httptools, no lifespan, no access log."""
    config = uvicorn.Config(
        app,
        loop="none",
        http="httptools",
        ws="none",
        lifespan="off",
        access_log=False,
        log_config=None,
        server_header=False,
        date_header=False,
        proxy_headers=False,
        timeout_keep_alive=30,
    )
    return AsgiServer(config)
