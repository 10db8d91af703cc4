"""A change of the OWASP Core Ruleset's deployment is live on every edge worker when the API answers: a real ``edgeplane
serve --edge-workers 2`` deploys the ruleset for the first time, changes its paranoia level, its threshold and its
overrides and undeploys it, round after round, and the first requests after each answer, on connections held to
every worker, are decided by the deployment the API just answered for; no worker reports being late.

The request carries one SQL injection in a JSON-RPC parameter, which CRS scores 20 at PL1 (942100, 942190, 942270,
942360) and 40 from PL2 on: each deployment below decides it the other way from the one before."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from edgeplane.waf.catalogue import core_rule_id
from edgeplane.waf.firewall import MANAGED_PHASE, deploy_managed_rulesets
from tests.support.anvil import AnvilNode
from tests.support.edge_workers import connections_to_every_worker
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e

WORKERS = 2
ADDRESS = "0xd8da6bf26964af9d7eed9e03e53415d37aa96045"
BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "eth_call",
        "params": [
            {
                "to": ADDRESS,
                "data": "1' union select username,password from users--",
            },
            "latest",
        ],
    }
).encode()
REQUEST = (
    b"POST /v1/mainnet HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY
)
ALLOWED, BLOCKED = 200, 403


def core_ruleset(level: int, threshold: int, *, disabled: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """The managed phase's rules that execute the OWASP Core Ruleset alone (not the Managed Ruleset, which blocks
    the request whatever CRS does) at ``level`` and ``threshold``, without the CRS rules ``disabled``."""
    rules = deploy_managed_rulesets(paranoia_level=level, score_threshold=threshold, managed=False)
    overrides = rules[0]["action_parameters"]["overrides"]
    overrides["rules"] += [{"id": core_rule_id(crs_id), "enabled": False} for crs_id in disabled]
    return rules


# Each deployment and what it does to the request, in order: each decides it the other way from the one before.
ROUND: tuple[tuple[str, list[dict[str, Any]], int], ...] = (
    ("PL2, threshold 40", core_ruleset(2, 40), BLOCKED),
    ("PL1, threshold 40", core_ruleset(1, 40), ALLOWED),
    ("PL1, threshold 20", core_ruleset(1, 20), BLOCKED),
    ("PL1, threshold 20, 942100 disabled", core_ruleset(1, 20, disabled=(942100,)), ALLOWED),
    ("PL4, threshold 25", core_ruleset(4, 25), BLOCKED),
    ("undeployed", [], ALLOWED),
)
ROUNDS = 3


@pytest.fixture(scope="module")
def service(anvil: AnvilNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    data_dir = tmp_path_factory.mktemp("crs-propagation") / "data"
    process = EdgeplaneProcess(
        data_dir, upstreams=(f"mainnet={anvil.url}",), extra_args=("--edge-workers", str(WORKERS))
    ).start()
    try:
        yield process
    finally:
        process.stop()


def put_managed_rules(service: EdgeplaneProcess, rules: list[dict[str, Any]]) -> None:
    """Replaces the zone's managed phase entrypoint (answered once every edge worker applied it, or at the bound)."""
    service.v4("PUT", f"/zones/{{zone}}/rulesets/phases/{MANAGED_PHASE}/entrypoint", json={"rules": rules})


def late_count(service: EdgeplaneProcess) -> float:
    metrics = httpx.get(f"{service.api_url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith('edgeplane_config_propagation_late_total{role="edge"}')
    )


def test_every_change_of_the_core_ruleset_is_enforced_by_every_worker_when_the_api_answers(
    service: EdgeplaneProcess,
) -> None:
    put_managed_rules(service, [])  # the zone's default deployment (the Managed Ruleset) would block the request
    connections = connections_to_every_worker(service, WORKERS, REQUEST)
    late_before = late_count(service)
    try:
        assert [connection.ask() for connection in connections] == [ALLOWED] * len(connections)
        for round_number in range(ROUNDS):
            for name, rules, expected in ROUND:
                put_managed_rules(service, rules)
                statuses = [connection.ask() for connection in connections]
                assert statuses == [expected] * len(connections), f"round {round_number}, {name}: {statuses}"
    finally:
        for connection in connections:
            connection.close()
    assert late_count(service) == late_before, "an edge worker applied a change after the API answered"
    assert "did not apply a configuration change in time" not in service.log_path.read_text(errors="replace")
