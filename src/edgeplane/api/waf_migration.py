"""The migration of a zone from the previous managed rules to the ruleset-based WAF (seed 002):
``GET /zones/{zone_id}/waf_migration/check``, ``…/config``, ``…/status``, and the migration's part of the managed
entrypoint PUT (``put_managed_entrypoint``, called by the Rulesets API).

States: ``start`` (the previous version runs, as configured), ``validation`` (Enterprise: both run, the new one
first), ``complete`` (the previous version is disabled for good). ``phase_two=1`` selects phase 2 eligibility (every
zone without URI-based WAF overrides); without it phase 1's stricter rules apply.

Errors (HTTP 400 unless noted): 10221 zone not eligible (URI-based overrides, or phase 1 rules), 10222 migration
already finished, 10223 validation mode without an Enterprise plan, 10224 more than 200 firewall rules to migrate,
10225 a firewall rule expression over 4 KB, 10226 a Pro or Business zone enabling managed rulesets in the entrypoint
while the previous version is on, without ``waf_migration``; 1001 for a bad query parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from edgeplane.api.endpoint import ApiRequest, ApiResult, ApiRoute
from edgeplane.api.errors import ApiError, bad_request
from edgeplane.api.permissions import path_read
from edgeplane.api.timestamps import rfc3339
from edgeplane.api.zones import visible_zone
from edgeplane.configuration.previous_waf import load_configuration, previous_waf_state
from edgeplane.store.models import Zone, utc_now
from edgeplane.store.ruleset_models import entrypoint_rules
from edgeplane.waf.catalogue import MANAGED_PHASE, MANAGED_RULESET_ID, OWASP_RULESET_ID
from edgeplane.waf.previous import (
    MAX_MIGRATED_EXPRESSION_BYTES,
    MAX_MIGRATED_FIREWALL_RULES,
    FirewallExpressionTooLong,
    TooManyFirewallRules,
    ZoneConfiguration,
    has_uri_overrides,
    migration_compatible,
    migration_rules,
)

NOT_ELIGIBLE = 10221
ALREADY_COMPLETE = 10222
VALIDATION_NOT_ENTITLED = 10223
TOO_MANY_FIREWALL_RULES = 10224
EXPRESSION_TOO_LONG = 10225
MIGRATION_REQUIRED = 10226

_MODES: Mapping[str, str] = {"pending": "pending", "1": "pending", "validation": "validation", "2": "validation"}
_MANAGED_RULESETS = frozenset({MANAGED_RULESET_ID, OWASP_RULESET_ID})


def _phase_two(query: Mapping[str, str]) -> bool:
    value = query.get("phase_two")
    if value in (None, "", "0", "false"):
        return False
    if value in ("1", "true"):
        return True
    raise bad_request("phase_two must be 1 (phase 2 rules) or absent (phase 1 rules)", pointer="/phase_two")


def _eligibility_error(configuration: ZoneConfiguration, *, phase_two: bool) -> ApiError | None:
    """Why the zone cannot migrate now, or None."""
    if configuration.finished:
        return bad_request(
            "the zone already migrated to the ruleset-based WAF; a finished migration cannot be reversed",
            code=ALREADY_COMPLETE,
        )
    if has_uri_overrides(configuration):
        return bad_request(
            "the zone has URI-based WAF overrides: delete them (DELETE /zones/{zone_id}/firewall/waf/overrides/{id}) "
            "before migrating",
            code=NOT_ELIGIBLE,
        )
    if not migration_compatible(configuration, phase_two=phase_two):
        return bad_request(
            "the zone is not eligible in phase 1 (the core rule set is on, or firewall rules or page rules change the "
            "WAF); use phase_two=1",
            code=NOT_ELIGIBLE,
        )
    return None


def _new_configuration(configuration: ZoneConfiguration) -> list[dict[str, Any]]:
    """``migration_rules``, its limits answered as migration errors."""
    try:
        return migration_rules(configuration)
    except TooManyFirewallRules as error:
        raise bad_request(
            f"migration error: {error} ({MAX_MIGRATED_FIREWALL_RULES} at most); contact support",
            code=TOO_MANY_FIREWALL_RULES,
        ) from None
    except FirewallExpressionTooLong as error:
        raise bad_request(
            f"migration error: {error} ({MAX_MIGRATED_EXPRESSION_BYTES} bytes at most); contact support",
            code=EXPRESSION_TOO_LONG,
        ) from None


def check(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/waf_migration/check[?phase_two=1]``: ``{compatible, migration_state}``; compatible is
    false when the zone has URI-based WAF overrides, already finished, or (phase 1) breaks phase 1's rules."""
    zone = visible_zone(request, request.path_params["zone_id"])
    phase_two = _phase_two(request.query)
    configuration = load_configuration(request.session, zone.id)
    return ApiResult(
        {
            "compatible": migration_compatible(configuration, phase_two=phase_two),
            "migration_state": configuration.migration_state,
        }
    )


def config(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/waf_migration/config[?phase_two=1]``: ``{name: "default", rules}``, the new
    configuration equivalent to the previous one (ids, versions and refs empty). 400 when the zone cannot migrate
    or its firewall rules pass the migration's limits."""
    zone = visible_zone(request, request.path_params["zone_id"])
    phase_two = _phase_two(request.query)
    configuration = load_configuration(request.session, zone.id)
    error = _eligibility_error(configuration, phase_two=phase_two)
    if error is not None:
        raise error
    return ApiResult({"name": "default", "rules": _new_configuration(configuration)})


def status(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/waf_migration/status``: ``migration_state``, ``old_waf_status`` and
    ``new_waf_status`` (``enabled``/``disabled``), and when and how the state last changed (``created``,
    ``source``; null until it does)."""
    zone = visible_zone(request, request.path_params["zone_id"])
    state = previous_waf_state(request.session, zone.id)
    configuration = load_configuration(request.session, zone.id)
    old_enabled = not configuration.finished and configuration.setting == "on"
    return ApiResult(
        {
            "migration_state": state.migration_state,
            "old_waf_status": "enabled" if old_enabled else "disabled",
            "new_waf_status": "enabled" if _new_version_enabled(request, zone) else "disabled",
            "created": rfc3339(state.migration_modified_on),
            "source": state.migration_source,
        }
    )


def _new_version_enabled(request: ApiRequest, zone: Zone) -> bool:
    """Whether the zone's managed entrypoint executes a managed ruleset."""
    rules = entrypoint_rules(request.session, zone_id=zone.id, phase=MANAGED_PHASE)
    return any(_executes_managed_ruleset(rule) for rule in rules)


def _executes_managed_ruleset(rule: Any) -> bool:
    if not isinstance(rule, dict) or rule.get("action") != "execute" or rule.get("enabled", True) is False:
        return False
    parameters = rule.get("action_parameters")
    return isinstance(parameters, dict) and parameters.get("id") in _MANAGED_RULESETS


def put_managed_entrypoint(request: ApiRequest, zone: Zone, save: Callable[[ApiRequest], ApiResult]) -> ApiResult:
    """The zone's ``http_request_firewall_managed`` entrypoint PUT, through the migration: with
    ``waf_migration=pending|1`` the configuration is saved and the migration finishes (the previous version is
    disabled for good); with ``validation|2`` (Enterprise only) it is saved and both versions run. Without
    ``waf_migration``, a Pro or Business zone whose previous version is on may only save the managed rulesets
    disabled (10226); otherwise the PUT is just ``save``. Raises ``ApiError`` (400) for a zone that cannot migrate,
    a finished migration, a bad parameter, or the migration's limits; ``save``'s own errors pass through."""
    raw_mode = request.query.get("waf_migration")
    state = previous_waf_state(request.session, zone.id)
    if raw_mode is None or raw_mode == "":
        if zone.plan in ("pro", "business") and state.migration_state == "start" and state.setting == "on":
            _require_managed_rulesets_disabled(request.body)
        return save(request)
    mode = _MODES.get(raw_mode)
    if mode is None:
        raise bad_request("waf_migration must be pending (or 1) or validation (or 2)", pointer="/waf_migration")
    phase_two = _phase_two(request.query)
    configuration = load_configuration(request.session, zone.id)
    error = _eligibility_error(configuration, phase_two=phase_two)
    if error is not None:
        raise error
    if mode == "validation" and zone.plan != "enterprise":
        raise bad_request(
            "validation mode is for Enterprise zones; use waf_migration=pending to migrate",
            code=VALIDATION_NOT_ENTITLED,
        )
    _new_configuration(configuration)  # the migration's limits apply whatever the body holds
    result = save(request)
    state = previous_waf_state(request.session, zone.id, for_update=True)
    state.migration_state = "complete" if mode == "pending" else "validation"
    state.migration_modified_on = utc_now()
    state.migration_source = "api"
    if mode == "pending":
        state.setting = "off"
        state.setting_modified_on = state.migration_modified_on
    result.changed = True
    return result


def _require_managed_rulesets_disabled(body: Any) -> None:
    rules = body.get("rules") if isinstance(body, dict) else None
    if not isinstance(rules, list):
        return  # the Rulesets API answers a malformed body itself
    for index, rule in enumerate(rules):
        if _executes_managed_ruleset(rule):
            raise bad_request(
                "the previous managed rules are on for this zone: deploy managed rulesets through the migration "
                "(waf_migration=pending&phase_two=1), or save them disabled",
                code=MIGRATION_REQUIRED,
                pointer=f"/rules/{index}/enabled",
            )


_BASE = "/zones/{zone_id}/waf_migration"
_READ = path_read("zone_waf")
ROUTES: list[ApiRoute] = [
    ApiRoute(_BASE + "/check", "GET", check, _READ),
    ApiRoute(_BASE + "/config", "GET", config, _READ),
    ApiRoute(_BASE + "/status", "GET", status, _READ),
]
