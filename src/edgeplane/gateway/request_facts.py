"""The gateway's reading of a request for the Rules language: the ``edgeplane.jsonrpc.*`` facts with their cost.

``JsonRpcReader`` is a ``RequestFields.jsonrpc_reader``: the edge sets it on the requests of a zone, and it runs only
when an expression reads one of those fields (once per request), so a request whose rules never name them pays
nothing. The facts come from the rules' own lenient reading of the shared ``BodyDocument``
(``edgeplane.rules.jsonrpc_facts``); this adds what only the gateway knows: each call's price in the cost table
(``edgeplane.gateway.method_costs``) and the network's head, against which block tags are measured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from edgeplane.gateway.method_costs import MethodCosts
from edgeplane.gateway.upstream_pool import UpstreamPool
from edgeplane.rules import RequestFields
from edgeplane.rules.jsonrpc_facts import JsonRpcFacts, network_of, read_jsonrpc


class JsonRpcReader:
    """Reads a request's ``JsonRpcFacts``, priced by ``costs``; ``known_head(network)`` is the network's latest
    block number as the gateway last knew it, or None; it is asked at most once per request, and only when a call's
    cost depends on it (a method priced per block)."""

    __slots__ = ("costs", "known_head")

    def __init__(self, costs: MethodCosts, known_head: Callable[[str], int | None]) -> None:
        self.costs = costs
        self.known_head = known_head

    def __call__(self, request: RequestFields) -> JsonRpcFacts:
        """The request's facts; never raises (``known_head`` must not either)."""
        path = request.http_request_uri_path
        return read_jsonrpc(request.body_document, path, _Pricer(self.costs, self.known_head, network_of(path)))


def known_heads(pools: Mapping[str, UpstreamPool]) -> Callable[[str], int | None]:
    """A ``known_head`` over the gateway's pools: the highest head a node of the network's pool last reported
    (health checks and head reads record it), or None for a network without a pool or before any node reported
    one. It reads no node and never waits, so pricing a request costs no upstream call; the head may be a few
    seconds old, which moves a range ending at ``latest`` by as many blocks."""

    def known_head(network: str) -> int | None:
        pool = pools.get(network)
        if pool is None:
            return None
        heads = [node.health.head for node in pool.nodes if node.health.head is not None]
        return max(heads) if heads else None

    return known_head


class _Pricer:
    """One request's ``CallPricer``: the head is asked on the first call that needs it, and kept."""

    __slots__ = ("_head", "_head_known", "costs", "known_head", "network")

    def __init__(self, costs: MethodCosts, known_head: Callable[[str], int | None], network: str) -> None:
        self.costs = costs
        self.known_head = known_head
        self.network = network
        self._head: int | None = None
        self._head_known = False

    def __call__(self, method: str, params: Any) -> int:
        costs = self.costs
        entry = costs.entry(method)
        if not entry.per_block:
            return entry.base  # what ``cost`` answers for it, without finding the entry again
        if not self._head_known:
            self._head = self.known_head(self.network)
            self._head_known = True
        return costs.cost(method, params, self._head)
