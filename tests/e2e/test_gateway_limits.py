"""The four limits of seed 000 through the gateway, at their edges, against a real node with > 1000 blocks."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from edgeplane.config import GatewaySettings
from tests.support.anvil import AnvilNode
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e


def rpc(url: str, method: str, params: list[Any]) -> httpx.Response:
    return httpx.post(url, json={"jsonrpc": "2.0", "method": method, "params": params, "id": 5}, timeout=120)


@pytest.fixture(scope="module")
def long_chain(anvil: AnvilNode, trace_target: dict[str, Any]) -> int:
    """Mines blocks until the chain has more than 1100; returns the head."""
    head = int(str(anvil.rpc("eth_blockNumber")), 16)
    if head < 1100:
        anvil.rpc("anvil_mine", [hex(1100 - head)])
        # Blocks mined behind the gateway's back: its workers resolve tags against a head up to this old.
        time.sleep(GatewaySettings().head_max_age_seconds + 0.2)
    return int(str(anvil.rpc("eth_blockNumber")), 16)


def assert_limited(response: httpx.Response, what: str, limit: int, value: int) -> None:
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == 5
    assert body["error"]["code"] == -32602
    assert body["error"]["message"] == f"{what} of {value} exceeds the limit of {limit}"
    assert body["error"]["data"] == {"limit": limit, "value": value}


def test_get_logs_800_blocks_pass_and_801_are_refused(edge: EdgeplaneProcess, long_chain: int) -> None:
    ok = rpc(edge.rpc_url(), "eth_getLogs", [{"fromBlock": "0x1", "toBlock": hex(800)}])
    assert "result" in ok.json()
    over = rpc(edge.rpc_url(), "eth_getLogs", [{"fromBlock": "0x1", "toBlock": hex(801)}])
    assert_limited(over, "eth_getLogs block range", 800, 801)


def test_get_logs_tags_are_resolved_against_the_head(edge: EdgeplaneProcess, long_chain: int) -> None:
    ok = rpc(edge.rpc_url(), "eth_getLogs", [{"fromBlock": hex(long_chain - 799)}])
    assert "result" in ok.json(), ok.text
    over = rpc(edge.rpc_url(), "eth_getLogs", [{"fromBlock": hex(long_chain - 800), "toBlock": "latest"}])
    assert_limited(over, "eth_getLogs block range", 800, 801)
    earliest = rpc(edge.rpc_url(), "eth_getLogs", [{"fromBlock": "earliest", "toBlock": "latest"}])
    assert_limited(earliest, "eth_getLogs block range", 800, long_chain + 1)
    by_hash = rpc(edge.rpc_url(), "eth_getLogs", [{"blockHash": "0x" + "00" * 32}])
    assert by_hash.json().get("error", {}).get("code") != -32602 or "limit" not in by_hash.json()["error"]["message"]


def test_get_logs_reversed_range(edge: EdgeplaneProcess, long_chain: int) -> None:
    body = rpc(edge.rpc_url(), "eth_getLogs", [{"fromBlock": "0x20", "toBlock": "0x10"}]).json()
    assert body["error"]["code"] == -32602
    assert "invalid block range params" in body["error"]["message"]


@pytest.mark.parametrize(("count", "allowed"), [(10, True), ("0xa", True), (11, False), ("0xb", False)])
def test_fee_history_10_blocks_pass_and_11_are_refused(
    edge: EdgeplaneProcess, long_chain: int, count: Any, allowed: bool
) -> None:
    response = rpc(edge.rpc_url(), "eth_feeHistory", [count, "latest", [50]])
    if allowed:
        assert len(response.json()["result"]["baseFeePerGas"]) == 11
    else:
        assert_limited(response, "eth_feeHistory block count", 10, 11)


def test_trace_filter_800_blocks_pass_and_801_are_refused(edge: EdgeplaneProcess, long_chain: int) -> None:
    # anvil's own trace_filter takes at most 300 blocks: the gateway splits 800 blocks into chunks.
    ok = rpc(edge.rpc_url(), "trace_filter", [{"fromBlock": "0x1", "toBlock": hex(800)}])
    assert isinstance(ok.json()["result"], list), ok.text
    over = rpc(edge.rpc_url(), "trace_filter", [{"fromBlock": "0x1", "toBlock": hex(801)}])
    assert_limited(over, "trace_filter block range", 800, 801)
    tagged = rpc(edge.rpc_url(), "trace_filter", [{"fromBlock": hex(long_chain - 800), "toBlock": "latest"}])
    assert_limited(tagged, "trace_filter block range", 800, 801)


def test_trace_filter_count_200_passes_and_201_is_refused(edge: EdgeplaneProcess, long_chain: int) -> None:
    ok = rpc(edge.rpc_url(), "trace_filter", [{"fromBlock": "0x1", "toBlock": "0x10", "count": 200}])
    assert isinstance(ok.json()["result"], list)
    over = rpc(edge.rpc_url(), "trace_filter", [{"fromBlock": "0x1", "toBlock": "0x10", "count": 201}])
    assert_limited(over, "trace_filter count", 200, 201)
    hex_over = rpc(edge.rpc_url(), "trace_filter", [{"fromBlock": "0x1", "toBlock": "0x10", "count": "0xc9"}])
    assert_limited(hex_over, "trace_filter count", 200, 201)


def test_limits_inside_a_batch_are_per_item(edge: EdgeplaneProcess, long_chain: int) -> None:
    batch = [
        {"jsonrpc": "2.0", "method": "eth_getLogs", "params": [{"fromBlock": "0x1", "toBlock": hex(801)}], "id": 1},
        {"jsonrpc": "2.0", "method": "trace_filter", "params": [{"fromBlock": "0x1", "toBlock": "0x2"}], "id": 2},
        {"jsonrpc": "2.0", "method": "eth_feeHistory", "params": ["0xb", "latest", []], "id": 3},
    ]
    answers = httpx.post(edge.rpc_url(), json=batch, timeout=60).json()
    assert answers[0]["error"]["data"] == {"limit": 800, "value": 801}
    assert isinstance(answers[1]["result"], list)
    assert answers[2]["error"]["data"] == {"limit": 10, "value": 11}
