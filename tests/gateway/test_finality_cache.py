"""The response cache and finality, with real anvil nodes (behind fault proxies): answers about finalized blocks are
kept across heads in a byte-bounded store, the least recently used out first; unfinalized answers per head; realtime
answers briefly; a node behind the head never fills the store; a chain that goes back past its finalized block
drops it (docs/gateway.md, "The response cache")."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest

from edgeplane.config import GatewaySettings, ResponseCacheSettings
from edgeplane.gateway.service import Gateway, GatewayResponse
from tests.support.anvil import AnvilNode
from tests.support.fault_proxy import FaultProxy
from tests.support.gateway_pool import close_gateway, gateway_over

A_LONG_TIME = 60.0
THREE_LOGS = "0x" + "60006000a0" * 3 + "00"  # creation code that emits three logs
HEAD = 200
LOGS_AT = 120  # the block of the transaction with logs


@pytest.fixture
def node() -> Iterator[AnvilNode]:
    with AnvilNode() as anvil:
        anvil.rpc("anvil_mine", [hex(LOGS_AT - 1)])
        anvil.rpc("eth_sendTransaction", [{"from": anvil.addresses[0], "data": THREE_LOGS}])
        anvil.rpc("anvil_mine", [hex(HEAD - LOGS_AT)])
        yield anvil


@pytest.fixture
async def proxy(node: AnvilNode) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(node.url) as counting:
        yield counting


def finalized(node: AnvilNode) -> int:
    return int(node.rpc("eth_getBlockByNumber", ["finalized", False])["number"], 16)


def make_gateway(*urls: str, max_head_age: float = 0.0, **cache: Any) -> Gateway:
    settings = GatewaySettings(cache=ResponseCacheSettings(max_head_age_seconds=max_head_age, **cache))
    return gateway_over(urls, settings)


async def ask(gateway: Gateway, method: str, params: list[Any]) -> GatewayResponse:
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    return await gateway.handle("mainnet", body)


def result(response: GatewayResponse) -> Any:
    document = orjson.loads(response.body)
    assert "error" not in document, document
    return document["result"]


async def statuses(gateway: Gateway, method: str, params: list[Any], node: AnvilNode) -> list[str]:
    """The cache status of the same read asked twice, each answer checked against the node's own."""
    found = []
    for _ in range(2):
        answer = await ask(gateway, method, params)
        assert result(answer) == node.rpc(method, params)
        found.append(answer.cache_status)
    return found


async def test_a_finalized_block_is_kept_across_heads_and_the_head_block_is_not(
    node: AnvilNode, proxy: FaultProxy
) -> None:
    final = finalized(node)
    assert 0 < final < HEAD  # anvil finalizes two epochs of 32 slots behind its head
    gateway = make_gateway(proxy.url)
    try:
        old, recent = [hex(final - 5), False], [hex(HEAD), False]
        assert await statuses(gateway, "eth_getBlockByNumber", old, node) == ["miss", "hit"]
        assert await statuses(gateway, "eth_getBlockByNumber", recent, node) == ["miss", "hit"]
        node.rpc("anvil_mine", ["0x1"])  # a new head: the head block's answer was its generation's
        assert await statuses(gateway, "eth_getBlockByNumber", old, node) == ["hit", "hit"]
        assert await statuses(gateway, "eth_getBlockByNumber", recent, node) == ["miss", "hit"]
        assert proxy.count("eth_getBlockByNumber", old) == 1
        assert proxy.count("eth_getBlockByNumber", recent) == 2
    finally:
        close_gateway(gateway)


async def test_receipts_and_logs_of_finalized_blocks_are_kept_across_heads(node: AnvilNode, proxy: FaultProxy) -> None:
    final = finalized(node)
    (transaction,) = node.rpc("eth_getBlockByNumber", [hex(LOGS_AT), False])["transactions"]
    gateway = make_gateway(proxy.url)
    try:
        receipt = [transaction]
        finalized_logs = [{"fromBlock": hex(LOGS_AT - 10), "toBlock": hex(final)}]
        open_logs = [{"fromBlock": hex(LOGS_AT - 10), "toBlock": "latest"}]  # names the head: per head
        to_the_head = [{"fromBlock": hex(LOGS_AT - 10), "toBlock": hex(HEAD)}]  # ends above the finalized block
        for params in (finalized_logs, open_logs, to_the_head):
            assert len(node.rpc("eth_getLogs", params)) == 3
        for method, params in [("eth_getTransactionReceipt", receipt)] + [
            ("eth_getLogs", logs) for logs in (finalized_logs, open_logs, to_the_head)
        ]:
            assert await statuses(gateway, method, params, node) == ["miss", "hit"]
        node.rpc("anvil_mine", ["0x1"])
        assert (await ask(gateway, "eth_getTransactionReceipt", receipt)).cache_status == "hit"
        assert (await ask(gateway, "eth_getLogs", finalized_logs)).cache_status == "hit"
        assert (await ask(gateway, "eth_getLogs", open_logs)).cache_status == "miss"
        assert (await ask(gateway, "eth_getLogs", to_the_head)).cache_status == "miss"
    finally:
        close_gateway(gateway)


async def test_a_receipt_of_an_unfinalized_block_is_kept_per_head(node: AnvilNode, proxy: FaultProxy) -> None:
    transaction = node.rpc("eth_sendTransaction", [{"from": node.addresses[0], "to": node.addresses[1]}])
    gateway = make_gateway(proxy.url)
    try:
        assert await statuses(gateway, "eth_getTransactionReceipt", [transaction], node) == ["miss", "hit"]
        node.rpc("anvil_mine", ["0x1"])
        assert await statuses(gateway, "eth_getTransactionReceipt", [transaction], node) == ["miss", "hit"]
    finally:
        close_gateway(gateway)


@pytest.mark.parametrize(("age", "second"), [(A_LONG_TIME, "hit"), (0.0, "miss")])
async def test_realtime_answers_are_kept_briefly(proxy: FaultProxy, age: float, second: str) -> None:
    gateway = make_gateway(proxy.url, max_head_age=A_LONG_TIME, realtime_max_age_seconds=age)
    try:
        found = [(await ask(gateway, "eth_gasPrice", [])).cache_status for _ in range(2)]
        assert found == ["miss", second]
        # Within the same head, a chain read is kept whatever the realtime age.
        balance = ["0x" + "00" * 20, "latest"]
        found = [(await ask(gateway, "eth_getBalance", balance)).cache_status for _ in range(2)]
        assert found == ["miss", "hit"]
    finally:
        close_gateway(gateway)


async def test_the_finalized_store_is_bounded_by_bytes_least_recently_used_out_first(
    node: AnvilNode, proxy: FaultProxy
) -> None:
    one = len(orjson.dumps(node.rpc("eth_getBlockByNumber", ["0x1", False])))
    gateway = make_gateway(proxy.url, finalized_max_bytes=int(one * 2.5))

    async def status(number: int) -> str:
        return (await ask(gateway, "eth_getBlockByNumber", [hex(number), False])).cache_status

    try:
        assert [await status(1), await status(2), await status(1)] == ["miss", "miss", "hit"]
        assert await status(3) == "miss"  # room for two: block 2, the least recently used, goes
        node.rpc("anvil_mine", ["0x1"])
        assert [await status(1), await status(3), await status(2)] == ["hit", "hit", "miss"]
    finally:
        close_gateway(gateway)


async def test_a_node_behind_the_head_never_fills_the_finalized_store(node: AnvilNode) -> None:
    final = finalized(node)
    query = [{"fromBlock": hex(LOGS_AT - 5), "toBlock": hex(final)}]
    expected = node.rpc("eth_getLogs", query)
    assert len(expected) == 3
    async with FaultProxy(node.url) as honest, FaultProxy(node.url) as lagging:
        lagging.lag_blocks = HEAD - LOGS_AT + 10  # its head is below the logs' block
        gateway = make_gateway(honest.url, lagging.url, max_head_age=A_LONG_TIME)
        pool = gateway.pools["mainnet"]
        try:
            await pool.check_health()
            honest.failing_methods = {"eth_getLogs"}
            # The honest node fails the read; the lagging one answers [] for blocks it has not seen. Nothing better is
            # known, so the client gets it, but it is not kept.
            answer = await ask(gateway, "eth_getLogs", query)
            assert (answer.cache_status, result(answer)) == ("miss", [])
            assert lagging.count("eth_getLogs") >= 1
            honest.failing_methods = set()
            await pool.check_health()
            answer = await ask(gateway, "eth_getLogs", query)
            assert (answer.cache_status, result(answer)) == ("miss", expected)
            answer = await ask(gateway, "eth_getLogs", query)
            assert (answer.cache_status, result(answer)) == ("hit", expected)
        finally:
            close_gateway(gateway)


async def test_a_chain_that_goes_back_past_its_finalized_block_drops_what_was_kept(
    node: AnvilNode, proxy: FaultProxy
) -> None:
    snapshot = node.rpc("evm_snapshot")
    node.rpc("anvil_mine", [hex(100)])
    final = finalized(node)
    assert final > HEAD
    block = [hex(final - 1), False]
    gateway = make_gateway(proxy.url)
    try:
        assert await statuses(gateway, "eth_getBlockByNumber", block, node) == ["miss", "hit"]
        node.rpc("evm_revert", [snapshot])
        stamp = int(node.rpc("eth_getBlockByNumber", ["latest", False])["timestamp"], 16)
        node.rpc("evm_setNextBlockTimestamp", [hex(stamp + 1000)])
        node.rpc("anvil_mine", [hex(100)])
        # Another block at that height now: the node's, not the one kept.
        assert await statuses(gateway, "eth_getBlockByNumber", block, node) == ["miss", "hit"]
    finally:
        close_gateway(gateway)
