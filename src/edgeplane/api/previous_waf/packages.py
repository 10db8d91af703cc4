"""Packages, groups and rules of the previous managed rules: ``GET /zones/{zone_id}/firewall/waf/packages[/{id}]``
(PATCH sets the OWASP package's ``sensitivity`` and ``action_mode``), ``…/packages/{id}/groups[/{id}]`` (PATCH sets
``mode`` on|off) and ``…/packages/{id}/rules[/{id}]`` (PATCH sets ``mode`` among the rule's ``allowed_modes``)."""

from __future__ import annotations

from typing import Any

from edgeplane.api.endpoint import ApiRequest, ApiResult, ApiRoute, paginate, reject_unknown, require_object
from edgeplane.api.errors import bad_request, not_found
from edgeplane.api.permissions import path_read, path_write
from edgeplane.api.previous_waf.availability import previous_waf_zone
from edgeplane.configuration.previous_waf import previous_waf_state
from edgeplane.store.previous_waf_models import PreviousWaf
from edgeplane.waf.previous import (
    ACTION_MODES,
    GROUP_MODES,
    SENSITIVITIES,
    PreviousGroup,
    PreviousPackage,
    PreviousRule,
    load_previous_packages,
)


def package_json(package: PreviousPackage, zone_id: str, state: PreviousWaf) -> dict[str, Any]:
    """A package in the v4 shape; the anomaly (OWASP) package adds ``sensitivity`` and ``action_mode``."""
    document: dict[str, Any] = {
        "id": package.id,
        "name": package.name,
        "description": package.description,
        "detection_mode": package.detection_mode,
        "zone_id": zone_id,
        "status": "active",
    }
    if package.is_anomaly:
        document["sensitivity"] = state.owasp_sensitivity or "high"
        document["action_mode"] = state.owasp_action_mode
    return document


def group_json(package: PreviousPackage, group: PreviousGroup, state: PreviousWaf) -> dict[str, Any]:
    """A group in the v4 shape, with how many of its rules were changed from their default mode."""
    modes = state.rule_modes or {}
    return {
        "id": group.id,
        "name": group.name,
        "description": group.description,
        "mode": (state.group_modes or {}).get(group.id, "on"),
        "rules_count": len(group.rule_ids),
        "modified_rules_count": sum(1 for rule_id in group.rule_ids if rule_id in modes),
        "package_id": package.id,
        "allowed_modes": list(GROUP_MODES),
    }


def rule_json(package: PreviousPackage, rule: PreviousRule, state: PreviousWaf) -> dict[str, Any]:
    """A rule in the v4 shape: traditional rules add ``default_mode``; their ``mode`` is ``default`` until set."""
    group = package.group(rule.group_id)
    unset = rule.default_mode if package.is_anomaly else "default"
    document: dict[str, Any] = {
        "id": rule.id,
        "description": rule.description,
        "priority": rule.priority,
        "group": {"id": rule.group_id, "name": group.name if group else ""},
        "package_id": package.id,
        "allowed_modes": list(package.rule_modes),
        "mode": (state.rule_modes or {}).get(rule.id, unset),
    }
    if not package.is_anomaly:
        document["default_mode"] = rule.default_mode
    return document


def _package(request: ApiRequest) -> PreviousPackage:
    package = load_previous_packages().get(request.path_params["package_id"])
    if package is None:
        raise not_found(request.path)
    return package


def _group(request: ApiRequest, package: PreviousPackage) -> PreviousGroup:
    group = package.group(request.path_params["group_id"])
    if group is None:
        raise not_found(request.path)
    return group


def _rule(request: ApiRequest, package: PreviousPackage) -> PreviousRule:
    rule = package.rule(request.path_params["rule_id"])
    if rule is None:
        raise not_found(request.path)
    return rule


def list_packages(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/firewall/waf/packages``, optionally filtered by ``name``."""
    zone = previous_waf_zone(request)
    state = previous_waf_state(request.session, zone.id)
    packages = list(load_previous_packages().values())
    if request.query.get("name"):
        packages = [package for package in packages if package.name == request.query["name"]]
    page = paginate(packages, request.query, default_per_page=50)
    page.result = [package_json(package, zone.id, state) for package in page.result]
    return page


def get_package(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/firewall/waf/packages/{package_id}``."""
    zone = previous_waf_zone(request)
    return ApiResult(package_json(_package(request), zone.id, previous_waf_state(request.session, zone.id)))


def edit_package(request: ApiRequest) -> ApiResult:
    """``PATCH …/packages/{package_id}`` with ``sensitivity`` and/or ``action_mode``: the anomaly package only."""
    zone = previous_waf_zone(request, write=True)
    package = _package(request)
    body = require_object(request.body)
    reject_unknown(body, {"sensitivity", "action_mode"})
    if not package.is_anomaly:
        raise bad_request(
            f"the package {package.name!r} has no sensitivity or action_mode; change its groups and rules instead",
            pointer="/" + (next(iter(body)) if body else "sensitivity"),
        )
    if "sensitivity" in body and body["sensitivity"] not in SENSITIVITIES:
        raise bad_request(f"sensitivity must be one of {', '.join(SENSITIVITIES)}", pointer="/sensitivity")
    if "action_mode" in body and body["action_mode"] not in ACTION_MODES:
        raise bad_request(f"action_mode must be one of {', '.join(ACTION_MODES)}", pointer="/action_mode")
    state = previous_waf_state(request.session, zone.id, for_update=True)
    if "sensitivity" in body:
        state.owasp_sensitivity = body["sensitivity"]
    if "action_mode" in body:
        state.owasp_action_mode = body["action_mode"]
    return ApiResult(package_json(package, zone.id, state), changed=True)


def list_groups(request: ApiRequest) -> ApiResult:
    """``GET …/packages/{package_id}/groups``, optionally filtered by ``mode`` and ``name``."""
    zone = previous_waf_zone(request)
    package = _package(request)
    state = previous_waf_state(request.session, zone.id)
    groups = [group_json(package, group, state) for group in package.groups]
    for member in ("mode", "name"):
        if request.query.get(member):
            groups = [group for group in groups if group[member] == request.query[member]]
    return paginate(groups, request.query, default_per_page=50)


def get_group(request: ApiRequest) -> ApiResult:
    """``GET …/packages/{package_id}/groups/{group_id}``."""
    zone = previous_waf_zone(request)
    package = _package(request)
    return ApiResult(group_json(package, _group(request, package), previous_waf_state(request.session, zone.id)))


def edit_group(request: ApiRequest) -> ApiResult:
    """``PATCH …/groups/{group_id}`` with ``{"mode": "on"|"off"}``."""
    zone = previous_waf_zone(request, write=True)
    package = _package(request)
    group = _group(request, package)
    body = require_object(request.body)
    reject_unknown(body, {"mode"})
    if body.get("mode") not in GROUP_MODES:
        raise bad_request('mode must be "on" or "off"', pointer="/mode")
    state = previous_waf_state(request.session, zone.id, for_update=True)
    modes = dict(state.group_modes or {})
    if body["mode"] == "on":
        modes.pop(group.id, None)
    else:
        modes[group.id] = "off"
    state.group_modes = modes  # a new dict: JSON columns notice reassignment, not mutation
    return ApiResult(group_json(package, group, state), changed=True)


def list_rules(request: ApiRequest) -> ApiResult:
    """``GET …/packages/{package_id}/rules``, optionally filtered by ``group_id``, ``mode`` and ``description``
    (a case-insensitive substring)."""
    zone = previous_waf_zone(request)
    package = _package(request)
    state = previous_waf_state(request.session, zone.id)
    rules = [rule_json(package, rule, state) for rule in package.rules]
    query = request.query
    if query.get("group_id"):
        rules = [rule for rule in rules if rule["group"]["id"] == query["group_id"]]
    if query.get("mode"):
        rules = [rule for rule in rules if rule["mode"] == query["mode"]]
    if query.get("description"):
        needle = query["description"].lower()
        rules = [rule for rule in rules if needle in rule["description"].lower()]
    return paginate(rules, query, default_per_page=50)


def get_rule(request: ApiRequest) -> ApiResult:
    """``GET …/packages/{package_id}/rules/{rule_id}``."""
    zone = previous_waf_zone(request)
    package = _package(request)
    return ApiResult(rule_json(package, _rule(request, package), previous_waf_state(request.session, zone.id)))


def edit_rule(request: ApiRequest) -> ApiResult:
    """``PATCH …/rules/{rule_id}`` with ``mode``, one of the rule's ``allowed_modes`` (400 otherwise)."""
    zone = previous_waf_zone(request, write=True)
    package = _package(request)
    rule = _rule(request, package)
    body = require_object(request.body)
    reject_unknown(body, {"mode"})
    if body.get("mode") not in package.rule_modes:
        raise bad_request(f"mode must be one of {', '.join(package.rule_modes)} for this rule", pointer="/mode")
    state = previous_waf_state(request.session, zone.id, for_update=True)
    modes = dict(state.rule_modes or {})
    if body["mode"] in ("default", rule.default_mode if package.is_anomaly else "default"):
        modes.pop(rule.id, None)
    else:
        modes[rule.id] = body["mode"]
    state.rule_modes = modes
    return ApiResult(rule_json(package, rule, state), changed=True)


_BASE = "/zones/{zone_id}/firewall/waf/packages"
_READ, _WRITE = path_read("zone_waf"), path_write("zone_waf")

ROUTES = [
    ApiRoute(_BASE, "GET", list_packages, _READ),
    ApiRoute(_BASE + "/{package_id}", "GET", get_package, _READ),
    ApiRoute(_BASE + "/{package_id}", "PATCH", edit_package, _WRITE),
    ApiRoute(_BASE + "/{package_id}/groups", "GET", list_groups, _READ),
    ApiRoute(_BASE + "/{package_id}/groups/{group_id}", "GET", get_group, _READ),
    ApiRoute(_BASE + "/{package_id}/groups/{group_id}", "PATCH", edit_group, _WRITE),
    ApiRoute(_BASE + "/{package_id}/rules", "GET", list_rules, _READ),
    ApiRoute(_BASE + "/{package_id}/rules/{rule_id}", "GET", get_rule, _READ),
    ApiRoute(_BASE + "/{package_id}/rules/{rule_id}", "PATCH", edit_rule, _WRITE),
]
