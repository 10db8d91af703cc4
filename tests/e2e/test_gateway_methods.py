"""Seed 000 against a real node: every supported method answered as the node answers it, every other refused
with HTTP 403, and the HTTP and envelope errors of the gateway."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from eth_account import Account
from web3 import Web3

from edgeplane.gateway.policy import load_method_policy
from tests.support.anvil import AnvilNode
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e
POLICY = load_method_policy()


def rpc(url: str, method: str, params: list[Any], request_id: Any = 1) -> httpx.Response:
    return httpx.post(url, json={"jsonrpc": "2.0", "method": method, "params": params, "id": request_id}, timeout=60)


def supported_calls(target: dict[str, Any], sender: str) -> dict[str, list[Any]]:
    run = target["run"]
    block_hash = run["blockHash"].to_0x_hex()
    block_number = hex(run["blockNumber"])
    tx_hash = run["transactionHash"].to_0x_hex()
    contract = target["contract"]
    address = contract.address
    call = {"from": sender, "to": address, "data": contract.encode_abi("total", args=[1, 2])}
    return {
        "web3_clientVersion": [],
        "web3_sha3": ["0x68656c6c6f"],
        "net_version": [],
        "net_listening": [],
        "eth_syncing": [],
        "eth_mining": [],
        "eth_gasPrice": [],
        "eth_feeHistory": ["0x4", block_number, [25, 75]],
        "eth_blockNumber": [],
        "eth_chainId": [],
        "eth_getBalance": [sender, block_number],
        "eth_getStorageAt": [address, "0x0", block_number],
        "eth_getTransactionCount": [sender, block_number],
        "eth_getBlockTransactionCountByHash": [block_hash],
        "eth_getBlockTransactionCountByNumber": [block_number],
        "eth_getUncleCountByBlockHash": [block_hash],
        "eth_getUncleCountByBlockNumber": [block_number],
        "eth_getCode": [address, block_number],
        "eth_call": [call, block_number],
        "eth_estimateGas": [call, block_number],
        "eth_getBlockByHash": [block_hash, False],
        "eth_getBlockByNumber": [block_number, True],
        "eth_getTransactionByHash": [tx_hash],
        "eth_getTransactionByBlockHashAndIndex": [block_hash, "0x0"],
        "eth_getTransactionByBlockNumberAndIndex": [block_number, "0x0"],
        "eth_getTransactionReceipt": [tx_hash],
        "eth_getUncleByBlockHashAndIndex": [block_hash, "0x0"],
        "eth_getUncleByBlockNumberAndIndex": [block_number, "0x0"],
        "eth_getLogs": [{"fromBlock": block_number, "toBlock": block_number, "address": address}],
        "eth_getWork": [],
        "eth_getProof": [address, ["0x0"], block_number],
        "trace_filter": [{"fromBlock": block_number, "toBlock": block_number}],
    }


def test_every_supported_method_is_answered_as_the_node_answers(
    edge: EdgeplaneProcess, anvil: AnvilNode, trace_target: dict[str, Any]
) -> None:
    calls = supported_calls(trace_target, anvil.addresses[0])
    assert set(calls) | {"eth_sendRawTransaction"} == POLICY.supported
    for method, params in calls.items():
        direct = rpc(anvil.url, method, params, request_id=11).json()
        through = rpc(edge.rpc_url(), method, params, request_id=11)
        assert through.status_code == 200, (method, through.text)
        answer = through.json()
        assert answer["id"] == 11
        assert {k: v for k, v in answer.items() if k != "jsonrpc"} == {
            k: v for k, v in direct.items() if k != "jsonrpc"
        }, method


def test_send_raw_transaction_and_read_back(gateway_w3: Web3, anvil: AnvilNode) -> None:
    account = Account.from_key(anvil.private_keys[1])
    recipient = Account.create().address
    signed = account.sign_transaction(
        {
            "to": recipient,
            "value": 12345,
            "gas": 21000,
            "maxFeePerGas": 10**10,
            "maxPriorityFeePerGas": 1,
            "nonce": gateway_w3.eth.get_transaction_count(account.address),
            "chainId": gateway_w3.eth.chain_id,
        }
    )
    tx_hash = gateway_w3.eth.send_raw_transaction(signed.raw_transaction)
    assert tx_hash == signed.hash
    receipt = gateway_w3.eth.wait_for_transaction_receipt(tx_hash)
    assert receipt["status"] == 1
    assert gateway_w3.eth.get_balance(recipient) == 12345


def test_contract_flow_with_web3(gateway_w3: Web3, trace_target: dict[str, Any]) -> None:
    contract = trace_target["contract"]
    assert contract.functions.total(2, 3).call() == 5 + contract.functions.stored().call()
    block = trace_target["run"]["blockNumber"]
    events = contract.events.Traced().get_logs(from_block=block, to_block=block)
    assert len(events) == 1
    assert events[0]["args"]["tag"] == 7


@pytest.mark.parametrize("method", [*POLICY.unsupported, "eth_foo", "debug_traceTransaction", "admin_peers", "x"])
def test_unsupported_methods_get_403_with_the_request_id(edge: EdgeplaneProcess, method: str) -> None:
    response = rpc(edge.rpc_url(), method, [], request_id="req-9")
    assert response.status_code == 403
    body = response.json()
    assert body["id"] == "req-9"
    assert body["error"]["code"] == -32001
    assert body["error"]["message"] == "rpc method is not whitelisted"


@pytest.mark.parametrize("method", ["eth_blockNumber", "eth_chainId", "net_version", "eth_syncing", "eth_accounts"])
def test_a_request_without_params_is_answered_as_the_node_answers(
    edge: EdgeplaneProcess, anvil: AnvilNode, method: str
) -> None:
    body = {"jsonrpc": "2.0", "method": method, "id": 5}
    through = httpx.post(edge.rpc_url(), json=body, timeout=30)
    if method in POLICY.supported:
        assert through.status_code == 200
        direct = httpx.post(anvil.url, json=body, timeout=30).json()
        assert through.json()["id"] == 5
        if method != "eth_blockNumber":  # the chain may move on between the two
            assert through.json() == direct
    else:
        assert through.status_code == 403
        assert through.json()["error"]["code"] == -32001


def test_batch_answers_each_item_in_place(edge: EdgeplaneProcess) -> None:
    batch = [
        {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1},
        {"jsonrpc": "2.0", "method": "eth_accounts", "params": [], "id": 2},
        {"jsonrpc": "2.0", "method": "eth_feeHistory", "params": [11, "latest", []], "id": 3},
        {"jsonrpc": "2.0", "method": "eth_blockNumber", "params": None, "id": 4},
        5,
        {"jsonrpc": "2.0", "method": "eth_getBalance", "params": ["0x" + "5e" * 20, "latest"], "id": 6},
        {"jsonrpc": "2.0", "method": "eth_getBalance", "params": ["not-an-address", "latest"], "id": 7},
    ]
    response = httpx.post(edge.rpc_url(), json=batch, timeout=30)
    assert response.status_code == 200
    answers = response.json()
    assert [answer["id"] for answer in answers] == [1, 2, 3, 4, None, 6, 7]
    assert answers[0]["result"] == "0x7a69"
    assert answers[1]["error"]["code"] == -32001
    assert answers[2]["error"]["code"] == -32602
    assert answers[3]["error"]["code"] == -32600
    assert answers[4]["error"]["code"] == -32600
    assert answers[5]["result"] == "0x0"
    assert "error" in answers[6]  # the node's own error, passed on in place


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, -32700),
        (b"[]", 400, -32600),
        (b'{"jsonrpc":"2.0","method":"eth_chainId","params":null,"id":1}', 400, -32600),
        (b'{"jsonrpc":"2.0","method":"eth_chainId","Params":[],"id":1}', 400, -32600),
        (b'{"jsonrpc":"1.0","method":"eth_chainId","params":[],"id":1}', 400, -32600),
        (b'{"jsonrpc":"2.0","method":"eth_chainId","params":[],"id":null}', 400, -32600),
        (b'{"jsonrpc":"2.0","method":"eth_chainId","params":[],"id":{}}', 400, -32600),
    ],
)
def test_envelope_errors(edge: EdgeplaneProcess, body: bytes, status: int, code: int) -> None:
    response = httpx.post(edge.rpc_url(), content=body, headers={"content-type": "application/json"})
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


def test_http_errors(edge: EdgeplaneProcess) -> None:
    body = {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1}
    unknown = httpx.post(f"{edge.edge_url}/v1/nosuchnet", json=body)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == -32600
    assert "nosuchnet" in unknown.json()["error"]["message"]

    get = httpx.get(edge.rpc_url())
    assert get.status_code == 405
    assert get.headers["allow"] == "POST"
    assert get.json()["error"]["code"] == -32600

    text = httpx.post(edge.rpc_url(), content=b"{}", headers={"content-type": "text/plain"})
    assert text.status_code == 415
    missing = httpx.post(edge.rpc_url(), content=b"{}", headers={"content-type": ""})
    assert missing.status_code == 415
    with_charset = httpx.post(
        edge.rpc_url(),
        content=b'{"jsonrpc":"2.0","method":"eth_chainId","params":[],"id":1}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert with_charset.status_code == 200

    large = httpx.post(edge.rpc_url(), content=b" " * (6 * 1024 * 1024), headers={"content-type": "application/json"})
    assert large.status_code == 413
    assert large.json()["error"]["code"] == -32600

    other_host = httpx.post(edge.rpc_url(), json=body, headers={"host": "example.com"})
    assert other_host.status_code == 404
    localhost = httpx.post(f"http://localhost:{edge.edge_port}/v1/mainnet", json=body)
    assert localhost.status_code == 200


def test_network_without_upstream_is_served_by_the_development_chain(edge: EdgeplaneProcess) -> None:
    response = rpc(edge.rpc_url("sepolia"), "eth_chainId", [], request_id=3)
    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": 3, "result": hex(1337)}


def test_health_and_metrics(edge: EdgeplaneProcess) -> None:
    assert httpx.get(f"{edge.edge_url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{edge.api_url}/healthz").json() == {"status": "ok"}
    rpc(edge.rpc_url(), "eth_chainId", [])
    rpc(edge.rpc_url(), "eth_coinbase", [])
    answered = 'edgeplane_gateway_requests_total{method="eth_chainId",network="mainnet",outcome="answered"}'
    deadline = time.monotonic() + 5  # counts per request are published every 0.25 s (edgeplane.batched_counts)
    while answered not in (metrics := httpx.get(f"{edge.api_url}/metrics").text) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert answered in metrics
    assert 'edgeplane_gateway_requests_total{method="eth_coinbase",network="mainnet",outcome="refused"}' in metrics
    assert "edgeplane_upstream_request_duration_seconds_bucket" in metrics
    assert 'edgeplane_upstream_healthy{network="mainnet"' in metrics
    v4 = httpx.get(f"{edge.api_url}/client/v4/zones")
    assert v4.status_code == 401
    assert v4.json()["success"] is False
    assert v4.json()["errors"][0]["code"] == 10000
    unrouted = httpx.get(f"{edge.api_url}/client/v4/nothing")
    assert unrouted.status_code == 404
    assert unrouted.json()["errors"][0]["code"] == 7003


def test_credentials_file(edge: EdgeplaneProcess) -> None:
    import json
    import re

    credentials = json.loads((edge.data_dir / "credentials.json").read_text())
    # The interface other tools rely on: these keys, and the dashboard's password; the file may gain keys.
    assert set(credentials) >= {"email", "api_key", "api_token", "account_id", "zone_id", "zone_name", "password"}
    assert re.fullmatch(r"[0-9a-f]{37}", credentials["api_key"])
    assert re.fullmatch(r"[A-Za-z0-9_-]{40}", credentials["api_token"])
    assert re.fullmatch(r"[0-9a-f]{32}", credentials["account_id"])
    assert re.fullmatch(r"[0-9a-f]{32}", credentials["zone_id"])
    assert (edge.data_dir / "credentials.json").stat().st_mode & 0o077 == 0
    assert credentials["api_key"] not in edge.log()
    assert credentials["api_token"] not in edge.log()
    assert credentials["password"] not in edge.log()
