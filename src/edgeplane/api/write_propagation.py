"""A configuration write answers once the edge applied it: the one place where the control plane waits for
propagation, around every ``/client/v4`` request that may write (any method but GET, HEAD and OPTIONS).

When such a request succeeds (its status is under 400: its transaction committed), the answer's start is held until
the hub has announced the configuration version the database holds now and every edge worker has applied it, or the
hub's bound has passed (``api.propagation_timeout_seconds``; the late ones are reported, see ``PropagationHub``). A
write that changed nothing finds every worker already at the current version and is answered at once. A refused
request is answered without waiting: it committed nothing.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from edgeplane.propagation.hub import PropagationHub

_READS = frozenset({"GET", "HEAD", "OPTIONS"})
_V4 = "/client/v4"


class WritePropagation:
    """ASGI middleware: holds a successful write's answer until ``hub`` has propagated the configuration."""

    def __init__(self, app: ASGIApp, hub: PropagationHub) -> None:
        self.app = app
        self.hub = hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _READS or not scope["path"].startswith(_V4):
            await self.app(scope, receive, send)
            return
        held: Message | None = None

        async def send_once_propagated(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start":
                held = message
                return
            if held is not None:
                start, held = held, None
                if start["status"] < 400:
                    await self.hub.propagate_latest()
                await send(start)
            await send(message)

        await self.app(scope, receive, send_once_propagated)
