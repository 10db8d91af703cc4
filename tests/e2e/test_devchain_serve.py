"""`edgeplane serve` with no node configured: every supported method is answered by the embedded development chain,
through the gateway, to web3.py as the client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import rlp
from eth.rlp.accounts import Account as AccountRlp
from eth_account import Account
from eth_utils import keccak, to_canonical_address
from trie import HexaryTrie
from web3 import Web3

from edgeplane.chain.dev_accounts import dev_accounts
from edgeplane.gateway.policy import load_method_policy
from tests.contracts import load_contract
from tests.e2e.conftest import signing_web3
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e
CHAIN_ID = 1337


@pytest.fixture(scope="module")
def devchain_edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    data_dir = tmp_path_factory.mktemp("devchain") / "data"
    with EdgeplaneProcess(data_dir) as process:
        yield process


@pytest.fixture(scope="module")
def w3(devchain_edge: EdgeplaneProcess) -> Web3:
    return signing_web3(devchain_edge.rpc_url(), dev_accounts()[0].private_key)


def rpc(url: str, method: str, params: list[Any], request_id: Any = 1) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "method": method, "params": params, "id": request_id}
    answer: dict[str, Any] = httpx.post(url, json=body, timeout=60).json()
    return answer


@pytest.fixture(scope="module")
def deployed(w3: Web3) -> dict[str, Any]:
    abi, bytecode = load_contract("TraceTarget")
    fees = {"gasPrice": w3.eth.gas_price}
    receipt = w3.eth.wait_for_transaction_receipt(
        w3.eth.contract(abi=abi, bytecode=bytecode).constructor().transact(fees)
    )
    contract = w3.eth.contract(address=receipt["contractAddress"], abi=abi)
    run = w3.eth.wait_for_transaction_receipt(
        contract.functions.run(9).transact({"value": 10, "gas": 3_000_000, **fees})
    )
    return {"contract": contract, "deploy": receipt, "run": run}


def test_chain_identity(w3: Web3, devchain_edge: EdgeplaneProcess) -> None:
    assert w3.eth.chain_id == CHAIN_ID
    assert rpc(devchain_edge.rpc_url(), "net_version", [])["result"] == str(CHAIN_ID)
    assert rpc(devchain_edge.rpc_url(), "web3_clientVersion", [])["result"].startswith("edgeplane-devchain/")
    assert rpc(devchain_edge.rpc_url(), "eth_syncing", [])["result"] is False
    assert rpc(devchain_edge.rpc_url(), "eth_mining", [])["result"] is False
    assert rpc(devchain_edge.rpc_url(), "net_listening", [])["result"] is True
    work = rpc(devchain_edge.rpc_url(), "eth_getWork", [])
    assert work["error"]["code"] == -32601
    assert w3.eth.get_balance(dev_accounts()[1].address) >= 10_000 * 10**18 - 10**18


def test_value_transfer(w3: Web3) -> None:
    sender = Account.from_key(dev_accounts()[2].private_key)
    recipient = Account.create().address
    signed = sender.sign_transaction(
        {
            "to": recipient,
            "value": 777,
            "gas": 21000,
            "maxFeePerGas": 10 * 10**9,
            "maxPriorityFeePerGas": 10**9,
            "nonce": w3.eth.get_transaction_count(sender.address),
            "chainId": CHAIN_ID,
        }
    )
    tx_hash = w3.eth.send_raw_transaction(signed.raw_transaction)
    receipt = w3.eth.get_transaction_receipt(tx_hash)  # automined: the receipt exists at once
    assert receipt["status"] == 1
    assert receipt["gasUsed"] == 21000
    assert w3.eth.get_balance(recipient) == 777
    tx = w3.eth.get_transaction(tx_hash)
    assert tx["from"] == sender.address
    assert tx["value"] == 777
    block = w3.eth.get_block(receipt["blockNumber"], full_transactions=True)
    assert block["transactions"][0]["hash"] == tx_hash
    assert w3.eth.get_block(block["hash"])["number"] == block["number"]
    assert w3.eth.get_transaction_by_block(block["number"], 0)["hash"] == tx_hash
    assert w3.eth.get_block_transaction_count(block["number"]) == 1


def test_contract_state_events_and_calls(w3: Web3, deployed: dict[str, Any], devchain_edge: EdgeplaneProcess) -> None:
    contract = deployed["contract"]
    assert deployed["run"]["status"] == 1
    assert contract.functions.stored().call() == 9
    assert contract.functions.total(1, 2).call() == 12
    assert w3.eth.get_storage_at(contract.address, 0) == (9).to_bytes(32, "big")
    assert len(w3.eth.get_code(contract.address)) > 100
    block = deployed["run"]["blockNumber"]
    events = contract.events.Traced().get_logs(from_block=block, to_block=block)
    assert len(events) == 1
    assert events[0]["args"]["tag"] == 9
    topic = events[0]["topics"][0].to_0x_hex() if hasattr(events[0], "topics") else None
    logs = rpc(
        devchain_edge.rpc_url(),
        "eth_getLogs",
        [{"fromBlock": hex(block), "toBlock": hex(block), "topics": [[topic, "0x" + "00" * 32] if topic else None]}],
    )["result"]
    assert len(logs) == 1
    none = rpc(
        devchain_edge.rpc_url(),
        "eth_getLogs",
        [{"fromBlock": hex(block), "toBlock": hex(block), "address": "0x" + "22" * 20}],
    )["result"]
    assert none == []


def test_revert_reasons_through_call_and_estimate(
    w3: Web3, deployed: dict[str, Any], devchain_edge: EdgeplaneProcess
) -> None:
    contract = deployed["contract"]
    data = contract.encode_abi("requirePositive", args=[0])
    for method, params in (
        ("eth_call", [{"to": contract.address, "data": data}, "latest"]),
        ("eth_estimateGas", [{"to": contract.address, "data": data}]),
    ):
        answer = rpc(devchain_edge.rpc_url(), method, params)
        assert answer["error"]["code"] == 3, answer
        assert answer["error"]["message"] == "execution reverted: value must be positive"
        assert answer["error"]["data"].startswith("0x08c379a0")
    gas = w3.eth.estimate_gas({"to": contract.address, "data": contract.encode_abi("requirePositive", args=[1])})
    assert 21000 < gas < 100_000


def test_call_honours_the_block_argument(w3: Web3, deployed: dict[str, Any]) -> None:
    contract = deployed["contract"]
    before = deployed["deploy"]["blockNumber"]
    assert contract.functions.stored().call(block_identifier=before) == 0
    assert contract.functions.stored().call(block_identifier="latest") == 9


def test_proofs_verify_against_the_state_root(w3: Web3, deployed: dict[str, Any]) -> None:
    contract = deployed["contract"]
    block = w3.eth.get_block("latest")
    proof = w3.eth.get_proof(contract.address, [0, 1], block["number"])
    account_rlp = HexaryTrie.get_from_proof(
        bytes(block["stateRoot"]),
        keccak(to_canonical_address(contract.address)),
        [rlp.decode(bytes(node)) for node in proof["accountProof"]],
    )
    account = rlp.decode(account_rlp, sedes=AccountRlp)
    assert account.balance == proof["balance"]
    assert account.nonce == proof["nonce"]
    assert account.storage_root == bytes(proof["storageHash"])
    assert account.code_hash == bytes(proof["codeHash"])
    stored = proof["storageProof"][0]
    value = HexaryTrie.get_from_proof(
        account.storage_root, keccak((0).to_bytes(32, "big")), [rlp.decode(bytes(node)) for node in stored["proof"]]
    )
    assert rlp.decode(value, sedes=rlp.sedes.big_endian_int) == int.from_bytes(bytes(stored["value"]), "big") == 9
    empty = proof["storageProof"][1]
    assert int.from_bytes(bytes(empty["value"]), "big") == 0
    assert (
        HexaryTrie.get_from_proof(
            account.storage_root, keccak((1).to_bytes(32, "big")), [rlp.decode(bytes(node)) for node in empty["proof"]]
        )
        == b""
    )
    missing = w3.eth.get_proof(Account.create().address, [], "latest")
    assert missing["balance"] == 0


def test_fee_history(w3: Web3, deployed: dict[str, Any]) -> None:
    history = w3.eth.fee_history(4, "latest", [10, 50, 90])
    assert len(history["baseFeePerGas"]) == 5
    assert len(history["gasUsedRatio"]) == 4
    assert len(history["reward"]) == 4
    assert all(len(rewards) == 3 for rewards in history["reward"])
    assert all(fee > 0 for fee in history["baseFeePerGas"])


def test_uncles_never_exist(devchain_edge: EdgeplaneProcess) -> None:
    url = devchain_edge.rpc_url()
    latest = rpc(url, "eth_getBlockByNumber", ["latest", False])["result"]
    assert rpc(url, "eth_getUncleCountByBlockNumber", ["latest"])["result"] == "0x0"
    assert rpc(url, "eth_getUncleCountByBlockHash", [latest["hash"]])["result"] == "0x0"
    assert rpc(url, "eth_getUncleByBlockNumberAndIndex", ["latest", "0x0"])["result"] is None
    assert rpc(url, "eth_getUncleByBlockHashAndIndex", [latest["hash"], "0x0"])["result"] is None
    assert rpc(url, "eth_getBlockByNumber", ["0xffffff", False])["result"] is None
    assert rpc(url, "eth_getBlockByHash", ["0x" + "ab" * 32, False])["result"] is None
    assert rpc(url, "eth_getTransactionByHash", ["0x" + "ab" * 32])["result"] is None
    assert rpc(url, "eth_getTransactionReceipt", ["0x" + "ab" * 32])["result"] is None
    assert rpc(url, "web3_sha3", ["0x68656c6c6f"])["result"] == "0x" + keccak(b"hello").hex()


def sign(key: str, **fields: Any) -> str:
    base = {
        "to": "0x" + "33" * 20,
        "value": 1,
        "gas": 21000,
        "maxFeePerGas": 10**10,
        "maxPriorityFeePerGas": 1,
        "chainId": CHAIN_ID,
    }
    return "0x" + Account.sign_transaction({**base, **fields}, key).raw_transaction.hex()


def test_bad_transactions_get_node_errors_and_the_chain_keeps_serving(
    devchain_edge: EdgeplaneProcess, w3: Web3
) -> None:
    url = devchain_edge.rpc_url()
    poor = Account.create()
    key = dev_accounts()[3].private_key
    nonce = w3.eth.get_transaction_count(dev_accounts()[3].address)
    cases = [
        ("0x1234", "invalid transaction"),
        ("0x", "invalid transaction"),
        ("nothex", "invalid transaction"),
        (sign(key, nonce=nonce, chainId=1), "invalid chain id for signer: have 1 want 1337"),
        (sign(key, nonce=nonce, chainId=31337), "invalid chain id for signer: have 31337 want 1337"),
        (sign(poor.key.to_0x_hex(), nonce=0), "insufficient funds for gas * price + value"),
        (sign(key, nonce=nonce, gas=20000), "intrinsic gas too low"),
        (sign(key, nonce=nonce, maxFeePerGas=1, maxPriorityFeePerGas=1), "max fee per gas less than block base fee"),
    ]
    for raw, message in cases:
        answer = rpc(url, "eth_sendRawTransaction", [raw], request_id=5)
        assert answer["id"] == 5
        assert "error" in answer, (raw, answer)
        assert message in answer["error"]["message"], (message, answer)
        assert answer["error"]["code"] in (-32000, -32602)
    assert rpc(url, "eth_sendRawTransaction", [sign(key, nonce=nonce)])["result"].startswith("0x")
    low = rpc(url, "eth_sendRawTransaction", [sign(key, nonce=nonce, value=2)])
    assert low["error"]["message"] == f"nonce too low: next nonce {nonce + 1}, tx nonce {nonce}"
    unprotected = {"to": "0x" + "33" * 20, "value": 1, "gas": 21000, "gasPrice": 10**10, "nonce": nonce + 1}
    legacy = "0x" + Account.sign_transaction(unprotected, key).raw_transaction.hex()
    answer = rpc(url, "eth_sendRawTransaction", [legacy])
    assert answer["error"]["message"] == "only replay-protected (EIP-155) transactions allowed over RPC"
    for method, params in (
        ("eth_getBalance", [dev_accounts()[0].address, "0xffffff"]),
        ("eth_getCode", [dev_accounts()[0].address, {"blockHash": "0x" + "ab" * 32}]),
        ("eth_call", [{"to": dev_accounts()[0].address}, "0xffffff"]),
    ):
        answer = rpc(url, method, params)
        assert answer["error"]["message"] == "header not found", (method, answer)
    assert rpc(url, "eth_blockNumber", [])["result"].startswith("0x")


def test_policy_applies_to_the_chain(devchain_edge: EdgeplaneProcess) -> None:
    for method in load_method_policy().unsupported:
        response = httpx.post(
            devchain_edge.rpc_url(), json={"jsonrpc": "2.0", "method": method, "params": [], "id": 1}, timeout=30
        )
        assert response.status_code == 403
    for network in ("sepolia", "holesky"):
        assert rpc(devchain_edge.rpc_url(network), "eth_chainId", [])["result"] == hex(CHAIN_ID)


def test_chain_persists_across_restarts(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    key = dev_accounts()[4].private_key
    one_worker = ("--edge-workers", "1")  # three starts: each edge worker more is seconds of CPU, and not the subject
    with EdgeplaneProcess(data_dir, extra_args=one_worker) as edge:
        tx_hash = rpc(edge.rpc_url(), "eth_sendRawTransaction", [sign(key, nonce=0)])["result"]
        head = rpc(edge.rpc_url(), "eth_blockNumber", [])["result"]
    with EdgeplaneProcess(data_dir, extra_args=one_worker) as edge:
        assert rpc(edge.rpc_url(), "eth_blockNumber", [])["result"] == head
        assert rpc(edge.rpc_url(), "eth_getTransactionReceipt", [tx_hash])["result"]["status"] == "0x1"
    with EdgeplaneProcess(data_dir, extra_args=(*one_worker, "--fresh-chain")) as edge:
        assert rpc(edge.rpc_url(), "eth_blockNumber", [])["result"] == "0x0"
