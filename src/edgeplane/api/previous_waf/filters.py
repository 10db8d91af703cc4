"""Filters: ``GET|POST|PUT|DELETE /zones/{zone_id}/filters`` (create and update take arrays; delete takes ``?id=``)
and ``GET|PUT|DELETE /zones/{zone_id}/filters/{filter_id}``.

A filter is a Rules-language expression (``expression``, ``paused``, ``description``, ``ref``) that firewall rules
reference by id. A firewall rule names its filter by ``{"id"}`` alone, or carries one inline (with or without an
id), which creates it or, for a known id, changes it. Each rule keeps a copy of its filter's members, rewritten when
the filter changes, so the WAF reads firewall rules alone. A filter a firewall rule uses cannot be deleted (400,
code 10016): delete or change the rule first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from starlette.datastructures import QueryParams

from edgeplane.api.credentials import new_object_id
from edgeplane.api.endpoint import ApiRequest, ApiResult, ApiRoute, paginate, require_object
from edgeplane.api.errors import bad_request, not_found
from edgeplane.api.permissions import path_read, path_write
from edgeplane.api.zones import visible_zone, writable_zone
from edgeplane.rules import RulesError, check_expression
from edgeplane.store.models import utc_now
from edgeplane.store.previous_waf_models import FirewallFilter, FirewallRule

MAX_EXPRESSION_LENGTH = 4096
MAX_FILTERS_PER_REQUEST = 1000
INVALID_EXPRESSION = 10014
FILTER_IN_USE = 10016
MEMBERS = frozenset({"id", "expression", "paused", "description", "ref"})


def filter_json(found: FirewallFilter) -> dict[str, Any]:
    """A filter in the v4 shape."""
    document: dict[str, Any] = {
        "id": found.id,
        "expression": found.expression,
        "paused": found.paused,
        "description": found.description,
    }
    if found.ref:
        document["ref"] = found.ref
    return document


def _set_members(found: FirewallFilter, value: dict[str, Any], pointer: str) -> None:
    """Checks the whole filter ``value`` and sets it on ``found``; 400s point below ``pointer``."""
    unknown = sorted(set(value) - MEMBERS)
    if unknown:
        raise bad_request(f"unknown field {unknown[0]!r}", pointer=f"{pointer}/{unknown[0]}")
    expression = value.get("expression")
    if not isinstance(expression, str) or not expression.strip():
        raise bad_request("filter.expression must be a Rules-language expression", pointer=f"{pointer}/expression")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise bad_request(
            f"filter.expression is longer than {MAX_EXPRESSION_LENGTH} characters", pointer=f"{pointer}/expression"
        )
    try:
        check_expression(expression)
    except RulesError as error:
        raise bad_request(
            f"filter.expression is not valid: {error.message} at position {error.position}",
            code=INVALID_EXPRESSION,
            pointer=f"{pointer}/expression",
        ) from None
    paused = value.get("paused", False)
    if not isinstance(paused, bool):
        raise bad_request("filter.paused must be true or false", pointer=f"{pointer}/paused")
    description = value.get("description") or ""
    if not isinstance(description, str) or len(description) > 500:
        raise bad_request(
            "filter.description must be a string of at most 500 characters", pointer=f"{pointer}/description"
        )
    ref = value.get("ref") or ""
    if not isinstance(ref, str) or len(ref) > 50:
        raise bad_request("filter.ref must be a string of at most 50 characters", pointer=f"{pointer}/ref")
    found.expression, found.paused, found.description, found.ref = expression, paused, description, ref


def _zone_filter(request: ApiRequest, zone_id: str, filter_id: Any) -> FirewallFilter | None:
    found = request.session.get(FirewallFilter, filter_id) if isinstance(filter_id, str) else None
    return found if found is not None and found.zone_id == zone_id else None


def copy_to_rules(request: ApiRequest, found: FirewallFilter) -> None:
    """Rewrites the copy of ``found`` every firewall rule using it keeps."""
    for rule in request.session.scalars(select(FirewallRule).where(FirewallRule.filter_id == found.id)):
        copy_filter(rule, found)


def copy_filter(rule: FirewallRule, found: FirewallFilter) -> None:
    """Makes ``rule`` use ``found``, keeping a copy of its members."""
    rule.filter_id = found.id
    rule.filter_expression = found.expression
    rule.filter_paused = found.paused
    rule.filter_description = found.description


def rule_filter(
    request: ApiRequest, zone_id: str, value: Any, pointer: str, *, current: str | None = None
) -> FirewallFilter:
    """The filter a firewall rule's ``filter`` member names: ``{"id"}`` alone names a filter of the zone; with an
    ``expression`` it changes that filter (without an id: the rule's ``current`` filter, if any) and the other rules
    using it, or creates a filter (with the id given when it is free). 400 (pointing below ``pointer``) for an
    unknown id alone, an id another zone uses, or a bad member."""
    if not isinstance(value, dict):
        raise bad_request("filter must be an object with an expression or the id of a filter", pointer=pointer)
    filter_id = value.get("id") or current
    if filter_id is not None and (not isinstance(filter_id, str) or not 0 < len(filter_id) <= 32):
        raise bad_request("filter.id must be a filter id", pointer=f"{pointer}/id")
    found = _zone_filter(request, zone_id, filter_id)
    if set(value) <= {"id"}:
        if found is None:
            raise bad_request(f"no filter {filter_id!r} in this zone", pointer=f"{pointer}/id")
        return found
    if found is None:
        if filter_id is not None and request.session.get(FirewallFilter, filter_id) is not None:
            raise bad_request(f"filter id {filter_id!r} is taken", pointer=f"{pointer}/id")
        found = FirewallFilter(id=filter_id or new_object_id(), zone_id=zone_id, created_on=utc_now())
        _set_members(found, value, pointer)
        request.session.add(found)
        return found
    _set_members(found, value, pointer)
    copy_to_rules(request, found)
    return found


def _array(body: Any, *, one_allowed: bool) -> list[Any]:
    if one_allowed and isinstance(body, dict):
        return [body]
    if not isinstance(body, list) or not body:
        raise bad_request("the request body must be a non-empty JSON array of filters", code=6007)
    if len(body) > MAX_FILTERS_PER_REQUEST:
        raise bad_request(f"at most {MAX_FILTERS_PER_REQUEST} filters per request", code=6007)
    return body


def _filter(request: ApiRequest, zone_id: str) -> FirewallFilter:
    found = _zone_filter(request, zone_id, request.path_params["filter_id"])
    if found is None:
        raise not_found(request.path)
    return found


def list_filters(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/filters``, optionally filtered by ``id``, ``paused``, ``ref``, and ``expression`` and
    ``description`` (case-insensitive substrings)."""
    zone = visible_zone(request, request.path_params["zone_id"])
    query = request.query
    found: Iterable[FirewallFilter] = request.session.scalars(
        select(FirewallFilter)
        .where(FirewallFilter.zone_id == zone.id)
        .order_by(FirewallFilter.created_on, FirewallFilter.id)
    )
    if query.get("id"):
        found = [item for item in found if item.id == query["id"]]
    if query.get("paused") in ("true", "false"):
        found = [item for item in found if item.paused == (query["paused"] == "true")]
    if query.get("ref"):
        found = [item for item in found if item.ref == query["ref"]]
    for member in ("expression", "description"):
        if query.get(member):
            wanted = query[member].lower()
            found = [item for item in found if wanted in getattr(item, member).lower()]
    page = paginate(list(found), query, default_per_page=25)
    page.result = [filter_json(item) for item in page.result]
    return page


def create_filters(request: ApiRequest) -> ApiResult:
    """``POST /zones/{zone_id}/filters`` with an array of filters (or one object); answers the created filters. An
    ``id`` in a filter is refused: the server names filters. Nothing is created when one is invalid."""
    zone = writable_zone(request, request.path_params["zone_id"])
    one = isinstance(request.body, dict)
    created = []
    for index, item in enumerate(_array(request.body, one_allowed=True)):
        pointer = "" if one else f"/{index}"
        value = require_object(item)
        if "id" in value:
            raise bad_request("a new filter has no id", pointer=f"{pointer}/id")
        found = FirewallFilter(id=new_object_id(), zone_id=zone.id, created_on=utc_now())
        _set_members(found, value, pointer)
        created.append(found)
    request.session.add_all(created)
    request.session.flush()
    return ApiResult([filter_json(item) for item in created], changed=True)


def update_filters(request: ApiRequest) -> ApiResult:
    """``PUT /zones/{zone_id}/filters`` with an array of whole filters, each naming its ``id``."""
    zone = writable_zone(request, request.path_params["zone_id"])
    updated = []
    for index, item in enumerate(_array(request.body, one_allowed=False)):
        value = require_object(item)
        found = _zone_filter(request, zone.id, value.get("id"))
        if found is None:
            raise bad_request(f"no filter {value.get('id')!r} in this zone", pointer=f"/{index}/id")
        _set_members(found, value, f"/{index}")
        copy_to_rules(request, found)
        updated.append(found)
    return ApiResult([filter_json(item) for item in updated], changed=True)


def get_filter(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/filters/{filter_id}``."""
    zone = visible_zone(request, request.path_params["zone_id"])
    return ApiResult(filter_json(_filter(request, zone.id)))


def update_filter(request: ApiRequest) -> ApiResult:
    """``PUT /zones/{zone_id}/filters/{filter_id}`` with the whole filter (``id``, if given, the path's); the
    firewall rules using it follow."""
    zone = writable_zone(request, request.path_params["zone_id"])
    found = _filter(request, zone.id)
    value = require_object(request.body)
    if "id" in value and value["id"] != found.id:
        raise bad_request("id must be the id in the path", pointer="/id")
    _set_members(found, value, "")
    copy_to_rules(request, found)
    return ApiResult(filter_json(found), changed=True)


def _delete(request: ApiRequest, found: FirewallFilter) -> None:
    used = request.session.scalars(select(FirewallRule.id).where(FirewallRule.filter_id == found.id)).first()
    if used is not None:
        raise bad_request(
            f"filter {found.id} is used by firewall rule {used}: delete or change the rule first", code=FILTER_IN_USE
        )
    request.session.delete(found)


def delete_filter(request: ApiRequest) -> ApiResult:
    """``DELETE /zones/{zone_id}/filters/{filter_id}``: answers ``{id}``; 400 (10016) while a firewall rule uses it."""
    zone = writable_zone(request, request.path_params["zone_id"])
    found = _filter(request, zone.id)
    _delete(request, found)
    return ApiResult({"id": found.id}, changed=True)


def delete_filters(request: ApiRequest) -> ApiResult:
    """``DELETE /zones/{zone_id}/filters?id=A&id=B`` (or ``id=A,B``): deletes them all or none; answers ``[{id}]``."""
    zone = writable_zone(request, request.path_params["zone_id"])
    query = request.query
    named = query.getlist("id") if isinstance(query, QueryParams) else [query.get("id", "")]
    ids = [part for value in named for part in value.split(",") if part]
    if not ids:
        raise bad_request("name the filters to delete with id=", pointer="/id")
    for filter_id in ids:
        found = _zone_filter(request, zone.id, filter_id)
        if found is None:
            raise bad_request(f"no filter {filter_id!r} in this zone", pointer="/id")
        _delete(request, found)
    return ApiResult([{"id": filter_id} for filter_id in ids], changed=True)


_BASE = "/zones/{zone_id}/filters"
_READ, _WRITE = path_read("firewall_services"), path_write("firewall_services")

ROUTES = [
    ApiRoute(_BASE, "GET", list_filters, _READ),
    ApiRoute(_BASE, "POST", create_filters, _WRITE),
    ApiRoute(_BASE, "PUT", update_filters, _WRITE),
    ApiRoute(_BASE, "DELETE", delete_filters, _WRITE),
    ApiRoute(_BASE + "/{filter_id}", "GET", get_filter, _READ),
    ApiRoute(_BASE + "/{filter_id}", "PUT", update_filter, _WRITE),
    ApiRoute(_BASE + "/{filter_id}", "DELETE", delete_filter, _WRITE),
]
