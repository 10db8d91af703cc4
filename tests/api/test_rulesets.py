"""The Rulesets API through v4 (zone and account scope): rulesets, rules, phase entrypoints, versions, managed
rulesets, the default deployment of a new zone, validation errors that point at the member, and scope checks."""

from __future__ import annotations

from typing import Any

import pytest

from edgeplane.rules import RulesError, check_expression
from edgeplane.store.database import Database
from edgeplane.store.ruleset_models import account_custom_rulesets, entrypoint_rules
from edgeplane.waf.catalogue import MANAGED_RULESET_ID, OWASP_RULESET_ID, OWASP_SCORE_RULE_ID, load_catalogue
from tests.api.conftest import Api

CUSTOM = "http_request_firewall_custom"
MANAGED = "http_request_firewall_managed"


def zone_base(api: Api) -> str:
    return f"/zones/{api.credentials['zone_id']}/rulesets"


def account_base(api: Api) -> str:
    return f"/accounts/{api.credentials['account_id']}/rulesets"


def ok(response: Any) -> Any:
    body = response.json()
    assert response.status_code == 200, body
    assert body["success"] is True, body
    return body["result"]


def failure(response: Any) -> tuple[int, int, str | None, str]:
    body = response.json()
    assert body["success"] is False, body
    error = body["errors"][0]
    return response.status_code, error["code"], (error.get("source") or {}).get("pointer"), error["message"]


def block(expression: str = 'http.request.uri.path eq "/admin"', **members: Any) -> dict[str, Any]:
    return {"action": "block", "expression": expression, **members}


# ---- the default deployment ----


def test_a_new_zone_executes_the_managed_ruleset(api: Api) -> None:
    account = {"id": api.credentials["account_id"]}
    created = ok(api.call("POST", "/zones", json={"name": "new.example", "account": account}))
    for zone_id in (api.credentials["zone_id"], created["id"]):
        entrypoint = ok(api.call("GET", f"/zones/{zone_id}/rulesets/phases/{MANAGED}/entrypoint"))
        assert (entrypoint["name"], entrypoint["kind"], entrypoint["phase"]) == ("default", "zone", MANAGED)
        assert entrypoint["version"] == "1"
        (managed,) = entrypoint["rules"]  # the OWASP Core Ruleset is deployed by choice
        assert managed["action"] == "execute"
        assert managed["expression"] == "true"
        assert managed["action_parameters"]["id"] == MANAGED_RULESET_ID
        assert "overrides" not in managed["action_parameters"]


def test_the_default_deployment_reads_back_and_saves_unchanged(api: Api) -> None:
    path = f"{zone_base(api)}/phases/{MANAGED}/entrypoint"
    before = ok(api.call("GET", path))
    after = ok(api.call("PUT", path, json={"rules": before["rules"]}))
    assert after["version"] == "2"
    assert after["rules"] == before["rules"]  # same ids, rule versions and timestamps: nothing changed


# ---- managed rulesets ----


@pytest.mark.parametrize("scope", ["zone", "account"])
def test_managed_rulesets_are_listed_and_readable_in_both_scopes(api: Api, scope: str) -> None:
    base = zone_base(api) if scope == "zone" else account_base(api)
    listed = ok(api.call("GET", base))
    managed = {ruleset["id"]: ruleset for ruleset in listed if ruleset["kind"] == "managed"}
    assert set(managed) == {MANAGED_RULESET_ID, OWASP_RULESET_ID}
    assert all("rules" not in ruleset for ruleset in listed)
    owasp = ok(api.call("GET", f"{base}/{OWASP_RULESET_ID}"))
    assert owasp["phase"] == MANAGED
    assert [rule["id"] for rule in owasp["rules"]] == [rule.id for rule in load_catalogue()[OWASP_RULESET_ID].rules]
    versions = ok(api.call("GET", f"{base}/{OWASP_RULESET_ID}/versions"))
    assert [version["version"] for version in versions] == [owasp["version"]]
    assert ok(api.call("GET", f"{base}/{OWASP_RULESET_ID}/versions/{owasp['version']}"))["rules"] == owasp["rules"]


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("PUT", "", {"rules": []}),
        ("DELETE", "", None),
        ("POST", "/rules", block()),
        ("PATCH", f"/rules/{OWASP_SCORE_RULE_ID}", {"enabled": False}),
        ("DELETE", f"/rules/{OWASP_SCORE_RULE_ID}", None),
        ("DELETE", "/versions/1", None),
    ],
)
def test_managed_rulesets_are_read_only(api: Api, method: str, suffix: str, body: Any) -> None:
    response = api.call(method, f"{zone_base(api)}/{OWASP_RULESET_ID}{suffix}", json=body)
    assert failure(response)[:2] == (403, 20004)


# ---- phase entrypoints, rules and versions ----


def test_custom_phase_entrypoint_lifecycle(api: Api) -> None:
    path = f"{zone_base(api)}/phases/{CUSTOM}/entrypoint"
    assert failure(api.call("GET", path))[:2] == (404, 7003)
    changes = len(api.changes)
    first = ok(api.call("PUT", path, json={"rules": [block(ref="admin"), {"action": "log", "expression": "true"}]}))
    assert len(api.changes) == changes + 1
    assert (first["kind"], first["name"], first["version"]) == ("zone", "default", "1")
    admin, logged = first["rules"]
    assert len(admin["id"]) == 32
    assert admin["id"] != logged["id"]
    assert (admin["ref"], logged["ref"]) == ("admin", logged["id"])
    assert admin["version"] == "1"
    assert admin["enabled"] is True
    assert "description" not in admin  # empty descriptions are left out, as the product answers
    assert ok(api.call("GET", path)) == first

    changed_admin = {**admin, "expression": 'http.request.uri.path eq "/root"'}
    second = ok(api.call("PUT", path, json={"name": "mine", "rules": [changed_admin, logged]}))
    assert second["version"] == "2"
    assert second["name"] == "mine"
    assert [rule["id"] for rule in second["rules"]] == [admin["id"], logged["id"]]
    assert second["rules"][0]["version"] == "2"
    assert second["rules"][1] == logged

    versions = ok(api.call("GET", f"{path}/versions"))
    assert [version["version"] for version in versions] == ["1", "2"]
    assert all("rules" not in version for version in versions)
    assert ok(api.call("GET", f"{path}/versions/1"))["rules"] == first["rules"]
    ruleset_path = f"{zone_base(api)}/{first['id']}"
    assert ok(api.call("GET", f"{ruleset_path}/versions/2")) == second
    assert failure(api.call("DELETE", f"{ruleset_path}/versions/2"))[:3] == (400, 20001, "/version")
    ok(api.call("DELETE", f"{ruleset_path}/versions/1"))
    assert failure(api.call("GET", f"{ruleset_path}/versions/1"))[0] == 404
    assert failure(api.call("GET", f"{ruleset_path}/versions/{'9' * 30}"))[0] == 404
    assert failure(api.call("GET", f"{ruleset_path}/versions/latest"))[0] == 404
    assert [version["version"] for version in ok(api.call("GET", f"{ruleset_path}/versions"))] == ["2"]

    ok(api.call("DELETE", ruleset_path))
    assert failure(api.call("GET", path))[0] == 404


def test_rules_without_ids_keep_their_identity_by_ref(api: Api) -> None:
    path = f"{zone_base(api)}/phases/{CUSTOM}/entrypoint"
    first = ok(api.call("PUT", path, json={"rules": [block(ref="a"), block("true", ref="b")]}))
    again = ok(api.call("PUT", path, json={"rules": [block("true", ref="b"), block(ref="a", enabled=False)]}))
    ids = {rule["ref"]: rule["id"] for rule in first["rules"]}
    assert [(rule["ref"], rule["id"], rule["version"]) for rule in again["rules"]] == [
        ("b", ids["b"], "1"),
        ("a", ids["a"], "2"),
    ]


def test_migration_style_rules_with_empty_ids_are_new_rules(api: Api) -> None:
    path = f"{zone_base(api)}/phases/{MANAGED}/entrypoint"
    rules = [
        {
            "id": "",
            "version": "",
            "ref": "",
            "action": "execute",
            "expression": "true",
            "description": "",
            "enabled": True,
            "action_parameters": {"id": MANAGED_RULESET_ID, "overrides": {"rules": []}},
        }
    ]
    saved = ok(api.call("PUT", path, json={"name": "default", "rules": rules}))
    assert len(saved["rules"]) == 1
    assert len(saved["rules"][0]["id"]) == 32
    assert saved["rules"][0]["ref"] == saved["rules"][0]["id"]


def test_rule_endpoints_add_edit_move_and_delete(api: Api) -> None:
    entrypoint = ok(api.call("PUT", f"{zone_base(api)}/phases/{CUSTOM}/entrypoint", json={"rules": [block()]}))
    path = f"{zone_base(api)}/{entrypoint['id']}"
    first_id = entrypoint["rules"][0]["id"]

    added = ok(api.call("POST", f"{path}/rules", json={"action": "log", "expression": "true", "ref": "log"}))
    assert added["version"] == "2"
    assert [rule["action"] for rule in added["rules"]] == ["block", "log"]
    log_id = added["rules"][1]["id"]
    front = ok(api.call("POST", f"{path}/rules", json={**block("ssl"), "position": {"before": first_id}}))
    assert next(rule["expression"] for rule in front["rules"]) == "ssl"
    indexed = ok(api.call("POST", f"{path}/rules", json={**block("true"), "position": {"index": 2}}))
    assert [rule["expression"] for rule in indexed["rules"]][:2] == ["ssl", "true"]

    edited = ok(api.call("PATCH", f"{path}/rules/{log_id}", json={"description": "audit", "position": {"index": 1}}))
    moved = edited["rules"][0]
    assert (moved["id"], moved["description"], moved["version"], moved["action"]) == (log_id, "audit", "2", "log")
    unchanged = ok(api.call("PATCH", f"{path}/rules/{log_id}", json={"description": "audit"}))
    assert unchanged["rules"][0]["version"] == "2"
    assert unchanged["version"] == "6"
    to_block = ok(
        api.call(
            "PATCH",
            f"{path}/rules/{log_id}",
            json={"action": "block", "action_parameters": {"response": {"status_code": 418, "content": "no"}}},
        )
    )
    assert to_block["rules"][0]["action_parameters"]["response"] == {
        "status_code": 418,
        "content": "no",
        "content_type": "text/plain",
    }

    deleted = ok(api.call("DELETE", f"{path}/rules/{log_id}"))
    assert log_id not in [rule["id"] for rule in deleted["rules"]]
    assert failure(api.call("DELETE", f"{path}/rules/{log_id}"))[0] == 404
    assert failure(api.call("PATCH", f"{path}/rules/{'f' * 32}", json={"enabled": False}))[0] == 404


def test_post_rulesets_creates_an_entrypoint_once(api: Api) -> None:
    body = {"name": "custom rules", "kind": "zone", "phase": CUSTOM, "rules": [block()]}
    created = ok(api.call("POST", zone_base(api), json=body))
    assert (created["kind"], created["name"], created["version"]) == ("zone", "custom rules", "1")
    assert failure(api.call("POST", zone_base(api), json=body))[:2] == (409, 20006)
    listed = [ruleset for ruleset in ok(api.call("GET", zone_base(api))) if ruleset["kind"] == "zone"]
    assert sorted(ruleset["phase"] for ruleset in listed) == [CUSTOM, MANAGED]
    renamed = ok(api.call("PUT", f"{zone_base(api)}/{created['id']}", json={"description": "edge rules"}))
    assert renamed["description"] == "edge rules"
    assert renamed["rules"] == created["rules"]


def test_account_custom_rulesets_run_from_the_account_entrypoint(api: Api) -> None:
    base = account_base(api)
    custom = ok(api.call("POST", base, json={"name": "shared", "kind": "custom", "phase": CUSTOM, "rules": [block()]}))
    assert custom["kind"] == "custom"
    rule_id = custom["rules"][0]["id"]
    execute = {
        "action": "execute",
        "expression": 'http.host eq "example.com"',
        "action_parameters": {"id": custom["id"], "overrides": {"rules": [{"id": rule_id, "action": "log"}]}},
    }
    root = ok(api.call("PUT", f"{base}/phases/{CUSTOM}/entrypoint", json={"rules": [execute]}))
    assert root["kind"] == "root"
    assert root["rules"][0]["action_parameters"]["id"] == custom["id"]
    assert failure(api.call("DELETE", f"{base}/{custom['id']}"))[:2] == (409, 20005)
    ok(api.call("PUT", f"{base}/phases/{CUSTOM}/entrypoint", json={"rules": []}))
    ok(api.call("DELETE", f"{base}/{custom['id']}"))
    assert failure(api.call("GET", f"{base}/{custom['id']}"))[0] == 404
    # Account rulesets are not a zone's, and a zone's are not the account's.
    assert root["id"] not in [ruleset["id"] for ruleset in ok(api.call("GET", zone_base(api)))]


def test_rulesets_list_pages_by_cursor(api: Api) -> None:
    ok(api.call("PUT", f"{zone_base(api)}/phases/{CUSTOM}/entrypoint", json={"rules": []}))
    seen: list[str] = []
    cursor = None
    while True:
        query = {"per_page": "1", **({"cursor": cursor} if cursor else {})}
        body = api.call("GET", zone_base(api), params=query).json()
        seen += [ruleset["id"] for ruleset in body["result"]]
        cursor = body["result_info"].get("cursor")
        if not cursor:
            break
    assert len(seen) == 4 == len(set(seen))
    assert failure(api.call("GET", zone_base(api), params={"per_page": "0"}))[:3] == (400, 1001, "/per_page")


# ---- validation ----

EXECUTE_OWASP = {"action": "execute", "expression": "true", "action_parameters": {"id": OWASP_RULESET_ID}}


def owasp_overrides(**overrides: Any) -> dict[str, Any]:
    return {**EXECUTE_OWASP, "action_parameters": {"id": OWASP_RULESET_ID, "overrides": overrides}}


@pytest.mark.parametrize(
    ("phase", "rules", "code", "pointer"),
    [
        (CUSTOM, "nope", 20001, "/rules"),
        (CUSTOM, ["nope"], 20001, "/rules/0"),
        (CUSTOM, [block(), {"action": "block"}], 20002, "/rules/1/expression"),
        (CUSTOM, [block("   ")], 20002, "/rules/0/expression"),
        (CUSTOM, [block("x" * 4097)], 20002, "/rules/0/expression"),
        (CUSTOM, [{"action": "redirect", "expression": "true"}], 20001, "/rules/0/action"),
        (CUSTOM, [EXECUTE_OWASP], 20001, "/rules/0/action"),
        (CUSTOM, [block(color="red")], 20001, "/rules/0/color"),
        (CUSTOM, [block(id="123")], 20001, "/rules/0/id"),
        (CUSTOM, [block(id="a" * 32)], 20001, "/rules/0/id"),
        (CUSTOM, [block(ref="x"), block(ref="x")], 20001, "/rules/1/ref"),
        (CUSTOM, [block(description="d" * 501)], 20001, "/rules/0/description"),
        (CUSTOM, [block(enabled="yes")], 20001, "/rules/0/enabled"),
        (CUSTOM, [block(logging={"enabled": True})], 20001, "/rules/0/logging"),
        (
            CUSTOM,
            [block(action_parameters={"response": {"status_code": 302, "content": ""}})],
            20001,
            "/rules/0/action_parameters/response/status_code",
        ),
        (
            CUSTOM,
            [block(action_parameters={"response": {"status_code": 403, "content_type": "image/png"}})],
            20001,
            "/rules/0/action_parameters/response/content_type",
        ),
        (
            CUSTOM,
            [{"action": "log", "expression": "true", "action_parameters": {"x": 1}}],
            20001,
            "/rules/0/action_parameters",
        ),
        (CUSTOM, [{"action": "skip", "expression": "true"}], 20001, "/rules/0/action_parameters"),
        (
            CUSTOM,
            [{"action": "skip", "expression": "true", "action_parameters": {"ruleset": "all"}}],
            20001,
            "/rules/0/action_parameters/ruleset",
        ),
        (
            CUSTOM,
            [{"action": "skip", "expression": "true", "action_parameters": {"phases": ["http_request_cache"]}}],
            20001,
            "/rules/0/action_parameters/phases/0",
        ),
        (
            CUSTOM,
            [{"action": "skip", "expression": "true", "action_parameters": {"products": ["waf", "nope"]}}],
            20001,
            "/rules/0/action_parameters/products/1",
        ),
        (
            CUSTOM,
            [{"action": "skip", "expression": "true", "action_parameters": {"rulesets": [MANAGED_RULESET_ID]}}],
            20001,
            "/rules/0/action_parameters/rulesets",
        ),
        (MANAGED, [block()], 20001, "/rules/0/action"),
        (MANAGED, [{"action": "execute", "expression": "true"}], 20001, "/rules/0/action_parameters"),
        (
            MANAGED,
            [{"action": "execute", "expression": "true", "action_parameters": {"id": "b" * 32}}],
            20001,
            "/rules/0/action_parameters/id",
        ),
        (
            MANAGED,
            [{**EXECUTE_OWASP, "action_parameters": {"id": OWASP_RULESET_ID, "version": "7"}}],
            20001,
            "/rules/0/action_parameters/version",
        ),
        (MANAGED, [owasp_overrides(action="allow")], 20001, "/rules/0/action_parameters/overrides/action"),
        (
            MANAGED,
            [owasp_overrides(sensitivity_level="low")],
            20001,
            "/rules/0/action_parameters/overrides/sensitivity_level",
        ),
        (
            MANAGED,
            [owasp_overrides(categories=[{"category": "no-such-tag", "enabled": False}])],
            20001,
            "/rules/0/action_parameters/overrides/categories/0/category",
        ),
        (
            MANAGED,
            [owasp_overrides(categories=[{"category": "paranoia-level-2"}])],
            20001,
            "/rules/0/action_parameters/overrides/categories/0",
        ),
        (
            MANAGED,
            [owasp_overrides(rules=[{"id": "c" * 32, "enabled": False}])],
            20001,
            "/rules/0/action_parameters/overrides/rules/0/id",
        ),
        (
            MANAGED,
            [owasp_overrides(rules=[{"id": OWASP_SCORE_RULE_ID, "score_threshold": 0}])],
            20001,
            "/rules/0/action_parameters/overrides/rules/0/score_threshold",
        ),
        (
            MANAGED,
            [
                {
                    "action": "execute",
                    "expression": "true",
                    "action_parameters": {
                        "id": MANAGED_RULESET_ID,
                        "overrides": {
                            "rules": [{"id": load_catalogue()[MANAGED_RULESET_ID].rules[0].id, "score_threshold": 25}]
                        },
                    },
                }
            ],
            20001,
            "/rules/0/action_parameters/overrides/rules/0/score_threshold",
        ),
        (
            MANAGED,
            [
                {
                    "action": "skip",
                    "expression": "true",
                    "action_parameters": {"rules": {MANAGED_RULESET_ID: ["d" * 32]}},
                }
            ],
            20001,
            f"/rules/0/action_parameters/rules/{MANAGED_RULESET_ID}/0",
        ),
        (
            MANAGED,
            [{"action": "skip", "expression": "true", "action_parameters": {"products": ["waf"]}}],
            20001,
            "/rules/0/action_parameters/products",
        ),
        (CUSTOM, [block()] * 1001, 20001, "/rules"),
    ],
)
def test_rule_validation_points_at_the_member(api: Api, phase: str, rules: Any, code: int, pointer: str) -> None:
    response = api.call("PUT", f"{zone_base(api)}/phases/{phase}/entrypoint", json={"rules": rules})
    status, got_code, got_pointer, message = failure(response)
    assert (status, got_code, got_pointer) == (400, code, pointer), message


@pytest.mark.parametrize(
    ("scope", "body", "status", "code", "pointer"),
    [
        ("account", {"kind": "custom", "phase": CUSTOM}, 400, 20001, "/name"),
        ("account", {"name": "x", "kind": "custom", "phase": MANAGED}, 400, 20001, "/phase"),
        ("account", {"name": "x", "kind": "zone", "phase": CUSTOM}, 400, 20001, "/kind"),
        ("account", {"name": "x", "kind": "custom", "phase": CUSTOM, "shared": True}, 400, 1001, "/shared"),
        ("zone", {"name": "x", "kind": "custom", "phase": CUSTOM}, 400, 20001, "/kind"),
        ("zone", {"name": "x", "kind": "root", "phase": CUSTOM}, 400, 20001, "/kind"),
        ("zone", {"name": "x", "kind": "zone", "phase": "http_request_cache_settings"}, 400, 20003, "/phase"),
        ("zone", {"name": "x", "kind": "sideways", "phase": CUSTOM}, 400, 20001, "/kind"),
        ("zone", {"name": "x", "kind": "managed", "phase": MANAGED}, 403, 20004, None),
        ("zone", {"name": "x" * 256, "kind": "zone", "phase": CUSTOM}, 400, 20001, "/name"),
    ],
)
def test_ruleset_validation(
    api: Api, scope: str, body: dict[str, Any], status: int, code: int, pointer: str | None
) -> None:
    base = zone_base(api) if scope == "zone" else account_base(api)
    assert failure(api.call("POST", base, json=body))[:3] == (status, code, pointer)


def test_unsupported_phases_and_bad_bodies(api: Api) -> None:
    path = f"{zone_base(api)}/phases/http_request_late_transform/entrypoint"
    assert failure(api.call("GET", path))[:2] == (404, 7003)  # no entrypoint, as on the real API
    assert failure(api.call("GET", path + "/versions"))[:2] == (404, 7003)
    status, code, _, message = failure(api.call("PUT", path, json={"rules": []}))
    assert (status, code) == (400, 20003)
    assert CUSTOM in message
    custom = f"{zone_base(api)}/phases/{CUSTOM}/entrypoint"
    assert failure(api.call("PUT", custom, json=[]))[:2] == (400, 6007)
    assert failure(api.call("PUT", custom, json={}))[:3] == (400, 20001, "/rules")
    assert failure(api.call("PUT", custom, json={"rules": [], "phase": MANAGED}))[:3] == (400, 20001, "/phase")
    entrypoint = ok(api.call("PUT", custom, json={"rules": [block()]}))
    rules_path = f"{zone_base(api)}/{entrypoint['id']}/rules"
    assert failure(api.call("POST", rules_path, json={**block(), "id": "e" * 32}))[:3] == (400, 20001, "/id")
    assert failure(api.call("POST", rules_path, json={**block(), "position": {"after": "f" * 32}}))[:3] == (
        400,
        20001,
        "/position/after",
    )
    rule_path = f"{rules_path}/{entrypoint['rules'][0]['id']}"
    assert failure(api.call("PATCH", rule_path, json={"action": "skip"}))[:3] == (400, 20001, "/action_parameters")
    assert failure(api.call("PATCH", rule_path, json={"expression": ""}))[:3] == (400, 20002, "/expression")


def test_expression_errors_name_the_position(api: Api) -> None:
    broken = 'http.host eq "a" and'
    with pytest.raises(RulesError) as refused:
        check_expression(broken)
    expected = f"at position {refused.value.position}"
    path = f"{zone_base(api)}/phases/{CUSTOM}/entrypoint"
    status, code, pointer, message = failure(api.call("PUT", path, json={"rules": [block(), block(broken)]}))
    assert (status, code, pointer) == (400, 20002, "/rules/1/expression")
    assert expected in message


# ---- scope ----


def scoped_token(api: Api, resources: dict[str, str], permission: str) -> dict[str, str]:
    created = ok(
        api.call(
            "POST",
            "/user/tokens",
            json={
                "name": "scoped",
                "policies": [
                    {"effect": "allow", "resources": resources, "permission_groups": [{"id": "x", "name": permission}]}
                ],
            },
        )
    )
    return {"Authorization": f"Bearer {created['value']}"}


def test_rulesets_are_reached_only_within_the_callers_scope(api: Api) -> None:
    account = {"id": api.credentials["account_id"]}
    other = ok(api.call("POST", "/zones", json={"name": "other.example", "account": account}))
    mine = api.credentials["zone_id"]
    other_entrypoint = ok(api.call("GET", f"/zones/{other['id']}/rulesets/phases/{MANAGED}/entrypoint"))
    headers = scoped_token(api, {f"com.cloudflare.api.account.zone.{mine}": "*"}, "Zone WAF Edit")

    assert ok(api.call("GET", f"/zones/{mine}/rulesets", headers=headers))
    for path in (
        f"/zones/{other['id']}/rulesets",
        f"/zones/{other['id']}/rulesets/phases/{MANAGED}/entrypoint",
        f"/zones/{other['id']}/rulesets/{other_entrypoint['id']}",
        f"/accounts/{api.credentials['account_id']}/rulesets",
        f"/zones/{'0' * 32}/rulesets",
    ):
        assert failure(api.call("GET", path, headers=headers))[:2] == (404, 7003), path
    # A ruleset of another zone is not found through this zone either.
    assert failure(api.call("GET", f"/zones/{mine}/rulesets/{other_entrypoint['id']}"))[:2] == (404, 7003)
    assert failure(api.call("DELETE", f"/zones/{mine}/rulesets/{other_entrypoint['id']}"))[:2] == (404, 7003)

    reader = scoped_token(api, {f"com.cloudflare.api.account.zone.{mine}": "*"}, "Zone WAF Read")
    custom = f"/zones/{mine}/rulesets/phases/{CUSTOM}/entrypoint"
    assert failure(api.call("PUT", custom, headers=reader, json={"rules": []}))[:2] == (403, 10000)
    assert ok(api.call("PUT", custom, headers=headers, json={"rules": []}))["kind"] == "zone"


def test_dry_run_checks_everything_and_stores_nothing(api: Api) -> None:
    path = f"{zone_base(api)}/phases/{CUSTOM}/entrypoint"
    dry = {"dry_run": "true"}
    assert api.call("PUT", path, params=dry, json={"rules": [block()]}).json() == {
        "success": True,
        "errors": [],
        "messages": [],
        "result": None,
    }
    assert failure(api.call("GET", path))[0] == 404
    assert failure(api.call("PUT", path, params=dry, json={"rules": [block("")]}))[:2] == (400, 20002)
    entrypoint = ok(api.call("PUT", path, json={"rules": [block()]}))
    ruleset_path = f"{zone_base(api)}/{entrypoint['id']}"
    rule_path = f"{ruleset_path}/rules/{entrypoint['rules'][0]['id']}"
    assert ok(api.call("POST", f"{ruleset_path}/rules", params=dry, json=block("true"))) is None
    assert ok(api.call("PATCH", rule_path, params=dry, json={"enabled": False})) is None
    assert ok(api.call("DELETE", rule_path, params=dry)) is None
    assert ok(api.call("DELETE", ruleset_path, params=dry)) is None
    assert ok(api.call("GET", path)) == entrypoint


def test_the_data_plane_reads_what_the_api_wrote(api: Api, database: Database) -> None:
    account = {"id": api.credentials["account_id"]}
    zone = ok(api.call("POST", "/zones", json={"name": "reads.example", "account": account}))
    zone_rules = ok(
        api.call("PUT", f"/zones/{zone['id']}/rulesets/phases/{CUSTOM}/entrypoint", json={"rules": [block()]})
    )["rules"]
    custom = ok(
        api.call("POST", account_base(api), json={"name": "c", "kind": "custom", "phase": CUSTOM, "rules": [block()]})
    )
    execute = {"action": "execute", "expression": "true", "action_parameters": {"id": custom["id"]}}
    root_rules = ok(api.call("PUT", f"{account_base(api)}/phases/{CUSTOM}/entrypoint", json={"rules": [execute]}))[
        "rules"
    ]
    managed_rules = ok(api.call("GET", f"/zones/{zone['id']}/rulesets/phases/{MANAGED}/entrypoint"))["rules"]
    with database.session() as session:
        assert entrypoint_rules(session, zone_id=zone["id"], phase=CUSTOM) == zone_rules
        assert entrypoint_rules(session, zone_id=zone["id"], phase=MANAGED) == managed_rules
        assert entrypoint_rules(session, account_id=api.credentials["account_id"], phase=CUSTOM) == root_rules
        assert entrypoint_rules(session, account_id=api.credentials["account_id"], phase=MANAGED) == []
        assert account_custom_rulesets(session, api.credentials["account_id"]) == {custom["id"]: custom["rules"]}
        with pytest.raises(ValueError, match="zone_id or an account_id"):
            entrypoint_rules(session, phase=CUSTOM)
    ok(api.call("DELETE", f"/zones/{zone['id']}"))
    with database.session() as session:
        assert entrypoint_rules(session, zone_id=zone["id"], phase=CUSTOM) == []
