"""The configuration snapshot: an immutable picture of what the data plane needs, built from the database when
configuration changes and swapped in whole. The request path reads only the snapshot, never the database."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeplane.store.database import Database
from edgeplane.store.models import ConfigVersion, LogpushJob, Web3Hostname, Zone

log = structlog.get_logger(__name__)

# How often a process other than the control plane's checks whether the configuration changed.
FOLLOW_INTERVAL_SECONDS = 0.25


@dataclass(frozen=True, slots=True)
class ZoneRoute:
    """What the edge knows of a zone."""

    zone_id: str
    zone_name: str
    account_id: str
    plan: str


@dataclass(frozen=True, slots=True)
class ConfigSnapshot:
    """The data plane's whole configuration at one version."""

    version: int = 0
    zones: dict[str, ZoneRoute] = field(default_factory=dict)
    web3_hostnames: dict[str, ZoneRoute] = field(default_factory=dict)
    logpush_jobs: tuple[dict[str, Any], ...] = ()

    def web3_zone(self, host: str) -> ZoneRoute | None:
        """The zone whose web3 gateway ``host`` serves, or None."""
        return self.web3_hostnames.get(host)


def build_snapshot(session: Session) -> ConfigSnapshot:
    """Reads the configuration the data plane needs."""
    version_row = session.get(ConfigVersion, 1)
    zones = {zone.id: zone for zone in session.scalars(select(Zone)).all()}
    hostnames: dict[str, ZoneRoute] = {}
    for hostname in session.scalars(select(Web3Hostname).where(Web3Hostname.status == "active")).all():
        zone = zones.get(hostname.zone_id)
        if zone is None or zone.paused or hostname.target != "ethereum":
            continue
        hostnames[hostname.name] = ZoneRoute(zone.id, zone.name, zone.account_id, zone.plan)
    jobs = tuple(
        {
            "id": job.id,
            "zone_id": job.zone_id,
            "account_id": job.account_id,
            "dataset": job.dataset,
            "enabled": job.enabled,
            "destination_conf": job.destination_conf,
            "filter": job.filter,
            "output_options": job.output_options,
            "logpull_options": job.logpull_options,
            "max_upload_bytes": job.max_upload_bytes,
            "max_upload_records": job.max_upload_records,
            "max_upload_interval_seconds": job.max_upload_interval_seconds,
        }
        for job in session.scalars(select(LogpushJob).order_by(LogpushJob.id)).all()
    )
    routes = {zone.id: ZoneRoute(zone.id, zone.name, zone.account_id, zone.plan) for zone in zones.values()}
    return ConfigSnapshot(
        version=version_row.version if version_row else 0, zones=routes, web3_hostnames=hostnames, logpush_jobs=jobs
    )


class SnapshotHolder:
    """Holds the current snapshot; ``current`` is a plain attribute read, safe from any thread."""

    def __init__(self, snapshot: ConfigSnapshot | None = None) -> None:
        self.current = snapshot or ConfigSnapshot()

    def replace(self, snapshot: ConfigSnapshot) -> None:
        """Swaps in a new snapshot."""
        self.current = snapshot


def read_config_version(session: Session) -> int:
    """The configuration version (0 before the first change)."""
    row = session.get(ConfigVersion, 1)
    return row.version if row else 0


def read_snapshot(database: Database) -> ConfigSnapshot:
    """The current configuration snapshot."""
    with database.session() as session:
        return build_snapshot(session)


async def follow_configuration(database: Database, snapshots: SnapshotHolder) -> None:
    """Rebuilds the snapshot whenever the configuration version changes; runs until cancelled."""

    def current_version() -> int:
        with database.session() as session:
            return read_config_version(session)

    while True:
        await asyncio.sleep(FOLLOW_INTERVAL_SECONDS)
        try:
            version = await asyncio.to_thread(current_version)
            if version != snapshots.current.version:
                snapshots.replace(await asyncio.to_thread(read_snapshot, database))
        except Exception:  # the database may be briefly unavailable; keep serving the snapshot we have
            log.warning("could not read the configuration; keeping the current snapshot", exc_info=True)
