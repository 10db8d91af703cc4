"""``eth_subscribe`` (``newHeads``, ``logs``) for the WebSockets of one network, by polling the gateway for new
blocks.

Why polling, and through the gateway: the upstreams may speak HTTP only, and a block asked of the gateway goes through
upstream selection, failover and the response cache like any client's request, so following the chain needs nothing
of the upstream modules. One follower per network and edge worker polls while it has subscribers, whatever their
number, and fans each head out to all of them: the upstreams see one poller, not one per client.

Heads are told in order, each number once, with no gap: the follower remembers the last number it told and, when
the chain's head is further on, asks for each block after it by number and tells them in turn. So when an upstream
dies and another answers, the heads go on from where they were; a node that is behind (its ``latest`` below the last
told, or a block it has not yet) is waited for, never followed backwards. A head is the node's block without its
transactions, uncles and withdrawals (the header fields, as nodes tell ``newHeads``). What a reorg replaces is not
told again (a later slice: nodes tell the new chain's heads, and ``removed: true`` logs).

``logs`` subscriptions ride on the same heads: for each new block, each distinct filter (its ``address`` and
``topics``, however many sockets asked for it) is asked once, as ``eth_getLogs`` of that block by its hash, and its
logs are sent to every subscriber of the filter. A block's heads and logs are all asked for before any is sent:
when a question fails, nothing of the block is sent, and it is asked again at the next poll, so logs have no gap
either. A filter is tried on the current head when it is subscribed, so that one the node refuses is answered with
the node's error rather than a subscription that never tells anything.
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


class SubscriptionRefused(Exception):
    """The node refused a ``logs`` filter: ``error`` is its JSON-RPC error object."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.error = error


class _LogFilter:
    """One distinct ``logs`` filter and the subscriptions to it."""

    __slots__ = ("criteria", "subscribers")

    def __init__(self, criteria: dict[str, Any]) -> None:
        self.criteria = criteria
        self.subscribers: dict[str, Sender] = {}


class HeadFollower:
    """The ``newHeads`` and ``logs`` subscriptions of one network on this worker (see the module docstring)."""

    def __init__(self, gateway: Gateway, network: str, poll_seconds: float) -> None:
        self.gateway = gateway
        self.network = network
        self.poll_seconds = poll_seconds
        self.subscribers: dict[str, Sender] = {}  # of newHeads
        self.log_filters: dict[bytes, _LogFilter] = {}  # by the filter's canonical JSON
        self._log_subscriptions: dict[str, bytes] = {}  # a logs subscription's filter
        self.last: int | None = None  # the last head told (or the head when the first subscriber came)
        self.last_hash = ""
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()  # ``last`` is known

    @property
    def followed(self) -> bool:
        """Whether any subscription is open."""
        return bool(self.subscribers or self._log_subscriptions)

    async def subscribe(self, sender: Sender, criteria: dict[str, Any] | None = None) -> str:
        """A new subscription for ``sender``, to heads (``criteria`` None) or to the logs matching ``criteria``
        (``address``, ``topics``): its id, given once the follower knows the chain's head (or after ``READY_SECONDS``
        without an answer); what follows that head is sent to it. Raises ``SubscriptionRefused`` for a filter the
        node refuses."""
        identifier = subscription_id()
        if criteria is None:
            self.subscribers[identifier] = sender
        else:
            key = orjson.dumps(criteria, option=orjson.OPT_SORT_KEYS)
            log_filter = self.log_filters.get(key)
            if log_filter is None:
                log_filter = self.log_filters[key] = _LogFilter(criteria)
            log_filter.subscribers[identifier] = sender
            self._log_subscriptions[identifier] = key
        if self._task is None or self._task.done():
            self._ready.clear()
            self._task = asyncio.get_running_loop().create_task(self._run())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(READY_SECONDS):
                await self._ready.wait()
        if criteria is not None and self.last_hash:
            try:
                await self._logs(self.last_hash, criteria)
            except SubscriptionRefused:
                self.unsubscribe(identifier)
                raise
        return identifier

    def unsubscribe(self, identifier: str) -> bool:
        """Ends a subscription: whether it existed. The poller stops with the last one (and the head is forgotten)."""
        if self.subscribers.pop(identifier, None) is None:
            key = self._log_subscriptions.pop(identifier, None)
            if key is None:
                return False
            log_filter = self.log_filters[key]
            del log_filter.subscribers[identifier]
            if not log_filter.subscribers:
                del self.log_filters[key]
        if not self.followed and self._task is not None:
            self._task.cancel()
            self._task = None
            self.last = None
            self.last_hash = ""
        return True

    async def _run(self) -> None:
        while self.followed:
            try:
                await self.poll()
            except Exception:  # an answer not shaped as a block: logged, and asked again
                log.exception("subscriptions' poll failed", network=self.network)
            await asyncio.sleep(self.poll_seconds)

    async def poll(self) -> None:
        """Tells the heads after ``last`` up to the chain's head, in order, with their logs (see the module
        docstring)."""
        latest = await self._block("latest")
        if latest is None:
            return
        number = int(latest["number"], 16)
        last = self.last
        if last is None:
            self.last = number  # what follows the head current when the first subscriber came
            self.last_hash = str(latest["hash"])
            self._ready.set()
            return
        if number <= last:
            return
        if number - last > MAX_CATCH_UP:
            log.warning("subscriptions fell behind; skipping to the head", network=self.network, behind=number - last)
            last = number - MAX_CATCH_UP
        for next_number in range(last + 1, number + 1):
            block = latest if next_number == number else await self._block(hex(next_number))
            if block is None or int(block["number"], 16) != next_number:
                return  # the node that answered does not have it yet: asked again at the next poll
            try:
                logs = [
                    (log_filter, await self._logs(str(block["hash"]), log_filter.criteria))
                    for log_filter in list(self.log_filters.values())
                ]
            except SubscriptionRefused:
                return  # asked again at the next poll
            self._tell(block, logs)
            self.last = next_number
            self.last_hash = str(block["hash"])
            if not self.followed:
                return

    async def _ask(self, method: str, params: list[Any]) -> Any:
        """The result of ``method`` asked of the gateway; raises ``SubscriptionRefused`` with an error answer."""
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        answering = self.gateway.respond(self.network, BodyDocument(body))
        answer = answering if isinstance(answering, GatewayResponse) else await answering
        document = orjson.loads(answer.body)
        if not isinstance(document, dict):
            raise SubscriptionRefused({"code": -32603, "message": "not a JSON-RPC answer"})
        error = document.get("error")
        if isinstance(error, dict):
            raise SubscriptionRefused(error)
        return document.get("result")

    async def _block(self, tag: str) -> dict[str, Any] | None:
        try:
            block = await self._ask("eth_getBlockByNumber", [tag, False])
        except SubscriptionRefused:
            return None
        return block if isinstance(block, dict) else None

    async def _logs(self, block_hash: str, criteria: dict[str, Any]) -> list[Any]:
        logs = await self._ask("eth_getLogs", [{**criteria, "blockHash": block_hash}])
        if not isinstance(logs, list):
            raise SubscriptionRefused({"code": -32603, "message": "eth_getLogs answered no list"})
        return logs

    def _tell(self, block: dict[str, Any], logs: list[tuple[_LogFilter, list[Any]]]) -> None:
        if self.subscribers:
            header = orjson.dumps({key: value for key, value in block.items() if key not in _NOT_HEADER})
            for identifier, sender in list(self.subscribers.items()):
                sender.send_text(_notification(identifier, header))
        for log_filter, found in logs:
            for entry in found:
                encoded = orjson.dumps(entry)
                for identifier, sender in list(log_filter.subscribers.items()):
                    sender.send_text(_notification(identifier, encoded))


def _notification(identifier: str, result: bytes) -> bytes:
    return (
        b'{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"'
        + identifier.encode()
        + b'","result":'
        + result
        + b"}}"
    )
