"""The WAF attack scores through ``edgeplane serve``: a custom rule ``cf.waf.score lt 20`` blocks an SQL injection in a
JSON-RPC parameter and lets the benign JSON-RPC of real clients through, and the scores reach a Logpush job's output
(``http_requests``: ``WAF*AttackScore``; ``firewall_events``: the event's ``Metadata``)."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bench.waf_requests import benign_requests

from tests.support.anvil import AnvilNode
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e

MANAGED = "http_request_firewall_managed"
CUSTOM = "http_request_firewall_custom"
SCORE_FIELDS = ["WAFAttackScore", "WAFSQLiAttackScore", "WAFXSSAttackScore", "WAFRCEAttackScore"]
ATTACK = {"jsonrpc": "2.0", "id": 41, "method": "eth_call", "params": ["1' UNION SELECT password FROM users--"]}
BY_SCORE = {"action": "block", "expression": "cf.waf.score lt 20", "description": "attack score under 20"}


@pytest.fixture(scope="module")
def service(anvil: AnvilNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    data_dir = tmp_path_factory.mktemp("attack-scores") / "data"
    with EdgeplaneProcess(data_dir, upstreams=(f"mainnet={anvil.url}",)) as process:
        yield process


@pytest.fixture(scope="module")
def outputs(service: EdgeplaneProcess) -> dict[str, Path]:
    """Logpush jobs on both datasets, created before any traffic; their output directories by dataset."""
    jobs = {
        "http_requests": ["RayID", "ClientRequestPath", "SecurityAction", *SCORE_FIELDS],
        "firewall_events": ["RayID", "RuleID", "Action", "Source", "Metadata"],
    }
    for dataset, fields in jobs.items():
        service.v4(
            "POST",
            "/zones/{zone}/logpush/jobs",
            json={
                "name": f"scores-{dataset}".replace("_", "-"),
                "dataset": dataset,
                **service.file_destination(dataset),
                "output_options": {"field_names": fields},
                "max_upload_records": 1000,
                "max_upload_interval_seconds": 30,
                "enabled": True,
            },
        )
    return {dataset: service.data_dir / "destinations" / dataset for dataset in jobs}


def put_entrypoint(service: EdgeplaneProcess, phase: str, rules: list[dict[str, Any]]) -> None:
    service.v4("PUT", f"/zones/{{zone}}/rulesets/phases/{phase}/entrypoint", json={"rules": rules})


def blocked(response: httpx.Response) -> bool:
    return response.status_code == 403 and response.json().get("error", {}).get("code") == -32003


def eventually(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the edge did not pick up the new configuration"
        time.sleep(0.1)


def lines_in(folder: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(folder.rglob("*.gz"))
        for line in gzip.decompress(path.read_bytes()).splitlines()
        if line
    ]


def ray_of(response: httpx.Response) -> str:
    return response.headers["cf-ray"].split("-")[0]


@pytest.fixture(scope="module")
def scored_traffic(service: EdgeplaneProcess, outputs: dict[str, Path]) -> dict[str, Any]:
    """Only the custom rule decides (the Managed Ruleset, which blocks this injection too, is not deployed): the
    injection's answer, and the ray ids of the benign JSON-RPC requests of real clients with the labels of those
    blocked. A fixture, not a test's side effect: each test of this module may run in another test process."""
    put_entrypoint(service, MANAGED, [])
    put_entrypoint(service, CUSTOM, [BY_SCORE])
    eventually(lambda: blocked(httpx.post(service.rpc_url(), json=ATTACK, timeout=30)))
    attack = httpx.post(service.rpc_url(), json=ATTACK, timeout=30)
    passed: list[str] = []
    refused: list[str] = []
    with httpx.Client(timeout=30) as client:
        for request in benign_requests():
            if request.method != "POST":
                continue
            headers = {name.decode(): value.decode() for name, value in request.headers if name != b"host"}
            headers.pop("content-length", None)
            response = client.post(service.rpc_url(), content=request.body, headers=headers)
            if blocked(response):
                refused.append(request.label)
            else:
                passed.append(ray_of(response))
    return {"attack": attack, "benign": passed, "refused": refused}


def test_a_score_rule_blocks_an_injection_and_passes_real_clients(scored_traffic: dict[str, Any]) -> None:
    attack: httpx.Response = scored_traffic["attack"]
    assert blocked(attack)
    assert attack.json()["id"] == 41
    assert scored_traffic["refused"] == []
    assert len(scored_traffic["benign"]) > 150


def test_the_scores_reach_logpush(
    service: EdgeplaneProcess, outputs: dict[str, Path], scored_traffic: dict[str, Any]
) -> None:
    rays = {"attack": ray_of(scored_traffic["attack"]), "benign": scored_traffic["benign"]}
    # A job uploads a full batch (1000 records) at once, a partial one at its 30 s interval: a thousand more blocked
    # requests (a record and an event each) fill both jobs' batches, which is quicker than waiting for the interval.
    with httpx.Client(timeout=30) as client:
        for _ in range(1000):
            assert blocked(client.post(service.rpc_url(), json=ATTACK))
    deadline = time.monotonic() + 75  # at the latest, the interval
    requests: dict[str, dict[str, Any]] = {}
    events: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        requests = {line["RayID"]: line for line in lines_in(outputs["http_requests"])}
        events = [line for line in lines_in(outputs["firewall_events"]) if line["RayID"] == rays["attack"]]
        if rays["attack"] in requests and events and all(ray in requests for ray in rays["benign"]):
            break
        time.sleep(1)
    attack = requests[rays["attack"]]
    assert attack["SecurityAction"] == "block"
    assert attack["WAFAttackScore"] < 20
    assert attack["WAFSQLiAttackScore"] < 20
    assert attack["WAFAttackScore"] <= min(attack["WAFXSSAttackScore"], attack["WAFRCEAttackScore"])
    # The job logs the scores, so every request of the zone is scored: benign JSON-RPC is clean.
    for ray in rays["benign"]:
        assert [requests[ray][name] for name in SCORE_FIELDS] == [99, 99, 99, 99]
    (event,) = events
    assert event["Source"] == "firewallCustom"
    assert event["Action"] == "block"
    assert event["Metadata"]["waf_score"] == str(attack["WAFAttackScore"])
    assert event["Metadata"]["waf_score_sqli"] == str(attack["WAFSQLiAttackScore"])
