"""Scored selection and the circuit breaker with real anvil nodes behind fault proxies: reads go to the best node,
a slow, dead, throttled or flapping one is left aside, a node lagging more than ``max_lag_blocks`` gets no reads that
need the head, an open circuit is probed after its pause, and ``/metrics`` and ``edgeplane status`` show why
(docs/gateway.md, "Scored selection")."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import REGISTRY, generate_latest

from edgeplane.cluster_status import ClusterState, UpstreamState, read_upstream_states, render_cluster_state
from edgeplane.config import GatewaySettings, ResponseCacheSettings, UpstreamSelectionSettings
from edgeplane.gateway.service import Gateway
from tests.support.anvil import AnvilNode
from tests.support.fault_proxy import FaultProxy
from tests.support.gateway_pool import close_gateway, gateway_over


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    with AnvilNode() as anvil:
        anvil.rpc("anvil_mine", [hex(40)])
        yield anvil


@pytest.fixture
async def pair(node: AnvilNode) -> AsyncIterator[tuple[FaultProxy, FaultProxy]]:
    async with FaultProxy(node.url) as first, FaultProxy(node.url) as second:
        yield first, second


def make_gateway(*urls: str, **settings: Any) -> Gateway:
    gateway_settings = GatewaySettings(cache=ResponseCacheSettings(enabled=False), **settings)
    return gateway_over(urls, gateway_settings, timeout_seconds=5)


async def ask(gateway: Gateway, method: str = "eth_chainId", params: list[Any] | None = None) -> Any:
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []})
    answer = await gateway.handle("mainnet", body)
    assert answer.status == 200, answer.body
    document = orjson.loads(answer.body)
    assert "error" not in document, document
    return document["result"]


def report(gateway: Gateway, upstream: str) -> Any:
    return next(found for found in gateway.pools["mainnet"].reports() if found.upstream == upstream)


async def test_reads_go_to_the_faster_node(pair: tuple[FaultProxy, FaultProxy]) -> None:
    fast, slow = pair
    slow.delay_seconds = 0.2
    gateway = make_gateway(slow.url, fast.url)
    try:
        for _ in range(30):
            await ask(gateway)
        # Each node is tried once before either has a latency; then the slow one is left aside.
        assert slow.count("eth_chainId") <= 2
        assert fast.count("eth_chainId") >= 28
        slow_report = report(gateway, "node0")
        assert slow_report.factors.latency < 0.5
        assert slow_report.state == "ok"
        assert "latency" in slow_report.reason
        assert report(gateway, "node1").score == pytest.approx(1.0)
    finally:
        close_gateway(gateway)


async def test_a_dead_node_costs_one_exchange_and_no_answer(pair: tuple[FaultProxy, FaultProxy]) -> None:
    alive, dead = pair
    dead.dead = True
    gateway = make_gateway(dead.url, alive.url)
    try:
        for _ in range(20):
            await ask(gateway)
        assert dead.exchanges <= 1
        assert report(gateway, "node0").state == "failing"
    finally:
        close_gateway(gateway)


async def test_a_throttling_node_is_left_aside(pair: tuple[FaultProxy, FaultProxy]) -> None:
    good, throttled = pair
    throttled.throttled = True
    gateway = make_gateway(throttled.url, good.url)
    try:
        for _ in range(20):
            await ask(gateway)
        assert throttled.exchanges <= 1
        assert report(gateway, "node0").factors.throttling < 1.0
    finally:
        close_gateway(gateway)


async def test_a_node_lagging_more_than_max_lag_blocks_gets_no_reads_at_the_head(
    pair: tuple[FaultProxy, FaultProxy],
) -> None:
    good, lagging = pair
    lagging.lag_blocks = 30
    good.delay_seconds = 0.02  # the lagging node answers faster: its lag alone keeps it out
    gateway = make_gateway(lagging.url, good.url, max_lag_blocks=16)
    try:
        await gateway.pools["mainnet"].check_health()
        address = "0x" + "11" * 20
        for _ in range(10):
            await ask(gateway, "eth_getBalance", [address, "latest"])
        assert lagging.count("eth_getBalance") == 0
        # A read of an old block it has may still go to it: only reads that need the head are kept from it.
        for _ in range(10):
            await ask(gateway, "eth_getBalance", [address, hex(5)])
        assert lagging.count("eth_getBalance") > 0
        assert report(gateway, "node0").state == "lagging"
    finally:
        close_gateway(gateway)


async def test_a_flapping_node_opens_its_circuit_and_is_probed_after_the_pause(
    pair: tuple[FaultProxy, FaultProxy],
) -> None:
    steady, flapping = pair
    steady.lag_blocks = 30  # behind: reads of the head go to the flapping node while its circuit is closed
    selection = UpstreamSelectionSettings(
        window_exchanges=6, circuit_min_exchanges=4, circuit_failure_ratio=0.5, circuit_half_open_after_seconds=0.5
    )
    gateway = make_gateway(steady.url, flapping.url, selection=selection, max_lag_blocks=16)
    pool = gateway.pools["mainnet"]
    try:
        await pool.check_health()
        read = ("eth_getBalance", ["0x" + "22" * 20, "latest"])
        seen: set[str] = set()
        for _ in range(8):
            # It fails a read, a health check finds it back, and it fails the next read: the circuit opens.
            flapping.dead = True
            await ask(gateway, *read)
            flapping.dead = False
            await pool.check_health()
            seen.add(report(gateway, "node1").state)
        assert "open" in seen
        failed_reads = flapping.count(read[0])
        # The circuit stopped the reads after 4 of the 8 rounds (each failed read reached the proxy at most twice: the
        # transport sends a read again once when a kept-alive connection ends without an answer).
        assert failed_reads <= 2 * 4
        # Steady now: after the pause one read is its probe, which closes the circuit.
        await asyncio.sleep(0.6)
        assert report(gateway, "node1").state == "half_open"
        for _ in range(3):
            await ask(gateway, *read)
        assert report(gateway, "node1").state == "ok"
        assert flapping.count(read[0]) > failed_reads
    finally:
        close_gateway(gateway)


async def test_metrics_show_each_upstreams_score_and_state(pair: tuple[FaultProxy, FaultProxy]) -> None:
    fast, slow = pair
    slow.delay_seconds = 0.1
    gateway = make_gateway(slow.url, fast.url)
    try:
        for _ in range(6):
            await ask(gateway)
        pool = gateway.pools["mainnet"]
        await pool.check_health()
        exposed = generate_latest(REGISTRY).decode()
        assert 'edgeplane_upstream_score{network="mainnet",upstream="node1"} 1.0' in exposed
        assert 'edgeplane_upstream_state{network="mainnet",state="ok",upstream="node0"} 1.0' in exposed
        assert 'edgeplane_upstream_score_factor{factor="latency",network="mainnet",upstream="node0"}' in exposed
    finally:
        close_gateway(gateway)


def test_status_shows_what_the_gateways_processes_published(tmp_path: Path) -> None:
    """edgeplane status reads what the processes of edgeplane serve wrote to their metrics directory."""
    assert read_upstream_states(tmp_path / "nothing") == []
    directory = tmp_path / "metrics"
    directory.mkdir()
    worker = (
        "from edgeplane.config import GatewaySettings, UpstreamSettings\n"
        "from edgeplane.gateway.upstream import UpstreamNode\n"
        "from edgeplane.gateway.upstream_pool import UpstreamPool\n"
        "nodes = [UpstreamNode(UpstreamSettings(url='http://127.0.0.1:9/', name=n), timeout_seconds=1) for n in 'ab']\n"
        "nodes[1].record_failure('refused')\n"
        "UpstreamPool('mainnet', nodes, GatewaySettings()).publish_reports()\n"
    )
    environment = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    subprocess.run([sys.executable, "-c", worker], env=environment, check=True, timeout=60)
    states = read_upstream_states(directory)
    assert [(state.upstream, state.state) for state in states] == [("a", "ok"), ("b", "failing")]
    assert states[0].reason == "as good as the best"
    assert states[0].factors == {"errors": 1.0, "lag": 1.0, "latency": 1.0, "throttling": 1.0}
    text = render_cluster_state(ClusterState("sqlite", [], True, [], [], [], [], None, upstreams=states))
    assert "mainnet      a" in text
    assert "failing" in text
    slow = UpstreamState("mainnet", "c", 0.1, "ok", {"latency": 0.1, "errors": 1.0, "throttling": 1.0, "lag": 1.0})
    assert slow.reason == "held back most by latency (0.10)"


async def test_a_flapping_node_never_fails_a_read(pair: tuple[FaultProxy, FaultProxy]) -> None:
    steady, flapping = pair
    flapping.flap(0.05)
    gateway = make_gateway(steady.url, flapping.url, health_check_interval_seconds=0.05)
    pool = gateway.pools["mainnet"]
    pool.start()
    try:
        for _ in range(60):
            assert await ask(gateway) == "0x7a69"
            await asyncio.sleep(0.01)
        assert flapping.exchanges > 0
    finally:
        await pool.stop()
        close_gateway(gateway)


async def test_a_slow_node_that_is_the_most_advanced_answers_what_only_it_has(
    node: AnvilNode, pair: tuple[FaultProxy, FaultProxy]
) -> None:
    advanced, behind = pair
    advanced.delay_seconds = 0.2
    behind.lag_blocks = 3
    gateway = make_gateway(behind.url, advanced.url)
    try:
        await gateway.pools["mainnet"].check_health()
        head = int(node.rpc("eth_blockNumber"), 16)
        for _ in range(4):
            assert int(await ask(gateway, "eth_blockNumber"), 16) == head
            block = await ask(gateway, "eth_getBlockByNumber", [hex(head), False])
            assert block["number"] == hex(head)
        assert advanced.count("eth_getBlockByNumber", [hex(head), False]) >= 1
    finally:
        close_gateway(gateway)
