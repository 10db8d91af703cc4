"""What SDK users meet first, through the official ``cloudflare`` SDK over SQLite and PostgreSQL: firewall rules
created one at a time, page rules edited in place, a 405 for a method a path does not take, and the entrypoint of a
phase edgeplane does not run (none, as on the real API)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import cloudflare
import pytest
from cloudflare import Cloudflare

from tests.api.conftest import Api
from tests.api.sdk_client import sdk_by_key, sdk_for

PAGE_TARGET = [{"target": "url", "constraint": {"operator": "matches", "value": "localhost/static/*"}}]


@pytest.fixture
def cf(api: Api) -> Iterator[Cloudflare]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the SDK marks firewall rules deprecated
        yield sdk_for(api)


def test_firewall_rules_create_one_rule_object(cf: Cloudflare, api: Api) -> None:
    zone_id = api.credentials["zone_id"]
    created = cf.firewall.rules.create(
        zone_id=zone_id, action="block", filter={"expression": 'http.request.uri.path eq "/admin"'}
    ).result
    assert len(created) == 1
    rule = created[0]
    assert rule.action == "block"
    assert rule.filter is not None
    assert rule.filter.expression == 'http.request.uri.path eq "/admin"'  # type: ignore[union-attr]
    assert [listed.id for listed in cf.firewall.rules.list(zone_id=zone_id)] == [rule.id]
    assert cf.firewall.rules.get(rule.id, zone_id=zone_id).action == "block"  # type: ignore[arg-type]


def test_firewall_rules_create_an_array_and_refuse_a_bad_one(api: Api) -> None:
    path = f"/zones/{api.credentials['zone_id']}/firewall/rules"
    rule = {"action": "log", "filter": {"expression": 'http.host eq "a"'}}
    answered = api.call("POST", path, json=[rule, rule]).json()
    assert answered["success"] is True
    assert len(answered["result"]) == 2
    broken = api.call("POST", path, json={"action": "explode", "filter": {"expression": 'http.host eq "a"'}}).json()
    assert broken["errors"][0]["code"] == 1001
    assert broken["errors"][0]["source"]["pointer"] == "/action"


def test_page_rules_edit_changes_only_what_it_names(cf: Cloudflare, api: Api) -> None:
    zone_id = api.credentials["zone_id"]
    rule = cf.page_rules.create(zone_id=zone_id, targets=PAGE_TARGET, actions=[{"id": "disable_security"}])
    assert rule is not None
    assert rule.status == "disabled"
    edited = cf.page_rules.edit(rule.id, zone_id=zone_id, status="active", priority=3)
    assert edited is not None
    assert (edited.status, edited.priority) == ("active", 3)
    assert edited.targets[0].constraint.value == "localhost/static/*"
    assert [action.id for action in edited.actions] == ["disable_security"]
    again = cf.page_rules.get(rule.id, zone_id=zone_id)
    assert again is not None
    assert (again.status, again.priority) == ("active", 3)
    with pytest.raises(cloudflare.BadRequestError):
        cf.page_rules.edit(rule.id, zone_id=zone_id, actions=[{"id": "always_use_https"}])
    with pytest.raises(cloudflare.NotFoundError):
        cf.page_rules.edit("0" * 32, zone_id=zone_id, status="active")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("POST", "/zones/{zone}/pagerules/{some}", "DELETE, GET, PATCH, PUT"),
        ("PUT", "/zones/{zone}", "DELETE, GET, PATCH"),
        ("POST", "/accounts/{some}", "GET"),
        ("PATCH", "/zones/{zone}/logpush/jobs", "GET, POST"),
    ],
)
def test_a_method_the_path_does_not_take_is_405(api: Api, method: str, path: str, allowed: str) -> None:
    response = api.call(method, path.format(zone=api.credentials["zone_id"], some="0" * 32), json={})
    assert response.status_code == 405
    assert response.headers["allow"] == allowed
    document = response.json()
    assert document["success"] is False
    assert [error["code"] for error in document["errors"]] == [10405]


def test_a_path_nothing_serves_is_still_404(api: Api) -> None:
    response = api.call("PATCH", "/zones/nothing/here/at/all", json={})
    assert (response.status_code, response.json()["errors"][0]["code"]) == (404, 7003)


def test_the_entrypoint_of_a_phase_edgeplane_does_not_run_is_not_found(api: Api) -> None:
    by_key = sdk_by_key(api)
    zone_id, account_id = api.credentials["zone_id"], api.credentials["account_id"]
    phase = "http_request_late_transform"
    with pytest.raises(cloudflare.NotFoundError):
        by_key.rulesets.phases.get(phase, zone_id=zone_id)  # type: ignore[arg-type]
    with pytest.raises(cloudflare.NotFoundError):
        by_key.rulesets.phases.get(phase, account_id=account_id)  # type: ignore[arg-type]
    with pytest.raises(cloudflare.BadRequestError) as refused:
        by_key.rulesets.phases.update(phase, zone_id=zone_id, rules=[])  # type: ignore[arg-type]
    assert refused.value.status_code == 400


def test_permission_groups_are_listed_to_the_sdk(api: Api) -> None:
    groups = list(sdk_for(api).user.tokens.permission_groups.list(name="Zone Read"))
    assert [(group.id, group.name) for group in groups] == [("c8fed203ed3043cba015a93ad1616f1f", "Zone Read")]
    assert groups[0].scopes == ["com.cloudflare.api.account.zone"]
