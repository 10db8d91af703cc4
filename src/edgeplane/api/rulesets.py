"""The Rulesets API under ``/zones/{zone_id}/rulesets`` and ``/accounts/{account_id}/rulesets``: rulesets (list,
create, get, update, delete), their rules (add, edit, delete), phase entrypoints (get, update), and versions.

Every write stores the whole ruleset as a new version and answers with the whole ruleset. A rule keeps its id and
``version`` while it is unchanged; a rule that changes gets the next ``version``. A rule sent without an id but with
the ``ref`` of an existing rule is that rule (rules-as-code clients send refs, never ids). Managed rulesets (the
catalogue in ``edgeplane.waf.catalogue``) are listed and read in both scopes and are read-only. A zone's
``http_request_firewall_managed`` entrypoint is written through the WAF migration (seed 002), which decides what the
previous WAF does when the new one is saved. Every write takes ``?dry_run=true``: checked in full, stored not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeplane.api.credentials import new_object_id
from edgeplane.api.endpoint import ApiRequest, ApiResult, ApiRoute, reject_unknown, require_object
from edgeplane.api.errors import ApiError, bad_request, conflict, not_found
from edgeplane.api.permissions import path_read, path_write
from edgeplane.api.ruleset_validation import (
    CUSTOM_RULESET_PHASES,
    ENTRYPOINT_EXISTS,
    KINDS,
    MAX_DESCRIPTION,
    MAX_NAME,
    MAX_RULES,
    READ_ONLY_RULESET,
    RULESET_IN_USE,
    SUPPORTED_PHASES,
    RuleContext,
    check_phase,
    check_rule,
    check_rules,
    check_text,
    invalid,
)
from edgeplane.api.ruleset_writes import (
    DEFAULT_ENTRYPOINT_NAME,
    RULE_CONTENT,
    build_rules,
    rule_json,
    same_behaviour,
    save_ruleset,
)
from edgeplane.api.scope import Scope, request_scope
from edgeplane.api.timestamps import rfc3339
from edgeplane.api.waf_migration import put_managed_entrypoint
from edgeplane.store.models import Zone, utc_now
from edgeplane.store.ruleset_models import Ruleset, RulesetVersion, find_entrypoint
from edgeplane.waf.catalogue import (
    MANAGED_PHASE,
    ManagedRuleset,
    load_catalogue,
)

DEFAULT_PER_PAGE = 50
MAX_PER_PAGE = 1000
_RULESET_MEMBERS = frozenset({"name", "description", "kind", "phase", "rules"})
# Members the API answers with that a client may send back on an update; ignored.
_RULESET_READ_ONLY = frozenset({"id", "version", "last_updated"})
_POSITION = frozenset({"position"})


def _entrypoint_kind(scope: Scope) -> str:
    """The kind of the scope's phase entrypoints."""
    return "zone" if scope.zone_id is not None else "root"


# ---- shapes ----


def ruleset_json(ruleset: Ruleset | RulesetVersion, *, with_rules: bool) -> dict[str, Any]:
    """A stored ruleset (or one of its versions) in the v4 shape; list responses leave the rules out."""
    document: dict[str, Any] = {
        "id": ruleset.ruleset_id if isinstance(ruleset, RulesetVersion) else ruleset.id,
        "name": ruleset.name,
        "description": ruleset.description,
        "kind": ruleset.kind,
        "phase": ruleset.phase,
        "version": str(ruleset.version),
        "last_updated": rfc3339(ruleset.last_updated),
    }
    if with_rules:
        document["rules"] = list(ruleset.rules)
    return document


def _context(session: Session, scope: Scope, phase: str, kind: str, *, exclude: str | None = None) -> RuleContext:
    """What rules of a ``kind`` ruleset of ``phase`` in ``scope`` may name: the account's custom rulesets."""
    custom: dict[str, tuple[str, frozenset[str]]] = {}
    if scope.zone_id is None:
        query = select(Ruleset).where(
            Ruleset.account_id == scope.account_id, Ruleset.zone_id.is_(None), Ruleset.kind == "custom"
        )
        for ruleset in session.scalars(query).all():
            if ruleset.id != exclude:
                custom[ruleset.id] = (ruleset.phase, frozenset(rule["id"] for rule in ruleset.rules))
    return RuleContext(phase=phase, kind=kind, custom_rulesets=custom)


def _in_scope(session: Session, scope: Scope) -> list[Ruleset]:
    query = select(Ruleset).where(Ruleset.account_id == scope.account_id)
    if scope.zone_id is not None:
        query = query.where(Ruleset.zone_id == scope.zone_id)
    else:
        query = query.where(Ruleset.zone_id.is_(None))
    return list(session.scalars(query.order_by(Ruleset.phase, Ruleset.kind, Ruleset.name, Ruleset.id)).all())


def _dry_run(request: ApiRequest) -> bool:
    """``?dry_run=true``: the write is checked in full and answered with ``result: null``, and nothing is stored."""
    return request.query.get("dry_run", "").lower() in ("true", "1")


def _managed(ruleset_id: str) -> ManagedRuleset | None:
    return load_catalogue().get(ruleset_id)


def _read_only(ruleset_id: str) -> ApiError:
    return ApiError(
        403,
        READ_ONLY_RULESET,
        f"managed ruleset {ruleset_id} is read-only: deploy it with an execute rule and change it with overrides",
    )


def _stored(request: ApiRequest, scope: Scope, ruleset_id: str) -> Ruleset:
    """The scope's ruleset ``ruleset_id`` (403 for a managed ruleset, which cannot be written; else 404)."""
    if _managed(ruleset_id) is not None:
        raise _read_only(ruleset_id)
    ruleset = request.session.get(Ruleset, ruleset_id)
    if ruleset is None or ruleset.account_id != scope.account_id or ruleset.zone_id != scope.zone_id:
        raise not_found(request.path)
    return ruleset


def _entrypoint(request: ApiRequest, scope: Scope) -> Ruleset:
    """The phase's entrypoint; 404 when there is none, as for a phase edgeplane does not run (which never has one:
    the real API answers a read of a phase without entrypoint the same way)."""
    phase = request.path_params["phase"]
    if phase not in SUPPORTED_PHASES:
        raise not_found(request.path)
    entrypoint = find_entrypoint(request.session, zone_id=scope.zone_id, account_id=scope.account_id, phase=phase)
    if entrypoint is None:
        raise not_found(request.path)
    return entrypoint


# ---- rulesets ----


def list_rulesets(request: ApiRequest) -> ApiResult:
    """``GET /rulesets``: the managed rulesets and the scope's own, without their rules; cursor pagination
    (``per_page``, ``cursor``) as the official SDK reads it."""
    scope = request_scope(request)
    listed = [managed.to_json(with_rules=False) for managed in load_catalogue().values()]
    listed += [ruleset_json(ruleset, with_rules=False) for ruleset in _in_scope(request.session, scope)]
    return _cursor_page(listed, request.query)


def _cursor_page(items: list[Any], query: Mapping[str, str]) -> ApiResult:
    per_page_text = query.get("per_page") or str(DEFAULT_PER_PAGE)
    cursor_text = query.get("cursor") or "0"
    if not per_page_text.isdigit() or not 1 <= int(per_page_text) <= MAX_PER_PAGE:
        raise bad_request(f"per_page must be an integer from 1 to {MAX_PER_PAGE}", pointer="/per_page")
    if not cursor_text.isdigit():
        raise bad_request("cursor is not one this API handed out", pointer="/cursor")
    start, per_page = int(cursor_text), int(per_page_text)
    chosen = items[start : start + per_page]
    info: dict[str, Any] = {"count": len(chosen), "per_page": per_page}
    if start + per_page < len(items):
        info["cursor"] = str(start + per_page)
    return ApiResult(chosen, result_info=info)


def get_ruleset(request: ApiRequest) -> ApiResult:
    """``GET /rulesets/{ruleset_id}``: a managed ruleset or one of the scope's, with its rules."""
    scope = request_scope(request)
    ruleset_id = request.path_params["ruleset_id"]
    managed = _managed(ruleset_id)
    if managed is not None:
        return ApiResult(managed.to_json(with_rules=True))
    return ApiResult(ruleset_json(_stored(request, scope, ruleset_id), with_rules=True))


def create_ruleset(request: ApiRequest) -> ApiResult:
    """``POST /rulesets``: a phase entrypoint (kind ``zone`` in a zone, ``root`` in an account; 409 when the phase
    has one) or, in an account, a ``custom`` ruleset of the custom phase. 400 for anything else."""
    scope = request_scope(request, write=True)
    body = require_object(request.body)
    reject_unknown(body, _RULESET_MEMBERS)
    kind = body.get("kind")
    if kind not in KINDS:
        raise invalid(f"kind must be one of {', '.join(KINDS)}", "/kind")
    phase = check_phase(body.get("phase"))
    if kind == "managed":
        raise ApiError(403, READ_ONLY_RULESET, "managed rulesets are provided by edgeplane and cannot be created")
    if kind == "custom":
        if scope.zone_id is not None:
            raise invalid("custom rulesets belong to an account: create them under /accounts/{account_id}", "/kind")
        if phase not in CUSTOM_RULESET_PHASES:
            raise invalid(f"custom rulesets are of phase {' or '.join(CUSTOM_RULESET_PHASES)}", "/phase")
    elif kind != _entrypoint_kind(scope):
        raise invalid(f"a phase entrypoint here is of kind {_entrypoint_kind(scope)}", "/kind")
    elif find_entrypoint(request.session, zone_id=scope.zone_id, account_id=scope.account_id, phase=phase):
        raise conflict(
            f"the {phase} phase already has an entrypoint ruleset; update it with PUT "
            f"/rulesets/phases/{phase}/entrypoint",
            code=ENTRYPOINT_EXISTS,
        )
    name = check_text(body, "name", MAX_NAME, required=True) or ""
    description = check_text(body, "description", MAX_DESCRIPTION) or ""
    inputs = check_rules(body.get("rules", []), _context(request.session, scope, phase, kind))
    if _dry_run(request):
        return ApiResult(None)
    when = utc_now()
    ruleset = Ruleset(
        id=new_object_id(),
        account_id=scope.account_id,
        zone_id=scope.zone_id,
        name=name,
        description=description,
        kind=kind,
        phase=phase,
    )
    save_ruleset(request.session, ruleset, build_rules([], inputs, when), when, new=True)
    return ApiResult(ruleset_json(ruleset, with_rules=True), changed=True)


def update_ruleset(request: ApiRequest) -> ApiResult:
    """``PUT /rulesets/{ruleset_id}``: new ``rules`` (all of them; absent keeps them), ``name``, ``description``.
    ``kind`` and ``phase`` may be sent but not changed."""
    scope = request_scope(request, write=True)
    ruleset = _stored(request, scope, request.path_params["ruleset_id"])
    return _replace(request, scope, ruleset)


def _replace(request: ApiRequest, scope: Scope, ruleset: Ruleset) -> ApiResult:
    body = require_object(request.body)
    reject_unknown(body, _RULESET_MEMBERS | _RULESET_READ_ONLY)
    if body.get("id") not in (None, ruleset.id):
        raise invalid("id does not match the ruleset being updated", "/id")
    for member in ("kind", "phase"):
        if body.get(member) not in (None, getattr(ruleset, member)):
            raise invalid(f"{member} cannot be changed (the ruleset is {getattr(ruleset, member)})", f"/{member}")
    name = check_text(body, "name", MAX_NAME)
    description = check_text(body, "description", MAX_DESCRIPTION)
    when = utc_now()
    rules = list(ruleset.rules)
    if "rules" in body:
        context = _context(request.session, scope, ruleset.phase, ruleset.kind, exclude=ruleset.id)
        rules = build_rules(rules, check_rules(body["rules"], context), when)
    if _dry_run(request):
        return ApiResult(None)
    if name is not None and name.strip():
        ruleset.name = name
    if description is not None:
        ruleset.description = description
    save_ruleset(request.session, ruleset, rules, when, new=False)
    return ApiResult(ruleset_json(ruleset, with_rules=True), changed=True)


def delete_ruleset(request: ApiRequest) -> ApiResult:
    """``DELETE /rulesets/{ruleset_id}`` with all its versions; 409 while an account rule executes or skips it."""
    scope = request_scope(request, write=True)
    ruleset = _stored(request, scope, request.path_params["ruleset_id"])
    if ruleset.kind == "custom":
        for other in _in_scope(request.session, scope):
            if other.id != ruleset.id and any(_names_ruleset(rule, ruleset.id) for rule in other.rules):
                raise conflict(
                    f"ruleset {ruleset.id} is in use by ruleset {other.id}; remove the rules that name it first",
                    code=RULESET_IN_USE,
                )
    if _dry_run(request):
        return ApiResult(None)
    request.session.delete(ruleset)
    return ApiResult(None, changed=True)


def _names_ruleset(rule: Mapping[str, Any], ruleset_id: str) -> bool:
    parameters = rule.get("action_parameters") or {}
    return bool(
        parameters.get("id") == ruleset_id
        or ruleset_id in (parameters.get("rulesets") or [])
        or ruleset_id in (parameters.get("rules") or {})
    )


# ---- rules ----


def create_rule(request: ApiRequest) -> ApiResult:
    """``POST /rulesets/{ruleset_id}/rules``: adds a rule (last, or at ``position`` ``{before}``, ``{after}`` or
    ``{index}``, 1-based) and answers the whole ruleset."""
    scope = request_scope(request, write=True)
    ruleset = _stored(request, scope, request.path_params["ruleset_id"])
    body = require_object(request.body)
    context = _context(request.session, scope, ruleset.phase, ruleset.kind, exclude=ruleset.id)
    checked = check_rule(body, context, "", extra=_POSITION)
    if checked.id is not None:
        raise invalid("a new rule's id is chosen by the API; leave id out", "/id")
    rules = list(ruleset.rules)
    if checked.ref is not None and any(rule.get("ref") == checked.ref for rule in rules):
        raise invalid(f"ruleset already has a rule with ref {checked.ref!r}", "/ref")
    if len(rules) >= MAX_RULES:
        raise invalid(f"a ruleset holds at most {MAX_RULES} rules", "")
    when = utc_now()
    rule = rule_json(new_object_id(), checked.ref, checked.content, 1, rfc3339(when) or "")
    rules.insert(_position(body.get("position"), rules, default=len(rules)), rule)
    if _dry_run(request):
        return ApiResult(None)
    save_ruleset(request.session, ruleset, rules, when, new=False)
    return ApiResult(ruleset_json(ruleset, with_rules=True), changed=True)


def edit_rule(request: ApiRequest) -> ApiResult:
    """``PATCH /rulesets/{ruleset_id}/rules/{rule_id}``: changes the members sent (a new ``action`` without
    ``action_parameters`` drops the old ones), optionally moves the rule (``position``); answers the ruleset."""
    scope = request_scope(request, write=True)
    ruleset = _stored(request, scope, request.path_params["ruleset_id"])
    rules = list(ruleset.rules)
    index = _rule_index(request, rules)
    old = rules[index]
    body = require_object(request.body)
    if body.get("id") not in (None, "", old["id"]):
        raise invalid("id does not match the rule being edited", "/id")
    merged = {member: old[member] for member in RULE_CONTENT if member in old}
    if body.get("action") not in (None, old["action"]) and "action_parameters" not in body:
        merged.pop("action_parameters", None)
        merged.pop("logging", None)
    merged.update({member: value for member, value in body.items() if member not in ("id", "position")})
    for member in ("version", "last_updated", "categories"):
        merged.pop(member, None)
    context = _context(request.session, scope, ruleset.phase, ruleset.kind, exclude=ruleset.id)
    checked = check_rule(merged, context, "")
    if checked.ref is not None and any(r.get("ref") == checked.ref and r["id"] != old["id"] for r in rules):
        raise invalid(f"ruleset already has a rule with ref {checked.ref!r}", "/ref")
    when = utc_now()
    rule = rule_json(old["id"], checked.ref, checked.content, int(old["version"]), old["last_updated"])
    if not same_behaviour(old, rule):
        rule = rule_json(old["id"], checked.ref, checked.content, int(old["version"]) + 1, rfc3339(when) or "")
    del rules[index]
    rules.insert(_position(body.get("position"), rules, default=index), rule)
    if _dry_run(request):
        return ApiResult(None)
    save_ruleset(request.session, ruleset, rules, when, new=False)
    return ApiResult(ruleset_json(ruleset, with_rules=True), changed=True)


def delete_rule(request: ApiRequest) -> ApiResult:
    """``DELETE /rulesets/{ruleset_id}/rules/{rule_id}``; answers the ruleset without the rule."""
    scope = request_scope(request, write=True)
    ruleset = _stored(request, scope, request.path_params["ruleset_id"])
    rules = list(ruleset.rules)
    del rules[_rule_index(request, rules)]
    if _dry_run(request):
        return ApiResult(None)
    save_ruleset(request.session, ruleset, rules, utc_now(), new=False)
    return ApiResult(ruleset_json(ruleset, with_rules=True), changed=True)


def _rule_index(request: ApiRequest, rules: list[dict[str, Any]]) -> int:
    rule_id = request.path_params["rule_id"]
    for index, rule in enumerate(rules):
        if rule["id"] == rule_id:
            return index
    raise not_found(request.path)


def _position(position: Any, rules: list[dict[str, Any]], *, default: int) -> int:
    """Where a rule goes among ``rules``: ``{"before": id}`` (``""``: first), ``{"after": id}`` (``""``: last) or
    ``{"index": n}`` (1-based; past the end is last)."""
    if position is None:
        return default
    if not isinstance(position, dict) or len(position) != 1:
        raise invalid('position must be one of {"before": id}, {"after": id} or {"index": n}', "/position")
    ((where, value),) = position.items()
    if where == "index":
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise invalid("index must be a positive integer (1 is first)", "/position/index")
        return min(value - 1, len(rules))
    if where not in ("before", "after") or not isinstance(value, str):
        raise invalid('position must be one of {"before": id}, {"after": id} or {"index": n}', "/position")
    if value == "":
        return 0 if where == "before" else len(rules)
    for index, rule in enumerate(rules):
        if rule["id"] == value:
            return index if where == "before" else index + 1
    raise invalid(f"rule {value} is not a rule of this ruleset", f"/position/{where}")


# ---- phase entrypoints ----


def get_entrypoint(request: ApiRequest) -> ApiResult:
    """``GET /rulesets/phases/{phase}/entrypoint``: 404 when the phase has no entrypoint yet."""
    scope = request_scope(request)
    return ApiResult(ruleset_json(_entrypoint(request, scope), with_rules=True))


def put_entrypoint(request: ApiRequest) -> ApiResult:
    """``PUT /rulesets/phases/{phase}/entrypoint``: replaces the entrypoint's rules, creating it (name ``default``)
    when missing. A zone's managed-phase entrypoint goes through the WAF migration (``waf_migration`` parameter)."""
    scope = request_scope(request, write=True)
    phase = check_phase(request.path_params["phase"], pointer="/phase")
    if scope.zone_id is not None and phase == MANAGED_PHASE:
        zone = request.session.get(Zone, scope.zone_id)
        if zone is None:  # _scope found it in this transaction; kept for the type checker
            raise not_found(request.path)
        return put_managed_entrypoint(request, zone, lambda saving: _save_entrypoint(saving, scope, phase))
    return _save_entrypoint(request, scope, phase)


def _save_entrypoint(request: ApiRequest, scope: Scope, phase: str) -> ApiResult:
    body = require_object(request.body)
    reject_unknown(body, _RULESET_MEMBERS | _RULESET_READ_ONLY)
    if "rules" not in body:
        raise invalid("rules is required (an empty array removes every rule)", "/rules")
    entrypoint = find_entrypoint(request.session, zone_id=scope.zone_id, account_id=scope.account_id, phase=phase)
    if entrypoint is not None:
        return _replace(request, scope, entrypoint)
    if body.get("kind") not in (None, _entrypoint_kind(scope)):
        raise invalid(f"a phase entrypoint here is of kind {_entrypoint_kind(scope)}", "/kind")
    if body.get("phase") not in (None, phase):
        raise invalid(f"phase does not match the path ({phase})", "/phase")
    name = check_text(body, "name", MAX_NAME)
    description = check_text(body, "description", MAX_DESCRIPTION) or ""
    inputs = check_rules(body["rules"], _context(request.session, scope, phase, _entrypoint_kind(scope)))
    if _dry_run(request):
        return ApiResult(None)
    when = utc_now()
    entrypoint = Ruleset(
        id=new_object_id(),
        account_id=scope.account_id,
        zone_id=scope.zone_id,
        name=name if name and name.strip() else DEFAULT_ENTRYPOINT_NAME,
        description=description,
        kind=_entrypoint_kind(scope),
        phase=phase,
    )
    save_ruleset(request.session, entrypoint, build_rules([], inputs, when), when, new=True)
    return ApiResult(ruleset_json(entrypoint, with_rules=True), changed=True)


# ---- versions ----


def list_versions(request: ApiRequest) -> ApiResult:
    """``GET /rulesets/{ruleset_id}/versions``: every stored version, oldest first, without rules."""
    scope = request_scope(request)
    ruleset_id = request.path_params["ruleset_id"]
    managed = _managed(ruleset_id)
    if managed is not None:
        return ApiResult([managed.to_json(with_rules=False)])
    return _versions(request, _stored(request, scope, ruleset_id))


def get_version(request: ApiRequest) -> ApiResult:
    """``GET /rulesets/{ruleset_id}/versions/{version}``: that version with its rules; 404 when it is not stored."""
    scope = request_scope(request)
    ruleset_id = request.path_params["ruleset_id"]
    managed = _managed(ruleset_id)
    if managed is not None:
        if request.path_params["version"] != managed.version:
            raise not_found(request.path)
        return ApiResult(managed.to_json(with_rules=True))
    return ApiResult(ruleset_json(_version(request, _stored(request, scope, ruleset_id)), with_rules=True))


def delete_version(request: ApiRequest) -> ApiResult:
    """``DELETE /rulesets/{ruleset_id}/versions/{version}``: forgets an older version; the current version cannot
    be deleted (400)."""
    scope = request_scope(request, write=True)
    ruleset = _stored(request, scope, request.path_params["ruleset_id"])
    stored = _version(request, ruleset)
    if stored.version == ruleset.version:
        raise invalid("the current version of a ruleset cannot be deleted", "/version")
    if _dry_run(request):
        return ApiResult(None)
    request.session.delete(stored)
    return ApiResult(None)


def list_entrypoint_versions(request: ApiRequest) -> ApiResult:
    """``GET /rulesets/phases/{phase}/entrypoint/versions``."""
    return _versions(request, _entrypoint(request, request_scope(request)))


def get_entrypoint_version(request: ApiRequest) -> ApiResult:
    """``GET /rulesets/phases/{phase}/entrypoint/versions/{version}``."""
    entrypoint = _entrypoint(request, request_scope(request))
    return ApiResult(ruleset_json(_version(request, entrypoint), with_rules=True))


def _versions(request: ApiRequest, ruleset: Ruleset) -> ApiResult:
    query = select(RulesetVersion).where(RulesetVersion.ruleset_id == ruleset.id).order_by(RulesetVersion.version)
    return ApiResult([ruleset_json(version, with_rules=False) for version in request.session.scalars(query).all()])


def _version(request: ApiRequest, ruleset: Ruleset) -> RulesetVersion:
    number = request.path_params["version"]
    # A number past the column's range cannot be a stored version (and must not reach the database).
    valid = number.isdigit() and len(number) <= 9
    stored = request.session.get(RulesetVersion, (ruleset.id, int(number))) if valid else None
    if stored is None:
        raise not_found(request.path)
    return stored


# ---- routes ----


def _routes() -> list[ApiRoute]:
    table: list[ApiRoute] = []
    # Zone rulesets are the zone's WAF (Zone WAF Read/Write); the account's are Account Rulesets Read/Write.
    for scope, family in (("/zones/{zone_id}", "zone_waf"), ("/accounts/{account_id}", "account_rulesets")):
        read, write = path_read(family), path_write(family)
        base = scope + "/rulesets"
        entrypoint = base + "/phases/{phase}/entrypoint"
        table += [
            ApiRoute(entrypoint, "GET", get_entrypoint, read),
            ApiRoute(entrypoint, "PUT", put_entrypoint, write),
            ApiRoute(entrypoint + "/versions", "GET", list_entrypoint_versions, read),
            ApiRoute(entrypoint + "/versions/{version}", "GET", get_entrypoint_version, read),
            ApiRoute(base, "GET", list_rulesets, read),
            ApiRoute(base, "POST", create_ruleset, write),
            ApiRoute(base + "/{ruleset_id}", "GET", get_ruleset, read),
            ApiRoute(base + "/{ruleset_id}", "PUT", update_ruleset, write),
            ApiRoute(base + "/{ruleset_id}", "DELETE", delete_ruleset, write),
            ApiRoute(base + "/{ruleset_id}/rules", "POST", create_rule, write),
            ApiRoute(base + "/{ruleset_id}/rules/{rule_id}", "PATCH", edit_rule, write),
            ApiRoute(base + "/{ruleset_id}/rules/{rule_id}", "DELETE", delete_rule, write),
            ApiRoute(base + "/{ruleset_id}/versions", "GET", list_versions, read),
            ApiRoute(base + "/{ruleset_id}/versions/{version}", "GET", get_version, read),
            ApiRoute(base + "/{ruleset_id}/versions/{version}", "DELETE", delete_version, write),
        ]
    return table


# Every Rulesets API route (path under ``/client/v4``, method, handler, permission), in both scopes; the phase
# entrypoint paths come before the ``/rulesets/{ruleset_id}`` paths.
ROUTES: list[ApiRoute] = _routes()
