"""API tokens of the calling user: ``GET /user/tokens/verify``, ``GET /user/tokens/permission_groups``,
``GET|POST /user/tokens``, ``GET|DELETE /user/tokens/{token_id}``. A token's value is shown once, when it is
created; only its hash is kept.

Managing tokens needs the API Tokens permissions (Read to list, Write to create and delete), as on the real API; a
token can always verify itself. Unlike the real API, a token can only create a token with permissions it holds
itself, at resources where it holds them: API Tokens Write does not turn a narrow token into a way to mint a wide one.
Conditions (``condition.request_ip``) and validity dates (``expires_on``, ``not_before``) are refused rather than
stored unenforced.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeplane.api.auth import Principal
from edgeplane.api.credentials import new_api_token, new_object_id, secret_hash
from edgeplane.api.endpoint import ApiRequest, ApiResult, paginate, reject_unknown, require_object
from edgeplane.api.errors import ApiError, bad_request, not_found
from edgeplane.api.permissions import (
    SCOPES,
    PermissionGroup,
    Policy,
    PolicyError,
    Resource,
    parse_resources,
    permission_catalogue,
    ungranted,
)
from edgeplane.api.timestamps import rfc3339
from edgeplane.store.models import ApiToken, Zone


def token_json(token: ApiToken) -> dict[str, Any]:
    """A token in the v4 shape, without its value."""
    return {
        "id": token.id,
        "name": token.name,
        "status": token.status,
        "issued_on": rfc3339(token.issued_on),
        "modified_on": rfc3339(token.modified_on),
        "policies": token.policies,
        "condition": {},
    }


def verify_token(request: ApiRequest) -> ApiResult:
    """``GET /user/tokens/verify``: the calling token's id and status."""
    if request.principal.token_id is None:
        raise ApiError(400, 1000, "Invalid API Token", extra=[{"code": 6003, "message": "Use a bearer token here"}])
    return ApiResult(
        {"id": request.principal.token_id, "status": "active"},
        messages=[{"code": 10000, "message": "This API Token is valid and active", "type": None}],
    )


def list_permission_groups(request: ApiRequest) -> ApiResult:
    """``GET /user/tokens/permission_groups``, filtered by ``name`` (exact, any case) and ``scope``."""
    groups = list(permission_catalogue().groups)
    name = request.query.get("name")
    if name:
        groups = [group for group in groups if group.name.casefold() == name.strip().casefold()]
    scope = request.query.get("scope")
    if scope:
        if scope not in SCOPES:
            raise bad_request(f"scope must be one of {', '.join(SCOPES)}", pointer="/scope")
        groups = [group for group in groups if scope in group.scopes]
    return ApiResult([group.json() for group in groups])


def _own_token(request: ApiRequest) -> ApiToken:
    token = request.session.get(ApiToken, request.path_params["token_id"])
    if token is None or token.user_id != request.principal.user_id:
        raise not_found(request.path)
    return token


def list_tokens(request: ApiRequest) -> ApiResult:
    """``GET /user/tokens``."""
    tokens = request.session.scalars(
        select(ApiToken).where(ApiToken.user_id == request.principal.user_id).order_by(ApiToken.issued_on)
    ).all()
    page = paginate(list(tokens), request.query, max_per_page=50)
    page.result = [token_json(token) for token in page.result]
    return page


def get_token(request: ApiRequest) -> ApiResult:
    """``GET /user/tokens/{token_id}``."""
    return ApiResult(token_json(_own_token(request)))


def create_token(request: ApiRequest) -> ApiResult:
    """``POST /user/tokens`` with ``name`` and ``policies``; the answer holds the token's ``value``, once.

    Raises 400 for a policy edgeplane cannot enforce exactly (an unknown resource or permission group, a group that
    applies to none of the policy's resources, no group at all, someone else's account or zone, a condition or a
    validity date), and 403 when an allow policy grants a permission the caller does not hold there."""
    principal = request.principal
    body = require_object(request.body)
    reject_unknown(body, {"name", "policies", "condition", "expires_on", "not_before"})
    name = body.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 120:
        raise bad_request("name must be a non-empty string of at most 120 characters", pointer="/name")
    _refuse_conditions(body)
    policies = checked_policies(body.get("policies"), principal, request.session)
    value = new_api_token()
    token = ApiToken(
        id=new_object_id(),
        user_id=principal.user_id,
        name=name.strip(),
        value_hash=secret_hash(value),
        status="active",
        policies=policies,
    )
    request.session.add(token)
    request.session.flush()
    return ApiResult({**token_json(token), "value": value})


def delete_token(request: ApiRequest) -> ApiResult:
    """``DELETE /user/tokens/{token_id}``."""
    token = _own_token(request)
    request.session.delete(token)
    return ApiResult({"id": token.id})


def _refuse_conditions(body: dict[str, Any]) -> None:
    condition = body.get("condition")
    if condition not in (None, {}) and condition != {"request_ip": {}}:
        raise bad_request("token conditions (request_ip) are not supported by this server", pointer="/condition")
    for member in ("expires_on", "not_before"):
        if body.get(member) is not None:
            raise bad_request(
                f"{member} is not supported by this server: delete the token instead", pointer=f"/{member}"
            )


def checked_policies(policies: Any, principal: Principal, session: Session) -> list[dict[str, Any]]:
    """The policies of a token being created, as they will be stored (permission groups by id and name). Raises
    ``ApiError`` (400 or 403) as ``create_token`` says."""
    if not isinstance(policies, list) or not policies:
        raise bad_request("policies must be a non-empty array", pointer="/policies")
    checked = []
    for index, policy in enumerate(policies):
        try:
            checked.append(_checked_policy(policy, principal, session))
        except PolicyError as error:
            raise bad_request(str(error), pointer=f"/policies/{index}{error.pointer}") from None
    return checked


def _checked_policy(policy: Any, principal: Principal, session: Session) -> dict[str, Any]:
    if not isinstance(policy, dict):
        raise PolicyError("a policy must be an object", "")
    effect = policy.get("effect", "allow")
    if effect not in ("allow", "deny"):
        raise PolicyError("effect must be allow or deny", "/effect")
    named = policy.get("resources")
    if not isinstance(named, dict) or not named:
        raise PolicyError("resources must be a non-empty object", "/resources")
    resources = parse_resources(named)
    zone_accounts: dict[str, str] = {}
    for resource in resources:
        account = _zone_account(resource, principal, session)
        if account is not None:
            zone_accounts[resource.id] = account
    groups = _groups(policy.get("permission_groups"), resources)
    refused = ungranted(
        Policy(effect == "allow", resources, tuple(groups)), principal.allows, principal.account_id, zone_accounts
    )
    if refused is not None:
        group, target = refused
        raise ApiError(
            403,
            10000,
            f"a token cannot grant what its creator does not hold: {group.name} on "
            f"{target.scope}.{target.zone_id or target.owner}",
        )
    return {
        "id": new_object_id(),
        "effect": effect,
        "resources": named,
        "permission_groups": [{"id": group.id, "name": group.name} for group in groups],
    }


def _groups(entries: Any, resources: tuple[Resource, ...]) -> list[PermissionGroup]:
    """The groups the entries name that apply to the policy's resources (a name such as "Logs Write" names one
    group per scope); a 400 for an entry naming no group, or only groups of other scopes."""
    if not isinstance(entries, list) or not entries:
        raise PolicyError("permission_groups must be a non-empty array: a policy without one grants nothing", "")
    catalogue = permission_catalogue()
    groups: list[PermissionGroup] = []
    for position, entry in enumerate(entries):
        found = catalogue.resolve(entry)
        if not found:
            raise PolicyError(
                "unknown permission group: name one of GET /user/tokens/permission_groups by id or name",
                f"/permission_groups/{position}",
            )
        applicable = [group for group in found if any(resource.applies_to(group) for resource in resources)]
        if not applicable:
            raise PolicyError(
                f"permission group {found[0].name!r} ({', '.join(sorted(found[0].scopes))}) applies to none of the "
                "policy's resources",
                f"/permission_groups/{position}",
            )
        groups += [group for group in applicable if group not in groups]
    return groups


def _zone_account(resource: Resource, principal: Principal, session: Session) -> str | None:
    """The account of the zone a zone resource names; a 400 for a user, account or zone that is not the caller's."""
    mine = f"which is not yours ({resource.kind} {resource.id})"
    if resource.kind == "user":
        if resource.id != principal.user_id:
            raise PolicyError(f"a policy names a user {mine}", "/resources")
        return None
    if resource.kind == "account" or resource.id == "*":
        account_id = resource.id if resource.kind == "account" else resource.account_id
        if account_id not in (None, "*", principal.account_id):
            raise PolicyError(f"a policy names account {account_id}, which is not yours", "/resources")
        return None
    zone = session.get(Zone, resource.id)
    if zone is None or zone.account_id != principal.account_id or resource.account_id not in (None, zone.account_id):
        raise PolicyError(f"a policy names zone {resource.id}, which is not yours", "/resources")
    return zone.account_id
