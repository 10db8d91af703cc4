"""Failover: two real nodes behind one network; one is stopped mid-run and no client request fails."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.anvil import AnvilNode
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e


def upstream_errors(metrics: str, node: AnvilNode) -> float:
    """The failed exchanges with ``node`` counted in a ``/metrics`` page (labelled ``host:port`` by default)."""
    parts = urlsplit(node.url)
    label = f"{parts.hostname}:{parts.port}"
    return sum(
        sample.value
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == "edgeplane_upstream_errors_total" and sample.labels.get("upstream") == label
    )


@pytest.fixture
def two_nodes() -> Iterator[tuple[AnvilNode, AnvilNode]]:
    with AnvilNode() as first, AnvilNode() as second:
        yield first, second


@pytest.mark.parametrize("cache", [True, False], ids=["with-cache", "without-cache"])
def test_stopping_one_node_fails_no_request(
    two_nodes: tuple[AnvilNode, AnvilNode], tmp_path: Path, cache: bool
) -> None:
    """Without the response cache every request goes to a node; with it, the head reads and the misses do."""
    first, second = two_nodes
    upstreams = (f"mainnet={first.url}", f"mainnet={second.url}")
    if not cache:
        (tmp_path / "data").mkdir()
        (tmp_path / "data" / "edgeplane.toml").write_text("[gateway.cache]\nenabled = false\n")
    with EdgeplaneProcess(tmp_path / "data", upstreams=upstreams) as edge:
        failures: list[str] = []
        answered = 0
        stop = threading.Event()

        def client() -> None:
            nonlocal answered
            methods = ["eth_chainId", "eth_blockNumber", "eth_getBalance", "eth_gasPrice"]
            with httpx.Client(timeout=10) as session:
                for index in range(100_000):
                    if stop.is_set():
                        return
                    method = methods[index % len(methods)]
                    params = [first.addresses[0], "latest"] if method == "eth_getBalance" else []
                    body = {"jsonrpc": "2.0", "method": method, "params": params, "id": index}
                    response = session.post(edge.rpc_url(), json=body)
                    answer = response.json()
                    if response.status_code != 200 or "result" not in answer:
                        failures.append(f"{method}: {response.status_code} {answer}")
                    else:
                        answered += 1

        workers = [threading.Thread(target=client) for _ in range(4)]
        for worker in workers:
            worker.start()
        time.sleep(1.0)
        first.stop()
        time.sleep(1.5)
        first.start()
        time.sleep(0.5)
        second.stop()
        time.sleep(1.5)
        stop.set()
        for worker in workers:
            worker.join(timeout=30)
        assert failures == []
        assert answered > 100
        metrics = httpx.get(f"{edge.api_url}/metrics").text
        assert upstream_errors(metrics, first) > 0, "the stopped node's failures are not counted"


def test_all_nodes_down_is_a_coded_502(tmp_path: Path) -> None:
    with AnvilNode() as node:
        with EdgeplaneProcess(tmp_path / "data", upstreams=(f"mainnet={node.url}",)) as edge:
            node.stop()
            body = {"jsonrpc": "2.0", "method": "eth_blockNumber", "params": [], "id": 4}
            response = httpx.post(edge.rpc_url(), json=body, timeout=30)
            assert response.status_code == 502
            assert response.json()["id"] == 4
            assert response.json()["error"]["code"] == -32002
            node.start()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                response = httpx.post(edge.rpc_url(), json=body, timeout=30)
                if response.status_code == 200:
                    break
                time.sleep(0.2)
            assert response.json()["result"].startswith("0x")
