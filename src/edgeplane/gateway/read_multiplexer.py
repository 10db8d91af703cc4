"""Identical reads in flight share one upstream exchange.

When a block is new, many clients ask the same thing at once (the block, its receipts, a balance at ``latest``): a
thundering herd that would cost the node one exchange each. A read is identified by its method, its params in a
canonical form (``read_key``: objects' members sorted, so ``{"to":..,"data":..}`` and ``{"data":..,"to":..}`` are
one read) and the pool's head when it was asked (a read at ``latest`` asked after a new head is known does not
join one asked before). The first read with a key (the leader) goes to the pool; the others arriving while it is in
flight (followers) wait for it and get its answer, written again with their own id, or its error. When the leader's
client goes away (its read cancelled), its followers start again, the first of them leading.

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
        flight, else that one's answer with ``request_id`` as its id. Raises what the exchange raises.

        The leader runs the exchange itself (no task of its own: the common read has no follower); when its client
        goes away, the followers it had start again, the first of them as the new leader."""
        while (flight := self._flights.get(key)) is not None:
            try:
                answer, upstream = await asyncio.shield(flight)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if flight.cancelled() and (task is None or not task.cancelling()):
                    continue  # the leader went away, not this reader
                raise
            self.shared += 1
            return with_id(answer, request_id), upstream
        flight = asyncio.get_running_loop().create_future()
        self._flights[key] = flight
        try:
            exchanged = await exchange()
        except asyncio.CancelledError:
            flight.cancel()
            raise
        except BaseException as error:
            flight.set_exception(error)
            flight.exception()  # retrieved: a read without followers must not leave it unretrieved
            raise
        else:
            flight.set_result(exchanged)
            return exchanged
        finally:
            if self._flights.get(key) is flight:
                del self._flights[key]
