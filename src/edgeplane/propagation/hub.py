"""The API's side of configuration propagation: accepts followers on the configuration channel, announces each new
configuration version to all of them (and on PostgreSQL's channel), and waits until every edge worker has applied
it, for at most the configured bound.

An edge worker that has not applied a version within the bound is reported (a warning with its pid, worker, the
version it has and the one it was asked for, and ``edgeplane_config_propagation_late_total``) and marked late: later
writes do not wait for it until it has caught up with the latest version (it is logged again when it has). The
delivery process is announced to but never waited for: it evaluates no request."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass

import structlog
from prometheus_client import Counter, Histogram

from edgeplane.configuration.snapshot import read_config_version
from edgeplane.propagation.channel import Announce, Applied, ChannelError, Hello, decode, encode
from edgeplane.propagation.database_notify import announce_in_database, announces_in_database
from edgeplane.store.database import Database

log = structlog.get_logger(__name__)

# A follower must say who it is this soon after it connected (or be disconnected).
HELLO_SECONDS = 10.0

LATE_FOLLOWERS = Counter(
    "edgeplane_config_propagation_late_total",
    "Edge workers that had not applied a configuration change when the API's wait for them ended.",
    ["role"],
)
PROPAGATION_SECONDS = Histogram(
    "edgeplane_config_propagation_seconds",
    "How long a configuration write waited for every edge worker to apply it.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0),
)


@dataclass(eq=False, slots=True)
class ConnectedFollower:
    """A follower on the channel: who it said it is, and the latest version it has applied."""

    hello: Hello
    applied: int
    late: bool = False


@dataclass(frozen=True, slots=True)
class PropagationOutcome:
    """What a wait for a version ended with: how long it took, and the edge workers that had not applied it."""

    version: int
    waited_seconds: float
    late: tuple[ConnectedFollower, ...] = ()


class PropagationHub:
    """Followers of ``database``'s configuration, told of each new version through ``listener`` (the channel's
    listening socket; None: no follower can connect, and nothing is waited for). ``timeout_seconds`` bounds each
    wait for the edge workers (0: announce only)."""

    def __init__(self, database: Database, listener: socket.socket | None, *, timeout_seconds: float) -> None:
        self.database = database
        self.timeout_seconds = timeout_seconds
        self._listener = listener
        self._server: asyncio.Server | None = None
        self._writers: dict[ConnectedFollower, asyncio.StreamWriter] = {}
        self._announced = 0
        self._announced_in_database = 0
        self._progress = asyncio.Event()  # set (and replaced) whenever a follower applies a version or leaves
        self._in_database = announces_in_database(database)

    @property
    def followers(self) -> list[ConnectedFollower]:
        """The followers connected now."""
        return list(self._writers)

    async def start(self) -> None:
        """Accepts followers on the listener (call from the loop that will serve writes)."""
        if self._listener is not None:
            self._server = await asyncio.start_unix_server(self._serve_follower, sock=self._listener)

    async def close(self) -> None:
        """Stops accepting and disconnects every follower (they connect again to the API's next start)."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers.values()):
            writer.close()
        self._writers.clear()

    async def propagate_latest(self) -> PropagationOutcome | None:
        """Announces the configuration version the database holds now, when it is new, and waits (bounded) until
        every edge worker has applied it; None when the version could not be read (logged: the followers' own
        checks will find it)."""
        try:
            version = await asyncio.to_thread(self._read_and_announce_in_database)
        except Exception:
            log.warning("could not read the configuration version to announce it", exc_info=True)
            return None
        return await self.propagate(version)

    def _read_and_announce_in_database(self) -> int:
        with self.database.session() as session:
            version = read_config_version(session)
            if self._in_database and version > self._announced_in_database:
                announce_in_database(session, version)
                self._announced_in_database = version
        return version

    async def propagate(self, version: int) -> PropagationOutcome:
        """Announces ``version`` to every follower when it is new, and waits until every edge worker that is not
        late has applied it, for at most ``timeout_seconds``; those that had not are reported and marked late."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        if version > self._announced:
            self._announced = version
            line = encode(Announce(version))
            for writer in self._writers.values():
                if not writer.is_closing():
                    writer.write(line)
        if self._server is None or self.timeout_seconds <= 0:
            return PropagationOutcome(version, 0.0)
        deadline = started + self.timeout_seconds
        while True:
            waiting = [
                follower
                for follower in self._writers
                if follower.hello.role == "edge" and not follower.late and follower.applied < version
            ]
            remaining = deadline - loop.time()
            if not waiting or remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._progress.wait(), remaining)
        waited = loop.time() - started
        PROPAGATION_SECONDS.observe(waited)
        for follower in waiting:
            follower.late = True
            LATE_FOLLOWERS.labels(follower.hello.role).inc()
            log.warning(
                "an edge worker did not apply a configuration change in time; not waiting for it until it catches up",
                pid=follower.hello.pid,
                worker=follower.hello.worker,
                applied_version=follower.applied,
                version=version,
                waited_seconds=round(waited, 3),
            )
        return PropagationOutcome(version, waited, tuple(waiting))

    def _progressed(self) -> None:
        self._progress.set()
        self._progress = asyncio.Event()

    async def _serve_follower(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        follower: ConnectedFollower | None = None
        try:
            line = await asyncio.wait_for(reader.readline(), HELLO_SECONDS)
            hello = decode(line)
            if not isinstance(hello, Hello):
                raise ChannelError("a follower's first message is its hello")
            follower = ConnectedFollower(hello, applied=hello.version)
            self._writers[follower] = writer
            log.debug("configuration follower connected", role=hello.role, pid=hello.pid, worker=hello.worker)
            if self._announced > hello.version:
                writer.write(encode(Announce(self._announced)))
            while line := await reader.readline():
                message = decode(line)
                if isinstance(message, Applied) and message.version > follower.applied:
                    follower.applied = message.version
                    if follower.late and follower.applied >= self._announced:
                        follower.late = False
                        log.info(
                            "an edge worker caught up with the configuration",
                            pid=hello.pid,
                            worker=hello.worker,
                            version=follower.applied,
                        )
                    self._progressed()
        except (TimeoutError, OSError, ValueError) as exc:  # ChannelError is a ValueError; so is an overlong line
            log.warning("dropped a configuration follower's connection", error=str(exc) or type(exc).__name__)
        finally:
            if follower is not None:
                self._writers.pop(follower, None)
                self._progressed()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
