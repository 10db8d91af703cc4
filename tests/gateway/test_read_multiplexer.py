"""Identical reads in flight share one upstream exchange: the canonical key (hypothesis), and real anvil nodes behind
counting fault proxies: 50 identical concurrent reads of a new block cost at most 3 exchanges, with or without the
response cache, and followers get the leader's answer or its error with their own ids."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgeplane.config import GatewaySettings, ResponseCacheSettings
from edgeplane.gateway.read_multiplexer import read_key
from edgeplane.gateway.service import Gateway, GatewayResponse
from tests.support.anvil import AnvilNode
from tests.support.fault_proxy import FaultProxy
from tests.support.gateway_pool import close_gateway, gateway_over

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


def shuffled(value: Any, chooser: random.Random) -> Any:
    """``value`` with every object's members in another order (arrays keep theirs: their order is their meaning)."""
    if isinstance(value, dict):
        items = list(value.items())
        chooser.shuffle(items)
        return {name: shuffled(member, chooser) for name, member in items}
    if isinstance(value, list):
        return [shuffled(item, chooser) for item in value]
    return value


@given(st.lists(json_values, max_size=4), st.integers(0, 2**32), st.integers(0, 100) | st.none())
def test_the_key_ignores_the_order_of_members(params: list[Any], seed: int, head: int | None) -> None:
    again = shuffled(params, random.Random(seed))
    assert read_key("eth_call", again, head) == read_key("eth_call", params, head)


@given(st.lists(json_values, max_size=4), st.lists(json_values, max_size=4), st.integers(0, 100))
def test_the_key_tells_different_reads_apart(first: list[Any], second: list[Any], head: int) -> None:
    same = orjson.dumps(first, option=orjson.OPT_SORT_KEYS) == orjson.dumps(second, option=orjson.OPT_SORT_KEYS)
    assert (read_key("eth_call", first, head) == read_key("eth_call", second, head)) == same
    assert read_key("eth_call", first, head) != read_key("eth_getBalance", first, head)
    assert read_key("eth_call", first, head) != read_key("eth_call", first, head + 1)


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    with AnvilNode() as anvil:
        yield anvil


@pytest.fixture
async def pair(node: AnvilNode) -> AsyncIterator[tuple[FaultProxy, FaultProxy]]:
    async with FaultProxy(node.url) as first, FaultProxy(node.url) as second:
        yield first, second


def make_gateway(*urls: str, cache: bool, multiplex: bool = True) -> Gateway:
    settings = GatewaySettings(cache=ResponseCacheSettings(enabled=cache), multiplex_reads=multiplex)
    return gateway_over(urls, settings)


async def herd(gateway: Gateway, method: str, params: list[Any], count: int = 50) -> list[GatewayResponse]:
    bodies = [
        orjson.dumps({"jsonrpc": "2.0", "id": index, "method": method, "params": params}) for index in range(count)
    ]
    return list(await asyncio.gather(*(gateway.handle("mainnet", body) for body in bodies)))


@pytest.mark.parametrize("cache", [False, True])
async def test_fifty_identical_reads_of_a_new_block_cost_at_most_three_exchanges(
    node: AnvilNode, pair: tuple[FaultProxy, FaultProxy], cache: bool
) -> None:
    first, second = pair
    first.delay_seconds = second.delay_seconds = 0.05  # a node's usual time, during which the herd arrives
    gateway = make_gateway(first.url, second.url, cache=cache)
    try:
        await gateway.pools["mainnet"].check_health()
        node.rpc("anvil_mine", ["0x1"])
        block = node.rpc("eth_blockNumber")
        first.reset_counts()
        second.reset_counts()
        answers = await herd(gateway, "eth_getBlockByNumber", [block, True])
        documents = [orjson.loads(answer.body) for answer in answers]
        assert [document["id"] for document in documents] == list(range(50))
        assert {document["result"]["number"] for document in documents} == {block}
        assert first.exchanges + second.exchanges <= 3, (first.asked, second.asked)
    finally:
        close_gateway(gateway)


async def test_without_multiplexing_the_herd_costs_an_exchange_each(
    node: AnvilNode, pair: tuple[FaultProxy, FaultProxy]
) -> None:
    first, _ = pair
    gateway = make_gateway(first.url, cache=False, multiplex=False)
    try:
        first.delay_seconds = 0.05
        await herd(gateway, "eth_getBlockByNumber", ["0x0", False], count=10)
        assert first.exchanges == 10
    finally:
        close_gateway(gateway)


async def test_followers_get_the_leaders_error_with_their_own_ids(pair: tuple[FaultProxy, FaultProxy]) -> None:
    first, _ = pair
    first.delay_seconds = 0.05
    gateway = make_gateway(first.url, cache=False)
    try:
        answers = await herd(gateway, "eth_getBlockByNumber", ["0xnot-a-number", False], count=20)
        documents = [orjson.loads(answer.body) for answer in answers]
        assert [document["id"] for document in documents] == list(range(20))
        assert len({orjson.dumps(document["error"]) for document in documents}) == 1
        assert first.exchanges == 1
        # And a node that is down: every reader gets the one 502 of the leader's attempts.
        first.dead = True
        down = await herd(gateway, "eth_chainId", [], count=20)
        assert {answer.status for answer in down} == {502}
        assert first.exchanges <= 1 + 2 * 3  # the leader's attempts only, each sent at most twice
    finally:
        close_gateway(gateway)


async def test_reads_with_members_in_another_order_share_an_exchange(pair: tuple[FaultProxy, FaultProxy]) -> None:
    first, _ = pair
    first.delay_seconds = 0.05
    gateway = make_gateway(first.url, cache=False)
    address = "0x" + "33" * 20
    try:
        one = {"jsonrpc": "2.0", "id": 1, "method": "eth_call", "params": [{"to": address, "data": "0x"}, "latest"]}
        two = {"jsonrpc": "2.0", "id": 2, "method": "eth_call", "params": [{"data": "0x", "to": address}, "latest"]}
        answers = await asyncio.gather(
            gateway.handle("mainnet", orjson.dumps(one)), gateway.handle("mainnet", orjson.dumps(two))
        )
        assert [orjson.loads(answer.body)["id"] for answer in answers] == [1, 2]
        assert first.count("eth_call") == 1
    finally:
        close_gateway(gateway)


async def test_when_the_leader_goes_away_a_follower_leads(pair: tuple[FaultProxy, FaultProxy]) -> None:
    first, _ = pair
    first.delay_seconds = 0.2
    gateway = make_gateway(first.url, cache=False)
    try:
        body = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "eth_chainId", "params": []})
        leader = asyncio.ensure_future(gateway.handle("mainnet", body))
        await asyncio.sleep(0.05)
        followers = [
            asyncio.ensure_future(gateway.handle("mainnet", body.replace(b'"id":0', b'"id":%d' % index)))
            for index in range(1, 6)
        ]
        await asyncio.sleep(0.05)
        leader.cancel()
        answers = await asyncio.gather(*followers)
        assert [orjson.loads(answer.body)["id"] for answer in answers] == [1, 2, 3, 4, 5]
        assert {orjson.loads(answer.body)["result"] for answer in answers} == {"0x7a69"}
        assert first.count("eth_chainId") == 2  # the leader's, and the new leader's
    finally:
        close_gateway(gateway)
