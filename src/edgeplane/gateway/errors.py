"""The gateway's own errors: those of its method policy and of its upstreams.

Like the errors of the envelope and of parameters (``edgeplane.jsonrpc.errors``), each carries its JSON-RPC code, a
message that says what is wrong, and the HTTP status to answer with when the error concerns the whole request rather
than one item of a batch. They are mapped to the wire format in exactly one place (``edgeplane.jsonrpc.envelope``).
"""

from __future__ import annotations

from typing import Any

from edgeplane.jsonrpc.errors import INTERNAL_ERROR, RpcError

METHOD_NOT_ALLOWED = -32001
UPSTREAM_UNAVAILABLE = -32002
LIMIT_EXCEEDED = -32005


class GatewayError(RpcError):
    """A failure of the gateway's own: a network it does not serve, a method its policy refuses, upstreams that
    could not answer."""


class MethodNotAllowed(GatewayError):
    """The method is not on the gateway's list of supported methods (HTTP 403, as the spec demands)."""

    code = METHOD_NOT_ALLOWED
    http_status = 403


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
