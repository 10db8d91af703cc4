"""The pool of nodes behind one network: node choice, failover, bounded retries, health checks and the head block.

Reads are tried on up to ``max_attempts`` nodes (healthy ones first, in turn); a request that changes state
(``eth_sendRawTransaction``) goes to each node at most once, so a retry never sends it twice to the same node.

Heads: each node's head is what it last reported (health checks, the cache's head reads, its answers to
``eth_blockNumber``); the pool's head is the highest among answering nodes. A read about a block goes first to the
nodes that have it (for ``latest`` and reads by hash: a head at most ``max_lag_blocks`` below the pool's), and an
empty answer (``null``, or ``[]`` from ``eth_getLogs``) from a node whose head is below the block is asked again of
one that has it (``edgeplane.gateway.block_scope``). In a pool of several nodes the head told to clients
(``eth_blockNumber``) never goes backwards (``told_head``): a node that fell behind does not take it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
import structlog
from prometheus_client import Histogram

from edgeplane import metrics
from edgeplane.config import GatewaySettings
from edgeplane.gateway.block_scope import AT_HEAD, BlockScope, block_scope, is_empty_answer
from edgeplane.gateway.errors import UpstreamRejected, UpstreamUnavailable
from edgeplane.gateway.logs_splitting import LogsSplitter, answer_refusal
from edgeplane.gateway.read_hedging import HedgeDelays
from edgeplane.gateway.read_multiplexer import ReadMultiplexer, read_key
from edgeplane.gateway.upstream import UpstreamNode, UpstreamTransportError
from edgeplane.gateway.upstream_score import ScoreFactors, UpstreamScore
from edgeplane.jsonrpc.envelope import RpcRequest, encode_request
from edgeplane.jsonrpc.quantities import BlockRef

T = TypeVar("T")
log = structlog.get_logger(__name__)

# Pause before trying the same node again, when the pool has fewer nodes than attempts.
_SAME_NODE_RETRY_PAUSE_SECONDS = 0.05
# The JSON-RPC code of a node that refuses for its rate limit ("limit exceeded").
_THROTTLED = -32005
# Scores are compared in steps of this size: nodes within a step of each other take reads in turn.
_SCORE_STEP = 0.2
UPSTREAM_STATES = ("ok", "lagging", "half_open", "open", "failing")


@dataclass(frozen=True, slots=True)
class UpstreamReport:
    """What the pool says of one node, for ``/metrics`` and ``edgeplane status``: its score and its parts, its
    state (``ok``, ``lagging`` more than ``max_lag_blocks``, circuit ``half_open`` or ``open``, ``failing`` its last
    exchange or check), and why, in words."""

    upstream: str
    score: float
    factors: ScoreFactors
    state: str
    head: int | None
    lag_blocks: int | None
    reason: str


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
        self._told_head = -1  # the highest head told to a client (eth_blockNumber)
        self._scores = {node.label: UpstreamScore(settings.selection) for node in nodes}
        self.multiplexer = ReadMultiplexer() if settings.multiplex_reads else None
        self._hedge_delays = HedgeDelays(settings.selection)
        self._logs = LogsSplitter(self, concurrency=settings.logs_split_concurrency)

    # -- using the nodes ---------------------------------------------------------------------------------------

    def attempt_order(
        self, *, idempotent: bool, scope: BlockScope = None, method: str = "", avoid: frozenset[str] = frozenset()
    ) -> list[UpstreamNode]:
        """The nodes to try, in order: first the nodes that take reads (answering, circuit closed, and having the
        block ``scope`` names; a half-open node first, as its probe), best score first and in turn among nodes of
        about the same score; then the nodes without the block; then the failing and open ones as a last resort; the
        nodes ``avoid`` names after all these (a hedge's, which another exchange of the read is on)."""
        nodes = self.nodes
        if len(nodes) <= 1:  # nothing to choose: the one node, as many times as a read may be tried
            return list(nodes) * (self._settings.max_attempts if idempotent else 1)
        shift = next(self._turn) % len(nodes)
        rotated = nodes[shift:] + nodes[:shift]
        needed = None if scope is None else self._needed_block(scope, tolerance=self._settings.max_lag_blocks)
        probes: list[UpstreamNode] = []
        ready: list[UpstreamNode] = []
        behind: list[UpstreamNode] = []
        last: list[UpstreamNode] = []
        for node in rotated:
            score = self._scores[node.label]
            state = score.state()
            if not node.health.healthy or state == "open":
                last.append(node)
            elif state == "half_open":
                (probes if idempotent and score.takes_reads() else last).append(node)
            elif needed is not None and not self._holds(node, needed):
                behind.append(node)
            else:
                ready.append(node)
        if len(ready) > 1:
            ranked = self._ranked(ready, method)
            ready.sort(key=lambda node: -round(ranked[node.label] / _SCORE_STEP))
        order = probes + ready + behind + last
        if avoid:
            order = [node for node in order if node.label not in avoid] + [
                node for node in order if node.label in avoid
            ]
        if not idempotent:
            return order
        return [order[index % len(order)] for index in range(self._settings.max_attempts)]

    def _ranked(self, nodes: list[UpstreamNode], method: str) -> dict[str, float]:
        """The score of each of ``nodes`` for a read of ``method``."""
        latencies = [latency for node in nodes if (latency := self._scores[node.label].latency(method)) is not None]
        fastest = min(latencies) if latencies else None
        highest = self.highest_head()
        return {
            node.label: self._scores[node.label]
            .factors(method, fastest, self._lag(node, highest), self._settings.max_lag_blocks)
            .score
            for node in nodes
        }

    @staticmethod
    def _lag(node: UpstreamNode, highest: int | None) -> int | None:
        head = node.health.head
        return None if head is None or highest is None else highest - head

    async def execute(
        self,
        operation: Callable[[UpstreamNode], Awaitable[T]],
        *,
        idempotent: bool = True,
        scope: BlockScope = None,
        empty: Callable[[T], bool] | None = None,
        method: str = "",
        throttled: Callable[[T], bool] | None = None,
        avoid: frozenset[str] = frozenset(),
        on_node: Callable[[UpstreamNode], None] | None = None,
    ) -> T:
        """Runs ``operation`` against nodes until one answers.

        A node's JSON-RPC error (``UpstreamRejected``) is its answer and is raised at once. With ``scope`` and
        ``empty``: an answer ``empty`` calls empty, from a node whose head is below the block ``scope`` names, is
        asked again of one node that has the block, whose answer is the answer (the first one when it fails).
        ``method`` names the read for the nodes' latency per method; ``throttled`` tells an answer that says the node
        is throttling (it is passed on all the same, and counts against the node's score). ``avoid``: labels of nodes
        to try last; ``on_node`` is told each node as it is tried.
        Raises ``UpstreamUnavailable`` when no node is configured or every attempt failed in transport.
        """
        attempts = self.attempt_order(idempotent=idempotent, scope=scope, method=method, avoid=avoid)
        if not attempts:
            raise UpstreamUnavailable(f"no upstream node is configured for network {self.network!r}")
        tried: set[str] = set()
        queue = list(attempts)
        first_empty: tuple[T] | None = None
        while queue:
            node = queue.pop(0)
            if node.label in tried:
                await asyncio.sleep(_SAME_NODE_RETRY_PAUSE_SECONDS)
            tried.add(node.label)
            if on_node is not None:
                on_node(node)
            started = time.perf_counter()
            try:
                result = await operation(node)
            except UpstreamTransportError as exc:
                self._failed(node, exc)
                continue
            except UpstreamRejected as rejected:
                self._answered(node, started, method, throttled=rejected.code == _THROTTLED)
                raise
            self._answered(node, started, method, throttled=throttled is not None and throttled(result))
            if first_empty is None and scope is not None and empty is not None and empty(result):
                needed = self._needed_block(scope, tolerance=0)
                if needed is not None and not self._holds(node, needed):
                    holder = self._holder(needed, below=node, tried=tried)
                    if holder is not None:
                        log.info(
                            "empty answer from a node behind the block, asked again",
                            network=self.network,
                            upstream=node.label,
                            block=needed,
                            again=holder.label,
                        )
                        first_empty = (result,)
                        queue = [holder]
                        continue
            return result
        if first_empty is not None:
            return first_empty[0]
        raise UpstreamUnavailable(
            f"no upstream node of network {self.network!r} could answer "
            f"({len(attempts)} attempt{'s' if len(attempts) != 1 else ''})"
        )

    def _needed_block(self, scope: BlockScope, *, tolerance: int) -> int | None:
        """The lowest head a node must have to answer a read of ``scope``: the block itself, or for the head the
        pool's head less ``tolerance``; None when not known."""
        if scope is None:
            return None
        if scope == AT_HEAD:
            highest = self.highest_head()
            return None if highest is None else highest - tolerance
        return scope

    def _holder(self, block: int, *, below: UpstreamNode, tried: set[str]) -> UpstreamNode | None:
        """A healthy node not yet tried that has ``block``, else the one with the highest head above ``below``'s
        (heads are known as of the last reading, so the block may be newer than any known head); None when there is
        no such node."""
        others = [node for node in self.nodes if node.health.healthy and node.label not in tried]
        for node in others:
            if self._holds(node, block):
                return node
        floor = -1 if below.health.head is None else below.health.head
        ahead = [node for node in others if node.health.head is not None and node.health.head > floor]
        return max(ahead, key=lambda node: node.health.head or 0) if ahead else None

    @staticmethod
    def _holds(node: UpstreamNode, block: int) -> bool:
        head = node.health.head
        return head is not None and head >= block

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
        score = self._scores.get(node.label)
        if score is not None:
            was = score.state()
            score.failed(throttled=exc.throttled)
            if was != "open" and score.state() == "open":
                failed, total = score.failure_counts()
                log.warning(
                    "upstream circuit opened",
                    network=self.network,
                    upstream=node.label,
                    failed=failed,
                    exchanges=total,
                )
        if node.health.healthy:
            log.warning("upstream failed", network=self.network, upstream=node.label, error=str(exc))
        node.record_failure(str(exc))
        metrics.UPSTREAM_HEALTHY.labels(self.network, node.label).set(0)

    def _answered(self, node: UpstreamNode, started: float, method: str = "", *, throttled: bool = False) -> None:
        seconds = time.perf_counter() - started
        histogram = self._latency.get(node.label)
        if histogram is None:
            histogram = self._latency[node.label] = metrics.UPSTREAM_LATENCY.labels(self.network, node.label)
        histogram.observe(seconds)
        score = self._scores.get(node.label)
        if score is not None:
            if score.circuit != "closed":
                log.info("upstream circuit closed", network=self.network, upstream=node.label)
            score.answered(method, seconds, throttled=throttled)
        if not node.health.healthy:
            log.info("upstream recovered", network=self.network, upstream=node.label)
            metrics.UPSTREAM_HEALTHY.labels(self.network, node.label).set(1)
        node.record_success()

    # -- reports -----------------------------------------------------------------------------------------------

    def reports(self) -> list[UpstreamReport]:
        """Each node's score, state and why (see ``UpstreamReport``), for reads of every method together."""
        highest = self.highest_head()
        latencies = [latency for score in self._scores.values() if (latency := score.latency("")) is not None]
        fastest = min(latencies) if latencies else None
        max_lag = self._settings.max_lag_blocks
        found = []
        for node in self.nodes:
            score = self._scores[node.label]
            lag = self._lag(node, highest)
            factors = score.factors("", fastest, lag, max_lag)
            circuit = score.state()
            failed, total = score.failure_counts()
            state: str
            if circuit != "closed":
                state = circuit
                reason = f"circuit {circuit.replace('_', '-')}: {failed} of the last {total} exchanges failed"
            elif not node.health.healthy:
                state, reason = "failing", f"last exchange failed: {node.health.last_error}"
            elif lag is not None and lag > max_lag:
                state, reason = "lagging", f"head {lag} blocks behind the pool's (more than {max_lag})"
            else:
                state = "ok"
                weakest = min(
                    ("latency", factors.latency),
                    ("errors", factors.errors),
                    ("throttling", factors.throttling),
                    ("lag", factors.lag),
                    key=lambda part: part[1],
                )
                reason = "as good as the best" if weakest[1] >= 1.0 else f"held back most by {weakest[0]}"
            found.append(UpstreamReport(node.label, factors.score, factors, state, node.health.head, lag, reason))
        return found

    def publish_reports(self) -> None:
        """Sets the nodes' score and state gauges of ``/metrics`` from ``reports``."""
        for report in self.reports():
            metrics.UPSTREAM_SCORE.labels(self.network, report.upstream).set(report.score)
            for factor in ("latency", "errors", "throttling", "lag"):
                metrics.UPSTREAM_SCORE_FACTOR.labels(self.network, report.upstream, factor).set(
                    getattr(report.factors, factor)
                )
            for state in UPSTREAM_STATES:
                metrics.UPSTREAM_STATE.labels(self.network, report.upstream, state).set(
                    1 if state == report.state else 0
                )

    async def forward(self, request: RpcRequest, *, idempotent: bool, params: bytes | None = None) -> tuple[bytes, str]:
        """Sends a checked request (written again by ``encode_request``, with the caller's id; ``params``: its
        params as already written) and returns the node's raw answer, which echoes that id, and the label of the node
        that gave it. A read about a block is answered by a node that has it (see the module docstring), and
        identical reads in flight share one exchange (``edgeplane.gateway.read_multiplexer``); an ``eth_getLogs`` range
        too large for a node is split and merged (``edgeplane.gateway.logs_splitting``)."""
        body = encode_request(request, params)
        method = request.method
        learns_head = method == "eth_blockNumber"
        splits = method == "eth_getLogs" and idempotent

        async def post(node: UpstreamNode) -> tuple[bytes, str]:
            if splits:  # a range the node refuses as too large is split (edgeplane.gateway.logs_splitting)
                return await self._logs.fetch(node, request, body), node.label
            answer = await node.post(body, idempotent=idempotent)
            if learns_head:
                head = _block_number_result(answer)
                if head is not None:
                    node.record_head(head)
            return answer, node.label

        if not idempotent:
            return await self.execute(post, idempotent=False, method=method)

        scope = block_scope(method, request.params)

        def attempt(
            avoid: frozenset[str], on_node: Callable[[UpstreamNode], None] | None
        ) -> Coroutine[Any, Any, tuple[bytes, str]]:
            return self.execute(
                post,
                scope=scope,
                empty=lambda answer: is_empty_answer(method, answer[0]),
                method=method,
                throttled=lambda answer: _says_throttled(answer[0]) and not (splits and answer_refusal(answer[0])),
                avoid=avoid,
                on_node=on_node,
            )

        def read() -> Awaitable[tuple[bytes, str]]:
            return self._hedged(method, attempt)

        if self.multiplexer is None:
            return await read()
        key = read_key(method, request.params, self.highest_head())
        return await self.multiplexer.share(key, request.id, read)

    async def _hedged(
        self,
        method: str,
        attempt: Callable[[frozenset[str], Callable[[UpstreamNode], None] | None], Coroutine[Any, Any, T]],
    ) -> T:
        """A read, hedged (``edgeplane.gateway.read_hedging``): ``attempt(avoid, on_node)`` runs it on the pool's
        nodes, those ``avoid`` names last. The first attempt runs here; once it has waited the hedge delay, another
        starts beside it (a task) that avoids the nodes the first is on, up to ``hedge_max_extra`` of them. The first
        answer wins and the other attempts are cancelled; when every attempt fails, the first one's error is raised.

        Why this shape: most reads are never hedged, so a read costs one timer, not a task and a wait."""
        extra = self._settings.selection.hedge_max_extra
        me = asyncio.current_task()
        if extra == 0 or len(self.nodes) < 2 or me is None:  # (no task to cancel: not hedged)
            return await attempt(frozenset(), None)
        loop = asyncio.get_running_loop()
        busy: set[str] = set()
        hedges: list[asyncio.Task[T]] = []
        won: list[asyncio.Task[T]] = []  # the hedge that answered first, when one did
        settled = False  # the first attempt is over: a hedge that answers now must not cancel this task
        delay = self._hedge_delays.delay(method)
        began = time.perf_counter()

        def started(node: UpstreamNode) -> None:
            busy.add(node.label)

        def landed(hedge: asyncio.Task[T]) -> None:
            if not settled and not won and not hedge.cancelled() and hedge.exception() is None:
                won.append(hedge)
                me.cancel()  # the first attempt, still running here, has lost

        def launch() -> None:
            log.info("read hedged", network=self.network, method=method, delay=round(delay, 4))
            hedge = loop.create_task(attempt(frozenset(busy), started))
            hedge.add_done_callback(landed)
            hedges.append(hedge)
            if len(hedges) < extra:
                timers.append(loop.call_later(delay, launch))

        timers = [loop.call_later(delay, launch)]
        try:
            try:
                result = await attempt(frozenset(), started)
                settled = True
            except asyncio.CancelledError:
                settled = True
                if not won or me.uncancel() > 0:
                    raise  # cancelled by the caller, not by a hedge that won
                result = won[0].result()
            except Exception as error:
                settled = True
                for timer in timers:
                    timer.cancel()
                # The first attempt failed: a hedge still running may yet answer.
                for hedge in hedges:
                    with contextlib.suppress(Exception):
                        return await hedge
                raise error
            self._hedge_delays.observe(method, time.perf_counter() - began)
            return result
        finally:
            for timer in timers:
                timer.cancel()
            for hedge in hedges:
                if not hedge.done():
                    hedge.cancel()

    # -- block numbers -----------------------------------------------------------------------------------------

    def head_of(self, label: str) -> int | None:
        """The head the node labelled ``label`` last reported (None when unknown, or no such node)."""
        return next((node.health.head for node in self.nodes if node.label == label), None)

    def highest_head(self) -> int | None:
        """The highest head any answering node reported (None when none did)."""
        heads = [node.health.head for node in self.nodes if node.health.healthy and node.health.head is not None]
        return max(heads) if heads else None

    def told_head(self, number: int) -> int:
        """The head block to tell a client whom a node told ``number``: in a pool of several nodes never lower than
        a head told before, nor than the pool's head; a pool of one node tells what its node says."""
        if len(self.nodes) < 2:
            return number
        highest = self.highest_head()
        floor = max(self._told_head, -1 if highest is None else highest)
        if number >= floor:
            self._told_head = number
            return number
        self._told_head = floor
        return floor

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
            score = self._scores[node.label]
            if not node.health.healthy:
                score.failed()  # a failed check is a failed exchange (a passed one is not a read: latency only)
            elif node.health.latency_seconds:
                score.observe_latency(node.health.latency_seconds)
            metrics.UPSTREAM_HEALTHY.labels(self.network, node.label).set(1 if node.health.healthy else 0)
            if node.health.head is not None:
                metrics.UPSTREAM_HEAD.labels(self.network, node.label).set(node.health.head)
        self.publish_reports()

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


def _block_number_result(answer: bytes) -> int | None:
    """The block number an ``eth_blockNumber`` answer holds, None when it holds none."""
    try:
        document = orjson.loads(answer)
        result = document.get("result") if isinstance(document, dict) else None
        return int(result, 16) if isinstance(result, str) else None
    except (orjson.JSONDecodeError, ValueError):
        return None


def _says_throttled(answer: bytes) -> bool:
    """Whether a node's answer is its rate limit's error (-32005), read only in a short answer that names one."""
    return len(answer) < 1024 and b"-32005" in answer and b'"error"' in answer
