"""The messages of a WebSocket at ``/v1/<network>``, answered through the gateway, and its subscriptions.

Why a module of its own: the session (``edgeplane.edge.websocket``) knows frames and bounds, not JSON-RPC; the
router knows HTTP requests. Here each whole message is what an HTTP request's body is to the gateway: a JSON-RPC
request or batch for the socket's network, checked by ``Gateway.respond`` as an HTTP body is (JSON, envelope, the
method allowlist, the per-method limits, the response cache, upstream selection), and its answer, refusals
included, is sent back on the socket as one text message. A JSON-RPC error never closes the socket.

The exceptions are ``eth_subscribe`` and ``eth_unsubscribe`` as single requests (in a batch they go to the gateway,
which does not serve them): ``newHeads`` and ``logs`` (with ``address`` and ``topics``, as ``eth_getLogs`` takes
them) are followed by the network's ``HeadFollower``, up to ``max_subscriptions`` per socket; the socket's
subscriptions end with it. Other kinds (``newPendingTransactions``) are answered -32602.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Final

import orjson

from edgeplane.body_document import BodyDocument
from edgeplane.edge.head_follower import HeadFollower, SubscriptionRefused
from edgeplane.edge.websocket import Sender
from edgeplane.gateway.service import Gateway, GatewayResponse
from edgeplane.jsonrpc.errors import INVALID_PARAMS, INVALID_REQUEST

TOO_MANY_SUBSCRIPTIONS: Final = -32005  # "limit exceeded", as nodes and hosted providers answer it


class GatewayMessages:
    """A ``MessageHandler`` for one socket of ``network``; ``heads`` is the network's follower (None: no
    subscriptions)."""

    __slots__ = ("gateway", "heads", "max_subscriptions", "network", "subscriptions")

    def __init__(
        self, gateway: Gateway, network: str, heads: HeadFollower | None = None, *, max_subscriptions: int = 100
    ) -> None:
        self.gateway = gateway
        self.network = network
        self.heads = heads
        self.max_subscriptions = max_subscriptions
        self.subscriptions: set[str] = set()

    def message(self, sender: Sender, data: bytes) -> bytes | Awaitable[bytes | None] | None:
        if b"subscribe" in data and self.heads is not None:
            subscription = self._subscription(sender, data)
            if subscription is not None:
                return subscription
        answer = self.gateway.respond(self.network, BodyDocument(data))
        if isinstance(answer, GatewayResponse):
            return answer.body
        return _body(answer)

    def closed(self, sender: Sender) -> None:
        """The socket's subscriptions end with it."""
        heads = self.heads
        if heads is not None:
            for identifier in self.subscriptions:
                heads.unsubscribe(identifier)
        self.subscriptions.clear()

    def _subscription(self, sender: Sender, data: bytes) -> bytes | Awaitable[bytes | None] | None:
        """The answer to ``eth_subscribe``/``eth_unsubscribe`` as a single request; None for any other message."""
        try:
            request = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(request, dict):
            return None
        method, identifier = request.get("method"), request.get("id")
        if method not in ("eth_subscribe", "eth_unsubscribe"):
            return None
        if isinstance(identifier, bool) or not isinstance(identifier, str | int | None):
            identifier = None
        params = request.get("params")
        if not isinstance(params, list) or not params or not isinstance(params[0], str):
            return _error(identifier, INVALID_PARAMS, f"{method} takes a list of parameters, the first a string")
        heads = self.heads
        assert heads is not None
        if method == "eth_unsubscribe":
            target = params[0]
            ended = target in self.subscriptions and heads.unsubscribe(target)
            self.subscriptions.discard(target)
            return orjson.dumps({"jsonrpc": "2.0", "id": identifier, "result": ended})
        if request.get("jsonrpc") != "2.0":
            return _error(identifier, INVALID_REQUEST, "jsonrpc must be 2.0")
        kind, criteria = params[0], None
        if kind == "logs":
            criteria = params[1] if len(params) > 1 else {}
            if not isinstance(criteria, dict) or not criteria.keys() <= {"address", "topics"}:
                return _error(identifier, INVALID_PARAMS, "a logs subscription takes a filter of address and topics")
        elif kind != "newHeads" or len(params) > 1:
            unsupported = f"unsupported subscription {kind!r}; this edge offers newHeads and logs"
            return _error(identifier, INVALID_PARAMS, unsupported)
        if len(self.subscriptions) >= self.max_subscriptions:
            return _error(
                identifier, TOO_MANY_SUBSCRIPTIONS, f"more than {self.max_subscriptions} subscriptions on one socket"
            )
        return self._subscribe(heads, sender, identifier, criteria)

    async def _subscribe(
        self, heads: HeadFollower, sender: Sender, identifier: Any, criteria: dict[str, Any] | None
    ) -> bytes | None:
        try:
            subscription = await heads.subscribe(sender, criteria)
        except SubscriptionRefused as refused:
            return orjson.dumps({"jsonrpc": "2.0", "id": identifier, "error": refused.error})
        self.subscriptions.add(subscription)
        return orjson.dumps({"jsonrpc": "2.0", "id": identifier, "result": subscription})


def _error(identifier: Any, code: int, message: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": identifier, "error": {"code": code, "message": message}})


async def _body(answering: Awaitable[GatewayResponse]) -> bytes | None:
    return (await answering).body
