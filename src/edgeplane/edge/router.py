"""The edge listener's router: host and path routing, HTTP checks, and the gateway.

The checks, in order: ``/healthz`` answers at once; any other path but ``/v1/<network>`` is 404; then the Host must be
a web3 hostname (404), the network must exist (404), the method must be POST (405, with ``Allow: POST``), the content
type JSON (415), and the body within the server's ``max_body_bytes`` (413, answered by ``HttpServer`` itself once the
checks here have passed, before the body is read). Each answer is a JSON-RPC error object with ``id: null``. All of
them are decided from the request head, so a refused request's body is never buffered; only a request that passes
reaches the gateway, with its body.
"""

from __future__ import annotations

import time

from edgeplane.edge.http_server import EdgeRequest, EdgeResponse, jsonrpc_error
from edgeplane.edge.request_log import RequestLog, new_ray_id
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

    def __init__(self, gateway: Gateway, snapshots: SnapshotHolder, request_log: RequestLog | None = None) -> None:
        self.gateway = gateway
        self.snapshots = snapshots
        self.request_log = request_log

    def answer_head(self, request: EdgeRequest) -> EdgeResponse | None:
        """The answer to a request that does not reach the gateway, decided from its head; None for one that does."""
        if self.request_log is None or request.path == "/healthz":
            return self._refusal(request)
        started_ns = time.time_ns()
        response = self._refusal(request)
        if response is not None:
            host = _host(request)
            ray_id = new_ray_id()
            response = _with_ray(response, ray_id)
            zone = self.snapshots.current.web3_zone(host)
            self.request_log.emit(request, response, ray_id=ray_id, started_ns=started_ns, zone=zone, host=host)
        return response

    def _refusal(self, request: EdgeRequest) -> EdgeResponse | None:
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
        if self.request_log is None:
            answer = await self.gateway.handle(_network(request.path), request.body)
            return EdgeResponse(answer.status, answer.body)
        started_ns = time.time_ns()
        answer = await self.gateway.handle(_network(request.path), request.body)
        origin_ms = (time.time_ns() - started_ns) // 1_000_000
        ray_id = new_ray_id()
        response = EdgeResponse(answer.status, answer.body, headers=((b"cf-ray", ray_id.encode() + b"-EDG"),))
        host = _host(request)
        self.request_log.emit(
            request,
            response,
            ray_id=ray_id,
            started_ns=started_ns,
            zone=self.snapshots.current.web3_zone(host),
            host=host,
            origin_status=answer.status,
            origin_duration_ms=origin_ms,
        )
        return response


def _with_ray(response: EdgeResponse, ray_id: str) -> EdgeResponse:
    return EdgeResponse(
        response.status,
        response.body,
        content_type=response.content_type,
        headers=(*response.headers, (b"cf-ray", ray_id.encode() + b"-EDG")),
    )


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
