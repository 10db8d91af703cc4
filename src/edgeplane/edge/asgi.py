"""The edge listener's ASGI application: host and path routing, HTTP checks, and the gateway.

Written as a bare ASGI callable rather than on a framework because it is the hot path: one request is a few
dictionary look-ups before the gateway runs.

HTTP checks, in order, for ``/v1/<network>``: the Host must be a web3 hostname (404), the network must exist (404),
the method must be POST (405), the content type JSON (415), and the body within ``max_body_bytes`` (413). Each
answer is a JSON-RPC error object with ``id: null``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import structlog

from edgeplane.gateway.errors import INTERNAL_ERROR, INVALID_REQUEST
from edgeplane.gateway.jsonrpc import encode
from edgeplane.gateway.service import Gateway

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

log = structlog.get_logger(__name__)

_JSON_HEADERS = [(b"content-type", b"application/json")]
_HEALTHY = b'{"status":"ok"}'


@dataclass(frozen=True, slots=True)
class EdgeRoutes:
    """The immutable routing snapshot the edge works from: which hosts are web3 gateway hostnames."""

    web3_hostnames: frozenset[str]


def _error_body(code: int, message: str) -> bytes:
    return encode({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})


class BodyTooLarge(Exception):
    """The request body is larger than the edge accepts."""


class EdgeApp:
    """The edge listener's application."""

    def __init__(self, gateway: Gateway, routes: EdgeRoutes, *, max_body_bytes: int) -> None:
        self.gateway = gateway
        self.routes = routes
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if path == "/healthz":
            await _respond(send, 200, _HEALTHY)
            return
        if not path.startswith("/v1/"):
            await _respond(
                send,
                404,
                _error_body(INVALID_REQUEST, f"not found: {path}; use POST /v1/<network>"),
            )
            return
        host = _host(scope)
        if host not in self.routes.web3_hostnames:
            await _respond(
                send,
                404,
                _error_body(INVALID_REQUEST, f"no web3 gateway is configured for host {host!r}"),
            )
            return
        network = path[4:].rstrip("/")
        if network not in self.gateway.pools:
            response = self.gateway.unknown_network(network)
            await _respond(send, response.status, response.body)
            return
        if scope["method"] != "POST":
            await _respond(
                send,
                405,
                _error_body(INVALID_REQUEST, f"method {scope['method']} not allowed; use POST"),
                extra_headers=[(b"allow", b"POST")],
            )
            return
        if not _is_json(scope):
            await _respond(
                send,
                415,
                _error_body(INVALID_REQUEST, "unsupported media type; use Content-Type: application/json"),
            )
            return
        try:
            body = await _read_body(scope, receive, self.max_body_bytes)
        except BodyTooLarge:
            await _respond(
                send,
                413,
                _error_body(INVALID_REQUEST, f"request body larger than {self.max_body_bytes} bytes"),
            )
            return
        try:
            response = await self.gateway.handle(network, body)
        except Exception:  # the last line of defence: a bug must still get a coded JSON-RPC answer
            log.exception("gateway failed", network=network)
            await _respond(send, 500, _error_body(INTERNAL_ERROR, "internal error"))
            return
        await _respond(send, response.status, response.body)


def _host(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == b"host":
            host: str = value.decode("latin-1").lower()
            if host.startswith("["):
                return host[1 : host.find("]")] if "]" in host else host
            return host.rsplit(":", 1)[0] if ":" in host else host
    server = scope.get("server")
    return str(server[0]) if server else ""


def _is_json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            media_type = value.split(b";", 1)[0].strip().lower()
            return bool(media_type == b"application/json")
    return False


async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _respond(
    send: Send, status: int, body: bytes, *, extra_headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode())]
    if extra_headers:
        headers.extend(extra_headers)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
