"""Zone settings: ``GET|PATCH /zones/{zone_id}/settings`` and ``GET|PATCH /zones/{zone_id}/settings/{setting_id}``.

Every common setting the dashboard shows can be read, with the value that says what edgeplane's edge does
(``zone_settings.toml``); those edgeplane does not implement are not editable, and a change to one is refused
(400, code 1007, naming why) rather than stored and ignored. The ``waf`` setting of the previous managed WAF is the
one editable setting: its own routes (``previous_waf.settings``) serve it, and the list and the bulk edit here
include it while the zone's previous WAF is there. An unknown setting is a 404 at its own path and a 400 (code
1006) in a bulk edit.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from edgeplane.api.endpoint import ApiRequest, ApiResult, ApiRoute, reject_unknown, require_object
from edgeplane.api.errors import ApiError, bad_request, not_found
from edgeplane.api.permissions import path_read, path_write
from edgeplane.api.previous_waf.settings import set_waf_setting, setting_json
from edgeplane.api.zones import visible_zone, writable_zone
from edgeplane.configuration.previous_waf import previous_waf_state

NOT_EDITABLE = 1007
UNKNOWN_SETTING = 1006
WAF_SETTING = "waf"


@dataclass(frozen=True, slots=True)
class FixedSetting:
    """A setting edgeplane reports but does not let change: its value, and why it cannot change."""

    id: str
    value: Any
    why: str

    def json(self) -> dict[str, Any]:
        """The setting in the v4 shape."""
        return {"id": self.id, "value": self.value, "editable": False, "modified_on": None}

    def refusal(self, pointer: str | None = None) -> ApiError:
        """The 400 for a change of this setting."""
        return bad_request(f"setting {self.id} cannot be changed: {self.why}", code=NOT_EDITABLE, pointer=pointer)


@cache
def fixed_settings() -> dict[str, FixedSetting]:
    """The settings of ``zone_settings.toml``, by id."""
    text = resources.files(__package__ or "edgeplane.api").joinpath("zone_settings.toml").read_text("utf-8")
    entries = tomllib.loads(text)["setting"]
    return {str(entry["id"]): FixedSetting(str(entry["id"]), entry["value"], str(entry["why"])) for entry in entries}


def _waf_available(request: ApiRequest, zone_id: str) -> bool:
    """Whether the zone still has the previous WAF (and so its ``waf`` setting)."""
    return previous_waf_state(request.session, zone_id).migration_state != "complete"


def list_settings(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/settings``: every setting, sorted by id."""
    zone = visible_zone(request, request.path_params["zone_id"])
    found = [setting.json() for setting in fixed_settings().values()]
    if _waf_available(request, zone.id):
        found.append(setting_json(previous_waf_state(request.session, zone.id)))
    return ApiResult(sorted(found, key=lambda setting: str(setting["id"])))


def get_setting(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/settings/{setting_id}``; 404 for a setting edgeplane does not know."""
    visible_zone(request, request.path_params["zone_id"])
    setting = fixed_settings().get(request.path_params["setting_id"])
    if setting is None:
        raise not_found(request.path)
    return ApiResult(setting.json())


def edit_setting(request: ApiRequest) -> ApiResult:
    """``PATCH /zones/{zone_id}/settings/{setting_id}``: refused (1007) for every setting served here."""
    writable_zone(request, request.path_params["zone_id"])
    setting = fixed_settings().get(request.path_params["setting_id"])
    if setting is None:
        raise not_found(request.path)
    reject_unknown(require_object(request.body), {"value"})
    raise setting.refusal("/value")


def edit_settings(request: ApiRequest) -> ApiResult:
    """``PATCH /zones/{zone_id}/settings`` with ``{"items": [{"id", "value"}, ...]}``: all or nothing; answers the
    settings changed. Only ``waf`` may change (while the previous WAF is there)."""
    zone = writable_zone(request, request.path_params["zone_id"])
    body = require_object(request.body)
    reject_unknown(body, {"items"})
    items = body.get("items")
    if not isinstance(items, list) or not items:
        raise bad_request("items must be a non-empty array of {id, value}", pointer="/items")
    changes: list[tuple[int, Any]] = []
    for index, item in enumerate(items):
        pointer = f"/items/{index}"
        if not isinstance(item, dict):
            raise bad_request("an item must be an object {id, value}", pointer=pointer)
        reject_unknown(item, {"id", "value"})
        setting_id = item.get("id")
        if setting_id == WAF_SETTING and _waf_available(request, zone.id):
            changes.append((index, item.get("value")))
            continue
        fixed = fixed_settings().get(setting_id) if isinstance(setting_id, str) else None
        if fixed is None:
            raise bad_request(f"unknown setting {setting_id!r}", code=UNKNOWN_SETTING, pointer=f"{pointer}/id")
        raise fixed.refusal(f"{pointer}/value")
    changed = [set_waf_setting(request, zone.id, value, f"/items/{index}/value") for index, value in changes]
    return ApiResult(changed, changed=True)


_READ, _WRITE = path_read("zone_settings"), path_write("zone_settings")

# After the ``waf`` setting's own routes in the table: a path naming ``waf`` is theirs.
ROUTES = [
    ApiRoute("/zones/{zone_id}/settings", "GET", list_settings, _READ),
    ApiRoute("/zones/{zone_id}/settings", "PATCH", edit_settings, _WRITE),
    ApiRoute("/zones/{zone_id}/settings/{setting_id}", "GET", get_setting, _READ),
    ApiRoute("/zones/{zone_id}/settings/{setting_id}", "PATCH", edit_setting, _WRITE),
]
