"""Who is calling, and what they may reach.

Two schemes, as the v4 API has them: ``Authorization: Bearer <token>`` (an API token, whose policies name the
accounts and zones it reaches and whether it may write) and ``X-Auth-Email`` + ``X-Auth-Key`` (a user's global API
key, which reaches everything of the user's account). An object outside the caller's reach is reported as not found
(404), never as forbidden, so that callers learn nothing about other accounts.

Token policies use the v4 shape: ``[{"effect": "allow", "resources": {...}, "permission_groups": [{"name": ...}]}]``
with resources ``com.cloudflare.api.account.<account id>`` (the account and all its zones),
``com.cloudflare.api.account.zone.<zone id>`` (one zone), or ``*`` in place of an id (all). Permission groups whose
name ends in "Read" grant reading only; any other group grants reading and writing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeplane.api.credentials import API_KEY_FORMAT, API_TOKEN_FORMAT, matches, secret_hash
from edgeplane.api.errors import ApiError, authentication_error
from edgeplane.store.models import ApiToken, User

_ACCOUNT = "com.cloudflare.api.account."
_ZONE = "com.cloudflare.api.account.zone."


@dataclass(frozen=True, slots=True)
class Grant:
    """What one allow-policy reaches: accounts and zones (``*`` for all), and whether it may write."""

    accounts: frozenset[str] = frozenset()
    zones: frozenset[str] = frozenset()
    write: bool = True


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller."""

    user_id: str
    email: str
    account_id: str
    token_id: str | None = None
    grants: tuple[Grant, ...] = field(default_factory=tuple)

    def _full(self) -> bool:
        return self.token_id is None

    def can_see_account(self, account_id: str) -> bool:
        """True when the caller reaches the account (its own, and the token allows it)."""
        if account_id != self.account_id:
            return False
        return self._full() or any(account_id in g.accounts or "*" in g.accounts for g in self.grants)

    def can_see_zone(self, account_id: str, zone_id: str) -> bool:
        """True when the caller reaches the zone."""
        if account_id != self.account_id:
            return False
        if self._full():
            return True
        return any(
            account_id in g.accounts or "*" in g.accounts or zone_id in g.zones or "*" in g.zones for g in self.grants
        )

    def can_write_account(self, account_id: str) -> bool:
        """True when the caller may change the account's objects."""
        if not self.can_see_account(account_id):
            return False
        return self._full() or any(g.write and (account_id in g.accounts or "*" in g.accounts) for g in self.grants)

    def can_write_zone(self, account_id: str, zone_id: str) -> bool:
        """True when the caller may change the zone's objects."""
        if not self.can_see_zone(account_id, zone_id):
            return False
        return self._full() or any(
            g.write and (account_id in g.accounts or "*" in g.accounts or zone_id in g.zones or "*" in g.zones)
            for g in self.grants
        )


def grants_from_policies(policies: list[Any]) -> tuple[Grant, ...]:
    """The grants of a token's stored policies (deny policies and malformed entries grant nothing)."""
    grants = []
    for policy in policies:
        if not isinstance(policy, Mapping) or policy.get("effect", "allow") != "allow":
            continue
        accounts: set[str] = set()
        zones: set[str] = set()
        _collect(policy.get("resources", {}), accounts, zones)
        groups = policy.get("permission_groups") or []
        names = [str(group.get("name", "")) for group in groups if isinstance(group, Mapping)]
        write = not names or any(not name.endswith("Read") for name in names)
        grants.append(Grant(accounts=frozenset(accounts), zones=frozenset(zones), write=write))
    return tuple(grants)


def _collect(resources: Any, accounts: set[str], zones: set[str]) -> None:
    if not isinstance(resources, Mapping):
        return
    for key, value in resources.items():
        key = str(key)
        if key.startswith(_ZONE):
            zones.add(key[len(_ZONE) :])
        elif key.startswith(_ACCOUNT):
            if isinstance(value, Mapping):
                _collect(value, accounts, zones)  # zones of one account: {"...account.<id>": {"...zone.*": "*"}}
                if any(str(inner).startswith(_ZONE + "*") for inner in value):
                    accounts.add(key[len(_ACCOUNT) :])
            else:
                accounts.add(key[len(_ACCOUNT) :])


def validate_policies(policies: Any) -> list[dict[str, Any]]:
    """Checks the policies of a token being created; raises a 400 ``ApiError`` naming the problem."""
    from edgeplane.api.errors import bad_request

    if not isinstance(policies, list) or not policies:
        raise bad_request("policies must be a non-empty array", pointer="/policies")
    checked = []
    for index, policy in enumerate(policies):
        if not isinstance(policy, dict):
            raise bad_request("a policy must be an object", pointer=f"/policies/{index}")
        if policy.get("effect", "allow") not in ("allow", "deny"):
            raise bad_request("effect must be allow or deny", pointer=f"/policies/{index}/effect")
        if not isinstance(policy.get("resources"), dict) or not policy["resources"]:
            raise bad_request("resources must be a non-empty object", pointer=f"/policies/{index}/resources")
        groups = policy.get("permission_groups", [])
        if not isinstance(groups, list) or not all(isinstance(group, dict) for group in groups):
            raise bad_request(
                "permission_groups must be an array of objects", pointer=f"/policies/{index}/permission_groups"
            )
        checked.append(
            {
                "id": policy.get("id") or secret_hash(repr(policy))[:32],
                "effect": policy.get("effect", "allow"),
                "resources": policy["resources"],
                "permission_groups": groups,
            }
        )
    return checked


def authenticate(headers: Mapping[str, str], session: Session) -> Principal:
    """The caller named by the request headers. Raises ``ApiError`` (400, 401 or 403) when it cannot be."""
    authorization = headers.get("authorization")
    email = headers.get("x-auth-email")
    key = headers.get("x-auth-key")
    if authorization is not None:
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not API_TOKEN_FORMAT.fullmatch(token):
            raise ApiError(
                400,
                6003,
                "Invalid request headers",
                extra=[{"code": 6111, "message": "Invalid format for Authorization header"}],
            )
        record = session.scalars(select(ApiToken).where(ApiToken.value_hash == secret_hash(token))).first()
        if record is None or record.status != "active":
            raise ApiError(401, 1000, "Invalid API Token", extra=[{"code": 9109, "message": "Invalid access token"}])
        user = session.get(User, record.user_id)
        if user is None:
            raise authentication_error()
        return Principal(
            user_id=user.id,
            email=user.email,
            account_id=user.account_id,
            token_id=record.id,
            grants=grants_from_policies(record.policies),
        )
    if email is not None or key is not None:
        if not email or not key:
            raise ApiError(
                400,
                6003,
                "Invalid request headers",
                extra=[{"code": 6103, "message": "Invalid format for X-Auth-Key header"}],
            )
        if not API_KEY_FORMAT.fullmatch(key):
            raise ApiError(
                400,
                6003,
                "Invalid request headers",
                extra=[{"code": 6103, "message": "Invalid format for X-Auth-Key header"}],
            )
        user = session.scalars(select(User).where(User.email == email.strip().lower())).first()
        if user is None or not matches(key, user.api_key_hash):
            raise ApiError(403, 9103, "Unknown X-Auth-Key or X-Auth-Email")
        return Principal(user_id=user.id, email=user.email, account_id=user.account_id)
    raise ApiError(
        401,
        10000,
        "Authentication error",
        extra=[{"code": 9106, "message": "Missing X-Auth-Key, X-Auth-Email or Authorization headers"}],
    )
