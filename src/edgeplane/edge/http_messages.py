"""The edge's HTTP messages: a request as its handler sees it (``EdgeRequest``), an answer (``EdgeResponse``), and an
answer's bytes on the wire (``encode_response``).

A request is made once its head has been read (``edgeplane.edge.http_connection``), its body added once read; the
headers the edge itself reads are noted in the same pass (``NOTED_HEADERS``). ``edgeplane.edge.http_server`` serves
them to a handler and re-exports these names, which the rest of the edge imports from there.
"""

from __future__ import annotations

import asyncio
import http
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

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
    context: object = None  # the handler's own, from ``answer_head`` to ``commit_answer``
    upgrade: bool = False  # a WebSocket handshake the server may switch to (``edgeplane.edge.websocket``)
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


@dataclass(slots=True)
class Upgrade(EdgeResponse):
    """The answer that accepts a WebSocket handshake (status 101): the server writes ``head`` (the status line and
    headers, without the blank line; ``headers`` follow it) and hands the transport to the session ``open_session``
    makes, whose protocol then owns the connection."""

    head: bytes = b""
    open_session: Callable[[asyncio.Transport, Callable[[UpgradedSession], None]], UpgradedSession] | None = None


class UpgradedSession(Protocol):
    """The protocol that owns a connection after an ``Upgrade`` (an ``asyncio.Protocol``): ``start`` with what the
    client sent after its handshake; the server's calls, as to its HTTP connections. ``open_session`` is given the
    server's callback to call once the session is closed."""

    def start(self, tail: bytes) -> None: ...

    def shut_down(self) -> None: ...

    def abort(self) -> None: ...

    def check_time(self, now: float) -> None: ...


# An answer as the request log's ``emit`` takes it (scripts and tests): the request, the response, the bytes written
# (head and body) and when (Unix nanoseconds).
Answer = tuple[EdgeRequest, EdgeResponse, int, int]

_status_lines: dict[int, bytes] = {}


def _status_line(status: int) -> bytes:
    """The status line of ``status``, made once: ``encode_response`` finds it in ``_status_lines``, without a call."""
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
        _status_lines.get(response.status) or _status_line(response.status),
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
