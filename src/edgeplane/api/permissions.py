"""What an API token may do: permission groups, the resources a policy names, and the decision for one request.

A token holds policies, each ``allow`` or ``deny``, naming resources (the user, accounts, zones) and permission
groups (``permission_groups.toml``, the groups and ids of the real API). A group reads or writes one *family* of
routes (``zone``, ``logs``, ``zone_waf``...) at the scopes it is made for; a group that writes also reads. Every
route declares the permission it needs in its route table (a ``RouteAccess``), and the decision is:

- a deny policy whose resources touch the target and whose groups withhold the permission refuses it (a denied read
  withholds writing too): deny wins over allow, whatever the order;
- else an allow policy whose resources cover the target and whose groups grant the permission allows it;
- else it is refused. A policy without permission groups grants nothing.

Resources: ``com.cloudflare.api.user.<user id>`` (token management), ``com.cloudflare.api.account.<account id>``
(the account and every zone of it; ``*`` for every account of the user), ``com.cloudflare.api.account.zone.<zone
id>`` (one zone; ``*`` for every zone), and ``{"com.cloudflare.api.account.<id>": {"com.cloudflare.api.account.zone.*":
"*"}}`` (every zone of one account, not the account itself).
"""

from __future__ import annotations

import enum
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

from edgeplane.api.credentials import OBJECT_ID_FORMAT

USER_SCOPE = "com.cloudflare.api.user"
ACCOUNT_SCOPE = "com.cloudflare.api.account"
ZONE_SCOPE = "com.cloudflare.api.account.zone"
SCOPES = (USER_SCOPE, ACCOUNT_SCOPE, ZONE_SCOPE)

_USER_PREFIX = USER_SCOPE + "."
_ACCOUNT_PREFIX = ACCOUNT_SCOPE + "."
_ZONE_PREFIX = ZONE_SCOPE + "."


class Access(enum.Enum):
    """Reading or writing a family of objects."""

    READ = "read"
    WRITE = "write"


@dataclass(frozen=True, slots=True)
class Permission:
    """Reading or writing one family of routes."""

    family: str
    access: Access

    def __str__(self) -> str:
        return f"{self.family} {self.access.value}"


@dataclass(frozen=True, slots=True)
class PermissionGroup:
    """A permission group as the API lists it, and the permission it carries."""

    id: str
    name: str
    description: str
    scopes: frozenset[str]
    permission: Permission

    def grants(self, permission: Permission) -> bool:
        """True when an allow policy with this group gives ``permission`` (writing includes reading)."""
        mine = self.permission
        return mine.family == permission.family and (mine.access is Access.WRITE or permission.access is Access.READ)

    def withholds(self, permission: Permission) -> bool:
        """True when a deny policy with this group takes ``permission`` away (a denied read denies writing too)."""
        mine = self.permission
        return mine.family == permission.family and (mine.access is Access.READ or permission.access is Access.WRITE)

    def json(self) -> dict[str, Any]:
        """The group in the v4 shape of ``GET /user/tokens/permission_groups``."""
        return {"id": self.id, "name": self.name, "description": self.description, "scopes": sorted(self.scopes)}


class PolicyError(ValueError):
    """A policy being created is not acceptable; ``pointer`` names the member."""

    def __init__(self, message: str, pointer: str) -> None:
        super().__init__(message)
        self.pointer = pointer


@dataclass(frozen=True, slots=True)
class PermissionCatalogue:
    """Every permission group edgeplane knows, by id and by name."""

    groups: tuple[PermissionGroup, ...]

    @property
    def families(self) -> frozenset[str]:
        """The families of routes the groups open."""
        return frozenset(group.permission.family for group in self.groups)

    def by_id(self, group_id: str) -> PermissionGroup | None:
        """The group with this id."""
        return next((group for group in self.groups if group.id == group_id), None)

    def by_name(self, name: str) -> tuple[PermissionGroup, ...]:
        """The groups with this name, case-insensitively; ``... Edit`` (the dashboard's word) is ``... Write``."""
        wanted = name.strip().casefold()
        if wanted.endswith(" edit"):
            wanted = wanted[: -len(" edit")] + " write"
        return tuple(group for group in self.groups if group.name.casefold() == wanted)

    def resolve(self, reference: Any) -> tuple[PermissionGroup, ...]:
        """The groups a policy's ``permission_groups`` entry names: by ``id`` when it is a known id (what the SDK and
        Terraform send), else by ``name``. Empty when it names none."""
        if not isinstance(reference, Mapping):
            return ()
        group_id = reference.get("id")
        if isinstance(group_id, str):
            found = self.by_id(group_id)
            if found is not None:
                return (found,)
        name = reference.get("name")
        return self.by_name(name) if isinstance(name, str) else ()


@cache
def permission_catalogue() -> PermissionCatalogue:
    """The groups shipped with the package (``permission_groups.toml``). Raises ``ValueError`` if the file is
    inconsistent (a duplicate id, an unknown scope or access)."""
    text = resources.files(__package__ or "edgeplane.api").joinpath("permission_groups.toml").read_text("utf-8")
    groups = []
    seen: set[str] = set()
    for entry in tomllib.loads(text)["group"]:
        group_id = str(entry["id"])
        scopes = frozenset(str(scope) for scope in entry["scopes"])
        if group_id in seen or len(group_id) != 32 or not scopes or not scopes <= set(SCOPES):
            raise ValueError(f"permission group {group_id}: duplicate id, bad id or unknown scope")
        seen.add(group_id)
        groups.append(
            PermissionGroup(
                id=group_id,
                name=str(entry["name"]),
                description=str(entry["description"]),
                scopes=scopes,
                permission=Permission(str(entry["family"]), Access(entry["access"])),
            )
        )
    return PermissionCatalogue(tuple(groups))


@dataclass(frozen=True, slots=True)
class Target:
    """What a request acts on: the user (token management), an account's own objects, one zone, or every zone of an
    account (``zone_id`` None at the zone scope: creating a zone, or a token covering all of them)."""

    scope: str
    owner: str  # the user id at the user scope, else the account id
    zone_id: str | None = None

    @classmethod
    def user(cls, user_id: str) -> Target:
        return cls(USER_SCOPE, user_id)

    @classmethod
    def account(cls, account_id: str) -> Target:
        return cls(ACCOUNT_SCOPE, account_id)

    @classmethod
    def zone(cls, account_id: str, zone_id: str) -> Target:
        return cls(ZONE_SCOPE, account_id, zone_id)

    @classmethod
    def zones_of(cls, account_id: str) -> Target:
        return cls(ZONE_SCOPE, account_id)


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource a policy names. ``id`` is ``*`` for all; a zone resource nested under an account keeps the
    account's id in ``account_id``."""

    kind: Literal["user", "account", "zone"]
    id: str
    account_id: str | None = None

    def covers(self, target: Target) -> bool:
        """True when the resource includes all of ``target`` (what an allow policy needs)."""
        if self.kind == "user":
            return target.scope == USER_SCOPE and self.id == target.owner
        if target.scope == USER_SCOPE:
            return False
        if self.kind == "account":
            return self.id in ("*", target.owner)
        if target.scope != ZONE_SCOPE or self.account_id not in (None, "*", target.owner):
            return False
        return self.id == "*" or self.id == target.zone_id

    def overlaps(self, target: Target) -> bool:
        """True when the resource includes any part of ``target`` (what a deny policy needs): a deny on one zone
        takes that zone out of "every zone of the account"."""
        if self.covers(target):
            return True
        return (
            self.kind == "zone"
            and target.scope == ZONE_SCOPE
            and target.zone_id is None
            and self.account_id in (None, "*", target.owner)
        )

    def applies_to(self, group: PermissionGroup) -> bool:
        """True when the group has a scope this resource is of (an account also holds zones)."""
        if self.kind == "user":
            return USER_SCOPE in group.scopes
        if self.kind == "account":
            return bool(group.scopes & {ACCOUNT_SCOPE, ZONE_SCOPE})
        return ZONE_SCOPE in group.scopes

    def targets(self, group: PermissionGroup, own_account: str, zone_account: str | None) -> list[Target]:
        """What the group reaches through this resource, for checking that a token creator holds it;
        ``zone_account`` is the account of the zone a zone resource names."""
        if self.kind == "user":
            return [Target.user(self.id)]
        if self.kind == "account":
            account = own_account if self.id == "*" else self.id
            found = []
            if ACCOUNT_SCOPE in group.scopes:
                found.append(Target.account(account))
            if ZONE_SCOPE in group.scopes:
                found.append(Target.zones_of(account))
            return found
        account = zone_account or (own_account if self.account_id in (None, "*") else self.account_id)
        return [Target.zones_of(account) if self.id == "*" else Target.zone(account, self.id)]


def parse_resources(resources: Mapping[str, Any]) -> tuple[Resource, ...]:
    """The resources of a policy. Raises ``PolicyError`` for a key or value it does not know."""
    found: list[Resource] = []
    for key, value in resources.items():
        key = str(key)
        if key.startswith(_ZONE_PREFIX):
            found.append(Resource("zone", _identifier(key[len(_ZONE_PREFIX) :], key)))
            _require_star(value, key)
        elif key.startswith(_ACCOUNT_PREFIX):
            account_id = _identifier(key[len(_ACCOUNT_PREFIX) :], key)
            if isinstance(value, Mapping):
                if not value:
                    raise PolicyError(f"{key} names no zones", "/resources")
                for inner, inner_value in value.items():
                    inner = str(inner)
                    if not inner.startswith(_ZONE_PREFIX):
                        raise PolicyError(f"{key} may only hold zones, not {inner}", "/resources")
                    _require_star(inner_value, inner)
                    found.append(Resource("zone", _identifier(inner[len(_ZONE_PREFIX) :], inner), account_id))
            else:
                _require_star(value, key)
                found.append(Resource("account", account_id))
        elif key.startswith(_USER_PREFIX):
            found.append(Resource("user", _identifier(key[len(_USER_PREFIX) :], key, star=False)))
            _require_star(value, key)
        else:
            raise PolicyError(f"unknown resource {key}", "/resources")
    return tuple(found)


def _identifier(text: str, key: str, *, star: bool = True) -> str:
    if (star and text == "*") or OBJECT_ID_FORMAT.fullmatch(text):
        return text
    raise PolicyError(f"{key} does not name an object by its 32-character id", "/resources")


def _require_star(value: Any, key: str) -> None:
    if value != "*":
        raise PolicyError(f'the value of {key} must be "*"', "/resources")


@dataclass(frozen=True, slots=True)
class Policy:
    """One policy of a token."""

    allow: bool
    resources: tuple[Resource, ...]
    groups: tuple[PermissionGroup, ...]

    def applies(self, permission: Permission, target: Target) -> bool:
        """True when this policy speaks about ``permission`` at ``target`` (grants it, or for a deny, withholds it)."""
        if self.allow:
            return any(g.grants(permission) and target.scope in g.scopes for g in self.groups) and any(
                resource.covers(target) for resource in self.resources
            )
        return any(g.withholds(permission) and target.scope in g.scopes for g in self.groups) and any(
            resource.overlaps(target) for resource in self.resources
        )


def decide(policies: tuple[Policy, ...], permission: Permission, target: Target) -> bool:
    """True when the policies allow ``permission`` at ``target``: some allow policy grants it and no deny policy
    withholds it."""
    if any(not policy.allow and policy.applies(permission, target) for policy in policies):
        return False
    return any(policy.allow and policy.applies(permission, target) for policy in policies)


def ungranted(
    policy: Policy, holds: Callable[[Permission, Target], bool], own_account: str, zone_accounts: Mapping[str, str]
) -> tuple[PermissionGroup, Target] | None:
    """The first group and target at which an allow ``policy`` would grant what ``holds`` (its creator) does not
    hold, or None. ``zone_accounts`` gives the account of each zone the policy names. Deny policies grant nothing,
    so any deny may be added; what a policy grants at "every zone of an account" its creator must hold there too,
    which covers each zone of it now and later."""
    if not policy.allow:
        return None
    for group in policy.groups:
        for resource in policy.resources:
            if not resource.applies_to(group):
                continue
            for target in resource.targets(group, own_account, zone_accounts.get(resource.id)):
                if not holds(group.permission, target):
                    return group, target
    return None


def stored_policies(policies: Any) -> tuple[Policy, ...]:
    """The policies of a stored token, read leniently: a resource or group this version does not know is left out
    (so it grants nothing), and a policy with no known group grants nothing."""
    catalogue = permission_catalogue()
    parsed = []
    for policy in policies if isinstance(policies, list) else []:
        if not isinstance(policy, Mapping) or policy.get("effect", "allow") not in ("allow", "deny"):
            continue
        found: list[Resource] = []
        named = policy.get("resources")
        for key, value in named.items() if isinstance(named, Mapping) else ():
            try:
                found.extend(parse_resources({key: value}))
            except PolicyError:
                continue
        groups = policy.get("permission_groups")
        entries = groups if isinstance(groups, list) else []
        resolved = tuple(group for entry in entries for group in catalogue.resolve(entry))
        parsed.append(Policy(allow=policy.get("effect", "allow") == "allow", resources=tuple(found), groups=resolved))
    return tuple(parsed)


class On(enum.Enum):
    """Where a route's permission is checked."""

    PATH = "path"  # the zone or account the path names (404 when the caller reaches nothing there)
    USER = "user"  # the calling user: token management
    BODY = "body"  # every zone of the account the body names; the handler checks it (``ApiRequest.require``)
    CALLER = "caller"  # any valid credential: the handler shows only what the caller reaches, or the caller itself


@dataclass(frozen=True, slots=True)
class RouteAccess:
    """The permission one route needs, and where."""

    on: On
    permission: Permission | None = None

    def __str__(self) -> str:
        return f"{self.permission} on {self.on.value}" if self.permission else f"any caller ({self.on.value})"


def path_read(family: str) -> RouteAccess:
    """Reading ``family`` at the zone or account of the path."""
    return RouteAccess(On.PATH, Permission(family, Access.READ))


def path_write(family: str) -> RouteAccess:
    """Writing ``family`` at the zone or account of the path."""
    return RouteAccess(On.PATH, Permission(family, Access.WRITE))


def user_read(family: str) -> RouteAccess:
    """Reading ``family`` of the calling user."""
    return RouteAccess(On.USER, Permission(family, Access.READ))


def user_write(family: str) -> RouteAccess:
    """Writing ``family`` of the calling user."""
    return RouteAccess(On.USER, Permission(family, Access.WRITE))


def body_write(family: str) -> RouteAccess:
    """Writing ``family`` in every zone of the account the body names."""
    return RouteAccess(On.BODY, Permission(family, Access.WRITE))


ANY_CALLER = RouteAccess(On.CALLER)
