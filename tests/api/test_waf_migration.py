"""The migration to the ruleset-based WAF over the API (seed 002), over SQLite and PostgreSQL: check, config and
status, and the entrypoint PUT's state machine (plan, state and mode → outcome)."""

from __future__ import annotations

from typing import Any

import pytest

from edgeplane.waf.catalogue import MANAGED_RULESET_ID, OWASP_RULESET_ID, OWASP_SCORE_RULE_ID
from edgeplane.waf.previous import OWASP_PACKAGE_ID, managed_package
from tests.api.conftest import Api
from tests.api.test_previous_waf import BYPASS, failed, ok, waf, zone_path

__all__ = ["waf"]  # the fixture, shared with the previous-WAF API tests

ENTRYPOINT = "/rulesets/phases/http_request_firewall_managed/entrypoint"


def set_plan(waf: Api, plan: str) -> None:
    ok(waf.call("PATCH", f"/zones/{waf.credentials['zone_id']}", json={"plan": plan}))


def new_config(waf: Api) -> dict[str, Any]:
    result: dict[str, Any] = ok(waf.call("GET", zone_path(waf, "/waf_migration/config"), params={"phase_two": "1"}))
    return result


def put_entrypoint(waf: Api, body: dict[str, Any], mode: str | None, phase_two: bool = True) -> Any:
    params = {"phase_two": "1"} if phase_two else {}
    if mode is not None:
        params["waf_migration"] = mode
    return waf.call("PUT", zone_path(waf, ENTRYPOINT), params=params, json=body)


def validation_body(config: dict[str, Any]) -> dict[str, Any]:
    """The validation-mode update leaves ``id``, ``version`` and ``ref`` out of each rule."""
    rules = [
        {key: value for key, value in rule.items() if key not in ("id", "version", "ref")} for rule in config["rules"]
    ]
    return {**config, "rules": rules}


def status(waf: Api) -> dict[str, Any]:
    result: dict[str, Any] = ok(waf.call("GET", zone_path(waf, "/waf_migration/status")))
    return result


def test_a_new_zone_starts_with_the_previous_version_off(waf: Api) -> None:
    assert ok(waf.call("GET", zone_path(waf, "/waf_migration/check"), params={"phase_two": "1"})) == {
        "compatible": True,
        "migration_state": "start",
    }
    current = status(waf)
    assert current["migration_state"] == "start"
    assert current["old_waf_status"] == "disabled"
    assert current["new_waf_status"] == "enabled"  # the default deployment
    ok(waf.call("PATCH", zone_path(waf, "/settings/waf"), json={"value": "on"}))
    assert status(waf)["old_waf_status"] == "enabled"


def test_config_is_the_previous_configuration_as_new_rules(waf: Api) -> None:
    ok(waf.call("PATCH", zone_path(waf, "/settings/waf"), json={"value": "on"}))
    path = zone_path(waf, f"/firewall/waf/packages/{OWASP_PACKAGE_ID}")
    ok(waf.call("PATCH", path, json={"sensitivity": "medium", "action_mode": "simulate"}))
    rule = managed_package().rules[0]
    ok(
        waf.call(
            "PATCH",
            zone_path(waf, f"/firewall/waf/packages/{managed_package().id}/rules/{rule.id}"),
            json={"mode": "simulate"},
        )
    )
    ok(waf.call("POST", zone_path(waf, "/firewall/rules"), json=[BYPASS]))
    config = new_config(waf)
    assert config["name"] == "default"
    actions = [(item["action"], item["action_parameters"].get("id")) for item in config["rules"]]
    assert actions == [("skip", None), ("execute", MANAGED_RULESET_ID), ("execute", OWASP_RULESET_ID)]
    for item in config["rules"]:
        assert (item["id"], item["version"], item["ref"]) == ("", "", "")
    skip, managed, owasp = config["rules"]
    assert skip["expression"] == BYPASS["filter"]["expression"]
    assert managed["action_parameters"]["overrides"]["rules"] == [
        {"id": rule.managed_rule.id, "enabled": True, "action": "log"}
    ]
    assert owasp["action_parameters"]["overrides"]["rules"] == [
        {"id": OWASP_SCORE_RULE_ID, "action": "log", "score_threshold": 40}
    ]


# plan, state reached first, mode → HTTP status, error code, state after
STATE_MACHINE = [
    ("enterprise", "start", "validation", 200, None, "validation"),
    ("enterprise", "start", "2", 200, None, "validation"),
    ("enterprise", "start", "pending", 200, None, "complete"),
    ("enterprise", "validation", "validation", 200, None, "validation"),
    ("enterprise", "validation", "pending", 200, None, "complete"),
    ("enterprise", "validation", "1", 200, None, "complete"),
    ("enterprise", "complete", "pending", 400, 10222, "complete"),
    ("enterprise", "complete", "validation", 400, 10222, "complete"),
    ("business", "start", "validation", 400, 10223, "start"),
    ("business", "start", "pending", 200, None, "complete"),
    ("pro", "start", "2", 400, 10223, "start"),
    ("pro", "start", "1", 200, None, "complete"),
    ("free", "start", "pending", 200, None, "complete"),
    ("enterprise", "start", "later", 400, 1001, "start"),
]


@pytest.mark.parametrize(("plan", "state", "mode", "http_status", "code", "after"), STATE_MACHINE)
def test_state_machine(
    waf: Api, plan: str, state: str, mode: str, http_status: int, code: int | None, after: str
) -> None:
    ok(waf.call("PATCH", zone_path(waf, "/settings/waf"), json={"value": "on"}))
    config = new_config(waf)
    if state != "start":
        set_plan(waf, "enterprise")
        ok(put_entrypoint(waf, validation_body(config), "validation"))
        if state == "complete":
            ok(put_entrypoint(waf, config, "pending"))
    set_plan(waf, plan)
    body = validation_body(config) if mode in ("validation", "2") else config
    response = put_entrypoint(waf, body, mode)
    if code is None:
        ruleset = ok(response)
        assert [rule["action"] for rule in ruleset["rules"]] == ["execute", "execute"]
        assert waf.changes
    else:
        failed(response, http_status, code)
    current = status(waf)
    assert current["migration_state"] == after
    assert current["old_waf_status"] == ("disabled" if after == "complete" else "enabled")
    if after != "start":
        assert current["source"] == "api"
        assert current["created"].endswith("Z")


def test_validation_runs_both_and_finishing_disables_the_previous_version(waf: Api) -> None:
    set_plan(waf, "enterprise")
    ok(waf.call("PATCH", zone_path(waf, "/settings/waf"), json={"value": "on"}))
    config = new_config(waf)
    ok(put_entrypoint(waf, validation_body(config), "validation"))
    assert status(waf) | {"created": None} == {
        "migration_state": "validation",
        "old_waf_status": "enabled",
        "new_waf_status": "enabled",
        "created": None,
        "source": "api",
    }
    assert ok(waf.call("GET", zone_path(waf, "/waf_migration/check"), params={"phase_two": "1"}))["compatible"] is True
    ok(put_entrypoint(waf, config, "pending"))
    assert (status(waf)["old_waf_status"], status(waf)["migration_state"]) == ("disabled", "complete")
    assert ok(waf.call("GET", zone_path(waf, "/waf_migration/check"), params={"phase_two": "1"})) == {
        "compatible": False,
        "migration_state": "complete",
    }
    failed(waf.call("GET", zone_path(waf, "/waf_migration/config"), params={"phase_two": "1"}), 400, 10222)


def test_uri_based_overrides_keep_a_zone_from_starting_until_deleted(waf: Api) -> None:
    override = ok(waf.call("POST", zone_path(waf, "/firewall/waf/overrides"), json={"urls": ["a.com/*"]}))
    check = ok(waf.call("GET", zone_path(waf, "/waf_migration/check"), params={"phase_two": "1"}))
    assert check == {"compatible": False, "migration_state": "start"}
    failed(waf.call("GET", zone_path(waf, "/waf_migration/config"), params={"phase_two": "1"}), 400, 10221)
    failed(put_entrypoint(waf, {"name": "default", "rules": []}, "pending"), 400, 10221)
    ok(waf.call("DELETE", zone_path(waf, f"/firewall/waf/overrides/{override['id']}")))
    assert ok(waf.call("GET", zone_path(waf, "/waf_migration/check"), params={"phase_two": "1"}))["compatible"] is True


def test_phase_one_is_stricter(waf: Api) -> None:
    ok(waf.call("PATCH", zone_path(waf, "/settings/waf"), json={"value": "on"}))
    assert ok(waf.call("GET", zone_path(waf, "/waf_migration/check")))["compatible"] is False
    failed(put_entrypoint(waf, new_config(waf), "pending", phase_two=False), 400, 10221)
    ok(waf.call("PATCH", zone_path(waf, f"/firewall/waf/packages/{OWASP_PACKAGE_ID}"), json={"sensitivity": "off"}))
    assert ok(waf.call("GET", zone_path(waf, "/waf_migration/check")))["compatible"] is True
    ok(put_entrypoint(waf, new_config(waf), "pending", phase_two=False))


def test_more_than_200_bypass_firewall_rules_is_a_migration_error(waf: Api) -> None:
    ok(waf.call("POST", zone_path(waf, "/firewall/rules"), json=[BYPASS] * 201))
    failed(waf.call("GET", zone_path(waf, "/waf_migration/config"), params={"phase_two": "1"}), 400, 10224)
    failed(put_entrypoint(waf, {"name": "default", "rules": []}, "pending"), 400, 10224)
    assert status(waf)["migration_state"] == "start"


def test_a_firewall_expression_over_4_kb_is_a_migration_error(waf: Api) -> None:
    expression = 'http.host eq "' + "é" * 2100 + '"'  # 2115 characters, 4215 bytes
    ok(waf.call("POST", zone_path(waf, "/firewall/rules"), json=[{**BYPASS, "filter": {"expression": expression}}]))
    failed(waf.call("GET", zone_path(waf, "/waf_migration/config"), params={"phase_two": "1"}), 400, 10225)


@pytest.mark.parametrize(
    ("plan", "previous", "code"),
    [("pro", "on", 10226), ("business", "on", 10226), ("pro", "off", None), ("enterprise", "on", None)],
)
def test_without_waf_migration_pro_and_business_keep_managed_rulesets_off(
    waf: Api, plan: str, previous: str, code: int | None
) -> None:
    set_plan(waf, plan)
    ok(waf.call("PATCH", zone_path(waf, "/settings/waf"), json={"value": previous}))
    config = validation_body(new_config(waf))
    response = put_entrypoint(waf, config, None, phase_two=False)
    if code is None:
        ok(response)
    else:
        failed(response, 400, code, "/rules/0/enabled")
        disabled = {**config, "rules": [{**rule, "enabled": False} for rule in config["rules"]]}
        ok(put_entrypoint(waf, disabled, None, phase_two=False))
        assert status(waf)["new_waf_status"] == "disabled"
    assert status(waf)["migration_state"] == "start"


@pytest.mark.parametrize("path", ["/waf_migration/check", "/waf_migration/config"])
def test_bad_phase_two_is_400(waf: Api, path: str) -> None:
    failed(waf.call("GET", zone_path(waf, path), params={"phase_two": "3"}), 400, 1001, "/phase_two")
