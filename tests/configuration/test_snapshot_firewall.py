"""The edge worker's snapshot compiles each web3 zone's firewall from the stored entrypoints, once per change."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select

from edgeplane.bootstrap import ensure_bootstrap
from edgeplane.edge.runtime import read_worker_snapshot
from edgeplane.store.database import Database, default_database_url
from edgeplane.store.ruleset_models import Ruleset
from tests.waf.corpus import ATTACKS, BENIGN


def test_the_bootstrap_zone_runs_the_default_deployment(tmp_path: Path) -> None:
    database = Database(default_database_url(tmp_path))
    database.migrate()
    try:
        ensure_bootstrap(tmp_path, database)
        zone_id = json.loads((tmp_path / "credentials.json").read_text())["zone_id"]
        snapshot = read_worker_snapshot(database)
        assert {route.zone_id for route in snapshot.web3_hostnames.values()} == {zone_id}
        firewall = snapshot.firewall(zone_id)
        assert firewall is not None
        assert firewall.problems == ()
        assert firewall.evaluate(ATTACKS[0].sample.fields()).blocked
        assert not firewall.evaluate(BENIGN[0].fields()).blocked
        # Nothing changed: the same compiled firewall is reused.
        assert read_worker_snapshot(database).firewall(zone_id) is firewall
        with database.session() as session:
            entrypoint = session.scalars(select(Ruleset).where(Ruleset.zone_id == zone_id)).one()
            entrypoint.rules = []
            session.commit()
        assert read_worker_snapshot(database).firewall(zone_id) is None
    finally:
        database.close()
