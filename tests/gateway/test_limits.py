"""The four limits of seed 000, at their edges, with tags resolved against the head."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgeplane.gateway.limits import LimitExceeded, check_fee_history, check_get_logs, check_get_logs_at_once
from edgeplane.gateway.policy import load_method_policy
from edgeplane.gateway.trace_filter import resolve_trace_filter
from edgeplane.jsonrpc.errors import InvalidParams
from edgeplane.jsonrpc.quantities import BlockRef
from edgeplane.jsonrpc.trace_filter_params import parse_trace_filter_params

LIMITS = load_method_policy().limits
HEAD = 10_000


class FixedChain:
    """A resolver whose head is HEAD, safe HEAD-32 and finalized HEAD-64."""

    def __init__(self) -> None:
        self.calls = 0

    async def resolve(self, ref: BlockRef) -> int:
        self.calls += 1
        if isinstance(ref, int):
            return ref
        return {"earliest": 0, "latest": HEAD, "pending": HEAD, "safe": HEAD - 32, "finalized": HEAD - 64}[ref]


@pytest.mark.parametrize(
    ("query", "allowed"),
    [
        ({"fromBlock": "0x1", "toBlock": hex(800)}, True),
        ({"fromBlock": "0x1", "toBlock": hex(801)}, False),
        ({"fromBlock": hex(HEAD - 799), "toBlock": "latest"}, True),
        ({"fromBlock": hex(HEAD - 800), "toBlock": "latest"}, False),
        ({"fromBlock": hex(HEAD - 799)}, True),
        ({"fromBlock": hex(HEAD - 800)}, False),
        ({"fromBlock": "earliest"}, False),
        ({"fromBlock": "finalized", "toBlock": "latest"}, True),
        ({}, True),
        ({"fromBlock": "latest", "toBlock": "latest"}, True),
        ({"blockHash": "0x" + "ab" * 32}, True),
        ({"fromBlock": 1, "toBlock": 800}, True),
    ],
)
async def test_get_logs_block_range(query: dict[str, object], allowed: bool) -> None:
    if allowed:
        await check_get_logs([query], FixedChain(), LIMITS)
    else:
        with pytest.raises(LimitExceeded) as caught:
            await check_get_logs([query], FixedChain(), LIMITS)
        assert caught.value.data["limit"] == 800
        assert caught.value.data["value"] > 800
        assert "eth_getLogs block range of" in caught.value.message
        assert caught.value.code == -32602


async def test_get_logs_reversed_range_is_invalid_params() -> None:
    with pytest.raises(InvalidParams, match="invalid block range params"):
        await check_get_logs([{"fromBlock": "0x10", "toBlock": "0x5"}], FixedChain(), LIMITS)


async def test_get_logs_block_hash_with_range_is_invalid() -> None:
    with pytest.raises(InvalidParams, match="blockHash cannot be combined"):
        await check_get_logs([{"blockHash": "0x" + "00" * 32, "fromBlock": "0x1"}], FixedChain(), LIMITS)


async def test_same_tag_needs_no_head() -> None:
    chain = FixedChain()
    await check_get_logs([{}], chain, LIMITS)
    assert chain.calls == 0


@pytest.mark.parametrize("params", [[], ["x"], [None], [[1]]])
async def test_get_logs_needs_a_filter_object(params: list[object]) -> None:
    with pytest.raises(InvalidParams):
        await check_get_logs(params, FixedChain(), LIMITS)


@pytest.mark.parametrize(
    ("count", "allowed"),
    [(10, True), ("0xa", True), (11, False), ("0xb", False), (1, True), ("10", True), ("0x0", True)],
)
def test_fee_history_block_count(count: object, allowed: bool) -> None:
    params = [count, "latest", [25, 75]]
    if allowed:
        check_fee_history(params, LIMITS)
    else:
        with pytest.raises(LimitExceeded) as caught:
            check_fee_history(params, LIMITS)
        assert caught.value.data == {"limit": 10, "value": 11}
        assert "eth_feeHistory block count of 11 exceeds the limit of 10" in caught.value.message


@pytest.mark.parametrize("count", [-1, "eleven", None, 1.5])
def test_fee_history_bad_count(count: object) -> None:
    with pytest.raises(InvalidParams, match="blockCount"):
        check_fee_history([count, "latest", []], LIMITS)


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ({"fromBlock": "0x1", "toBlock": hex(800), "count": 200}, None),
        ({"fromBlock": "0x1", "toBlock": hex(801)}, "trace_filter block range of 801 exceeds the limit of 800"),
        ({"fromBlock": "0x1", "toBlock": "0x1", "count": 201}, "trace_filter count of 201 exceeds the limit of 200"),
        ({"fromBlock": "0x1", "toBlock": "0x1", "count": "0xc9"}, "count of 201"),
        ({"fromBlock": "0x1", "toBlock": "0x1", "count": "0xc8"}, None),
        ({"fromBlock": hex(HEAD - 799), "toBlock": "latest"}, None),
        ({"fromBlock": hex(HEAD - 800)}, "block range of 801"),
        ({"fromBlock": "latest"}, None),
        ({"toBlock": "0x10"}, None),
        ({}, "block range of 10001"),
    ],
)
async def test_trace_filter_limits(query: dict[str, object], error: str | None) -> None:
    params = parse_trace_filter_params([query])
    if error is None:
        resolved = await resolve_trace_filter(params, FixedChain(), LIMITS)
        assert resolved.to_block - resolved.from_block + 1 <= 800
    else:
        with pytest.raises(LimitExceeded, match=error):
            await resolve_trace_filter(params, FixedChain(), LIMITS)


async def test_trace_filter_omitted_count_is_the_limit() -> None:
    params = parse_trace_filter_params([{"fromBlock": "0x1", "toBlock": "0x10"}])
    query = await resolve_trace_filter(params, FixedChain(), LIMITS)
    assert query.selection.count == 200
    assert (query.from_block, query.to_block) == (1, 16)


BLOCKS = st.one_of(st.none(), st.integers(0, 3000), st.sampled_from(["latest", "earliest", "safe", "finalized"]))


@given(BLOCKS, BLOCKS)
def test_get_logs_checked_at_once_agrees_with_the_resolved_range(start: object, end: object) -> None:
    bounds = (("fromBlock", start), ("toBlock", end))
    query = {
        key: value if isinstance(value, str) else hex(value) for key, value in bounds if isinstance(value, int | str)
    }
    chain = FixedChain()
    first = asyncio.run(chain.resolve(start if isinstance(start, (int, str)) else "latest"))  # type: ignore[arg-type]
    last = asyncio.run(chain.resolve(end if isinstance(end, (int, str)) else "latest"))  # type: ignore[arg-type]
    same = query.get("fromBlock", "latest") == query.get("toBlock", "latest")
    try:
        at_once = check_get_logs_at_once([query], LIMITS)
    except LimitExceeded:
        assert not same
        assert last - first + 1 > 800
        return
    except InvalidParams:
        assert not same
        assert first > last
        return
    if at_once:
        assert same or (isinstance(start, int) and isinstance(end, int) and first <= last <= first + 799)
    else:
        assert not (isinstance(start, int) and isinstance(end, int))
