"""``eth_getLogs`` over a range a node will not take whole: split, fetched part by part, merged in order.

Nodes and providers bound ``eth_getLogs``: by block range (``exceed maximum block range: 5000``, ``block range is
too wide``, ``query exceeds max block range 100000``) or by the size of the answer (``query returned more than 10000
results``, ``Log response size exceeded``), each with a JSON-RPC error code of its own. A client of a pool should not
have to know which node it reached, so a range a node refuses with such an error is bisected and the halves asked of
the same node (again and again, down to single blocks), and a range wider than the node's ``max_logs_blocks`` is cut
to that width before it is sent. The parts go out a few at a time (``logs_split_concurrency``) and their logs are
merged by block number and log index, with no log twice. A node that refused a range as too wide is sent, from then
on, ranges no wider than the widest it then answered.

The product's own limit (800 blocks, ``edgeplane.gateway.limits``) is checked before any of this: a client never
gets more than it may ask for, however the nodes behind take it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import orjson

from edgeplane.gateway.errors import UpstreamRejected
from edgeplane.gateway.limits import BlockResolver, get_logs_range, measure_block_range
from edgeplane.gateway.upstream import UpstreamNode, UpstreamTransportError
from edgeplane.jsonrpc.envelope import RpcRequest

Refusal = Literal["range", "results"]

# The codes nodes give the errors below: geth-style server errors, Infura's limit, invalid request and params.
_REFUSAL_CODES: Final = frozenset({-32000, -32005, -32600, -32602})
# A range refused for its width: a narrower one is taken.
_RANGE_REFUSAL: Final = re.compile(
    r"block range.{0,40}(too (wide|large|big)|exceed|limit|max)"
    r"|exceed\w*( the)? max\w*( block)? range"
    r"|range (is )?too (wide|large|big)"
    r"|limited to an? [\d,]+ (block )?range",
    re.IGNORECASE,
)
# A range refused for the size of its answer: depends on the logs, so nothing is learnt of the node's width.
_RESULTS_REFUSAL: Final = re.compile(
    r"more than [\d,]+ (results|logs)"
    r"|response size (exceeded|is too (large|big))"
    r"|too many (results|logs)"
    r"|exceeds? max (results|logs)",
    re.IGNORECASE,
)
# A refusal is a short answer; a longer one is never read for one.
_SHORT_ANSWER: Final = 2048


def refusal(error: Mapping[str, Any]) -> Refusal | None:
    """Whether a node's JSON-RPC error object refuses an ``eth_getLogs`` range as too large, and why: ``range``
    (too many blocks), ``results`` (too many logs); None for any other error."""
    code = error.get("code")
    message = error.get("message")
    if code not in _REFUSAL_CODES or not isinstance(message, str):
        return None
    if _RANGE_REFUSAL.search(message):
        return "range"
    if _RESULTS_REFUSAL.search(message):
        return "results"
    return None


def answer_refusal(answer: bytes) -> Refusal | None:
    """``refusal`` for a node's raw answer to one ``eth_getLogs``."""
    if len(answer) > _SHORT_ANSWER or b'"error"' not in answer:
        return None
    try:
        document = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return None
    error = document.get("error") if isinstance(document, dict) else None
    return refusal(error) if isinstance(error, dict) else None


def merge_logs(parts: list[list[Any]]) -> list[Any]:
    """The logs of consecutive parts of one range as one answer: ordered by block number and log index, a log
    that two parts hold (same block and index) once."""
    seen: set[tuple[Any, Any]] = set()
    merged: list[Any] = []
    for part in parts:
        for entry in part:
            if isinstance(entry, dict):
                identity = (entry.get("blockHash", entry.get("blockNumber")), entry.get("logIndex"))
                if identity in seen:
                    continue
                seen.add(identity)
            merged.append(entry)
    merged.sort(key=_position)
    return merged


def _position(entry: Any) -> tuple[int, int]:
    if not isinstance(entry, dict):
        return (0, 0)
    return (_quantity(entry.get("blockNumber")), _quantity(entry.get("logIndex")))


def _quantity(value: Any) -> int:
    if isinstance(value, str):
        try:
            return int(value, 16)
        except ValueError:
            return 0
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(slots=True)
class _Split:
    """What one split query learnt of its node."""

    widest_answered: int = 0
    refused_as_wide: bool = False


class LogsSplitter:
    """Fetches ``eth_getLogs`` from one node, splitting the range when the node refuses it or it is wider than the
    node's ``max_logs_blocks``; tags in the range are resolved by ``resolver`` (the pool's head)."""

    def __init__(self, resolver: BlockResolver, *, concurrency: int) -> None:
        self._resolver = resolver
        self._concurrency = concurrency

    async def fetch(self, node: UpstreamNode, request: RpcRequest, body: bytes) -> bytes:
        """The node's answer to ``request`` (``body``: it written for the node), whole or merged from parts, echoing
        the request's id. An error that is not a refusal, and a refusal of one block, are the node's answer.
        Raises ``UpstreamTransportError`` when the node fails part of the way, and what resolving tags raises."""
        query = request.params[0] if request.params and isinstance(request.params[0], dict) else None
        if query is None or query.get("blockHash") is not None:
            return await node.post(body, idempotent=True)
        width = node.max_logs_blocks
        if width is not None:
            first, last = await self._range(query)
            if last - first + 1 > width:
                return await self._split(node, request, query, first, last, width)
        answer = await node.post(body, idempotent=True)
        refused = answer_refusal(answer)
        if refused is None:
            return answer
        first, last = await self._range(query)
        if last <= first:
            return answer  # one block: nothing narrower to ask
        split = _Split(refused_as_wide=refused == "range")
        return await self._split(node, request, query, first, last, (last - first + 2) // 2, split)

    async def _range(self, query: dict[str, Any]) -> tuple[int, int]:
        from_ref, to_ref = get_logs_range(query)
        return await measure_block_range(from_ref, to_ref, self._resolver, method="eth_getLogs")

    async def _split(
        self,
        node: UpstreamNode,
        request: RpcRequest,
        query: dict[str, Any],
        first: int,
        last: int,
        width: int,
        split: _Split | None = None,
    ) -> bytes:
        split = split if split is not None else _Split()
        slots = asyncio.Semaphore(self._concurrency)

        async def part(start: int, end: int) -> list[Any]:
            async with slots:
                try:
                    found = await node.call(
                        "eth_getLogs", [{**query, "fromBlock": hex(start), "toBlock": hex(end)}], idempotent=True
                    )
                except UpstreamRejected as error:
                    refused = refusal(error.error_object)
                    if refused is None or start == end:
                        raise
                    split.refused_as_wide = split.refused_as_wide or refused == "range"
                    found = None
            if found is None:
                middle = (start + end) // 2
                halves = await _all([part(start, middle), part(middle + 1, end)])
                return halves[0] + halves[1]
            if not isinstance(found, list):
                raise UpstreamTransportError(f"{node.label}: eth_getLogs answer is not a list")
            split.widest_answered = max(split.widest_answered, end - start + 1)
            return found

        try:
            parts = await _all([part(start, min(start + width - 1, last)) for start in range(first, last + 1, width)])
        except UpstreamRejected as error:
            return _error_answer(request, error)
        if split.refused_as_wide and split.widest_answered:
            node.learn_logs_blocks(split.widest_answered)
        return orjson.dumps({"jsonrpc": "2.0", "id": request.id, "result": merge_logs(parts)})


async def _all(parts: list[Coroutine[Any, Any, list[Any]]]) -> list[list[Any]]:
    """Every part's logs, in order; when one part fails, the others still running are cancelled and its error is
    raised."""
    tasks = [asyncio.ensure_future(part) for part in parts]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
            elif not task.cancelled():
                task.exception()  # retrieved: only the first failure is raised


def _error_answer(request: RpcRequest, error: UpstreamRejected) -> bytes:
    """A node's error to one part, as its answer to the whole query."""
    return orjson.dumps({"jsonrpc": "2.0", "id": request.id, "error": error.to_error_object()})
