"""The previous managed-rules APIs (the waf setting, packages, groups, rules, URI-based overrides), firewall rules and
page rules, over SQLite and PostgreSQL: shapes, changes, errors with pointers, scope, and the APIs after migration."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from edgeplane.api import previous_waf, waf_migration
from edgeplane.api.asgi import V4, build_api_app
from edgeplane.api.endpoint import ControlPlane
from edgeplane.bootstrap import ensure_bootstrap
from edgeplane.store.database import Database
from edgeplane.waf.previous import MANAGED_PACKAGE_ID, OWASP_PACKAGE_ID, managed_package, owasp_package
from tests.api.conftest import Api


@pytest.fixture
def waf(database: Database, tmp_path: Path) -> Iterator[Api]:
    """The control plane with the previous-WAF and migration routes served (ahead of the catch-all, until the lead
    wires them into ``api/asgi.py``)."""
    ensure_bootstrap(tmp_path, database)
    credentials = json.loads((tmp_path / "credentials.json").read_text())
    changes: list[int] = []
    plane = ControlPlane(database, secret=b"test-secret", on_change=lambda: changes.append(1))
    app = build_api_app(plane)
    served = {
        (route.path, method)
        for route in app.router.routes
        if isinstance(route, Route)
        for method in route.methods or ()
    }
    app.router.routes[0:0] = [
        Route(V4 + path, plane.endpoint(handler, access), methods=[method])
        for path, method, handler, access in [*previous_waf.ROUTES, *waf_migration.ROUTES]
        if (V4 + path, method) not in served
    ]
    with TestClient(app) as client:
        yield Api(client, credentials, changes)


def ok(response: Any, status: int = 200) -> Any:
    """The result of a successful envelope."""
    document = response.json()
    assert response.status_code == status, document
    assert document["success"] is True
    assert document["errors"] == []
    return document["result"]


def failed(response: Any, status: int, code: int, pointer: str | None = None) -> dict[str, Any]:
    """The first error of a failed envelope, checked."""
    document = response.json()
    assert response.status_code == status, document
    assert document["success"] is False
    assert document["result"] is None
    error: dict[str, Any] = document["errors"][0]
    assert error["code"] == code, document
    if pointer is not None:
        assert error["source"]["pointer"] == pointer, document
    return error


def zone_path(waf: Api, suffix: str) -> str:
    return f"/zones/{waf.credentials['zone_id']}{suffix}"


PACKAGES = "/firewall/waf/packages"


# --- the waf setting -----------------------------------------------------------------------------------------------


def test_waf_setting_starts_off_and_switches(waf: Api) -> None:
    setting = ok(waf.call("GET", zone_path(waf, "/settings/waf")))
    assert setting == {"id": "waf", "value": "off", "editable": True, "modified_on": None}
    changed = ok(waf.call("PATCH", zone_path(waf, "/settings/waf"), json={"value": "on"}))
    assert changed["value"] == "on"
    assert changed["modified_on"].endswith("Z")
    assert ok(waf.call("GET", zone_path(waf, "/settings/waf")))["value"] == "on"
    assert waf.changes


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"value": "maybe"}, "/value"),
        ({}, "/value"),
        ({"value": "on", "other": 1}, "/other"),
        ({"value": True}, "/value"),
    ],
)
def test_waf_setting_rejects_bad_values(waf: Api, body: dict[str, Any], pointer: str) -> None:
    failed(waf.call("PATCH", zone_path(waf, "/settings/waf"), json=body), 400, 1001, pointer)


# --- packages, groups, rules ---------------------------------------------------------------------------------------


def test_packages_list_both_with_their_detection_modes(waf: Api) -> None:
    response = waf.call("GET", zone_path(waf, PACKAGES))
    packages = ok(response)
    assert response.json()["result_info"]["total_count"] == 2
    by_name = {package["name"]: package for package in packages}
    managed = by_name["CloudFlare Managed ruleset"]
    owasp = by_name["OWASP ModSecurity Core Rule Set"]
    assert managed["detection_mode"] == "traditional"
    assert "sensitivity" not in managed
    assert owasp["detection_mode"] == "anomaly"
    assert (owasp["sensitivity"], owasp["action_mode"]) == ("high", "challenge")
    assert managed["zone_id"] == waf.credentials["zone_id"]
    assert len(managed["id"]) == 32
    assert ok(waf.call("GET", zone_path(waf, f"{PACKAGES}/{OWASP_PACKAGE_ID}")))["id"] == OWASP_PACKAGE_ID


def test_owasp_package_takes_sensitivity_and_action_mode(waf: Api) -> None:
    path = zone_path(waf, f"{PACKAGES}/{OWASP_PACKAGE_ID}")
    changed = ok(waf.call("PATCH", path, json={"sensitivity": "low", "action_mode": "simulate"}))
    assert (changed["sensitivity"], changed["action_mode"]) == ("low", "simulate")
    assert ok(waf.call("GET", path))["sensitivity"] == "low"


@pytest.mark.parametrize(
    ("package_id", "body", "pointer"),
    [
        (OWASP_PACKAGE_ID, {"sensitivity": "extreme"}, "/sensitivity"),
        (OWASP_PACKAGE_ID, {"action_mode": "log"}, "/action_mode"),
        (OWASP_PACKAGE_ID, {"mode": "on"}, "/mode"),
        (MANAGED_PACKAGE_ID, {"sensitivity": "low"}, "/sensitivity"),
    ],
)
def test_package_changes_are_checked(waf: Api, package_id: str, body: dict[str, Any], pointer: str) -> None:
    failed(waf.call("PATCH", zone_path(waf, f"{PACKAGES}/{package_id}"), json=body), 400, 1001, pointer)


def test_unknown_package_group_rule_are_404(waf: Api) -> None:
    group = managed_package().groups[0]
    for suffix in (
        f"{PACKAGES}/{'0' * 32}",
        f"{PACKAGES}/{MANAGED_PACKAGE_ID}/groups/{'0' * 32}",
        f"{PACKAGES}/{MANAGED_PACKAGE_ID}/rules/1",
        f"{PACKAGES}/{OWASP_PACKAGE_ID}/groups/{group.id}",  # a group of the other package
    ):
        failed(waf.call("GET", zone_path(waf, suffix)), 404, 7003)


def test_groups_list_and_switch_off(waf: Api) -> None:
    package = managed_package()
    groups = ok(waf.call("GET", zone_path(waf, f"{PACKAGES}/{package.id}/groups"), params={"per_page": 1000}))
    assert len(groups) == len(package.groups)
    assert {group["mode"] for group in groups} == {"on"}
    group = groups[0]
    assert group["allowed_modes"] == ["on", "off"]
    assert group["rules_count"] >= 1
    path = zone_path(waf, f"{PACKAGES}/{package.id}/groups/{group['id']}")
    assert ok(waf.call("PATCH", path, json={"mode": "off"}))["mode"] == "off"
    off = ok(waf.call("GET", zone_path(waf, f"{PACKAGES}/{package.id}/groups"), params={"mode": "off"}))
    assert [item["id"] for item in off] == [group["id"]]
    failed(waf.call("PATCH", path, json={"mode": "disable"}), 400, 1001, "/mode")


@pytest.mark.parametrize(
    ("package", "mode", "accepted"),
    [
        ("managed", "default", True),
        ("managed", "disable", True),
        ("managed", "simulate", True),
        ("managed", "block", True),
        ("managed", "challenge", True),
        ("managed", "on", False),
        ("managed", "off", False),
        ("owasp", "on", True),
        ("owasp", "off", True),
        ("owasp", "block", False),
        ("owasp", "default", False),
    ],
)
def test_rule_modes_per_package(waf: Api, package: str, mode: str, accepted: bool) -> None:
    chosen = managed_package() if package == "managed" else owasp_package()
    rule = chosen.rules[0]
    path = zone_path(waf, f"{PACKAGES}/{chosen.id}/rules/{rule.id}")
    response = waf.call("PATCH", path, json={"mode": mode})
    if accepted:
        assert ok(response)["mode"] == mode
        assert ok(waf.call("GET", path))["mode"] == mode
    else:
        failed(response, 400, 1001, "/mode")


def test_rules_list_shapes_and_filters(waf: Api) -> None:
    managed = managed_package()
    rules = ok(waf.call("GET", zone_path(waf, f"{PACKAGES}/{managed.id}/rules"), params={"per_page": 1000}))
    assert len(rules) == len(managed.rules)
    first = rules[0]
    assert first["mode"] == "default"
    assert first["default_mode"] in ("disable", "simulate", "block", "challenge")
    assert first["allowed_modes"] == ["default", "disable", "simulate", "block", "challenge"]
    assert first["id"].isdigit()
    assert first["group"]["name"]
    group_id = first["group"]["id"]
    in_group = ok(waf.call("GET", zone_path(waf, f"{PACKAGES}/{managed.id}/rules"), params={"group_id": group_id}))
    assert in_group
    assert {rule["group"]["id"] for rule in in_group} == {group_id}
    owasp_rules = ok(waf.call("GET", zone_path(waf, f"{PACKAGES}/{OWASP_PACKAGE_ID}/rules")))
    assert owasp_rules
    assert owasp_rules[0]["allowed_modes"] == ["on", "off"]
    assert "default_mode" not in owasp_rules[0]


def test_a_changed_rule_counts_in_its_group(waf: Api) -> None:
    managed = managed_package()
    rule = managed.rules[0]
    ok(waf.call("PATCH", zone_path(waf, f"{PACKAGES}/{managed.id}/rules/{rule.id}"), json={"mode": "simulate"}))
    group = ok(waf.call("GET", zone_path(waf, f"{PACKAGES}/{managed.id}/groups/{rule.group_id}")))
    assert group["modified_rules_count"] == 1
    ok(waf.call("PATCH", zone_path(waf, f"{PACKAGES}/{managed.id}/rules/{rule.id}"), json={"mode": "default"}))
    group = ok(waf.call("GET", zone_path(waf, f"{PACKAGES}/{managed.id}/groups/{rule.group_id}")))
    assert group["modified_rules_count"] == 0


# --- URI-based overrides -------------------------------------------------------------------------------------------


OVERRIDES = "/firewall/waf/overrides"


def test_overrides_crud(waf: Api) -> None:
    rule = managed_package().rules[0]
    group = managed_package().groups[0]
    created = ok(
        waf.call(
            "POST",
            zone_path(waf, OVERRIDES),
            json={
                "urls": ["example.com/admin/*"],
                "description": "admin",
                "rules": {rule.id: "simulate"},
                "groups": {group.id: "disable"},
                "rewrite_action": {"block": "challenge"},
            },
        )
    )
    override_id = created["id"]
    assert created["urls"] == ["example.com/admin/*"]
    assert created["paused"] is False
    assert created["priority"] == 1
    assert ok(waf.call("GET", zone_path(waf, f"{OVERRIDES}/{override_id}")))["rules"] == {rule.id: "simulate"}
    listed = ok(waf.call("GET", zone_path(waf, OVERRIDES)))
    assert [item["id"] for item in listed] == [override_id]
    replaced = ok(
        waf.call(
            "PUT", zone_path(waf, f"{OVERRIDES}/{override_id}"), json={"urls": ["example.com/api/*"], "paused": True}
        )
    )
    assert replaced["urls"] == ["example.com/api/*"]
    assert replaced["paused"] is True
    assert replaced["rules"] == {}
    assert ok(waf.call("DELETE", zone_path(waf, f"{OVERRIDES}/{override_id}"))) == {"id": override_id}
    failed(waf.call("GET", zone_path(waf, f"{OVERRIDES}/{override_id}")), 404, 7003)
    assert ok(waf.call("GET", zone_path(waf, OVERRIDES))) == []


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({}, "/urls"),
        ({"urls": []}, "/urls"),
        ({"urls": ["has space/*"]}, "/urls/0"),
        ({"urls": ["a.com/*"], "rules": {"1": "block"}}, "/rules/1"),
        ({"urls": ["a.com/*"], "groups": {"0" * 32: "disable"}}, f"/groups/{'0' * 32}"),
        ({"urls": ["a.com/*"], "rewrite_action": {"block": "explode"}}, "/rewrite_action/block"),
        ({"urls": ["a.com/*"], "priority": "high"}, "/priority"),
        ({"urls": ["a.com/*"], "colour": "red"}, "/colour"),
    ],
)
def test_override_errors_point_at_the_member(waf: Api, body: dict[str, Any], pointer: str) -> None:
    failed(waf.call("POST", zone_path(waf, OVERRIDES), json=body), 400, 1001, pointer)


def test_override_rule_modes_follow_the_rules_package(waf: Api) -> None:
    owasp_rule = owasp_package().rules[0]
    body = {"urls": ["a.com/*"], "rules": {owasp_rule.id: "block"}}
    failed(waf.call("POST", zone_path(waf, OVERRIDES), json=body), 400, 1001, f"/rules/{owasp_rule.id}")
    body = {"urls": ["a.com/*"], "rules": {owasp_rule.id: "off"}}
    ok(waf.call("POST", zone_path(waf, OVERRIDES), json=body))


# --- firewall rules ------------------------------------------------------------------------------------------------


FIREWALL = "/firewall/rules"
BYPASS = {
    "action": "bypass",
    "products": ["waf"],
    "description": "health checks",
    "filter": {"expression": 'http.request.uri.path eq "/health"'},
}


def test_firewall_rules_crud(waf: Api) -> None:
    created = ok(
        waf.call("POST", zone_path(waf, FIREWALL), json=[BYPASS, {**BYPASS, "action": "block", "products": []}])
    )
    assert len(created) == 2
    first = created[0]
    assert first["action"] == "bypass"
    assert first["products"] == ["waf"]
    assert first["paused"] is False
    assert first["filter"]["expression"] == BYPASS["filter"]["expression"]
    assert len(first["filter"]["id"]) == 32
    assert ok(waf.call("GET", zone_path(waf, f"{FIREWALL}/{first['id']}")))["id"] == first["id"]
    listed = waf.call("GET", zone_path(waf, FIREWALL), params={"action": "bypass"})
    assert [rule["id"] for rule in ok(listed)] == [first["id"]]
    bulk = ok(waf.call("PUT", zone_path(waf, FIREWALL), json=[{**BYPASS, "id": first["id"], "paused": True}]))
    assert bulk[0]["paused"] is True
    one = ok(waf.call("PUT", zone_path(waf, f"{FIREWALL}/{first['id']}"), json={**BYPASS, "description": "x"}))
    assert one["description"] == "x"
    assert one["filter"]["id"] == first["filter"]["id"]
    assert ok(waf.call("DELETE", zone_path(waf, f"{FIREWALL}/{first['id']}"))) == {"id": first["id"]}
    assert len(ok(waf.call("GET", zone_path(waf, FIREWALL)))) == 1


@pytest.mark.parametrize(
    ("rule", "pointer"),
    [
        ({**BYPASS, "action": "explode"}, "/1/action"),
        ({**BYPASS, "products": []}, "/1/products"),
        ({**BYPASS, "products": ["everything"]}, "/1/products"),
        ({**BYPASS, "action": "block"}, "/1/products"),
        ({**BYPASS, "filter": {"expression": " "}}, "/1/filter/expression"),
        ({**BYPASS, "filter": {"expression": "ssl or " * 700 + "ssl"}}, "/1/filter/expression"),
        ({**BYPASS, "filter": None}, "/1/filter"),
        ({**BYPASS, "paused": "yes"}, "/1/paused"),
        ({**BYPASS, "colour": "red"}, "/1/colour"),
    ],
)
def test_firewall_rule_errors_point_at_the_rule(waf: Api, rule: dict[str, Any], pointer: str) -> None:
    failed(waf.call("POST", zone_path(waf, FIREWALL), json=[BYPASS, rule]), 400, 1001, pointer)
    assert ok(waf.call("GET", zone_path(waf, FIREWALL))) == []  # nothing of the request was kept


def test_firewall_rule_expression_is_checked_by_the_rules_language(waf: Api) -> None:
    response = waf.call("POST", zone_path(waf, FIREWALL), json=[{**BYPASS, "filter": {"expression": "http.host eq"}}])
    error = failed(response, 400, 10014, "/0/filter/expression")
    assert "position" in error["message"]


def test_firewall_rule_bodies_must_be_arrays_or_one_rule(waf: Api) -> None:
    failed(waf.call("POST", zone_path(waf, FIREWALL), json="rule"), 400, 6007)
    failed(waf.call("PUT", zone_path(waf, FIREWALL), json=BYPASS), 400, 6007)
    failed(waf.call("PUT", zone_path(waf, FIREWALL), json=[{**BYPASS, "id": "0" * 32}]), 400, 1001, "/0/id")


# --- page rules ----------------------------------------------------------------------------------------------------


PAGE_RULE = {
    "targets": [{"target": "url", "constraint": {"operator": "matches", "value": "example.com/static/*"}}],
    "actions": [{"id": "disable_security"}],
    "status": "active",
}


def test_page_rules_crud(waf: Api) -> None:
    created = ok(waf.call("POST", zone_path(waf, "/pagerules"), json=PAGE_RULE))
    assert created["actions"] == [{"id": "disable_security"}]
    assert created["status"] == "active"
    path = zone_path(waf, f"/pagerules/{created['id']}")
    assert ok(waf.call("GET", path))["targets"] == PAGE_RULE["targets"]
    replaced = ok(waf.call("PUT", path, json={**PAGE_RULE, "actions": [{"id": "waf", "value": "off"}], "priority": 2}))
    assert replaced["actions"] == [{"id": "waf", "value": "off"}]
    assert replaced["priority"] == 2
    assert [rule["id"] for rule in ok(waf.call("GET", zone_path(waf, "/pagerules")))] == [created["id"]]
    assert ok(waf.call("DELETE", path)) == {"id": created["id"]}
    failed(waf.call("GET", path), 404, 7003)


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        ({"actions": [{"id": "cache_level", "value": "bypass"}]}, "/actions/0/id"),
        ({"actions": [{"id": "waf", "value": "maybe"}]}, "/actions/0/value"),
        ({"actions": []}, "/actions"),
        ({"targets": []}, "/targets"),
        (
            {"targets": [{"target": "url", "constraint": {"operator": "contains", "value": "x"}}]},
            "/targets/0/constraint/operator",
        ),
        ({"status": "on"}, "/status"),
        ({"priority": 0}, "/priority"),
    ],
)
def test_page_rule_errors_point_at_the_member(waf: Api, change: dict[str, Any], pointer: str) -> None:
    failed(waf.call("POST", zone_path(waf, "/pagerules"), json={**PAGE_RULE, **change}), 400, 1001, pointer)


# --- scope and the migration ---------------------------------------------------------------------------------------


def test_another_zone_is_404(waf: Api) -> None:
    other = "f" * 32
    for path in ("/settings/waf", PACKAGES, OVERRIDES, FIREWALL, "/pagerules", "/waf_migration/status"):
        failed(waf.call("GET", f"/zones/{other}{path}"), 404, 7003)


def test_after_migration_the_previous_apis_stop_but_firewall_and_page_rules_work(waf: Api) -> None:
    config = ok(waf.call("GET", zone_path(waf, "/waf_migration/config"), params={"phase_two": "1"}))
    ok(
        waf.call(
            "PUT",
            zone_path(waf, "/rulesets/phases/http_request_firewall_managed/entrypoint"),
            params={"waf_migration": "pending", "phase_two": "1"},
            json=config,
        )
    )
    for method, suffix, body in [
        ("GET", "/settings/waf", None),
        ("PATCH", "/settings/waf", {"value": "on"}),
        ("GET", PACKAGES, None),
        ("GET", f"{PACKAGES}/{MANAGED_PACKAGE_ID}/groups", None),
        ("GET", f"{PACKAGES}/{MANAGED_PACKAGE_ID}/rules", None),
        ("PATCH", f"{PACKAGES}/{OWASP_PACKAGE_ID}", {"sensitivity": "low"}),
        ("GET", OVERRIDES, None),
        ("POST", OVERRIDES, {"urls": ["a.com/*"]}),
    ]:
        failed(waf.call(method, zone_path(waf, suffix), json=body), 403, 10220)
    ok(waf.call("POST", zone_path(waf, FIREWALL), json=[BYPASS]))
    ok(waf.call("POST", zone_path(waf, "/pagerules"), json=PAGE_RULE))
