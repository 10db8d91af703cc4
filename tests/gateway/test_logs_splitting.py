"""``eth_getLogs`` splitting with a real anvil node behind a range-limited fault proxy: a range the node refuses as too
large (with the coded errors real nodes give) or wider than its ``max_logs_blocks`` is split, fetched a few parts at a
time and merged in order, and the client gets what anvil gives for the whole range; the product's 800-block limit is
checked first (docs/gateway.md, "eth_getLogs splitting")."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest

from edgeplane.config import GatewaySettings, ResponseCacheSettings
from edgeplane.gateway.logs_splitting import merge_logs, refusal
from edgeplane.gateway.service import Gateway, GatewayResponse
from tests.support.anvil import AnvilNode
from tests.support.fault_proxy import FaultProxy
from tests.support.gateway_pool import close_gateway, gateway_over

# Creation code that emits three logs (LOG0, no data) and deploys nothing: each transaction's block holds three logs.
THREE_LOGS = "0x" + "60006000a0" * 3 + "00"
FIRST = 1
LAST = 600  # blocks 1..600 hold logs every 20 blocks
LIMIT = 100


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    with AnvilNode() as anvil:
        sender = anvil.addresses[0]
        for _ in range(30):
            anvil.rpc("eth_sendTransaction", [{"from": sender, "data": THREE_LOGS}])
            anvil.rpc("anvil_mine", [hex(19)])
        anvil.rpc("anvil_mine", [hex(10)])
        yield anvil


@pytest.fixture
async def proxy(node: AnvilNode) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(node.url) as limited:
        yield limited


def make_gateway(*urls: str, cache: bool = False, max_logs_blocks: int | None = None, **settings: Any) -> Gateway:
    gateway_settings = GatewaySettings(cache=ResponseCacheSettings(enabled=cache), **settings)
    return gateway_over(urls, gateway_settings, max_logs_blocks=max_logs_blocks)


def logs_filter(first: int | str = FIRST, last: int | str = LAST) -> dict[str, Any]:
    return {
        "fromBlock": first if isinstance(first, str) else hex(first),
        "toBlock": last if isinstance(last, str) else hex(last),
    }


async def ask(gateway: Gateway, query: dict[str, Any]) -> GatewayResponse:
    body = orjson.dumps({"jsonrpc": "2.0", "id": 7, "method": "eth_getLogs", "params": [query]})
    return await gateway.handle("mainnet", body)


def logs_of(answer: GatewayResponse) -> list[dict[str, Any]]:
    document = orjson.loads(answer.body)
    assert answer.status == 200
    assert "error" not in document, document
    assert document["id"] == 7
    logs: list[dict[str, Any]] = document["result"]
    return logs


def widths_asked(proxy: FaultProxy) -> list[int]:
    """The width of each eth_getLogs range the proxy was asked (numbers only)."""
    return [
        int(params[0]["toBlock"], 16) - int(params[0]["fromBlock"], 16) + 1
        for method, params in proxy.asked
        if method == "eth_getLogs" and params[0]["toBlock"].startswith("0x") and params[0]["fromBlock"].startswith("0x")
    ]


REAL_REFUSALS = [
    pytest.param(-32000, "exceed maximum block range: {limit}", "range", id="bor-bsc"),
    pytest.param(-32602, "block range is too wide", "range", id="too-wide"),
    pytest.param(-32602, "query exceeds max block range {limit}", "range", id="reth"),
    pytest.param(-32602, "eth_getLogs is limited to a 10,000 range", "range", id="limited-to"),
    pytest.param(-32005, "query returned more than 10000 results", "results", id="infura"),
    pytest.param(
        -32602,
        "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range",
        "results",
        id="alchemy",
    ),
]


@pytest.mark.parametrize(("code", "message", "kind"), REAL_REFUSALS)
async def test_a_range_the_node_refuses_is_split_and_merged_in_order(
    node: AnvilNode, proxy: FaultProxy, code: int, message: str, kind: str
) -> None:
    proxy.max_logs_blocks = LIMIT
    proxy.logs_refusal = (code, message)
    expected = node.rpc("eth_getLogs", [logs_filter()])
    assert len(expected) == 90
    gateway = make_gateway(proxy.url)
    try:
        logs = logs_of(await ask(gateway, logs_filter()))
        assert logs == expected
        assert proxy.refused_logs > 0
        # Every range the node answered was within its limit, and together they covered the range once.
        answered = [width for width in widths_asked(proxy) if width <= LIMIT]
        assert sum(answered) == LAST - FIRST + 1
        # After a refusal for the range's width, the node is sent ranges it takes: no refusal the second time.
        proxy.reset_counts()
        assert logs_of(await ask(gateway, logs_filter())) == expected
        if kind == "range":
            assert proxy.refused_logs == 0
            assert max(widths_asked(proxy)) <= LIMIT
    finally:
        close_gateway(gateway)


async def test_a_range_wider_than_the_configured_maximum_is_split_before_it_is_sent(
    node: AnvilNode, proxy: FaultProxy
) -> None:
    expected = node.rpc("eth_getLogs", [logs_filter()])
    gateway = make_gateway(proxy.url, max_logs_blocks=50, logs_split_concurrency=3)
    try:
        assert logs_of(await ask(gateway, logs_filter())) == expected
        widths = widths_asked(proxy)
        assert widths == [50] * 12  # never the whole range
        assert proxy.most_in_flight <= 3  # parts fetched a few at a time
        assert proxy.refused_logs == 0
        # A range within the maximum goes whole.
        proxy.reset_counts()
        assert logs_of(await ask(gateway, logs_filter(1, 50))) == node.rpc("eth_getLogs", [logs_filter(1, 50)])
        assert widths_asked(proxy) == [50]
    finally:
        close_gateway(gateway)


async def test_tags_in_a_split_range_are_resolved_against_the_head(node: AnvilNode, proxy: FaultProxy) -> None:
    proxy.max_logs_blocks = LIMIT
    head = int(node.rpc("eth_blockNumber"), 16)
    query = logs_filter(head - 500, "latest")
    expected = node.rpc("eth_getLogs", [query])
    assert expected
    gateway = make_gateway(proxy.url)
    try:
        assert logs_of(await ask(gateway, query)) == expected
        assert proxy.refused_logs > 0
    finally:
        close_gateway(gateway)


async def test_a_range_refused_for_its_logs_is_bisected_and_not_learnt(node: AnvilNode, proxy: FaultProxy) -> None:
    proxy.max_logs_results = 10
    proxy.logs_refusal = (-32005, "query returned more than {limit} results")
    expected = node.rpc("eth_getLogs", [logs_filter()])
    gateway = make_gateway(proxy.url)
    try:
        assert logs_of(await ask(gateway, logs_filter())) == expected
        assert proxy.refused_logs > 0
        assert gateway.pools["mainnet"].nodes[0].max_logs_blocks is None  # the width says nothing of the logs
    finally:
        close_gateway(gateway)


async def test_a_refusal_of_one_block_is_the_nodes_answer(node: AnvilNode, proxy: FaultProxy) -> None:
    proxy.max_logs_results = 2  # every block with logs holds three
    proxy.logs_refusal = (-32005, "query returned more than {limit} results")
    gateway = make_gateway(proxy.url)
    try:
        answer = await ask(gateway, logs_filter(1, 40))
        document = orjson.loads(answer.body)
        assert answer.status == 200
        assert document["id"] == 7
        assert document["error"] == {"code": -32005, "message": "query returned more than 2 results"}
    finally:
        close_gateway(gateway)


async def test_another_error_is_passed_on_without_splitting(proxy: FaultProxy) -> None:
    proxy.max_logs_blocks = LIMIT
    proxy.logs_refusal = (-32000, "filter not found")
    gateway = make_gateway(proxy.url)
    try:
        document = orjson.loads((await ask(gateway, logs_filter())).body)
        assert document["error"] == {"code": -32000, "message": "filter not found"}
        assert proxy.count("eth_getLogs") == 1
    finally:
        close_gateway(gateway)


async def test_the_products_limit_applies_to_clients_first(proxy: FaultProxy) -> None:
    gateway = make_gateway(proxy.url, max_logs_blocks=50)
    try:
        document = orjson.loads((await ask(gateway, logs_filter(1, 801))).body)
        assert document["error"]["code"] == -32602
        assert document["error"]["data"] == {"limit": 800, "value": 801}
        assert proxy.count("eth_getLogs") == 0
    finally:
        close_gateway(gateway)


@pytest.mark.parametrize("cache", [False, True])
async def test_split_answers_through_the_cache_and_in_batches(node: AnvilNode, proxy: FaultProxy, cache: bool) -> None:
    proxy.max_logs_blocks = LIMIT
    expected = node.rpc("eth_getLogs", [logs_filter()])
    gateway = make_gateway(proxy.url, cache=cache)
    try:
        for _ in range(2):
            assert logs_of(await ask(gateway, logs_filter())) == expected
        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []},
            {"jsonrpc": "2.0", "id": 2, "method": "eth_getLogs", "params": [logs_filter(1, 300)]},
        ]
        gateway.pools["mainnet"].nodes[0].health.logs_blocks_learned = None  # the node refuses again in the batch
        answers = orjson.loads((await gateway.handle("mainnet", orjson.dumps(batch))).body)
        assert answers[0]["result"] == hex(node.chain_id)
        assert answers[1] == {"jsonrpc": "2.0", "id": 2, "result": node.rpc("eth_getLogs", [logs_filter(1, 300)])}
    finally:
        close_gateway(gateway)


async def test_with_one_node_range_limited_of_two_every_read_gets_the_whole_range(
    node: AnvilNode, proxy: FaultProxy
) -> None:
    """Two nodes, one range-limited: whichever the read reaches, the client gets the whole range."""
    proxy.max_logs_blocks = LIMIT
    expected = node.rpc("eth_getLogs", [logs_filter()])
    async with FaultProxy(node.url) as whole:
        gateway = make_gateway(proxy.url, whole.url)
        try:
            for _ in range(4):
                assert logs_of(await ask(gateway, logs_filter())) == expected
        finally:
            close_gateway(gateway)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"code": -32000, "message": "exceed maximum block range: 5000"}, "range"),
        ({"code": -32602, "message": "block range is too wide"}, "range"),
        ({"code": -32600, "message": "Block range too large"}, "range"),
        ({"code": -32005, "message": "Requested range exceeds maximum range limit"}, "range"),
        ({"code": -32005, "message": "query returned more than 10000 results"}, "results"),
        ({"code": -32602, "message": "query exceeds max results 20000, retry with the range 1-5"}, "results"),
        ({"code": -32005, "message": "limit exceeded"}, None),  # a rate limit, not a range
        ({"code": -32000, "message": "header not found"}, None),
        ({"code": 3, "message": "block range is too wide"}, None),  # not a code nodes give it
        ({"message": "query returned more than 10000 results"}, None),
    ],
)
def test_refusals_are_recognised_by_code_and_message(error: dict[str, Any], kind: str | None) -> None:
    assert refusal(error) == kind


def test_merged_logs_are_ordered_by_block_and_index_without_duplicates() -> None:
    def entry(block: int, index: int) -> dict[str, str]:
        return {"blockNumber": hex(block), "blockHash": f"0x{block:064x}", "logIndex": hex(index)}

    parts = [[entry(5, 1), entry(5, 0)], [entry(9, 0), entry(5, 1)], [], [entry(7, 2), entry(7, 10)]]
    assert merge_logs(parts) == [entry(5, 0), entry(5, 1), entry(7, 2), entry(7, 10), entry(9, 0)]
