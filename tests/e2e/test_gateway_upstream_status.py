"""An operator's view of the upstream nodes, on a real ``edgeplane serve`` with one answering node and one dead:
``/metrics`` has each node's score and state, and ``edgeplane status`` shows them with why."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.anvil import AnvilNode, free_port
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e


def test_metrics_and_status_show_each_upstreams_score_and_state(anvil: AnvilNode, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    data_dir = tmp_path / "data"
    with EdgeplaneProcess(data_dir, upstreams=(f"mainnet={anvil.url}", f"mainnet={dead}")) as edge:
        body = {"jsonrpc": "2.0", "method": "eth_chainId", "params": [], "id": 1}
        for _ in range(4):
            assert httpx.post(edge.rpc_url(), json=body, timeout=30).json()["result"] == hex(anvil.chain_id)
        live = anvil.url.removeprefix("http://")
        gone = dead.removeprefix("http://")
        wanted = f'edgeplane_upstream_state{{network="mainnet",state="failing",upstream="{gone}"}} 1.0'
        deadline = time.monotonic() + 30  # the first health check publishes the states
        while wanted not in (metrics := httpx.get(f"{edge.api_url}/metrics", timeout=10).text):
            assert time.monotonic() < deadline, metrics
            time.sleep(0.5)
        assert f'edgeplane_upstream_state{{network="mainnet",state="ok",upstream="{live}"}} 1.0' in metrics
        assert f'edgeplane_upstream_score{{network="mainnet",upstream="{live}"}}' in metrics
        result = subprocess.run(
            [sys.executable, "-m", "edgeplane", "status", "--data-dir", str(data_dir), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        upstreams = {entry["upstream"]: entry for entry in json.loads(result.stdout)["upstreams"]}
        assert upstreams[live]["state"] == "ok"
        assert upstreams[gone]["state"] == "failing"
        assert upstreams[gone]["reason"]
        assert upstreams[gone]["score"] < upstreams[live]["score"]
        text = subprocess.run(
            [sys.executable, "-m", "edgeplane", "status", "--data-dir", str(data_dir)],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert "upstreams (of this machine's gateway):" in text
        assert gone in text
