"""The gateway: one JSON-RPC body for one network in, one HTTP status and body out.

Order of checks for a single request: network (404), JSON (400, -32700), envelope (400, -32600), method policy
(403, -32001), limits (200, -32602), then the upstream pool (502, -32002, when no node can answer). A node's own
JSON-RPC answer, error or not, is passed through with HTTP 200. In a batch every item is answered in its place with
HTTP 200; items that pass the checks go to the node in one upstream batch.

What a node receives is the checked request written again (``edgeplane.jsonrpc.envelope.encode_request``, or the
node client's own calls), never the caller's bytes: the gateway checks one reading of the body, and a node that reads
JSON by other rules (Go's, ignoring case) must not run another.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import structlog

from edgeplane import metrics
from edgeplane.batched_counts import BatchedCount
from edgeplane.body_document import BodyDocument
from edgeplane.config import GatewaySettings
from edgeplane.gateway.errors import GatewayError, MethodNotAllowed, UpstreamRejected, UpstreamUnavailable
from edgeplane.gateway.limits import LimitExceeded, check_fee_history, check_get_logs, check_get_logs_at_once
from edgeplane.gateway.logs_splitting import refusal
from edgeplane.gateway.policy import MethodPolicy
from edgeplane.gateway.response_cache import CacheStatus, ResponseCache
from edgeplane.gateway.trace_filter import TraceFilterService
from edgeplane.gateway.upstream import UpstreamNode
from edgeplane.gateway.upstream_pool import UpstreamPool
from edgeplane.jsonrpc.envelope import (
    RejectedItem,
    RpcRequest,
    encode,
    error_object,
    parse_body,
    result_object,
)
from edgeplane.jsonrpc.errors import INVALID_REQUEST, RpcError

log = structlog.get_logger(__name__)


# Methods whose parameters are checked against a limit before any answer (``_check_limits``).
_LIMITED_METHODS = frozenset({"eth_getLogs", "eth_feeHistory"})


class UnknownNetwork(GatewayError):
    """The path names a network this gateway does not serve."""

    code = INVALID_REQUEST
    http_status = 404


@dataclass(slots=True)
class GatewayResponse:
    """What the edge sends back: an HTTP status and a JSON body; whether the response cache answered (``dynamic``:
    not a request the cache keeps); and, for the request log, what the body asked and how it went: the JSON-RPC
    ``method`` (of a batch, its first request's; "" when there is none), the number of ``requests`` (1, a batch's
    size, 0 for a body not read as JSON-RPC: not JSON, or sent to a network the gateway does not serve) and the
    first ``error_code`` of the answer (None without one); the label of the ``upstream`` node that answered ("" when
    none did: the cache, a refusal, ``trace_filter``). Never changed once made (not frozen: see ``EdgeResponse``)."""

    status: int
    body: bytes
    cache_status: CacheStatus = "dynamic"
    method: str = ""
    requests: int = 1
    error_code: int | None = None
    upstream: str = ""


class Gateway:
    """Answers JSON-RPC requests for the configured networks."""

    def __init__(self, policy: MethodPolicy, pools: Mapping[str, UpstreamPool], settings: GatewaySettings) -> None:
        self.policy = policy
        self.pools = dict(pools)
        self.settings = settings
        self._traces = TraceFilterService(policy.limits, concurrency=settings.trace_filter_concurrency)
        self.caches = (
            {
                network: ResponseCache(pool, settings.cache, realtime=policy.realtime)
                for network, pool in self.pools.items()
            }
            if settings.cache.enabled
            else {}
        )
        known = policy.supported | set(policy.unsupported)
        self._metric_names = frozenset(known)
        # Labelled children are looked up once: prometheus_client's labels() costs more than the increment.
        self._counters: dict[tuple[str, str, str], BatchedCount] = {}

    def _method_label(self, method: str) -> str:
        return method if method in self._metric_names else "other"

    def _count(self, network: str, method: str, outcome: str) -> None:
        key = (network, method, outcome)
        counter = self._counters.get(key)
        if counter is None:
            counter = BatchedCount(metrics.GATEWAY_REQUESTS.labels(network, self._method_label(method), outcome))
            self._counters[key] = counter
        counter.add()

    def unknown_network(self, network: str) -> GatewayResponse:
        """The 404 answer for a network this gateway does not serve."""
        error = UnknownNetwork(f"unknown network {network!r}; this gateway serves: {', '.join(sorted(self.pools))}")
        return GatewayResponse(error.http_status, encode(error_object(None, error)), requests=0, error_code=error.code)

    def respond(self, network: str, body: BodyDocument) -> GatewayResponse | Awaitable[GatewayResponse]:
        """Answers one request body sent to ``/v1/<network>``, read through its one JSON reading (the edge's, shared
        with the firewall): at once when no node needs asking (a refusal, an answer from the response cache), else an
        awaitable of the answer. Never raises for anything a caller sends.

        Why two shapes: a cache hit is the most common request by far, and answering it without a coroutine saves
        the edge a task per request (see ``EdgeHandler.handle``)."""
        pool = self.pools.get(network)
        if pool is None:
            return self.unknown_network(network)
        try:
            parsed = parse_body(body, max_batch_size=self.settings.max_batch_size)
        except RpcError as error:
            self._count(network, "", "invalid")
            return GatewayResponse(
                error.http_status, encode(error_object(None, error)), requests=0, error_code=error.code
            )
        if parsed.is_batch:
            return self._batch(pool, parsed.items)
        item = parsed.items[0]
        if isinstance(item, RejectedItem):
            self._count(network, "", "invalid")
            return GatewayResponse(
                item.error.http_status, encode(error_object(item.id, item.error)), error_code=item.error.code
            )
        method = item.method
        try:
            self._check_policy(method)
        except MethodNotAllowed as error:
            return self._refused(pool, item, error)
        limits_checked = method not in _LIMITED_METHODS
        if not limits_checked:
            try:
                limits_checked = self._check_limits_at_once(item)
            except RpcError as error:
                return self._refused(pool, item, error)
        cache = self.caches.get(network) if method in self.policy.cacheable else None
        if cache is not None and limits_checked:
            hit = cache.hit(item)
            if hit is not None:
                self._count(network, method, "answered")
                if method == "eth_blockNumber":
                    hit = _told_head(pool, hit)
                return GatewayResponse(200, hit, "hit", method)
        return self._single(pool, item, cache, limits_checked)

    async def handle(self, network: str, body: bytes) -> GatewayResponse:
        """``respond``'s answer to the body ``body`` holds, awaited."""
        answer = self.respond(network, BodyDocument(body))
        return answer if isinstance(answer, GatewayResponse) else await answer

    async def _single(
        self, pool: UpstreamPool, request: RpcRequest, cache: ResponseCache | None, limits_checked: bool
    ) -> GatewayResponse:
        """The answer to an allowed request that ``respond`` could not give at once (its limit still to be checked
        against the head unless ``limits_checked``)."""
        method = request.method
        try:
            if method == "trace_filter":
                traces = await self._traces.run(pool, request.params)
                answer, upstream = encode(result_object(request.id, traces)), ""
            else:
                if not limits_checked:
                    await self._check_limits(pool, request)
                if cache is not None:
                    cached = await cache.answer(request)
                    self._count(pool.network, method, "answered")
                    return GatewayResponse(
                        200,
                        _told_head(pool, cached.body) if method == "eth_blockNumber" else cached.body,
                        cached.status,
                        method,
                        error_code=_error_code(cached.body),
                        upstream=cached.upstream,
                    )
                # The request goes with the caller's id, so the node's answer echoes it.
                answer, upstream = await self._forward(pool, request)
                if method == "eth_blockNumber":
                    answer = _told_head(pool, answer)
        except RpcError as error:
            return self._refused(pool, request, error)
        self._count(pool.network, method, "answered")
        return GatewayResponse(200, answer, method=method, error_code=_error_code(answer), upstream=upstream)

    def _refused(self, pool: UpstreamPool, request: RpcRequest, error: RpcError) -> GatewayResponse:
        """The answer to a single request that ``error`` ended."""
        self._count(pool.network, request.method, _outcome(error))
        status = 200 if isinstance(error, UpstreamRejected) else error.http_status
        return GatewayResponse(
            status, encode(error_object(request.id, error)), method=request.method, error_code=error.code
        )

    async def _forward(self, pool: UpstreamPool, request: RpcRequest) -> tuple[bytes, str]:
        if request.method not in self.policy.non_idempotent:
            return await pool.forward(request, idempotent=True)
        try:
            return await pool.forward(request, idempotent=False)
        finally:
            # The write may have changed what every cached answer says, whether or not its answer came back.
            self._forget_head(pool)

    def _forget_head(self, pool: UpstreamPool) -> None:
        cache = self.caches.get(pool.network)
        if cache is not None:
            cache.forget_head()

    def _check_policy(self, method: str) -> None:
        if not self.policy.allows(method):
            raise MethodNotAllowed("rpc method is not whitelisted", data={"method": method})

    def _check_limits_at_once(self, request: RpcRequest) -> bool:
        """``_check_limits`` without the head: True when the limit holds, False when the head is needed to tell.
        Raises what ``_check_limits`` raises."""
        if request.method == "eth_getLogs":
            return check_get_logs_at_once(request.params, self.policy.limits)
        check_fee_history(request.params, self.policy.limits)
        return True

    async def _check_limits(self, pool: UpstreamPool, request: RpcRequest) -> None:
        if request.method == "eth_getLogs":
            await check_get_logs(request.params, pool, self.policy.limits)
        elif request.method == "eth_feeHistory":
            check_fee_history(request.params, self.policy.limits)

    async def _batch(self, pool: UpstreamPool, items: list[RpcRequest | RejectedItem]) -> GatewayResponse:
        answers: list[dict[str, Any] | None] = [None] * len(items)
        upstream = ""
        forwarded: list[int] = []

        async def prepare(index: int, item: RpcRequest | RejectedItem) -> None:
            if isinstance(item, RejectedItem):
                self._count(pool.network, "", "invalid")
                answers[index] = error_object(item.id, item.error)
                return
            try:
                self._check_policy(item.method)
                if item.method == "trace_filter":
                    answers[index] = result_object(item.id, await self._traces.run(pool, item.params))
                    self._count(pool.network, item.method, "answered")
                    return
                await self._check_limits(pool, item)
            except RpcError as error:
                self._count(pool.network, item.method, _outcome(error))
                answers[index] = error_object(item.id, error)
                return
            forwarded.append(index)

        await asyncio.gather(*(prepare(index, item) for index, item in enumerate(items)))
        if forwarded:
            forwarded.sort()
            requests = [items[index] for index in forwarded]
            calls = [(request.method, request.params) for request in requests if isinstance(request, RpcRequest)]
            idempotent = not any(method in self.policy.non_idempotent for method, _ in calls)

            async def call_batch(node: UpstreamNode) -> tuple[list[Any], str]:
                return await node.call_batch(calls), node.label

            try:
                results, upstream = await pool.execute(call_batch, idempotent=idempotent)
            except RpcError as error:
                results = [error] * len(calls)
            finally:
                if not idempotent:
                    self._forget_head(pool)
            refused = [
                index
                for index, request, result in zip(forwarded, requests, results, strict=True)
                if isinstance(request, RpcRequest)
                and request.method == "eth_getLogs"
                and isinstance(result, UpstreamRejected)
                and refusal(result.error_object) is not None
            ]
            # A range the node refused as too large in the batch is asked again alone, which splits it.
            again = dict(
                zip(refused, await asyncio.gather(*(self._alone(pool, items[index]) for index in refused)), strict=True)
            )
            for index, request, result in zip(forwarded, requests, results, strict=True):
                assert isinstance(request, RpcRequest)
                if index in again:
                    self._count(pool.network, request.method, "answered")
                    answers[index] = again[index]
                elif isinstance(result, RpcError):
                    self._count(pool.network, request.method, _outcome(result))
                    answers[index] = error_object(request.id, result)
                else:
                    self._count(pool.network, request.method, "answered")
                    if request.method == "eth_blockNumber" and isinstance(result, str):
                        result = _told_head_number(pool, result)
                    answers[index] = result_object(request.id, result)
        given = [answer for answer in answers if answer is not None]
        first_method = next((item.method for item in items if isinstance(item, RpcRequest)), "")
        first_error = next((answer["error"]["code"] for answer in given if "error" in answer), None)
        return GatewayResponse(
            200, encode(given), method=first_method, requests=len(items), error_code=first_error, upstream=upstream
        )

    async def _alone(self, pool: UpstreamPool, item: RpcRequest | RejectedItem) -> dict[str, Any]:
        """A read of a batch asked again as a single request: its answer object, or its error object."""
        assert isinstance(item, RpcRequest)
        try:
            answer, _ = await pool.forward(item, idempotent=True)
            document = orjson.loads(answer)
        except RpcError as error:
            return error_object(item.id, error)
        except orjson.JSONDecodeError:
            return error_object(item.id, UpstreamUnavailable("the node's answer is not JSON"))
        if not isinstance(document, dict):
            return error_object(item.id, UpstreamUnavailable("the node's answer is not a JSON-RPC object"))
        return {"jsonrpc": "2.0", "id": item.id, **{k: v for k, v in document.items() if k in ("result", "error")}}


def _told_head(pool: UpstreamPool, answer: bytes) -> bytes:
    """A node's answer to ``eth_blockNumber`` as told to the client: never below a head told before
    (``UpstreamPool.told_head``); written again only when it was."""
    if len(pool.nodes) < 2:
        return answer  # a node alone is told as it says
    try:
        document = orjson.loads(answer)
        number = int(document["result"], 16)
    except (orjson.JSONDecodeError, TypeError, KeyError, ValueError):
        return answer  # an error, or no number: passed on as the node gave it
    told = pool.told_head(number)
    if told == number:
        return answer
    document["result"] = hex(told)
    return orjson.dumps(document)


def _told_head_number(pool: UpstreamPool, result: str) -> str:
    """``_told_head`` for the result of a batch item."""
    try:
        number = int(result, 16)
    except ValueError:
        return result
    told = pool.told_head(number)
    return result if told == number else hex(told)


def _error_code(answer: bytes) -> int | None:
    """The ``error.code`` of a node's answer to a single request, None when it has none (the answer is read only
    when it names an error)."""
    if b'"error"' not in answer:
        return None
    try:
        document = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return None
    error = document.get("error") if isinstance(document, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _outcome(error: RpcError) -> str:
    if isinstance(error, UpstreamRejected):
        return "answered"
    if isinstance(error, MethodNotAllowed):
        return "refused"
    if isinstance(error, LimitExceeded):
        return "limited"
    if isinstance(error, UpstreamUnavailable):
        return "unavailable"
    return "invalid"
