"""Processes other than the control plane follow configuration changes: at once when the database's files change,
without asking the database while they do not; the delivery process follows them without compiling firewalls."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import edgeplane.store.snapshot as snapshot_module
from edgeplane.api.endpoint import bump_config_version
from edgeplane.bootstrap import ensure_bootstrap
from edgeplane.store.database import Database, default_database_url
from edgeplane.store.snapshot import SnapshotHolder, follow_configuration, read_snapshot


@pytest.fixture
def database(tmp_path: Path) -> Database:
    database = Database(default_database_url(tmp_path))
    database.migrate()
    yield database  # type: ignore[misc]
    database.close()


async def _version_seen(snapshots: SnapshotHolder, version: int) -> None:
    """Returns once the follower has swapped in the snapshot of ``version`` (within 5 s)."""
    deadline = asyncio.get_running_loop().time() + 5
    while snapshots.current.version != version:
        assert asyncio.get_running_loop().time() < deadline, "the follower did not see the change"
        await asyncio.sleep(0.01)  # the holder is a plain attribute: there is nothing to wait on


def _bump(database: Database) -> None:
    with database.session() as session:
        bump_config_version(session)


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
        assert database.change_marker() is None  # the follower asks the database every time
    finally:
        database.close()


async def test_the_follower_asks_only_after_a_change(database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_module, "FOLLOW_INTERVAL_SECONDS", 0.01)
    asked: list[int] = []
    real = snapshot_module.read_config_version

    def counted(session: object) -> int:
        version = real(session)  # type: ignore[arg-type]
        asked.append(version)
        return version

    monkeypatch.setattr(snapshot_module, "read_config_version", counted)
    snapshots = SnapshotHolder(read_snapshot(database))
    follower = asyncio.create_task(follow_configuration(database, snapshots))
    try:
        deadline = asyncio.get_running_loop().time() + 5
        while not asked:  # the first look (nothing seen before) asks once, on a thread: on a busy machine, not at once
            assert asyncio.get_running_loop().time() < deadline, "the follower never asked"
            await asyncio.sleep(0.01)  # a plain list: there is nothing to wait on
        await asyncio.sleep(0.3)  # about 30 looks at the files
        assert len(asked) == 1  # unchanged files ask no more
        _bump(database)
        await _version_seen(snapshots, 1)
        settled = len(asked)
        await asyncio.sleep(0.2)
        assert len(asked) == settled
    finally:
        follower.cancel()
        with pytest.raises(asyncio.CancelledError):
            await follower


async def test_the_follower_still_asks_now_and_then(database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """A change the files do not show (a database written in a way their stat misses) is seen within
    ``FOLLOW_QUERY_SECONDS``."""
    monkeypatch.setattr(snapshot_module, "FOLLOW_INTERVAL_SECONDS", 0.01)
    monkeypatch.setattr(snapshot_module, "FOLLOW_QUERY_SECONDS", 0.1)
    monkeypatch.setattr(database, "change_marker", lambda: ("unchanging",))
    snapshots = SnapshotHolder(read_snapshot(database))
    follower = asyncio.create_task(follow_configuration(database, snapshots))
    try:
        await asyncio.sleep(0.05)
        _bump(database)
        await _version_seen(snapshots, 1)
    finally:
        follower.cancel()
        with pytest.raises(asyncio.CancelledError):
            await follower


async def test_a_follower_without_firewalls_has_the_rest(database: Database, tmp_path: Path) -> None:
    """The bootstrap zone's hostnames run the default firewall deployment (``tests/waf/test_snapshot_firewall.py``):
    read without firewalls, the snapshot routes them and compiles nothing."""
    ensure_bootstrap(tmp_path, database)
    zone_id = json.loads((tmp_path / "credentials.json").read_text())["zone_id"]
    snapshots = SnapshotHolder(read_snapshot(database, firewalls=False))
    assert zone_id in snapshots.current.zones
    assert {route.zone_id for route in snapshots.current.web3_hostnames.values()} == {zone_id}
    assert snapshots.current.firewalls == {}
    follower = asyncio.create_task(follow_configuration(database, snapshots, firewalls=False))
    try:
        version = snapshots.current.version
        _bump(database)
        await _version_seen(snapshots, version + 1)
        assert zone_id in snapshots.current.zones
        assert snapshots.current.firewalls == {}
    finally:
        follower.cancel()
        with pytest.raises(asyncio.CancelledError):
            await follower
