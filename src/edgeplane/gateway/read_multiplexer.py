"""Identical reads in flight share one upstream exchange.

When a block is new, many clients ask the same thing at once (the block, its receipts, a balance at ``latest``): a
thundering herd that would cost the node one exchange each. A read is identified by its method, its params in a
canonical form (``read_key``: objects' members sorted, so ``{"to":..,"data":..}`` and ``{"data":..,"to":..}`` are
one read) and the pool's head when it was asked (a read at ``latest`` asked after a new head is known does not
join one asked before). The first read with a key (the leader) goes to the pool; the others arriving while it is in
flight (followers) wait for it and get its answer, written again with their own id, or its error. The exchange
belongs to every reader: a leader whose client goes away does not cancel it.

Only reads share: a write goes to the pool each time, and so does a batch (as one exchange already).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

Exchange = tuple[bytes, str]  # a node's raw answer and the label of the node


def read_key(method: str, params: list[Any], head: int | None) -> bytes:
    """What identifies a read for sharing: ``method``, the canonical form of ``params`` and the pool's ``head``.
    Two reads have one key exactly when they ask one node the same thing at the same head."""
    return b"%s\x00%d\x00%s" % (
        method.encode(),
        -1 if head is None else head,
        orjson.dumps(params, option=orjson.OPT_SORT_KEYS),
    )


def with_id(answer: bytes, request_id: Any) -> bytes:
    """A node's answer to the leader, as the answer to a follower whose request id is ``request_id``."""
    try:
        document = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return answer
    if not isinstance(document, dict):
        return answer
    document["id"] = request_id
    return orjson.dumps(document)


class ReadMultiplexer:
    """The reads of one pool in flight, by key."""

    def __init__(self) -> None:
        self._flights: dict[bytes, asyncio.Future[Exchange]] = {}
        self.shared = 0  # reads answered by another read's exchange

    async def share(self, key: bytes, request_id: Any, exchange: Callable[[], Awaitable[Exchange]]) -> Exchange:
        """The answer to the read ``key`` names: its own exchange (``exchange()``) when none with that key is in
        flight, else that one's answer with ``request_id`` as its id. Raises what the exchange raises."""
        flight = self._flights.get(key)
        if flight is not None:
            self.shared += 1
            answer, upstream = await asyncio.shield(flight)
            return with_id(answer, request_id), upstream
        flight = asyncio.ensure_future(exchange())
        self._flights[key] = flight
        flight.add_done_callback(lambda done: self._landed(key, done))
        return await asyncio.shield(flight)

    def _landed(self, key: bytes, flight: asyncio.Future[Exchange]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not flight.cancelled():
            flight.exception()  # retrieved here: a reader that went away must not leave it unretrieved
