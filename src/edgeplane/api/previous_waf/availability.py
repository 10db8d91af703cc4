"""Where the previous managed-rules APIs answer: a zone the caller reaches whose migration has not finished.

After the migration to the ruleset-based WAF the previous version is gone for good, so its APIs (the ``waf``
setting, packages, groups, rules and URI-based overrides) answer HTTP 403 with code 10220; firewall rules and page
rules are not part of the previous WAF and keep working.
"""

from __future__ import annotations

from edgeplane.api.endpoint import ApiRequest
from edgeplane.api.errors import ApiError
from edgeplane.api.zones import visible_zone, writable_zone
from edgeplane.configuration.previous_waf import previous_waf_state
from edgeplane.store.models import Zone

MIGRATED_CODE = 10220


def migrated_error() -> ApiError:
    """HTTP 403, code 10220: the zone uses the ruleset-based WAF now."""
    return ApiError(
        403,
        MIGRATED_CODE,
        "the previous managed rules are no longer available: this zone was migrated to the ruleset-based WAF; "
        "use the Rulesets API (phase http_request_firewall_managed)",
    )


def previous_waf_zone(request: ApiRequest, *, write: bool = False) -> Zone:
    """The zone of the path when the caller reaches it (404 otherwise; 403 when ``write`` and it may only read it)
    and its previous WAF is still there (else ``migrated_error``)."""
    zone_id = request.path_params["zone_id"]
    zone = writable_zone(request, zone_id) if write else visible_zone(request, zone_id)
    if previous_waf_state(request.session, zone.id).migration_state == "complete":
        raise migrated_error()
    return zone
