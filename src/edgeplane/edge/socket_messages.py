"""The messages of a WebSocket at ``/v1/<network>``, answered through the gateway.

Why a module of its own: the session (``edgeplane.edge.websocket``) knows frames and bounds, not JSON-RPC; the
router knows HTTP requests. Here each whole message is what an HTTP request's body is to the gateway: a JSON-RPC
request or batch for the socket's network, checked by ``Gateway.respond`` as an HTTP body is (JSON, envelope, the
method allowlist, the per-method limits, the response cache, upstream selection), and its answer, refusals
included, is sent back on the socket as one text message. A JSON-RPC error never closes the socket.
"""

from __future__ import annotations

from collections.abc import Awaitable

from edgeplane.body_document import BodyDocument
from edgeplane.edge.websocket import Sender
from edgeplane.gateway.service import Gateway, GatewayResponse


class GatewayMessages:
    """A ``MessageHandler`` for one socket of ``network``."""

    __slots__ = ("gateway", "network")

    def __init__(self, gateway: Gateway, network: str) -> None:
        self.gateway = gateway
        self.network = network

    def message(self, sender: Sender, data: bytes) -> bytes | Awaitable[bytes | None] | None:
        answer = self.gateway.respond(self.network, BodyDocument(data))
        if isinstance(answer, GatewayResponse):
            return answer.body
        return _body(answer)

    def closed(self, sender: Sender) -> None:
        """Nothing is held for a socket yet."""


async def _body(answering: Awaitable[GatewayResponse]) -> bytes | None:
    return (await answering).body
