"""Firewall rules: ``GET|POST|PUT /zones/{zone_id}/firewall/rules`` (create takes an array of rules or one rule
object, as the SDK sends it, and answers an array either way; update takes an array) and
``GET|PUT|DELETE /zones/{zone_id}/firewall/rules/{rule_id}`` (delete answers ``{id}``).

Each rule answers its filter inline (``filter: {id, expression, paused, description}``) and names it on create and
update by ``{"id"}`` (a filter of ``/zones/{zone_id}/filters``) or inline, which creates or changes the filter
(``previous_waf.filters``); the expression is checked with the Rules language. edgeplane keeps them for the
migration: a rule with action ``bypass`` and product ``waf`` skips the previous WAF, and becomes a skip rule of the
ruleset-based WAF when the zone migrates. They keep working after the migration.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from edgeplane.api.credentials import new_object_id
from edgeplane.api.endpoint import ApiRequest, ApiResult, ApiRoute, paginate, require_object
from edgeplane.api.errors import bad_request, not_found
from edgeplane.api.permissions import path_read, path_write
from edgeplane.api.previous_waf.filters import copy_filter, rule_filter
from edgeplane.api.timestamps import rfc3339
from edgeplane.api.zones import visible_zone, writable_zone
from edgeplane.store.models import utc_now
from edgeplane.store.previous_waf_models import FirewallRule

ACTIONS = ("block", "challenge", "js_challenge", "managed_challenge", "allow", "log", "bypass")
PRODUCTS = ("zoneLockdown", "uaBlock", "bic", "hot", "securityLevel", "rateLimit", "waf")
MAX_RULES_PER_REQUEST = 1000
_MEMBERS = frozenset({"id", "action", "description", "filter", "paused", "priority", "products", "ref"})


def firewall_rule_json(rule: FirewallRule) -> dict[str, Any]:
    """A firewall rule in the v4 shape."""
    document: dict[str, Any] = {
        "id": rule.id,
        "paused": rule.paused,
        "description": rule.description,
        "action": rule.action,
        "priority": rule.priority,
        "filter": {
            "id": rule.filter_id,
            "expression": rule.filter_expression,
            "paused": rule.filter_paused,
            "description": rule.filter_description,
        },
        "created_on": rfc3339(rule.created_on),
        "modified_on": rfc3339(rule.modified_on),
    }
    if rule.products:
        document["products"] = list(rule.products)
    if rule.ref:
        document["ref"] = rule.ref
    return document


def _apply(request: ApiRequest, rule: FirewallRule, body: Any, pointer: str) -> None:
    """Checks one whole rule and sets it on ``rule``; 400s point below ``pointer`` (``/0``, or empty for one)."""
    body = require_object(body)
    unknown = sorted(set(body) - _MEMBERS)
    if unknown:
        raise bad_request(f"unknown field {unknown[0]!r}", pointer=f"{pointer}/{unknown[0]}")
    action = body.get("action")
    if action not in ACTIONS:
        raise bad_request(f"action must be one of {', '.join(ACTIONS)}", pointer=f"{pointer}/action")
    products = body.get("products") or []
    if not isinstance(products, list) or any(product not in PRODUCTS for product in products):
        raise bad_request(f"products must be a list of {', '.join(PRODUCTS)}", pointer=f"{pointer}/products")
    if action == "bypass" and not products:
        raise bad_request("a bypass rule needs products naming what it bypasses", pointer=f"{pointer}/products")
    if action != "bypass" and products:
        raise bad_request("products apply only to the bypass action", pointer=f"{pointer}/products")
    description = body.get("description") or ""
    if not isinstance(description, str) or len(description) > 500:
        raise bad_request("description must be a string of at most 500 characters", pointer=f"{pointer}/description")
    paused = body.get("paused", False)
    if not isinstance(paused, bool):
        raise bad_request("paused must be true or false", pointer=f"{pointer}/paused")
    priority = body.get("priority")
    if priority is not None and (
        not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 2_147_483_647
    ):
        raise bad_request("priority must be an integer from 0 to 2147483647", pointer=f"{pointer}/priority")
    ref = body.get("ref") or ""
    if not isinstance(ref, str) or len(ref) > 50:
        raise bad_request("ref must be a string of at most 50 characters", pointer=f"{pointer}/ref")
    rule.action = action
    rule.products = list(products)
    rule.description = description
    rule.paused = paused
    rule.priority = priority
    rule.ref = ref
    named = rule_filter(request, rule.zone_id, body.get("filter"), f"{pointer}/filter", current=rule.filter_id or None)
    copy_filter(rule, named)
    rule.modified_on = utc_now()


def _rules_query(zone_id: str) -> Any:
    return select(FirewallRule).where(FirewallRule.zone_id == zone_id)


def _rule(request: ApiRequest, zone_id: str, rule_id: Any, pointer: str | None = None) -> FirewallRule:
    rule = request.session.get(FirewallRule, rule_id) if isinstance(rule_id, str) else None
    if rule is None or rule.zone_id != zone_id:
        if pointer is not None:
            raise bad_request(f"no firewall rule {rule_id!r} in this zone", pointer=pointer)
        raise not_found(request.path)
    return rule


def _array(body: Any, *, one_allowed: bool = False) -> list[Any]:
    if one_allowed and isinstance(body, dict):
        return [body]
    if not isinstance(body, list) or not body:
        raise bad_request("the request body must be a non-empty JSON array of firewall rules", code=6007)
    if len(body) > MAX_RULES_PER_REQUEST:
        raise bad_request(f"at most {MAX_RULES_PER_REQUEST} firewall rules per request", code=6007)
    return body


def list_firewall_rules(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/firewall/rules``, optionally filtered by ``action``, ``paused`` and ``description``."""
    zone = visible_zone(request, request.path_params["zone_id"])
    rules = list(request.session.scalars(_rules_query(zone.id).order_by(FirewallRule.created_on, FirewallRule.id)))
    query = request.query
    if query.get("action"):
        rules = [rule for rule in rules if rule.action == query["action"]]
    if query.get("paused") in ("true", "false"):
        rules = [rule for rule in rules if rule.paused == (query["paused"] == "true")]
    if query.get("description"):
        rules = [rule for rule in rules if query["description"].lower() in rule.description.lower()]
    page = paginate(rules, query, default_per_page=25)
    page.result = [firewall_rule_json(rule) for rule in page.result]
    return page


def create_firewall_rules(request: ApiRequest) -> ApiResult:
    """``POST /zones/{zone_id}/firewall/rules`` with an array of rules or one rule object; answers the created rules
    as an array. Nothing is created when one of them is invalid (400 pointing into ``/<index>``, or into the object
    itself when one was sent)."""
    zone = writable_zone(request, request.path_params["zone_id"])
    one = isinstance(request.body, dict)
    created = []
    for index, item in enumerate(_array(request.body, one_allowed=True)):
        rule = FirewallRule(id=new_object_id(), zone_id=zone.id, created_on=utc_now(), filter_id="")
        _apply(request, rule, item, "" if one else f"/{index}")
        created.append(rule)
    request.session.add_all(created)
    request.session.flush()
    return ApiResult([firewall_rule_json(rule) for rule in created], changed=True)


def update_firewall_rules(request: ApiRequest) -> ApiResult:
    """``PUT /zones/{zone_id}/firewall/rules`` with an array of whole rules, each naming its ``id``."""
    zone = writable_zone(request, request.path_params["zone_id"])
    updated = []
    for index, item in enumerate(_array(request.body)):
        body = require_object(item)
        rule = _rule(request, zone.id, body.get("id"), pointer=f"/{index}/id")
        _apply(request, rule, body, f"/{index}")
        updated.append(rule)
    return ApiResult([firewall_rule_json(rule) for rule in updated], changed=True)


def get_firewall_rule(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/firewall/rules/{rule_id}``."""
    zone = visible_zone(request, request.path_params["zone_id"])
    return ApiResult(firewall_rule_json(_rule(request, zone.id, request.path_params["rule_id"])))


def update_firewall_rule(request: ApiRequest) -> ApiResult:
    """``PUT /zones/{zone_id}/firewall/rules/{rule_id}`` with the whole rule (``id``, if given, the path's)."""
    zone = writable_zone(request, request.path_params["zone_id"])
    rule = _rule(request, zone.id, request.path_params["rule_id"])
    body = require_object(request.body)
    if "id" in body and body["id"] != rule.id:
        raise bad_request("id must be the id in the path", pointer="/id")
    _apply(request, rule, body, "")
    return ApiResult(firewall_rule_json(rule), changed=True)


def delete_firewall_rule(request: ApiRequest) -> ApiResult:
    """``DELETE /zones/{zone_id}/firewall/rules/{rule_id}``: answers ``{id}``."""
    zone = writable_zone(request, request.path_params["zone_id"])
    rule = _rule(request, zone.id, request.path_params["rule_id"])
    request.session.delete(rule)
    return ApiResult({"id": rule.id}, changed=True)


_BASE = "/zones/{zone_id}/firewall/rules"
_READ, _WRITE = path_read("firewall_services"), path_write("firewall_services")

ROUTES = [
    ApiRoute(_BASE, "GET", list_firewall_rules, _READ),
    ApiRoute(_BASE, "POST", create_firewall_rules, _WRITE),
    ApiRoute(_BASE, "PUT", update_firewall_rules, _WRITE),
    ApiRoute(_BASE + "/{rule_id}", "GET", get_firewall_rule, _READ),
    ApiRoute(_BASE + "/{rule_id}", "PUT", update_firewall_rule, _WRITE),
    ApiRoute(_BASE + "/{rule_id}", "DELETE", delete_firewall_rule, _WRITE),
]
