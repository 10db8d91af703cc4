"""Web3 hostnames of a zone: ``GET|POST /zones/{zone_id}/web3/hostnames`` and
``GET|PATCH|DELETE /zones/{zone_id}/web3/hostnames/{identifier}``. A hostname with target ``ethereum`` serves the
Ethereum gateway at ``/v1/<network>``; the edge routes by it (through the configuration snapshot)."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select

from edgeplane.api.credentials import new_object_id
from edgeplane.api.endpoint import ApiRequest, ApiResult, paginate, reject_unknown, require_object
from edgeplane.api.errors import bad_request, conflict, not_found
from edgeplane.api.timestamps import rfc3339
from edgeplane.api.zones import visible_zone, writable_zone
from edgeplane.store.models import Web3Hostname, utc_now

_HOSTNAME = re.compile(r"(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*")
SUPPORTED_TARGETS = frozenset({"ethereum"})
KNOWN_TARGETS = frozenset({"ethereum", "ipfs", "ipfs_universal_path"})


def hostname_json(hostname: Web3Hostname) -> dict[str, Any]:
    """A web3 hostname in the v4 shape."""
    return {
        "id": hostname.id,
        "name": hostname.name,
        "description": hostname.description,
        "status": hostname.status,
        "target": hostname.target,
        "dnslink": hostname.dnslink,
        "created_on": rfc3339(hostname.created_on),
        "modified_on": rfc3339(hostname.modified_on),
    }


def _hostname(request: ApiRequest, zone_id: str) -> Web3Hostname:
    hostname = request.session.get(Web3Hostname, request.path_params["identifier"])
    if hostname is None or hostname.zone_id != zone_id:
        raise not_found(request.path)
    return hostname


def list_hostnames(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/web3/hostnames``."""
    zone = visible_zone(request, request.path_params["zone_id"])
    hostnames = request.session.scalars(
        select(Web3Hostname).where(Web3Hostname.zone_id == zone.id).order_by(Web3Hostname.name)
    ).all()
    page = paginate(list(hostnames), request.query)
    page.result = [hostname_json(hostname) for hostname in page.result]
    return page


def get_hostname(request: ApiRequest) -> ApiResult:
    """``GET /zones/{zone_id}/web3/hostnames/{identifier}``."""
    zone = visible_zone(request, request.path_params["zone_id"])
    return ApiResult(hostname_json(_hostname(request, zone.id)))


def create_hostname(request: ApiRequest) -> ApiResult:
    """``POST /zones/{zone_id}/web3/hostnames`` with ``name``, ``target`` and optional ``description``, ``dnslink``."""
    zone = writable_zone(request, request.path_params["zone_id"])
    body = require_object(request.body)
    reject_unknown(body, {"name", "target", "description", "dnslink"})
    name = body.get("name")
    if not isinstance(name, str) or not _HOSTNAME.fullmatch(name.lower()):
        raise bad_request("name must be a hostname", pointer="/name")
    name = name.lower()
    if name != zone.name and not name.endswith("." + zone.name):
        raise bad_request(f"name must be {zone.name} or a subdomain of it", pointer="/name")
    target = body.get("target")
    if target not in KNOWN_TARGETS:
        raise bad_request("target must be ethereum, ipfs or ipfs_universal_path", pointer="/target")
    if target not in SUPPORTED_TARGETS:
        raise bad_request(f"target {target} is not supported by this edgeplane; use ethereum", pointer="/target")
    description = _text(body, "description")
    dnslink = _text(body, "dnslink")
    if request.session.scalars(select(Web3Hostname).where(Web3Hostname.name == name)).first() is not None:
        raise conflict(f"the hostname {name} already exists")
    hostname = Web3Hostname(
        id=new_object_id(), zone_id=zone.id, name=name, target=target, description=description, dnslink=dnslink
    )
    request.session.add(hostname)
    request.session.flush()
    return ApiResult(hostname_json(hostname), changed=True)


def edit_hostname(request: ApiRequest) -> ApiResult:
    """``PATCH /zones/{zone_id}/web3/hostnames/{identifier}``: ``description`` and ``dnslink``."""
    zone = writable_zone(request, request.path_params["zone_id"])
    hostname = _hostname(request, zone.id)
    body = require_object(request.body)
    reject_unknown(body, {"description", "dnslink"})
    if "description" in body:
        hostname.description = _text(body, "description")
    if "dnslink" in body:
        hostname.dnslink = _text(body, "dnslink")
    hostname.modified_on = utc_now()
    return ApiResult(hostname_json(hostname), changed=True)


def delete_hostname(request: ApiRequest) -> ApiResult:
    """``DELETE /zones/{zone_id}/web3/hostnames/{identifier}``."""
    zone = writable_zone(request, request.path_params["zone_id"])
    hostname = _hostname(request, zone.id)
    request.session.delete(hostname)
    return ApiResult({"id": hostname.id}, changed=True)


def _text(body: dict[str, Any], member: str) -> str:
    value = body.get(member, "")
    if not isinstance(value, str) or len(value) > 1024:
        raise bad_request(f"{member} must be a string of at most 1024 characters", pointer=f"/{member}")
    return value
