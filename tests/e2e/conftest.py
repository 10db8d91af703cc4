"""Real components for end-to-end tests: anvil nodes and edgeplane processes, each on loopback and free ports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account
from web3 import Web3
from web3.middleware import SignAndSendRawMiddlewareBuilder

from tests.contracts import load_contract
from tests.support.anvil import AnvilNode
from tests.support.edgeplane import EdgeplaneProcess


@pytest.fixture(scope="session")
def anvil() -> Iterator[AnvilNode]:
    with AnvilNode() as node:
        yield node


@pytest.fixture(scope="session")
def edge(anvil: AnvilNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    data_dir = tmp_path_factory.mktemp("edge") / "data"
    with EdgeplaneProcess(data_dir, upstreams=(f"mainnet={anvil.url}",)) as process:
        yield process


@pytest.fixture(scope="session")
def debug_edge(anvil: AnvilNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    """An edgeplane whose upstream is treated as geth-style: trace_filter is synthesised from debug traces."""
    data_dir = tmp_path_factory.mktemp("debug-edge") / "data"
    config = data_dir.parent / "edgeplane.toml"
    config.write_text(
        f'[networks.mainnet]\nupstreams = [{{ url = "{anvil.url}", trace_filter = "debug" }}]\n', encoding="utf-8"
    )
    with EdgeplaneProcess(data_dir, extra_args=("--config", str(config))) as process:
        yield process


def signing_web3(url: str, private_key: str) -> Web3:
    """A web3 client that signs locally and sends raw transactions (the gateway refuses eth_sendTransaction)."""
    w3 = Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 60}))
    account = Account.from_key(private_key)
    w3.middleware_onion.inject(SignAndSendRawMiddlewareBuilder.build(account), layer=0)
    w3.eth.default_account = account.address
    return w3


@pytest.fixture(scope="session")
def gateway_w3(edge: EdgeplaneProcess, anvil: AnvilNode) -> Web3:
    return signing_web3(edge.rpc_url(), anvil.private_keys[0])


@pytest.fixture(scope="session")
def direct_w3(anvil: AnvilNode) -> Web3:
    return Web3(Web3.HTTPProvider(anvil.url, request_kwargs={"timeout": 60}))


@pytest.fixture(scope="session")
def trace_target(gateway_w3: Web3) -> dict[str, Any]:
    """TraceTarget deployed and run once through the gateway: its address, and the run transaction's receipt."""
    abi, bytecode = load_contract("TraceTarget")
    factory = gateway_w3.eth.contract(abi=abi, bytecode=bytecode)
    # eth_maxPriorityFeePerGas is not among seed 000's methods, so fees are given explicitly.
    fees = {"gasPrice": gateway_w3.eth.gas_price}
    deploy_hash = factory.constructor().transact(fees)
    deployed = gateway_w3.eth.wait_for_transaction_receipt(deploy_hash)
    contract = gateway_w3.eth.contract(address=deployed["contractAddress"], abi=abi)
    run_hash = contract.functions.run(7).transact({"value": 10, "gas": 3_000_000, **fees})
    run = gateway_w3.eth.wait_for_transaction_receipt(run_hash)
    assert run["status"] == 1
    return {"contract": contract, "deploy": deployed, "run": run, "abi": abi}


@pytest.fixture
def tmp_data(tmp_path: Path) -> Path:
    return tmp_path / "data"
