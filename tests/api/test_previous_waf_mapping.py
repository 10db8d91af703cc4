"""The previous WAF's configuration as rules of the ruleset engine: what the edge runs while the previous version is
on (``edge_rules``) and what the migration proposes (``migration_rules``), as tables of settings → rules."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from edgeplane.rules import RulesError, check_expression
from edgeplane.store.previous_waf_models import FirewallRule, PageRule, WafOverride
from edgeplane.waf.catalogue import MANAGED_RULESET_ID, OWASP_RULESET_ID, OWASP_SCORE_RULE_ID, load_catalogue
from edgeplane.waf.previous import (
    MANAGED_PACKAGE_ID,
    OWASP_PACKAGE_ID,
    FirewallExpressionTooLong,
    TooManyFirewallRules,
    ZoneConfiguration,
    edge_rules,
    managed_package,
    migration_compatible,
    migration_rules,
    owasp_package,
    phase_one_eligible,
    previous_rule_id,
    url_pattern_expression,
)

ON = ZoneConfiguration(setting="on")


def firewall_rule(index: int = 0, **changes: Any) -> FirewallRule:
    values: dict[str, Any] = {
        "id": f"{index:032x}",
        "zone_id": "z" * 32,
        "description": "",
        "action": "bypass",
        "priority": None,
        "paused": False,
        "products": ["waf"],
        "ref": "",
        "filter_id": "f" * 32,
        "filter_expression": 'http.request.uri.path eq "/health"',
        "filter_paused": False,
        "filter_description": "",
    }
    values.update(changes)
    return FirewallRule(**values)


def page_rule(url: str, action: dict[str, Any], status: str = "active") -> PageRule:
    return PageRule(
        id="p" * 32,
        zone_id="z" * 32,
        targets=[{"target": "url", "constraint": {"operator": "matches", "value": url}}],
        actions=[action],
        priority=1,
        status=status,
    )


def executes(rules: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {rule["action_parameters"]["id"]: rule for rule in rules if rule["action"] == "execute"}


def rule_overrides(rule: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in rule["action_parameters"].get("overrides", {}).get("rules", [])}


def disabled_levels(rule: dict[str, Any]) -> list[str]:
    return [item["category"] for item in rule["action_parameters"]["overrides"]["categories"] if not item["enabled"]]


# --- content -------------------------------------------------------------------------------------------------------


def test_previous_packages_stand_for_the_managed_rules() -> None:
    catalogue = load_catalogue()
    managed_ids = {rule.managed_rule.id for rule in managed_package().rules}
    assert managed_ids == {rule.id for rule in catalogue[MANAGED_RULESET_ID].rules if rule.score_threshold is None}
    owasp_ids = {rule.managed_rule.id for rule in owasp_package().rules}
    assert OWASP_SCORE_RULE_ID not in owasp_ids
    for rule in catalogue[OWASP_RULESET_ID].rules:
        if {"paranoia-level-3", "paranoia-level-4"} & set(rule.categories):
            assert rule.id not in owasp_ids
    for package in (managed_package(), owasp_package()):
        assert sum(len(group.rule_ids) for group in package.groups) == len(package.rules)


@pytest.mark.parametrize(
    ("managed_rule_id", "previous_id"),
    [
        ("5de7edfa648c4d6891dc3e7f84534ffa", "1480826"),
        ("24e16fcb8d7c3cbea36b9002f5085fe4", "7753995"),
        ("2d29cfad44bf11bab6c5affda5f66a15", "2714861"),
        ("00000000000000000000000000000000", "1000000"),
        ("ffffffff000000000000000000000000", "2967295"),
    ],
)
def test_previous_rule_ids_are_stable_numbers(managed_rule_id: str, previous_id: str) -> None:
    """The ids clients stored (overrides, Terraform state) stay the same from release to release."""
    assert previous_rule_id(managed_rule_id) == previous_id


def test_the_packages_ids_and_rules_are_the_published_ones() -> None:
    managed, owasp = managed_package(), owasp_package()
    assert (MANAGED_PACKAGE_ID, OWASP_PACKAGE_ID) == (
        "82c9a27c51382e0bca0bd934e351c6a6",
        "620f19536493cd1b3e265090dd0bbce5",
    )
    assert (managed.id, owasp.id) == (MANAGED_PACKAGE_ID, OWASP_PACKAGE_ID)
    log4j = managed.rule("7753995")
    assert log4j is not None
    assert log4j.managed_rule.id == "24e16fcb8d7c3cbea36b9002f5085fe4"
    method_policy = owasp.rule("2714861")
    assert method_policy is not None
    assert method_policy.description.startswith("911100: ")
    for package in (managed, owasp):
        for rule in package.rules:
            assert rule.id.isdigit()
            assert len(rule.id) == 7


# --- URL patterns --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "expression"),
    [
        ("example.com/*", 'http.host wildcard "example.com"'),
        ("example.com", 'http.host wildcard "example.com" and http.request.uri wildcard "/"'),
        ("Example.com/Admin/*", 'http.host wildcard "example.com" and http.request.uri wildcard "/Admin/*"'),
        (
            "https://*.example.com/api*",
            'ssl and http.host wildcard "*.example.com" and http.request.uri wildcard "/api*"',
        ),
        ("http://example.com/*", 'not ssl and http.host wildcard "example.com"'),
        ("*/health", 'http.request.uri wildcard "/health"'),
        ("*/*", "true"),
        ('example.com/a"b', 'http.host wildcard "example.com" and http.request.uri wildcard "/a\\"b"'),
    ],
)
def test_url_patterns_become_expressions(pattern: str, expression: str) -> None:
    assert url_pattern_expression(pattern) == expression


# --- the edge ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "configuration",
    [ZoneConfiguration(), ZoneConfiguration(setting="on", migration_state="complete")],
    ids=["off", "migrated"],
)
def test_the_previous_version_does_not_run(configuration: ZoneConfiguration) -> None:
    assert edge_rules(configuration) is None


def test_defaults_run_both_packages_at_high_sensitivity_with_challenge() -> None:
    rules = edge_rules(ON)
    assert rules is not None
    by_ruleset = executes(rules)
    assert by_ruleset[MANAGED_RULESET_ID]["enabled"] is True
    assert rule_overrides(by_ruleset[MANAGED_RULESET_ID]) == {}
    owasp = by_ruleset[OWASP_RULESET_ID]
    assert owasp["enabled"] is True
    assert owasp["expression"] == "true"
    assert disabled_levels(owasp) == ["paranoia-level-3", "paranoia-level-4"]
    score = rule_overrides(owasp)[OWASP_SCORE_RULE_ID]
    assert (score["action"], score["score_threshold"]) == ("challenge", 25)


@pytest.mark.parametrize(
    ("sensitivity", "action_mode", "enabled", "action", "threshold"),
    [
        ("high", "block", True, "block", 25),
        ("medium", "simulate", True, "log", 40),
        ("low", "challenge", True, "challenge", 60),
        ("off", "block", False, None, None),
    ],
)
def test_owasp_sensitivity_and_action_at_the_edge(
    sensitivity: str, action_mode: str, enabled: bool, action: str | None, threshold: int | None
) -> None:
    rules = edge_rules(replace(ON, sensitivity=sensitivity, action_mode=action_mode))
    assert rules is not None
    owasp = executes(rules)[OWASP_RULESET_ID]
    assert owasp["enabled"] is enabled
    if enabled:
        score = rule_overrides(owasp)[OWASP_SCORE_RULE_ID]
        assert (score["action"], score["score_threshold"]) == (action, threshold)


@pytest.mark.parametrize(
    ("mode", "override"),
    [
        ("default", None),
        ("disable", {"enabled": False}),
        ("simulate", {"enabled": True, "action": "log"}),
        ("challenge", {"enabled": True, "action": "challenge"}),
    ],
)
def test_managed_rule_modes_become_rule_overrides(mode: str, override: dict[str, Any] | None) -> None:
    rule = managed_package().rules[0]
    for rules in (
        edge_rules(replace(ON, rule_modes={rule.id: mode})),
        migration_rules(replace(ON, rule_modes={rule.id: mode})),
    ):
        assert rules is not None
        found = rule_overrides(executes(rules)[MANAGED_RULESET_ID]).get(rule.managed_rule.id)
        assert found == (None if override is None else {"id": rule.managed_rule.id, **override})


def test_a_group_off_disables_its_rules() -> None:
    group = managed_package().groups[0]
    rules = edge_rules(replace(ON, group_modes={group.id: "off"}))
    assert rules is not None
    overrides = rule_overrides(executes(rules)[MANAGED_RULESET_ID])
    for rule_id in group.rule_ids:
        managed_rule = managed_package().rule(rule_id)
        assert managed_rule is not None
        assert overrides[managed_rule.managed_rule.id]["enabled"] is False


def test_every_group_off_turns_the_managed_package_off() -> None:
    modes = {group.id: "off" for group in managed_package().groups}
    rules = edge_rules(replace(ON, group_modes=modes))
    assert rules is not None
    assert executes(rules)[MANAGED_RULESET_ID]["enabled"] is False


def test_an_owasp_rule_off_is_disabled_at_the_edge_but_lost_in_migration() -> None:
    rule = owasp_package().rules[0]
    configuration = replace(ON, rule_modes={rule.id: "off"})
    edge = edge_rules(configuration)
    assert edge is not None
    assert rule_overrides(executes(edge)[OWASP_RULESET_ID])[rule.managed_rule.id] == {
        "id": rule.managed_rule.id,
        "enabled": False,
    }
    migrated = rule_overrides(executes(migration_rules(configuration))[OWASP_RULESET_ID])
    assert set(migrated) == {OWASP_SCORE_RULE_ID}


@pytest.mark.parametrize(
    ("rule", "skip_enabled"),
    [
        (firewall_rule(), True),
        (firewall_rule(paused=True), False),
        (firewall_rule(filter_paused=True), False),
        (firewall_rule(products=["rateLimit"]), None),
        (firewall_rule(action="block", products=[]), None),
    ],
)
def test_bypass_firewall_rules_become_skip_rules(rule: FirewallRule, skip_enabled: bool | None) -> None:
    for rules in (edge_rules(replace(ON, firewall_rules=[rule])), migration_rules(replace(ON, firewall_rules=[rule]))):
        assert rules is not None
        skips = [item for item in rules if item["action"] == "skip"]
        if skip_enabled is None:
            assert skips == []
        else:
            assert len(skips) == 1
            assert skips[0]["expression"] == rule.filter_expression
            assert skips[0]["action_parameters"] == {"ruleset": "current"}
            assert skips[0]["enabled"] is skip_enabled
            assert rules.index(skips[0]) < rules.index(executes(rules)[MANAGED_RULESET_ID])


@pytest.mark.parametrize(
    "action", [{"id": "disable_security"}, {"id": "waf", "value": "off"}], ids=["disable_security", "waf_off"]
)
def test_page_rules_switching_the_waf_off_become_skip_rules(action: dict[str, Any]) -> None:
    configuration = replace(ON, page_rules=[page_rule("example.com/static/*", action)])
    for rules in (edge_rules(configuration), migration_rules(configuration)):
        assert rules is not None
        assert rules[0]["action"] == "skip"
        assert rules[0]["expression"] == url_pattern_expression("example.com/static/*")


def test_a_page_rule_switching_the_waf_on_scopes_the_previous_version() -> None:
    configuration = ZoneConfiguration(page_rules=[page_rule("example.com/admin/*", {"id": "waf", "value": "on"})])
    rules = edge_rules(configuration)
    assert rules is not None
    assert executes(rules)[MANAGED_RULESET_ID]["expression"] == url_pattern_expression("example.com/admin/*")
    # The new version runs on all traffic from the start; the migration keeps it so.
    assert executes(migration_rules(configuration))[MANAGED_RULESET_ID]["expression"] == "true"
    inactive = ZoneConfiguration(page_rules=[page_rule("a.com/*", {"id": "waf", "value": "on"}, status="disabled")])
    assert edge_rules(inactive) is None


def test_uri_overrides_run_before_the_zone_configuration() -> None:
    rule = managed_package().rules[0]
    override = WafOverride(
        id="o" * 32,
        zone_id="z" * 32,
        urls=["example.com/admin/*"],
        paused=False,
        priority=1,
        groups={},
        rules={rule.id: "simulate"},
        rewrite_action={},
    )
    rules = edge_rules(replace(ON, overrides=[override]))
    assert rules is not None
    scoped = [item for item in rules if item["expression"] == url_pattern_expression("example.com/admin/*")]
    assert [item["action"] for item in scoped] == ["execute", "execute", "skip"]
    assert rule_overrides(scoped[0])[rule.managed_rule.id]["action"] == "log"
    assert rules[-1]["expression"] == "true"


def test_rewrite_action_of_an_override() -> None:
    override = WafOverride(
        id="o" * 32,
        urls=["a.com/*"],
        paused=False,
        priority=1,
        groups={},
        rules={},
        rewrite_action={"challenge": "block"},
    )
    rules = edge_rules(replace(ON, overrides=[override]))
    assert rules is not None
    score = rule_overrides(rules[1])[OWASP_SCORE_RULE_ID]
    assert score["action"] == "block"


# --- the migration -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sensitivity", "levels", "threshold"),
    [
        (None, ["paranoia-level-3", "paranoia-level-4"], 40),
        ("high", ["paranoia-level-3", "paranoia-level-4"], 25),
        ("medium", ["paranoia-level-2", "paranoia-level-3", "paranoia-level-4"], 40),
        ("low", ["paranoia-level-2", "paranoia-level-3", "paranoia-level-4"], 60),
    ],
)
def test_migration_maps_sensitivity_to_paranoia_level_and_threshold(
    sensitivity: str | None, levels: list[str], threshold: int
) -> None:
    owasp = executes(migration_rules(replace(ON, sensitivity=sensitivity)))[OWASP_RULESET_ID]
    assert owasp["enabled"] is True
    assert disabled_levels(owasp) == levels
    assert rule_overrides(owasp)[OWASP_SCORE_RULE_ID]["score_threshold"] == threshold


@pytest.mark.parametrize(
    ("action_mode", "action"), [("simulate", "log"), ("block", "block"), ("challenge", "challenge")]
)
def test_migration_keeps_the_core_rule_set_action(action_mode: str, action: str) -> None:
    owasp = executes(migration_rules(replace(ON, action_mode=action_mode)))[OWASP_RULESET_ID]
    assert rule_overrides(owasp)[OWASP_SCORE_RULE_ID]["action"] == action


@pytest.mark.parametrize(
    ("configuration", "managed_on", "owasp_on"),
    [
        (ZoneConfiguration(), True, True),
        (ON, True, True),
        (replace(ON, sensitivity="off"), True, False),
    ],
    ids=["waf-off", "waf-on", "core-rule-set-off"],
)
def test_migration_keeps_packages_that_were_off_off(
    configuration: ZoneConfiguration, managed_on: bool, owasp_on: bool
) -> None:
    rules = migration_rules(configuration)
    assert [rule["action"] for rule in rules] == ["execute", "execute"]
    for rule in rules:
        assert (rule["id"], rule["version"], rule["ref"]) == ("", "", "")
    assert executes(rules)[MANAGED_RULESET_ID]["enabled"] is managed_on
    assert executes(rules)[OWASP_RULESET_ID]["enabled"] is owasp_on


def test_migration_limits() -> None:
    many = [firewall_rule(index) for index in range(201)]
    with pytest.raises(TooManyFirewallRules):
        migration_rules(replace(ON, firewall_rules=many))
    assert len(migration_rules(replace(ON, firewall_rules=many[:200]))) == 202
    long = firewall_rule(filter_expression='http.host eq "' + "é" * 2100 + '"')  # under 4096 characters, over 4 KB
    with pytest.raises(FirewallExpressionTooLong):
        migration_rules(replace(ON, firewall_rules=[long]))


@pytest.mark.parametrize(
    ("configuration", "phase_one", "phase_two"),
    [
        (ZoneConfiguration(), True, True),
        (ON, False, True),
        (replace(ON, sensitivity="off"), True, True),
        (replace(ZoneConfiguration(), firewall_rules=[firewall_rule()]), False, True),
        (replace(ZoneConfiguration(), page_rules=[page_rule("a.com/*", {"id": "disable_security"})]), False, True),
        (replace(ZoneConfiguration(), overrides=[WafOverride(id="o" * 32, urls=["a.com/*"])]), False, False),
        (ZoneConfiguration(migration_state="complete"), False, False),
    ],
    ids=["off", "core-on", "core-off", "bypass-rule", "page-rule", "uri-override", "complete"],
)
def test_eligibility_by_phase(configuration: ZoneConfiguration, phase_one: bool, phase_two: bool) -> None:
    assert migration_compatible(configuration, phase_two=False) is phase_one
    assert migration_compatible(configuration, phase_two=True) is phase_two
    if configuration.migration_state != "complete" and not configuration.overrides:
        assert phase_one_eligible(configuration) is phase_one


def test_generated_expressions_are_valid_rules_language() -> None:
    configuration = replace(
        ON,
        firewall_rules=[firewall_rule()],
        page_rules=[page_rule("https://*.example.com/static/*", {"id": "disable_security"})],
        overrides=[
            WafOverride(id="o" * 32, urls=["example.com/a*"], paused=False, groups={}, rules={}, rewrite_action={})
        ],
    )
    rules = edge_rules(configuration)
    assert rules is not None
    for rule in rules:
        try:
            check_expression(rule["expression"])
        except RulesError as error:  # pragma: no cover - the message names the rule
            pytest.fail(f"{rule['expression']!r}: {error}")
