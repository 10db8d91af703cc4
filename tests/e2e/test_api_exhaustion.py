"""The API listener is bounded, against the real service: a huge body is refused before a byte of it is read (and
before the caller is known), a chunked body is cut at the limit, idle and slow connections are closed, and idle API
connections cannot take the file descriptors the edge in the same process needs."""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.anvil import AnvilNode
from tests.support.edgeplane import EdgeplaneProcess
from tests.support.raw_http import connect, read_response

CHAIN_ID = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}


def service(anvil: AnvilNode, directory: Path, api: str) -> EdgeplaneProcess:
    config = directory / "edgeplane.toml"
    # One edge worker: the one that shares the API's process.
    config.write_text(f"edge_workers = 1\n\n[api]\n{api}\n", encoding="utf-8")
    return EdgeplaneProcess(
        directory / "data", upstreams=(f"mainnet={anvil.url}",), extra_args=("--config", str(config))
    )


@pytest.fixture(scope="module")
def bounded(anvil: AnvilNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    limits = "idle_timeout_seconds = 1.0\nrequest_timeout_seconds = 2.0\nmax_body_bytes = 1048576"
    with service(anvil, tmp_path_factory.mktemp("bounded"), limits) as process:
        yield process


def api_rss_kib(process: EdgeplaneProcess) -> int:
    """The resident memory of the API process (a child of ``edgeplane serve``)."""
    (pid,) = process.child_pids("api")
    return rss_kib(pid)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


# Asyncio may run a timer up to its clock's resolution early; a server's timeout is otherwise never shorter than set.
EARLY = 0.05


def closed_within(sock: socket.socket, seconds: float, started: float | None = None) -> float:
    """How long the server took to close ``sock``, since ``started`` (a ``time.monotonic()``; now by default): fails
    when it stays open past ``seconds``."""
    sock.settimeout(seconds)
    started = time.monotonic() if started is None else started
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"the connection was still open after {seconds}s")
    return time.monotonic() - started


def send_quietly(sock: socket.socket, data: bytes) -> int:
    """Sends what the server accepts; returns how much went before it closed."""
    sent = 0
    with contextlib.suppress(OSError):
        for start in range(0, len(data), 65536):
            sock.sendall(data[start : start + 65536])
            sent += min(65536, len(data) - start)
    return sent


def test_a_huge_declared_body_is_refused_before_it_is_read(bounded: EdgeplaneProcess) -> None:
    before = api_rss_kib(bounded)
    with connect(bounded.api_port) as sock:
        sock.sendall(
            b"POST /client/v4/zones HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
            b"Content-Length: 400000000\r\n\r\n"
        )
        status, headers, body = read_response(sock)  # answered before any of the body was sent
        assert status == 413
        assert json.loads(body)["errors"][0]["code"] == 1003
        assert headers["connection"] == "close"
        send_quietly(sock, b"{" * (4 * 1024 * 1024))
        closed_within(sock, 30)  # the server is done with the connection: what it read of the body, it has read
    assert api_rss_kib(bounded) - before < 16 * 1024


def test_an_unauthenticated_body_is_not_read(bounded: EdgeplaneProcess) -> None:
    with connect(bounded.api_port) as sock:
        sock.sendall(
            b"POST /client/v4/zones HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
            b"Content-Length: 900000\r\n\r\n"
        )
        status, headers, body = read_response(sock)
        assert status == 401
        assert json.loads(body)["errors"][0]["code"] == 10000
        assert headers["connection"] == "close"


def test_a_chunked_body_is_cut_at_the_limit(bounded: EdgeplaneProcess) -> None:
    token = bounded.credentials["api_token"]
    before = api_rss_kib(bounded)
    with connect(bounded.api_port) as sock:
        sock.sendall(
            b"POST /client/v4/zones HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\nAuthorization: Bearer " + token.encode() + b"\r\n\r\n"
        )
        chunk = b"10000\r\n" + b" " * 0x10000 + b"\r\n"
        sender = threading.Thread(target=send_quietly, args=(sock, chunk * 256))  # 16 MiB, never finished
        sender.start()
        status, headers, body = read_response(sock)
        assert status == 413
        assert json.loads(body)["errors"][0]["code"] == 1003
        assert headers["connection"] == "close"
        closed_within(sock, 5)
        sender.join(10)
    assert api_rss_kib(bounded) - before < 16 * 1024


def test_a_body_within_the_limit_still_works_chunked(bounded: EdgeplaneProcess) -> None:
    token = bounded.credentials["api_token"]

    def body() -> Iterator[bytes]:
        yield b'{"name": "chunked.example", '
        yield b'"account": {"id": "' + bounded.credentials["account_id"].encode() + b'"}}'

    response = httpx.post(
        f"{bounded.api_url}/client/v4/zones", content=body(), headers={"Authorization": f"Bearer {token}"}
    )
    assert response.json()["success"] is True, response.json()


@pytest.mark.parametrize(
    ("name", "sent", "limit"),
    [
        ("a connection that sends nothing", b"", 1.0),
        ("half a request line", b"GET /client/v4/zo", 2.0),
        ("headers without their end", b"GET /client/v4/zones HTTP/1.1\r\nHost: api\r\n", 2.0),
        (
            "a body shorter than declared",
            b"POST /client/v4/zones HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer TOKEN\r\n"
            b"Content-Length: 10\r\n\r\n{",
            2.0,
        ),
    ],
)
def test_idle_and_half_sent_connections_are_closed(
    bounded: EdgeplaneProcess, name: str, sent: bytes, limit: float
) -> None:
    started = time.monotonic()  # before the server's clock for the connection starts
    with connect(bounded.api_port) as sock:
        sock.sendall(sent.replace(b"TOKEN", bounded.credentials["api_token"].encode()))
        took = closed_within(sock, limit + 30, started)  # the bound only ends a connection never closed
        assert took >= limit - EARLY, name  # not before its limit


def test_a_trickling_request_is_closed_at_its_deadline(bounded: EdgeplaneProcess) -> None:
    started = time.monotonic()  # before the request's deadline starts on the server
    with connect(bounded.api_port) as sock:
        sock.sendall(b"GET /client/v4/zones HTTP/1.1\r\nHost: api\r\n")
        closed = False
        try:
            while time.monotonic() - started < 30:  # the bound only ends a connection never closed
                sock.sendall(b"X-Slow: 1\r\n")  # a header every 200 ms: never idle, never done
                time.sleep(0.2)
        except OSError:
            closed = True
        assert closed, "the trickling request was not cut at its deadline"
        assert time.monotonic() - started >= 2.0 - EARLY  # not before it


def test_a_kept_alive_connection_is_closed_when_idle(bounded: EdgeplaneProcess) -> None:
    with connect(bounded.api_port) as sock:
        started = time.monotonic()  # before the server answers, after which the connection's idle time starts
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: api\r\n\r\n")
        assert read_response(sock)[0] == 200
        took = closed_within(sock, 30, started)  # the bound only ends a connection never closed
        assert took >= 1.0 - EARLY  # not before the idle timeout


def test_an_oversized_head_is_refused(bounded: EdgeplaneProcess) -> None:
    with connect(bounded.api_port) as sock:
        sent = send_quietly(sock, b"GET /healthz HTTP/1.1\r\nHost: api\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n")
        assert sent > 0
        status, _, body = read_response(sock)
        assert status == 431
        assert json.loads(body)["success"] is False


def test_idle_api_connections_do_not_starve_the_edge(anvil: AnvilNode, tmp_path: Path) -> None:
    limits = "idle_timeout_seconds = 60.0\nrequest_timeout_seconds = 60.0\nmax_connections = 32"
    with service(anvil, tmp_path, limits) as process:
        assert httpx.post(process.rpc_url(), json=CHAIN_ID).status_code == 200
        # Room for the 32 API connections the settings allow and a few more; not for 300. The API process, which
        # holds the connections, has the limit; so has the supervisor, which holds the listeners.
        for pid in (process.pid, *process.child_pids("api")):
            opened = len(list(Path(f"/proc/{pid}/fd").iterdir()))
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (opened + 64, opened + 64))
        idle: list[socket.socket] = []
        try:
            for _ in range(300):
                idle.append(connect(process.api_port))
            time.sleep(0.5)
            refused = 0
            for sock in idle[32:]:
                sock.settimeout(30)
                with contextlib.suppress(ConnectionError):
                    if read_response(sock)[0] == 503:
                        refused += 1
            assert refused >= 300 - 32 - 2  # a connection or two may still have been closing
            answered = [httpx.post(process.rpc_url(), json=CHAIN_ID, timeout=10).json().get("result") for _ in range(5)]
            assert answered == [hex(anvil.chain_id)] * 5
        finally:
            for sock in idle:
                sock.close()
        time.sleep(0.5)
        health = httpx.get(f"{process.api_url}/healthz", timeout=10)
        assert health.status_code == 200
