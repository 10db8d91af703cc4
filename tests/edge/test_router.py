"""The edge router's checks, in order, through the real server: each row is what a client sends and what it gets.

The gateway behind it has one network whose node does not exist, so a request that passes every check gets the
gateway's own answer for an unreachable node (502, -32002).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket

import pytest

from edgeplane.config import GatewaySettings, UpstreamSettings
from edgeplane.configuration.snapshot import EdgeSnapshot, SnapshotHolder, ZoneRoute
from edgeplane.edge.http_server import EdgeRequest, HttpLimits, HttpServer, Refusal
from edgeplane.edge.router import EdgeRouter
from edgeplane.gateway.policy import load_method_policy
from edgeplane.gateway.service import Gateway
from edgeplane.gateway.upstream import UpstreamNode
from edgeplane.gateway.upstream_pool import UpstreamPool

MAX_BODY = 4096
CALL = b'{"jsonrpc":"2.0","id":7,"method":"eth_blockNumber","params":[]}'

ROWS = [
    # method, path, host, content type, body, expected status, expected error message (or fragment)
    ("GET", "/healthz", "anything", None, b"", 200, None),
    ("POST", "/", "localhost", "application/json", CALL, 404, "not found: /; use POST /v1/<network>"),
    ("POST", "/v1/mainnet", "example.com", "application/json", CALL, 404, "no web3 gateway is configured"),
    ("POST", "/v1/nowhere", "localhost", "application/json", CALL, 404, "unknown network 'nowhere'"),
    ("GET", "/v1/mainnet", "localhost", "application/json", b"", 405, "method GET not allowed; use POST"),
    ("POST", "/v1/mainnet", "localhost", "text/plain", CALL, 415, "unsupported media type"),
    ("POST", "/v1/mainnet", "localhost", None, CALL, 415, "unsupported media type"),
    # The head checks come before the size: a large body to the wrong host is a 404, not a 413.
    ("POST", "/v1/mainnet", "example.com", "application/json", b" " * (MAX_BODY + 1), 404, "no web3 gateway"),
    ("POST", "/v1/mainnet", "localhost", "application/json", b" " * (MAX_BODY + 1), 413, "larger than 4096 bytes"),
    ("POST", "/v1/mainnet", "localhost:8787", "application/json; charset=utf-8", b"{", 400, None),
    ("POST", "/v1/mainnet", "127.0.0.1", "application/json", CALL, 502, None),
    # One spelling of a network's path: with a trailing slash it is another name (see test_http_hardening.py).
    ("POST", "/v1/mainnet/", "127.0.0.1", "application/json", CALL, 404, "unknown network 'mainnet/'"),
]

ZONE = ZoneRoute(zone_id="z" * 32, zone_name="localhost", account_id="a" * 32, plan="enterprise")


async def _exchange(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    async with asyncio.timeout(10):
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")[:-2]
        headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
        body = await reader.readexactly(int(headers["content-length"]))
    writer.close()
    return int(status_line.split()[1]), headers, body


@pytest.mark.parametrize(("method", "path", "host", "content_type", "body", "status", "message"), ROWS)
async def test_router_checks(
    method: str, path: str, host: str, content_type: str | None, body: bytes, status: int, message: str | None
) -> None:
    settings = GatewaySettings(request_timeout_seconds=1.0)
    node = UpstreamNode(UpstreamSettings(url="http://127.0.0.1:9", name="nowhere"), timeout_seconds=1.0)
    gateway = Gateway(load_method_policy(), {"mainnet": UpstreamPool("mainnet", [node], settings)}, settings)
    server = HttpServer(
        EdgeRouter(
            gateway, SnapshotHolder(EdgeSnapshot(web3_hostnames={host: ZONE for host in ("localhost", "127.0.0.1")}))
        ),
        max_body_bytes=MAX_BODY,
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sock.setblocking(False)
    serving = asyncio.create_task(server.serve(sock))
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n"
    if content_type is not None:
        head += f"Content-Type: {content_type}\r\n"
    try:
        got, headers, answer = await _exchange(sock.getsockname()[1], head.encode() + b"\r\n" + body)
    finally:
        server.shutdown()
        await asyncio.wait_for(serving, 10)
        node.close()
    assert got == status
    document = json.loads(answer)
    if status == 200:
        assert document == {"status": "ok"}
        return
    assert headers["content-type"] == "application/json"
    # The router has no request log here: the ray id is sent all the same (the server's own 413 has none: the router
    # words it, the server decides it before the router has seen the request).
    if status != 413:
        assert re.fullmatch(r"[0-9a-f]{16}-EDG", headers["cf-ray"])
    if message is not None:
        assert document["id"] is None
        assert message in document["error"]["message"]
    if status == 405:
        assert headers["allow"] == "POST"


# What the server refuses by itself, as the router words it: each a JSON-RPC error object with ``id: null``, with the
# status the refusal calls for (the server decides and words nothing).
REFUSED_AS = [
    (Refusal.MALFORMED, -32600, "malformed HTTP request"),
    (Refusal.BAD_TARGET, -32600, "malformed request target; send a path (/v1/<network>) or an http:// URL"),
    (Refusal.NO_HOST, -32600, "an HTTP/1.1 request needs one Host header"),
    (Refusal.REPEATED_HEADER, -32600, "more than one content-length header"),
    (Refusal.HEAD_TOO_LARGE, -32600, "request head larger than 1024 bytes or 12 headers"),
    (Refusal.BODY_TOO_LARGE, -32600, "request body larger than 4096 bytes"),
    (Refusal.VERSION_NOT_SUPPORTED, -32600, "HTTP version not supported; use HTTP/1.1"),
    (Refusal.UPGRADE, -32600, "CONNECT and protocol upgrades are not implemented"),
    (Refusal.CHUNKED, -32600, "chunked request bodies are not accepted; send the body with Content-Length"),
    (Refusal.TRANSFER_CODING, -32600, "transfer coding not implemented; send the body with Content-Length"),
    (Refusal.TOO_MANY_PIPELINED, -32600, "more than 100 pipelined requests; wait for answers before sending more"),
    (Refusal.TIMED_OUT, -32600, "the request did not arrive in time"),
    (Refusal.TOO_MANY_CONNECTIONS, -32600, "too many connections; try again later"),
    (Refusal.HANDLER_FAILED, -32603, "internal error"),
]


def test_every_refusal_is_worded() -> None:
    assert {refusal for refusal, _, _ in REFUSED_AS} == set(Refusal)


@pytest.mark.parametrize(("refusal", "code", "message"), REFUSED_AS, ids=[row[0].name for row in REFUSED_AS])
def test_the_router_words_the_servers_refusals(refusal: Refusal, code: int, message: str) -> None:
    settings = GatewaySettings()
    router = EdgeRouter(Gateway(load_method_policy(), {}, settings), SnapshotHolder(EdgeSnapshot()))
    twice = [(b"content-length", b"0"), (b"content-length", b"0")]
    request = EdgeRequest("POST", "/v1/mainnet", b"", twice, "1.1", None, None)
    limits = HttpLimits(MAX_BODY, 1024, 12, 15.0, 30.0)
    answer = router.refusal_answer(refusal, request, limits)
    assert answer.status == refusal.status
    assert answer.content_type == b"application/json"
    document = json.loads(answer.body)
    assert document["jsonrpc"] == "2.0"
    assert document["id"] is None
    assert document["error"]["code"] == code
    assert document["error"]["message"].startswith(message)
