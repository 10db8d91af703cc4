"""The edge's HTTP/1.1 connection state alone (``HttpConnection``), without sockets or an event loop: bytes in, steps
out, played by a synchronous owner that does what each step asks and keeps what a client would read.

What a client sees must not depend on how its bytes arrive: every stream gives the same requests, answers and end
however it is cut into reads, whether the handler answers each request at once or after each read (as the server
does, on the loop's next turn). And the connection reads the requests llhttp reads: every request it hands over is
one llhttp parsed at that place, every refusal is of a head that breaks one of its rules or of bytes llhttp refused.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import httptools
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from edgeplane.edge.http_connection import (
    LINGER_SECONDS,
    MAX_PIPELINED,
    HttpConnection,
    HttpLimits,
    Input,
    Output,
    Refusal,
    Step,
)
from edgeplane.edge.http_messages import HOST, EdgeRequest, EdgeResponse

LIMITS = HttpLimits(max_body_bytes=1024, max_head_bytes=4096, max_headers=20, read_seconds=15.0, idle_seconds=30.0)


# -- an owner that does what the connection asks --------------------------------------------------------------------

# What a handler is given of a request: method, path as sent, query, headers, body.
Served = tuple[str, str, bytes, list[tuple[bytes, bytes]], bytes]


def served(request: EdgeRequest) -> Served:
    return (request.method, request.raw_path, request.query_string, list(request.headers), request.body)


def refusal_answer(refusal: Refusal, request: EdgeRequest | None) -> EdgeResponse:
    name = refusal.name.encode()
    return EdgeResponse(refusal.status, name, content_type=b"text/plain", headers=((b"x-refusal", name),))


def answer_head(request: EdgeRequest) -> EdgeResponse | None:
    """Refuses ``/refuse`` on its head and fails on ``/raise``; lets the rest through."""
    if request.path == "/refuse":
        return EdgeResponse(403, b"refused on its head", content_type=b"text/plain")
    if request.path == "/raise":
        raise RuntimeError("a bug in answer_head")
    return None


def accept_all(request: EdgeRequest) -> EdgeResponse | None:
    return None


def handler_answer(request: EdgeRequest) -> EdgeResponse:
    document = {"path": request.raw_path, "query": request.query_string.decode("latin-1"), "body": len(request.body)}
    return EdgeResponse(200, json.dumps(document).encode())


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Owner:
    """Plays the server: does each step the connection returns, keeping the answers written (each ``respond``'s
    bytes), the requests handed to the handler, the answers the connection dropped (``drop_answer``: path and status),
    and how the connection ended (``Step.CLOSE``, ``Step.LINGER``, ``Step.ABORT``, or None while open). The handler
    answers a request handed over at once (``at_once``), or when ``answer_handed`` is called. No request is answered
    or dropped twice."""

    at_once: bool = True
    head_policy: Callable[[EdgeRequest], EdgeResponse | None] = answer_head
    clock: Clock = field(default_factory=Clock)
    can_linger: bool = True
    answers: list[bytes] = field(default_factory=list)
    continues: int = 0
    handed: list[Served] = field(default_factory=list)
    end: Step | None = None
    reading: bool = True
    waiting: EdgeRequest | None = None  # handed over; its answer not yet made
    dropped: list[tuple[str, int]] = field(default_factory=list)
    connection: HttpConnection = field(init=False)
    _settled: dict[int, EdgeRequest] = field(default_factory=dict)  # the requests answered or dropped, by id

    def __post_init__(self) -> None:
        self.connection = HttpConnection(
            LIMITS,
            self.head_policy,
            refusal_answer,
            self._drop,
            self.clock,
            ("198.51.100.7", 40000),
            ("127.0.0.1", 8787),
            can_linger=self.can_linger,
        )

    def feed(self, data: bytes) -> None:
        self.run(self.connection.receive(data))

    def run(self, step: Step) -> None:
        connection = self.connection
        while True:
            assert_valid(connection)
            if step is Step.WAIT:
                return
            if step is Step.HANDLE:
                assert self.waiting is None, "a second request handed over before the first was answered"
                request = connection.answering
                assert request is not None
                self.handed.append(served(request))
                self.waiting = request
                if not self.at_once:
                    return
                self.answer_handed()
                return
            if step is Step.ANSWER:
                assert connection.decided is not None
                self._settle(connection.answering)
                self._write(connection.respond(connection.decided))
            elif step is Step.CONTINUE:
                assert self.end is None
                self.continues += 1
            elif step is Step.PAUSE_READING:
                assert self.reading
                self.reading = False
            elif step is Step.RESUME_READING:
                assert not self.reading
                self.reading = True
            elif step is Step.LINGER:
                assert self.end is None
                self.end = step
            else:
                assert step is Step.CLOSE or step is Step.ABORT
                self.end = step
                return
            step = connection.next_step()

    def answer_handed(self, answer: Callable[[EdgeRequest], EdgeResponse] = handler_answer) -> None:
        request, self.waiting = self.waiting, None
        if request is not None:
            self._settle(request)
            self._write(self.connection.respond(answer(request)))
            self.run(self.connection.next_step())

    def _drop(self, request: EdgeRequest, answer: EdgeResponse) -> None:
        self._settle(request)
        self.dropped.append((request.raw_path, answer.status))

    def _settle(self, request: EdgeRequest | None) -> None:
        if request is not None:
            assert id(request) not in self._settled, f"{request.raw_path} answered or dropped twice"
            self._settled[id(request)] = request

    def _write(self, data: bytes | None) -> None:
        assert data is not None
        assert self.end is None, "written after the connection closed"
        self.answers.append(data)

    def statuses(self) -> list[int]:
        return [int(answer.split(b" ", 2)[1]) for answer in self.answers]

    def refusals(self) -> list[Refusal | None]:
        """Of each answer, the refusal it is, or None (the handler's)."""
        found = (re.search(rb"\r\nx-refusal: (\w+)\r\n", answer) for answer in self.answers)
        return [None if match is None else Refusal[match.group(1).decode()] for match in found]


def assert_valid(connection: HttpConnection) -> None:
    """The combinations of states the connection may be in."""
    state, output = connection.input, connection.output
    if output is Output.LINGERING:
        assert state in (Input.DISCARDING, Input.EOF)
    if output is Output.CLOSING:
        assert state in (Input.DONE, Input.DISCARDING, Input.EOF)
    if output is Output.LOST:
        assert state is Input.DONE
    if output in (Output.TO_HANDLE, Output.HANDLING):
        assert connection.answering is not None
        assert connection.decided is None
    if output is Output.TO_ANSWER:
        assert connection.decided is not None
    if output in (Output.IDLE, Output.LAST, Output.CLOSING, Output.LINGERING):
        assert connection.answering is None
        assert connection.decided is None


@dataclass
class Outcome:
    """What a client sees of one connection: the answers (bytes, interim 100s left out), the requests its handler
    was given, and how the connection ended."""

    answers: list[bytes]
    handed: list[Served]
    end: Step | None


def serve(
    chunks: list[bytes],
    *,
    at_once: bool = True,
    head_policy: Callable[[EdgeRequest], EdgeResponse | None] = answer_head,
) -> Owner:
    """Sends ``chunks`` as reads, each once the connection reads; after each, a handler that does not answer at once
    answers what it was handed (the server's next turns), until the connection reads again."""
    owner = Owner(at_once=at_once, head_policy=head_policy)
    for chunk in chunks:
        if owner.end is not None:
            break
        assert owner.reading, "reading is paused with no answer owed"
        owner.feed(chunk)
        while owner.waiting is not None:
            owner.answer_handed()
    return owner


def outcome(owner: Owner) -> Outcome:
    return Outcome(owner.answers, owner.handed, owner.end)


def closed(seen: Outcome) -> Outcome:
    """The outcome, with only whether the connection ended: whether a close lingers depends on whether bytes after
    the last request arrived before it."""
    return Outcome(seen.answers, seen.handed, Step.CLOSE if seen.end is Step.LINGER else seen.end)


def splits(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted({cut for cut in cuts if 0 < cut < len(data)}), len(data)]
    return [data[start:end] for start, end in itertools.pairwise(bounds)]


def request(
    target: str = "/echo",
    body: bytes = b"{}",
    *,
    method: str = "POST",
    version: str = "HTTP/1.1",
    headers: str = "",
    host: str | None = "h.example",
    length: bool = True,
) -> bytes:
    head = f"{method} {target} {version}\r\n"
    if host is not None:
        head += f"Host: {host}\r\n"
    if length:
        head += f"Content-Length: {len(body)}\r\n"
    return (head + headers + "\r\n").encode("latin-1") + body


# -- what a client sees, however its bytes arrive --------------------------------------------------------------------

CHUNKED = b"POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"

# bytes sent; then the answers' statuses, the paths handed to the handler, and how the connection ends
SCENARIOS = [
    pytest.param(request("/a?x=1", b'{"n":1}'), [200], ["/a"], None, id="one request"),
    pytest.param(
        request("/a") + request("/b", b"") + request("/c", b"[" + b"1," * 200 + b"1]"),
        [200, 200, 200],
        ["/a", "/b", "/c"],
        None,
        id="pipelined",
    ),
    pytest.param(request("/a", headers="Connection: close\r\n"), [200], ["/a"], Step.CLOSE, id="connection close"),
    pytest.param(request("/a", version="HTTP/1.0"), [200], ["/a"], Step.CLOSE, id="HTTP/1.0"),
    pytest.param(
        request("/a", version="HTTP/1.0", headers="Connection: keep-alive\r\n") + request("/b"),
        [200, 200],
        ["/a", "/b"],
        None,
        id="HTTP/1.0 keep-alive",
    ),
    pytest.param(request("/refuse", b"x" * 100) + request("/b"), [403, 200], ["/b"], None, id="refused on its head"),
    pytest.param(
        request("/refuse", b"x" * 100, headers="Expect: 100-continue\r\n") + request("/b"),
        [403],
        [],
        Step.LINGER,
        id="refused on its head, expecting 100",
    ),
    pytest.param(request("/raise") + request("/b"), [500, 200], ["/b"], None, id="answer_head fails"),
    pytest.param(request("/a", b"x" * 100, headers="Expect: 100-continue\r\n"), [200], ["/a"], None, id="expect 100"),
    pytest.param(request("/big", b"x" * 2000) + request("/b"), [413], [], Step.LINGER, id="body over the limit"),
    pytest.param(request("/a") + CHUNKED + request("/b"), [200, 411], ["/a"], Step.LINGER, id="chunked"),
    pytest.param(
        request("/a", headers="Transfer-Encoding: gzip\r\n", length=False), [501], [], Step.LINGER, id="gzip coding"
    ),
    pytest.param(request("/a", host=None), [400], [], Step.LINGER, id="no Host"),
    pytest.param(request("/a", host=None, version="HTTP/1.0"), [200], ["/a"], Step.CLOSE, id="HTTP/1.0 no Host"),
    pytest.param(request("/a", headers="Host: other\r\n"), [400], [], Step.LINGER, id="two Hosts"),
    pytest.param(request("/a#f"), [400], [], Step.LINGER, id="fragment"),
    pytest.param(request("/a", version="HTTP/2.0"), [505], [], Step.LINGER, id="HTTP/2.0"),
    pytest.param(
        request("/a", headers="Connection: upgrade\r\nUpgrade: websocket\r\n") + b"\x81\x00",
        [501],
        [],
        Step.LINGER,
        id="upgrade",
    ),
    pytest.param(request("/a") + b"NOT HTTP\r\n\r\n", [200, 400], ["/a"], Step.LINGER, id="malformed after one"),
    pytest.param(
        b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
        [400],
        [],
        Step.LINGER,
        id="two lengths",
    ),
    pytest.param(b"\r\n\r\n" + request("/a"), [200], ["/a"], None, id="empty lines before"),
    pytest.param(
        b"GET /a HTTP/1.1\r\nHost: h\r\nX-Big: " + b"b" * 5000 + b"\r\n\r\n",
        [431],
        [],
        Step.LINGER,
        id="head too large",
    ),
    pytest.param(
        b"GET /a HTTP/1.1\r\nHost: h\r\n" + b"".join(b"X-%d: 1\r\n" % index for index in range(30)) + b"\r\n",
        [431],
        [],
        Step.LINGER,
        id="too many headers",
    ),
]


def _check(owner: Owner, statuses: list[int], paths: list[str], end: Step | None) -> None:
    assert owner.statuses() == statuses
    assert [path for _, path, *_ in owner.handed] == paths
    assert owner.end is end
    if end is None:  # an open connection says nothing of closing
        assert all(b"connection: close" not in answer for answer in owner.answers)
    else:  # the last answer says the connection closes
        assert b"connection: close" in owner.answers[-1]


@pytest.mark.parametrize("at_once", [True, False], ids=["answered at once", "answered after each read"])
@pytest.mark.parametrize(("data", "statuses", "paths", "end"), SCENARIOS)
def test_a_stream_cut_at_every_point_gives_what_it_gives_whole(
    data: bytes, statuses: list[int], paths: list[str], end: Step | None, at_once: bool
) -> None:
    whole = serve([data], at_once=at_once)
    _check(whole, statuses, paths, end)
    for cut in range(1, len(data)):
        assert outcome(serve(splits(data, [cut]), at_once=at_once)) == outcome(whole), f"cut at {cut}"
    assert outcome(serve([data[index : index + 1] for index in range(len(data))], at_once=at_once)) == outcome(whole)


def test_requests_are_handed_over_whole() -> None:
    data = request("/a?x=1&y", b'{"jsonrpc":"2.0"}', headers="X-Trailing: value \t\r\nUser-Agent: t/1\r\n")
    owner = serve([data])
    assert owner.handed == [
        (
            "POST",
            "/a",
            b"x=1&y",
            [
                (b"host", b"h.example"),
                (b"content-length", b"17"),
                (b"x-trailing", b"value"),  # the whitespace after a value is not part of it
                (b"user-agent", b"t/1"),
            ],
            b'{"jsonrpc":"2.0"}',
        )
    ]


def test_a_body_discarded_after_an_answer_from_the_head_is_no_part_of_the_next_request() -> None:
    data = request("/refuse", b"x" * 100) + request("/b", b"next")
    for cut in range(1, len(data), 7):
        assert [body for *_, body in serve(splits(data, [cut])).handed] == [b"next"]


def test_an_absolute_form_target_names_the_host() -> None:
    seen: list[EdgeRequest] = []

    def policy(request: EdgeRequest) -> EdgeResponse | None:
        seen.append(request)
        return None

    serve([request("HTTP://Rpc.Example:8545/v1/x?q=1", host="other")], head_policy=policy)
    (head,) = seen
    assert (head.raw_path, head.query_string, head.noted[HOST]) == ("/v1/x", b"q=1", b"Rpc.Example:8545")


def test_a_head_request_is_answered_without_a_body() -> None:
    owner = serve([request("/a", b"", method="HEAD") + request("/b")])
    head, after = owner.answers
    assert head.endswith(b"\r\n\r\n")
    assert b"content-length: " in head
    assert after.endswith(b'"body": 2}')


def test_answers_to_http_10_keep_alive_say_so() -> None:
    owner = serve([request("/a", version="HTTP/1.0", headers="Connection: keep-alive\r\n")])
    assert b"connection: keep-alive\r\n" in owner.answers[0]


# -- Expect: 100-continue ----------------------------------------------------------------------------------------------


def test_a_100_is_sent_when_the_head_asks_and_nothing_is_owed() -> None:
    owner = Owner()
    data = request("/a", b"body", headers="Expect: 100-continue\r\n")
    owner.feed(data[:-4])
    assert (owner.continues, owner.answers) == (1, [])
    owner.feed(data[-4:])
    assert owner.statuses() == [200]


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(request("/a", b"body", version="HTTP/1.0", headers="Expect: 100-continue\r\n"), id="HTTP/1.0"),
        pytest.param(request("/a", b"", headers="Expect: 100-continue\r\n"), id="no body"),
        pytest.param(request("/a", b"body", headers="Expect: something\r\n"), id="another expectation"),
    ],
)
def test_no_100_when_none_is_due(head: bytes) -> None:
    owner = Owner()
    owner.feed(head[: head.index(b"\r\n\r\n") + 4])
    assert owner.continues == 0


def test_a_100_never_overtakes_an_earlier_answer() -> None:
    owner = Owner(at_once=False)
    expecting = request("/b", b"body", headers="Expect: 100-continue\r\n")
    owner.feed(request("/a") + expecting[:-4])  # /a is with the handler when /b's head arrives
    assert owner.continues == 0
    owner.answer_handed()
    owner.feed(expecting[-4:])
    assert owner.statuses() == [200]
    owner.answer_handed()
    assert owner.statuses() == [200, 200]

    owner = Owner()  # an answer decided on its head is written first, and the 100 after it
    owner.feed(request("/refuse") + expecting[:-4])
    assert (owner.statuses(), owner.continues) == ([403], 1)


def test_a_body_over_the_limit_is_refused_before_it_is_read() -> None:
    owner = Owner()
    owner.feed(request("/a", b"x" * 10).replace(b"Content-Length: 10", b"Content-Length: 99999999")[:-10])
    assert owner.statuses() == [413]
    assert owner.end is Step.LINGER
    assert owner.connection.input is Input.DISCARDING
    owner.feed(b"x" * 100_000)  # discarded
    assert owner.statuses() == [413]


# -- pipelining and flow control ---------------------------------------------------------------------------------------


def test_reading_pauses_while_answers_wait() -> None:
    owner = Owner(at_once=False)
    owner.feed(request("/a"))
    assert owner.reading  # the one being answered does not stop reading
    owner.feed(request("/b") + request("/c"))
    assert not owner.reading
    owner.answer_handed()
    assert not owner.reading  # /c still waits behind /b
    owner.answer_handed()
    assert owner.reading
    owner.answer_handed()
    assert [path for _, path, *_ in owner.handed] == ["/a", "/b", "/c"]
    assert owner.statuses() == [200, 200, 200]


def test_more_than_max_pipelined_in_one_read_are_refused() -> None:
    owner = Owner(at_once=False)
    owner.feed(b"".join(request(f"/{index}") for index in range(MAX_PIPELINED + 50)))
    while owner.waiting is not None:
        owner.answer_handed()
    assert owner.statuses() == [200] * (MAX_PIPELINED + 2) + [429]  # one answered, and the queue's limit
    assert owner.end is Step.LINGER


def test_a_client_that_does_not_read_is_not_answered_until_it_does() -> None:
    owner = Owner()
    assert owner.connection.pause_writing()  # reading pauses with writing
    assert not owner.connection.pause_writing()  # once
    owner.reading = False
    owner.feed(request("/a") + request("/refuse"))  # a read already under way
    assert owner.answers == []
    owner.run(owner.connection.resume_writing())
    assert owner.statuses() == [200, 403]
    assert owner.reading


def test_the_answer_being_made_is_written_while_writing_is_paused() -> None:
    owner = Owner(at_once=False)
    owner.feed(request("/a"))
    owner.connection.pause_writing()
    owner.reading = False
    owner.answer_handed()
    assert owner.statuses() == [200]
    owner.run(owner.connection.resume_writing())
    assert owner.reading


# -- the end of a connection -------------------------------------------------------------------------------------------


def test_bytes_after_the_last_request_make_its_close_linger() -> None:
    last = request("/a", headers="Connection: close\r\n")
    assert serve([last + request("/b")]).end is Step.LINGER  # the client may still be sending
    assert serve([last, request("/b")]).end is Step.CLOSE  # answered and closed before they came


def test_the_clients_end_of_input_when_idle_closes() -> None:
    owner = serve([request("/a")])
    assert owner.connection.receive_eof() is False


def test_the_clients_end_of_input_with_a_request_in_flight_answers_it_then_closes() -> None:
    owner = Owner(at_once=False)
    owner.feed(request("/a"))
    assert owner.connection.receive_eof() is True
    owner.answer_handed()
    assert b"connection: close" in owner.answers[0]
    assert owner.end is Step.CLOSE  # no lingering: the client sends no more


def test_the_clients_end_of_input_within_a_request_closes() -> None:
    owner = Owner()
    owner.feed(request("/a")[:-1])
    assert owner.connection.receive_eof() is False


def test_an_answer_made_after_the_connection_is_lost_is_dropped() -> None:
    owner = Owner(at_once=False)
    owner.feed(request("/a") + request("/b"))
    owner.connection.lose()
    assert owner.connection.respond(handler_answer(EdgeRequest("POST", "/a", b"", [], "1.1", None, None))) is None
    assert owner.connection.next_step() is Step.WAIT


def test_answers_decided_and_lost_with_the_connection_are_dropped_once() -> None:
    owner = Owner(at_once=False)
    # handed over; refused on its head; refused by the connection (no Host); refused on its head, its body arriving
    owner.feed(request("/a") + request("/refuse") + request("/nohost", host=None))
    assert owner.handed
    assert not owner.dropped
    late = Owner(at_once=False)
    late.feed(request("/refuse", b"[1,2,3]")[:-2])
    owner.connection.lose()
    late.connection.lose()
    assert owner.dropped == [("/refuse", 403), ("/nohost", 400)]
    assert late.dropped == [("/refuse", 403)]
    # the handed request's answer is the owner's to drop (``respond`` gives no bytes); nothing is dropped twice
    assert owner.connection.respond(handler_answer(EdgeRequest("POST", "/a", b"", [], "1.1", None, None))) is None
    owner.connection.lose()
    late.connection.lose()
    assert owner.dropped == [("/refuse", 403), ("/nohost", 400)]
    assert late.dropped == [("/refuse", 403)]


def test_answers_waiting_when_a_stopping_connection_closes_are_dropped() -> None:
    owner = Owner(at_once=False)
    owner.feed(request("/a") + request("/refuse") + request("/b") + request("/refuse", b"[1,2,3]")[:-2])
    assert owner.connection.stop() is Step.WAIT
    owner.answer_handed()
    assert len(owner.answers) == 1
    assert b"connection: close" in owner.answers[0]
    assert owner.end is Step.LINGER
    # ``/b`` waited for the handler and has no answer: it is not handed over, and there is nothing to drop
    assert owner.dropped == [("/refuse", 403), ("/refuse", 403)]
    assert [handed[1] for handed in owner.handed] == ["/a"]


def test_a_refused_connection_is_answered_and_closed() -> None:
    connection = Owner().connection
    data = connection.refuse_connection()
    assert data.startswith(b"HTTP/1.1 503 ")
    assert b"connection: close" in data
    assert connection.output is Output.CLOSING


def test_stopping_closes_an_idle_connection_and_a_busy_one_after_its_answer() -> None:
    idle = serve([request("/a")])
    idle.run(idle.connection.stop())
    assert idle.end is Step.CLOSE

    busy = Owner(at_once=False)
    busy.feed(request("/a"))
    assert busy.connection.stop() is Step.WAIT
    busy.answer_handed()
    assert b"connection: close" in busy.answers[0]
    assert busy.end is Step.CLOSE


def test_without_write_eof_a_lingering_close_is_a_close() -> None:
    owner = Owner(can_linger=False)
    owner.feed(b"NOT HTTP\r\n\r\n")
    assert owner.statuses() == [400]
    assert owner.end is Step.CLOSE


# -- time -------------------------------------------------------------------------------------------------------------


def test_an_idle_connection_closes_after_idle_seconds() -> None:
    owner = serve([request("/a")])
    connection, clock = owner.connection, owner.clock
    clock.now += LIMITS.idle_seconds - 1
    assert connection.check_time(clock.now, 0) is Step.WAIT
    clock.now += 2
    owner.run(connection.check_time(clock.now, 0))
    assert owner.end is Step.CLOSE


def test_a_request_that_does_not_arrive_in_time_is_answered_408() -> None:
    owner = Owner()
    owner.feed(request("/a", b"x" * 100)[:-50])
    clock = owner.clock
    clock.now += LIMITS.read_seconds + 1
    owner.run(owner.connection.check_time(clock.now, 0))
    assert owner.statuses() == [408]
    assert owner.end is Step.LINGER


def test_time_with_reading_paused_does_not_count_against_a_request() -> None:
    owner = Owner(at_once=False)
    owner.feed(request("/a") + request("/b") + request("/c")[:20])
    assert not owner.reading
    owner.clock.now += LIMITS.read_seconds + 1
    assert owner.connection.check_time(owner.clock.now, 0) is Step.WAIT
    owner.answer_handed()
    owner.answer_handed()  # reading resumes: the request's time starts again
    assert owner.reading
    owner.clock.now += LIMITS.read_seconds - 1
    assert owner.connection.check_time(owner.clock.now, 0) is Step.WAIT


def test_a_lingering_close_ends_once_the_answer_is_out_and_time_is_up() -> None:
    owner = serve([b"NOT HTTP\r\n\r\n"])
    connection, clock = owner.connection, owner.clock
    assert owner.end is Step.LINGER
    clock.now += LINGER_SECONDS + 1
    assert connection.check_time(clock.now, 1000) is Step.WAIT  # the answer is still buffered: the drain starts later
    clock.now += LINGER_SECONDS - 1
    assert connection.check_time(clock.now, 0) is Step.WAIT
    clock.now += 2
    assert connection.check_time(clock.now, 0) is Step.ABORT


# -- any stream, cut anywhere ------------------------------------------------------------------------------------------
#
# Streams of one to four requests from a grammar of valid and hostile pieces, then perhaps garbage.


def _pieces(valid: list[str], hostile: list[str]) -> tuple[st.SearchStrategy[str], st.SearchStrategy[str]]:
    """A piece of a request drawn valid, and one drawn hostile (valid three times in four: a hostile request has
    several pieces, so often one hostile piece or more)."""
    return st.sampled_from(valid), st.sampled_from(valid * 3 + hostile)


_METHODS = _pieces(["GET", "POST", "POST", "PUT", "HEAD", "OPTIONS", "DELETE"], ["CONNECT", "BREW", "post"])
_TARGETS = _pieces(
    ["/", "/echo", "/echo?a=1", "/a?", "/refuse", "/raise", "*", "http://h.example/p?q=1", "HTTPS://h.example:81"],
    ["http://u@h.example/", "/a#f", "h.example:80", "ftp://h/", "/a b", "/\x7f", "/%zz", "/\x01"],
)
_VERSIONS = _pieces(["HTTP/1.1", "HTTP/1.1", "HTTP/1.0"], ["HTTP/2.0", "HTTP/1.2", "http/1.1", "HTTP/1", ""])
_HEADER_LINES = _pieces(
    [
        "Content-Type: application/json",
        "Content-Type: text/plain",
        "Connection: keep-alive",
        "Expect: 100-continue",
        "X-A: a b",
        "X-Trailing: x \t",
        "Accept: */*",
    ],
    [
        "Host: other.example",
        "Content-Type: application/json",
        "Content-Encoding: gzip",
        "Connection: close",
        "Connection: upgrade",
        "Upgrade: websocket",
        "Transfer-Encoding: gzip",
        "Content-Length: 1",
        "Content-Length: abc",
        "Bad Name: 1",
        "X-Fold: a\r\n b",
        "NoColon",
        "X-Ctl: \x01",
        "X-Latin: \xe9",
    ],
)
_LINE_ENDS = _pieces(["\r\n"], ["\n", "\r", "\r\r\n"])


@st.composite
def _requests(draw: st.DrawFn) -> bytes:
    hostile = draw(st.integers(0, 3)) == 0

    def piece(pieces: tuple[st.SearchStrategy[str], st.SearchStrategy[str]]) -> str:
        return draw(pieces[hostile])

    head = f"{piece(_METHODS)} {piece(_TARGETS)} {piece(_VERSIONS)}{piece(_LINE_ENDS)}"
    if not hostile or draw(st.integers(0, 3)):
        head += "Host: h.example\r\n"
    for _ in range(draw(st.integers(0, 3))):
        head += piece(_HEADER_LINES) + piece(_LINE_ENDS)
    body = draw(st.binary(max_size=16))
    framing = draw(st.sampled_from(["length"] * 6 + ["chunked", "none"] if hostile else ["length"]))
    if framing == "length":
        head += f"Content-Length: {len(body)}\r\n"
    elif framing == "chunked":
        head += "Transfer-Encoding: chunked\r\n"
        body = (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n"
    else:
        body = b""
    return (head + "\r\n").encode("latin-1") + body


_STREAMS = st.tuples(
    st.lists(_requests(), min_size=1, max_size=4),
    st.sampled_from([b"", b"", b"", b"\r\n", b"GARBAGE\r\n\r\n", b"\x00"]),
).map(lambda parts: b"".join(parts[0]) + parts[1])


@settings(max_examples=300, deadline=None)
@given(_STREAMS, st.lists(st.integers(min_value=1, max_value=600), max_size=8), st.booleans())
def test_what_a_client_sees_does_not_depend_on_how_its_bytes_arrive(
    data: bytes, cuts: list[int], at_once: bool
) -> None:
    whole = outcome(serve([data], at_once=at_once))
    event(f"{len(whole.handed)} handed, {len(whole.answers)} answers, end {whole.end}")
    assert closed(outcome(serve(splits(data, cuts), at_once=at_once))) == closed(whole)


@settings(max_examples=50, deadline=None)
@given(_STREAMS)
def test_answering_at_once_or_after_each_read_gives_the_same_answers(data: bytes) -> None:
    at_once, later = serve([data]), serve([data], at_once=False)
    assert (at_once.handed, at_once.statuses(), at_once.end) == (later.handed, later.statuses(), later.end)


# -- against llhttp's own verdicts -------------------------------------------------------------------------------------


@dataclass
class Message:
    """A request as llhttp reads it."""

    method: str
    url: bytes
    version: str
    headers: list[tuple[bytes, bytes]]
    upgrade: bool
    body: bytes = b""
    keep_alive: bool = True


@dataclass
class LlhttpReading:
    """What a bare llhttp parser reads from a stream: its complete messages, the heads it accepted (one more than
    the messages when it stopped within a body), and whether it refused the bytes (or stopped for an upgrade)."""

    messages: list[Message] = field(default_factory=list)
    heads: list[Message] = field(default_factory=list)
    refused: bool = False
    upgraded: bool = False


def llhttp_reading(data: bytes) -> LlhttpReading:
    reading = LlhttpReading()
    url, headers = bytearray(), []

    class Callbacks:
        def on_message_begin(self) -> None:
            url.clear()
            headers.clear()

        def on_url(self, piece: bytes) -> None:
            url.extend(piece)

        def on_header(self, name: bytes, value: bytes) -> None:
            headers.append((name.lower(), value.rstrip()))

        def on_headers_complete(self) -> None:
            method = parser.get_method().decode()
            message = Message(method, bytes(url), parser.get_http_version(), list(headers), parser.should_upgrade())
            reading.heads.append(message)

        def on_body(self, body: bytes) -> None:
            reading.heads[-1].body += body

        def on_message_complete(self) -> None:
            reading.heads[-1].keep_alive = parser.should_keep_alive()
            reading.messages.append(reading.heads[-1])

    parser = httptools.HttpRequestParser(Callbacks())
    try:
        parser.feed_data(data)
    except httptools.HttpParserUpgrade:
        reading.upgraded = True
    except httptools.HttpParserError:
        reading.refused = True
    return reading


_ONCE_ONLY = (b"host", b"content-type", b"content-length", b"transfer-encoding", b"content-encoding")


def _target_accepted(url: bytes) -> bool:
    """The origin form without a fragment, ``*``, or the absolute form of an http(s) URL without user info."""
    if url == b"*" or (url.startswith(b"/") and b"#" not in url):
        return True
    scheme, separator, rest = url.partition(b"://")
    authority = re.split(rb"[/?]", rest, maxsplit=1)[0]
    return (
        bool(separator)
        and scheme.lower() in (b"http", b"https")
        and bool(authority)
        and b"@" not in authority
        and b"#" not in url
    )


def broken_rules(message: Message) -> set[Refusal]:
    """The connection's own rules a head llhttp accepted breaks (written apart from the connection's checks)."""
    names = [name for name, _ in message.headers]
    broken = set()
    if not _target_accepted(message.url):
        broken.add(Refusal.BAD_TARGET)
    if message.version not in ("1.0", "1.1"):
        broken.add(Refusal.VERSION_NOT_SUPPORTED)
    if message.upgrade or message.method == "CONNECT":
        broken.add(Refusal.UPGRADE)
    if any(names.count(name) > 1 for name in _ONCE_ONLY):
        broken.add(Refusal.REPEATED_HEADER)
    if message.version == "1.1" and b"host" not in names:
        broken.add(Refusal.NO_HOST)
    if b"transfer-encoding" in names:
        broken.add(
            Refusal.CHUNKED
            if dict(message.headers)[b"transfer-encoding"].lower() == b"chunked"
            else Refusal.TRANSFER_CODING
        )
    return broken


def _handed_as(message: Message) -> Served:
    """What the connection hands over of a message llhttp read: the target's path and query (of an absolute-form
    target, what follows its authority, from a ``/``), the headers, the body."""
    url = message.url
    if not url.startswith(b"/") and url != b"*":
        rest = url.partition(b"://")[2]
        url = rest[min([index for index in (rest.find(b"/"), rest.find(b"?")) if index >= 0] or [len(rest)]) :]
        url = url if url.startswith(b"/") else b"/" + url
    path, _, query = url.partition(b"?")
    return (message.method, path.decode("latin-1"), query, message.headers, message.body)


@settings(max_examples=1000, deadline=None)
@given(_STREAMS, st.lists(st.integers(min_value=1, max_value=600), max_size=4))
def test_the_connection_reads_what_llhttp_reads_and_refuses_only_by_its_rules(data: bytes, cuts: list[int]) -> None:
    owner = serve(splits(data, cuts), head_policy=accept_all)
    reading = llhttp_reading(data)
    handed, answers = owner.handed, owner.refusals()
    refusals = [refusal for refusal in answers if refusal is not None]
    event(f"{len(handed)} handed of {len(reading.messages)}; refused: {[refusal.name for refusal in refusals]}")
    # Every request handed over is llhttp's at that place, and breaks none of the connection's rules.
    assert len(handed) <= len(reading.messages)
    for message, request in zip(reading.messages, handed, strict=False):
        assert request == _handed_as(message)
        assert broken_rules(message) == set()
    assert len(refusals) <= 1
    assert answers == [None] * len(handed) + refusals  # the answers to the requests handed over, then any refusal
    stop = len(handed)
    if not refusals:
        # Everything llhttp read was handed over, up to the request that closes the connection.
        closing = next((index for index, message in enumerate(reading.messages) if not message.keep_alive), None)
        assert stop == (len(reading.messages) if closing is None else closing + 1)
        assert not reading.refused or closing is not None  # llhttp refuses bytes after that request, unanswered
    elif refusals[0] is Refusal.MALFORMED:
        # llhttp refused the bytes after the requests handed over.
        assert reading.refused
        assert stop == len(reading.messages)
    else:
        # A head llhttp read and the connection refused by one of its rules.
        assert refusals[0] in broken_rules(reading.heads[stop])


# -- WebSocket handshakes ---------------------------------------------------------------------------------------------

HANDSHAKE = request(
    "/v1/mainnet",
    b"",
    method="GET",
    length=False,
    headers="Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "Sec-WebSocket-Version: 13\r\n",
)


@pytest.mark.parametrize("length", [b"", b"Content-Length: 0\r\n"])
def test_a_websocket_handshake_is_handed_over_with_what_follows_it(length: bytes) -> None:
    owner = Owner(at_once=False)
    owner.feed(HANDSHAKE.replace(b"\r\n\r\n", b"\r\n" + length + b"\r\n") + b"\x81\x80abcd")
    assert owner.waiting is not None
    assert owner.waiting.upgrade
    assert owner.connection.upgrade_tail == b"\x81\x80abcd"
    owner.feed(b"more")  # frames sent before the answer are kept for the session too
    assert owner.connection.upgrade_tail == b"\x81\x80abcdmore"


def test_a_handshake_the_handler_does_not_accept_is_answered_and_closes() -> None:
    owner = Owner(at_once=True)
    owner.feed(HANDSHAKE)
    assert owner.statuses() == [200]
    assert b"connection: close\r\n" in owner.answers[0]
    assert owner.end in (Step.CLOSE, Step.LINGER)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(request("/a") + HANDSHAKE, id="pipelined behind a request"),
        pytest.param(HANDSHAKE.replace(b"GET", b"POST"), id="not a GET"),
        pytest.param(HANDSHAKE.replace(b"\r\n\r\n", b"\r\nContent-Length: 1\r\n\r\nx"), id="with a body"),
    ],
)
def test_other_upgrades_are_refused(data: bytes) -> None:
    owner = Owner(at_once=True)
    owner.feed(data)
    assert owner.refusals()[-1] is Refusal.UPGRADE
