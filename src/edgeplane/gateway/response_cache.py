"""The gateway's response cache: answers to reads, kept for as long as the chain's head block stays the same.

What a read returns depends on the head block: ``eth_call`` at ``latest``, ``eth_blockNumber``, a block by number.
So every answer kept here belongs to one head (its number and hash), and all of them are dropped together when the
head moves on, or is replaced by a reorganisation at the same height. Before it answers from the cache the gateway
makes sure it knows the head as of at most ``max_head_age_seconds`` ago: when its knowledge is older, the request
that needs it reads the head from the nodes (``eth_getBlockByNumber("latest")``) and every request arriving
meanwhile waits for that one read. An answer from the cache is therefore never older than that age plus one round
trip. After a request that changes state (``eth_sendRawTransaction``, alone or in a batch) the head is read again
before every answer from the cache, until a new head arrives (or ``write_settle_seconds`` pass): a client that
writes through this edge worker and waits for its receipt reads its write, even from a node that mines at once. A
write sent to the node some other way, or through another edge worker, is seen within ``max_head_age_seconds``, as
it would be through a pool of nodes a few milliseconds apart.

What is kept: successful, non-null answers to the single requests of the methods the policy marks ``cacheable``,
from a node that is at the head (in a pool of several nodes, a node behind the others does not fill the cache; an
answer from a node known to be ahead of the cache's head makes the next request read the head again).
Never kept: errors (a node's own or the gateway's), ``null`` results (a transaction not yet mined, a block not yet
made), any request that names the ``pending`` block, batches, and answers larger than ``max_entry_bytes``. When
the head cannot be read (every node down), nothing is answered from the cache and the request goes to the pool,
which answers as it would without a cache.

Written here rather than taken from a caching library because the policy is the chain's, not a clock's: entries
have no time to live, only a head to belong to, and the head check must be shared by every concurrent request.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from typing import Final, Literal

import orjson
import structlog

from edgeplane import metrics
from edgeplane.batched_counts import BatchedCount
from edgeplane.config import ResponseCacheSettings
from edgeplane.gateway.upstream import UpstreamNode, UpstreamTransportError
from edgeplane.gateway.upstream_pool import UpstreamPool
from edgeplane.jsonrpc.envelope import RpcRequest

log = structlog.get_logger(__name__)

# What the log's ``CacheCacheStatus`` field says of an answer (the values the dataset defines).
CacheStatus = Literal["hit", "miss", "bypass", "dynamic"]
_PENDING: Final = b'"pending"'
_ANSWER_HEAD: Final = b'{"jsonrpc":"2.0","id":'
_ANSWER_RESULT: Final = b',"result":'


@dataclass(frozen=True, slots=True)
class HeadBlock:
    """The chain's head as one node reported it."""

    number: int
    hash: str


class _Generation:
    """The answers kept for one head block. A new head makes a new generation; the old one is dropped whole."""

    __slots__ = ("entries", "head", "size")

    def __init__(self, head: HeadBlock) -> None:
        self.head = head
        self.entries: dict[bytes, bytes] = {}
        self.size = 0


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    """The body of an answer, whether the cache gave it, and the label of the node that did when one did ("" for
    the cache's own)."""

    body: bytes
    status: CacheStatus
    upstream: str = ""


def _key(request: RpcRequest, params: bytes) -> bytes:
    """What identifies a request's answer: its method and ``params``, the params exactly as the node receives them
    (``encode_request``), so that two requests with one key are one request to the node (a key holding
    ``"pending"`` is never kept)."""
    return request.method.encode() + params


def _answer_body(request: RpcRequest, result: bytes) -> bytes:
    """The JSON-RPC answer to ``request`` with a kept ``result``, echoing the caller's id."""
    return _ANSWER_HEAD + orjson.dumps(request.id) + _ANSWER_RESULT + result + b"}"


class ResponseCache:
    """The answers of one network's pool, for the current head block."""

    def __init__(self, pool: UpstreamPool, settings: ResponseCacheSettings) -> None:
        self.pool = pool
        self.settings = settings
        self._generation: _Generation | None = None
        self._confirmed_at = float("-inf")
        self._settling_until = float("-inf")
        self._head_at_write: HeadBlock | None = None  # the head known when the last write was sent
        # Nodes whose head was the cache's head at the last read; only their answers are kept.
        self._in_step: frozenset[str] = frozenset()
        # The head read under way, and the number of writes seen when it started: a request after a write does not
        # join a read that started before it.
        self._reading: tuple[asyncio.Future[_Generation | None], int] | None = None
        self._writes = 0
        self._applied_read = 0  # the serial of the newest head read whose result is in use
        self._read_serials = itertools.count(1)
        self._no_read_before = float("-inf")  # after a failed read, a pause before the next
        self._lookups: dict[CacheStatus, BatchedCount] = {
            status: BatchedCount(metrics.GATEWAY_CACHE_LOOKUPS.labels(pool.network, status))
            for status in ("hit", "miss", "bypass")
        }

    def forget_head(self) -> None:
        """After a write: the head is read again before every answer from the cache until the head moves on (the
        block holding the write, most likely) or ``write_settle_seconds`` pass, whichever comes first."""
        self._writes += 1
        self._head_at_write = self._generation.head if self._generation is not None else None
        self._confirmed_at = float("-inf")
        self._settling_until = time.monotonic() + self.settings.write_settle_seconds

    def hit(self, request: RpcRequest) -> bytes | None:
        """The body of the answer to ``request`` when the cache holds it and its head reading is fresh; else None,
        and ``answer`` will tell. Never waits: the fast path of the most common request."""
        generation = self._generation
        if generation is None or not self._fresh(time.monotonic()):
            return None
        kept = generation.entries.get(_key(request, orjson.dumps(request.params)))
        if kept is None:
            return None
        self._lookups["hit"].add()
        return _answer_body(request, kept)

    async def answer(self, request: RpcRequest) -> CachedAnswer:
        """The answer to ``request``, from the cache or the pool (which gets the request written again, with the
        caller's id).

        Raises what ``UpstreamPool.forward`` raises when no node can answer.
        """
        params = orjson.dumps(request.params)
        key = _key(request, params)
        generation = None if _PENDING in key else await self._current_generation()
        if generation is None:  # a request about a pending block, or no head reading: asked of a node, not kept
            self._lookups["bypass"].add()
            answer, upstream = await self.pool.forward(request, idempotent=True)
            return CachedAnswer(answer, "bypass", upstream)
        kept = generation.entries.get(key)
        if kept is not None:
            self._lookups["hit"].add()
            return CachedAnswer(_answer_body(request, kept), "hit")
        self._lookups["miss"].add()
        in_step = self._in_step
        answer, upstream = await self.pool.forward(request, idempotent=True, params=params)
        if upstream in in_step:
            if self._generation is generation:
                self._keep(generation, key, answer)
        elif (self.pool.head_of(upstream) or -1) > generation.head.number:
            # A node ahead of the cache's head answered: the head has moved on, and the next request reads it again.
            self._confirmed_at = float("-inf")
        return CachedAnswer(answer, "miss", upstream)

    def _keep(self, generation: _Generation, key: bytes, answer: bytes) -> None:
        try:
            document = orjson.loads(answer)
            if not isinstance(document, dict) or document.get("error") is not None or document.get("result") is None:
                return
            kept = orjson.dumps(document["result"])
        except (orjson.JSONDecodeError, TypeError):
            return
        size = len(key) + len(kept)
        if size > self.settings.max_entry_bytes:
            return
        entries = generation.entries
        replaced = entries.pop(key, None)
        if replaced is not None:
            generation.size -= len(key) + len(replaced)
        while entries and generation.size + size > self.settings.max_bytes:
            # The oldest answers go first; a generation rarely lives longer than a block.
            oldest = next(iter(entries))
            generation.size -= len(oldest) + len(entries.pop(oldest))
        entries[key] = kept
        generation.size += size

    def _fresh(self, now: float) -> bool:
        """Whether the last reading of the head vouches for the cache at ``now`` (recent, and no write since)."""
        return now - self._confirmed_at <= self.settings.max_head_age_seconds and now >= self._settling_until

    async def _current_generation(self) -> _Generation | None:
        now = time.monotonic()
        if self._fresh(now):
            return self._generation
        if self._reading is not None and self._reading[1] == self._writes:
            reading = self._reading[0]
        elif self._generation is None and now < self._no_read_before:
            return None  # the last read found no head: the pool answers alone for a moment
        else:
            # One read for every request that arrives while it runs; a caller that goes away does not cancel it.
            reading = asyncio.ensure_future(self._read_head(next(self._read_serials), self._writes))
            self._reading = (reading, self._writes)
            reading.add_done_callback(self._read_done)
        return await asyncio.shield(reading)

    def _read_done(self, reading: asyncio.Future[_Generation | None]) -> None:
        if self._reading is not None and self._reading[0] is reading:
            self._reading = None

    async def _read_head(self, serial: int, writes: int) -> _Generation | None:
        """Reads every answering node's head; the highest is the cache's head. None when no node answered.

        A read that ends after a newer one has been applied changes nothing and gives that one's result.
        """
        started = time.monotonic()
        timeout = self.settings.head_read_timeout_seconds

        async def read(node: UpstreamNode) -> HeadBlock:
            block = await node.call("eth_getBlockByNumber", ["latest", False], timeout_seconds=timeout, idempotent=True)
            try:
                head = HeadBlock(int(str(block["number"]), 16), str(block["hash"]))
            except (TypeError, KeyError, ValueError):
                raise UpstreamTransportError(f"{node.label}: the latest block has no number and hash") from None
            node.record_head(head.number)
            return head

        known = await self.pool.ask_each(read, grace_seconds=self.settings.head_read_grace_seconds)
        if serial < self._applied_read:
            return self._generation
        self._applied_read = serial
        if not known:
            if self._generation is not None:
                log.warning("response cache emptied: no node told its head", network=self.pool.network)
            self._generation = None
            self._confirmed_at = float("-inf")
            self._no_read_before = time.monotonic() + self.settings.head_read_grace_seconds
            return None
        top = max(head.number for _, head in known)
        head = next(head for _, head in known if head.number == top)
        if self._generation is None or self._generation.head != head:
            self._generation = _Generation(head)
        if writes == self._writes and head != self._head_at_write:
            self._settling_until = float("-inf")  # a read after the last write found a new block: its, most likely
        self._in_step = frozenset(node.label for node, found in known if found == head)
        self._confirmed_at = started
        return self._generation
