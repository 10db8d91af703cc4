"""WebSocket (RFC 6455) on the edge listener: the handshake's answer, and one connection after it.

Why here and not in the HTTP server: once the handshake is answered, the socket speaks another protocol, and the
HTTP connection's state (``edgeplane.edge.http_connection``) has nothing more to say about it. The server hands the
transport to a ``WebSocketSession`` (``asyncio.Transport.set_protocol``), with whatever the client sent after its
handshake. Framing is wsproto's (a sans-IO implementation of RFC 6455: masking, fragmentation, control frames, UTF-8
of text messages, close handshake); what is decided here is what a message means and the bounds.

What a session does: each text (or binary) message is handed whole to the ``MessageHandler`` (the router's, which
answers it as a JSON-RPC request or batch), and what the handler sends goes out as a text message. Pings are
answered with pongs (wsproto's). The bounds, each with the close code the client sees:

- a frame wsproto refuses (unmasked, reserved bits or opcodes, a fragmented control frame, a bad close frame): 1002;
- a text message that is not UTF-8: 1007;
- a message over ``max_message_bytes``, counted as it arrives (nothing over the bound is held): 1009;
- a client that does not read: what the session sends waits in the transport's buffer up to its high-water mark,
  then in the session's queue; past ``max_send_queue_bytes`` the queue is dropped and the connection closed with
  1008 (policy; the close frame follows what the transport's buffer holds, if the client ever reads again), and
  aborted when the client reads nothing for ``close_seconds`` before answering the close. A slow client costs the
  others nothing: nobody waits for it. Any close drops what waits in the queue: nothing follows a close frame;
- nothing received (a message, ping or pong) for ``idle_seconds``: 1001 (clients that follow subscriptions send
  pings; web3.py's and the websockets library's clients do by default);
- the server shutting down: 1001.

Messages are answered concurrently, up to ``max_in_flight`` at once; beyond that reading pauses until one is
answered. Answers may so arrive in another order than their requests, which JSON-RPC allows (ids pair them).
Extensions (permessage-deflate) are not offered: a compressed message's size would need its own bound.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Protocol

import structlog
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Message, Ping, TextMessage
from wsproto.frame_protocol import CloseReason
from wsproto.utilities import generate_accept_token

from edgeplane.edge.http_messages import EdgeRequest, EdgeResponse, Upgrade, UpgradedSession

log = structlog.get_logger(__name__)

WRITE_HIGH_WATER: Final = 64 * 1024  # the transport's buffer before what is sent waits in the session's queue

PROTOCOL_ERROR: Final = 1002
INVALID_DATA: Final = 1007
POLICY_VIOLATION: Final = 1008
MESSAGE_TOO_BIG: Final = 1009
GOING_AWAY: Final = 1001
NORMAL: Final = 1000


@dataclass(frozen=True, slots=True)
class WebSocketLimits:
    """What a WebSocket connection holds its client to (see the module docstring)."""

    max_message_bytes: int
    max_send_queue_bytes: int
    idle_seconds: float
    max_in_flight: int = 64
    max_subscriptions: int = 100  # ``eth_subscribe`` subscriptions open on one socket
    close_seconds: float = 5.0


# What opens a session on a transport, given the server's callback for when it closes (``Upgrade.open_session``).
OpenSession = Callable[[asyncio.Transport, Callable[[UpgradedSession], None]], UpgradedSession]


class Sender(Protocol):
    """What a message handler sends with: a session."""

    def send_text(self, data: bytes) -> None:
        """Sends ``data`` (UTF-8 JSON) as one text message."""


class MessageHandler(Protocol):
    """The application behind a session."""

    def message(self, sender: Sender, data: bytes) -> bytes | Awaitable[bytes | None] | None:
        """The answer to one whole message (None for none), at once or awaitable; it may also send later
        (notifications) through ``sender``."""

    def closed(self, sender: Sender) -> None:
        """The connection is closed: nothing more is sent through ``sender``."""


def is_websocket_upgrade(request: EdgeRequest) -> bool:
    """Whether ``request`` asks for a WebSocket (a GET with ``Upgrade: websocket``, HTTP/1.1)."""
    if request.method != "GET" or request.http_version != "1.1":
        return False
    upgrade = request.header(b"upgrade")
    return upgrade is not None and b"websocket" in [part.strip().lower() for part in upgrade.split(b",")]


def accept(
    request: EdgeRequest, open_session: OpenSession, *, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> EdgeResponse:
    """The answer to a WebSocket handshake that passed the router: an ``Upgrade`` (101, which the server writes
    before handing the transport to ``open_session``), 426 for another version than 13, 400 for a bad key."""
    version = request.header(b"sec-websocket-version")
    if version is None or version.strip() != b"13":
        return EdgeResponse(
            426,
            b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"WebSocket version 13 is required"}}',
            headers=((b"sec-websocket-version", b"13"), *headers),
        )
    key = request.header(b"sec-websocket-key")
    try:
        valid = key is not None and len(base64.b64decode(key.strip(), validate=True)) == 16
    except binascii.Error:
        valid = False
    if not valid or key is None:
        return EdgeResponse(
            400,
            b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"malformed Sec-WebSocket-Key"}}',
            headers=headers,
        )
    token = generate_accept_token(key.strip())
    head = (
        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
        b"sec-websocket-accept: " + token + b"\r\n"
    )
    return Upgrade(101, b"", headers=headers, head=head, open_session=open_session)


class WebSocketSession(asyncio.Protocol):
    """One WebSocket connection after its handshake: see the module docstring. The server calls ``start`` once it
    has set the session as the transport's protocol; ``check_time``, ``shut_down`` and ``abort`` as for its HTTP
    connections; ``on_closed`` is told once when the connection is gone."""

    def __init__(
        self,
        transport: asyncio.Transport,
        handler: MessageHandler,
        limits: WebSocketLimits,
        loop: asyncio.AbstractEventLoop,
        on_closed: Callable[[UpgradedSession], None],
    ) -> None:
        self._transport = transport
        self._handler = handler
        self._limits = limits
        self._loop = loop
        self._on_closed = on_closed
        self._ws = Connection(ConnectionType.SERVER)
        self._message: list[bytes] = []
        self._message_bytes = 0
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._writing_paused = False
        self._reading_paused = False
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._received_at = loop.time()
        self._closing_since: float | None = None  # when the close frame was sent, or the client last read since
        self._buffered_at_close = 0  # the transport's buffer then
        self._gone = False
        self.messages_in = 0
        self.messages_out = 0
        self.close_code: int | None = None

    def start(self, tail: bytes) -> None:
        """Begins, with what the client sent after its handshake."""
        self._transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        if tail:
            self.data_received(tail)

    # -- asyncio.Protocol ---------------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._gone or self._ws.state is ConnectionState.CLOSED:
            return
        self._received_at = self._loop.time()
        self._ws.receive_data(data)
        self._events()

    def eof_received(self) -> bool:
        return False  # the transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone_now()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        queue = self._queue
        while queue and not self._writing_paused and not self._gone:
            data = queue.popleft()
            self._queued -= len(data)
            self._transport.write(data)

    # -- sending ---------------------------------------------------------------------------------------------------

    def send_text(self, data: bytes) -> None:
        """Sends ``data`` as a text message (wsproto frames text from ``str``: JSON is ASCII or UTF-8)."""
        if self._gone or self._ws.state is not ConnectionState.OPEN:
            return
        frame = self._ws.send(Message(data=data.decode("utf-8")))
        self.messages_out += 1
        if not self._writing_paused:
            self._transport.write(frame)
            return
        self._queue.append(frame)
        self._queued += len(frame)
        if self._queued > self._limits.max_send_queue_bytes:
            self.close(POLICY_VIOLATION, "send queue overflow: the client does not read")

    def close(self, code: int, reason: str = "") -> None:
        """Starts the close handshake with ``code``: nothing more is read or sent but the close frame; the
        transport closes when the client answers, or after ``close_seconds``."""
        if self._gone or self._ws.state is not ConnectionState.OPEN:
            return
        self.close_code = code
        self._drop_queue()  # nothing is sent after a close frame
        self._transport.write(self._ws.send(CloseConnection(code=code, reason=reason)))
        self._closing_since = self._loop.time()
        self._buffered_at_close = self._transport.get_write_buffer_size()

    def _drop_queue(self) -> None:
        """Forgets the messages waiting for the client to read (a control frame is written after the transport's
        buffer; the messages in the session's queue would follow it)."""
        self._queue.clear()
        self._queued = 0

    # -- events ------------------------------------------------------------------------------------------------------

    def _events(self) -> None:
        ws, limits = self._ws, self._limits
        for event in ws.events():
            if isinstance(event, TextMessage | BytesMessage):
                if ws.state is not ConnectionState.OPEN:
                    continue
                chunk = event.data.encode("utf-8") if isinstance(event, TextMessage) else bytes(event.data)
                self._message_bytes += len(chunk)
                if self._message_bytes > limits.max_message_bytes:
                    self._message.clear()
                    self.close(MESSAGE_TOO_BIG, f"message larger than {limits.max_message_bytes} bytes")
                    continue
                self._message.append(chunk)
                if event.message_finished:
                    message = b"".join(self._message)
                    self._message.clear()
                    self._message_bytes = 0
                    self._dispatch(message)
            elif isinstance(event, Ping):
                if ws.state is ConnectionState.OPEN:
                    self._transport.write(ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                if ws.state is ConnectionState.OPEN:
                    # wsproto refused a frame (the event is its own, not the client's): closed with its code.
                    code = int(event.code)
                    if code == CloseReason.ABNORMAL_CLOSURE:
                        self._transport.abort()
                        return
                    self.close(code, event.reason or "")
                elif ws.state is ConnectionState.REMOTE_CLOSING:
                    self.close_code = self.close_code or int(event.code)
                    self._drop_queue()
                    self._transport.write(ws.send(event.response()))
                    self._transport.close()
                else:  # the client's answer to our close
                    self._transport.close()
                return

    def _dispatch(self, message: bytes) -> None:
        self.messages_in += 1
        try:
            answer = self._handler.message(self, message)
        except Exception:
            log.exception("websocket message handler failed")
            self.close(1011, "internal error")
            return
        if answer is None or isinstance(answer, bytes):
            if answer is not None:
                self.send_text(answer)
            return
        self._in_flight += 1
        if self._in_flight >= self._limits.max_in_flight and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()
        task = self._loop.create_task(self._answer(answer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, answering: Awaitable[bytes | None]) -> None:
        try:
            answer = await answering
        except Exception:
            log.exception("websocket message handler failed")
            answer = None
            self.close(1011, "internal error")
        finally:
            self._in_flight -= 1
        if answer is not None:
            self.send_text(answer)
        if self._reading_paused and self._in_flight < self._limits.max_in_flight and not self._gone:
            self._reading_paused = False
            self._transport.resume_reading()

    # -- the server's calls ------------------------------------------------------------------------------------------

    def check_time(self, now: float) -> None:
        """The idle timeout, and a close the client does not answer."""
        if self._gone:
            return
        if self._closing_since is not None:
            # Aborted when the close is not answered in time, counted from the last time the client read anything:
            # a client that reads slowly through what was sent before the close frame still gets to read it.
            buffered = self._transport.get_write_buffer_size()
            if buffered < self._buffered_at_close:
                self._closing_since = now
            self._buffered_at_close = buffered
            if now - self._closing_since > self._limits.close_seconds:
                self._transport.abort()
        elif now - self._received_at > self._limits.idle_seconds:
            self.close(GOING_AWAY, "idle timeout")

    def shut_down(self) -> None:
        self.close(GOING_AWAY, "server shutting down")

    def abort(self) -> None:
        if not self._gone:
            self._transport.abort()
        self._gone_now()

    def _gone_now(self) -> None:
        if self._gone:
            return
        self._gone = True
        self._queue.clear()
        for task in list(self._tasks):
            task.cancel()
        try:
            self._handler.closed(self)
        finally:
            self._on_closed(self)
