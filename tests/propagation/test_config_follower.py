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


async def _until(check: object, seconds: float = 5.0, what: str = "") -> None:
    """Returns once ``check()`` holds (within ``seconds``): the followers' state is plain attributes."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.005)


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
    async with _hub(database, tmp_path) as hub, _following(database, channel_path(tmp_path)):
        await _until(lambda: len(hub.followers) == 1)
        outcome = await hub.propagate_latest()
        assert outcome is not None
        assert outcome.late == ()
        assert outcome.waited_seconds < 0.1


async def test_a_silent_follower_is_waited_for_at_most_the_bound_and_again_once_caught_up(
    database: Database, tmp_path: Path
) -> None:
    """The silent follower stands for an edge worker that is stopped: connected, saying nothing."""
    async with _hub(database, tmp_path, bound=0.3) as hub, _following(database, channel_path(tmp_path)) as live:
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        silent.connect(str(channel_path(tmp_path)))
        silent.sendall(encode(Hello(role="edge", pid=4242, worker=1, version=live.current.version)))
        try:
            await _until(lambda: len(hub.followers) == 2)
            version = _bump(database)
            outcome = await hub.propagate_latest()
            assert outcome is not None
            assert 0.3 <= outcome.waited_seconds < 1.0
            assert [(late.hello.pid, late.applied) for late in outcome.late] == [(4242, version - 1)]
            assert live.current.version == version  # the live one applied it all the same

            version = _bump(database)  # the late one is not waited for again
            outcome = await hub.propagate_latest()
            assert outcome is not None
            assert outcome.late == ()
            assert outcome.waited_seconds < 0.3
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
            await _until(lambda: snapshots.current.version == version, seconds=2.0)
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
    async with _following(database, None) as snapshots:
        await _until(lambda: asked)  # the first check asks (the snapshot was read before the follower started)
        await asyncio.sleep(0.3)  # about 30 checks of unchanged files
        assert len(asked) == 1
        version = _bump(database)
        await _until(lambda: snapshots.current.version == version)
        settled = len(asked)
        await asyncio.sleep(0.2)
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
            await asyncio.sleep(0.5)  # the follower's LISTEN is in place (it connects on its own)
            for _ in range(5):
                version = await asyncio.to_thread(_bump, database)
                started = asyncio.get_running_loop().time()
                await hub.propagate_latest()
                await _until(lambda: snapshots.current.version == version, seconds=2.0, what="no NOTIFY arrived")
                assert asyncio.get_running_loop().time() - started < 1.0
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
            await asyncio.sleep(0.5)  # the follower's LISTEN is in place

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
            await _until(
                lambda: snapshots.current.version == version, seconds=5.0, what="the follower did not catch up"
            )
    finally:
        database.close()
