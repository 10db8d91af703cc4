"""URI-based WAF overrides: ``GET|POST /zones/{zone_id}/firewall/waf/overrides`` and
``GET|PUT|DELETE …/overrides/{override_id}`` (delete answers ``{id}``).

An override changes the previous managed rules for requests whose URL matches one of its ``urls``: group modes
(``groups``: group id → ``default`` or ``disable``), rule modes (``rules``: rule id → a mode the rule allows) and
actions (``rewrite_action``: action → action). A zone with an override cannot migrate (seed 002): deleting them is
the first step.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from edgeplane.api.credentials import new_object_id
from edgeplane.api.endpoint import ApiRequest, ApiResult, ApiRoute, paginate, reject_unknown, require_object
from edgeplane.api.errors import bad_request, not_found
from edgeplane.api.permissions import path_read, path_write
from edgeplane.api.previous_waf.availability import previous_waf_zone
from edgeplane.api.timestamps import rfc3339
from edgeplane.store.models import utc_now
from edgeplane.store.previous_waf_models import WafOverride
from edgeplane.waf.previous import find_group, find_rule, load_previous_packages

_MEMBERS = frozenset({"id", "description", "urls", "priority", "paused", "groups", "rules", "rewrite_action"})
_REWRITE_ACTIONS = ("default", "disable", "simulate", "block", "challenge")
_GROUP_VALUES = ("default", "disable")
MAX_URLS = 100
MAX_URL_LENGTH = 2048
MAX_PRIORITY = 1_000_000_000


def override_json(override: WafOverride) -> dict[str, Any]:
    """An override in the v4 shape."""
    return {
        "id": override.id,
        "description": override.description or None,
        "urls": list(override.urls),
        "priority": override.priority,
        "paused": override.paused,
        "groups": dict(override.groups),
        "rules": dict(override.rules),
        "rewrite_action": dict(override.rewrite_action),
        "created_on": rfc3339(override.created_on),
        "modified_on": rfc3339(override.modified_on),
    }


def _override(request: ApiRequest, zone_id: str) -> WafOverride:
    override = request.session.get(WafOverride, request.path_params["override_id"])
    if override is None or override.zone_id != zone_id:
        raise not_found(request.path)
    return override


def _apply(override: WafOverride, body: dict[str, Any]) -> None:
    """Checks a whole override and sets it on ``override``; a 400 naming the member for the first problem."""
    reject_unknown(body, _MEMBERS)
    urls = body.get("urls")
    if not isinstance(urls, list) or not urls or len(urls) > MAX_URLS:
        raise bad_request(f"urls must be a list of 1 to {MAX_URLS} URL patterns", pointer="/urls")
    for index, url in enumerate(urls):
        if not isinstance(url, str) or not url.strip() or len(url) > MAX_URL_LENGTH or any(c.isspace() for c in url):
            raise bad_request(
                f"urls[{index}] must be a URL pattern such as example.com/admin/* (no spaces, at most "
                f"{MAX_URL_LENGTH} characters)",
                pointer=f"/urls/{index}",
            )
    description = body.get("description") or ""
    if not isinstance(description, str) or len(description) > 500:
        raise bad_request("description must be a string of at most 500 characters", pointer="/description")
    priority = body.get("priority", 1)
    if not isinstance(priority, int) or isinstance(priority, bool) or abs(priority) > MAX_PRIORITY:
        raise bad_request(
            f"priority must be an integer between -{MAX_PRIORITY} and {MAX_PRIORITY}", pointer="/priority"
        )
    paused = body.get("paused", False)
    if not isinstance(paused, bool):
        raise bad_request("paused must be true or false", pointer="/paused")
    override.urls = list(urls)
    override.description = description
    override.priority = priority
    override.paused = paused
    override.groups = _groups(body.get("groups"))
    override.rules = _rules(body.get("rules"))
    override.rewrite_action = _rewrite_action(body.get("rewrite_action"))
    override.modified_on = utc_now()


def _object(value: Any, member: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_request(f"{member} must be an object", pointer=f"/{member}")
    return value


def _groups(value: Any) -> dict[str, str]:
    groups = _object(value, "groups")
    for group_id, mode in groups.items():
        if find_group(group_id) is None:
            raise bad_request(f"unknown WAF rule group {group_id!r}", pointer=f"/groups/{group_id}")
        if mode not in _GROUP_VALUES:
            raise bad_request('a group override must be "default" or "disable"', pointer=f"/groups/{group_id}")
    return dict(groups)


def _rules(value: Any) -> dict[str, str]:
    rules = _object(value, "rules")
    packages = load_previous_packages()
    for rule_id, mode in rules.items():
        rule = find_rule(rule_id)
        if rule is None:
            raise bad_request(f"unknown WAF rule {rule_id!r}", pointer=f"/rules/{rule_id}")
        allowed = packages[rule.package_id].rule_modes
        if mode not in allowed:
            raise bad_request(
                f"the mode of rule {rule_id} must be one of {', '.join(allowed)}", pointer=f"/rules/{rule_id}"
            )
    return dict(rules)


def _rewrite_action(value: Any) -> dict[str, str]:
    rewrite = _object(value, "rewrite_action")
    for action, replacement in rewrite.items():
        if action not in _REWRITE_ACTIONS or replacement not in _REWRITE_ACTIONS:
            raise bad_request(
                f"rewrite_action maps one of {', '.join(_REWRITE_ACTIONS)} to another",
                pointer=f"/rewrite_action/{action}",
            )
    return dict(rewrite)


def list_overrides(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/firewall/waf/overrides``, by priority."""
    zone = previous_waf_zone(request)
    overrides = request.session.scalars(
        select(WafOverride).where(WafOverride.zone_id == zone.id).order_by(WafOverride.priority, WafOverride.id)
    ).all()
    page = paginate(list(overrides), request.query, default_per_page=50)
    page.result = [override_json(override) for override in page.result]
    return page


def get_override(request: ApiRequest) -> ApiResult:
    """``GET …/overrides/{override_id}``."""
    zone = previous_waf_zone(request)
    return ApiResult(override_json(_override(request, zone.id)))


def create_override(request: ApiRequest) -> ApiResult:
    """``POST …/overrides`` with ``urls`` and optional ``description``, ``priority``, ``paused``, ``groups``,
    ``rules``, ``rewrite_action``."""
    zone = previous_waf_zone(request, write=True)
    override = WafOverride(id=new_object_id(), zone_id=zone.id, created_on=utc_now())
    _apply(override, require_object(request.body))
    request.session.add(override)
    request.session.flush()
    return ApiResult(override_json(override), changed=True)


def update_override(request: ApiRequest) -> ApiResult:
    """``PUT …/overrides/{override_id}``: replaces the override (``id``, if given, must be the path's)."""
    zone = previous_waf_zone(request, write=True)
    override = _override(request, zone.id)
    body = require_object(request.body)
    if "id" in body and body["id"] != override.id:
        raise bad_request("id must be the id in the path", pointer="/id")
    _apply(override, body)
    return ApiResult(override_json(override), changed=True)


def delete_override(request: ApiRequest) -> ApiResult:
    """``DELETE …/overrides/{override_id}``: answers ``{id}``."""
    zone = previous_waf_zone(request, write=True)
    override = _override(request, zone.id)
    request.session.delete(override)
    return ApiResult({"id": override.id}, changed=True)


_BASE = "/zones/{zone_id}/firewall/waf/overrides"
_READ, _WRITE = path_read("zone_waf"), path_write("zone_waf")

ROUTES = [
    ApiRoute(_BASE, "GET", list_overrides, _READ),
    ApiRoute(_BASE, "POST", create_override, _WRITE),
    ApiRoute(_BASE + "/{override_id}", "GET", get_override, _READ),
    ApiRoute(_BASE + "/{override_id}", "PUT", update_override, _WRITE),
    ApiRoute(_BASE + "/{override_id}", "DELETE", delete_override, _WRITE),
]
