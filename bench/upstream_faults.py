"""The gateway's pool against faulty nodes: anvil behind the tests' fault proxies (``tests/support/fault_proxy.py``),
the gateway in this process, as an operator would see it.

- slow: two nodes, one answering ``--slow-ms`` late; the p50 and p90 of reads through the gateway against the fast
  node's own, measured in the same run (one read at a time, so the figures are latencies, not queueing);
- herd: 50 identical concurrent reads of a block nobody asked before (with the response cache, two nodes): the
  exchanges they cost, counted by the proxies;
- lag: two nodes, one ``--lag`` blocks behind: the heads told to ``eth_blockNumber`` in turn, and whether they
  ever went backwards.

    python bench/upstream_faults.py [--reads 200] [--slow-ms 800] [--lag 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import itertools

from edgeplane.config import GatewaySettings, ResponseCacheSettings, UpstreamSettings
from edgeplane.gateway.policy import load_method_policy
from edgeplane.gateway.service import Gateway
from edgeplane.gateway.upstream import UpstreamNode
from edgeplane.gateway.upstream_pool import UpstreamPool
from tests.support.anvil import AnvilNode
from tests.support.fault_proxy import FaultProxy


def gateway_of(*urls: str, cache: bool) -> Gateway:
    settings = GatewaySettings(cache=ResponseCacheSettings(enabled=cache))
    nodes = [
        UpstreamNode(UpstreamSettings(url=url, name=f"node{index}"), timeout_seconds=30)
        for index, url in enumerate(urls)
    ]
    return Gateway(load_method_policy(), {"mainnet": UpstreamPool("mainnet", nodes, settings)}, settings)


def close(gateway: Gateway) -> None:
    for pool in gateway.pools.values():
        for node in pool.nodes:
            node.close()


def body(method: str, params: list[Any], request_id: int = 1) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q * 100) - 1]


async def slow(node: AnvilNode, reads: int, slow_ms: float) -> dict[str, float]:
    async with FaultProxy(node.url) as late, FaultProxy(node.url) as fast:
        late.delay_seconds = slow_ms / 1000
        gateway = gateway_of(late.url, fast.url, cache=False)
        direct = UpstreamNode(UpstreamSettings(url=fast.url), timeout_seconds=30)
        through: list[float] = []
        own: list[float] = []
        try:
            for index in range(reads):
                # A read nobody asked before each time: no cache, no sharing, only the choice of node.
                request = body("eth_getBalance", ["0x" + f"{index:040x}", "latest"])
                started = time.perf_counter()
                await gateway.handle("mainnet", request)
                through.append(time.perf_counter() - started)
                started = time.perf_counter()
                await direct.post(request, idempotent=True)
                own.append(time.perf_counter() - started)
        finally:
            close(gateway)
            direct.close()
    return {
        "gateway_p50_ms": quantile(through, 0.5) * 1000,
        "gateway_p90_ms": quantile(through, 0.9) * 1000,
        "gateway_max_ms": max(through) * 1000,
        "fast_direct_p90_ms": quantile(own, 0.9) * 1000,
        "p90_ratio": quantile(through, 0.9) / quantile(own, 0.9),
        "slow_node_reads": late.count("eth_getBalance"),
    }


async def herd(node: AnvilNode) -> dict[str, int]:
    async with FaultProxy(node.url) as first, FaultProxy(node.url) as second:
        first.delay_seconds = second.delay_seconds = 0.01
        gateway = gateway_of(first.url, second.url, cache=True)
        try:
            await gateway.pools["mainnet"].check_health()
            node.rpc("anvil_mine", ["0x1"])
            block = node.rpc("eth_blockNumber")
            first.reset_counts()
            second.reset_counts()
            await asyncio.gather(
                *(gateway.handle("mainnet", body("eth_getBlockByNumber", [block, True], index)) for index in range(50))
            )
        finally:
            close(gateway)
    return {"reads": 50, "upstream_exchanges": first.exchanges + second.exchanges}


async def lag(node: AnvilNode, blocks: int) -> dict[str, Any]:
    node.rpc("anvil_mine", [hex(blocks + 10)])
    async with FaultProxy(node.url) as ahead, FaultProxy(node.url) as behind:
        behind.lag_blocks = blocks
        gateway = gateway_of(behind.url, ahead.url, cache=False)
        told: list[int] = []
        try:
            for _ in range(40):
                answer = await gateway.handle("mainnet", body("eth_blockNumber", []))
                told.append(int(orjson.loads(answer.body)["result"], 16))
        finally:
            close(gateway)
    backwards = sum(1 for before, after in itertools.pairwise(told) if after < before)
    return {
        "first": told[0],
        "last": told[-1],
        "lowest_after_highest": min(told[told.index(max(told)) :]),
        "went_backwards": backwards,
    }


async def main(args: argparse.Namespace) -> None:
    with AnvilNode() as node:
        print("slow:", orjson.dumps(await slow(node, args.reads, args.slow_ms)).decode())
        print("herd:", orjson.dumps(await herd(node)).decode())
        print("lag:", orjson.dumps(await lag(node, args.lag)).decode())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--slow-ms", type=float, default=800.0)
    parser.add_argument("--lag", type=int, default=30)
    asyncio.run(main(parser.parse_args()))
