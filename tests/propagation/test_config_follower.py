"""Followers of configuration against the API's hub, over a real channel socket and a real database: a version is
applied by every follower before the hub's wait ends; a follower that does not answer is waited for at most the
bound, reported, and waited for again once it caught up; without announcements a follower still finds changes by
checking now and then; on PostgreSQL the database's LISTEN/NOTIFY announces a version with no channel at all."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

import edgeplane.configuration.snapshot as snapshot_module
import edgeplane.propagation.follower as follower_module
from edgeplane.api.endpoint import bump_config_version
from edgeplane.bootstrap import ensure_bootstrap
from edgeplane.configuration.snapshot import SnapshotHolder, read_delivery_snapshot
from edgeplane.edge.runtime import read_worker_snapshot
from edgeplane.propagation.channel import Applied, Hello, Role, bind_channel, channel_path, encode
from edgeplane.propagation.follower import ConfigurationFollower
from edgeplane.propagation.hub import PropagationHub
from edgeplane.store.database import Database, default_database_url
from tests.support.postgres import PostgresServer


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    database = Database(default_database_url(tmp_path))
    database.migrate()
    yield database
    database.close()


def _bump(database: Database) -> int:
    with database.session() as session:
        bump_config_version(session)
    return read_delivery_snapshot(database).version


def _reader(role: Role) -> Callable[[Database], Any]:
    """What a process of ``role`` reads: an edge worker's snapshot or the delivery process's."""
    return read_worker_snapshot if role == "edge" else read_delivery_snapshot


@contextlib.asynccontextmanager
async def _hub(database: Database, tmp_path: Path, bound: float = 2.0) -> AsyncIterator[PropagationHub]:
    hub = PropagationHub(database, bind_channel(channel_path(tmp_path)), timeout_seconds=bound)
    await hub.start()
    try:
        yield hub
    finally:
        await hub.close()


@contextlib.asynccontextmanager
async def _following(
    database: Database, channel: Path | None, role: Role = "edge", worker: int | None = 0
) -> AsyncIterator[SnapshotHolder]:
    read = _reader(role)
    snapshots = SnapshotHolder(read(database))
    follower = ConfigurationFollower(database, snapshots, read=read, role=role, worker=worker, channel=channel)
    task = asyncio.create_task(follower.run())
    try:
        yield snapshots
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _until(check: object, seconds: float = 30.0, what: str = "") -> None:
    """Returns once ``check()`` holds (within ``seconds``, the margin of a stalled machine): the followers' state is
    plain attributes."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.005)


async def _until_listening(database: Database, seconds: float = 30.0) -> None:
    """Returns once a connection of PostgreSQL's LISTENs (the follower's), within ``seconds``."""

    def listening() -> bool:
        with database.engine.connect() as connection:
            found = connection.execute(
                text("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()")
            ).scalar_one()
        return int(found) > 0

    deadline = asyncio.get_running_loop().time() + seconds
    while not await asyncio.to_thread(listening):
        assert asyncio.get_running_loop().time() < deadline, "the follower did not LISTEN"
        await asyncio.sleep(0.05)


async def test_every_edge_follower_has_applied_a_version_when_the_wait_ends(database: Database, tmp_path: Path) -> None:
    async with (
        _hub(database, tmp_path) as hub,
        _following(database, channel_path(tmp_path), worker=0) as first,
        _following(database, channel_path(tmp_path), worker=1) as second,
        _following(database, channel_path(tmp_path), role="delivery", worker=None),
    ):
        await _until(lambda: len(hub.followers) == 3, what="the followers did not connect")
        for _ in range(20):
            version = _bump(database)
            outcome = await hub.propagate_latest()
            assert outcome is not None
            assert outcome.version == version
            assert outcome.late == ()
            assert first.current.version == second.current.version == version


async def test_a_write_that_changed_nothing_does_not_wait(database: Database, tmp_path: Path) -> None:
    async with _hub(database, tmp_path, bound=60.0) as hub, _following(database, channel_path(tmp_path)):
        await _until(lambda: len(hub.followers) == 1)
        outcome = await hub.propagate_latest()
        assert outcome is not None
        assert outcome.late == ()
        assert outcome.waited_seconds < 30.0  # it did not wait out the bound


async def test_a_silent_follower_is_waited_for_at_most_the_bound_and_again_once_caught_up(
    database: Database, tmp_path: Path
) -> None:
    """The silent follower stands for an edge worker that is stopped: connected, saying nothing. The bound leaves
    the live follower the margin of a stalled machine to apply each version."""
    bound = 2.0
    async with _hub(database, tmp_path, bound=bound) as hub, _following(database, channel_path(tmp_path)) as live:
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        silent.connect(str(channel_path(tmp_path)))
        silent.sendall(encode(Hello(role="edge", pid=4242, worker=1, version=live.current.version)))
        try:
            await _until(lambda: len(hub.followers) == 2)
            version = _bump(database)
            outcome = await hub.propagate_latest()
            assert outcome is not None
            assert bound <= outcome.waited_seconds < bound + 30.0  # the bound, then no longer
            assert [(late.hello.pid, late.applied) for late in outcome.late] == [(4242, version - 1)]
            assert live.current.version == version  # the live one applied it all the same

            version = _bump(database)  # the late one is not waited for again
            outcome = await hub.propagate_latest()
            assert outcome is not None
            assert outcome.late == ()  # waited for, the silent one would be late again
            assert live.current.version == version

            silent.sendall(encode(Applied(version)))  # it caught up: waited for again
            await _until(lambda: not any(follower.late for follower in hub.followers))
            _bump(database)
            outcome = await hub.propagate_latest()
            assert outcome is not None
            assert [late.hello.pid for late in outcome.late] == [4242]
        finally:
            silent.close()


async def test_a_follower_that_connects_late_catches_up(database: Database, tmp_path: Path) -> None:
    async with _hub(database, tmp_path) as hub:
        snapshots = SnapshotHolder(read_worker_snapshot(database))  # read before the changes
        for _ in range(3):
            _bump(database)
            await hub.propagate_latest()
        version = read_delivery_snapshot(database).version
        follower = ConfigurationFollower(
            database, snapshots, read=read_worker_snapshot, role="edge", worker=0, channel=channel_path(tmp_path)
        )
        task = asyncio.create_task(follower.run())
        try:
            await _until(lambda: snapshots.current.version == version)
            await _until(lambda: [f.applied for f in hub.followers] == [version])
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_a_follower_reconnects_when_the_api_restarts(database: Database, tmp_path: Path) -> None:
    async with _following(database, channel_path(tmp_path)) as snapshots:
        async with _hub(database, tmp_path) as hub:
            await _until(lambda: len(hub.followers) == 1)
        async with _hub(database, tmp_path) as hub:  # the supervisor keeps the socket; here a new one is bound
            await _until(lambda: len(hub.followers) == 1, what="the follower did not connect again")
            version = _bump(database)
            outcome = await hub.propagate_latest()
            assert outcome is not None
            assert outcome.late == ()
            assert snapshots.current.version == version


async def test_without_announcements_a_follower_checks_now_and_then(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follower_module, "CHECK_SECONDS", 0.05)
    async with _following(database, None) as snapshots:
        version = _bump(database)
        await _until(lambda: snapshots.current.version == version, what="the follower did not check")


async def test_a_follower_asks_the_database_only_when_its_files_changed(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follower_module, "CHECK_SECONDS", 0.01)
    asked: list[int] = []
    real = follower_module.read_config_version

    def counted(session: object) -> int:
        version = real(session)  # type: ignore[arg-type]
        asked.append(version)
        return version

    monkeypatch.setattr(follower_module, "read_config_version", counted)
    checks = [0]  # the follower's looks at the database's files
    marker = database.change_marker

    def counted_marker() -> object:
        checks[0] += 1
        return marker()

    monkeypatch.setattr(database, "change_marker", counted_marker)
    async with _following(database, None) as snapshots:
        await _until(lambda: asked)  # the first check asks (the snapshot was read before the follower started)
        seen = checks[0]
        await _until(lambda: checks[0] >= seen + 30, what="the follower did not check")  # 30 checks, files unchanged
        assert len(asked) == 1
        version = _bump(database)
        await _until(lambda: snapshots.current.version == version)
        settled, seen = len(asked), checks[0]
        await _until(lambda: checks[0] >= seen + 20, what="the follower did not check")
        assert len(asked) == settled


def test_a_commit_changes_the_marker(database: Database) -> None:
    before = database.change_marker()
    assert before is not None
    assert database.change_marker() == before  # nothing written: the same
    _bump(database)
    assert database.change_marker() != before


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "postgresql://edgeplane@127.0.0.1:9/edgeplane"])
def test_no_marker_without_a_database_file(url: str) -> None:
    database = Database(url)
    try:
        assert database.change_marker() is None  # the follower asks the database at every check
    finally:
        database.close()


async def test_the_delivery_follower_has_the_zones_and_compiles_no_firewall(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bootstrap zone's hostnames run the default firewall deployment
    (``tests/configuration/test_snapshot_firewall.py``): the delivery process's snapshots have the zone, and no
    firewall is compiled for them, at the first read or after a change."""
    ensure_bootstrap(tmp_path, database)
    zone_id = json.loads((tmp_path / "credentials.json").read_text())["zone_id"]
    compiled: list[object] = []
    monkeypatch.setattr(snapshot_module, "cached_firewall", lambda *args, **kwargs: compiled.append(args))
    async with (
        _hub(database, tmp_path) as hub,
        _following(database, channel_path(tmp_path), role="delivery", worker=None) as snapshots,
    ):
        assert zone_id in snapshots.current.zones
        assert not hasattr(snapshots.current, "firewalls")
        await _until(lambda: len(hub.followers) == 1)
        version = _bump(database)
        await hub.propagate_latest()  # announces it; the hub waits for edge workers only
        await _until(lambda: snapshots.current.version == version)
        assert snapshots.current.version == version
        assert zone_id in snapshots.current.zones
        assert not hasattr(snapshots.current, "firewalls")
    assert compiled == []


async def test_postgresql_announces_a_version_to_a_follower_with_no_channel(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower on another machine hears of a change from the database itself, at once (its own check is an
    hour away here)."""
    monkeypatch.setattr(follower_module, "CHECK_SECONDS", 3600.0)
    database = Database(postgres.fresh_database("propagation"))
    database.migrate()
    hub = PropagationHub(database, None, timeout_seconds=2.0)  # no channel: nothing to wait for
    try:
        async with _following(database, None) as snapshots:
            await _until_listening(database)  # the follower connects on its own
            for _ in range(5):
                version = await asyncio.to_thread(_bump, database)
                await hub.propagate_latest()
                # Applied long before the follower's own check: announced.
                await _until(lambda: snapshots.current.version == version, what="no NOTIFY arrived")
    finally:
        await hub.close()
        database.close()


async def test_a_follower_that_lost_its_database_connection_catches_up_by_version(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server ends the follower's LISTEN connection (as a restart or a network cut would); the versions committed
    before it listens again are never announced to it, yet it applies the latest once it is back."""
    monkeypatch.setattr(follower_module, "CHECK_SECONDS", 3600.0)
    monkeypatch.setattr(follower_module, "RECONNECT_FIRST_SECONDS", 1.0)  # a window in which changes go unheard
    database = Database(postgres.fresh_database("propagation_reconnect"))
    database.migrate()
    try:
        async with _following(database, None) as snapshots:
            await _until_listening(database)

            def cut() -> int:
                with database.engine.connect() as connection:
                    ended = connection.execute(
                        text(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                            "WHERE query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()"
                        )
                    ).scalar_one()
                    connection.commit()
                return int(ended)

            assert await asyncio.to_thread(cut) == 1
            version = await asyncio.to_thread(_bump, database)  # announced while no one listens
            await asyncio.to_thread(database.engine.dispose)
            await _until(lambda: snapshots.current.version == version, what="the follower did not catch up")
    finally:
        database.close()
