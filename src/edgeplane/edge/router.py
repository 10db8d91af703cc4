"""The edge listener's router: host and path routing, HTTP checks, and the gateway.

The checks, in order: ``/healthz`` answers at once; any other path but ``/v1/<network>`` is 404; then the Host must be
a web3 hostname (404), the network must exist (404), the method must be POST (405, with ``Allow: POST``), the content
type JSON (415), and the body within the server's ``max_body_bytes`` (413, answered by ``HttpServer`` itself once the
checks here have passed, before the body is read). Each answer is a JSON-RPC error object with ``id: null``. All of
them are decided from the request head, so a refused request's body is never buffered; only a request that passes
reaches the gateway, with its body.
"""

from __future__ import annotations

from edgeplane.edge.http_server import EdgeRequest, EdgeResponse, jsonrpc_error
from edgeplane.gateway.errors import INVALID_REQUEST
from edgeplane.gateway.service import Gateway
from edgeplane.store.snapshot import SnapshotHolder

_HEALTHY = EdgeResponse(200, b'{"status":"ok"}')
_WRONG_METHOD_HEADERS = ((b"allow", b"POST"),)
_UNSUPPORTED_MEDIA_TYPE = jsonrpc_error(
    415, INVALID_REQUEST, "unsupported media type; use Content-Type: application/json"
)


class EdgeRouter:
    """The edge listener's handler for ``HttpServer``: routes a request to the gateway or refuses it."""

    def __init__(self, gateway: Gateway, snapshots: SnapshotHolder) -> None:
        self.gateway = gateway
        self.snapshots = snapshots

    def answer_head(self, request: EdgeRequest) -> EdgeResponse | None:
        """The answer to a request that does not reach the gateway, decided from its head; None for one that does."""
        path = request.path
        if path == "/healthz":
            return _HEALTHY
        if not path.startswith("/v1/"):
            return jsonrpc_error(404, INVALID_REQUEST, f"not found: {path}; use POST /v1/<network>")
        host = _host(request)
        if self.snapshots.current.web3_zone(host) is None:
            return jsonrpc_error(404, INVALID_REQUEST, f"no web3 gateway is configured for host {host!r}")
        network = _network(path)
        if network not in self.gateway.pools:
            unknown = self.gateway.unknown_network(network)
            return EdgeResponse(unknown.status, unknown.body)
        if request.method != "POST":
            return jsonrpc_error(
                405,
                INVALID_REQUEST,
                f"method {request.method} not allowed; use POST",
                headers=_WRONG_METHOD_HEADERS,
            )
        if not _is_json(request):
            return _UNSUPPORTED_MEDIA_TYPE
        return None

    async def handle(self, request: EdgeRequest) -> EdgeResponse:
        """The gateway's answer to a request ``answer_head`` let through."""
        response = await self.gateway.handle(_network(request.path), request.body)
        return EdgeResponse(response.status, response.body)


def _network(path: str) -> str:
    return path[4:].rstrip("/")


def _host(request: EdgeRequest) -> str:
    value = request.header(b"host")
    if value is None:
        return request.server[0] if request.server else ""
    host = value.decode("latin-1").lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if ":" in host else host


def _is_json(request: EdgeRequest) -> bool:
    value = request.header(b"content-type")
    return value is not None and value.split(b";", 1)[0].strip().lower() == b"application/json"
