"""``trace_filter``: limits, and the two ways to answer it (its parameters are read by
``edgeplane.jsonrpc.trace_filter_params``).

- native: the node has ``trace_filter`` (erigon, reth, nethermind, anvil). Ranges larger than the node's own limit
  are split into chunks and merged, with ``after``/``count`` applied by the gateway.
- synthesised: the node is geth-style and has only ``debug_traceBlockByNumber`` (or ``debug_traceTransaction``).
  Each block's call tree is read with the call tracer and converted to trace records
  (``edgeplane.jsonrpc.trace_records``), with the same matching, order and ``after``/``count`` as the native method.

A choice where seed 000 is silent (documented in docs/gateway.md): an omitted ``count`` means the limit (200).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import structlog

from edgeplane.gateway.errors import UpstreamRejected
from edgeplane.gateway.limits import BlockResolver, LimitExceeded, measure_block_range
from edgeplane.gateway.policy import GatewayLimits
from edgeplane.gateway.upstream import UpstreamNode, UpstreamTransportError
from edgeplane.gateway.upstream_pool import UpstreamPool
from edgeplane.jsonrpc.trace_filter_params import TraceFilterParams, parse_trace_filter_params
from edgeplane.jsonrpc.trace_records import (
    CallFrameError,
    TraceRecord,
    TraceSelection,
    normalise_trace,
    select_traces,
    trace_matches,
    traces_from_call_frames,
)

log = structlog.get_logger(__name__)

_CALL_TRACER = {"tracer": "callTracer"}
# Blocks read in one upstream batch while synthesising.
_BLOCKS_PER_BATCH = 8


@dataclass(frozen=True, slots=True)
class TraceFilterQuery:
    """A filter resolved to block numbers and within the limits."""

    from_block: int
    to_block: int
    selection: TraceSelection


async def resolve_trace_filter(
    params: TraceFilterParams, resolver: BlockResolver, limits: GatewayLimits
) -> TraceFilterQuery:
    """Resolves tags against the head and enforces the block range and count limits."""
    count = limits.trace_filter_max_count if params.count is None else params.count
    if count > limits.trace_filter_max_count:
        raise LimitExceeded("trace_filter count", limit=limits.trace_filter_max_count, value=count)
    first, last = await measure_block_range(params.from_block, params.to_block, resolver, method="trace_filter")
    size = last - first + 1
    if size > limits.trace_filter_max_block_range:
        raise LimitExceeded("trace_filter block range", limit=limits.trace_filter_max_block_range, value=size)
    return TraceFilterQuery(
        from_block=first,
        to_block=last,
        selection=TraceSelection(
            from_addresses=params.from_addresses,
            to_addresses=params.to_addresses,
            mode=params.mode,
            after=params.after,
            count=count,
        ),
    )


def lacks_method(error: UpstreamRejected) -> bool:
    """True when a node's error says it does not have the method called."""
    if error.code == -32601:
        return True
    message = error.message.lower()
    return "method" in message and any(
        phrase in message for phrase in ("not found", "does not exist", "not supported", "not available")
    )


class TraceFilterService:
    """Answers ``trace_filter`` on a network's pool, natively or by synthesis, per node."""

    def __init__(self, limits: GatewayLimits, *, concurrency: int) -> None:
        self._limits = limits
        self._concurrency = concurrency

    async def run(self, pool: UpstreamPool, params: list[Any]) -> list[TraceRecord]:
        """The trace records the filter selects. Raises ``InvalidParams`` (including limits),
        ``UpstreamRejected`` and ``UpstreamUnavailable``."""
        query = await resolve_trace_filter(parse_trace_filter_params(params), pool, self._limits)

        async def on_node(node: UpstreamNode) -> list[TraceRecord]:
            strategy = node.health.trace_filter
            if strategy != "debug":
                try:
                    return await native_traces(node, query)
                except UpstreamRejected as exc:
                    if strategy != "auto" or not lacks_method(exc):
                        raise
                    node.health.trace_filter = "debug"
                    log.info(
                        "upstream has no trace_filter; synthesising it from debug traces",
                        network=pool.network,
                        upstream=node.label,
                    )
            return await synthesised_traces(node, query, concurrency=self._concurrency)

        return await pool.execute(on_node)


def _native_params(query: TraceFilterQuery, first: int, last: int, *, paged: bool) -> dict[str, Any]:
    selection = query.selection
    params: dict[str, Any] = {"fromBlock": hex(first), "toBlock": hex(last)}
    if selection.from_addresses:
        params["fromAddress"] = sorted(selection.from_addresses)
    if selection.to_addresses:
        params["toAddress"] = sorted(selection.to_addresses)
    if selection.mode == "intersection":
        params["mode"] = "intersection"
    if paged:
        params["after"] = selection.after
        params["count"] = selection.count
    return params


async def native_traces(node: UpstreamNode, query: TraceFilterQuery) -> list[TraceRecord]:
    """The node's own ``trace_filter``, split into chunks its range limit accepts."""
    chunk = node.max_trace_filter_blocks
    first, last = query.from_block, query.to_block
    if chunk is None or last - first + 1 <= chunk:
        answer = await node.call("trace_filter", [_native_params(query, first, last, paged=True)])
        return [normalise_trace(trace) for trace in _trace_list(answer, node)]
    wanted = query.selection.after + query.selection.count
    collected: list[TraceRecord] = []
    matched = 0
    for start in range(first, last + 1, chunk):
        end = min(start + chunk - 1, last)
        answer = await node.call("trace_filter", [_native_params(query, start, end, paged=False)])
        traces = _trace_list(answer, node)
        collected.extend(traces)
        matched += sum(1 for trace in traces if trace_matches(normalise_trace(trace), query.selection))
        if matched >= wanted:
            break
    return select_traces(collected, query.selection)


def _trace_list(answer: Any, node: UpstreamNode) -> list[TraceRecord]:
    if answer is None:
        return []
    if not isinstance(answer, list) or not all(isinstance(item, dict) for item in answer):
        raise UpstreamTransportError(f"{node.label}: trace_filter answer is not a list of traces")
    traces: list[TraceRecord] = answer
    return traces


async def synthesised_traces(node: UpstreamNode, query: TraceFilterQuery, *, concurrency: int) -> list[TraceRecord]:
    """Trace records built from the node's call tracer, block by block, stopping once enough match."""
    selection = query.selection
    wanted = selection.after + selection.count
    matched: list[TraceRecord] = []
    window = concurrency * _BLOCKS_PER_BATCH
    for window_start in range(query.from_block, query.to_block + 1, window):
        window_end = min(window_start + window - 1, query.to_block)
        batches = [
            list(range(start, min(start + _BLOCKS_PER_BATCH - 1, window_end) + 1))
            for start in range(window_start, window_end + 1, _BLOCKS_PER_BATCH)
        ]
        results = await asyncio.gather(*(_traced_blocks(node, numbers) for numbers in batches))
        for block_traces in results:
            for traces in block_traces:
                normalised = (normalise_trace(trace) for trace in traces)
                matched.extend(trace for trace in normalised if trace_matches(trace, selection))
        if len(matched) >= wanted:
            break
    return matched[selection.after : wanted]


async def _traced_blocks(node: UpstreamNode, numbers: list[int]) -> list[list[TraceRecord]]:
    calls: list[tuple[str, list[Any]]] = [("eth_getBlockByNumber", [hex(n), True]) for n in numbers]
    if node.health.debug_trace_block:
        calls += [("debug_traceBlockByNumber", [hex(n), _CALL_TRACER]) for n in numbers]
    answers = await node.call_batch(calls)
    blocks = answers[: len(numbers)]
    frame_lists: list[Any] = answers[len(numbers) :] or [None] * len(numbers)
    traced: list[list[TraceRecord]] = []
    for block, frames in zip(blocks, frame_lists, strict=True):
        if isinstance(block, UpstreamRejected):
            raise block
        if block is None:
            traced.append([])  # beyond the node's head: no traces, as the native method answers
            continue
        if not isinstance(block, dict):
            raise UpstreamTransportError(f"{node.label}: eth_getBlockByNumber answer is not a block")
        if isinstance(frames, UpstreamRejected):
            if not lacks_method(frames):
                raise frames
            node.health.debug_trace_block = False
            frames = None
        if frames is None:
            frames = await _per_transaction_frames(node, block)
        if not isinstance(frames, list):
            raise UpstreamTransportError(f"{node.label}: debug trace answer is not a list")
        try:
            traced.append(traces_from_call_frames(block, frames))
        except CallFrameError as exc:
            raise UpstreamTransportError(f"{node.label}: unusable debug trace: {exc}") from None
    return traced


async def _per_transaction_frames(node: UpstreamNode, block: dict[str, Any]) -> list[dict[str, Any]]:
    hashes = [tx["hash"] if isinstance(tx, dict) else tx for tx in block.get("transactions", [])]
    if not hashes:
        return []
    answers = await node.call_batch([("debug_traceTransaction", [tx_hash, _CALL_TRACER]) for tx_hash in hashes])
    frames: list[dict[str, Any]] = []
    for tx_hash, answer in zip(hashes, answers, strict=True):
        if isinstance(answer, UpstreamRejected):
            raise answer
        frames.append({"txHash": tx_hash, "result": answer})
    return frames
