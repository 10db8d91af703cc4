"""JSON-RPC 2.0 lets a request omit ``params``: such a request is answered as the node answers it (the node receives
``"params":[]``), and the method allowlist refuses it as it refuses one with params."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import orjson
import pytest

from edgeplane.config import GatewaySettings, UpstreamSettings
from edgeplane.gateway.policy import load_method_policy
from edgeplane.gateway.service import Gateway
from edgeplane.gateway.upstream import UpstreamNode
from edgeplane.gateway.upstream_pool import UpstreamPool
from tests.support.anvil import AnvilNode

POLICY = load_method_policy()
NO_ARGUMENT_METHODS = ("eth_blockNumber", "eth_chainId", "net_version", "eth_syncing")


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    with AnvilNode() as anvil:
        yield anvil


def make_gateway(url: str) -> Gateway:
    settings = GatewaySettings()
    upstream = UpstreamNode(UpstreamSettings(url=url), timeout_seconds=10)
    return Gateway(POLICY, {"mainnet": UpstreamPool("mainnet", [upstream], settings)}, settings)


def without_params(method: str, request_id: int = 7) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method}


@pytest.mark.parametrize("method", NO_ARGUMENT_METHODS)
async def test_a_no_argument_method_without_params_is_answered_as_the_node_answers(
    node: AnvilNode, method: str
) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        direct = (await client.post(node.url, json=without_params(method))).json()
    gateway = make_gateway(node.url)
    answer = await gateway.handle("mainnet", orjson.dumps(without_params(method)))
    assert answer.status == 200
    assert orjson.loads(answer.body) == direct


async def test_an_unsupported_method_without_params_is_refused_like_one_with_params(node: AnvilNode) -> None:
    gateway = make_gateway(node.url)
    bare = await gateway.handle("mainnet", orjson.dumps(without_params("eth_accounts")))
    with_params = await gateway.handle("mainnet", orjson.dumps({**without_params("eth_accounts"), "params": []}))
    assert bare.status == with_params.status == 403
    assert orjson.loads(bare.body) == orjson.loads(with_params.body)
    assert orjson.loads(bare.body)["error"]["code"] == -32001


async def test_a_batch_mixes_requests_with_and_without_params(node: AnvilNode) -> None:
    gateway = make_gateway(node.url)
    batch = [
        without_params("eth_chainId", 1),
        {**without_params("eth_chainId", 2), "params": []},
        without_params("eth_coinbase", 3),
    ]
    answer = await gateway.handle("mainnet", orjson.dumps(batch))
    assert answer.status == 200
    items = orjson.loads(answer.body)
    assert [item.get("result") for item in items[:2]] == [hex(node.chain_id)] * 2
    assert items[2]["error"]["code"] == -32001
