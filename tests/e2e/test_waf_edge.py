"""The managed WAF through ``edgeplane serve``: the default deployment blocks an injection in a JSON-RPC request and
lets gateway traffic through; entrypoints written with the Rulesets API (overrides, skip rules, the Core Ruleset's
threshold) change the outcome; and a Logpush job on ``firewall_events`` receives the events."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from edgeplane.waf.catalogue import MANAGED_RULESET_ID, OWASP_RULESET_ID, OWASP_SCORE_RULE_ID
from tests.support.anvil import AnvilNode
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e

MANAGED = "http_request_firewall_managed"
CUSTOM = "http_request_firewall_custom"
ATTACK = {"jsonrpc": "2.0", "id": 41, "method": "eth_call", "params": ["1' UNION SELECT password FROM users--"]}
BENIGN = {"jsonrpc": "2.0", "id": 42, "method": "eth_chainId", "params": []}


@pytest.fixture(scope="module")
def service(anvil: AnvilNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    data_dir = tmp_path_factory.mktemp("waf") / "data"
    with EdgeplaneProcess(data_dir, upstreams=(f"mainnet={anvil.url}",)) as process:
        yield process


def put_entrypoint(service: EdgeplaneProcess, phase: str, rules: list[dict[str, Any]]) -> None:
    """Deploys the phase: the API answers once every edge worker applied it."""
    service.v4("PUT", f"/zones/{{zone}}/rulesets/phases/{phase}/entrypoint", json={"rules": rules})


def send(service: EdgeplaneProcess, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(service.rpc_url(), json=body, headers=headers, timeout=30)


def eventually(check: Callable[[], bool], seconds: float = 10.0) -> None:
    """Waits for the edge worker to reload its configuration snapshot."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the edge did not pick up the new configuration"
        time.sleep(0.1)


def core(threshold: int) -> list[dict[str, Any]]:
    """The managed phase executing the Core Ruleset, blocking at an anomaly score of ``threshold``."""
    overrides = {"rules": [{"id": OWASP_SCORE_RULE_ID, "score_threshold": threshold, "action": "block"}]}
    return [
        {
            "action": "execute",
            "expression": "true",
            "action_parameters": {"id": OWASP_RULESET_ID, "overrides": overrides},
        }
    ]


def blocked(response: httpx.Response) -> bool:
    return response.status_code == 403 and response.json().get("error", {}).get("code") == -32003


@pytest.fixture(scope="module")
def events_dir(service: EdgeplaneProcess) -> Path:
    """A Logpush job on firewall_events, created before any traffic."""
    out = service.data_dir / "destinations" / "events"  # under the default file root
    service.v4(
        "POST",
        "/zones/{zone}/logpush/jobs",
        json={
            "name": "waf-events",
            "dataset": "firewall_events",
            **service.file_destination("events"),
            "output_options": {"field_names": ["RayID", "RuleID", "Action", "Source", "Kind", "ClientRequestPath"]},
            "max_upload_records": 1000,
            "max_upload_interval_seconds": 30,
            "enabled": True,
        },
    )
    return out


def test_default_deployment_blocks_an_injection_and_passes_gateway_traffic(
    service: EdgeplaneProcess, events_dir: Path
) -> None:
    benign = send(service, BENIGN)
    assert benign.status_code == 200
    assert "result" in benign.json()
    attack = send(service, ATTACK)
    assert blocked(attack)
    assert attack.json()["id"] == 41
    assert attack.json()["error"]["data"]["ray_id"] == attack.headers["cf-ray"].split("-")[0]


def test_a_log_override_lets_the_injection_through(service: EdgeplaneProcess) -> None:
    put_entrypoint(
        service,
        MANAGED,
        [
            {
                "action": "execute",
                "expression": "true",
                "action_parameters": {"id": MANAGED_RULESET_ID, "overrides": {"action": "log"}},
            }
        ],
    )
    eventually(lambda: not blocked(send(service, ATTACK)))
    assert send(service, ATTACK).status_code == 200


def test_the_core_ruleset_threshold_decides(service: EdgeplaneProcess) -> None:
    put_entrypoint(service, MANAGED, core(5))
    eventually(lambda: blocked(send(service, ATTACK)))
    put_entrypoint(service, MANAGED, core(60))
    eventually(lambda: not blocked(send(service, ATTACK)))


def test_a_custom_skip_rule_exempts_trusted_requests(service: EdgeplaneProcess) -> None:
    put_entrypoint(
        service,
        MANAGED,
        [{"action": "execute", "expression": "true", "action_parameters": {"id": MANAGED_RULESET_ID}}],
    )
    eventually(lambda: blocked(send(service, ATTACK)))
    put_entrypoint(
        service,
        CUSTOM,
        [
            {
                "action": "skip",
                "expression": 'any(http.request.headers["x-scanner-exemption"][*] eq "internal-audit")',
                "action_parameters": {"phases": [MANAGED]},
                "description": "our own audit traffic",
            }
        ],
    )
    eventually(lambda: not blocked(send(service, ATTACK, **{"x-scanner-exemption": "internal-audit"})))
    assert blocked(send(service, ATTACK))


def test_custom_rules_block_before_the_managed_phase(service: EdgeplaneProcess) -> None:
    put_entrypoint(
        service,
        CUSTOM,
        [{"action": "block", "expression": 'http.user_agent contains "evil-bot"', "description": "no evil bots"}],
    )
    eventually(lambda: blocked(send(service, BENIGN, **{"user-agent": "evil-bot/1.0"})))
    assert send(service, BENIGN).status_code == 200


def ray_of(response: httpx.Response) -> str:
    return response.headers["cf-ray"].split("-")[0]


def test_firewall_events_reach_a_logpush_job(service: EdgeplaneProcess, events_dir: Path) -> None:
    """With traffic of its own (whatever ran before): a logged managed match, a block by the Core Ruleset's score, a
    custom skip and a custom block each reach the job, under the ray id of their request."""
    logged: list[dict[str, Any]] = [
        {
            "action": "execute",
            "expression": "true",
            "action_parameters": {"id": MANAGED_RULESET_ID, "overrides": {"action": "log"}},
        }
    ]
    put_entrypoint(service, MANAGED, logged)
    put_entrypoint(service, CUSTOM, [])
    eventually(lambda: not blocked(send(service, ATTACK)))
    rays = {"managed log": ray_of(send(service, ATTACK))}
    put_entrypoint(service, MANAGED, core(5))
    eventually(lambda: blocked(send(service, ATTACK)), seconds=60)  # the worker compiles the Core Ruleset first
    score_block = send(service, ATTACK)
    assert blocked(score_block)
    rays["score block"] = ray_of(score_block)
    exemption = {"x-scanner-exemption": "internal-audit"}
    put_entrypoint(
        service,
        CUSTOM,
        [
            {
                "action": "skip",
                "expression": 'any(http.request.headers["x-scanner-exemption"][*] eq "internal-audit")',
                "action_parameters": {"phases": [MANAGED]},
            },
            {"action": "block", "expression": 'http.user_agent contains "evil-bot"'},
        ],
    )
    eventually(lambda: not blocked(send(service, ATTACK, **exemption)))
    rays["custom skip"] = ray_of(send(service, ATTACK, **exemption))
    custom_block = send(service, BENIGN, **{"user-agent": "evil-bot/1.0"})
    assert blocked(custom_block)
    rays["custom block"] = ray_of(custom_block)
    # The job uploads a full batch (1000 events) at once, a partial one at its 30 s interval: a thousand more custom
    # blocks (an event each) fill the batch, which is quicker than waiting for the interval.
    with httpx.Client(timeout=30) as client:
        for _ in range(1000):
            assert blocked(client.post(service.rpc_url(), json=BENIGN, headers={"user-agent": "evil-bot/1.0"}))

    deadline = time.monotonic() + 75  # at the latest, the interval
    lines: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        lines = [
            json.loads(line)
            for path in sorted(events_dir.rglob("*.gz"))
            for line in gzip.decompress(path.read_bytes()).splitlines()
            if line
        ]
        if set(rays.values()) <= {line["RayID"] for line in lines}:
            break
        time.sleep(1)
    by_ray: dict[str, set[tuple[str, str, str]]] = {}
    for line in lines:
        by_ray.setdefault(line["RayID"], set()).add((line["Source"], line["Action"], line["RuleID"]))
    assert set(rays.values()) <= set(by_ray), "not every request's events arrived"
    assert {(source, action) for source, action, _rule in by_ray[rays["managed log"]]} == {("firewallManaged", "log")}
    assert ("firewallManaged", "block", OWASP_SCORE_RULE_ID) in by_ray[rays["score block"]]
    assert {(source, action) for source, action, _rule in by_ray[rays["custom skip"]]} == {("firewallCustom", "skip")}
    assert {(source, action) for source, action, _rule in by_ray[rays["custom block"]]} == {("firewallCustom", "block")}
    assert {line["Kind"] for line in lines} == {"firewall"}
    assert all(line["ClientRequestPath"] == "/v1/mainnet" and line["RayID"] for line in lines)
