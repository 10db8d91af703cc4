"""One upstream Ethereum node: its JSON-RPC client over ``HttpTransport`` and what the pool knows of its health.

Transport failures (connection errors, timeouts, HTTP 429 and 5xx, a body that is not JSON) raise
``UpstreamTransportError``, which the pool answers by failing over. A JSON-RPC error from the node is its answer and
is passed on (``UpstreamRejected``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from edgeplane.config import TraceFilterStrategy, UpstreamSettings
from edgeplane.gateway.errors import UpstreamRejected
from edgeplane.gateway.http_transport import (
    DEFAULT_MAX_ANSWER_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    HttpTransport,
    HttpTransportError,
)
from edgeplane.jsonrpc.envelope import RpcRequest, encode_request

# Node clients whose own trace_filter refuses ranges larger than this many blocks.
KNOWN_TRACE_FILTER_RANGE_LIMITS: dict[str, int] = {"anvil": 300}


class UpstreamTransportError(Exception):
    """The node could not be reached or gave no usable answer; another node may. ``throttled``: it answered HTTP
    429, its rate limit."""

    def __init__(self, message: str, *, throttled: bool = False) -> None:
        super().__init__(message)
        self.throttled = throttled


@dataclass(slots=True)
class NodeHealth:
    """What the pool knows of a node: whether it answers, its head, its client."""

    healthy: bool = True
    head: int | None = None
    head_seen_at: float = 0.0
    client_version: str | None = None
    last_error: str | None = None
    consecutive_failures: int = 0
    latency_seconds: float = 0.0
    trace_filter: TraceFilterStrategy = "auto"
    debug_trace_block: bool = True
    # The widest eth_getLogs range the node answered while a wider one it refused as too wide was split.
    logs_blocks_learned: int | None = None
    checked_at: float = field(default=0.0)


class UpstreamNode:
    """An HTTP JSON-RPC client for one node, with its own pool of keep-alive connections."""

    def __init__(
        self,
        settings: UpstreamSettings,
        *,
        timeout_seconds: float,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self.settings = settings
        self.label = settings.label
        self.url = settings.url
        self._transport = HttpTransport(
            settings.url, max_connections=max_connections, max_answer_bytes=max_answer_bytes
        )
        self._timeout_seconds = timeout_seconds
        self.health = NodeHealth(trace_filter=settings.trace_filter)
        self._next_id = 0

    @property
    def max_trace_filter_blocks(self) -> int | None:
        """The largest range the node's own trace_filter takes, from settings or its client version."""
        if self.settings.max_trace_filter_blocks is not None:
            return self.settings.max_trace_filter_blocks
        version = (self.health.client_version or "").lower()
        for client, limit in KNOWN_TRACE_FILTER_RANGE_LIMITS.items():
            if version.startswith(client):
                return limit
        return None

    @property
    def max_logs_blocks(self) -> int | None:
        """The widest block range sent to the node in one ``eth_getLogs``: the settings' ``max_logs_blocks``, or
        narrower, what the node was seen to take after it refused a wider range as too wide; None: no bound known."""
        bounds = [bound for bound in (self.settings.max_logs_blocks, self.health.logs_blocks_learned) if bound]
        return min(bounds) if bounds else None

    def learn_logs_blocks(self, blocks: int) -> None:
        """Notes that the node refused a range as too wide and then answered ranges of ``blocks`` blocks: later
        queries are split to that width before they are sent."""
        learned = self.health.logs_blocks_learned
        self.health.logs_blocks_learned = blocks if learned is None else min(learned, blocks)

    async def post(self, body: bytes, *, timeout_seconds: float | None = None, idempotent: bool = False) -> bytes:
        """Sends a JSON-RPC body and returns the node's raw JSON answer. The body is one the gateway wrote
        (``jsonrpc.encode_request``), never a caller's bytes.

        ``idempotent`` lets the transport send the body again, once, when a kept-alive connection drops under it
        before any answer; leave it false for anything that may change state.
        Raises ``UpstreamTransportError`` on connection errors, timeouts, HTTP 429/5xx and non-JSON answers.
        """
        started = time.perf_counter()
        try:
            status, payload = await self._transport.post(
                body,
                timeout_seconds=self._timeout_seconds if timeout_seconds is None else timeout_seconds,
                idempotent=idempotent,
            )
        except HttpTransportError as exc:
            raise UpstreamTransportError(f"{self.label}: {exc}") from None
        self.health.latency_seconds = time.perf_counter() - started
        if status == 429 or status >= 500:
            raise UpstreamTransportError(f"{self.label}: HTTP {status}", throttled=status == 429)
        stripped = payload.lstrip()
        if not stripped or stripped[:1] not in (b"{", b"["):
            raise UpstreamTransportError(f"{self.label}: HTTP {status} with a body that is not JSON-RPC")
        return payload

    def _request_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def call(
        self, method: str, params: list[Any], *, timeout_seconds: float | None = None, idempotent: bool = False
    ) -> Any:
        """Calls one method and returns its result. Raises ``UpstreamRejected`` for a JSON-RPC error."""
        body = encode_request(RpcRequest(self._request_id(), method, params))
        answer = _loads(await self.post(body, timeout_seconds=timeout_seconds, idempotent=idempotent), self.label)
        if not isinstance(answer, dict):
            raise UpstreamTransportError(f"{self.label}: answer to {method} is not a JSON-RPC object")
        if "error" in answer and answer["error"] is not None:
            error = answer["error"]
            raise UpstreamRejected(error if isinstance(error, dict) else {"message": str(error)})
        if "result" not in answer:
            raise UpstreamTransportError(f"{self.label}: answer to {method} has no result")
        return answer["result"]

    async def call_batch(
        self, calls: list[tuple[str, list[Any]]], *, idempotent: bool = False, timeout_seconds: float | None = None
    ) -> list[Any | UpstreamRejected]:
        """Calls several methods in one JSON-RPC batch; each slot holds a result or the node's error."""
        if not calls:
            return []
        base = self._request_id()
        self._next_id += len(calls)
        body = (
            b"["
            + b",".join(
                encode_request(RpcRequest(base + index, method, params)) for index, (method, params) in enumerate(calls)
            )
            + b"]"
        )
        answer = _loads(await self.post(body, idempotent=idempotent, timeout_seconds=timeout_seconds), self.label)
        if not isinstance(answer, list):
            if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
                # Some nodes answer a whole batch with one error (for example, batches disabled).
                return [UpstreamRejected(answer["error"]) for _ in calls]
            raise UpstreamTransportError(f"{self.label}: answer to a batch is not an array")
        by_id: dict[Any, dict[str, Any]] = {item.get("id"): item for item in answer if isinstance(item, dict)}
        results: list[Any | UpstreamRejected] = []
        for index in range(len(calls)):
            item = by_id.get(base + index)
            if item is None:
                raise UpstreamTransportError(f"{self.label}: batch answer lacks item {index}")
            error = item.get("error")
            if error is not None:
                results.append(UpstreamRejected(error if isinstance(error, dict) else {"message": str(error)}))
            else:
                results.append(item.get("result"))
        return results

    async def check(self, timeout_seconds: float) -> None:
        """A health check: reads the head block (and the client version, once). Updates ``health``."""
        try:
            async with asyncio.timeout(timeout_seconds):
                if self.health.client_version is None:
                    version = await self.call(
                        "web3_clientVersion", [], timeout_seconds=timeout_seconds, idempotent=True
                    )
                    self.health.client_version = str(version)
                head = await self.call("eth_blockNumber", [], timeout_seconds=timeout_seconds, idempotent=True)
            self.record_head(int(str(head), 16))
            self.record_success()
        except (UpstreamTransportError, UpstreamRejected, TimeoutError, ValueError) as exc:
            self.record_failure(str(exc) or type(exc).__name__)
        self.health.checked_at = time.monotonic()

    def close(self) -> None:
        """Closes the node's connections; later calls raise ``UpstreamTransportError``."""
        self._transport.close()

    def record_head(self, head: int) -> None:
        """Notes the node's head block, as seen now."""
        self.health.head = head
        self.health.head_seen_at = time.monotonic()

    def record_success(self) -> None:
        """Marks the node as answering."""
        self.health.healthy = True
        self.health.consecutive_failures = 0
        self.health.last_error = None

    def record_failure(self, reason: str) -> None:
        """Marks the node as failing until a later check or call succeeds."""
        self.health.healthy = False
        self.health.consecutive_failures += 1
        self.health.last_error = reason


def _loads(payload: bytes, label: str) -> Any:
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise UpstreamTransportError(f"{label}: answer is not valid JSON") from None
