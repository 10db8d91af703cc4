"""trace_filter through the gateway equals the node's own, natively and synthesised from debug traces."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.anvil import AnvilNode
from tests.support.edgeplane import EdgeplaneProcess
from tests.support.method_refusing_proxy import MethodRefusingProxy

pytestmark = pytest.mark.e2e


def traces(url: str, query: dict[str, Any]) -> list[dict[str, Any]]:
    body = {"jsonrpc": "2.0", "method": "trace_filter", "params": [query], "id": 1}
    answer = httpx.post(url, json=body, timeout=120).json()
    assert "result" in answer, answer
    result: list[dict[str, Any]] = answer["result"]
    return result


def lower(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The node's records with their addresses in lower case, as the gateway returns them."""
    lowered = []
    for record in records:
        copy = {**record, "action": dict(record["action"])}
        for member in ("from", "to", "address", "refundAddress", "author"):
            if isinstance(copy["action"].get(member), str):
                copy["action"][member] = copy["action"][member].lower()
        if isinstance(record.get("result"), dict):
            copy["result"] = dict(record["result"])
            if isinstance(copy["result"].get("address"), str):
                copy["result"]["address"] = copy["result"]["address"].lower()
        lowered.append(copy)
    return lowered


def without_root_gas_used(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    stripped = []
    for record in records:
        copy = {**record}
        if not record["traceAddress"] and isinstance(record.get("result"), dict):
            copy["result"] = {k: v for k, v in record["result"].items() if k != "gasUsed"}
        stripped.append(copy)
    return stripped


@pytest.fixture(scope="module")
def run_block(trace_target: dict[str, Any]) -> int:
    return int(trace_target["run"]["blockNumber"])


def queries(target: dict[str, Any], block: int) -> list[dict[str, Any]]:
    contract = target["contract"].address.lower()
    deploy_block = int(target["deploy"]["blockNumber"])
    sender = target["run"]["from"].lower()
    helper = target["contract"].functions.helper().call().lower()
    return [
        {"fromBlock": hex(block), "toBlock": hex(block)},
        {"fromBlock": hex(deploy_block), "toBlock": hex(block)},
        {"fromBlock": hex(block), "toBlock": hex(block), "toAddress": [contract]},
        {"fromBlock": hex(block), "toBlock": hex(block), "fromAddress": [contract]},
        {"fromBlock": hex(block), "toBlock": hex(block), "fromAddress": [sender], "toAddress": [contract]},
        {
            "fromBlock": hex(block),
            "toBlock": hex(block),
            "fromAddress": [contract],
            "toAddress": [helper],
            "mode": "intersection",
        },
        {"fromBlock": hex(block), "toBlock": hex(block), "after": 2, "count": 3},
        {"fromBlock": hex(deploy_block), "toBlock": hex(block), "after": 1, "count": 4},
    ]


def test_native_trace_filter_equals_the_node(
    edge: EdgeplaneProcess, anvil: AnvilNode, trace_target: dict[str, Any], run_block: int
) -> None:
    for query in queries(trace_target, run_block):
        direct = traces(anvil.url, query)
        assert direct, query
        assert traces(edge.rpc_url(), query) == lower(direct), query


def test_single_to_address_and_hex_paging_are_accepted(
    edge: EdgeplaneProcess, anvil: AnvilNode, trace_target: dict[str, Any], run_block: int
) -> None:
    contract = trace_target["contract"].address
    as_array = {"fromBlock": hex(run_block), "toBlock": hex(run_block), "toAddress": [contract.lower()]}
    single = {"fromBlock": run_block, "toBlock": str(run_block), "toAddress": contract, "after": "0x0", "count": "0x64"}
    assert traces(edge.rpc_url(), single) == traces(anvil.url, as_array)


def test_synthesised_trace_filter_equals_the_node(
    debug_edge: EdgeplaneProcess, anvil: AnvilNode, trace_target: dict[str, Any], run_block: int
) -> None:
    # The root frame's gasUsed is compared separately: the call tracer reports gas after refunds (see
    # edgeplane.jsonrpc.trace_records), so the synthesised root gasUsed may be lower by the refund.
    for query in queries(trace_target, run_block):
        direct = lower(traces(anvil.url, query))
        synthesised = traces(debug_edge.rpc_url(), query)
        assert without_root_gas_used(synthesised) == without_root_gas_used(direct), query
        for ours, theirs in zip(synthesised, direct, strict=True):
            if not ours["traceAddress"] and isinstance(ours.get("result"), dict):
                assert int(ours["result"]["gasUsed"], 16) <= int(theirs["result"]["gasUsed"], 16)


@pytest.fixture(scope="module")
def node_without_block_traces(anvil: AnvilNode) -> Iterator[MethodRefusingProxy]:
    """anvil, less ``debug_traceBlockByNumber`` (answered -32601, as geth-style nodes that lack it do)."""
    with MethodRefusingProxy(anvil.url, refused={"debug_traceBlockByNumber"}) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def fallback_edge(
    node_without_block_traces: MethodRefusingProxy, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EdgeplaneProcess]:
    """An edgeplane synthesising trace_filter from debug traces of a node without ``debug_traceBlockByNumber``."""
    data_dir = tmp_path_factory.mktemp("fallback-edge") / "data"
    config = data_dir.parent / "edgeplane.toml"
    url = node_without_block_traces.url
    config.write_text(f'[networks.mainnet]\nupstreams = [{{ url = "{url}", trace_filter = "debug" }}]\n')
    with EdgeplaneProcess(data_dir, extra_args=("--config", str(config))) as process:
        yield process


def test_without_block_traces_trace_filter_is_synthesised_per_transaction(
    fallback_edge: EdgeplaneProcess,
    node_without_block_traces: MethodRefusingProxy,
    anvil: AnvilNode,
    trace_target: dict[str, Any],
    run_block: int,
) -> None:
    """The node refuses ``debug_traceBlockByNumber``: the gateway falls back to ``debug_traceTransaction`` per
    transaction (docs/gateway.md) and answers as the node's own ``trace_filter`` does."""
    for query in queries(trace_target, run_block):
        direct = lower(traces(anvil.url, query))
        synthesised = traces(fallback_edge.rpc_url(), query)
        assert without_root_gas_used(synthesised) == without_root_gas_used(direct), query
    asked = node_without_block_traces.asked
    assert "debug_traceBlockByNumber" in asked  # tried, refused ...
    assert "debug_traceTransaction" in asked  # ... and the fallback took over
    assert "trace_filter" not in asked


def test_split_native_ranges_equal_the_node_chunk_by_chunk(
    edge: EdgeplaneProcess, anvil: AnvilNode, trace_target: dict[str, Any]
) -> None:
    deploy_block = int(trace_target["deploy"]["blockNumber"])
    first = max(1, deploy_block - 400)
    last = first + 699
    head = int(str(anvil.rpc("eth_blockNumber")), 16)
    if head < last:
        anvil.rpc("anvil_mine", [hex(last - head)])
    expected: list[dict[str, Any]] = []
    for start in range(first, last + 1, 300):
        expected += traces(anvil.url, {"fromBlock": hex(start), "toBlock": hex(min(start + 299, last))})
    assert traces(edge.rpc_url(), {"fromBlock": hex(first), "toBlock": hex(last)}) == lower(expected)
    paged = traces(edge.rpc_url(), {"fromBlock": hex(first), "toBlock": hex(last), "after": 3, "count": 2})
    assert paged == lower(expected)[3:5]
