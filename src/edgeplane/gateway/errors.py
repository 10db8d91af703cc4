"""The gateway's error hierarchy.

Every error a caller can cause or meet carries its JSON-RPC code, a message that says what is wrong, and the HTTP
status to answer with when the error concerns the whole request rather than one item of a batch. They are mapped to
the wire format in exactly one place (``edgeplane.gateway.jsonrpc``).
"""

from __future__ import annotations

from typing import Any

from edgeplane.rpc_error import RpcError

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
METHOD_NOT_ALLOWED = -32001
UPSTREAM_UNAVAILABLE = -32002
LIMIT_EXCEEDED = -32005


class GatewayError(RpcError):
    """A gateway failure: a JSON-RPC error plus the HTTP status to answer a single request with."""

    code: int = INTERNAL_ERROR
    http_status: int = 200


class ParseError(GatewayError):
    """The body is not valid JSON."""

    code = PARSE_ERROR
    http_status = 400


class InvalidRequest(GatewayError):
    """The body is JSON but not a valid JSON-RPC 2.0 request (or batch)."""

    code = INVALID_REQUEST
    http_status = 400


class MethodNotAllowed(GatewayError):
    """The method is not on the gateway's list of supported methods (HTTP 403, as the spec demands)."""

    code = METHOD_NOT_ALLOWED
    http_status = 403


class InvalidParams(GatewayError):
    """The params are malformed, or a request exceeds one of the gateway's limits."""

    code = INVALID_PARAMS


class UpstreamUnavailable(GatewayError):
    """No upstream node could answer: all failed, timed out, or none is configured."""

    code = UPSTREAM_UNAVAILABLE
    http_status = 502


class UpstreamRejected(GatewayError):
    """An upstream answered with a JSON-RPC error; it is passed to the caller as the node gave it."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message", "upstream error")), data=error.get("data"))
        raw_code = error.get("code")
        self.code = raw_code if isinstance(raw_code, int) else INTERNAL_ERROR
        self.error_object = error

    def to_error_object(self) -> dict[str, Any]:
        return dict(self.error_object)
