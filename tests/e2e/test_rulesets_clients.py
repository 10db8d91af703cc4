"""Real clients of the Rulesets API against a running ``edgeplane serve``: the official ``cloudflare`` SDK (rulesets,
rules, phase entrypoints, versions, in zone and account scope, rate limiting rules, and the errors it raises) and
``octorules`` (rules as code: a YAML file of custom rules, then one of rate limiting rules, planned, applied and read
back, then a second apply with nothing to change, then a rule removed)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudflare
import pytest
from cloudflare import Cloudflare

from edgeplane.waf.catalogue import MANAGED_RULESET_ID, OWASP_RULESET_ID, OWASP_SCORE_RULE_ID
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e

CUSTOM = "http_request_firewall_custom"
MANAGED = "http_request_firewall_managed"
RATELIMIT = "http_ratelimit"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    data_dir = tmp_path_factory.mktemp("rulesets") / "data"
    with EdgeplaneProcess(data_dir) as process:
        yield process


@pytest.fixture(scope="module")
def credentials(service: EdgeplaneProcess) -> dict[str, Any]:
    return service.credentials


@pytest.fixture(scope="module")
def cf(service: EdgeplaneProcess, credentials: dict[str, Any]) -> Cloudflare:
    return Cloudflare(base_url=f"{service.api_url}/client/v4", api_token=credentials["api_token"], max_retries=0)


def as_dict(answer: Any) -> dict[str, Any]:
    """A result as a dict. The SDK types every write's result as ``Ruleset | object`` (a dry run answers null), so
    writes come back as plain dicts, reads as models."""
    dumped: dict[str, Any] = answer if isinstance(answer, dict) else answer.to_dict()
    return dumped


def test_sdk_reads_the_default_deployment_and_the_managed_rulesets(cf: Cloudflare, credentials: dict[str, Any]) -> None:
    zone_id = credentials["zone_id"]
    listed = list(cf.rulesets.list(zone_id=zone_id, per_page=1))  # one per page: the SDK follows the cursor
    by_kind = {(ruleset.kind, ruleset.phase) for ruleset in listed}
    assert {("managed", MANAGED), ("zone", MANAGED)} <= by_kind
    assert {MANAGED_RULESET_ID, OWASP_RULESET_ID} <= {ruleset.id for ruleset in listed}
    entrypoint = cf.rulesets.phases.get(MANAGED, zone_id=zone_id)
    assert entrypoint.kind == "zone"
    (managed_rule,) = entrypoint.rules
    assert as_dict(managed_rule)["action_parameters"]["id"] == MANAGED_RULESET_ID
    managed = cf.rulesets.get(OWASP_RULESET_ID, zone_id=zone_id)
    assert managed.kind == "managed"
    assert any(rule.id == OWASP_SCORE_RULE_ID for rule in managed.rules)
    with pytest.raises(cloudflare.PermissionDeniedError):
        cf.rulesets.update(OWASP_RULESET_ID, zone_id=zone_id, rules=[])


def test_sdk_entrypoint_rules_and_versions(cf: Cloudflare, credentials: dict[str, Any]) -> None:
    zone_id = credentials["zone_id"]
    with pytest.raises(cloudflare.NotFoundError):
        cf.rulesets.phases.get(CUSTOM, zone_id=zone_id)
    entrypoint = as_dict(
        cf.rulesets.phases.update(
            CUSTOM,
            zone_id=zone_id,
            rules=[
                {
                    "action": "block",
                    "expression": 'http.request.uri.path eq "/admin"',
                    "description": "no admin",
                    "ref": "no-admin",
                    "action_parameters": {
                        "response": {
                            "status_code": 403,
                            "content": '{"error":"no"}',
                            "content_type": "application/json",
                        }
                    },
                }
            ],
        )
    )
    assert entrypoint["version"] == "1"
    assert entrypoint["rules"][0]["ref"] == "no-admin"
    ruleset_id = entrypoint["id"]

    added = as_dict(
        cf.rulesets.rules.create(
            ruleset_id, zone_id=zone_id, action="log", expression='http.request.method eq "POST"', ref="posts"
        )
    )
    assert [rule["action"] for rule in added["rules"]] == ["block", "log"]
    log_id = added["rules"][1]["id"]
    edited = as_dict(
        cf.rulesets.rules.edit(
            log_id, ruleset_id=ruleset_id, zone_id=zone_id, action="log", expression="true", enabled=False
        )
    )
    assert edited["rules"][1]["enabled"] is False
    assert edited["rules"][1]["version"] == "2"
    after_delete = as_dict(cf.rulesets.rules.delete(log_id, ruleset_id=ruleset_id, zone_id=zone_id))
    assert [rule["ref"] for rule in after_delete["rules"]] == ["no-admin"]

    versions = cf.rulesets.versions.list(ruleset_id, zone_id=zone_id)
    assert [version.version for version in versions] == ["1", "2", "3", "4"]
    first = cf.rulesets.versions.get("1", ruleset_id=ruleset_id, zone_id=zone_id)
    assert [rule.ref for rule in first.rules] == ["no-admin"]
    by_phase = cf.rulesets.phases.versions.list(CUSTOM, zone_id=zone_id)
    assert [version.version for version in by_phase] == ["1", "2", "3", "4"]
    assert cf.rulesets.phases.versions.get("2", ruleset_phase=CUSTOM, zone_id=zone_id).rules[1].ref == "posts"
    cf.rulesets.versions.delete("1", ruleset_id=ruleset_id, zone_id=zone_id)
    with pytest.raises(cloudflare.NotFoundError):
        cf.rulesets.versions.get("1", ruleset_id=ruleset_id, zone_id=zone_id)

    with pytest.raises(cloudflare.BadRequestError) as raised:
        cf.rulesets.phases.update(CUSTOM, zone_id=zone_id, rules=[{"action": "block", "expression": "http.host eq"}])
    assert raised.value.status_code == 400
    errors = raised.value.body["errors"]  # type: ignore[index]
    assert errors[0]["source"]["pointer"] == "/rules/0/expression"
    assert cf.rulesets.phases.get(CUSTOM, zone_id=zone_id).version == "4"  # the bad write changed nothing


def test_sdk_account_custom_ruleset_executed_from_the_account_entrypoint(
    cf: Cloudflare, credentials: dict[str, Any]
) -> None:
    account_id = credentials["account_id"]
    custom = as_dict(
        cf.rulesets.create(
            account_id=account_id,
            name="shared rules",
            kind="custom",
            phase=CUSTOM,
            description="used by every zone",
            rules=[{"action": "block", "expression": 'http.user_agent contains "sqlmap"', "ref": "sqlmap"}],
        )
    )
    assert custom["kind"] == "custom"
    custom_id = custom["id"]
    updated = as_dict(
        cf.rulesets.update(
            custom_id,
            account_id=account_id,
            rules=[
                {"action": "block", "expression": 'http.user_agent contains "sqlmap"', "ref": "sqlmap"},
                {"action": "block", "expression": 'http.user_agent contains "nikto"', "ref": "nikto"},
            ],
        )
    )
    assert updated["version"] == "2"
    assert updated["rules"][0]["id"] == custom["rules"][0]["id"]  # same ref: the same rule
    root = as_dict(
        cf.rulesets.phases.update(
            CUSTOM,
            account_id=account_id,
            rules=[{"action": "execute", "expression": "true", "action_parameters": {"id": custom_id}}],
        )
    )
    assert root["kind"] == "root"
    assert cf.rulesets.phases.get(CUSTOM, account_id=account_id).rules[0].action == "execute"
    assert custom_id in {ruleset.id for ruleset in cf.rulesets.list(account_id=account_id)}
    assert [rule.ref for rule in cf.rulesets.get(custom_id, account_id=account_id).rules] == ["sqlmap", "nikto"]
    with pytest.raises(cloudflare.ConflictError):
        cf.rulesets.delete(custom_id, account_id=account_id)
    cf.rulesets.phases.update(CUSTOM, account_id=account_id, rules=[])
    cf.rulesets.delete(custom_id, account_id=account_id)
    with pytest.raises(cloudflare.NotFoundError):
        cf.rulesets.get(custom_id, account_id=account_id)


RATE_LIMITS: list[dict[str, Any]] = [
    {
        "action": "block",
        "expression": 'http.request.uri.path eq "/v1/mainnet"',
        "description": "100 requests a minute per address",
        "ref": "per-ip",
        "ratelimit": {
            "characteristics": ["cf.colo.id", "ip.src"],
            "period": 60,
            "requests_per_period": 100,
            "mitigation_timeout": 600,
        },
        "action_parameters": {
            "response": {
                "status_code": 429,
                "content": '{"jsonrpc":"2.0","error":{"code":-32005,"message":"rate limited"}}',
                "content_type": "application/json",
            }
        },
    },
    {
        "action": "managed_challenge",
        "expression": "true",
        "ref": "per-method",
        "ratelimit": {
            "characteristics": ["cf.colo.id", 'lookup_json_string(http.request.body.raw, "method")'],
            "period": 10,
            "requests_per_period": 50,
            "mitigation_timeout": 0,
            "counting_expression": 'http.request.method eq "POST"',
            "requests_to_origin": True,
        },
    },
    {
        "action": "log",
        "expression": "true",
        "ref": "budget",
        "ratelimit": {
            "characteristics": ["cf.colo.id", 'http.request.headers["x-api-key"]'],
            "period": 3600,
            "score_per_period": 100000,
            "score_response_header_name": "x-edgeplane-cost",
        },
    },
]


def test_sdk_deploys_reads_and_deletes_rate_limiting_rules(cf: Cloudflare, credentials: dict[str, Any]) -> None:
    zone_id = credentials["zone_id"]
    with pytest.raises(cloudflare.NotFoundError):
        cf.rulesets.phases.get(RATELIMIT, zone_id=zone_id)
    deployed = as_dict(cf.rulesets.phases.update(RATELIMIT, zone_id=zone_id, rules=RATE_LIMITS))  # type: ignore[arg-type]
    assert (deployed["phase"], deployed["kind"], deployed["version"]) == (RATELIMIT, "zone", "1")
    ruleset_id = deployed["id"]

    read = cf.rulesets.phases.get(RATELIMIT, zone_id=zone_id)
    by_ref = {rule.ref: as_dict(rule) for rule in read.rules}
    assert list(by_ref) == ["per-ip", "per-method", "budget"]
    for written in RATE_LIMITS:
        rule = by_ref[written["ref"]]
        assert rule["ratelimit"] == written["ratelimit"]
        assert rule["action"] == written["action"]
        assert rule.get("action_parameters") == written.get("action_parameters")
    model = read.rules[0].ratelimit  # type: ignore[union-attr]
    assert model is not None
    assert (model.period, model.requests_per_period, model.mitigation_timeout) == (60, 100, 600)
    version = cf.rulesets.phases.versions.get("1", ruleset_phase=RATELIMIT, zone_id=zone_id)
    assert [as_dict(rule)["ratelimit"] for rule in version.rules] == [rule["ratelimit"] for rule in RATE_LIMITS]

    with pytest.raises(cloudflare.BadRequestError) as raised:
        cf.rulesets.phases.update(
            RATELIMIT,
            zone_id=zone_id,
            rules=[{**RATE_LIMITS[0], "ratelimit": {**RATE_LIMITS[0]["ratelimit"], "period": 30}}],  # type: ignore[list-item]
        )
    (error,) = raised.value.body["errors"]  # type: ignore[index]
    assert (error["code"], error["source"]["pointer"]) == (20011, "/rules/0/ratelimit/period")
    assert cf.rulesets.phases.get(RATELIMIT, zone_id=zone_id).version == "1"  # the refused write changed nothing

    budget_id = by_ref["budget"]["id"]
    after = as_dict(cf.rulesets.rules.delete(budget_id, ruleset_id=ruleset_id, zone_id=zone_id))
    assert [rule["ref"] for rule in after["rules"]] == ["per-ip", "per-method"]
    cf.rulesets.delete(ruleset_id, zone_id=zone_id)
    with pytest.raises(cloudflare.NotFoundError):
        cf.rulesets.phases.get(RATELIMIT, zone_id=zone_id)


RULES_FILE = """\
cloudflare:
  waf_custom_rules:
    - ref: block-admin
      description: No admin paths
      expression: 'http.request.uri.path eq "/admin"'
      action: block
    - ref: log-posts
      expression: 'http.request.method eq "POST"'
      action: log
"""


def octorules(service: EdgeplaneProcess, credentials: dict[str, Any], workdir: Path, *args: str) -> str:
    environment = {
        **os.environ,
        "CLOUDFLARE_API_TOKEN": credentials["api_token"],
        "CLOUDFLARE_BASE_URL": f"{service.api_url}/client/v4",
    }
    command = [str(Path(sys.executable).with_name("octorules")), *args, "--config", str(workdir / "config.yaml")]
    done = subprocess.run(command, env=environment, cwd=workdir, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_octorules_applies_a_rules_file_and_then_has_nothing_to_change(
    service: EdgeplaneProcess, credentials: dict[str, Any], cf: Cloudflare, tmp_path: Path
) -> None:
    # A zone of its own: the other tests' rules would count as deletions against octorules' safety threshold.
    zone_name = "rules-as-code.example"
    zone = cf.zones.create(name=zone_name, account={"id": credentials["account_id"]})
    assert zone is not None
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / f"{zone_name}.yaml").write_text(RULES_FILE)
    (tmp_path / "config.yaml").write_text(
        "providers:\n"
        "  cloudflare:\n"
        "    token: env/CLOUDFLARE_API_TOKEN\n"
        "  rules:\n"
        "    directory: ./rules\n"
        "zones:\n"
        f"  {zone_name}:\n"
        "    sources:\n"
        "      - rules\n"
    )
    octorules(service, credentials, tmp_path, "sync", "--doit")
    entrypoint = cf.rulesets.phases.get(CUSTOM, zone_id=zone.id)
    rules = {rule.ref: as_dict(rule) for rule in entrypoint.rules}
    assert list(rules) == ["block-admin", "log-posts"]
    assert rules["block-admin"]["action"] == "block"
    assert rules["block-admin"]["description"] == "No admin paths"
    assert rules["log-posts"]["expression"] == 'http.request.method eq "POST"'
    assert "No changes" in octorules(service, credentials, tmp_path, "plan")


RATE_LIMITS_FILE = """\
cloudflare:
  rate_limiting_rules:
    - ref: per-ip
      description: 100 requests a minute per address
      expression: 'http.request.uri.path eq "/v1/mainnet"'
      action: block
      ratelimit:
        characteristics: [cf.colo.id, ip.src]
        period: 60
        requests_per_period: 100
        mitigation_timeout: 600
      action_parameters:
        response:
          status_code: 429
          content: '{"error":"rate limited"}'
          content_type: application/json
    - ref: per-method
      expression: 'http.request.method eq "POST"'
      action: log
      ratelimit:
        characteristics:
          - cf.colo.id
          - 'lookup_json_string(http.request.body.raw, "method")'
        period: 10
        requests_per_period: 50
"""


def test_octorules_syncs_rate_limiting_rules(
    service: EdgeplaneProcess, credentials: dict[str, Any], cf: Cloudflare, tmp_path: Path
) -> None:
    zone_name = "rate-limits-as-code.example"
    zone = cf.zones.create(name=zone_name, account={"id": credentials["account_id"]})
    assert zone is not None
    (tmp_path / "rules").mkdir()
    rules_file = tmp_path / "rules" / f"{zone_name}.yaml"
    rules_file.write_text(RATE_LIMITS_FILE)
    (tmp_path / "config.yaml").write_text(
        "providers:\n"
        "  cloudflare:\n"
        "    token: env/CLOUDFLARE_API_TOKEN\n"
        "  rules:\n"
        "    directory: ./rules\n"
        "zones:\n"
        f"  {zone_name}:\n"
        "    sources:\n"
        "      - rules\n"
    )
    planned = octorules(service, credentials, tmp_path, "plan")
    assert "per-ip" in planned
    octorules(service, credentials, tmp_path, "sync", "--doit")
    rules = {rule.ref: as_dict(rule) for rule in cf.rulesets.phases.get(RATELIMIT, zone_id=zone.id).rules}
    assert list(rules) == ["per-ip", "per-method"]
    assert rules["per-ip"]["ratelimit"] == {
        "characteristics": ["cf.colo.id", "ip.src"],
        "period": 60,
        "requests_per_period": 100,
        "mitigation_timeout": 600,
    }
    assert rules["per-ip"]["action_parameters"]["response"]["status_code"] == 429
    assert (
        rules["per-method"]["ratelimit"]["characteristics"][1] == 'lookup_json_string(http.request.body.raw, "method")'
    )
    assert "No changes" in octorules(service, credentials, tmp_path, "plan")

    rules_file.write_text(RATE_LIMITS_FILE.split("    - ref: per-method")[0])
    octorules(service, credentials, tmp_path, "sync", "--doit", "--force")
    remaining = cf.rulesets.phases.get(RATELIMIT, zone_id=zone.id).rules
    assert [rule.ref for rule in remaining] == ["per-ip"]
    assert "No changes" in octorules(service, credentials, tmp_path, "plan")
