"""Heads and integrity with real anvil nodes behind fault proxies: the head told to clients never goes backwards, a
read about a block goes to a node that has it, and an empty answer from a node behind the block is asked again of
one that has it (docs/gateway.md, "Heads and integrity")."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest

from edgeplane.config import GatewaySettings, ResponseCacheSettings
from edgeplane.gateway.service import Gateway
from tests.support.anvil import AnvilNode
from tests.support.fault_proxy import FaultProxy
from tests.support.gateway_pool import close_gateway, gateway_over

LAG = 30


@pytest.fixture
def node() -> Iterator[AnvilNode]:
    with AnvilNode() as anvil:
        anvil.rpc("anvil_mine", [hex(40)])
        yield anvil


@pytest.fixture
async def proxies(node: AnvilNode) -> AsyncIterator[tuple[FaultProxy, FaultProxy]]:
    """Two views of one chain: an honest node and one ``LAG`` blocks behind."""
    async with FaultProxy(node.url) as fast, FaultProxy(node.url) as lagging:
        lagging.lag_blocks = LAG
        yield fast, lagging


def make_gateway(*urls: str, cache: bool) -> Gateway:
    settings = GatewaySettings(cache=ResponseCacheSettings(enabled=cache))
    return gateway_over(urls, settings)


async def ask(gateway: Gateway, method: str, params: list[Any]) -> Any:
    answer = await gateway.handle(
        "mainnet", orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    )
    document = orjson.loads(answer.body)
    assert "error" not in document, document
    return document["result"]


@pytest.mark.parametrize("cache", [False, True])
async def test_the_head_told_never_goes_backwards(
    node: AnvilNode, proxies: tuple[FaultProxy, FaultProxy], cache: bool
) -> None:
    fast, lagging = proxies
    gateway = make_gateway(lagging.url, fast.url, cache=cache)
    try:
        told = [int(await ask(gateway, "eth_blockNumber", []), 16) for _ in range(12)]
        assert told == sorted(told), told
        assert told[-1] == 40
        if not cache:  # (with the cache, answers come from the node at the cache's head)
            assert lagging.count("eth_blockNumber") > 0  # the lagging node was asked, and not believed
        # The honest node goes away: the lagging one answers alone, and still does not take the head back.
        fast.dead = True
        after = [int(await ask(gateway, "eth_blockNumber", []), 16) for _ in range(4)]
        assert min(after) >= 40
    finally:
        close_gateway(gateway)


@pytest.mark.parametrize("cache", [False, True])
async def test_a_block_the_lagging_node_lacks_is_never_answered_null(
    node: AnvilNode, proxies: tuple[FaultProxy, FaultProxy], cache: bool
) -> None:
    fast, lagging = proxies
    gateway = make_gateway(lagging.url, fast.url, cache=cache)
    try:
        await gateway.pools["mainnet"].check_health()
        # With the heads known, reads of the head block go to the node that has it.
        for _ in range(6):
            assert (await ask(gateway, "eth_getBlockByNumber", [hex(40), False]))["number"] == hex(40)
        assert lagging.count("eth_getBlockByNumber", [hex(40), False]) == 0
        # New blocks, newer than any head the pool knows (without the cache, whose head reads would tell): the
        # lagging node is asked in turn, answers null, and the read is asked again of the node further ahead.
        node.rpc("anvil_mine", ["0x5"])
        for _ in range(6):
            assert (await ask(gateway, "eth_getBlockByNumber", [hex(45), False]))["number"] == hex(45)
        if not cache:
            assert lagging.count("eth_getBlockByNumber", [hex(45), False]) > 0
    finally:
        close_gateway(gateway)


@pytest.mark.parametrize("cache", [False, True])
async def test_a_receipt_a_slightly_lagging_node_lacks_is_asked_again(
    node: AnvilNode, proxies: tuple[FaultProxy, FaultProxy], cache: bool
) -> None:
    fast, lagging = proxies
    lagging.lag_blocks = 3  # within max_lag_blocks: it takes reads about the head
    fast.delay_seconds = 0.05  # and, the other being slow, it has the better score
    gateway = make_gateway(lagging.url, fast.url, cache=cache)
    try:
        await gateway.pools["mainnet"].check_health()
        sender, recipient = node.addresses[0], node.addresses[1]
        transaction = node.rpc("eth_sendTransaction", [{"from": sender, "to": recipient, "value": "0x1"}])
        for _ in range(6):
            receipt = await ask(gateway, "eth_getTransactionReceipt", [transaction])
            assert receipt is not None
            assert receipt["transactionHash"] == transaction
        assert lagging.count("eth_getTransactionReceipt") > 0
        # A receipt nobody has is null from every node: the answer, passed on, after at most one more node.
        lagging.reset_counts()
        fast.reset_counts()
        assert await ask(gateway, "eth_getTransactionReceipt", ["0x" + "ab" * 32]) is None
        assert lagging.count("eth_getTransactionReceipt") + fast.count("eth_getTransactionReceipt") <= 2
    finally:
        close_gateway(gateway)


async def test_a_single_node_is_told_as_it_says(node: AnvilNode) -> None:
    async with FaultProxy(node.url) as alone:
        gateway = make_gateway(alone.url, cache=False)
        try:
            assert await ask(gateway, "eth_blockNumber", []) == hex(40)
            snapshot = node.rpc("evm_snapshot", [])
            node.rpc("anvil_mine", ["0x2"])
            assert await ask(gateway, "eth_blockNumber", []) == hex(42)
            node.rpc("evm_revert", [snapshot])
            assert await ask(gateway, "eth_blockNumber", []) == hex(40)
            assert await ask(gateway, "eth_getBlockByNumber", [hex(41), False]) is None
            assert alone.count("eth_getBlockByNumber") == 1
        finally:
            close_gateway(gateway)
