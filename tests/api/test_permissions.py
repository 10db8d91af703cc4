"""The permission model of API tokens, as a table: every control-plane route by every kind of caller.

The route list comes from the application itself, so a route added without a permission entry fails here. Each
route is called on the bootstrap zone (A), on another zone of the account (B) and on the account, as the path
allows, and the answer must be what the caller's policies say: 200 when they allow the route's permission there,
403 (code 10000) when the caller reaches the object but lacks the permission, 404 (code 7003) when it reaches
nothing there, 401 for a token that is no longer valid.

The exact decision is checked with every handler replaced by a stub (the endpoint's check alone); the real handlers
are then checked to agree with it (they never refuse what the table allows, nor allow what it refuses).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from edgeplane.api.asgi import V4, build_api_app, unrouted, v4_table
from edgeplane.api.credentials import new_api_token, new_object_id, secret_hash
from edgeplane.api.endpoint import ApiRequest, ApiResult, ApiRoute, ControlPlane
from edgeplane.api.permissions import (
    ACCOUNT_SCOPE,
    USER_SCOPE,
    ZONE_SCOPE,
    Access,
    On,
    PermissionGroup,
    permission_catalogue,
)
from edgeplane.bootstrap import ensure_bootstrap
from edgeplane.store.database import Database, default_database_url
from edgeplane.store.models import ApiToken

READ, WRITE = "read", "write"


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    """SQLite only: the decision does not depend on the database, and the table is large."""
    database = Database(default_database_url(tmp_path))
    database.migrate()
    yield database
    database.close()


@dataclass
class World:
    """The bootstrap identity, a second zone, and two clients: the real control plane and one whose handlers are
    stubs (so that an answer is the permission check's alone)."""

    real: TestClient
    stubbed: TestClient
    database: Database
    credentials: dict[str, Any]
    zone_b: str

    @property
    def bootstrap(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.credentials['api_token']}"}

    @property
    def global_key(self) -> dict[str, str]:
        return {"X-Auth-Email": self.credentials["email"], "X-Auth-Key": self.credentials["api_key"]}

    def token(self, policies: list[dict[str, Any]], headers: dict[str, str] | None = None) -> dict[str, str]:
        response = self.real.post(
            V4 + "/user/tokens", json={"name": "t", "policies": policies}, headers=headers or self.bootstrap
        )
        body = response.json()
        assert body["success"], body
        return {"Authorization": f"Bearer {body['result']['value']}"}

    def stored_token(self, policies: list[dict[str, Any]], *, status: str = "active") -> dict[str, str]:
        """A token written straight to the database, as an older version may have stored it."""
        value = new_api_token()
        with self.database.session() as session:
            user_id = session.get(ApiToken, self.bootstrap_token_id()).user_id  # type: ignore[union-attr]
            session.add(
                ApiToken(
                    id=new_object_id(),
                    user_id=user_id,
                    name="stored",
                    value_hash=secret_hash(value),
                    status=status,
                    policies=policies,
                )
            )
        return {"Authorization": f"Bearer {value}"}

    def bootstrap_token_id(self) -> str:
        verified = self.real.get(V4 + "/user/tokens/verify", headers=self.bootstrap).json()
        return str(verified["result"]["id"])

    def user_id(self) -> str:
        listed = self.real.get(V4 + "/user/tokens", headers=self.bootstrap).json()["result"]
        for policy in listed[0]["policies"]:
            for key in policy["resources"]:
                if key.startswith(USER_SCOPE + "."):
                    return str(key[len(USER_SCOPE) + 1 :])
        raise AssertionError("the bootstrap token names no user")


def _stub(request: ApiRequest) -> ApiResult:
    return ApiResult({"ran": True})


@pytest.fixture
def world(database: Database, tmp_path: Path) -> Iterator[World]:
    ensure_bootstrap(tmp_path, database)
    credentials = json.loads((tmp_path / "credentials.json").read_text())
    plane = ControlPlane(database, secret=b"test-secret")
    stubbed_app = Starlette(
        routes=[Route(V4 + r.path, plane.endpoint(_stub, r.access), methods=[r.method]) for r in v4_table(plane)]
    )
    with TestClient(build_api_app(plane)) as real, TestClient(stubbed_app) as stubbed:
        headers = {"Authorization": f"Bearer {credentials['api_token']}"}
        created = real.post(
            V4 + "/zones", json={"name": "b.example", "account": {"id": credentials["account_id"]}}, headers=headers
        ).json()
        assert created["success"], created
        yield World(real, stubbed, database, credentials, created["result"]["id"])


# ---- the routes ----

_PARAMETER = re.compile(r"\{(\w+)\}")
_SAMPLE = {"job_id": "999999", "dataset": "http_requests", "phase": "http_request_firewall_custom", "version": "1"}


def all_routes() -> list[ApiRoute]:
    return v4_table(ControlPlane(Database("sqlite://"), secret=b"x"))


def test_every_served_route_has_a_permission_entry(world: World) -> None:
    app = build_api_app(ControlPlane(world.database, secret=b"x"))
    served = {
        (route.path, method)
        for route in app.router.routes
        if isinstance(route, Route) and route.path.startswith(V4) and route.endpoint is not unrouted
        for method in (route.methods or set()) - {"HEAD"}
    }
    declared = {(V4 + route.path, route.method) for route in all_routes()}
    assert served == declared
    families = permission_catalogue().families
    for route in all_routes():
        assert route.access.permission is None or route.access.permission.family in families, route
        if route.method != "GET" and route.access.permission is not None:
            assert route.access.permission.access is Access.WRITE or route.path.endswith(("/validate/origin",)), (
                f"{route.method} {route.path} changes state but needs only {route.access}"
            )


def concrete(route: ApiRoute, world: World, where: str) -> str:
    """The route's path on zone A, zone B or the account (``where``)."""
    ids = {"zone_id": world.credentials["zone_id"] if where == "A" else world.zone_b}
    ids["account_id"] = world.credentials["account_id"]

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        return ids.get(name) or _SAMPLE.get(name) or "0" * 32

    return V4 + _PARAMETER.sub(value, route.path)


def places(route: ApiRoute) -> list[str]:
    if "{zone_id}" in route.path:
        return ["A", "B"]
    if "{account_id}" in route.path:
        return ["account"]
    return ["user"] if route.access.on is On.USER else []


# ---- the callers ----


def groups(*, scopes: set[str], access: str | None = None) -> list[PermissionGroup]:
    return [
        g
        for g in permission_catalogue().groups
        if g.scopes & scopes and (access is None or g.permission.access.value == access)
    ]


def writing(*, scopes: set[str]) -> list[PermissionGroup]:
    """The groups of ``scopes`` that write, and the read groups of the families no group writes (Analytics Read):
    what a caller allowed to write everything there is given."""
    written = {g.permission.family for g in groups(scopes=scopes, access=WRITE)}
    return groups(scopes=scopes, access=WRITE) + [
        g for g in groups(scopes=scopes, access=READ) if g.permission.family not in written
    ]


def by_id(chosen: list[PermissionGroup]) -> list[dict[str, str]]:
    return [{"id": g.id} for g in chosen]


def by_name(chosen: list[PermissionGroup]) -> list[dict[str, str]]:
    names = sorted({g.name for g in chosen})
    return [{"name": name.replace(" Write", " Edit")} for name in names]  # the dashboard's word, accepted too


ACCOUNT_AND_ZONES = {ACCOUNT_SCOPE, ZONE_SCOPE}


@dataclass(frozen=True)
class Caller:
    """A kind of caller, and the access it has: at zone A, zone B, the account and the user (None: none at all)."""

    name: str
    access: dict[str, str | None]
    zones_of_account: bool = False  # holds something on every zone of the account: it sees the account

    @property
    def sees_account(self) -> bool:
        return self.access["account"] is not None or self.zones_of_account


CALLERS = [
    Caller("global key", {"A": WRITE, "B": WRITE, "account": WRITE, "user": WRITE}),
    Caller("bootstrap token", {"A": WRITE, "B": WRITE, "account": WRITE, "user": WRITE}),
    Caller("account read", {"A": READ, "B": READ, "account": READ, "user": None}),
    Caller("account write", {"A": WRITE, "B": WRITE, "account": WRITE, "user": None}),
    Caller("zone A read", {"A": READ, "B": None, "account": None, "user": None}),
    Caller("zone A write", {"A": WRITE, "B": None, "account": None, "user": None}),
    Caller("all zones write", {"A": WRITE, "B": WRITE, "account": None, "user": None}, zones_of_account=True),
    Caller("account write, deny zone B", {"A": WRITE, "B": None, "account": WRITE, "user": None}),
    Caller("account write, deny writing zone B", {"A": WRITE, "B": READ, "account": WRITE, "user": None}),
    Caller("tokens read", {"A": None, "B": None, "account": None, "user": READ}),
    Caller("tokens write", {"A": None, "B": None, "account": None, "user": WRITE}),
    Caller("stored with no permission groups", {"A": None, "B": None, "account": None, "user": None}),
    Caller("stored with unknown groups", {"A": None, "B": None, "account": None, "user": None}),
]


def headers_for(caller: Caller, world: World) -> dict[str, str]:
    account = {f"{ACCOUNT_SCOPE}.{world.credentials['account_id']}": "*"}
    zone_a = {f"{ZONE_SCOPE}.{world.credentials['zone_id']}": "*"}
    zone_b = {f"{ZONE_SCOPE}.{world.zone_b}": "*"}
    user = {f"{USER_SCOPE}.{world.user_id()}": "*"}
    zones_only = {f"{ACCOUNT_SCOPE}.{world.credentials['account_id']}": {f"{ZONE_SCOPE}.*": "*"}}
    zone_groups = {ZONE_SCOPE}

    def allow(resources: dict[str, Any], chosen: list[dict[str, str]]) -> dict[str, Any]:
        return {"effect": "allow", "resources": resources, "permission_groups": chosen}

    def deny(resources: dict[str, Any], chosen: list[dict[str, str]]) -> dict[str, Any]:
        return {"effect": "deny", "resources": resources, "permission_groups": chosen}

    match caller.name:
        case "global key":
            return world.global_key
        case "bootstrap token":
            return world.bootstrap
        case "account read":
            return world.token([allow(account, by_id(groups(scopes=ACCOUNT_AND_ZONES, access=READ)))])
        case "account write":
            return world.token([allow(account, by_name(writing(scopes=ACCOUNT_AND_ZONES)))])
        case "zone A read":
            return world.token([allow(zone_a, by_id(groups(scopes=zone_groups, access=READ)))])
        case "zone A write":
            return world.token([allow(zone_a, by_name(writing(scopes=zone_groups)))])
        case "all zones write":
            return world.token([allow(zones_only, by_id(writing(scopes=zone_groups)))])
        case "account write, deny zone B":
            # The deny comes first and last: order does not matter.
            denied = deny(zone_b, by_id(groups(scopes=zone_groups, access=READ)))
            return world.token([denied, allow(account, by_id(writing(scopes=ACCOUNT_AND_ZONES))), denied])
        case "account write, deny writing zone B":
            return world.token(
                [
                    allow(account, by_id(writing(scopes=ACCOUNT_AND_ZONES))),
                    deny(zone_b, by_id(groups(scopes=zone_groups, access=WRITE))),
                ]
            )
        case "tokens read":
            return world.token([allow(user, by_name(groups(scopes={USER_SCOPE}, access=READ)))])
        case "tokens write":
            return world.token([allow(user, by_id(groups(scopes={USER_SCOPE}, access=WRITE)))])
        case "stored with no permission groups":
            return world.stored_token([allow(account, []), allow(user, [])])
        case "stored with unknown groups":
            return world.stored_token([allow(account, [{"id": "bootstrap", "name": "All permissions"}])])
    raise AssertionError(caller.name)


def expected(caller: Caller, route: ApiRoute, where: str) -> int:
    permission = route.access.permission
    assert permission is not None
    held = caller.access[where]
    if held is None and where in ("A", "B"):
        return 404
    if held is None and where == "account" and not caller.sees_account:
        return 404
    if held == WRITE or (held == READ and permission.access is Access.READ):
        return 200
    return 403


def outcome(response: Any) -> int:
    body = response.json()
    if response.status_code == 200:
        assert body["success"] is True, body
    elif response.status_code == 403:
        assert body["errors"][0]["code"] == 10000, body
    elif response.status_code == 404:
        assert body["errors"][0]["code"] == 7003, body
    return int(response.status_code)


def checked_routes() -> list[tuple[ApiRoute, str]]:
    return [(route, where) for route in all_routes() for where in places(route)]


@pytest.mark.parametrize("caller", CALLERS, ids=lambda caller: caller.name)
def test_every_route_answers_as_the_callers_policies_say(world: World, caller: Caller) -> None:
    headers = headers_for(caller, world)
    for route, where in checked_routes():
        path = concrete(route, world, where)
        want = expected(caller, route, where)
        got = outcome(world.stubbed.request(route.method, path, headers=headers, json={}))
        assert got == want, f"{caller.name}: {route.method} {path} ({route.access}) answered {got}, expected {want}"
        if route.method == "DELETE" and route.path.endswith("{zone_id}"):
            continue  # the real handler would delete the zone the rest of the table needs
        real = world.real.request(route.method, path, headers=headers, json={})
        if want == 200:
            # The handler may refuse the request for what it is (400, 404 for a sample id, 10220), never for who
            # asks it.
            assert real.status_code != 401, (caller.name, route.method, path, real.json())
            assert not (real.status_code == 403 and real.json()["errors"][0]["code"] == 10000), (
                caller.name,
                route.method,
                path,
                real.json(),
            )
        else:
            assert outcome(real) == want, (caller.name, route.method, path, real.json())


def session_headers_for(caller: Caller, world: World) -> dict[str, str]:
    """The headers of a dashboard session opened with the caller's credentials: the global key's user signs in with
    its password, a token with itself; the session cookie and its CSRF token, nothing else."""
    headers = headers_for(caller, world)
    if "Authorization" in headers:
        body = {"token": headers["Authorization"].removeprefix("Bearer ")}
    else:
        body = {"email": world.credentials["email"], "password": world.credentials["password"]}
    signed_in = world.real.post("/session", json=body)
    assert signed_in.status_code == 200, signed_in.json()
    session_id = signed_in.cookies["edgeplane_session"]
    return {"Cookie": f"edgeplane_session={session_id}", "X-CSRF-Token": signed_in.json()["result"]["csrf_token"]}


@pytest.mark.parametrize("caller", CALLERS, ids=lambda caller: caller.name)
def test_a_dashboard_session_answers_as_the_credentials_it_was_opened_with(world: World, caller: Caller) -> None:
    headers = session_headers_for(caller, world)
    for route, where in checked_routes():
        path = concrete(route, world, where)
        want = expected(caller, route, where)
        got = outcome(world.stubbed.request(route.method, path, headers=headers, json={}))
        assert got == want, f"{caller.name} session: {route.method} {path} answered {got}, expected {want}"


@pytest.mark.parametrize("status", ["revoked", "disabled", "expired"])
def test_an_inactive_token_is_refused_everywhere(world: World, status: str) -> None:
    account = {f"{ACCOUNT_SCOPE}.{world.credentials['account_id']}": "*"}
    everything = [{"id": g.id} for g in groups(scopes=ACCOUNT_AND_ZONES)]
    headers = world.stored_token([{"effect": "allow", "resources": account, "permission_groups": everything}])
    with world.database.session() as session:
        session.execute(update(ApiToken).where(ApiToken.name == "stored").values(status=status))
    for route in all_routes():
        for where in places(route) or ["user"]:
            response = world.stubbed.request(route.method, concrete(route, world, where), headers=headers, json={})
            assert response.status_code == 401, (route.method, route.path)
            assert [e["code"] for e in response.json()["errors"]] == [1000, 9109]


def test_a_deleted_token_is_refused(world: World) -> None:
    headers = world.token(
        [
            {
                "effect": "allow",
                "resources": {f"{ZONE_SCOPE}.{world.credentials['zone_id']}": "*"},
                "permission_groups": [{"name": "Zone Read"}],
            }
        ]
    )
    token_id = world.real.get(V4 + "/user/tokens/verify", headers=headers).json()["result"]["id"]
    assert world.real.delete(V4 + f"/user/tokens/{token_id}", headers=world.bootstrap).json()["success"]
    assert world.real.get(V4 + f"/zones/{world.credentials['zone_id']}", headers=headers).status_code == 401


@pytest.mark.parametrize("caller", CALLERS, ids=lambda caller: caller.name)
def test_any_valid_caller_lists_only_what_it_reaches(world: World, caller: Caller) -> None:
    headers = headers_for(caller, world)
    zones = world.real.get(V4 + "/zones", headers=headers).json()["result"]
    want = [
        zone_id for where, zone_id in (("A", world.credentials["zone_id"]), ("B", world.zone_b)) if caller.access[where]
    ]
    assert sorted(zone["id"] for zone in zones) == sorted(want)
    accounts = world.real.get(V4 + "/accounts", headers=headers).json()["result"]
    assert [a["id"] for a in accounts] == ([world.credentials["account_id"]] if caller.sees_account else [])
    verified = world.real.get(V4 + "/user/tokens/verify", headers=headers)
    assert verified.status_code == (400 if caller.name == "global key" else 200)


@pytest.mark.parametrize(
    ("caller", "status"),
    [("account write", 200), ("all zones write", 200), ("zone A write", 400), ("account read", 403)],
)
def test_creating_a_zone_needs_zone_write_on_every_zone_of_the_account(world: World, caller: str, status: int) -> None:
    headers = headers_for(next(c for c in CALLERS if c.name == caller), world)
    body = {"name": f"new-{caller.replace(' ', '-')}.example", "account": {"id": world.credentials["account_id"]}}
    response = world.real.post(V4 + "/zones", json=body, headers=headers)
    assert response.status_code == status, response.json()


# ---- creating tokens ----


def test_a_token_grants_only_what_it_holds(world: World) -> None:
    zone_a = {f"{ZONE_SCOPE}.{world.credentials['zone_id']}": "*"}
    zone_b = {f"{ZONE_SCOPE}.{world.zone_b}": "*"}
    account = {f"{ACCOUNT_SCOPE}.{world.credentials['account_id']}": "*"}
    user = {f"{USER_SCOPE}.{world.user_id()}": "*"}
    narrow = world.token(
        [
            {"effect": "allow", "resources": zone_a, "permission_groups": [{"name": "Zone Read"}]},
            {"effect": "allow", "resources": user, "permission_groups": [{"name": "API Tokens Write"}]},
        ]
    )

    def create(resources: dict[str, Any], group: str) -> Any:
        policies = [{"effect": "allow", "resources": resources, "permission_groups": [{"name": group}]}]
        return world.real.post(V4 + "/user/tokens", json={"name": "n", "policies": policies}, headers=narrow)

    assert create(zone_a, "Zone Read").json()["success"]
    assert create(user, "API Tokens Write").json()["success"]
    assert create(user, "API Tokens Read").json()["success"]  # writing includes reading
    for resources, group in (
        (account, "Zone Write"),
        (zone_a, "Zone Write"),
        (zone_b, "Zone Read"),
        (account, "Zone Read"),
        (zone_a, "Logs Read"),
    ):
        response = create(resources, group)
        assert response.status_code == 403, (resources, group, response.json())
        assert response.json()["errors"][0]["code"] == 10000
    # Denies only take power away: any deny may be added.
    denied = [
        {"effect": "allow", "resources": zone_a, "permission_groups": [{"name": "Zone Read"}]},
        {"effect": "deny", "resources": account, "permission_groups": [{"name": "Zone Write"}]},
    ]
    assert world.real.post(V4 + "/user/tokens", json={"name": "d", "policies": denied}, headers=narrow).json()[
        "success"
    ]


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        ({"policies": [{"effect": "allow", "resources": "ACCOUNT", "permission_groups": []}]}, "/policies/0"),
        ({"policies": [{"effect": "allow", "resources": "ACCOUNT"}]}, "/policies/0"),
        (
            {"policies": [{"effect": "allow", "resources": "ACCOUNT", "permission_groups": [{"id": "nope"}]}]},
            "/policies/0/permission_groups/0",
        ),
        (
            {
                "policies": [
                    {"effect": "allow", "resources": "ACCOUNT", "permission_groups": [{"name": "API Tokens Write"}]}
                ]
            },
            "/policies/0/permission_groups/0",
        ),
        (
            {
                "policies": [
                    {
                        "effect": "allow",
                        "resources": {"com.cloudflare.api.account.zone." + "e" * 32: "*"},
                        "permission_groups": [{"name": "Zone Read"}],
                    }
                ]
            },
            "/policies/0/resources",
        ),
        (
            {
                "policies": [
                    {
                        "effect": "allow",
                        "resources": {"com.cloudflare.api.account." + "e" * 32: "*"},
                        "permission_groups": [{"name": "Zone Read"}],
                    }
                ]
            },
            "/policies/0/resources",
        ),
        (
            {
                "policies": [
                    {
                        "effect": "allow",
                        "resources": {"com.cloudflare.api.user." + "e" * 32: "*"},
                        "permission_groups": [{"name": "API Tokens Read"}],
                    }
                ]
            },
            "/policies/0/resources",
        ),
        (
            {
                "policies": [
                    {
                        "effect": "allow",
                        "resources": {"com.example.thing": "*"},
                        "permission_groups": [{"name": "Zone Read"}],
                    }
                ]
            },
            "/policies/0/resources",
        ),
        (
            {"policies": [{"effect": "maybe", "resources": "ACCOUNT", "permission_groups": [{"name": "Zone Read"}]}]},
            "/policies/0/effect",
        ),
        ({"policies": []}, "/policies"),
        ({"condition": {"request_ip": {"in": ["10.0.0.0/8"]}}}, "/condition"),
        ({"expires_on": "2030-01-01T00:00:00Z"}, "/expires_on"),
        ({"not_before": "2020-01-01T00:00:00Z"}, "/not_before"),
    ],
)
def test_tokens_edgeplane_cannot_enforce_are_refused(world: World, change: dict[str, Any], pointer: str) -> None:
    account = {f"{ACCOUNT_SCOPE}.{world.credentials['account_id']}": "*"}
    body: dict[str, Any] = {
        "name": "refused",
        "policies": [{"effect": "allow", "resources": account, "permission_groups": [{"name": "Zone Read"}]}],
        **change,
    }
    for policy in body["policies"]:
        if policy.get("resources") == "ACCOUNT":
            policy["resources"] = account
    response = world.real.post(V4 + "/user/tokens", json=body, headers=world.bootstrap)
    assert response.status_code == 400, response.json()
    assert response.json()["errors"][0]["source"]["pointer"] == pointer


def test_permission_groups_are_listed_and_filtered(world: World) -> None:
    def listed(query: str = "", headers: dict[str, str] | None = None) -> Any:
        return world.real.get(V4 + "/user/tokens/permission_groups" + query, headers=headers or world.bootstrap)

    everything = listed().json()["result"]
    assert {group["name"] for group in everything} >= {"Zone Read", "Zone Write", "Logs Write", "API Tokens Write"}
    assert all(len(group["id"]) == 32 for group in everything)
    zone_read = listed("?name=Zone%20Read").json()["result"]
    assert zone_read == [
        {
            "id": "c8fed203ed3043cba015a93ad1616f1f",
            "name": "Zone Read",
            "description": zone_read[0]["description"],
            "scopes": [ZONE_SCOPE],
        }
    ]
    logs_write = listed("?name=Logs Write").json()["result"]
    assert sorted(scope for group in logs_write for scope in group["scopes"]) == [ACCOUNT_SCOPE, ZONE_SCOPE]
    user_groups = listed(f"?scope={USER_SCOPE}").json()["result"]
    assert {group["name"] for group in user_groups} == {"API Tokens Read", "API Tokens Write"}
    assert listed("?scope=nonsense").status_code == 400
    zone_reader = world.token(
        [
            {
                "effect": "allow",
                "resources": {f"{ZONE_SCOPE}.{world.credentials['zone_id']}": "*"},
                "permission_groups": [{"name": "Zone Read"}],
            }
        ]
    )
    assert listed(headers=zone_reader).status_code == 403


def test_a_token_made_by_group_id_is_stored_with_the_groups_names(world: World) -> None:
    zone_a = {f"{ZONE_SCOPE}.{world.credentials['zone_id']}": "*"}
    created = world.real.post(
        V4 + "/user/tokens",
        json={
            "name": "by id",
            "policies": [
                {
                    "effect": "allow",
                    "resources": zone_a,
                    "permission_groups": [{"id": "3e0b5820118e47f3922f7c989e673882"}],
                }
            ],
        },
        headers=world.bootstrap,
    ).json()["result"]
    assert created["policies"][0]["permission_groups"] == [
        {"id": "3e0b5820118e47f3922f7c989e673882", "name": "Logs Write"}
    ]
    by_name = world.real.post(
        V4 + "/user/tokens",
        json={
            "name": "by name",
            "policies": [{"effect": "allow", "resources": zone_a, "permission_groups": [{"name": "Logs Write"}]}],
        },
        headers=world.bootstrap,
    ).json()["result"]
    # On a zone only the zone-scoped "Logs Write" applies.
    assert [group["id"] for group in by_name["policies"][0]["permission_groups"]] == [
        "3e0b5820118e47f3922f7c989e673882"
    ]


def test_a_bootstrap_token_from_before_permission_groups_is_upgraded(world: World, tmp_path: Path) -> None:
    legacy = [
        {
            "id": new_object_id(),
            "effect": "allow",
            "resources": {f"{ACCOUNT_SCOPE}.{world.credentials['account_id']}": "*"},
            "permission_groups": [{"id": "bootstrap", "name": "All permissions"}],
        }
    ]
    with world.database.session() as session:
        session.execute(update(ApiToken).where(ApiToken.name == "bootstrap token").values(policies=legacy))
    assert world.real.get(V4 + "/user/tokens", headers=world.bootstrap).status_code == 403
    assert ensure_bootstrap(tmp_path, world.database) is False
    assert world.real.get(V4 + "/user/tokens", headers=world.bootstrap).json()["success"]
    assert world.real.patch(V4 + f"/zones/{world.zone_b}", json={"paused": True}, headers=world.bootstrap).json()[
        "success"
    ]
