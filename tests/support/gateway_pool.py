"""A gateway over real nodes, as the gateway's own tests build it: one network (``mainnet``), one upstream node per
URL, named ``node0``, ``node1``... in order, with the project's method policy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from edgeplane.config import GatewaySettings, UpstreamSettings
from edgeplane.gateway.policy import load_method_policy
from edgeplane.gateway.service import Gateway
from edgeplane.gateway.upstream import UpstreamNode
from edgeplane.gateway.upstream_pool import UpstreamPool

POLICY = load_method_policy()


def gateway_over(
    urls: Sequence[str], settings: GatewaySettings, *, timeout_seconds: float = 10.0, **upstream: Any
) -> Gateway:
    """A gateway answering ``mainnet`` from the nodes at ``urls``; ``upstream``: more ``UpstreamSettings`` of each."""
    nodes = [
        UpstreamNode(UpstreamSettings(url=url, name=f"node{index}", **upstream), timeout_seconds=timeout_seconds)
        for index, url in enumerate(urls)
    ]
    return Gateway(POLICY, {"mainnet": UpstreamPool("mainnet", nodes, settings)}, settings)


def close_gateway(gateway: Gateway) -> None:
    """Closes the gateway's upstream connections."""
    for pool in gateway.pools.values():
        for upstream in pool.nodes:
            upstream.close()
