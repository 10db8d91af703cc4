"""Errors of the development chain, worded and coded as an Ethereum node (geth) words and codes them."""

from __future__ import annotations

from typing import Any


class ChainError(Exception):
    """A JSON-RPC error a node would answer: code -32000 unless said otherwise."""

    code = -32000

    def __init__(self, message: str, *, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    def to_error_object(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class InvalidParams(ChainError):
    """Malformed parameters (-32602)."""

    code = -32602


class MethodNotFound(ChainError):
    """A method the chain does not have (-32601)."""

    code = -32601


class ExecutionReverted(ChainError):
    """``eth_call``/``eth_estimateGas`` reverted: code 3 with the revert data, as geth answers."""

    code = 3
