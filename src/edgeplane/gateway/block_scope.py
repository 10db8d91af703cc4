"""Which block a read is about, and whether a node's answer to it is empty: what the pool needs to keep an answer
about a block from coming from a node that does not have that block yet.

A node behind the others answers ``eth_getBlockByNumber`` of a block it has not seen with ``null``, a receipt of a
transaction in such a block with ``null``, and ``eth_getLogs`` over such blocks with ``[]``: answers that look like
the chain's own and are wrong. The pool reads a request's scope (``block_scope``) before it sends it, and an empty
answer (``is_empty_answer``) from a node whose head is below that block is asked again of a node that has it.

The scope is a block number, ``AT_HEAD`` (the request names ``latest`` or ``pending``, by tag or by omission, or
names a block or transaction by hash, which only a node at the head is sure to know), or None (not about a block the
node may lack: ``earliest``, ``safe``, ``finalized``, or a method about no block).
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

AT_HEAD: Final = "head"
BlockScope = int | Literal["head"] | None

# Methods whose block parameter is at this position; an omitted one means "latest", as on every node.
_BLOCK_PARAM: Final[dict[str, int]] = {
    "eth_getBalance": 1,
    "eth_getCode": 1,
    "eth_getTransactionCount": 1,
    "eth_call": 1,
    "eth_estimateGas": 1,
    "eth_getStorageAt": 2,
    "eth_getProof": 2,
    "eth_feeHistory": 1,
    "eth_getBlockByNumber": 0,
    "eth_getBlockTransactionCountByNumber": 0,
    "eth_getUncleCountByBlockNumber": 0,
    "eth_getTransactionByBlockNumberAndIndex": 0,
    "eth_getUncleByBlockNumberAndIndex": 0,
}
# Methods about a block or transaction named by hash.
_BY_HASH: Final = frozenset(
    {
        "eth_getBlockByHash",
        "eth_getBlockTransactionCountByHash",
        "eth_getUncleCountByBlockHash",
        "eth_getTransactionByBlockHashAndIndex",
        "eth_getUncleByBlockHashAndIndex",
        "eth_getTransactionByHash",
        "eth_getTransactionReceipt",
    }
)
# An empty answer is short; a longer one is never read for emptiness.
_SHORT_ANSWER: Final = 512
_EMPTY_RESULT: Final = re.compile(rb'"result"\s*:\s*null\s*[,}]')
_EMPTY_LIST: Final = re.compile(rb'"result"\s*:\s*\[\s*\]\s*[,}]')


def block_scope(method: str, params: list[Any]) -> BlockScope:
    """The block ``method`` with ``params`` asks about (see the module docstring). Never raises: a parameter it
    cannot read makes no scope, and the node answers what it makes of it."""
    if method in _BY_HASH:
        return AT_HEAD
    if method == "eth_getLogs":
        query = params[0] if params else None
        if not isinstance(query, dict):
            return None
        if "blockHash" in query:
            return AT_HEAD
        return _scope_of(query.get("toBlock", "latest"))
    position = _BLOCK_PARAM.get(method)
    if position is None:
        return None
    return _scope_of(params[position] if len(params) > position else "latest")


def _scope_of(ref: Any) -> BlockScope:
    if isinstance(ref, dict):  # EIP-1898: {"blockNumber": ...} or {"blockHash": ...}
        if "blockHash" in ref:
            return AT_HEAD
        ref = ref.get("blockNumber")
    if ref in ("latest", "pending"):
        return AT_HEAD
    if isinstance(ref, str) and ref.startswith("0x"):
        try:
            return int(ref, 16)
        except ValueError:
            return None
    if isinstance(ref, int) and not isinstance(ref, bool):
        return ref
    return None


def is_empty_answer(method: str, answer: bytes) -> bool:
    """Whether a node's raw answer is a ``null`` result (or, for ``eth_getLogs``, an empty list): what a node that
    lacks the block would say."""
    if len(answer) > _SHORT_ANSWER or b'"error"' in answer:
        return False
    if _EMPTY_RESULT.search(answer):
        return True
    return method == "eth_getLogs" and _EMPTY_LIST.search(answer) is not None
