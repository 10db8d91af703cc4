"""The configuration snapshots: immutable pictures of what a process of the data plane needs, built from the database
in one read when the configuration changes and swapped in whole. The request path reads only its snapshot, never the
database.

There is a view per consumer, because what each needs costs the other: ``EdgeSnapshot`` is the edge worker's (zones,
web3 hostnames, each zone's compiled firewall, and which zones' attack scores a Logpush job logs) and carries no job
definitions; ``DeliverySnapshot`` is the delivery process's (zones and the typed Logpush job definitions) and compiles
no firewall, which for the OWASP Core Ruleset is seconds of CPU the delivery process would spend for nothing.

Each zone served by a web3 hostname has its compiled firewall (``edgeplane.waf.firewall``): the account's and the
zone's entrypoint rules of the custom and managed firewall phases, the account's custom rulesets they execute, and
the previous WAF while it runs (``edgeplane.configuration.previous_waf``). Compiled firewalls are cached by their
configuration, so a reload recompiles only the zones whose rules changed. A zone whose firewall cannot be built (the
database refused a read) runs without one and the failure is logged: the rest of the configuration still reloads.

The edge scores the requests of a zone when an enabled Logpush job logs their attack scores; the zones are found
here, once per reload, from the job definitions and a test of each job that the edge worker gives (whether a job's
output or filter names an attack score is ``edgeplane.logs.attack_score_jobs``'s to say: the logs package, which
knows datasets and output options, sits above this one).

How a process learns that the configuration changed is ``edgeplane.propagation``'s.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import orjson
import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeplane.configuration.logpush_jobs import LogpushJobDefinition, read_logpush_jobs
from edgeplane.configuration.previous_waf import previous_waf_rules
from edgeplane.store.database import Database
from edgeplane.store.models import ConfigVersion, Web3Hostname, Zone
from edgeplane.store.ruleset_models import account_custom_rulesets, find_entrypoint
from edgeplane.waf.firewall import PHASES, Entrypoint, Firewall, compile_firewall

log = structlog.get_logger(__name__)

# Compiled firewalls kept across reloads, by a digest of their configuration (most recently used last).
FIREWALL_CACHE_SIZE = 256
_firewalls: OrderedDict[bytes, Firewall] = OrderedDict()


@dataclass(frozen=True, slots=True)
class ZoneRoute:
    """What the data plane knows of a zone."""

    zone_id: str
    zone_name: str
    account_id: str
    plan: str


@dataclass(frozen=True, slots=True)
class EdgeSnapshot:
    """The edge worker's configuration at one version: how a request's host finds its zone, the zone's firewall,
    and whether its requests are scored for the logs (``attack_score_zones``). No job definitions: the edge reads
    none."""

    version: int = 0
    web3_hostnames: dict[str, ZoneRoute] = field(default_factory=dict)
    firewalls: dict[str, Firewall] = field(default_factory=dict)
    attack_score_zones: frozenset[str] = frozenset()  # the zones whose attack scores an enabled Logpush job logs

    def web3_zone(self, host: str) -> ZoneRoute | None:
        """The zone whose web3 gateway ``host`` serves, or None."""
        return self.web3_hostnames.get(host)

    def firewall(self, zone_id: str) -> Firewall | None:
        """The zone's compiled firewall, or None when it has no rule to evaluate."""
        return self.firewalls.get(zone_id)


@dataclass(frozen=True, slots=True)
class DeliverySnapshot:
    """The delivery process's configuration at one version: the zones (a job's records are selected by their zone
    names) and every Logpush job's definition, enabled or not. No firewall: delivery evaluates none."""

    version: int = 0
    zones: dict[str, ZoneRoute] = field(default_factory=dict)
    logpush_jobs: tuple[LogpushJobDefinition, ...] = ()


# Either snapshot, for what holds or follows one whatever its view.
Snapshot = TypeVar("Snapshot", EdgeSnapshot, DeliverySnapshot)


def read_edge_snapshot(
    database: Database, *, logs_attack_scores: Callable[[LogpushJobDefinition], bool]
) -> EdgeSnapshot:
    """The edge worker's snapshot of the current configuration, its firewalls compiled (or taken from the cache).
    ``logs_attack_scores`` says whether a job's records carry the attack scores (``attack_score_zones``)."""
    with database.session() as session:
        version = read_config_version(session)
        rows = session.scalars(select(Zone)).all()
        zones = _zone_routes(rows)
        hostnames = _web3_hostnames(session, {row.id: zones[row.id] for row in rows if not row.paused})
        scored = attack_score_zones(read_logpush_jobs(session), zones, logs_attack_scores)
        compiled: dict[str, Firewall] = {}
        for route in {route.zone_id: route for route in hostnames.values()}.values():
            firewall = _zone_firewall(session, route)
            if firewall is not None and not firewall.empty:
                compiled[route.zone_id] = firewall
        return EdgeSnapshot(version=version, web3_hostnames=hostnames, firewalls=compiled, attack_score_zones=scored)


def read_delivery_snapshot(database: Database) -> DeliverySnapshot:
    """The delivery process's snapshot of the current configuration (no firewall is compiled)."""
    with database.session() as session:
        return DeliverySnapshot(
            version=read_config_version(session),
            zones=_zone_routes(session.scalars(select(Zone)).all()),
            logpush_jobs=read_logpush_jobs(session),
        )


def attack_score_zones(
    jobs: Sequence[LogpushJobDefinition],
    zones: Mapping[str, ZoneRoute],
    logs_attack_scores: Callable[[LogpushJobDefinition], bool],
) -> frozenset[str]:
    """The ids of the zones whose requests' attack scores an enabled job logs (``logs_attack_scores``): the job's
    zone, or every zone of its account for an account's job. The edge scores every request of these zones that
    reaches the firewall stage, firewall or not."""
    found: set[str] = set()
    for job in jobs:
        if not job.enabled or not logs_attack_scores(job):
            continue
        if job.zone_id:
            found.add(job.zone_id)
        else:
            found.update(zone.zone_id for zone in zones.values() if zone.account_id == job.account_id)
    return frozenset(found)


def _zone_routes(rows: Sequence[Zone]) -> dict[str, ZoneRoute]:
    return {row.id: ZoneRoute(row.id, row.name, row.account_id, row.plan) for row in rows}


def _web3_hostnames(session: Session, serving: Mapping[str, ZoneRoute]) -> dict[str, ZoneRoute]:
    """The active Ethereum gateways' hostnames of the zones ``serving`` (those not paused), with their zone."""
    hostnames: dict[str, ZoneRoute] = {}
    for hostname in session.scalars(select(Web3Hostname).where(Web3Hostname.status == "active")).all():
        route = serving.get(hostname.zone_id)
        if route is not None and hostname.target == "ethereum":
            hostnames[hostname.name] = route
    return hostnames


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


class SnapshotHolder(Generic[Snapshot]):
    """Holds a process's current snapshot; ``current`` is a plain attribute read, safe from any thread."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.current: Snapshot = snapshot

    def replace(self, snapshot: Snapshot) -> None:
        """Swaps in a new snapshot."""
        self.current = snapshot


def read_config_version(session: Session) -> int:
    """The configuration version (0 before the first change)."""
    row = session.get(ConfigVersion, 1)
    return row.version if row else 0
