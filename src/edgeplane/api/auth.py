"""Who is calling, and what they may reach.

Two schemes, as the v4 API has them: ``Authorization: Bearer <token>`` (an API token, whose policies say what it may
read and write where: ``edgeplane.api.permissions``) and ``X-Auth-Email`` + ``X-Auth-Key`` (a user's global API key,
which is the user: everything of the user's account, and the user's tokens). An object the caller holds no
permission on is reported as not found (404), never as forbidden, so that callers learn nothing about other
accounts; an object it reaches but may not act on that way is 403 (code 10000).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeplane.api.credentials import API_KEY_FORMAT, API_TOKEN_FORMAT, OBJECT_ID_FORMAT, matches, secret_hash
from edgeplane.api.errors import ApiError, authentication_error, not_found
from edgeplane.api.permissions import (
    USER_SCOPE,
    Access,
    On,
    Permission,
    Policy,
    RouteAccess,
    Target,
    decide,
    permission_catalogue,
    stored_policies,
)
from edgeplane.store.models import Account, ApiToken, User, Zone


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller: a user's global API key (``token_id`` None), or one of its API tokens."""

    user_id: str
    email: str
    account_id: str
    token_id: str | None = None
    policies: tuple[Policy, ...] = field(default_factory=tuple)

    def allows(self, permission: Permission, target: Target) -> bool:
        """True when the caller may ``permission`` at ``target``: never outside its own user and account; the
        global API key everywhere inside; a token as its policies decide."""
        owner = self.user_id if target.scope == USER_SCOPE else self.account_id
        if target.owner != owner:
            return False
        return self.token_id is None or decide(self.policies, permission, target)

    def reaches(self, target: Target) -> bool:
        """True when the caller holds some permission at ``target`` (objects it does not reach are not found)."""
        families = permission_catalogue().families
        return any(self.allows(Permission(family, Access.READ), target) for family in sorted(families))

    def can_see_account(self, account_id: str) -> bool:
        """True when the caller reaches the account's own objects or all of its zones."""
        return self.reaches(Target.account(account_id)) or self.reaches(Target.zones_of(account_id))

    def can_see_zone(self, account_id: str, zone_id: str) -> bool:
        """True when the caller reaches the zone."""
        return self.reaches(Target.zone(account_id, zone_id))


def forbidden() -> ApiError:
    """HTTP 403, code 10000: the caller reaches the object but may not do this to it."""
    return ApiError(403, 10000, "Authentication error")


def authorize(
    principal: Principal, access: RouteAccess, path_params: Mapping[str, str], path: str, session: Session
) -> None:
    """Checks the route's permission before its handler runs (and before its body is read). For a route on the
    path's zone or account: 404 when the caller reaches nothing there, 403 when it lacks the permission; for token
    management: 403 without the API Tokens permission. ``BODY`` and ``CALLER`` routes are checked by their handler.
    """
    permission = access.permission
    if permission is None or access.on in (On.BODY, On.CALLER):
        return
    if access.on is On.USER:
        if not principal.allows(permission, Target.user(principal.user_id)):
            raise forbidden()
        return
    if "zone_id" in path_params:
        zone_id = path_params["zone_id"]
        zone = session.get(Zone, zone_id) if OBJECT_ID_FORMAT.fullmatch(zone_id) else None
        if zone is None or not principal.can_see_zone(zone.account_id, zone.id):
            raise not_found(path)
        target = Target.zone(zone.account_id, zone.id)
    else:
        account = session.get(Account, path_params["account_id"])
        if account is None or not principal.can_see_account(account.id):
            raise not_found(path)
        target = Target.account(account.id)
    if not principal.allows(permission, target):
        raise forbidden()


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
            policies=stored_policies(record.policies),
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
