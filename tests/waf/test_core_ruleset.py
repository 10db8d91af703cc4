"""The OWASP Core Ruleset compiled from the CRS installed on the machine: how the firewall runs it (one CRS pass, a
rule's score counted once, overrides by rule and category, events naming the CRS rule), the JSON-RPC exclusions,
and a machine without the CRS (the catalogue leaves the ruleset out, the API refuses to deploy it with a code)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from edgeplane.api.asgi import build_api_app
from edgeplane.api.endpoint import ControlPlane
from edgeplane.api.ruleset_validation import RULESET_UNAVAILABLE
from edgeplane.bootstrap import ensure_bootstrap
from edgeplane.logs.destinations import DestinationPolicy
from edgeplane.rules import RequestFields
from edgeplane.store.database import Database, default_database_url
from edgeplane.waf.catalogue import (
    MANAGED_RULESET_ID,
    OWASP_RULESET_ID,
    OWASP_SCORE_RULE_ID,
    core_rule_id,
    load_catalogue,
    use_crs_rules_dir,
)
from edgeplane.waf.core_ruleset import DEFAULT_CRS_RULES_DIR, core_rule_set, prepare_core_rule_set
from edgeplane.waf.firewall import compile_firewall, deploy_managed_rulesets
from edgeplane.waf.previous import MANAGED_PACKAGE_ID, OWASP_PACKAGE_ID, load_previous_packages
from tests.waf.corpus import rpc

SQLI_QUERY = "id=1%27%20UNION%20SELECT%20username,password%20FROM%20users--"


def request(query: str = "", body: bytes = b"", user_agent: bytes = b"Mozilla/5.0") -> RequestFields:
    body = body or rpc("eth_blockNumber", [])
    return RequestFields.from_http(
        method="POST",
        scheme="https",
        host="rpc.example.com",
        raw_path="/v1/mainnet",
        query=query,
        headers=[
            (b"host", b"rpc.example.com"),
            (b"user-agent", user_agent),
            (b"accept", b"*/*"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        body=body,
        client_ip="192.0.2.1",
    )


def core_only(level: int = 2, threshold: int = 1, **overrides: Any) -> list[dict[str, Any]]:
    rules = deploy_managed_rulesets(paranoia_level=level, score_threshold=threshold, core_action="log", managed=False)
    execute = rules[-1]["action_parameters"]["overrides"]
    for key, value in overrides.items():
        execute[key] = [*execute.get(key, []), *value]
    return rules


def score_match(rules: list[dict[str, Any]], fields: RequestFields) -> Any:
    verdict = compile_firewall({"http_request_firewall_managed": rules}).evaluate(fields)
    return next((match for match in verdict.matches if match.rule_id == OWASP_SCORE_RULE_ID), None)


def test_each_rule_that_fired_adds_its_score_once_and_the_record_names_the_crs_rules() -> None:
    match = score_match(core_only(), request(SQLI_QUERY))
    assert match is not None
    crs_ids = match.metadata["crs_rules"].split()
    assert "942100" in crs_ids  # libinjection
    assert len(crs_ids) == len(set(crs_ids))
    rules = {rule.ref: rule for rule in load_catalogue()[OWASP_RULESET_ID].rules}
    assert int(match.metadata["score"]) == sum(rules[crs_id].score for crs_id in crs_ids)
    assert match.metadata["rules"].split() == [core_rule_id(int(crs_id)) for crs_id in crs_ids]


def test_a_rule_override_switches_one_crs_rule_off() -> None:
    before = score_match(core_only(), request(SQLI_QUERY))
    off = [{"id": core_rule_id(942100), "enabled": False}]
    after = score_match(core_only(rules=off), request(SQLI_QUERY))
    assert "942100" not in after.metadata["crs_rules"].split()
    assert int(after.metadata["score"]) == int(before.metadata["score"]) - 5


def test_a_rule_given_an_action_acts_on_its_own_and_its_event_names_the_crs_rule() -> None:
    rules = core_only(rules=[{"id": core_rule_id(942100), "action": "block"}])
    verdict = compile_firewall({"http_request_firewall_managed": rules}).evaluate(request(SQLI_QUERY))
    assert verdict.blocked
    assert verdict.terminal is not None
    assert verdict.terminal.rule_id == core_rule_id(942100)
    assert verdict.terminal.ref == "942100"
    assert verdict.terminal.metadata["crs_id"] == "942100"
    assert verdict.terminal.metadata["matched_var"] == "ARGS:id"
    assert verdict.terminal.description.startswith("942100: ")


def test_the_paranoia_level_is_the_highest_among_the_enabled_categories() -> None:
    at = {level: score_match(core_only(level=level), request(SQLI_QUERY)) for level in (1, 2)}
    assert set(at[1].metadata["crs_rules"].split()) < set(at[2].metadata["crs_rules"].split())


@pytest.mark.parametrize("level", [1, 2, 3, 4])
@pytest.mark.parametrize(
    "body",
    [
        rpc("eth_getBalance", ["0xd8da6bf26964af9d7eed9e03e53415d37aa96045", "latest"]),
        rpc("eth_call", [{"to": "0x" + "ab" * 20, "data": "0x70a08231" + "00" * 32}, "latest"]),
        json.dumps([json.loads(rpc("eth_chainId", [])), json.loads(rpc("eth_getCode", ["0x" + "11" * 20]))]).encode(),
    ],
    ids=["getBalance", "call", "batch"],
)
def test_json_rpc_hex_arguments_score_nothing_at_any_level(body: bytes, level: int) -> None:
    assert score_match(core_only(level=level), request(body=body)) is None


def test_the_json_rpc_exclusions_keep_attacks_in_parameters_visible() -> None:
    body = rpc("eth_call", ["1' UNION SELECT username,password FROM users--", "latest"])
    match = score_match(core_only(level=4), request(body=body))
    assert match is not None
    assert "942100" in match.metadata["crs_rules"].split()


def test_a_request_that_only_looks_like_json_rpc_gets_no_exclusion() -> None:
    # The hex-encoding rule (942450, PL2) still sees hex in a query argument of a JSON-RPC request, and in a
    # JSON body that is not JSON-RPC.
    body = json.dumps({"method": "x", "params": ["0x" + "ab" * 20]}).encode()
    match = score_match(core_only(level=2), request(body=body))
    assert match is not None
    assert "942450" in match.metadata["crs_rules"].split()


# -- a machine without the CRS -------------------------------------------------------------------------------------


@pytest.fixture
def no_crs(tmp_path: Path) -> Iterator[None]:
    use_crs_rules_dir(tmp_path / "absent")
    try:
        yield
    finally:
        use_crs_rules_dir(DEFAULT_CRS_RULES_DIR)


@pytest.mark.usefixtures("no_crs")
def test_without_the_crs_the_catalogue_has_the_managed_ruleset_only() -> None:
    assert set(load_catalogue()) == {MANAGED_RULESET_ID}


@pytest.mark.usefixtures("no_crs")
def test_without_the_crs_a_stored_deployment_compiles_and_says_what_is_missing() -> None:
    firewall = compile_firewall({"http_request_firewall_managed": deploy_managed_rulesets()})
    assert any(OWASP_RULESET_ID in problem for problem in firewall.problems)
    verdict = firewall.evaluate(request(SQLI_QUERY))
    assert verdict.terminal is not None
    assert verdict.terminal.ruleset_id == MANAGED_RULESET_ID  # the Managed Ruleset still runs


@pytest.mark.usefixtures("no_crs")
def test_without_the_crs_the_api_refuses_to_deploy_it_with_a_code(tmp_path: Path) -> None:
    database = Database(default_database_url(tmp_path))
    database.migrate()
    ensure_bootstrap(tmp_path, database)
    credentials = json.loads((tmp_path / "credentials.json").read_text())
    plane = ControlPlane(
        database, secret=b"s", on_change=lambda: None, destinations=DestinationPolicy(file_root=tmp_path)
    )
    with TestClient(build_api_app(plane)) as client:
        response = client.put(
            f"/client/v4/zones/{credentials['zone_id']}/rulesets/phases/http_request_firewall_managed/entrypoint",
            headers={"Authorization": f"Bearer {credentials['api_token']}"},
            json={"rules": deploy_managed_rulesets(managed=False)},
        )
    database.close()
    assert response.status_code == 400
    body = response.json()
    assert body["success"] is False
    assert body["errors"][0]["code"] == RULESET_UNAVAILABLE
    assert "modsecurity-crs" in body["errors"][0]["message"]


def test_the_crs_is_compiled_once_per_process() -> None:
    assert core_rule_set() is core_rule_set()


def test_an_edge_worker_prepares_the_crs_that_firewalls_execute() -> None:
    prepared = prepare_core_rule_set()
    assert prepared is core_rule_set()
    assert prepare_core_rule_set() is prepared  # compiled once, whoever asks first


@pytest.mark.usefixtures("no_crs")
def test_without_the_crs_there_is_nothing_to_prepare() -> None:
    assert prepare_core_rule_set() is None


@pytest.mark.usefixtures("no_crs")
def test_without_the_crs_the_previous_owasp_package_is_empty() -> None:
    load_previous_packages.cache_clear()
    try:
        packages = load_previous_packages()
        assert packages[OWASP_PACKAGE_ID].rules == ()
        assert packages[MANAGED_PACKAGE_ID].rules
    finally:
        load_previous_packages.cache_clear()


def test_listing_the_core_ruleset_does_not_compile_the_crs() -> None:
    # Compiling costs seconds of CPU: a process that only lists managed rulesets (the API) or compiles a firewall
    # without the OWASP Core Ruleset never pays it (an edge worker compiles it at start: prepare_core_rule_set).
    script = (
        "from edgeplane.waf import core_ruleset\n"
        "from edgeplane.waf.catalogue import OWASP_RULESET_ID, load_catalogue\n"
        "from edgeplane.waf.firewall import compile_firewall\n"
        "from edgeplane.api.ruleset_writes import default_managed_rules\n"
        "assert OWASP_RULESET_ID in load_catalogue()\n"
        "compile_firewall({'http_request_firewall_managed': default_managed_rules()})\n"
        "print(core_ruleset.core_rule_set.cache_info().currsize)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "0"
