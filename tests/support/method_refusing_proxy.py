"""A JSON-RPC node without some methods: a real HTTP server on loopback that passes every request to a real node
(anvil) except the methods it was told to refuse, which it answers ``-32601`` as geth answers a method it does not
have. Single requests and batches alike: a batch's refused items are answered in place, the rest go to the node as
one batch. Every method asked is kept in ``asked`` (refused ones too), so a test can show which way it was served.

Used for what anvil cannot show by itself: a node that has ``debug_traceTransaction`` but not
``debug_traceBlockByNumber`` (the ``trace_filter`` fallback of docs/gateway.md).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Collection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import httpx


class MethodRefusingProxy:
    """Serves ``url``: ``node_url``'s JSON-RPC without the ``refused`` methods."""

    def __init__(self, node_url: str, refused: Collection[str]) -> None:
        self.node_url = node_url
        self.refused = frozenset(refused)
        self.asked: list[str] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=60)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, name="method-refusing-proxy", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/"

    def start(self) -> MethodRefusingProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()

    def __enter__(self) -> MethodRefusingProxy:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def answer(self, body: Any) -> Any:
        """The answer to a request body (an object or a batch)."""
        items = body if isinstance(body, list) else [body]
        with self._lock:
            self.asked += [str(item.get("method")) for item in items if isinstance(item, dict)]
        passed = [item for item in items if not self._refuses(item)]
        answers: dict[Any, Any] = {}
        if passed:
            forwarded = self._client.post(self.node_url, json=passed if isinstance(body, list) else passed[0]).json()
            for answer in forwarded if isinstance(forwarded, list) else [forwarded]:
                answers[json.dumps(answer.get("id"))] = answer
        out = [
            self._refusal(item) if self._refuses(item) else answers[json.dumps(item.get("id"))]
            for item in items
            if isinstance(item, dict)
        ]
        return out if isinstance(body, list) else out[0]

    def _refuses(self, item: Any) -> bool:
        return isinstance(item, dict) and item.get("method") in self.refused

    @staticmethod
    def _refusal(item: dict[str, Any]) -> dict[str, Any]:
        message = f"the method {item.get('method')} does not exist/is not available"
        return {"jsonrpc": "2.0", "id": item.get("id"), "error": {"code": -32601, "message": message}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                data = json.dumps(proxy.answer(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: the tests read ``asked``

        return Handler
