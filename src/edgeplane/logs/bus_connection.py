"""A connection to the log bus (NATS JetStream) for synchronous code: the intake and the delivery jobs' readers call
it from worker threads, and it never blocks longer than its timeout.

The nats-py client is asyncio-only, and the callers are not on an event loop (the intake runs in a thread, each
job's reads in ``asyncio.to_thread``). So the connection owns an event loop of its own, in a daemon thread, and each
call is a coroutine handed to it (``asyncio.run_coroutine_threadsafe``) whose result is waited for with a timeout:
one client and one socket per process, shared by every thread, with the client's own reconnection.

``servers`` is a list of ``nats://host:port`` URLs, the nodes of a cluster (the client learns the others from the
server too). The connection is made in the background from the start and kept by the client (it reconnects by
itself, forever, to any node), so a process may start before the bus: until it is connected, and while it
reconnects, calls fail with ``BusUnavailable`` after their timeout. Every failure of a call (no connection, no
responder, a timeout, an error answer of JetStream) is ``BusUnavailable``, an ``OSError``: the caller keeps what it
was handing over and tries again later. A call that timed out may still have taken effect (a publish stored after
its acknowledgement was lost): the publisher's idempotency keys make its retry harmless.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

import nats
import nats.errors
import structlog
from nats.aio.client import Client
from nats.js import JetStreamContext
from prometheus_client import Gauge

from edgeplane.config import redacted_url

log = structlog.get_logger(__name__)

T = TypeVar("T")

TIMEOUT_SECONDS: Final = 5.0  # a call's default bound
_RECONNECT_WAIT_SECONDS: Final = 0.5
_CLOSE_SECONDS: Final = 5.0
_ERROR_LOG_SECONDS: Final = 10.0  # the client reports each failed attempt; one warning per this often is enough
_SCHEMES: Final = ("nats", "tls")


BUS_CONNECTED = Gauge(
    "edgeplane_log_bus_connected",
    "1 while every process of this node that uses the log bus is connected to it, else 0.",
    multiprocess_mode="livemin",
)


class BusUnavailable(OSError):
    """The log bus did not do what was asked: not connected, no server answered in time, or JetStream answered with
    an error. ``str()`` says which. Nothing the call handed over should be taken as delivered; try again later."""


class BusConnection:
    """One NATS client on an event loop of its own (see the module docstring). ``timeout`` bounds each call;
    ``close()`` ends the connection and the thread."""

    def __init__(self, servers: Sequence[str], *, name: str = "edgeplane", timeout: float = TIMEOUT_SECONDS) -> None:
        """Raises ``ValueError`` for an empty list or a URL that is not ``nats://host:port`` (or ``tls://``)."""
        self.servers = check_servers(servers)
        if timeout <= 0:
            raise ValueError(f"a bus timeout must be positive, not {timeout}")
        self.name = name
        self.timeout = timeout
        self._client = Client()
        self._jetstream: JetStreamContext | None = None
        self._closed = False
        self._last_error_log = -_ERROR_LOG_SECONDS
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="log-bus", daemon=True)
        self._thread.start()
        # Connecting goes on in the background until it succeeds (a process may start before the bus); calls wait
        # for it within their timeout.
        self._connecting = asyncio.run_coroutine_threadsafe(self._connect(), self._loop)

    async def _connect(self) -> None:
        await self._client.connect(
            servers=list(self.servers),
            name=self.name,
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=_RECONNECT_WAIT_SECONDS,  # type: ignore[arg-type]  # nats-py annotates an int
            connect_timeout=max(1, int(self.timeout)),
            error_cb=self._on_error,
            disconnected_cb=self._on_disconnected,
            reconnected_cb=self._on_reconnected,
        )
        self._jetstream = self._client.jetstream(timeout=self.timeout)
        url = self._client.connected_url
        BUS_CONNECTED.set(1)
        log.info("log bus connected", server=redacted_url(url.geturl()) if url else "")

    async def _on_error(self, error: Exception) -> None:
        now = time.monotonic()
        if now - self._last_error_log >= _ERROR_LOG_SECONDS:
            self._last_error_log = now
            log.warning("log bus connection error", error=f"{type(error).__name__}: {error}")

    async def _on_disconnected(self) -> None:
        BUS_CONNECTED.set(0)
        if not self._closed:
            log.warning("log bus disconnected; reconnecting")

    async def _on_reconnected(self) -> None:
        url = self._client.connected_url
        BUS_CONNECTED.set(1)
        log.info("log bus reconnected", server=redacted_url(url.geturl()) if url else "")

    @property
    def connected(self) -> bool:
        """Whether the client is connected now (not while it reconnects)."""
        return self._client.is_connected

    def run(self, work: Callable[[JetStreamContext], Coroutine[Any, Any, T]], timeout: float | None = None) -> T:
        """Runs ``work(jetstream)`` on the connection's loop once connected and returns its result, within
        ``timeout`` seconds (the connection's by default) from the call. Raises ``BusUnavailable`` for every
        failure of the bus (and ``RuntimeError`` when called on the connection's own loop, which would wait for
        itself); other exceptions of ``work`` propagate as they are."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("BusConnection.run called on its own event loop")
        if self._closed:
            raise BusUnavailable("the log bus connection is closed")
        bound = self.timeout if timeout is None else timeout
        future = asyncio.run_coroutine_threadsafe(self._run(work, bound), self._loop)
        try:
            return future.result(bound + 1.0)  # the coroutine bounds itself; this is a safety net
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise BusUnavailable(f"the log bus did not answer within {bound} s") from None
        except (nats.errors.Error, TimeoutError, OSError) as error:
            if isinstance(error, BusUnavailable):
                raise
            raise BusUnavailable(_describe(error)) from error

    async def _run(self, work: Callable[[JetStreamContext], Coroutine[Any, Any, T]], bound: float) -> T:
        try:
            async with asyncio.timeout(bound):
                await asyncio.shield(asyncio.wrap_future(self._connecting))
                jetstream = self._jetstream
                if jetstream is None or self._client.is_closed:
                    raise BusUnavailable("the log bus connection is closed")
                return await work(jetstream)
        except TimeoutError:
            if not self._client.is_connected:
                raise BusUnavailable(
                    f"not connected to the log bus ({', '.join(redacted_url(server) for server in self.servers)})"
                ) from None
            raise BusUnavailable(f"the log bus did not answer within {bound} s") from None

    def max_payload(self) -> int:
        """The largest message the connected server takes (its ``max_payload``), in bytes. Raises
        ``BusUnavailable`` while not connected."""

        async def read(_jetstream: JetStreamContext) -> int:
            return self._client.max_payload

        return self.run(read)

    def close(self) -> None:
        """Closes the connection (messages buffered for a server that is away are dropped: nothing was acknowledged
        for them) and stops the loop's thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        closing = asyncio.run_coroutine_threadsafe(self._shut(), self._loop)
        try:
            closing.result(_CLOSE_SECONDS + 1.0)
        except (concurrent.futures.TimeoutError, nats.errors.Error, OSError) as error:
            log.warning("log bus connection not closed cleanly", error=_describe(error))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_CLOSE_SECONDS)
        if not self._thread.is_alive():
            self._loop.close()

    async def _shut(self) -> None:
        self._connecting.cancel()
        if not self._client.is_closed:
            async with asyncio.timeout(_CLOSE_SECONDS):
                await self._client.close()
        current = asyncio.current_task()
        others = [task for task in asyncio.all_tasks() if task is not current]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def __enter__(self) -> BusConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def check_servers(servers: Sequence[str]) -> tuple[str, ...]:
    """``servers`` checked: at least one, each ``nats://host:port`` or ``tls://host:port``. Raises ``ValueError``
    naming the first that is not."""
    if isinstance(servers, str):
        raise ValueError("the log bus servers are a list of URLs, not one string")
    if not servers:
        raise ValueError("the log bus needs at least one server URL")
    for url in servers:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise ValueError(f"log bus server {redacted_url(url)!r} is not a URL nats://host:port") from None
        if parts.scheme not in _SCHEMES or not parts.hostname or port is None or parts.path not in ("", "/"):
            raise ValueError(f"log bus server {redacted_url(url)!r} is not a URL nats://host:port")
    return tuple(servers)


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
