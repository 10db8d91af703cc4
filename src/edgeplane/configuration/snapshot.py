"""The configuration snapshot: an immutable picture of what the data plane needs, built from the database when
configuration changes and swapped in whole. The request path reads only the snapshot, never the database.

Each zone served by a web3 hostname has its compiled firewall (``edgeplane.waf.firewall``): the account's and the
zone's entrypoint rules of the custom and managed firewall phases, the account's custom rulesets they execute, and
the previous WAF while it runs (``edgeplane.configuration.previous_waf``). Compiled firewalls are cached by their
configuration, so a reload recompiles only the zones whose rules changed. A zone whose firewall cannot be built (the
database refused a read) runs without one and the failure is logged: the rest of the configuration still reloads. A
process that evaluates no firewall (the delivery process) reads snapshots without them: compiling the OWASP Core
Ruleset is seconds of CPU.

How a process learns that the configuration changed is ``edgeplane.propagation``'s.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeplane.configuration.previous_waf import previous_waf_rules
from edgeplane.store.database import Database
from edgeplane.store.models import ConfigVersion, LogpushJob, Web3Hostname, Zone
from edgeplane.store.ruleset_models import account_custom_rulesets, find_entrypoint
from edgeplane.waf.firewall import PHASES, Entrypoint, Firewall, compile_firewall

log = structlog.get_logger(__name__)

# Compiled firewalls kept across reloads, by a digest of their configuration (most recently used last).
FIREWALL_CACHE_SIZE = 256
_firewalls: OrderedDict[bytes, Firewall] = OrderedDict()


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
    firewalls: dict[str, Firewall] = field(default_factory=dict)

    def web3_zone(self, host: str) -> ZoneRoute | None:
        """The zone whose web3 gateway ``host`` serves, or None."""
        return self.web3_hostnames.get(host)

    def firewall(self, zone_id: str) -> Firewall | None:
        """The zone's compiled firewall, or None when it has no rule to evaluate."""
        return self.firewalls.get(zone_id)


def build_snapshot(session: Session, *, firewalls: bool = True) -> ConfigSnapshot:
    """Reads the configuration the data plane needs; without ``firewalls``, the snapshot has none."""
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
    compiled: dict[str, Firewall] = {}
    if firewalls:
        for route in {route.zone_id: route for route in hostnames.values()}.values():
            firewall = _zone_firewall(session, route)
            if firewall is not None and not firewall.empty:
                compiled[route.zone_id] = firewall
    return ConfigSnapshot(
        version=version_row.version if version_row else 0,
        zones=routes,
        web3_hostnames=hostnames,
        logpush_jobs=jobs,
        firewalls=compiled,
    )


def _zone_firewall(session: Session, zone: ZoneRoute) -> Firewall | None:
    """The zone's compiled firewall (from the cache when its configuration did not change); None when it could not
    be read (logged)."""
    try:
        phases: dict[str, list[Entrypoint]] = {}
        for phase in PHASES:
            entrypoints = []
            for scope in (
                {"account_id": zone.account_id, "zone_id": None},
                {"zone_id": zone.zone_id, "account_id": None},
            ):
                ruleset = find_entrypoint(session, phase=phase, **scope)
                if ruleset is not None and ruleset.rules:
                    entrypoints.append(Entrypoint(list(ruleset.rules), ruleset.id))
            phases[phase] = entrypoints
        custom = account_custom_rulesets(session, zone.account_id)
        previous = previous_waf_rules(session, zone.zone_id)
    except Exception:
        log.error("could not read the zone's firewall configuration", zone_id=zone.zone_id, exc_info=True)
        session.rollback()
        return None
    return cached_firewall(phases, previous=previous, rulesets=custom)


def cached_firewall(
    phases: Mapping[str, Sequence[Entrypoint]],
    *,
    previous: Sequence[Mapping[str, Any]] | None,
    rulesets: Mapping[str, Sequence[Mapping[str, Any]]],
) -> Firewall:
    """``compile_firewall`` of this configuration, compiled once per process while it stays in the cache."""
    key = hashlib.sha256(
        orjson.dumps(
            [
                {phase: [(entry.ruleset_id, entry.rules) for entry in entries] for phase, entries in phases.items()},
                previous,
                rulesets,
            ],
            option=orjson.OPT_SORT_KEYS,
            default=str,
        )
    ).digest()
    firewall = _firewalls.get(key)
    if firewall is None:
        firewall = compile_firewall(phases, previous=previous, rulesets=rulesets)
        _firewalls[key] = firewall
        while len(_firewalls) > FIREWALL_CACHE_SIZE:
            _firewalls.popitem(last=False)
    else:
        _firewalls.move_to_end(key)
    return firewall


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


def read_snapshot(database: Database, *, firewalls: bool = True) -> ConfigSnapshot:
    """The current configuration snapshot; without ``firewalls``, it has none."""
    with database.session() as session:
        return build_snapshot(session, firewalls=firewalls)
