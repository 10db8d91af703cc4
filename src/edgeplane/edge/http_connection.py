"""One HTTP/1.1 server connection without I/O: bytes and events in, what to do out.

``HttpConnection`` frames requests with llhttp (through ``httptools``), checks their heads, answers them in order and
decides when the connection closes; it has no socket, no event loop and no idea of what a body means. Its owner
(``edgeplane.edge.http_server``) hands it what the transport reports (``receive``, ``receive_eof``, ``pause_writing``,
``resume_writing``, ``lose``), the handler's answers (``respond``) and the time (``check_time``), and carries out the
``Step`` each call returns, asking ``next_step`` for the next one until it is ``Step.WAIT``. The one decision it
leaves to the application is made on a request's head (``answer_head``, called as soon as a head is read, so that a
request refused on its head is answered without its body being buffered), and the answers to what it refuses are
worded by the application too (``refusal_answer``, given a ``Refusal``). An answer it decided and will never write,
because the connection closed or was lost first (a refusal, or an answer from the head, waiting its turn), is handed
to the owner's ``drop_answer`` with its request, once.

What it does: HTTP/1.0 and 1.1, keep-alive (HTTP/1.0 only when asked for), ``Connection: close`` both ways; pipelined
requests answered in order (reading pauses while answers wait; more than ``MAX_PIPELINED`` waiting are answered 429
and the connection closed); ``Expect: 100-continue`` (the 100 only when no earlier request is being handled or
waiting, so it never overtakes an answer); bodies framed by ``Content-Length`` and refused with 413 from the declared
length, before any of the body is read; a timeout for a request whose head and body do not arrive in time (408) and
for an idle keep-alive connection (closed); write flow control (a client that does not read stops being read and
answered until its buffer drains).

What it refuses, answering and closing the connection, so that no reader before or after it can take a request for
another (llhttp, in its strict mode, refuses the rest: obs-fold, whitespace before a colon, bare CR or LF, control
characters, two Content-Lengths, Content-Length with Transfer-Encoding, invalid lengths and versions, data after a
request that closes the connection):

- a head over ``max_head_bytes`` or ``max_headers`` (431), measured on every path: in the read that completes it,
  and after each read while it is still arriving (a line still arriving is held back from the parser until it ends:
  httptools joins the pieces of a header by concatenation, quadratic in their number);
- an HTTP/1.1 request without a Host header (400, RFC 9112 3.2); a second Host, Content-Length, Content-Type,
  Transfer-Encoding or Content-Encoding header (400);
- a target that is neither the origin form, the absolute form of an http or https URL without user info, nor ``*``,
  or that has a fragment (400); an absolute-form target's host takes the Host header's place (RFC 9112 3.2.2), so
  routing, the firewall's ``http.host`` and the request log see the host the target names;
- versions other than 1.0 and 1.1 (505); CONNECT and protocol upgrades (``Connection: upgrade`` with ``Upgrade``:
  501, since llhttp reads what follows their head as the other protocol, whatever Content-Length says), but for a
  WebSocket handshake (a GET without a body, with nothing owed before it), which goes to the handler marked
  ``upgrade``, with what follows its head kept in ``upgrade_tail`` for the session its owner may open; a
  Transfer-Encoding (411 for chunked, 501 for anything else).

Header values lose the whitespace after them (RFC 9110 5.5; llhttp keeps it), and a HEAD request's answer has no body.
When it closes a connection on which the client may still be sending (a refused request, bytes after the last one),
it lingers: writing is shut down and what still arrives is discarded for up to ``LINGER_SECONDS``, so that the
client reads the answer instead of a connection reset.

The state is two enums, one per direction, and the transport's flow control:

- ``input`` (``Input``), the requests read: ``IDLE`` between requests, ``HEAD`` while a head arrives, ``BODY`` while
  its body does; then ``IDLE`` again, or ``DONE`` after a request that closes the connection. A refusal, or bytes
  after the last request, make it ``DISCARDING``; the client's end of input makes it ``EOF``. ``DONE``,
  ``DISCARDING`` and ``EOF`` read nothing more.
- ``output`` (``Output``), the answers: ``IDLE`` when none is owed now; a request read becomes the one answered
  (``answering``), ``TO_HANDLE`` until ``Step.HANDLE`` hands it to the handler, then ``HANDLING`` until ``respond``;
  an answer already decided (a refusal, or ``answer_head``'s) is ``TO_ANSWER`` until ``respond`` writes it.
  ``respond`` leaves ``IDLE`` to answer the next request (which waited in a queue), or ``LAST`` when its answer
  closes the connection; closing is ``CLOSING`` (``Step.CLOSE``) or ``LINGERING`` (``Step.LINGER``); ``LOST`` once
  the transport is gone.
- ``writing_paused``: the transport's buffer is full. Answers wait (the one being made is still written); reading
  pauses while answers wait or writing is paused, except while lingering.

The common request (one read, nothing owed before it) goes ``IDLE``/``IDLE`` → ``HEAD`` → ``BODY`` → ``IDLE`` with
``output`` ``TO_HANDLE`` → ``HANDLING`` → (``respond``) ``IDLE``; nothing is made for it but the request (with its
headers and body) and its answer's bytes.
"""

from __future__ import annotations

import collections
import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

import httptools
import structlog

from edgeplane.bounded_memo import BoundedMemo
from edgeplane.edge.http_messages import (
    CONTENT_LENGTH,
    EXPECT,
    HOST,
    TRANSFER_ENCODING,
    EdgeRequest,
    EdgeResponse,
    encode_response,
)
from edgeplane.edge.websocket import is_websocket_upgrade

log = structlog.get_logger(__name__)

MAX_PIPELINED = 100  # requests read and waiting for their answers on one connection
LINGER_SECONDS = 2.0  # how long input is drained after the server closed a connection the client may still send on
INTERIM_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"


class Input(enum.Enum):
    """The requests read on a connection (see the module docstring)."""

    IDLE = "between requests"
    HEAD = "a head is arriving"
    BODY = "a head was read and its body is arriving"
    DONE = "no more requests: the last one closes the connection, or the connection is closing"
    DISCARDING = "no more requests, and the client may still be sending: what arrives is discarded"
    EOF = "the client shut its side down"


class Output(enum.Enum):
    """The answers on a connection (see the module docstring)."""

    IDLE = "no answer owed now"
    TO_HANDLE = "the request answered next is to be handed to the handler"
    HANDLING = "the handler is making the answer"
    TO_ANSWER = "the answer is decided and to be written"
    LAST = "the answer that closes the connection was written"
    CLOSING = "the transport closes once its buffer is written"
    LINGERING = "writing shut down, input drained until the client closes or time is up"
    LOST = "the transport is gone"


class Step(enum.Enum):
    """What the owner of a connection does next; after any but ``WAIT``, ``HANDLE``, ``CLOSE`` and ``ABORT`` it asks
    ``next_step`` again."""

    WAIT = "nothing until the next event"
    CONTINUE = "write ``INTERIM_CONTINUE``"
    ANSWER = "write ``respond(decided)``, the answer to ``answering`` decided already"
    HANDLE = "hand ``answering`` to the handler, and its answer to ``respond`` once made"
    PAUSE_READING = "stop reading"
    RESUME_READING = "read again"
    LINGER = "shut writing down (write EOF) and read on; ``check_time`` ends it"
    CLOSE = "close the transport once its buffer is written"
    ABORT = "drop the connection now"


class Refusal(enum.Enum):
    """Why the connection answers by itself what it read, rather than handing it to the handler; ``status`` is the
    HTTP status it calls for. The owner words the answer (``refusal_answer``)."""

    MALFORMED = 400, "llhttp refused the bytes"
    BAD_TARGET = 400, "a target of no accepted form, or with a fragment"
    NO_HOST = 400, "an HTTP/1.1 request without Host"
    REPEATED_HEADER = 400, "a header allowed once came twice (the request's ``repeated``)"
    HEAD_TOO_LARGE = 431, "a head over ``max_head_bytes`` or ``max_headers``"
    BODY_TOO_LARGE = 413, "a Content-Length over ``max_body_bytes``"
    VERSION_NOT_SUPPORTED = 505, "an HTTP version other than 1.0 and 1.1"
    UPGRADE = 501, "CONNECT, or a protocol upgrade"
    CHUNKED = 411, "a chunked body"
    TRANSFER_CODING = 501, "a transfer coding other than chunked"
    TOO_MANY_PIPELINED = 429, "more than ``MAX_PIPELINED`` requests waiting for their answers"
    TIMED_OUT = 408, "a request not read within ``read_seconds``"
    TOO_MANY_CONNECTIONS = 503, "a connection over the server's limit (``refuse_connection``)"
    HANDLER_FAILED = 500, "the handler raised (``answer_head`` here, or ``handle`` in the owner)"

    def __init__(self, status: int, reason: str) -> None:
        self.status = status
        self.reason = reason


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """What a connection holds its client to: the size of a request's head (431 beyond) and body (413), the time a
    request may take to arrive (408) and a keep-alive connection may stay idle (closed)."""

    max_body_bytes: int
    max_head_bytes: int
    max_headers: int
    read_seconds: float
    idle_seconds: float


# The members, as module constants: the hot path compares against them, and a global is read several times faster
# than an enum member through its class.
_IN_IDLE: Final = Input.IDLE
_HEAD: Final = Input.HEAD
_BODY: Final = Input.BODY
_DONE: Final = Input.DONE
_DISCARDING: Final = Input.DISCARDING
_EOF: Final = Input.EOF
_OUT_IDLE: Final = Output.IDLE
_TO_HANDLE: Final = Output.TO_HANDLE
_HANDLING: Final = Output.HANDLING
_TO_ANSWER: Final = Output.TO_ANSWER
_LAST: Final = Output.LAST
_CLOSING: Final = Output.CLOSING
_LINGERING: Final = Output.LINGERING
_LOST: Final = Output.LOST
_WAIT: Final = Step.WAIT
_CONTINUE: Final = Step.CONTINUE
_ANSWER: Final = Step.ANSWER
_HANDLE: Final = Step.HANDLE
_PAUSE_READING: Final = Step.PAUSE_READING
_RESUME_READING: Final = Step.RESUME_READING
_LINGER: Final = Step.LINGER
_CLOSE: Final = Step.CLOSE
_ABORT: Final = Step.ABORT

# A request waiting for its turn to be answered: the request (None for a refusal of what was no request yet), the
# answer when already decided, and whether the request lets the connection live on. A tuple: made only for requests
# that arrive while another is owed.
_Waiting = tuple[EdgeRequest | None, EdgeResponse | None, bool]


class HttpConnection:
    """One client connection's HTTP/1.1 state: see the module docstring. ``answer_head`` is the application's decision
    on a request's head (an answer, or None to read the body and hand the request over); ``refusal_answer`` words
    the answer to a ``Refusal`` (of a request, or of bytes that were none); ``drop_answer`` is told of each answer to
    a request that was decided and will never be written (see the module docstring); ``clock`` is the time
    ``check_time`` is given (the event loop's); ``client`` and ``local`` the connection's addresses, for its requests;
    ``can_linger`` whether the transport can shut writing down alone (else a connection that would linger closes)."""

    __slots__ = (
        "_answer_head",
        "_body",
        "_can_linger",
        "_client",
        "_clock",
        "_continue_due",
        "_drop_answer",
        "_early",
        "_fed",
        "_head_received",
        "_headers",
        "_held",
        "_idle_since",
        "_keep_alive",
        "_limits",
        "_linger_since",
        "_local",
        "_message_since",
        "_parser",
        "_queue",
        "_reading_paused",
        "_refusal_answer",
        "_request",
        "_stopping",
        "_url",
        "answering",
        "decided",
        "input",
        "output",
        "upgrade_tail",
        "writing_paused",
    )

    def __init__(
        self,
        limits: HttpLimits,
        answer_head: Callable[[EdgeRequest], EdgeResponse | None],
        refusal_answer: Callable[[Refusal, EdgeRequest | None], EdgeResponse],
        drop_answer: Callable[[EdgeRequest, EdgeResponse], None],
        clock: Callable[[], float],
        client: tuple[str, int] | None,
        local: tuple[str, int] | None,
        *,
        can_linger: bool = True,
    ) -> None:
        self._limits = limits
        self._answer_head = answer_head
        self._refusal_answer = refusal_answer
        self._drop_answer = drop_answer
        self._clock = clock
        self._client = client
        self._local = local
        self._can_linger = can_linger
        self._parser = httptools.HttpRequestParser(self)
        self.input = _IN_IDLE
        self.output = _OUT_IDLE
        self.writing_paused = False  # the transport's buffer is full
        self._reading_paused = False  # as last asked of the transport
        self._continue_due = False  # an interim 100 is to be written
        self._stopping = False  # the server is shutting down: the next answer closes the connection
        # The answers: the one owed now, and the requests waiting behind it.
        self.answering: EdgeRequest | None = None  # the request answered now (None: a refusal of no request)
        self.decided: EdgeResponse | None = None  # its answer, when decided without the handler
        self._keep_alive = True  # whether that request lets the connection live on
        self._queue: collections.deque[_Waiting] = collections.deque()
        # The request being read.
        self._held = bytearray()  # a line of the head that has not ended yet, held back from the parser
        self._head_received = 0  # bytes of the reads that left the head unfinished
        self._fed = 0  # the size of the read being parsed
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._request: EdgeRequest | None = None
        self._early: EdgeResponse | None = None  # its answer, decided from its head: the body is discarded
        self._body: list[bytes] = []
        # What the client sent after a WebSocket handshake the handler may accept (None: no such handshake).
        self.upgrade_tail: bytearray | None = None
        # Times (``clock``).
        self._idle_since = clock()
        self._message_since = 0.0
        self._linger_since = 0.0

    # -- events --------------------------------------------------------------------------------------------------------

    def receive(self, data: bytes) -> Step:
        """Bytes read from the client."""
        state = self.input
        if state is _HEAD:
            # A head that arrives in pieces reaches the parser a line at a time at most: httptools joins the pieces
            # of a header by concatenation, so a header trickled a byte at a time would cost time quadratic in its
            # size.
            held = self._held
            if b"\n" not in data:
                held += data
                if len(held) > self._limits.max_head_bytes:
                    self._refuse(Refusal.HEAD_TOO_LARGE, None)
                    return self.next_step()
                return _WAIT
            if held:
                data = bytes(held) + data
                held.clear()
        elif state is not _IN_IDLE and state is not _BODY:
            tail = self.upgrade_tail
            if tail is not None:
                # Frames sent before the handshake is answered (a client should wait for it): kept for the session,
                # within the bound of a head.
                tail += data
                if len(tail) > self._limits.max_head_bytes:
                    self.upgrade_tail = None
                    self.input = _DISCARDING
                return _WAIT
            if state is _DONE:
                self.input = _DISCARDING  # the client sends after its last request
            return _WAIT
        self._fed = len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            # What follows the head is another protocol: kept for a WebSocket handshake the handler may accept
            # (``upgrade_tail``), discarded after an upgrade refused on its head.
            if self._upgrading():
                self.upgrade_tail = bytearray(data[upgrade.args[0] :])
                self.input = _DONE
            elif self.input is not _EOF:
                self.input = _DISCARDING
        except httptools.HttpParserError:
            state = self.input
            if state is _DONE:
                self.input = _DISCARDING  # llhttp refuses what follows a request that closes the connection
            elif state is _IN_IDLE or state is _HEAD or state is _BODY:
                self._refuse(Refusal.MALFORMED, self._request)
        else:
            if self.input is _HEAD:
                self._head_received += len(data)
                if self._head_received > self._limits.max_head_bytes and self._head_over_limit(data):
                    self._refuse(Refusal.HEAD_TOO_LARGE, None)
        return self.next_step()

    def receive_eof(self) -> bool:
        """The client shut its side down: whether the connection stays open to answer what was asked (else the
        transport closes now)."""
        state, output = self.input, self.output
        self.input = _EOF
        if output is _LINGERING or state is _HEAD or state is _BODY:
            return False
        return output is _HANDLING or bool(self._queue)

    def pause_writing(self) -> bool:
        """The transport's buffer is full: whether reading is to pause now (it resumes once answers flow again)."""
        self.writing_paused = True
        output = self.output
        if self._reading_paused or output is _LINGERING or output is _CLOSING or output is _LOST:
            return False
        self._reading_paused = True
        return True

    def resume_writing(self) -> Step:
        """The transport's buffer has drained."""
        self.writing_paused = False
        return self.next_step()

    def stop(self) -> Step:
        """The server is shutting down: an idle connection closes now, a busy one after its next answer (which says
        ``Connection: close``)."""
        self._stopping = True
        state = self.input
        if self.output is _OUT_IDLE and not self._queue and state is not _HEAD and state is not _BODY:
            return self._close()
        return _WAIT

    def lose(self) -> None:
        """The transport is gone: nothing more is read or written (``respond`` drops an answer made after, and the
        answers decided and not written are dropped now: ``drop_answer``)."""
        self._drop_decided()
        self.output = _LOST
        self.input = _DONE
        self.answering = self.decided = None
        self._continue_due = False

    def check_time(self, now: float, buffered: int) -> Step:
        """Enforces the timeouts at ``now`` (``clock``'s time): a request not read in time (408), an idle connection
        (closed), a lingering close (aborted after ``LINGER_SECONDS`` without output ``buffered``). Whether a client
        reads its answers at all is the owner's to watch, by the transport's buffer."""
        output = self.output
        if output is _LINGERING:
            if buffered:
                self._linger_since = now  # the drain starts when the answer is out
            elif now - self._linger_since > LINGER_SECONDS:
                return _ABORT
            return _WAIT
        if self.writing_paused or (output is not _OUT_IDLE and output is not _HANDLING):
            return _WAIT
        state = self.input
        if state is _HEAD or state is _BODY:
            if not self._reading_paused and now - self._message_since > self._limits.read_seconds:
                self._refuse(Refusal.TIMED_OUT, self._request)
                return self.next_step()
        elif output is _OUT_IDLE and not self._queue and now - self._idle_since > self._limits.idle_seconds:
            return self._close()
        return _WAIT

    def refuse_connection(self) -> bytes:
        """The bytes that refuse the connection before it is served (``Refusal.TOO_MANY_CONNECTIONS``); the owner
        writes them and closes."""
        self.input = _DONE
        self.output = _CLOSING
        answer = self._refusal_answer(Refusal.TOO_MANY_CONNECTIONS, None)
        return encode_response(answer, keep_alive=False, http_10=False)

    # -- answers -----------------------------------------------------------------------------------------------------

    def respond(self, answer: EdgeResponse) -> bytes | None:
        """The bytes of ``answer`` to ``answering`` (the handler's, after ``Step.HANDLE``, or ``decided``, after
        ``Step.ANSWER``), to write now; None when the connection closed first and the answer is dropped. The last
        answer says ``Connection: close``; after it, ``next_step`` closes."""
        output = self.output
        if output is not _HANDLING and output is not _TO_ANSWER:
            return None
        request = self.answering
        self.answering = self.decided = None
        if request is None:  # a refusal of bytes that were no request
            self.output = _LAST
            return encode_response(answer, keep_alive=False, http_10=False)
        state = self.input
        # The last answer the connection will give says so.
        keep_alive = (
            self._keep_alive
            and not self._stopping
            and (state is _IN_IDLE or state is _HEAD or state is _BODY or bool(self._queue))
        )
        self.output = _OUT_IDLE if keep_alive else _LAST
        return encode_response(
            answer, keep_alive=keep_alive, http_10=request.http_version == "1.0", head_only=request.method == "HEAD"
        )

    def next_step(self) -> Step:
        """What is due now: the answers in order, a 100, reading paused or resumed, closing when no more is owed."""
        output = self.output
        if output is _TO_ANSWER:
            return _ANSWER
        if self._continue_due:
            self._continue_due = False
            return _CONTINUE
        if output is _OUT_IDLE:
            queue = self._queue
            if queue:
                if not self.writing_paused:
                    self.answering, self.decided, self._keep_alive = queue.popleft()
                    if self.decided is not None:
                        self.output = _TO_ANSWER
                        return _ANSWER
                    self.output = output = _TO_HANDLE
            else:
                state = self.input
                if state is _IN_IDLE:
                    if self._stopping:
                        return self._close()
                    self._idle_since = self._clock()
                elif state is not _HEAD and state is not _BODY:
                    return self._close()  # no more requests, and none to answer
        elif output is _LAST:
            return self._close()
        elif output is _CLOSING or output is _LOST:
            return _WAIT
        # Reading pauses while answers wait or the client does not read ours; while lingering, it drains.
        if self._reading_paused:
            if output is _LINGERING or not (self.writing_paused or self._queue):
                self._reading_paused = False
                self._message_since = self._clock()  # the time a request may take counts while it is read
                return _RESUME_READING
        elif (self.writing_paused or self._queue) and output is not _LINGERING:
            self._reading_paused = True
            return _PAUSE_READING
        if output is _TO_HANDLE:
            self.output = _HANDLING
            return _HANDLE
        return _WAIT

    def _refuse(self, refusal: Refusal, request: EdgeRequest | None) -> None:
        self._refuse_with(self._refusal_answer(refusal, request), request)

    def _refuse_with(self, answer: EdgeResponse, request: EdgeRequest | None) -> None:
        """Answers with ``answer`` after what is owed (to ``request``, when its head was read), reads no more
        requests and closes the connection after it."""
        self.input = _DISCARDING
        self._request = self._early = None
        self._held.clear()
        self._body.clear()
        self._headers = []  # what llhttp still reports of the read is no request's
        self._queue.append((request, answer, False))  # ``next_step`` answers it in its turn

    def _close(self) -> Step:
        """Closes once the buffered answers are written; lingers when the client may still be sending."""
        state = self.input
        queue = self._queue
        may_be_sending = state is _HEAD or state is _BODY or state is _DISCARDING or bool(queue)
        self._drop_decided()
        self.answering = self.decided = None
        self._continue_due = False
        if state is _EOF or not may_be_sending or not self._can_linger:
            if state is not _EOF:
                self.input = _DONE
            self.output = _CLOSING
            return _CLOSE
        # Closing with unread input makes the kernel send a reset, which can destroy the answer before the client
        # has read it; so writing is shut down and the input drained until the client closes or time is up.
        self.input = _DISCARDING
        self.output = _LINGERING
        self._linger_since = self._clock()
        return _LINGER

    def _drop_decided(self) -> None:
        """Hands ``drop_answer`` every answer decided to a request and not written, and forgets the requests waiting:
        the answer owed now when decided, the queued ones (refusals, answers from the head), and that of the request
        whose body is being read and discarded."""
        drop = self._drop_answer
        if self.output is _TO_ANSWER and self.answering is not None and self.decided is not None:
            drop(self.answering, self.decided)
            self.answering = self.decided = None
        queue = self._queue
        while queue:
            request, answer, _ = queue.popleft()
            if request is not None and answer is not None:
                drop(request, answer)
        request, answer = self._request, self._early
        self._request = self._early = None
        if request is not None and answer is not None:
            drop(request, answer)

    # -- httptools' callbacks ------------------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.input is not _IN_IDLE:
            return
        self.input = _HEAD
        self._head_received = 0
        self._message_since = self._clock()
        self._url = b""
        self._headers = []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        # llhttp leaves out the whitespace before a value but keeps the whitespace after it, which is not part of
        # the value either (RFC 9110, 5.5).
        self._headers.append((name.lower(), value.rstrip()))

    def on_headers_complete(self) -> None:
        if self.input is not _HEAD:
            return
        self.input = _BODY
        limits, headers, url = self._limits, self._headers, self._url
        # The head is within what was read since it began: measured only when that could be over the limit.
        if len(headers) > limits.max_headers or (
            self._head_received + self._fed > limits.max_head_bytes and _head_size(url, headers) > limits.max_head_bytes
        ):
            self._refuse(Refusal.HEAD_TOO_LARGE, None)
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
            self._refuse(Refusal.BAD_TARGET, request)
            return
        noted = request.noted
        host = noted[HOST]
        if version not in _VERSIONS:
            self._refuse(Refusal.VERSION_NOT_SUPPORTED, request)
            return
        if parser.should_upgrade():
            # CONNECT, or Connection: upgrade with Upgrade: llhttp takes what follows the head for the other
            # protocol, whatever Content-Length says, where a reader that does not upgrade takes it for the body.
            # A WebSocket handshake with nothing owed before it and no body goes to the handler, which may accept it.
            if not (
                is_websocket_upgrade(request)
                and noted[CONTENT_LENGTH] in (None, b"0")
                and not noted[TRANSFER_ENCODING]
                and self.output is _OUT_IDLE
                and not self._queue
            ):
                self._refuse(Refusal.UPGRADE, request)
                return
            request.upgrade = True
        if request.repeated is not None:
            self._refuse(Refusal.REPEATED_HEADER, request)
            return
        if host is None and version == "1.1":
            self._refuse(Refusal.NO_HOST, request)
            return
        if authority is not None:
            noted[HOST] = authority  # the target's host wins over the Host header's (RFC 9112, 3.2.2)
        coding = noted[TRANSFER_ENCODING]
        if coding is not None:
            self._refuse(Refusal.CHUNKED if coding.lower() == b"chunked" else Refusal.TRANSFER_CODING, request)
            return
        length, expect_value = noted[CONTENT_LENGTH], noted[EXPECT]
        # An HTTP/1.0 client does not know 100 Continue (RFC 9110, 10.1.1).
        expect = expect_value is not None and expect_value.lower() == b"100-continue" and version == "1.1"
        request.content_length = size = int(length) if length else 0  # httptools has checked it is a number
        limit = limits.max_body_bytes
        try:
            answer = self._answer_head(request)
        except Exception:
            log.exception("edge handler failed", path=request.path)
            answer = self._refusal_answer(Refusal.HANDLER_FAILED, request)
        if answer is None and size > limit:
            answer = self._refusal_answer(Refusal.BODY_TOO_LARGE, request)
        if answer is not None:
            if size and (expect or size > limit):
                self._refuse_with(answer, request)  # answered before the body is sent or read; the connection closes
            else:
                self._early = answer  # the body is read and discarded, and the connection kept
        elif expect and size and not self._queue and (self.output is _OUT_IDLE or self.output is _TO_ANSWER):
            # Only when no answer is being made: a 100 must not overtake the answers to earlier requests (the client
            # sends the body after a while anyway); one decided already is written before it (``next_step``).
            self._continue_due = True

    def on_body(self, body: bytes) -> None:
        if self._early is None and self.input is _BODY:
            self._body.append(body)

    def on_message_complete(self) -> None:
        request = self._request
        if request is None or self.input is not _BODY:
            return
        self._request = None
        answer = self._early
        body = self._body
        if answer is None:
            request.body = body[0] if len(body) == 1 else b"".join(body)
            body.clear()
        else:
            self._early = None
        keep_alive = self._parser.should_keep_alive() and not request.upgrade
        self.input = _IN_IDLE if keep_alive else _DONE
        queue = self._queue
        if self.output is _OUT_IDLE and not queue and not self.writing_paused:
            # Answered now: no tuple for the request of a connection that owes nothing else.
            self.answering, self.decided, self._keep_alive = request, answer, keep_alive
            self.output = _TO_HANDLE if answer is None else _TO_ANSWER
            return
        queue.append((request, answer, keep_alive))
        if len(queue) > MAX_PIPELINED:
            # Reading pauses between reads only: one read of small requests would queue thousands, each many times
            # its size in memory.
            self._refuse(Refusal.TOO_MANY_PIPELINED, None)

    def _upgrading(self) -> bool:
        """Whether the request just read is a WebSocket handshake handed to the handler (``upgrade_tail``)."""
        request = self.answering if self.answering is not None else (self._queue[-1][0] if self._queue else None)
        return request is not None and request.upgrade and self.input is not _EOF

    def _head_over_limit(self, data: bytes) -> bool:
        """Whether the unfinished head is over a limit: its headers so far, or the line still arriving (the bytes
        after the last line end of ``data``, the read just parsed)."""
        limits, headers = self._limits, self._headers
        unfinished = len(data) - data.rfind(b"\n") - 1
        return (
            len(headers) > limits.max_headers
            or unfinished > limits.max_head_bytes
            or _head_size(self._url, headers) > limits.max_head_bytes
        )


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
# HTTP versions recur too: one object each, which the request log's rows compare by identity.
_VERSIONS: Final = {"1.1": "1.1", "1.0": "1.0"}
