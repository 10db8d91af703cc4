"""The scope of a zone-or-account resource (Logpush jobs, rulesets): the same paths exist under
``/zones/{zone_id}`` and ``/accounts/{account_id}``, and a handler works on whichever the path names."""

from __future__ import annotations

from dataclasses import dataclass

from edgeplane.api.accounts import visible_account
from edgeplane.api.endpoint import ApiRequest
from edgeplane.api.permissions import Target
from edgeplane.api.zones import visible_zone


@dataclass(frozen=True, slots=True)
class Scope:
    """One zone's resources (``zone_id`` set, with its account), or one account's own (``zone_id`` None)."""

    account_id: str
    zone_id: str | None


def request_scope(request: ApiRequest, *, write: bool = False) -> Scope:
    """The scope the request's path names, checked against the caller: 404 for a zone or account the caller cannot
    see, 403 when it lacks the route's permission there (its write form when ``write``)."""
    params = request.path_params
    if "zone_id" in params:
        zone = visible_zone(request, params["zone_id"])
        request.require(Target.zone(zone.account_id, zone.id), write=write)
        return Scope(account_id=zone.account_id, zone_id=zone.id)
    account = visible_account(request, params["account_id"], write=write)
    return Scope(account_id=account.id, zone_id=None)
