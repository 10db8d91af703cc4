"""Accounts: ``GET /accounts`` and ``GET /accounts/{account_id}``; the lookup account-scoped resources use."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from edgeplane.api.endpoint import ApiRequest, ApiResult, paginate
from edgeplane.api.errors import not_found
from edgeplane.api.permissions import Target
from edgeplane.api.timestamps import rfc3339
from edgeplane.store.models import Account


def account_json(account: Account) -> dict[str, Any]:
    """An account in the v4 shape."""
    return {
        "id": account.id,
        "name": account.name,
        "type": "standard",
        "settings": {"enforce_twofactor": False, "use_account_custom_ns_by_default": False},
        "created_on": rfc3339(account.created_on),
    }


def visible_account(request: ApiRequest, account_id: str, *, write: bool = False) -> Account:
    """The account, if the caller reaches it (404 otherwise; 403 when it lacks the route's permission there, its
    write form when ``write``)."""
    account = request.session.get(Account, account_id)
    if account is None or not request.principal.can_see_account(account.id):
        raise not_found(request.path)
    request.require(Target.account(account.id), write=write)
    return account


def list_accounts(request: ApiRequest) -> ApiResult:
    """``GET /accounts``."""
    accounts = request.session.scalars(select(Account).order_by(Account.name)).all()
    page = paginate([a for a in accounts if request.principal.can_see_account(a.id)], request.query)
    page.result = [account_json(account) for account in page.result]
    return page


def get_account(request: ApiRequest) -> ApiResult:
    """``GET /accounts/{account_id}``."""
    return ApiResult(account_json(visible_account(request, request.path_params["account_id"])))
