"""The edge listener's HTTP handling against the real service: the issue's raw requests, sent over a socket as an
attacker would, get the answers RFC 9112 and a strict gateway give; the ``[edge]`` bounds hold (header count, slow
heads and bodies, idle connections)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from tests.support.anvil import AnvilNode
from tests.support.edgeplane import EdgeplaneProcess
from tests.support.raw_http import connect, read_response

CALL = b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'


@pytest.fixture(scope="module")
def edge(anvil: AnvilNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    directory = tmp_path_factory.mktemp("edge-http")
    config = directory / "edgeplane.toml"
    config.write_text(
        "edge_workers = 1\n\n[edge]\nmax_headers = 40\nrequest_timeout_seconds = 1.0\nidle_timeout_seconds = 1.0\n",
        encoding="utf-8",
    )
    process = EdgeplaneProcess(
        directory / "data", upstreams=(f"mainnet={anvil.url}",), extra_args=("--config", str(config))
    )
    with process:
        yield process


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def post(
    target: str = "/v1/mainnet", *, host: str | None = "localhost", headers: str = "", body: bytes = CALL
) -> bytes:
    head = f"POST {target} HTTP/1.1\r\n" + (f"Host: {host}\r\n" if host is not None else "")
    head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{headers}\r\n"
    return head.encode("latin-1") + body


ROWS = [
    # raw request, status, fragment of the JSON-RPC error message (None: the node's answer)
    pytest.param(post(), 200, None, id="plain"),
    pytest.param(post(headers="X-Big: " + "b" * 100_000 + "\r\n"), 431, "request head larger", id="100 KB header"),
    pytest.param(post(headers="".join(f"X-{n}: {n}\r\n" for n in range(10_000))), 431, None, id="10000 headers"),
    pytest.param(post(headers="".join(f"X-{n}: {n}\r\n" for n in range(38))), 431, None, id="41 headers (max 40)"),
    pytest.param(post(headers="".join(f"X-{n}: {n}\r\n" for n in range(37))), 200, None, id="40 headers"),
    pytest.param(post(host=None), 400, "Host", id="HTTP/1.1 without Host"),
    pytest.param(post(headers="Host: localhost\r\n"), 400, "more than one host", id="two Hosts"),
    pytest.param(post("http://localhost/v1/mainnet", host="example.com"), 200, None, id="absolute form wins"),
    pytest.param(post("http://example.com/v1/mainnet"), 404, "'example.com'", id="absolute form elsewhere"),
    pytest.param(post(headers="Content-Encoding: gzip\r\n"), 415, "content encoding", id="gzip"),
    pytest.param(post("/v1/mainnet%2f"), 404, "unknown network", id="%2f"),
    pytest.param(post("/v1/mainnet///"), 404, "unknown network", id="///"),
    pytest.param(post("/v1/mainnet/"), 404, "unknown network", id="trailing slash"),
    pytest.param(post("/v1/%6dainnet"), 404, "unknown network", id="percent-encoded name"),
    pytest.param(post("//v1/mainnet"), 404, "not found", id="//"),
    pytest.param(post("/v1/mainnet?x=1"), 200, None, id="query"),
    pytest.param(post("/v1/mainnet#x"), 400, "fragment", id="fragment"),
    pytest.param(post(headers="Transfer-Encoding: chunked\r\n"), 400, None, id="Content-Length and chunked"),
    pytest.param(post(headers="Content-Length: 3\r\n"), 400, None, id="two lengths"),
    pytest.param(post(headers="X-Folded: a\r\n b\r\n"), 400, None, id="obs-fold"),
    pytest.param(post(headers="X-Space : a\r\n"), 400, None, id="space before colon"),
    pytest.param(post().replace(b"HTTP/1.1", b"HTTP/2.0"), 505, "version", id="HTTP/2.0 in an HTTP/1 line"),
    pytest.param(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400, None, id="HTTP/2 preface"),
]


@pytest.mark.parametrize(("raw", "status", "message"), ROWS)
def test_raw_requests(edge: EdgeplaneProcess, raw: bytes, status: int, message: str | None) -> None:
    with connect(edge.edge_port) as sock:
        sock.sendall(raw)
        got, _, body = read_response(sock)
    assert got == status
    document = json.loads(body)
    if status == 200:
        assert document["result"] == "0x7a69"  # anvil's chain id, from the node behind mainnet
    elif message is not None:
        assert message in document["error"]["message"]


def test_a_smuggled_request_behind_a_refused_one_is_never_answered(edge: EdgeplaneProcess) -> None:
    smuggled = post(body=b'{"jsonrpc":"2.0","id":2,"method":"admin_peers","params":[]}')
    front = post(headers="Transfer-Encoding: chunked\r\n", body=b"0\r\n\r\n" + smuggled)
    with connect(edge.edge_port) as sock:
        sock.sendall(front)
        status, headers, _ = read_response(sock)
        assert closed_by_server(sock)
    assert (status, headers["connection"]) == (400, "close")


def test_a_trickled_head_is_cut_off(edge: EdgeplaneProcess) -> None:
    with connect(edge.edge_port) as sock:
        sock.sendall(b"POST /v1/mainnet HTTP/1.1\r\nHost: localhost\r\n")
        started = time.monotonic()
        for index in range(60):  # a header every 0.1 s: never idle, never done
            try:
                sock.sendall(b"X-Slow-%d: 1\r\n" % index)
            except OSError:
                break
            time.sleep(0.1)
            if time.monotonic() - started > 1.5:
                break
        status, _, _ = read_response(sock)
    assert status == 408


def test_a_trickled_body_is_cut_off(edge: EdgeplaneProcess) -> None:
    with connect(edge.edge_port) as sock:
        sock.sendall(post()[:-10])
        status, _, _ = read_response(sock)
        assert closed_by_server(sock)
    assert status == 408


def test_an_idle_connection_is_closed(edge: EdgeplaneProcess) -> None:
    with connect(edge.edge_port) as sock:
        started = time.monotonic()  # before the answer, after which the connection's idle time starts
        sock.sendall(post())
        status, _, _ = read_response(sock)
        assert closed_by_server(sock)  # within the socket's timeout
        waited = time.monotonic() - started
    assert status == 200
    assert waited >= 1.0 - 0.05  # not before the idle timeout (a loop's timer may run a clock tick early)
