"""The gateway's ``RequestFields.jsonrpc_reader``: the rules' facts with each call priced in the cost table and
block tags measured against the network's head, asked only when a price depends on it."""

from __future__ import annotations

from typing import Any

import orjson

from edgeplane.body_document import BodyDocument
from edgeplane.config import GatewaySettings, MethodCostSettings, UpstreamSettings
from edgeplane.gateway.method_costs import MethodCosts
from edgeplane.gateway.request_facts import JsonRpcReader, known_heads
from edgeplane.gateway.upstream import UpstreamNode
from edgeplane.gateway.upstream_pool import UpstreamPool
from edgeplane.rules import RequestFields, compile_expression

TOKEN = "0x6b175474e89094c44da98b954eedeac495271d0f"


class Heads:
    """A known_head that records the networks it was asked for."""

    def __init__(self, heads: dict[str, int]) -> None:
        self.heads = heads
        self.asked: list[str] = []

    def __call__(self, network: str) -> int | None:
        self.asked.append(network)
        return self.heads.get(network)


def request(document: Any, reader: JsonRpcReader, path: str = "/v1/mainnet") -> RequestFields:
    raw = orjson.dumps(document)
    fields = RequestFields.from_http(
        method="POST",
        scheme="http",
        host="localhost",
        raw_path=path,
        query="",
        headers=[(b"content-type", b"application/json")],
        body=raw,
        body_document=BodyDocument(raw),
        client_ip="198.51.100.7",
    )
    fields.jsonrpc_reader = reader
    return fields


def call(method: str, *params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}


def test_a_single_call_is_priced() -> None:
    heads = Heads({"mainnet": 100})
    fields = request(call("eth_call", {"to": TOKEN}, "latest"), JsonRpcReader(MethodCosts.from_settings(), heads))
    assert fields.edgeplane_jsonrpc_cost == 20
    assert fields.edgeplane_jsonrpc_methods == ["eth_call"]
    assert fields.edgeplane_jsonrpc_addresses == [TOKEN]
    assert heads.asked == []  # no price depended on the head


def test_a_batch_costs_the_sum_and_asks_the_head_once() -> None:
    heads = Heads({"mainnet": 1000})
    batch = [
        call("eth_blockNumber"),
        call("eth_getLogs", {"fromBlock": "0x384", "address": TOKEN}),  # 900..1000: 101 blocks
        call("eth_getLogs", {"fromBlock": "latest"}),
        call("debug_traceTransaction", "0x" + "00" * 32),
        {"jsonrpc": "2.0", "id": 5, "method": 7, "params": []},  # no method: answered by the gateway alone, free
    ]
    fields = request(batch, JsonRpcReader(MethodCosts.from_settings(), heads))
    assert fields.edgeplane_jsonrpc_cost == 1 + (20 + 101) + 21 + 1000
    assert fields.edgeplane_jsonrpc_batch_size == 5
    assert heads.asked == ["mainnet"]


def test_the_head_of_the_request_network() -> None:
    heads = Heads({"mainnet": 10_000, "sepolia": 50})
    reader = JsonRpcReader(MethodCosts.from_settings(), heads)
    logs = call("eth_getLogs", {"fromBlock": "0x0"})
    assert request(logs, reader, path="/v1/sepolia").edgeplane_jsonrpc_cost == 20 + 51
    assert request(logs, reader, path="/v1/mainnet").edgeplane_jsonrpc_cost == 2000
    assert request(call("eth_getLogs", {"fromBlock": "0x1"}), reader, path="/v1/holesky").edgeplane_jsonrpc_cost == 2000
    assert heads.asked == ["sepolia", "mainnet", "holesky"]


def test_a_compute_unit_rule_over_the_gateway_reader() -> None:
    costs = MethodCosts.from_settings(MethodCostSettings.model_validate({"methods": {"eth_call": 400}}))
    reader = JsonRpcReader(costs, Heads({}))
    expensive = compile_expression("edgeplane.jsonrpc.cost gt 1000")
    assert not expensive(request([call("eth_call", {"to": TOKEN})] * 2, reader))
    assert expensive(request([call("eth_call", {"to": TOKEN})] * 3, reader))
    assert not expensive(request(b"not json".decode(), reader))


def test_not_json_costs_nothing() -> None:
    heads = Heads({"mainnet": 1})
    reader = JsonRpcReader(MethodCosts.from_settings(), heads)
    raw = b"{not json"
    fields = RequestFields.from_http(
        method="POST",
        scheme="http",
        host="localhost",
        raw_path="/v1/mainnet",
        query="",
        headers=[],
        body=raw,
        body_document=BodyDocument(raw),
        client_ip="198.51.100.7",
    )
    fields.jsonrpc_reader = reader
    assert fields.edgeplane_jsonrpc_cost == 0
    assert fields.edgeplane_jsonrpc_batch_size == 0
    assert fields.edgeplane_jsonrpc_network == "mainnet"
    assert heads.asked == []


def test_known_heads_of_the_gateway_pools() -> None:
    nodes = [UpstreamNode(UpstreamSettings(url=f"http://127.0.0.1:{port}/"), timeout_seconds=1) for port in (1, 2)]
    pools = {"mainnet": UpstreamPool("mainnet", nodes, GatewaySettings())}
    known_head = known_heads(pools)
    assert known_head("mainnet") is None  # no node reported a head yet
    nodes[0].record_head(120)
    nodes[1].record_head(125)
    assert known_head("mainnet") == 125
    assert known_head("sepolia") is None
    reader = JsonRpcReader(MethodCosts.from_settings(), known_head)
    assert request(call("eth_getLogs", {"fromBlock": "0x64"}), reader).edgeplane_jsonrpc_cost == 20 + 26
    for node in nodes:
        node.close()
