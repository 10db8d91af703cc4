"""The dashboard's files, served as they are, with headers that keep the pages to their own origin: scripts, styles
and requests only from the dashboard's own origin, never inside another site's frame."""

from __future__ import annotations

from pathlib import Path

from starlette.datastructures import MutableHeaders
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ASSETS = Path(__file__).resolve().parent / "static"

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
        "form-action 'self'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    # The pages change with each version of edgeplane: the browser asks again (and gets 304 when nothing changed).
    "cache-control": "no-cache",
}


class SecurityHeaders:
    """ASGI middleware: adds ``SECURITY_HEADERS`` to every answer of the wrapped application."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


def dashboard_assets() -> ASGIApp:
    """The dashboard's files (``index.html`` at ``/``), with ``SECURITY_HEADERS``."""
    return SecurityHeaders(StaticFiles(directory=ASSETS, html=True))
