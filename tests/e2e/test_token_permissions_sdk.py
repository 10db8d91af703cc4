"""API token permissions through the official `cloudflare` SDK, unmodified, against a running `edgeplane serve`:
permission groups looked up by name (as infrastructure-as-code tools do), tokens made from their ids, what those
tokens may and may not do, and the refusals the SDK turns into exceptions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import cloudflare
import pytest
from cloudflare import Cloudflare

from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    with EdgeplaneProcess(tmp_path_factory.mktemp("token-sdk") / "data") as process:
        yield process


def client(service: EdgeplaneProcess, **auth: str) -> Cloudflare:
    return Cloudflare(base_url=f"{service.api_url}/client/v4", max_retries=0, **auth)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def admin(service: EdgeplaneProcess) -> Cloudflare:
    return client(service, api_token=service.credentials["api_token"])


def group_id(sdk: Cloudflare, name: str, scope: str) -> str:
    found = list(sdk.user.tokens.permission_groups.list(name=name, scope=scope))
    assert len(found) == 1, found
    assert found[0].id is not None
    return found[0].id


def test_permission_groups_are_looked_up_by_name_and_scope(admin: Cloudflare) -> None:
    everything = list(admin.user.tokens.permission_groups.list())
    names = {group.name for group in everything}
    assert {"Zone Read", "Zone Write", "Logs Read", "Logs Write", "API Tokens Read", "API Tokens Write"} <= names
    assert group_id(admin, "Zone Read", "com.cloudflare.api.account.zone") == "c8fed203ed3043cba015a93ad1616f1f"
    zone_logs = group_id(admin, "Logs Write", "com.cloudflare.api.account.zone")
    account_logs = group_id(admin, "Logs Write", "com.cloudflare.api.account")
    assert zone_logs != account_logs


def test_a_token_made_from_group_ids_binds(admin: Cloudflare, service: EdgeplaneProcess) -> None:
    credentials: dict[str, Any] = service.credentials
    zone_id = credentials["zone_id"]
    other = admin.zones.create(account={"id": credentials["account_id"]}, name="sdk-other.example")
    assert other is not None
    created = admin.user.tokens.create(
        name="read localhost",
        policies=[
            {
                "effect": "allow",
                "resources": {f"com.cloudflare.api.account.zone.{zone_id}": "*"},
                "permission_groups": [{"id": group_id(admin, "Zone Read", "com.cloudflare.api.account.zone")}],
            }
        ],
    )
    assert created is not None
    assert created.value is not None
    reader = client(service, api_token=created.value)
    assert [zone.id for zone in reader.zones.list()] == [zone_id]
    assert reader.zones.get(zone_id=zone_id) is not None
    with pytest.raises(cloudflare.PermissionDeniedError):
        reader.zones.edit(zone_id=zone_id, paused=True)
    with pytest.raises(cloudflare.NotFoundError):
        reader.zones.get(zone_id=other.id)
    # Token management is its own permission: this token may neither list nor delete tokens.
    with pytest.raises(cloudflare.PermissionDeniedError):
        list(reader.user.tokens.list())
    with pytest.raises(cloudflare.PermissionDeniedError):
        reader.user.tokens.delete(created.id or "")
    verified = reader.user.tokens.verify()
    assert verified is not None
    assert verified.status == "active"
    admin.user.tokens.delete(created.id or "")
    with pytest.raises(cloudflare.AuthenticationError):
        list(reader.zones.list())
    admin.zones.delete(zone_id=other.id)


def test_a_token_cannot_mint_a_wider_one(admin: Cloudflare, service: EdgeplaneProcess) -> None:
    credentials: dict[str, Any] = service.credentials
    user_resource = next(
        key
        for token in admin.user.tokens.list()
        for policy in token.policies or []
        for key in policy.resources
        if key.startswith("com.cloudflare.api.user.")
    )
    minter = admin.user.tokens.create(
        name="minter",
        policies=[
            {
                "effect": "allow",
                "resources": {user_resource: "*"},
                "permission_groups": [{"id": group_id(admin, "API Tokens Write", "com.cloudflare.api.user")}],
            },
            {
                "effect": "allow",
                "resources": {f"com.cloudflare.api.account.zone.{credentials['zone_id']}": "*"},
                "permission_groups": [{"id": group_id(admin, "Zone Read", "com.cloudflare.api.account.zone")}],
            },
        ],
    )
    assert minter is not None
    assert minter.value is not None
    narrow = client(service, api_token=minter.value)
    with pytest.raises(cloudflare.PermissionDeniedError):
        narrow.user.tokens.create(
            name="wider",
            policies=[
                {
                    "effect": "allow",
                    "resources": {f"com.cloudflare.api.account.{credentials['account_id']}": "*"},
                    "permission_groups": [{"id": group_id(admin, "Zone Write", "com.cloudflare.api.account.zone")}],
                }
            ],
        )
    with pytest.raises(cloudflare.BadRequestError):
        narrow.user.tokens.create(
            name="conditional",
            policies=[
                {
                    "effect": "allow",
                    "resources": {f"com.cloudflare.api.account.zone.{credentials['zone_id']}": "*"},
                    "permission_groups": [{"id": group_id(admin, "Zone Read", "com.cloudflare.api.account.zone")}],
                }
            ],
            condition={"request_ip": {"in": ["192.0.2.0/24"]}},
        )
    same = narrow.user.tokens.create(
        name="as narrow",
        policies=[
            {
                "effect": "allow",
                "resources": {f"com.cloudflare.api.account.zone.{credentials['zone_id']}": "*"},
                "permission_groups": [{"id": group_id(admin, "Zone Read", "com.cloudflare.api.account.zone")}],
            }
        ],
    )
    assert same is not None
