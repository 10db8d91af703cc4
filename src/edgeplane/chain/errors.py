"""Errors of the development chain, worded and coded as an Ethereum node (geth) words and codes them."""

from __future__ import annotations

from edgeplane.jsonrpc.errors import INVALID_PARAMS, METHOD_NOT_FOUND, RpcError


class ChainError(RpcError):
    """A JSON-RPC error a node would answer: code -32000 unless said otherwise."""

    code = -32000


class InvalidParams(ChainError):
    """Malformed parameters (-32602)."""

    code = INVALID_PARAMS


class MethodNotFound(ChainError):
    """A method the chain does not have (-32601)."""

    code = METHOD_NOT_FOUND


class ExecutionReverted(ChainError):
    """``eth_call``/``eth_estimateGas`` reverted: code 3 with the revert data, as geth answers."""

    code = 3
