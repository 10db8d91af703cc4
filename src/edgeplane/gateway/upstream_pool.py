"""The pool of nodes behind one network: node choice, failover, bounded retries, health checks and the head block.

Reads are tried on up to ``max_attempts`` nodes (healthy ones first, in turn); a request that changes state
(``eth_sendRawTransaction``) goes to each node at most once, so a retry never sends it twice to the same node.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog
from prometheus_client import Histogram

from edgeplane import metrics
from edgeplane.config import GatewaySettings
from edgeplane.gateway.errors import UpstreamRejected, UpstreamUnavailable
from edgeplane.gateway.upstream import UpstreamNode, UpstreamTransportError
from edgeplane.jsonrpc.envelope import RpcRequest, encode_request
from edgeplane.jsonrpc.quantities import BlockRef

T = TypeVar("T")
log = structlog.get_logger(__name__)

# Pause before trying the same node again, when the pool has fewer nodes than attempts.
_SAME_NODE_RETRY_PAUSE_SECONDS = 0.05


class UpstreamPool:
    """The nodes of one network and the policy for using them."""

    def __init__(self, network: str, nodes: list[UpstreamNode], settings: GatewaySettings) -> None:
        self.network = network
        self.nodes = nodes
        self._settings = settings
        self._turn = itertools.count()
        self._tag_cache: dict[str, tuple[int, float]] = {}
        self._health_task: asyncio.Task[None] | None = None
        self._latency: dict[str, Histogram] = {}
        self._stragglers: set[asyncio.Future[Any]] = set()  # calls of ask_each left to finish on their own

    # -- using the nodes ---------------------------------------------------------------------------------------

    def attempt_order(self, *, idempotent: bool) -> list[UpstreamNode]:
        """The nodes to try, in order: healthy nodes in turn, then the others as a last resort."""
        if not self.nodes:
            return []
        healthy = [node for node in self.nodes if node.health.healthy]
        failing = [node for node in self.nodes if not node.health.healthy]
        if healthy:
            shift = next(self._turn) % len(healthy)
            healthy = healthy[shift:] + healthy[:shift]
        order = healthy + failing
        if not idempotent:
            return order
        return [order[index % len(order)] for index in range(self._settings.max_attempts)]

    async def execute(self, operation: Callable[[UpstreamNode], Awaitable[T]], *, idempotent: bool = True) -> T:
        """Runs ``operation`` against nodes until one answers.

        A node's JSON-RPC error (``UpstreamRejected``) is its answer and is raised at once. Raises
        ``UpstreamUnavailable`` when no node is configured or every attempt failed in transport.
        """
        attempts = self.attempt_order(idempotent=idempotent)
        if not attempts:
            raise UpstreamUnavailable(f"no upstream node is configured for network {self.network!r}")
        tried: set[str] = set()
        for node in attempts:
            if node.label in tried:
                await asyncio.sleep(_SAME_NODE_RETRY_PAUSE_SECONDS)
            tried.add(node.label)
            started = time.perf_counter()
            try:
                result = await operation(node)
            except UpstreamTransportError as exc:
                self._failed(node, exc)
                continue
            except UpstreamRejected:
                self._answered(node, started)
                raise
            self._answered(node, started)
            return result
        raise UpstreamUnavailable(
            f"no upstream node of network {self.network!r} could answer "
            f"({len(attempts)} attempt{'s' if len(attempts) != 1 else ''})"
        )

    async def ask_each(
        self, operation: Callable[[UpstreamNode], Awaitable[T]], *, grace_seconds: float
    ) -> list[tuple[UpstreamNode, T]]:
        """Runs ``operation`` once on every healthy node (on every node when none is healthy), concurrently.

        Returns the nodes that answered, with their answers; a node's transport failure is recorded as in
        ``execute`` and leaves it out, and so does its JSON-RPC error. Nodes that have not answered ``grace_seconds``
        after the first answer are left out too (their calls finish in the background), so that one slow node does
        not hold up the others' answers.
        """
        nodes = [node for node in self.nodes if node.health.healthy] or list(self.nodes)

        async def ask(node: UpstreamNode) -> tuple[UpstreamNode, T] | None:
            started = time.perf_counter()
            try:
                answer = await operation(node)
            except UpstreamTransportError as exc:
                self._failed(node, exc)
                return None
            except UpstreamRejected:
                self._answered(node, started)
                return None
            self._answered(node, started)
            return node, answer

        pending = {asyncio.ensure_future(ask(node)) for node in nodes}
        found: list[tuple[UpstreamNode, T]] = []
        try:
            while pending and not found:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                found.extend(answer for task in done if (answer := task.result()) is not None)
            if pending:
                done, pending = await asyncio.wait(pending, timeout=grace_seconds)
                found.extend(answer for task in done if (answer := task.result()) is not None)
        except BaseException:
            for task in pending:
                task.cancel()
            raise
        # Slower nodes finish in the background (their own timeout bounds them): cancelling would close their
        # connections, and the next call would pay for a new one and likely be late again.
        for task in pending:
            self._stragglers.add(task)
            task.add_done_callback(self._straggler_done)
        return found

    def _straggler_done(self, task: asyncio.Future[Any]) -> None:
        self._stragglers.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved here; a node's failure was recorded by the call itself

    def _failed(self, node: UpstreamNode, exc: UpstreamTransportError) -> None:
        metrics.UPSTREAM_ERRORS.labels(self.network, node.label).inc()
        if node.health.healthy:
            log.warning("upstream failed", network=self.network, upstream=node.label, error=str(exc))
        node.record_failure(str(exc))
        metrics.UPSTREAM_HEALTHY.labels(self.network, node.label).set(0)

    def _answered(self, node: UpstreamNode, started: float) -> None:
        histogram = self._latency.get(node.label)
        if histogram is None:
            histogram = self._latency[node.label] = metrics.UPSTREAM_LATENCY.labels(self.network, node.label)
        histogram.observe(time.perf_counter() - started)
        if not node.health.healthy:
            log.info("upstream recovered", network=self.network, upstream=node.label)
            metrics.UPSTREAM_HEALTHY.labels(self.network, node.label).set(1)
        node.record_success()

    async def forward(self, request: RpcRequest, *, idempotent: bool) -> tuple[bytes, str]:
        """Sends a checked request (written again by ``encode_request``, with the caller's id) and returns the
        node's raw answer, which echoes that id, and the label of the node that gave it."""
        body = encode_request(request)

        async def post(node: UpstreamNode) -> tuple[bytes, str]:
            return await node.post(body, idempotent=idempotent), node.label

        return await self.execute(post, idempotent=idempotent)

    # -- block numbers -----------------------------------------------------------------------------------------

    async def head(self) -> int:
        """The highest head block among answering nodes, read again when older than ``head_max_age_seconds``."""
        now = time.monotonic()
        max_age = self._settings.head_max_age_seconds
        fresh = [
            node.health.head
            for node in self.nodes
            if node.health.healthy and node.health.head is not None and now - node.health.head_seen_at <= max_age
        ]
        if fresh:
            return max(fresh)

        async def read_head(node: UpstreamNode) -> int:
            head = int(str(await node.call("eth_blockNumber", [])), 16)
            node.record_head(head)
            return head

        return await self.execute(read_head)

    async def tag_block_number(self, tag: str) -> int:
        """The number of the block a tag (``safe``, ``finalized``) names now, cached like the head."""
        cached = self._tag_cache.get(tag)
        now = time.monotonic()
        if cached is not None and now - cached[1] <= self._settings.head_max_age_seconds:
            return cached[0]

        async def read_tag(node: UpstreamNode) -> int:
            block = await node.call("eth_getBlockByNumber", [tag, False])
            if not isinstance(block, dict) or "number" not in block:
                raise UpstreamRejected({"code": -32000, "message": f"the node knows no {tag} block"})
            return int(str(block["number"]), 16)

        number = await self.execute(read_tag)
        self._tag_cache[tag] = (number, now)
        return number

    async def resolve(self, ref: BlockRef) -> int:
        """The block number a block parameter names now."""
        if isinstance(ref, int):
            return ref
        if ref == "earliest":
            return 0
        if ref in ("latest", "pending"):
            return await self.head()
        return await self.tag_block_number(ref)

    # -- health ------------------------------------------------------------------------------------------------

    async def check_health(self) -> None:
        """Checks every node once and publishes the result as metrics."""
        timeout = self._settings.health_check_timeout_seconds
        await asyncio.gather(*(node.check(timeout) for node in self.nodes))
        for node in self.nodes:
            metrics.UPSTREAM_HEALTHY.labels(self.network, node.label).set(1 if node.health.healthy else 0)
            if node.health.head is not None:
                metrics.UPSTREAM_HEAD.labels(self.network, node.label).set(node.health.head)

    async def _health_loop(self) -> None:
        while True:
            try:
                await self.check_health()
            except Exception:  # a health check must never end the loop
                log.exception("health check failed", network=self.network)
            await asyncio.sleep(self._settings.health_check_interval_seconds)

    def start(self) -> None:
        """Starts the periodic health checks."""
        if self.nodes and self._health_task is None:
            self._health_task = asyncio.create_task(self._health_loop(), name=f"health-{self.network}")

    async def stop(self) -> None:
        """Stops the health checks and the calls still running."""
        for task in list(self._stragglers):
            task.cancel()
        if self._health_task is not None:
            self._health_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._health_task
            self._health_task = None
