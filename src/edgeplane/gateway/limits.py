"""The per-method limits of seed 000, checked before any upstream call.

Block tags and omitted bounds are resolved against the network's head first; a range counts both ends. A request
over a limit gets an invalid-params error whose message and ``data`` name the limit and the value. An ``eth_getLogs``
filter with a member the gateway does not read is refused, so that the node reads the filter the gateway checked.
"""

from __future__ import annotations

from typing import Any, Protocol

from edgeplane.gateway.policy import GatewayLimits
from edgeplane.jsonrpc.errors import InvalidParams
from edgeplane.jsonrpc.quantities import BlockRef, check_members, parse_block_ref, parse_quantity

# The members of an eth_getLogs filter object (as geth's FilterCriteria reads them).
GET_LOGS_FILTER_MEMBERS = frozenset({"fromBlock", "toBlock", "address", "topics", "blockHash"})


class BlockResolver(Protocol):
    """Turns a block parameter into the number it names now."""

    async def resolve(self, ref: BlockRef) -> int: ...


class LimitExceeded(InvalidParams):
    """A request is well formed but larger than the gateway allows."""

    def __init__(self, what: str, *, limit: int, value: int) -> None:
        super().__init__(f"{what} of {value} exceeds the limit of {limit}", data={"limit": limit, "value": value})


async def measure_block_range(
    from_ref: BlockRef, to_ref: BlockRef, resolver: BlockResolver, *, method: str
) -> tuple[int, int]:
    """Resolves both ends of a range. Raises ``InvalidParams`` when the range is reversed."""
    if from_ref == to_ref and isinstance(from_ref, int):
        return from_ref, from_ref
    first = await resolver.resolve(from_ref)
    last = first if from_ref == to_ref else await resolver.resolve(to_ref)
    _check_order(first, last, method)
    return first, last


def _check_order(first: int, last: int, method: str) -> None:
    if first > last:
        raise InvalidParams(f"invalid block range params: {method} fromBlock {first} is after toBlock {last}")


async def check_get_logs(params: list[Any], resolver: BlockResolver, limits: GatewayLimits) -> None:
    """``eth_getLogs``: a block range of at most ``eth_get_logs_max_block_range`` blocks. A ``blockHash`` query
    names one block and is not a range."""
    if check_get_logs_at_once(params, limits):
        return
    from_ref, to_ref = get_logs_range(params[0])
    first, last = await measure_block_range(from_ref, to_ref, resolver, method="eth_getLogs")
    _check_get_logs_size(last - first + 1, limits)


def check_get_logs_at_once(params: list[Any], limits: GatewayLimits) -> bool:
    """``check_get_logs`` without the head: True when the query is checked (a ``blockHash``, one block, or two block
    numbers), False when a block tag (or an omitted bound) must be resolved first. Raises what ``check_get_logs``
    raises."""
    if not params or not isinstance(params[0], dict):
        raise InvalidParams("invalid eth_getLogs params: expected [filter object]")
    query = params[0]
    check_members(query, GET_LOGS_FILTER_MEMBERS, name="eth_getLogs params")
    if query.get("blockHash") is not None:
        if query.get("fromBlock") is not None or query.get("toBlock") is not None:
            raise InvalidParams("invalid eth_getLogs params: blockHash cannot be combined with fromBlock or toBlock")
        return True
    from_ref, to_ref = get_logs_range(query)
    if from_ref == to_ref:
        return True
    if not (isinstance(from_ref, int) and isinstance(to_ref, int)):
        return False
    _check_order(from_ref, to_ref, "eth_getLogs")
    _check_get_logs_size(to_ref - from_ref + 1, limits)
    return True


def get_logs_range(query: dict[str, Any]) -> tuple[BlockRef, BlockRef]:
    """The ``fromBlock`` and ``toBlock`` of an ``eth_getLogs`` filter, an omitted one read as ``latest``. Raises
    ``InvalidParams`` for a bound that is not a block parameter."""
    return _block_member(query, "fromBlock"), _block_member(query, "toBlock")


def _check_get_logs_size(size: int, limits: GatewayLimits) -> None:
    if size > limits.eth_get_logs_max_block_range:
        raise LimitExceeded("eth_getLogs block range", limit=limits.eth_get_logs_max_block_range, value=size)


def check_fee_history(params: list[Any], limits: GatewayLimits) -> None:
    """``eth_feeHistory``: a block count (hex string or number) of at most ``eth_fee_history_max_block_count``."""
    if not params:
        raise InvalidParams("invalid eth_feeHistory params: expected [blockCount, newestBlock, rewardPercentiles]")
    count = parse_quantity(params[0], name="eth_feeHistory blockCount", allow_decimal_string=True)
    if count > limits.eth_fee_history_max_block_count:
        raise LimitExceeded("eth_feeHistory block count", limit=limits.eth_fee_history_max_block_count, value=count)


def _block_member(query: dict[str, Any], member: str) -> BlockRef:
    value = query.get(member)
    if value is None:
        return "latest"
    return parse_block_ref(value, name=f"eth_getLogs {member}")
