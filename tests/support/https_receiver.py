"""A real HTTPS server for ``https://`` destination tests: stdlib ``http.server`` in a thread, TLS with a
certificate from a throw-away CA (``trustme``) made when the receiver is created, on 127.0.0.1 and a free port.

It records every request (method, path, headers, raw body and, when ``Content-Encoding: gzip``, the decompressed
body) and answers ``status`` (200 unless a test chooses another, with ``response_headers``), after ``delay``
seconds. ``stop()`` closes the
listening socket; ``start()`` opens it again on the same port. The certificate is valid for ``localhost``,
``127.0.0.1`` and ``receiver.test`` (a name tests can make resolve to 127.0.0.1); ``ca_path`` is the CA's PEM file.
"""

from __future__ import annotations

import gzip
import shutil
import ssl
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

import trustme

from tests.support.anvil import free_port

TEST_HOST_NAME = "receiver.test"


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    decompressed: bytes | None = field(default=None)


class HttpsReceiver:
    """One HTTPS server; ``url`` is its base URL, ``requests`` what it received, oldest first."""

    def __init__(self) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="edgeplane-https-"))
        authority = trustme.CA()
        certificate = authority.issue_cert("localhost", "127.0.0.1", TEST_HOST_NAME)
        self.ca_path = self.root / "ca.pem"
        authority.cert_pem.write_to_path(str(self.ca_path))
        self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        certificate.configure_cert(self._tls)
        self.status = 200
        self.delay = 0.0
        self.response_headers: dict[str, str] = {}
        self.requests: list[ReceivedRequest] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def answer(self, status: int, headers: dict[str, str] | None = None) -> None:
        """Answer every later request with ``status`` and ``headers``."""
        self.status = status
        self.response_headers = dict(headers or {})

    def start(self) -> HttpsReceiver:
        """Listen (again) on the port; returns once connections are accepted."""
        if self._server is not None:
            return self
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                decompressed = None
                if self.headers.get("Content-Encoding", "").lower() == "gzip":
                    decompressed = gzip.decompress(body)
                with receiver._lock:
                    receiver.requests.append(
                        ReceivedRequest("POST", self.path, dict(self.headers.items()), body, decompressed)
                    )
                    status, headers = receiver.status, dict(receiver.response_headers)
                if receiver.delay:
                    time.sleep(receiver.delay)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            allow_reuse_address = True
            daemon_threads = True

        server = Server(("127.0.0.1", self.port), Handler)
        server.socket = self._tls.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening; the port stays this receiver's for ``start()``."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> HttpsReceiver:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
