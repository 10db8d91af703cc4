"""A follower of configuration (an edge worker, the delivery process): swaps in a new snapshot as soon as a new
version is announced, and tells the API which version it has applied.

Announcements come over the configuration channel (``channel``) and, on PostgreSQL, the database's LISTEN/NOTIFY
(``database_notify``). Nothing is polled at a short interval: the follower sleeps until an announcement arrives. As a
safety net for an announcement that never came (the API restarting between its commit and its announcement, a
channel that cannot be reached), it checks the version every ``CHECK_SECONDS`` (with SQLite, only when the database's
files changed since it last asked, or ``QUERY_SECONDS`` after it did) and whenever it (re)connects to the channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Generic

import structlog

from edgeplane.configuration.snapshot import Snapshot, SnapshotHolder, read_config_version
from edgeplane.propagation.channel import Announce, Applied, ChannelError, Hello, Role, connect_channel, decode, encode
from edgeplane.propagation.database_notify import announces_in_database, database_announcements
from edgeplane.store.database import Database

log = structlog.get_logger(__name__)

# How often the version is checked without an announcement (a stat of the SQLite files; a query on PostgreSQL).
CHECK_SECONDS = 5.0
# How long a SQLite follower goes without asking the database even though its files look unchanged.
QUERY_SECONDS = 60.0
# Pauses between attempts to reach the channel or the database's channel: doubling from the first to the last.
RECONNECT_FIRST_SECONDS = 0.05
RECONNECT_LAST_SECONDS = 2.0
# An announced version the database does not show yet is asked for again after this long, at most this many times.
_BEHIND_PAUSE_SECONDS = 0.02
_BEHIND_TRIES = 50


class ConfigurationFollower(Generic[Snapshot]):
    """Keeps ``snapshots`` at the configuration's latest version for one process (``role``; an edge worker's
    ``worker`` number), each new snapshot read by ``read`` (the process's view: ``read_edge_snapshot`` or
    ``read_delivery_snapshot``). ``channel``: the path of the configuration channel's socket, or None to follow by the
    database alone; ``on_change`` is called after each new snapshot is swapped in."""

    def __init__(
        self,
        database: Database,
        snapshots: SnapshotHolder[Snapshot],
        *,
        read: Callable[[Database], Snapshot],
        role: Role,
        channel: Path | None,
        worker: int | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.database = database
        self.snapshots: SnapshotHolder[Snapshot] = snapshots
        self.read: Callable[[Database], Snapshot] = read
        self.role: Role = role
        self.channel = channel
        self.worker = worker
        self.on_change = on_change
        self._announced = 0  # the highest version announced so far
        self._check = False  # whether to ask the database whatever was announced
        self._wake = asyncio.Event()
        self._writer: asyncio.StreamWriter | None = None
        self._told = -1  # the version last told on the current connection

    async def run(self) -> None:
        """Follows until cancelled."""
        tasks = []
        if self.channel is not None:
            tasks.append(asyncio.create_task(self._listen_on_channel(self.channel), name="config-channel"))
        if announces_in_database(self.database):
            tasks.append(asyncio.create_task(self._listen_on_database(), name="config-database-channel"))
        try:
            await self._apply_forever()
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _announce(self, version: int) -> None:
        if version > self._announced:
            self._announced = version
        self._wake.set()

    def _ask_database(self) -> None:
        self._check = True
        self._wake.set()

    async def _apply_forever(self) -> None:
        marker: object = None  # the first check asks: the snapshot may have been read before this started
        asked = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), CHECK_SECONDS)
            self._wake.clear()
            if not self._wake_reason_pending():
                seen = self.database.change_marker()  # before the query: a commit after it changes the next one
                if seen is not None and seen == marker and time.monotonic() - asked < QUERY_SECONDS:
                    continue
                marker, self._check = seen, True
            asked = time.monotonic()
            try:
                await self._catch_up()
            except Exception:  # the database may be briefly unavailable: keep serving the snapshot there is
                log.warning("could not read the configuration; keeping the current snapshot", exc_info=True)
            self._tell_applied()

    def _wake_reason_pending(self) -> bool:
        return self._check or self._announced > self.snapshots.current.version

    async def _catch_up(self) -> None:
        """Swaps in the latest snapshot when the database's version differs from the current one (or is behind an
        announced one: a commit another connection has not seen yet is asked for again, briefly)."""
        self._check = False
        for _ in range(_BEHIND_TRIES):
            version = await asyncio.to_thread(self._read_version)
            if version != self.snapshots.current.version:
                self.snapshots.replace(await asyncio.to_thread(self.read, self.database))
                if self.on_change is not None:
                    self.on_change()
            if self.snapshots.current.version >= self._announced:
                return
            await asyncio.sleep(_BEHIND_PAUSE_SECONDS)
        log.warning(
            "an announced configuration version is not in the database",
            announced=self._announced,
            database_version=self.snapshots.current.version,
        )
        self._announced = self.snapshots.current.version

    def _read_version(self) -> int:
        with self.database.session() as session:
            return read_config_version(session)

    def _tell_applied(self) -> None:
        version = self.snapshots.current.version
        writer = self._writer
        if writer is None or version == self._told or writer.is_closing():
            return
        writer.write(encode(Applied(version)))
        self._told = version

    async def _listen_on_channel(self, path: Path) -> None:
        pause = RECONNECT_FIRST_SECONDS
        while True:
            try:
                sock = connect_channel(path)
            except OSError:
                await asyncio.sleep(pause)
                pause = min(pause * 2, RECONNECT_LAST_SECONDS)
                continue
            try:
                reader, writer = await asyncio.open_unix_connection(sock=sock)
            except OSError:
                sock.close()
                continue
            pause = RECONNECT_FIRST_SECONDS
            self._writer, self._told = writer, self.snapshots.current.version
            hello = Hello(role=self.role, pid=os.getpid(), worker=self.worker, version=self._told)
            writer.write(encode(hello))
            self._ask_database()  # what was announced while this follower was not connected
            try:
                await self._read_announcements(reader)
            finally:
                self._writer = None
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
            log.info("the configuration channel closed; connecting again", channel=str(path))

    async def _read_announcements(self, reader: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await reader.readline()
            except (OSError, ValueError):  # reset, or a line longer than the reader's limit
                return
            if not line:
                return
            try:
                message = decode(line)
            except ChannelError as exc:
                log.warning("ignored a configuration channel message", error=str(exc))
                continue
            if isinstance(message, Announce):
                self._announce(message.version)

    async def _listen_on_database(self) -> None:
        pause = RECONNECT_FIRST_SECONDS
        while True:
            try:
                async for version in database_announcements(self.database):
                    pause = RECONNECT_FIRST_SECONDS
                    self._announce(version)
            except Exception as exc:  # psycopg.Error or OSError: the server restarting, the network
                log.warning("listening for configuration announcements failed; trying again", error=str(exc))
            await asyncio.sleep(pause)
            pause = min(pause * 2, RECONNECT_LAST_SECONDS)
            self._ask_database()  # what was announced while not listening
