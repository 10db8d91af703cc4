"""trace_filter of the embedded chain, through the gateway, against anvil's: the same signed transactions replayed
on both (same chain id, same prefunded dev accounts, one block per transaction on each)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from eth_account import Account
from web3 import Web3

from edgeplane.chain.dev_accounts import dev_accounts
from tests.contracts import load_contract
from tests.support.anvil import AnvilNode
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e
CHAIN_ID = 1337


def rpc(url: str, method: str, params: list[Any]) -> Any:
    answer = httpx.post(url, json={"jsonrpc": "2.0", "method": method, "params": params, "id": 1}, timeout=60).json()
    assert "result" in answer, (method, answer)
    return answer["result"]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Both chains after the same transactions; the block of each transaction, by name."""
    data_dir = tmp_path_factory.mktemp("devchain-traces") / "data"
    with AnvilNode(chain_id=CHAIN_ID) as anvil, EdgeplaneProcess(data_dir) as edge:
        gateway = edge.rpc_url()
        key = dev_accounts()[0].private_key
        abi, bytecode = load_contract("TraceTarget")
        contract = Web3().eth.contract(abi=abi, bytecode=bytecode)
        nonce = 0
        blocks: dict[str, int] = {}

        def send(name: str, **fields: Any) -> None:
            nonlocal nonce
            transaction = {"gas": 3_000_000, "maxFeePerGas": 50 * 10**9, "maxPriorityFeePerGas": 10**9}
            transaction.update(fields, nonce=nonce, chainId=CHAIN_ID)
            raw = "0x" + Account.sign_transaction(transaction, key).raw_transaction.hex()
            nonce += 1
            ours = rpc(gateway, "eth_sendRawTransaction", [raw])
            theirs = rpc(anvil.url, "eth_sendRawTransaction", [raw])
            assert ours == theirs
            our_receipt = rpc(gateway, "eth_getTransactionReceipt", [ours])
            their_receipt = rpc(anvil.url, "eth_getTransactionReceipt", [theirs])
            assert our_receipt["status"] == their_receipt["status"], name
            assert our_receipt["blockNumber"] == their_receipt["blockNumber"], name
            assert our_receipt["contractAddress"] == their_receipt["contractAddress"], name
            assert our_receipt["gasUsed"] == their_receipt["gasUsed"], name
            blocks[name] = int(our_receipt["blockNumber"], 16)

        send("deploy", data=contract.constructor().data_in_transaction)
        address = Web3.to_checksum_address(
            rpc(
                gateway,
                "eth_getTransactionReceipt",
                [rpc(gateway, "eth_getBlockByNumber", [hex(blocks["deploy"]), False])["transactions"][0]],
            )["contractAddress"]
        )
        target = Web3().eth.contract(address=address, abi=abi)
        send("run", to=address, value=10, data=target.encode_abi("run", args=[3]))
        send("transfer", to=dev_accounts()[5].address, value=12345, gas=21000)
        send("revert", to=address, data=target.encode_abi("requirePositive", args=[0]), gas=100_000)
        send("out of gas", to=address, data=target.encode_abi("run", args=[4]), gas=60_000)
        send("failed creation", data="0x60006000fd", gas=100_000)  # REVERT(0, 0) in the initcode
        yield {"gateway": gateway, "anvil": anvil.url, "blocks": blocks, "address": address.lower()}


def without_block_hash(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in record.items() if k != "blockHash"} for record in records]


@pytest.mark.parametrize("name", ["deploy", "run", "transfer", "revert", "out of gas", "failed creation"])
def test_trace_filter_agrees_with_anvil(replayed: dict[str, Any], name: str) -> None:
    block = hex(replayed["blocks"][name])
    query = {"fromBlock": block, "toBlock": block}
    ours = rpc(replayed["gateway"], "trace_filter", [query])
    theirs = rpc(replayed["anvil"], "trace_filter", [query])
    assert ours, name
    assert without_block_hash(ours) == without_block_hash(theirs)
    our_block = rpc(replayed["gateway"], "eth_getBlockByNumber", [block, False])
    assert all(record["blockHash"] == our_block["hash"] for record in ours)


def test_trace_filter_over_all_blocks_with_addresses_and_paging(replayed: dict[str, Any]) -> None:
    last = hex(max(replayed["blocks"].values()))
    for query in (
        {"fromBlock": "0x1", "toBlock": last},
        {"fromBlock": "0x1", "toBlock": last, "toAddress": [replayed["address"]]},
        {"fromBlock": "0x1", "toBlock": last, "fromAddress": [replayed["address"]], "after": 2, "count": 5},
        {
            "fromBlock": "0x1",
            "toBlock": last,
            "fromAddress": [replayed["address"]],
            "toAddress": [replayed["address"]],
            "mode": "intersection",
        },
    ):
        ours = rpc(replayed["gateway"], "trace_filter", [query])
        theirs = rpc(replayed["anvil"], "trace_filter", [query])
        assert without_block_hash(ours) == without_block_hash(theirs), query


def test_tags_are_resolved_for_the_chain(replayed: dict[str, Any]) -> None:
    ours = rpc(replayed["gateway"], "trace_filter", [{"fromBlock": "earliest", "toBlock": "latest", "count": 3}])
    assert len(ours) == 3
