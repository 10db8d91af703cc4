"""Zone settings and Instant Logs jobs through the official ``cloudflare`` SDK over SQLite and PostgreSQL: every
common setting reads, ``waf`` (the one edgeplane honours) edits, the others are refused with a coded error, and the
Instant Logs list answers while creating one is refused."""

from __future__ import annotations

import cloudflare
import pytest

from tests.api.conftest import Api
from tests.api.sdk_client import sdk_for

DASHBOARD_SETTINGS = [
    "always_online",
    "always_use_https",
    "automatic_https_rewrites",
    "brotli",
    "browser_cache_ttl",
    "browser_check",
    "cache_level",
    "challenge_ttl",
    "development_mode",
    "early_hints",
    "email_obfuscation",
    "hotlink_protection",
    "http2",
    "http3",
    "ip_geolocation",
    "ipv6",
    "max_upload",
    "min_tls_version",
    "opportunistic_encryption",
    "rocket_loader",
    "security_header",
    "security_level",
    "server_side_exclude",
    "ssl",
    "tls_1_3",
    "waf",
    "websockets",
    "0rtt",
]


def test_every_dashboard_setting_reads(api: Api) -> None:
    cf = sdk_for(api)
    zone_id = api.credentials["zone_id"]
    for setting_id in DASHBOARD_SETTINGS:
        setting = cf.zones.settings.get(setting_id, zone_id=zone_id)  # type: ignore[arg-type]
        assert setting is not None
        assert setting.id == setting_id
        assert setting.editable is (setting_id == "waf")
    listed = api.call("GET", f"/zones/{zone_id}/settings").json()["result"]
    assert sorted(setting["id"] for setting in listed) == sorted(DASHBOARD_SETTINGS)
    assert next(setting for setting in listed if setting["id"] == "ssl")["value"] == "off"


def test_the_waf_setting_edits_and_the_others_are_refused(api: Api) -> None:
    cf = sdk_for(api)
    zone_id = api.credentials["zone_id"]
    edited = cf.zones.settings.edit("waf", zone_id=zone_id, value="on")  # type: ignore[arg-type]
    assert edited is not None
    assert edited.value == "on"
    got = cf.zones.settings.get("waf", zone_id=zone_id)  # type: ignore[arg-type]
    assert got is not None
    assert got.value == "on"
    with pytest.raises(cloudflare.BadRequestError) as refused:
        cf.zones.settings.edit("ssl", zone_id=zone_id, value="strict")  # type: ignore[arg-type]
    error = refused.value.body["errors"][0]  # type: ignore[index]
    assert error["code"] == 1007
    assert "plain HTTP" in error["message"]
    with pytest.raises(cloudflare.NotFoundError):
        cf.zones.settings.get("no_such_setting", zone_id=zone_id)  # type: ignore[arg-type]


def test_bulk_edit_is_all_or_nothing(api: Api) -> None:
    path = f"/zones/{api.credentials['zone_id']}/settings"
    answer = api.call("PATCH", path, json={"items": [{"id": "waf", "value": "on"}]}).json()
    assert answer["result"][0]["value"] == "on"
    refused = api.call("PATCH", path, json={"items": [{"id": "waf", "value": "off"}, {"id": "brotli", "value": "on"}]})
    assert refused.status_code == 400
    assert (refused.json()["errors"][0]["code"], refused.json()["errors"][0]["source"]["pointer"]) == (
        1007,
        "/items/1/value",
    )
    unknown = api.call("PATCH", path, json={"items": [{"id": "nope", "value": "on"}]}).json()["errors"][0]
    assert (unknown["code"], unknown["source"]["pointer"]) == (1006, "/items/0/id")
    assert api.call("GET", path + "/waf").json()["result"]["value"] == "on"  # the refused request changed nothing


def test_settings_need_zone_settings_permissions(api: Api) -> None:
    zone_id = api.credentials["zone_id"]
    created = api.call(
        "POST",
        "/user/tokens",
        json={
            "name": "zone-read-only",
            "policies": [
                {
                    "effect": "allow",
                    "resources": {f"com.cloudflare.api.account.zone.{zone_id}": "*"},
                    "permission_groups": [{"id": "c8fed203ed3043cba015a93ad1616f1f"}],  # Zone Read
                }
            ],
        },
    ).json()["result"]
    cf = sdk_for(api, token=created["value"])
    with pytest.raises(cloudflare.PermissionDeniedError):
        cf.zones.settings.get("ssl", zone_id=zone_id)  # type: ignore[arg-type]


def test_instant_logs_jobs(api: Api) -> None:
    cf = sdk_for(api)
    zone_id = api.credentials["zone_id"]
    assert list(cf.logpush.edge.get(zone_id=zone_id)) == []
    with pytest.raises(cloudflare.BadRequestError) as refused:
        cf.logpush.edge.create(zone_id=zone_id, fields="RayID,ClientIP", sample=1)
    assert refused.value.body["errors"][0]["code"] == 1010  # type: ignore[index]
