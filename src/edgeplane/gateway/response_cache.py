"""The gateway's response cache: answers to reads, kept for as long as the chain's head block stays the same, and
those about finalized blocks for longer.

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

Answers about finalized blocks (``edgeplane.gateway.finality``) are the exception: they cannot change, so they are
kept across heads, in a store bounded by bytes (least recently used out first). The finalized block is read with the
head, in the same exchange; the highest told is kept, and a chain that goes back past it (a development chain
reverted) drops the store. Answers of realtime methods (gas price, head number) are kept per head and briefly.

Written here rather than taken from a caching library because the policy is the chain's, not a clock's: entries
have no time to live, only a head to belong to, and the head check must be shared by every concurrent request.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

import orjson
import structlog

from edgeplane import metrics
from edgeplane.batched_counts import BatchedCount
from edgeplane.config import ResponseCacheSettings
from edgeplane.gateway.errors import UpstreamRejected
from edgeplane.gateway.finality import is_finalized_answer
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

    __slots__ = ("entries", "expires", "head", "size")

    def __init__(self, head: HeadBlock) -> None:
        self.head = head
        self.entries: dict[bytes, bytes] = {}
        self.expires: dict[bytes, float] = {}  # the realtime answers' last moment
        self.size = 0

    def get(self, key: bytes, now: float) -> bytes | None:
        kept = self.entries.get(key)
        if kept is not None and self.expires and self.expires.get(key, now) < now:
            return None
        return kept


class _FinalizedAnswers:
    """Answers about finalized blocks: kept across heads, bounded by bytes, the least recently used out first."""

    __slots__ = ("entries", "max_bytes", "size")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[bytes, bytes] = OrderedDict()
        self.size = 0

    def get(self, key: bytes) -> bytes | None:
        kept = self.entries.get(key)
        if kept is not None:
            self.entries.move_to_end(key)
        return kept

    def put(self, key: bytes, kept: bytes) -> None:
        size = len(key) + len(kept)
        if size > self.max_bytes:
            return
        replaced = self.entries.pop(key, None)
        if replaced is not None:
            self.size -= len(key) + len(replaced)
        while self.entries and self.size + size > self.max_bytes:
            oldest, answer = self.entries.popitem(last=False)
            self.size -= len(oldest) + len(answer)
        self.entries[key] = kept
        self.size += size

    def clear(self) -> None:
        self.entries.clear()
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

    def __init__(self, pool: UpstreamPool, settings: ResponseCacheSettings, *, realtime: Iterable[str] = ()) -> None:
        self.pool = pool
        self.settings = settings
        self._realtime = frozenset(realtime)
        self._generation: _Generation | None = None
        self._finalized = _FinalizedAnswers(settings.finalized_max_bytes)
        self._finalized_block: HeadBlock | None = None  # the highest finalized block the head reads told
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
        now = time.monotonic()
        if generation is None or not self._fresh(now):
            return None
        key = _key(request, orjson.dumps(request.params))
        kept = generation.get(key, now)
        if kept is None:
            kept = self._finalized.get(key)
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
        kept = generation.get(key, time.monotonic())
        if kept is None:
            kept = self._finalized.get(key)
        if kept is not None:
            self._lookups["hit"].add()
            return CachedAnswer(_answer_body(request, kept), "hit")
        self._lookups["miss"].add()
        in_step = self._in_step
        finalized = self._finalized_block
        answer, upstream = await self.pool.forward(request, idempotent=True, params=params)
        if upstream in in_step:
            if self._generation is generation:
                self._keep(generation, request, key, answer, finalized)
        elif (self.pool.head_of(upstream) or -1) > generation.head.number:
            # A node ahead of the cache's head answered: the head has moved on, and the next request reads it again.
            self._confirmed_at = float("-inf")
        return CachedAnswer(answer, "miss", upstream)

    def _keep(
        self, generation: _Generation, request: RpcRequest, key: bytes, answer: bytes, finalized: HeadBlock | None
    ) -> None:
        """Keeps a node's answer: across heads when it is about finalized blocks only (``finalized``: the finalized
        block known when the request was sent, and still known), else for ``generation``'s head, a realtime
        method's for at most ``realtime_max_age_seconds``."""
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
        if (
            finalized is not None
            and finalized == self._finalized_block
            and is_finalized_answer(request.method, request.params, document["result"], finalized.number)
        ):
            self._finalized.put(key, kept)
            return
        if request.method in self._realtime:
            generation.expires[key] = time.monotonic() + self.settings.realtime_max_age_seconds
        entries = generation.entries
        replaced = entries.pop(key, None)
        if replaced is not None:
            generation.size -= len(key) + len(replaced)
        while entries and generation.size + size > self.settings.max_bytes:
            # The oldest answers go first; a generation rarely lives longer than a block.
            oldest = next(iter(entries))
            generation.size -= len(oldest) + len(entries.pop(oldest))
            generation.expires.pop(oldest, None)
        entries[key] = kept
        generation.size += size

    def _learn_finalized(self, head: HeadBlock, finalized: HeadBlock | None) -> None:
        """Notes the finalized block the head's node told with it. The block kept is the highest told (a node that
        tells a lower one is behind), unless the chain went back past it: a head below it, or another block at its
        height (a development chain reverted). Then the answers kept across heads are dropped."""
        known = self._finalized_block
        if known is not None and (
            head.number < known.number
            or (finalized is not None and finalized.number == known.number and finalized != known)
        ):
            log.info("response cache: the chain went back past its finalized block", network=self.pool.network)
            self._finalized.clear()
            known = self._finalized_block = None
        if (
            finalized is not None
            and finalized.number <= head.number
            and (known is None or finalized.number > known.number)
        ):
            self._finalized_block = finalized

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

        async def read(node: UpstreamNode) -> tuple[HeadBlock, HeadBlock | None]:
            # The finalized block is asked in the same exchange: it moves only with the head.
            latest, finalized = await node.call_batch(
                [("eth_getBlockByNumber", ["latest", False]), ("eth_getBlockByNumber", ["finalized", False])],
                timeout_seconds=timeout,
                idempotent=True,
            )
            if isinstance(latest, UpstreamRejected):
                if not isinstance(finalized, UpstreamRejected):
                    raise latest
                # The whole batch refused (a node without batches): the head alone, the finalized block unknown.
                latest = await node.call(
                    "eth_getBlockByNumber", ["latest", False], timeout_seconds=timeout, idempotent=True
                )
                finalized = None
            head = _block(latest)
            if head is None:
                raise UpstreamTransportError(f"{node.label}: the latest block has no number and hash")
            node.record_head(head.number)
            return head, _block(finalized)

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
        top = max(head.number for _, (head, _) in known)
        head, finalized = next(found for _, found in known if found[0].number == top)
        self._learn_finalized(head, finalized)
        if self._generation is None or self._generation.head != head:
            self._generation = _Generation(head)
        if writes == self._writes and head != self._head_at_write:
            self._settling_until = float("-inf")  # a read after the last write found a new block: its, most likely
        self._in_step = frozenset(node.label for node, (found, _) in known if found == head)
        self._confirmed_at = started
        return self._generation


def _block(block: Any) -> HeadBlock | None:
    """The number and hash of a node's block object; None when it holds no such thing (an error, ``null``)."""
    try:
        return HeadBlock(int(str(block["number"]), 16), str(block["hash"]))
    except (TypeError, KeyError, ValueError):
        return None
