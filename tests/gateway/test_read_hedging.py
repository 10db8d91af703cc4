"""Hedged reads with real anvil nodes behind slow fault proxies: a read still unanswered after the hedge delay goes to
the next node too and the first answer wins; at most ``hedge_max_extra`` extra nodes; writes are never hedged
(docs/gateway.md, "Hedged reads")."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest

from edgeplane.config import GatewaySettings, ResponseCacheSettings, UpstreamSelectionSettings
from edgeplane.gateway.read_hedging import HedgeDelays
from edgeplane.gateway.service import Gateway, GatewayResponse
from tests.support.anvil import AnvilNode
from tests.support.fault_proxy import FaultProxy
from tests.support.gateway_pool import close_gateway, gateway_over

SLOW = 3.0  # far longer than any hedge delay below: an answer from the slow node would show


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    with AnvilNode() as anvil:
        yield anvil


@pytest.fixture
async def trio(node: AnvilNode) -> AsyncIterator[tuple[FaultProxy, FaultProxy, FaultProxy]]:
    async with FaultProxy(node.url) as first, FaultProxy(node.url) as second, FaultProxy(node.url) as third:
        yield first, second, third


def make_gateway(*urls: str, **selection: Any) -> Gateway:
    settings = GatewaySettings(
        cache=ResponseCacheSettings(enabled=False),
        multiplex_reads=False,
        selection=UpstreamSelectionSettings(**{"hedge_max_delay_seconds": 0.1, **selection}),
    )
    return gateway_over(urls, settings)


async def ask(gateway: Gateway, method: str = "eth_chainId", params: list[Any] | None = None) -> GatewayResponse:
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []})
    return await gateway.handle("mainnet", body)


async def test_a_read_on_a_slow_node_is_answered_by_the_hedge(
    node: AnvilNode, trio: tuple[FaultProxy, FaultProxy, FaultProxy]
) -> None:
    slow, fast, _ = trio
    slow.delay_seconds = SLOW
    gateway = make_gateway(slow.url, fast.url)
    try:
        # The first read goes to node0 (no node has a latency yet, so the turn decides): the slow one.
        answer = await asyncio.wait_for(ask(gateway), timeout=SLOW - 1)
        assert orjson.loads(answer.body)["result"] == hex(node.chain_id)
        assert answer.upstream == "node1"
        assert slow.count("eth_chainId") == 1
        assert fast.count("eth_chainId") == 1
    finally:
        close_gateway(gateway)


async def test_at_most_the_configured_extra_attempts(trio: tuple[FaultProxy, FaultProxy, FaultProxy]) -> None:
    for proxy in trio:
        proxy.delay_seconds = 0.5
    gateway = make_gateway(*(proxy.url for proxy in trio), hedge_max_extra=1)
    try:
        answer = await ask(gateway)
        assert answer.status == 200
        assert sum(proxy.count("eth_chainId") for proxy in trio) == 2
    finally:
        close_gateway(gateway)


async def test_no_hedge_when_turned_off(trio: tuple[FaultProxy, FaultProxy, FaultProxy]) -> None:
    slow, fast, _ = trio
    slow.delay_seconds = 0.5
    gateway = make_gateway(slow.url, fast.url, hedge_max_extra=0)
    try:
        answer = await ask(gateway)
        assert answer.upstream == "node0"
        assert fast.count("eth_chainId") == 0
    finally:
        close_gateway(gateway)


async def test_writes_are_never_hedged(trio: tuple[FaultProxy, FaultProxy, FaultProxy]) -> None:
    slow, other, _ = trio
    slow.delay_seconds = other.delay_seconds = 0.5
    gateway = make_gateway(slow.url, other.url)
    try:
        answer = await ask(gateway, "eth_sendRawTransaction", ["0x00"])
        assert answer.status == 200  # the node's own error about the bytes
        assert slow.count("eth_sendRawTransaction") + other.count("eth_sendRawTransaction") == 1
    finally:
        close_gateway(gateway)


def test_the_delay_is_a_quantile_of_recent_latency_clamped() -> None:
    delays = HedgeDelays(
        UpstreamSelectionSettings(hedge_quantile=0.9, hedge_min_delay_seconds=0.05, hedge_max_delay_seconds=1.0)
    )
    assert delays.delay("eth_call") == 1.0  # unknown yet: the maximum
    for index in range(100):
        delays.observe("eth_call", 0.1 + index / 1000)  # 0.100 .. 0.199
    assert delays.delay("eth_call") == pytest.approx(0.19, abs=0.002)
    for _ in range(200):
        delays.observe("eth_chainId", 0.001)
    assert delays.delay("eth_chainId") == 0.05
    for _ in range(200):
        delays.observe("eth_getLogs", 5.0)
    assert delays.delay("eth_getLogs") == 1.0
