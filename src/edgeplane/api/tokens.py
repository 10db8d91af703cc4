"""API tokens of the calling user: ``GET /user/tokens/verify``, ``GET|POST /user/tokens``,
``GET|DELETE /user/tokens/{token_id}``. A token's value is shown once, when it is created; only its hash is kept."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from edgeplane.api.auth import grants_from_policies, validate_policies
from edgeplane.api.credentials import secret_hash
from edgeplane.api.endpoint import ApiRequest, ApiResult, paginate, reject_unknown, require_object
from edgeplane.api.errors import ApiError, bad_request, not_found
from edgeplane.api.timestamps import rfc3339
from edgeplane.bootstrap import new_api_token, new_object_id
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
    """``POST /user/tokens`` with ``name`` and ``policies``; the answer holds the token's ``value``, once."""
    principal = request.principal
    if not principal.can_write_account(principal.account_id):
        raise ApiError(403, 10000, "Authentication error")
    body = require_object(request.body)
    reject_unknown(body, {"name", "policies", "condition", "expires_on", "not_before"})
    name = body.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 120:
        raise bad_request("name must be a non-empty string of at most 120 characters", pointer="/name")
    policies = validate_policies(body.get("policies"))
    for grant in grants_from_policies(policies):
        for account_id in grant.accounts - {"*"}:
            if account_id != principal.account_id:
                raise bad_request(f"a policy names account {account_id}, which is not yours", pointer="/policies")
        for zone_id in grant.zones - {"*"}:
            zone = request.session.get(Zone, zone_id)
            if zone is None or not principal.can_see_zone(zone.account_id, zone.id):
                raise bad_request(f"a policy names zone {zone_id}, which is not yours", pointer="/policies")
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
