"""Zones: ``GET|POST /zones``, ``GET|PATCH|DELETE /zones/{zone_id}``, and the lookups other resources use."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeplane.api.auth import Principal
from edgeplane.api.credentials import new_object_id
from edgeplane.api.endpoint import ApiRequest, ApiResult, paginate, reject_unknown, require_object
from edgeplane.api.errors import bad_request, conflict, not_found
from edgeplane.api.permissions import Target
from edgeplane.api.plans import plan_by_reference, plan_object
from edgeplane.api.ruleset_writes import deploy_default_rulesets
from edgeplane.api.timestamps import rfc3339
from edgeplane.store.models import Account, Zone, utc_now

_ZONE_NAME = re.compile(r"(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*")
_ID = re.compile(r"[0-9a-f]{32}")


def zone_json(zone: Zone, account: Account | None, principal: Principal) -> dict[str, Any]:
    """A zone in the v4 shape."""
    return {
        "id": zone.id,
        "name": zone.name,
        "status": zone.status,
        "paused": zone.paused,
        "type": zone.type,
        "development_mode": 0,
        "name_servers": ["ns1.edgeplane.invalid", "ns2.edgeplane.invalid"],
        "original_name_servers": None,
        "original_registrar": None,
        "original_dnshost": None,
        "created_on": rfc3339(zone.created_on),
        "modified_on": rfc3339(zone.modified_on),
        "activated_on": rfc3339(zone.created_on),
        "meta": {"step": 4, "phishing_detected": False, "cdn_only": False, "dns_only": False, "foundation_dns": False},
        "owner": {"id": principal.user_id, "type": "user", "email": principal.email},
        "account": {"id": zone.account_id, "name": account.name if account else ""},
        "permissions": ["#zone:read", "#zone:edit"],
        "plan": plan_object(zone.plan),
        "vanity_name_servers": [],
    }


def visible_zone(request: ApiRequest, zone_id: str) -> Zone:
    """The zone, if the caller reaches it; else 404."""
    zone = request.session.get(Zone, zone_id) if _ID.fullmatch(zone_id) else None
    if zone is None or not request.principal.can_see_zone(zone.account_id, zone.id):
        raise not_found(request.path)
    return zone


def writable_zone(request: ApiRequest, zone_id: str) -> Zone:
    """The zone, if the caller may change it; 404 when it cannot see it, 403 when it lacks the route's write
    permission there."""
    zone = visible_zone(request, zone_id)
    request.require(Target.zone(zone.account_id, zone.id), write=True)
    return zone


def list_zones(request: ApiRequest) -> ApiResult:
    """``GET /zones``, filtered by ``name``, ``account.id``, ``status``."""
    query = request.query
    zones = request.session.scalars(select(Zone).order_by(Zone.name)).all()
    visible = [zone for zone in zones if request.principal.can_see_zone(zone.account_id, zone.id)]
    if query.get("name"):
        visible = [zone for zone in visible if zone.name == query["name"].lower()]
    if query.get("account.id"):
        visible = [zone for zone in visible if zone.account_id == query["account.id"]]
    if query.get("status"):
        visible = [zone for zone in visible if zone.status == query["status"]]
    if query.get("direction") == "desc":
        visible.reverse()
    page = paginate(visible, query, max_per_page=50)
    accounts = _accounts(request.session)
    page.result = [zone_json(zone, accounts.get(zone.account_id), request.principal) for zone in page.result]
    return page


def _accounts(session: Session) -> dict[str, Account]:
    return {account.id: account for account in session.scalars(select(Account)).all()}


def get_zone(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}``."""
    zone = visible_zone(request, request.path_params["zone_id"])
    return ApiResult(zone_json(zone, request.session.get(Account, zone.account_id), request.principal))


def create_zone(request: ApiRequest) -> ApiResult:
    """``POST /zones`` with ``name``, ``account: {id}``, optional ``type`` and ``plan``."""
    body = require_object(request.body)
    reject_unknown(body, {"name", "account", "type", "plan", "jump_start"})
    name = body.get("name")
    if not isinstance(name, str) or not _ZONE_NAME.fullmatch(name.lower().rstrip(".")) or "." not in name:
        raise bad_request("name must be a domain name such as example.com", code=1097, pointer="/name")
    name = name.lower().rstrip(".")
    account = body.get("account")
    account_id = account.get("id") if isinstance(account, dict) else None
    if not isinstance(account_id, str) or not request.principal.can_see_account(account_id):
        raise bad_request("account.id must name an account you can use", code=1099, pointer="/account/id")
    request.require(Target.zones_of(account_id))  # Zone Write on every zone of the account
    zone_type = body.get("type", "full")
    if zone_type not in ("full", "partial", "secondary", "internal"):
        raise bad_request("type must be full, partial, secondary or internal", pointer="/type")
    plan = plan_by_reference(body.get("plan", "free"))
    if plan is None:
        raise bad_request("plan must be free, pro, business or enterprise (or a plan id)", pointer="/plan")
    if request.session.scalars(select(Zone).where(Zone.name == name)).first() is not None:
        raise conflict(f"{name} already exists", code=1061)
    zone = Zone(id=new_object_id(), account_id=account_id, name=name, plan=plan, status="active", type=zone_type)
    request.session.add(zone)
    request.session.flush()
    deploy_default_rulesets(request.session, zone)
    return ApiResult(zone_json(zone, request.session.get(Account, account_id), request.principal), changed=True)


def edit_zone(request: ApiRequest) -> ApiResult:
    """``PATCH /zones/{zone_id}``: ``paused``, ``plan`` (legacy id or ``{id}``), ``type``."""
    zone = writable_zone(request, request.path_params["zone_id"])
    body = require_object(request.body)
    reject_unknown(body, {"paused", "plan", "type", "vanity_name_servers"})
    if "paused" in body:
        if not isinstance(body["paused"], bool):
            raise bad_request("paused must be true or false", pointer="/paused")
        zone.paused = body["paused"]
    if "plan" in body:
        plan = plan_by_reference(body["plan"])
        if plan is None:
            raise bad_request("plan must be free, pro, business or enterprise (or a plan id)", pointer="/plan")
        zone.plan = plan
    if "type" in body:
        if body["type"] not in ("full", "partial", "secondary", "internal"):
            raise bad_request("type must be full, partial, secondary or internal", pointer="/type")
        zone.type = body["type"]
    zone.modified_on = utc_now()
    return ApiResult(zone_json(zone, request.session.get(Account, zone.account_id), request.principal), changed=True)


def delete_zone(request: ApiRequest) -> ApiResult:
    """``DELETE /zones/{zone_id}``: the zone and everything of it."""
    zone = writable_zone(request, request.path_params["zone_id"])
    request.session.delete(zone)
    return ApiResult({"id": zone.id}, changed=True)
