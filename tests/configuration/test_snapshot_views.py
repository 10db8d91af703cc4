"""A view of the configuration per consumer: the edge worker's snapshot routes, filters and knows which zones' attack
scores are logged, and carries no job definitions; the delivery process's has the typed job definitions and
compiles no firewall."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import edgeplane.configuration.snapshot as snapshot_module
from edgeplane.configuration.logpush_jobs import LogpushJobDefinition
from edgeplane.configuration.snapshot import (
    ZoneRoute,
    attack_score_zones,
    read_delivery_snapshot,
    read_edge_snapshot,
)
from edgeplane.logs.attack_score_jobs import logs_attack_scores
from edgeplane.store.database import Database, default_database_url
from edgeplane.store.models import Account, LogpushJob, Web3Hostname, Zone

SCORES = {"field_names": ["RayID", "WAFAttackScore"]}
NO_SCORES = {"field_names": ["RayID"]}
FILTER = '{"where":{"key":"ClientCountry","operator":"eq","value":"de"}}'


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    """Account ``a`` has zones z1 (served by a web3 hostname) and z2, account ``b`` zone z3; one job per case."""
    database = Database(default_database_url(tmp_path))
    database.migrate()
    conf = f"file://{tmp_path}/pushed"
    with database.session() as session:
        session.add_all([Account(id="a", name="a"), Account(id="b", name="b")])
        session.flush()
        session.add_all(
            [
                Zone(id="z1", account_id="a", name="one.example", plan="enterprise"),
                Zone(id="z2", account_id="a", name="two.example"),
                Zone(id="z3", account_id="b", name="three.example"),
            ]
        )
        session.flush()
        session.add(Web3Hostname(id="h1", zone_id="z1", name="gw.one.example", target="ethereum"))
        session.add_all(
            [
                # z1 logs the scores (and is the case whose every member is checked below).
                LogpushJob(
                    zone_id="z1",
                    dataset="http_requests",
                    enabled=True,
                    destination_conf=conf,
                    output_options=SCORES,
                    filter=FILTER,
                    max_upload_bytes=5_000_000,
                    max_upload_records=1000,
                    max_upload_interval_seconds=60,
                ),
                # account b's job writes every field: each of its zones (z3) logs the scores.
                LogpushJob(account_id="b", dataset="http_requests", enabled=True, destination_conf=conf),
                # z2's jobs log no score: disabled, another dataset, or no score field.
                LogpushJob(zone_id="z2", dataset="http_requests", enabled=False, destination_conf=conf),
                LogpushJob(zone_id="z2", dataset="firewall_events", enabled=True, destination_conf=conf),
                LogpushJob(
                    zone_id="z2",
                    dataset="http_requests",
                    enabled=True,
                    destination_conf=conf,
                    logpull_options="fields=RayID&timestamps=rfc3339",
                ),
            ]
        )
        session.commit()
    yield database
    database.close()


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The zones' firewalls the snapshot builds (each goes through ``cached_firewall``), counted."""
    built: list[str] = []
    real = snapshot_module.cached_firewall

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append("firewall")
        return real(*args, **kwargs)

    monkeypatch.setattr(snapshot_module, "cached_firewall", counted)
    return built


def test_the_delivery_snapshot_has_the_typed_jobs_and_compiles_no_firewall(
    database: Database, compiled: list[str], tmp_path: Path
) -> None:
    snapshot = read_delivery_snapshot(database)
    assert compiled == []
    assert not hasattr(snapshot, "firewalls")
    assert snapshot.version == 0
    assert set(snapshot.zones) == {"z1", "z2", "z3"}
    assert snapshot.zones["z1"] == ZoneRoute("z1", "one.example", "a", "enterprise")
    assert [job.id for job in snapshot.logpush_jobs] == [1, 2, 3, 4, 5]  # every job, enabled or not, by id
    assert snapshot.logpush_jobs[0] == LogpushJobDefinition(
        id=1,
        zone_id="z1",
        account_id=None,
        dataset="http_requests",
        enabled=True,
        destination_conf=f"file://{tmp_path}/pushed",
        filter=FILTER,
        output_options=SCORES,
        logpull_options=None,
        max_upload_bytes=5_000_000,
        max_upload_records=1000,
        max_upload_interval_seconds=60,
    )
    assert snapshot.logpush_jobs[4].logpull_options == "fields=RayID&timestamps=rfc3339"


def test_the_edge_snapshot_carries_no_jobs_but_the_zones_whose_scores_are_logged(
    database: Database, compiled: list[str]
) -> None:
    snapshot = read_edge_snapshot(database, logs_attack_scores=logs_attack_scores)
    assert compiled == ["firewall"]  # z1's, the one zone a web3 hostname serves
    assert not hasattr(snapshot, "logpush_jobs")
    assert snapshot.attack_score_zones == {"z1", "z3"}
    assert snapshot.web3_zone("gw.one.example") == ZoneRoute("z1", "one.example", "a", "enterprise")
    assert snapshot.firewall("z1") is None  # no rule stored: nothing to evaluate


def test_a_change_of_jobs_changes_the_scored_zones(database: Database) -> None:
    with database.session() as session:
        for job in session.query(LogpushJob).filter(LogpushJob.zone_id == "z2"):
            job.enabled = True  # z2's disabled job writes every field
        session.commit()
    snapshot = read_edge_snapshot(database, logs_attack_scores=logs_attack_scores)
    assert snapshot.attack_score_zones == {"z1", "z2", "z3"}


ZONES = {
    "z1": ZoneRoute("z1", "one.example", "a", "free"),
    "z2": ZoneRoute("z2", "two.example", "a", "free"),
    "z3": ZoneRoute("z3", "three.example", "b", "free"),
}


def job(job_id: int, **members: Any) -> LogpushJobDefinition:
    return LogpushJobDefinition(id=job_id, dataset="http_requests", destination_conf="file:///x", **members)


@pytest.mark.parametrize(
    ("jobs", "logs", "zones"),
    [
        ([], lambda job: True, set()),
        ([job(1, zone_id="z2", enabled=True)], lambda job: True, {"z2"}),
        ([job(1, account_id="a", enabled=True)], lambda job: True, {"z1", "z2"}),  # every zone of the account
        ([job(1, account_id="c", enabled=True)], lambda job: True, set()),  # an account with no zone
        ([job(1, zone_id="z2", enabled=False)], lambda job: True, set()),  # a disabled job logs nothing
        ([job(1, zone_id="z2", enabled=True)], lambda job: False, set()),  # a job that logs no score
        (
            [job(1, zone_id="z1", enabled=True), job(2, account_id="b", enabled=True), job(3, zone_id="z2")],
            lambda job: job.id != 1,
            {"z3"},
        ),
    ],
)
def test_attack_score_zones(
    jobs: list[LogpushJobDefinition], logs: Callable[[LogpushJobDefinition], bool], zones: set[str]
) -> None:
    assert attack_score_zones(jobs, ZONES, logs) == zones
