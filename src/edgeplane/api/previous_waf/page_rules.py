"""Page rules: ``GET|POST /zones/{zone_id}/pagerules`` and ``GET|PUT|PATCH|DELETE /zones/{zone_id}/pagerules/{id}``
(PUT replaces the rule, PATCH changes the members it names; delete answers ``{id}``).

edgeplane keeps the page-rule settings the WAF depends on: ``disable_security`` and ``waf`` (``on``/``off``).
While the previous WAF runs they switch it off (or on) for matching URLs; the migration turns them into
equivalent rules of the ruleset-based WAF (page rules cannot switch the new version off). Other settings are
refused with a 400 naming them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from edgeplane.api.credentials import new_object_id
from edgeplane.api.endpoint import ApiRequest, ApiResult, ApiRoute, reject_unknown, require_object
from edgeplane.api.errors import bad_request, not_found
from edgeplane.api.permissions import path_read, path_write
from edgeplane.api.timestamps import rfc3339
from edgeplane.api.zones import visible_zone, writable_zone
from edgeplane.store.models import utc_now
from edgeplane.store.previous_waf_models import PageRule

SUPPORTED_ACTIONS = ("disable_security", "waf")
STATUSES = ("active", "disabled")
MAX_PAGE_RULES = 125
MAX_URL_LENGTH = 2048


def page_rule_json(rule: PageRule) -> dict[str, Any]:
    """A page rule in the v4 shape."""
    return {
        "id": rule.id,
        "targets": list(rule.targets),
        "actions": list(rule.actions),
        "priority": rule.priority,
        "status": rule.status,
        "created_on": rfc3339(rule.created_on),
        "modified_on": rfc3339(rule.modified_on),
    }


def _apply(rule: PageRule, body: dict[str, Any]) -> None:
    """Checks a whole page rule and sets it on ``rule``; a 400 naming the member for the first problem."""
    reject_unknown(body, {"id", "targets", "actions", "priority", "status"})
    rule.targets = _targets(body.get("targets"))
    rule.actions = _actions(body.get("actions"))
    priority = body.get("priority", 1)
    if not isinstance(priority, int) or isinstance(priority, bool) or priority < 1:
        raise bad_request("priority must be a positive integer", pointer="/priority")
    status = body.get("status", "disabled")
    if status not in STATUSES:
        raise bad_request("status must be active or disabled", pointer="/status")
    rule.priority = priority
    rule.status = status
    rule.modified_on = utc_now()


def _targets(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or len(value) != 1 or not isinstance(value[0], dict):
        raise bad_request('targets must hold one target {"target": "url", "constraint": {...}}', pointer="/targets")
    target = value[0]
    constraint = target.get("constraint")
    if target.get("target") != "url" or not isinstance(constraint, dict):
        raise bad_request('a target must be {"target": "url", "constraint": {...}}', pointer="/targets/0")
    if constraint.get("operator", "matches") != "matches":
        raise bad_request('the constraint operator must be "matches"', pointer="/targets/0/constraint/operator")
    url = constraint.get("value")
    if not isinstance(url, str) or not url.strip() or len(url) > MAX_URL_LENGTH or any(c.isspace() for c in url):
        raise bad_request(
            "the constraint value must be a URL pattern such as example.com/admin/*",
            pointer="/targets/0/constraint/value",
        )
    return [{"target": "url", "constraint": {"operator": "matches", "value": url}}]


def _actions(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise bad_request("actions must be a non-empty list of {id, value}", pointer="/actions")
    actions: list[dict[str, Any]] = []
    for index, action in enumerate(value):
        if not isinstance(action, dict) or action.get("id") not in SUPPORTED_ACTIONS:
            raise bad_request(
                f"edgeplane supports only the page rule settings {', '.join(SUPPORTED_ACTIONS)}",
                pointer=f"/actions/{index}/id",
            )
        if action["id"] == "waf":
            if action.get("value") not in ("on", "off"):
                raise bad_request('the waf setting must be "on" or "off"', pointer=f"/actions/{index}/value")
            actions.append({"id": "waf", "value": action["value"]})
        else:
            actions.append({"id": "disable_security"})
    if len({action["id"] for action in actions}) != len(actions):
        raise bad_request("a setting may appear once per page rule", pointer="/actions")
    return actions


def _page_rule(request: ApiRequest, zone_id: str) -> PageRule:
    rule = request.session.get(PageRule, request.path_params["pagerule_id"])
    if rule is None or rule.zone_id != zone_id:
        raise not_found(request.path)
    return rule


def list_page_rules(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/pagerules``: every page rule, highest priority first; ``status`` filters."""
    zone = visible_zone(request, request.path_params["zone_id"])
    rules = request.session.scalars(
        select(PageRule).where(PageRule.zone_id == zone.id).order_by(PageRule.priority.desc(), PageRule.id)
    ).all()
    if request.query.get("status"):
        rules = [rule for rule in rules if rule.status == request.query["status"]]
    return ApiResult([page_rule_json(rule) for rule in rules])


def get_page_rule(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/pagerules/{pagerule_id}``."""
    zone = visible_zone(request, request.path_params["zone_id"])
    return ApiResult(page_rule_json(_page_rule(request, zone.id)))


def create_page_rule(request: ApiRequest) -> ApiResult:
    """``POST /zones/{zone_id}/pagerules`` with ``targets``, ``actions``, optional ``priority`` and ``status``
    (``disabled`` by default). 400 past the zone's limit of page rules."""
    zone = writable_zone(request, request.path_params["zone_id"])
    existing = request.session.scalars(select(PageRule.id).where(PageRule.zone_id == zone.id)).all()
    if len(existing) >= MAX_PAGE_RULES:
        raise bad_request(f"a zone has at most {MAX_PAGE_RULES} page rules", code=1004)
    rule = PageRule(id=new_object_id(), zone_id=zone.id, created_on=utc_now())
    _apply(rule, require_object(request.body))
    request.session.add(rule)
    request.session.flush()
    return ApiResult(page_rule_json(rule), changed=True)


def update_page_rule(request: ApiRequest) -> ApiResult:
    """``PUT /zones/{zone_id}/pagerules/{pagerule_id}``: replaces the page rule."""
    zone = writable_zone(request, request.path_params["zone_id"])
    rule = _page_rule(request, zone.id)
    _apply(rule, require_object(request.body))
    return ApiResult(page_rule_json(rule), changed=True)


def edit_page_rule(request: ApiRequest) -> ApiResult:
    """``PATCH /zones/{zone_id}/pagerules/{pagerule_id}``: changes the members the body names (``targets``,
    ``actions``, ``priority``, ``status``), each checked as for PUT; the others keep their values."""
    zone = writable_zone(request, request.path_params["zone_id"])
    rule = _page_rule(request, zone.id)
    changes = require_object(request.body)
    reject_unknown(changes, {"id", "targets", "actions", "priority", "status"})
    if "id" in changes and changes["id"] != rule.id:
        raise bad_request("id must be the id in the path", pointer="/id")
    whole = {"targets": rule.targets, "actions": rule.actions, "priority": rule.priority, "status": rule.status}
    _apply(rule, whole | {name: value for name, value in changes.items() if name != "id"})
    return ApiResult(page_rule_json(rule), changed=True)


def delete_page_rule(request: ApiRequest) -> ApiResult:
    """``DELETE /zones/{zone_id}/pagerules/{pagerule_id}``: answers ``{id}``."""
    zone = writable_zone(request, request.path_params["zone_id"])
    rule = _page_rule(request, zone.id)
    request.session.delete(rule)
    return ApiResult({"id": rule.id}, changed=True)


_BASE = "/zones/{zone_id}/pagerules"
_READ, _WRITE = path_read("page_rules"), path_write("page_rules")

ROUTES = [
    ApiRoute(_BASE, "GET", list_page_rules, _READ),
    ApiRoute(_BASE, "POST", create_page_rule, _WRITE),
    ApiRoute(_BASE + "/{pagerule_id}", "GET", get_page_rule, _READ),
    ApiRoute(_BASE + "/{pagerule_id}", "PUT", update_page_rule, _WRITE),
    ApiRoute(_BASE + "/{pagerule_id}", "PATCH", edit_page_rule, _WRITE),
    ApiRoute(_BASE + "/{pagerule_id}", "DELETE", delete_page_rule, _WRITE),
]
