"""`edgeplane chain` on its own: a local development node with the conveniences of one."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from edgeplane.chain.dev_accounts import dev_accounts
from tests.support.anvil import free_port

pytestmark = pytest.mark.e2e


class ChainCommand:
    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "edgeplane", "chain", "--port", str(self.port), *args]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.process.stdout.read() if self.process.stdout else ""
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError("edgeplane chain did not start")

    def rpc(self, method: str, params: list[Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "method": method, "params": params, "id": 1}
        answer: dict[str, Any] = httpx.post(self.url, json=body, timeout=30).json()
        return answer

    def stop(self) -> int:
        self.process.terminate()
        return self.process.wait(timeout=15)


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[ChainCommand]:
    node = ChainCommand("--data-dir", str(tmp_path / "chain"))
    yield node
    node.stop()


def test_dev_accounts_and_send_transaction(chain: ChainCommand) -> None:
    accounts = chain.rpc("eth_accounts", [])["result"]
    assert accounts == [account.address for account in dev_accounts()]
    tx_hash = chain.rpc("eth_sendTransaction", [{"from": accounts[0], "to": accounts[1], "value": "0x64"}])["result"]
    receipt = chain.rpc("eth_getTransactionReceipt", [tx_hash])["result"]
    assert receipt["status"] == "0x1"
    unknown = chain.rpc("eth_sendTransaction", [{"from": "0x" + "12" * 20, "to": accounts[1]}])
    assert unknown["error"]["message"] == "unknown account"


def test_evm_mine_and_unknown_methods(chain: ChainCommand) -> None:
    before = int(chain.rpc("eth_blockNumber", [])["result"], 16)
    chain.rpc("evm_mine", ["0x3"])
    assert int(chain.rpc("eth_blockNumber", [])["result"], 16) == before + 3
    missing = chain.rpc("debug_nothing", [])
    assert missing["error"] == {"code": -32601, "message": "the method debug_nothing does not exist/is not available"}
    batch = httpx.post(
        chain.url,
        json=[{"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1}, {"bad": 1}],
        timeout=10,
    ).json()
    assert batch[0]["result"] == "0x539"
    assert batch[1]["error"]["code"] == -32600
    assert httpx.post(chain.url, content=b"{", timeout=10).json()["error"]["code"] == -32700


def test_interval_mining(tmp_path: Path) -> None:
    node = ChainCommand("--no-persist", "--block-time", "0.5")
    try:
        account = dev_accounts()[0].address
        tx_hash = node.rpc("eth_sendTransaction", [{"from": account, "to": account, "value": "0x1"}])["result"]
        deadline = time.monotonic() + 10
        receipt = None
        while receipt is None and time.monotonic() < deadline:
            receipt = node.rpc("eth_getTransactionReceipt", [tx_hash])["result"]
            time.sleep(0.1)
        assert receipt is not None
        assert int(node.rpc("eth_blockNumber", [])["result"], 16) >= 1
    finally:
        node.stop()


def test_public_chain_ids_are_refused() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "edgeplane", "chain", "--chain-id", "1", "--no-persist"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "belongs to a public network" in result.stderr


def test_chain_id_of_a_stored_chain_is_kept(tmp_path: Path) -> None:
    node = ChainCommand("--data-dir", str(tmp_path / "c"))
    node.stop()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgeplane",
            "chain",
            "--data-dir",
            str(tmp_path / "c"),
            "--chain-id",
            "4242",
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "has chain id 1337, not 4242" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
