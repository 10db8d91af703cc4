"""The one shape of a JSON-RPC error, shared by the gateway and the development chain."""

from __future__ import annotations

from typing import Any


class RpcError(Exception):
    """A failure with a JSON-RPC error code, a message that says what is wrong, and optional ``data``."""

    code: int = -32603

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
