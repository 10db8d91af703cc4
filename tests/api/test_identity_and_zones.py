"""Identity, zones and web3 hostnames through the v4 API, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api


def envelope_error(response: object) -> tuple[int, list[int]]:
    body = response.json()  # type: ignore[attr-defined]
    assert body["success"] is False
    assert body["result"] is None
    return response.status_code, [error["code"] for error in body["errors"]]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({}, 401, 10000),
        ({"Authorization": "Bearer short"}, 400, 6003),
        ({"Authorization": "Basic " + "a" * 40}, 400, 6003),
        ({"Authorization": "Bearer " + "a" * 40}, 401, 1000),
        ({"X-Auth-Email": "admin@edgeplane.localhost", "X-Auth-Key": "0" * 37}, 403, 9103),
        ({"X-Auth-Email": "nobody@example.com"}, 400, 6003),
        ({"X-Auth-Email": "admin@edgeplane.localhost", "X-Auth-Key": "xyz"}, 400, 6003),
    ],
)
def test_bad_credentials(api: Api, headers: dict[str, str], status: int, code: int) -> None:
    response = api.call("GET", "/zones", headers=headers or {"X-Other": "1"})
    got_status, codes = envelope_error(response)
    assert got_status == status
    assert codes[0] == code


def test_both_schemes_see_the_bootstrap_zone(api: Api) -> None:
    for headers in (api.token_headers, api.key_headers):
        body = api.call("GET", "/zones", headers=headers).json()
        assert body["success"] is True
        assert [zone["name"] for zone in body["result"]] == ["localhost"]
        assert body["result"][0]["id"] == api.credentials["zone_id"]
        assert body["result_info"]["total_pages"] == 1
    verify = api.call("GET", "/user/tokens/verify").json()
    assert verify["result"]["status"] == "active"


def test_zone_lifecycle_and_pagination(api: Api) -> None:
    account = {"id": api.credentials["account_id"]}
    created = api.call("POST", "/zones", json={"name": "Example.COM", "account": account}).json()
    assert created["success"] is True
    zone = created["result"]
    assert zone["name"] == "example.com"
    assert zone["plan"]["legacy_id"] == "free"
    assert len(zone["id"]) == 32
    assert api.changes
    duplicate = api.call("POST", "/zones", json={"name": "example.com", "account": account})
    assert envelope_error(duplicate) == (409, [1061])
    for name in ("a.example.org", "b.example.org"):
        api.call("POST", "/zones", json={"name": name, "account": account})
    page1 = api.call("GET", "/zones?per_page=2&page=1").json()
    assert len(page1["result"]) == 2
    assert page1["result_info"] == {"page": 1, "per_page": 2, "count": 2, "total_count": 4, "total_pages": 2}
    beyond = api.call("GET", "/zones?per_page=2&page=9").json()
    assert beyond["result"] == []
    assert api.call("GET", "/zones?name=example.com").json()["result"][0]["id"] == zone["id"]
    patched = api.call("PATCH", f"/zones/{zone['id']}", json={"plan": {"id": "pro"}}).json()
    assert patched["result"]["plan"]["legacy_id"] == "pro"
    assert api.call("DELETE", f"/zones/{zone['id']}").json()["result"] == {"id": zone["id"]}
    assert envelope_error(api.call("GET", f"/zones/{zone['id']}")) == (404, [7003])


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"name": "no_dots", "account": {"id": "x"}}, "/name"),
        ({"name": "ok.example", "account": {"id": "f" * 32}}, "/account/id"),
        ({"name": "ok.example", "account": None}, "/account/id"),
        ({"name": "ok.example", "account": {"id": "ACCOUNT"}, "colour": "red"}, "/colour"),
    ],
)
def test_zone_validation(api: Api, body: dict[str, object], pointer: str) -> None:
    if isinstance(body.get("account"), dict) and body["account"].get("id") == "ACCOUNT":  # type: ignore[union-attr]
        body = {**body, "account": {"id": api.credentials["account_id"]}}
    response = api.call("POST", "/zones", json=body)
    assert response.status_code == 400
    assert response.json()["errors"][0]["source"]["pointer"] == pointer


def test_malformed_json_and_unknown_paths(api: Api) -> None:
    response = api.call(
        "POST", "/zones", content=b"{nope", headers={**api.token_headers, "content-type": "application/json"}
    )
    assert envelope_error(response) == (400, [6007])
    assert envelope_error(api.call("GET", "/nothing/here")) == (404, [7003])
    assert envelope_error(api.call("GET", "/zones/" + "0" * 32)) == (404, [7003])
    assert envelope_error(api.call("GET", "/zones/not-an-id")) == (404, [7003])


def test_token_scoped_to_one_zone(api: Api) -> None:
    account = {"id": api.credentials["account_id"]}
    other = api.call("POST", "/zones", json={"name": "other.example", "account": account}).json()["result"]
    mine = api.credentials["zone_id"]
    created = api.call(
        "POST",
        "/user/tokens",
        json={
            "name": "one zone, read only",
            "policies": [
                {
                    "effect": "allow",
                    "resources": {f"com.cloudflare.api.account.zone.{mine}": "*"},
                    "permission_groups": [{"id": "x", "name": "Zone Read"}],
                }
            ],
        },
    ).json()["result"]
    assert len(created["value"]) == 40
    scoped = {"Authorization": f"Bearer {created['value']}"}
    assert [z["id"] for z in api.call("GET", "/zones", headers=scoped).json()["result"]] == [mine]
    assert api.call("GET", f"/zones/{mine}", headers=scoped).json()["success"] is True
    assert envelope_error(api.call("GET", f"/zones/{other['id']}", headers=scoped)) == (404, [7003])
    assert envelope_error(api.call("PATCH", f"/zones/{mine}", headers=scoped, json={"paused": True})) == (403, [10000])
    listed = api.call("GET", "/user/tokens").json()["result"]
    assert all("value" not in token for token in listed)
    assert api.call("DELETE", f"/user/tokens/{created['id']}").json()["result"] == {"id": created["id"]}
    assert envelope_error(api.call("GET", "/zones", headers=scoped))[0] == 401


def test_token_cannot_name_foreign_objects(api: Api) -> None:
    response = api.call(
        "POST",
        "/user/tokens",
        json={
            "name": "x",
            "policies": [{"effect": "allow", "resources": {"com.cloudflare.api.account.zone." + "e" * 32: "*"}}],
        },
    )
    assert response.status_code == 400


def test_web3_hostnames(api: Api) -> None:
    zone_id = api.credentials["zone_id"]
    listed = api.call("GET", f"/zones/{zone_id}/web3/hostnames").json()["result"]
    assert sorted(h["name"] for h in listed) == ["127.0.0.1", "localhost"]
    created = api.call(
        "POST",
        f"/zones/{zone_id}/web3/hostnames",
        json={"name": "eth.localhost", "target": "ethereum", "description": "rpc"},
    ).json()
    assert created["success"] is True, created
    hostname = created["result"]
    assert hostname["target"] == "ethereum"
    assert hostname["status"] == "active"
    edited = api.call("PATCH", f"/zones/{zone_id}/web3/hostnames/{hostname['id']}", json={"description": "main"}).json()
    assert edited["result"]["description"] == "main"
    for body, pointer in (
        ({"name": "eth.example.com", "target": "ethereum"}, "/name"),
        ({"name": "ipfs.localhost", "target": "ipfs"}, "/target"),
        ({"name": "x.localhost", "target": "bitcoin"}, "/target"),
    ):
        response = api.call("POST", f"/zones/{zone_id}/web3/hostnames", json=body)
        assert response.status_code == 400
        assert response.json()["errors"][0]["source"]["pointer"] == pointer
    assert (
        api.call("DELETE", f"/zones/{zone_id}/web3/hostnames/{hostname['id']}").json()["result"]["id"] == hostname["id"]
    )


def test_accounts(api: Api) -> None:
    accounts = api.call("GET", "/accounts").json()["result"]
    assert [a["id"] for a in accounts] == [api.credentials["account_id"]]
    assert envelope_error(api.call("GET", "/accounts/" + "1" * 32)) == (404, [7003])
