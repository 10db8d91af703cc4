"""Whether an answer is about finalized blocks only, and so holds whatever the head does next.

A block at or below the chain's finalized block never changes: the block by number, its transactions and receipts,
its logs, the state after it. The response cache keeps such answers across heads (``edgeplane.gateway.response_cache``);
every other answer belongs to the head it was read at. An answer counts as finalized when the request names its
blocks by number, all of them at or below the finalized block (an ``eth_getLogs`` range both of whose ends are), or,
for a request by hash, when the answer itself says it is about such a block (a receipt's ``blockNumber``, a block's
``number``). A request that names a tag (``latest``, ``safe``, ``finalized``, ...) is never finalized: what the tag
names moves.
"""

from __future__ import annotations

from typing import Any, Final

from edgeplane.gateway.block_scope import block_scope

# Methods by hash whose answer tells the block it is about, and the member that does.
_ANSWER_BLOCK: Final[dict[str, str]] = {
    "eth_getBlockByHash": "number",
    "eth_getUncleByBlockHashAndIndex": "number",
    "eth_getTransactionByHash": "blockNumber",
    "eth_getTransactionByBlockHashAndIndex": "blockNumber",
    "eth_getTransactionReceipt": "blockNumber",
}


def is_finalized_answer(method: str, params: list[Any], result: Any, finalized: int) -> bool:
    """Whether ``result``, a node's answer to ``method`` with ``params``, is about blocks at or below block number
    ``finalized`` only (see the module docstring). Never raises."""
    member = _ANSWER_BLOCK.get(method)
    if member is not None:
        number = result.get(member) if isinstance(result, dict) else None
        return _at_or_below(number, finalized)
    if method == "eth_getLogs":
        query = params[0] if params else None
        if not isinstance(query, dict) or "blockHash" in query:
            return False
        first, last = query.get("fromBlock"), query.get("toBlock")
        return _at_or_below(first, finalized) and _at_or_below(last, finalized)
    scope = block_scope(method, params)
    return isinstance(scope, int) and 0 <= scope <= finalized  # (a tag makes no number: see block_scope)


def _at_or_below(number: Any, finalized: int) -> bool:
    if isinstance(number, str) and number.startswith("0x"):
        try:
            return int(number, 16) <= finalized
        except ValueError:
            return False
    return isinstance(number, int) and not isinstance(number, bool) and 0 <= number <= finalized
