"""The zone setting of the previous managed rules: ``GET|PATCH /zones/{zone_id}/settings/waf``."""

from __future__ import annotations

from typing import Any

from edgeplane.api.endpoint import ApiRequest, ApiResult, ApiRoute, reject_unknown, require_object
from edgeplane.api.errors import bad_request
from edgeplane.api.permissions import path_read, path_write
from edgeplane.api.previous_waf.availability import previous_waf_zone
from edgeplane.api.timestamps import rfc3339
from edgeplane.configuration.previous_waf import previous_waf_state
from edgeplane.store.models import utc_now
from edgeplane.store.previous_waf_models import PreviousWaf


def setting_json(state: PreviousWaf) -> dict[str, Any]:
    """The ``waf`` zone setting in the v4 shape."""
    return {"id": "waf", "value": state.setting, "editable": True, "modified_on": rfc3339(state.setting_modified_on)}


def get_waf_setting(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/settings/waf``: ``off`` until switched on."""
    zone = previous_waf_zone(request)
    return ApiResult(setting_json(previous_waf_state(request.session, zone.id)))


def edit_waf_setting(request: ApiRequest) -> ApiResult:
    """``PATCH /zones/{zone_id}/settings/waf`` with ``{"value": "on"|"off"}``; 400 for anything else."""
    zone = previous_waf_zone(request, write=True)
    body = require_object(request.body)
    reject_unknown(body, {"value"})
    return ApiResult(set_waf_setting(request, zone.id, body.get("value"), "/value"), changed=True)


def set_waf_setting(request: ApiRequest, zone_id: str, value: Any, pointer: str) -> dict[str, Any]:
    """Stores ``value`` (``on`` or ``off``, else a 400 at ``pointer``) as the zone's ``waf`` setting; answers the
    setting. The caller has checked that the zone's previous WAF is there and that it may change it."""
    if value not in ("on", "off"):
        raise bad_request('value must be "on" or "off"', pointer=pointer)
    state = previous_waf_state(request.session, zone_id, for_update=True)
    state.setting = value
    state.setting_modified_on = utc_now()
    return setting_json(state)


_READ, _WRITE = path_read("zone_settings"), path_write("zone_settings")

ROUTES = [
    ApiRoute("/zones/{zone_id}/settings/waf", "GET", get_waf_setting, _READ),
    ApiRoute("/zones/{zone_id}/settings/waf", "PATCH", edit_waf_setting, _WRITE),
]
