"""``eth_subscribe("newHeads")`` for the WebSockets of one network, by polling the gateway for new blocks.

Why polling, and through the gateway: the upstreams may speak HTTP only, and a block asked of the gateway goes through
upstream selection, failover and the response cache like any client's request, so following the chain needs nothing
of the upstream modules. One follower per network and edge worker polls while it has subscribers, whatever their
number, and fans each head out to all of them: the upstreams see one poller, not one per client.

Heads are told in order, each number once, with no gap: the follower remembers the last number it told and, when
the chain's head is further on, asks for each block after it by number and tells them in turn. So when an upstream
dies and another answers, the heads go on from where they were; a node that is behind (its ``latest`` below the last
told, or a block it has not yet) is waited for, never followed backwards. A head is the node's block without its
transactions, uncles and withdrawals (the header fields, as nodes tell ``newHeads``). What a reorg replaces is not
told again (a later slice: nodes tell the new chain's heads).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any, Final

import orjson
import structlog

from edgeplane.body_document import BodyDocument
from edgeplane.edge.websocket import Sender
from edgeplane.gateway.service import Gateway, GatewayResponse

log = structlog.get_logger(__name__)

READY_SECONDS: Final = 10.0  # how long a subscription's answer waits for the follower to learn the head
MAX_CATCH_UP: Final = 128  # blocks told at once after a pause; further behind, the follower skips to the head
_NOT_HEADER: Final = ("transactions", "uncles", "withdrawals", "size", "totalDifficulty")


def subscription_id() -> str:
    """A subscription id as geth gives them: 16 random bytes in hex."""
    return "0x" + os.urandom(16).hex()


class HeadFollower:
    """The ``newHeads`` subscriptions of one network on this worker (see the module docstring)."""

    def __init__(self, gateway: Gateway, network: str, poll_seconds: float) -> None:
        self.gateway = gateway
        self.network = network
        self.poll_seconds = poll_seconds
        self.subscribers: dict[str, Sender] = {}
        self.last: int | None = None  # the last head told (or the head when the first subscriber came)
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()  # ``last`` is known

    async def subscribe(self, sender: Sender) -> str:
        """A new subscription for ``sender``: its id, given once the follower knows the chain's head (or after
        ``READY_SECONDS`` without an answer); the heads after that one are sent to it."""
        identifier = subscription_id()
        self.subscribers[identifier] = sender
        if self._task is None or self._task.done():
            self._ready.clear()
            self._task = asyncio.get_running_loop().create_task(self._run())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(READY_SECONDS):
                await self._ready.wait()
        return identifier

    def unsubscribe(self, identifier: str) -> bool:
        """Ends a subscription: whether it existed. The poller stops with the last one (and the head is forgotten)."""
        if self.subscribers.pop(identifier, None) is None:
            return False
        if not self.subscribers and self._task is not None:
            self._task.cancel()
            self._task = None
            self.last = None
        return True

    async def _run(self) -> None:
        while self.subscribers:
            try:
                await self.poll()
            except Exception:  # an answer not shaped as a block: logged, and asked again
                log.exception("newHeads poll failed", network=self.network)
            await asyncio.sleep(self.poll_seconds)

    async def poll(self) -> None:
        """Tells the heads after ``last`` up to the chain's head, in order (see the module docstring)."""
        latest = await self._block("latest")
        if latest is None:
            return
        number = int(latest["number"], 16)
        last = self.last
        if last is None:
            self.last = number  # heads after the one current when the first subscriber came
            self._ready.set()
            return
        if number <= last:
            return
        if number - last > MAX_CATCH_UP:
            log.warning("newHeads fell behind; skipping to the head", network=self.network, behind=number - last)
            last = number - MAX_CATCH_UP
        for next_number in range(last + 1, number + 1):
            block = latest if next_number == number else await self._block(hex(next_number))
            if block is None or int(block["number"], 16) != next_number:
                return  # the node that answered does not have it yet: asked again at the next poll
            self._tell(block)
            self.last = next_number
            if not self.subscribers:
                return

    async def _block(self, tag: str) -> dict[str, Any] | None:
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber", "params": [tag, False]})
        answering = self.gateway.respond(self.network, BodyDocument(body))
        answer = answering if isinstance(answering, GatewayResponse) else await answering
        document = orjson.loads(answer.body)
        block = document.get("result") if isinstance(document, dict) else None
        return block if isinstance(block, dict) else None

    def _tell(self, block: dict[str, Any]) -> None:
        header = orjson.dumps({key: value for key, value in block.items() if key not in _NOT_HEADER})
        for identifier, sender in list(self.subscribers.items()):
            sender.send_text(
                b'{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"'
                + identifier.encode()
                + b'","result":'
                + header
                + b"}}"
            )
