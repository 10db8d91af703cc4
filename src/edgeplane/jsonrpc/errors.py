"""JSON-RPC errors: the one shape of an error (``RpcError``), the specification's codes, and the errors of the
envelope and of parameters that every JSON-RPC server here answers with. The gateway's own errors
(``edgeplane.gateway.errors``) and the development chain's (``edgeplane.chain.errors``) are ``RpcError``s too.
"""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class RpcError(Exception):
    """A failure with a JSON-RPC error code, a message that says what is wrong, and optional ``data``; and the HTTP
    status to answer with when the error concerns the whole request rather than one item of a batch."""

    code: int = INTERNAL_ERROR
    http_status: int = 200

    def __init__(self, message: str, *, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    def to_error_object(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member for this failure."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(RpcError):
    """The body is not valid JSON."""

    code = PARSE_ERROR
    http_status = 400


class InvalidRequest(RpcError):
    """The body is JSON but not a valid JSON-RPC 2.0 request (or batch)."""

    code = INVALID_REQUEST
    http_status = 400


class InvalidParams(RpcError):
    """The params are malformed, or a request exceeds one of the server's limits."""

    code = INVALID_PARAMS
