"""Raw HTTP/1.1 over a socket, as an attacker sends it: for end-to-end tests of what a listener does with bytes no
well-behaved client would send."""

from __future__ import annotations

import socket


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    """A TCP connection to ``127.0.0.1:port``, with Nagle's delay off so that each send goes at once."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of one answer framed by ``Content-Length`` (none: no body).
    Raises ``ConnectionError`` when the connection ends before the head does, or in the body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before an answer: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed in the body")
        body += chunk
    return int(status_line.split()[1]), headers, body
