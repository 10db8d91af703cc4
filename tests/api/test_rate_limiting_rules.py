"""Rate limiting rules through the Rulesets API (phase ``http_ratelimit``), over SQLite and PostgreSQL: every invalid
``ratelimit`` object or custom response is a v4 error with its code and the pointer of the member; a refused write
changes nothing deployed; good rules read back exactly as written (rule, ruleset, entrypoint, versions); account
rulesets of the phase; and a custom rule's skip of the phase still works."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from edgeplane.store.database import Database
from edgeplane.store.ruleset_models import entrypoint_rules
from tests.api.conftest import Api

RATELIMIT = "http_ratelimit"
CUSTOM = "http_request_firewall_custom"
COLO = "cf.colo.id"
PER_IP: dict[str, Any] = {"characteristics": [COLO, "ip.src"], "period": 60, "requests_per_period": 100}


def zone_path(api: Api, suffix: str = "") -> str:
    return f"/zones/{api.credentials['zone_id']}/rulesets{suffix}"


def account_path(api: Api, suffix: str = "") -> str:
    return f"/accounts/{api.credentials['account_id']}/rulesets{suffix}"


def entrypoint_path(api: Api, phase: str = RATELIMIT) -> str:
    return zone_path(api, f"/phases/{phase}/entrypoint")


def ok(response: Any) -> Any:
    body = response.json()
    assert response.status_code == 200, body
    assert body["success"] is True, body
    return body["result"]


def refusal(response: Any) -> tuple[int, int, str | None]:
    body = response.json()
    assert body["success"] is False, body
    assert body["result"] is None
    (error,) = body["errors"]
    assert error["message"]
    return response.status_code, error["code"], (error.get("source") or {}).get("pointer")


def limit(action: str = "block", ratelimit: Any = PER_IP, **members: Any) -> dict[str, Any]:
    """A rate limiting rule on the gateway's path."""
    return {"action": action, "expression": 'http.request.uri.path eq "/v1/mainnet"', "ratelimit": ratelimit, **members}


def with_(**members: Any) -> dict[str, Any]:
    return {**PER_IP, **members}


def response(**members: Any) -> dict[str, Any]:
    return {"response": members}


GOOD_RULES: list[dict[str, Any]] = [
    limit(ref="per-ip", description="100 a minute per address"),
    limit(
        ref="per-key",
        ratelimit={
            "characteristics": [COLO, 'http.request.headers["x-api-key"]'],
            "period": 10,
            "requests_per_period": 20,
            "mitigation_timeout": 600,
            "counting_expression": 'http.request.method eq "POST"',
            "requests_to_origin": True,
        },
        action_parameters=response(
            status_code=429, content='{"jsonrpc":"2.0","error":{"code":-32005}}', content_type="application/json"
        ),
    ),
    limit(
        ref="per-method",
        ratelimit=with_(characteristics=[COLO, "ip.src", 'lookup_json_string(http.request.body.raw, "method")']),
        action_parameters=response(content="slow down"),  # no status: the edge answers 429
    ),
    limit(
        "log",
        ref="budget",
        ratelimit={
            "characteristics": [COLO, "edgeplane.jsonrpc.network", "cf.unique_visitor_id"],
            "period": 3600,
            "score_per_period": 100_000,
            "score_response_header_name": "x-edgeplane-cost",
        },
    ),
    limit("managed_challenge", ref="challenge", ratelimit=with_(mitigation_timeout=0, period=86400)),
    limit("js_challenge", ref="js", enabled=False),
    limit(
        ref="big-page",
        ratelimit=with_(period=10, mitigation_timeout=86400),
        action_parameters=response(status_code=403, content="x" * 30720, content_type="text/html"),
    ),
]


@pytest.mark.parametrize(
    ("rule", "code", "pointer"),
    [
        ({"action": "block", "expression": "true"}, 20010, "/rules/1/ratelimit"),
        (limit(ratelimit=[COLO]), 20010, "/rules/1/ratelimit"),
        (limit(ratelimit=with_(burst=10)), 20010, "/rules/1/ratelimit/burst"),
        (limit(ratelimit={"period": 60, "requests_per_period": 1}), 20010, "/rules/1/ratelimit/characteristics"),
        (limit(ratelimit=with_(period="60")), 20010, "/rules/1/ratelimit/period"),
        (limit(ratelimit=with_(requests_to_origin="no")), 20010, "/rules/1/ratelimit/requests_to_origin"),
        (limit(ratelimit=with_(period=30)), 20011, "/rules/1/ratelimit/period"),
        (limit(ratelimit=with_(period=65535)), 20011, "/rules/1/ratelimit/period"),
        (limit(ratelimit={"characteristics": [COLO], "requests_per_period": 5}), 20011, "/rules/1/ratelimit/period"),
        (limit(ratelimit=with_(mitigation_timeout=30)), 20012, "/rules/1/ratelimit/mitigation_timeout"),
        (limit("managed_challenge", with_(mitigation_timeout=60)), 20012, "/rules/1/ratelimit/mitigation_timeout"),
        (limit("challenge", with_(mitigation_timeout=10)), 20012, "/rules/1/ratelimit/mitigation_timeout"),
        (limit(ratelimit=with_(characteristics=["ip.src"])), 20013, "/rules/1/ratelimit/characteristics"),
        (limit(ratelimit=with_(characteristics=[])), 20013, "/rules/1/ratelimit/characteristics"),
        (limit(ratelimit=with_(characteristics=[COLO, "ip.dst"])), 20014, "/rules/1/ratelimit/characteristics/1"),
        (
            limit(ratelimit=with_(characteristics=[COLO, 'http.request.headers["X-Api-Key"]'])),
            20014,
            "/rules/1/ratelimit/characteristics/1",
        ),
        (
            limit(ratelimit=with_(characteristics=[COLO, "ip.src", "cf.unique_visitor_id"])),
            20015,
            "/rules/1/ratelimit/characteristics",
        ),
        (
            limit(ratelimit=with_(characteristics=[COLO, "http.host", "http.host"])),
            20015,
            "/rules/1/ratelimit/characteristics/2",
        ),
        (limit(ratelimit={"characteristics": [COLO], "period": 60}), 20016, "/rules/1/ratelimit/requests_per_period"),
        (limit(ratelimit=with_(requests_per_period=0)), 20016, "/rules/1/ratelimit/requests_per_period"),
        (
            limit(ratelimit=with_(score_per_period=5, score_response_header_name="x-cost")),
            20016,
            "/rules/1/ratelimit/score_per_period",
        ),
        (
            limit(ratelimit={"characteristics": [COLO], "period": 60, "score_per_period": 5}),
            20016,
            "/rules/1/ratelimit/score_response_header_name",
        ),
        (
            limit(ratelimit=with_(counting_expression="http.response.nothing eq 1")),
            20017,
            "/rules/1/ratelimit/counting_expression",
        ),
        (limit(ratelimit=with_(counting_expression="(")), 20017, "/rules/1/ratelimit/counting_expression"),
        (
            limit(action_parameters=response(content="x" * 30721)),
            20001,
            "/rules/1/action_parameters/response/content",
        ),
        (
            limit(action_parameters=response(content="é" * 15361)),  # 30722 bytes in UTF-8
            20001,
            "/rules/1/action_parameters/response/content",
        ),
        (limit(action_parameters=response(status_code=500)), 20001, "/rules/1/action_parameters/response/status_code"),
        (limit(action_parameters=response(status_code=399)), 20001, "/rules/1/action_parameters/response/status_code"),
        (
            limit(action_parameters=response(content_type="image/png")),
            20001,
            "/rules/1/action_parameters/response/content_type",
        ),
        (limit(action_parameters={"respond": {}}), 20001, "/rules/1/action_parameters/respond"),
        (limit("log", action_parameters=response(status_code=429)), 20001, "/rules/1/action_parameters"),
        (limit("skip", action_parameters={"ruleset": "current"}), 20001, "/rules/1/action"),
        (limit("execute", action_parameters={"id": "c" * 32}), 20001, "/rules/1/action"),
        (limit(expression="http.host eq"), 20002, "/rules/1/expression"),
    ],
)
def test_an_invalid_rate_limiting_rule_is_refused_with_its_code_and_pointer(
    api: Api, rule: dict[str, Any], code: int, pointer: str
) -> None:
    assert refusal(api.call("PUT", entrypoint_path(api), json={"rules": [limit(), rule]})) == (400, code, pointer)


def test_a_ratelimit_is_refused_outside_its_phase(api: Api) -> None:
    rule = {"action": "block", "expression": "true", "ratelimit": PER_IP}
    assert refusal(api.call("PUT", entrypoint_path(api, CUSTOM), json={"rules": [rule]})) == (
        400,
        20001,
        "/rules/0/ratelimit",
    )


def test_good_rules_read_back_exactly_as_written(api: Api, database: Database) -> None:
    written = ok(api.call("PUT", entrypoint_path(api), json={"rules": GOOD_RULES}))
    assert (written["phase"], written["kind"], written["name"], written["version"]) == (
        RATELIMIT,
        "zone",
        "default",
        "1",
    )

    def members(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        names = ("action", "expression", "ratelimit", "action_parameters", "ref", "description", "enabled")
        return [{name: rule[name] for name in names if name in rule} for rule in rules]

    expected = [{"enabled": True, **rule} for rule in GOOD_RULES]
    assert members(written["rules"]) == expected
    ruleset_id = written["id"]
    for path in (
        entrypoint_path(api),
        zone_path(api, f"/{ruleset_id}"),
        zone_path(api, f"/{ruleset_id}/versions/1"),
        entrypoint_path(api) + "/versions/1",
    ):
        assert ok(api.call("GET", path))["rules"] == written["rules"], path
    rule_id = written["rules"][0]["id"]
    with database.session() as session:
        assert entrypoint_rules(session, zone_id=api.credentials["zone_id"], phase=RATELIMIT) == written["rules"]

    # The same rules again change no rule; a new ratelimit is a new rule version, as any change of behaviour.
    again = ok(api.call("PUT", entrypoint_path(api), json={"rules": written["rules"]}))
    assert [rule["version"] for rule in again["rules"]] == ["1"] * len(GOOD_RULES)
    patched = ok(
        api.call("PATCH", zone_path(api, f"/{ruleset_id}/rules/{rule_id}"), json={"ratelimit": with_(period=600)})
    )
    assert patched["rules"][0]["ratelimit"] == with_(period=600)
    assert patched["rules"][0]["version"] == "2"
    assert patched["rules"][1:] == again["rules"][1:]
    listed = ok(api.call("GET", entrypoint_path(api) + "/versions"))
    assert [version["version"] for version in listed] == ["1", "2", "3"]


def test_rules_are_added_edited_and_deleted_one_at_a_time(api: Api) -> None:
    ruleset = ok(api.call("PUT", entrypoint_path(api), json={"rules": [limit(ref="first")]}))
    rules_path = zone_path(api, f"/{ruleset['id']}/rules")
    added = ok(api.call("POST", rules_path, json={**GOOD_RULES[1], "position": {"index": 1}}))
    assert [rule["ref"] for rule in added["rules"]] == ["per-key", "first"]
    assert added["rules"][0]["ratelimit"] == GOOD_RULES[1]["ratelimit"]
    first_id = added["rules"][1]["id"]
    challenged = ok(api.call("PATCH", f"{rules_path}/{first_id}", json={"action": "managed_challenge"}))
    assert challenged["rules"][1]["action"] == "managed_challenge"
    assert challenged["rules"][1]["ratelimit"] == PER_IP  # kept: the PATCH did not send it
    left = ok(api.call("DELETE", f"{rules_path}/{first_id}"))
    assert [rule["ref"] for rule in left["rules"]] == ["per-key"]
    emptied = ok(api.call("PUT", entrypoint_path(api), json={"rules": []}))
    assert emptied["rules"] == []


def test_a_refused_write_changes_nothing_deployed(api: Api) -> None:
    deployed = ok(api.call("PUT", entrypoint_path(api), json={"rules": [limit(ref="per-ip")]}))
    ruleset_path = zone_path(api, f"/{deployed['id']}")
    rule_path = f"{ruleset_path}/rules/{deployed['rules'][0]['id']}"
    changes = len(api.changes)
    bad = limit(ratelimit=with_(period=30))
    attempts = [
        ("PUT", entrypoint_path(api), {"rules": [limit(ref="other"), bad]}, "/rules/1/ratelimit/period"),
        ("PUT", ruleset_path, {"rules": [bad]}, "/rules/0/ratelimit/period"),
        ("POST", f"{ruleset_path}/rules", bad, "/ratelimit/period"),
        ("PATCH", rule_path, {"ratelimit": with_(period=30)}, "/ratelimit/period"),
        ("PATCH", rule_path, {"ratelimit": None}, "/ratelimit"),
        (
            "PATCH",
            rule_path,
            {"action_parameters": response(content="x" * 40000)},
            "/action_parameters/response/content",
        ),
    ]
    for method, path, body, pointer in attempts:
        assert refusal(api.call(method, path, json=body))[2] == pointer, (method, path)
    assert ok(api.call("GET", entrypoint_path(api))) == deployed
    assert [version["version"] for version in ok(api.call("GET", f"{ruleset_path}/versions"))] == ["1"]
    assert len(api.changes) == changes


def test_a_dry_run_checks_a_rate_limiting_rule_and_stores_nothing(api: Api) -> None:
    dry = {"dry_run": "true"}
    assert ok(api.call("PUT", entrypoint_path(api), params=dry, json={"rules": GOOD_RULES})) is None
    assert refusal(api.call("GET", entrypoint_path(api)))[:2] == (404, 7003)
    bad = limit(ratelimit=with_(characteristics=["ip.src"]))
    assert refusal(api.call("PUT", entrypoint_path(api), params=dry, json={"rules": [bad]}))[1] == 20013


def test_account_rate_limiting_rulesets(api: Api) -> None:
    custom = ok(
        api.call(
            "POST",
            account_path(api),
            json={"name": "rpc limits", "kind": "custom", "phase": RATELIMIT, "rules": GOOD_RULES[:2]},
        )
    )
    assert (custom["kind"], custom["phase"]) == ("custom", RATELIMIT)
    assert [rule["ratelimit"] for rule in custom["rules"]] == [rule["ratelimit"] for rule in GOOD_RULES[:2]]
    execute = {"action": "execute", "expression": "true", "action_parameters": {"id": custom["id"]}}
    root_path = account_path(api, f"/phases/{RATELIMIT}/entrypoint")
    root = ok(api.call("PUT", root_path, json={"rules": [execute, limit(ref="account-wide")]}))
    assert (root["kind"], [rule["action"] for rule in root["rules"]]) == ("root", ["execute", "block"])
    assert ok(api.call("GET", root_path))["rules"][1]["ratelimit"] == PER_IP
    assert refusal(api.call("PUT", root_path, json={"rules": [{**execute, "ratelimit": PER_IP}]})) == (
        400,
        20001,
        "/rules/0/ratelimit",
    )
    firewall_custom = ok(
        api.call("POST", account_path(api), json={"name": "waf", "kind": "custom", "phase": CUSTOM, "rules": []})
    )
    crossing = {**execute, "action_parameters": {"id": firewall_custom["id"]}}
    assert refusal(api.call("PUT", root_path, json={"rules": [crossing]})) == (
        400,
        20001,
        "/rules/0/action_parameters/id",
    )
    bad = {"name": "bad", "kind": "custom", "phase": RATELIMIT, "rules": [limit(ratelimit=with_(period=5))]}
    assert refusal(api.call("POST", account_path(api), json=bad)) == (400, 20011, "/rules/0/ratelimit/period")
    # A zone has no custom rulesets, of this phase or another.
    zone_custom = {"name": "z", "kind": "custom", "phase": RATELIMIT, "rules": []}
    assert refusal(api.call("POST", zone_path(api), json=zone_custom))[:3] == (400, 20001, "/kind")


def test_post_rulesets_creates_the_zone_entrypoint_of_the_phase(api: Api) -> None:
    body = {"name": "limits", "kind": "zone", "phase": RATELIMIT, "rules": [limit()]}
    created = ok(api.call("POST", zone_path(api), json=body))
    assert created["rules"][0]["ratelimit"] == PER_IP
    assert ok(api.call("GET", entrypoint_path(api)))["id"] == created["id"]
    assert refusal(api.call("POST", zone_path(api), json=body))[:2] == (409, 20006)


def test_a_custom_rule_still_skips_the_rate_limiting_phase(api: Api) -> None:
    skip = {
        "action": "skip",
        "expression": "ip.src in {192.0.2.0/24}",
        "action_parameters": {"phases": [RATELIMIT], "products": ["rateLimit"]},
    }
    stored = ok(api.call("PUT", entrypoint_path(api, CUSTOM), json={"rules": [copy.deepcopy(skip)]}))
    assert stored["rules"][0]["action_parameters"] == skip["action_parameters"]
    unknown = {**skip, "action_parameters": {"phases": ["http_ratelimits"]}}
    assert refusal(api.call("PUT", entrypoint_path(api, CUSTOM), json={"rules": [unknown]})) == (
        400,
        20001,
        "/rules/0/action_parameters/phases/0",
    )
