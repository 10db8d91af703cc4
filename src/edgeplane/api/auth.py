"""Who is calling, and what they may reach.

Two schemes, as the v4 API has them: ``Authorization: Bearer <token>`` (an API token, whose policies say what it may
read and write where: ``edgeplane.api.permissions``) and ``X-Auth-Email`` + ``X-Auth-Key`` (a user's global API key,
which is the user: everything of the user's account, and the user's tokens). A third is the dashboard's session
cookie, used only when neither is present: it stands for the user or the API token that signed in
(``edgeplane.api.dashboard_sessions``), so the same checks below decide what the dashboard may do; a request with it
that may change something must carry the session's CSRF token. An object the caller holds no
permission on is reported as not found (404), never as forbidden, so that callers learn nothing about other
accounts; an object it reaches but may not act on that way is 403 (code 10000).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import cookie_parser

from edgeplane.api.credentials import API_KEY_FORMAT, API_TOKEN_FORMAT, OBJECT_ID_FORMAT, matches, secret_hash
from edgeplane.api.dashboard_sessions import CSRF_HEADER, SESSION_COOKIE, csrf_token_matches, live_session
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


# Methods that change nothing: the only ones a session cookie is taken for without its CSRF token.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def invalid_token() -> ApiError:
    """HTTP 401, code 1000: the API token is unknown or not active."""
    return ApiError(401, 1000, "Invalid API Token", extra=[{"code": 9109, "message": "Invalid access token"}])


def token_principal(record: ApiToken, session: Session) -> Principal:
    """The caller an active API token stands for. Raises ``ApiError`` 401 when the token is not active."""
    if record.status != "active":
        raise invalid_token()
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


def user_principal(user: User) -> Principal:
    """The caller a user is (by its global API key, or signed in with its password): everything the user owns."""
    return Principal(user_id=user.id, email=user.email, account_id=user.account_id)


def session_principal(session_id: str, method: str, headers: Mapping[str, str], session: Session) -> Principal:
    """The caller a dashboard session stands for. Raises ``ApiError`` 401 when the session ended, and 403 when a
    request that may change something lacks the session's CSRF token."""
    record = live_session(session, session_id)
    if record is None:
        raise ApiError(
            401, 10000, "Authentication error", extra=[{"code": 9112, "message": "The session ended: sign in again"}]
        )
    if method.upper() not in SAFE_METHODS and not csrf_token_matches(session_id, headers.get(CSRF_HEADER)):
        raise ApiError(
            403,
            10000,
            "Authentication error",
            extra=[{"code": 9111, "message": "Missing or wrong X-CSRF-Token header for the session"}],
        )
    if record.token_id is not None:
        token = session.get(ApiToken, record.token_id)
        if token is None:
            raise invalid_token()
        return token_principal(token, session)
    user = session.get(User, record.user_id)
    if user is None:
        raise authentication_error()
    return user_principal(user)


def authenticate(headers: Mapping[str, str], session: Session, *, method: str) -> Principal:
    """The caller named by the request headers (``method`` is the request's: a session cookie needs the CSRF token
    for any but GET, HEAD and OPTIONS). Raises ``ApiError`` (400, 401 or 403) when it cannot be."""
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
        if record is None:
            raise invalid_token()
        return token_principal(record, session)
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
        return user_principal(user)
    session_id = cookie_parser(headers.get("cookie", "")).get(SESSION_COOKIE)
    if session_id:
        return session_principal(session_id, method, headers, session)
    raise ApiError(
        401,
        10000,
        "Authentication error",
        extra=[{"code": 9106, "message": "Missing X-Auth-Key, X-Auth-Email or Authorization headers"}],
    )
