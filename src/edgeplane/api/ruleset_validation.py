"""What a ruleset write may hold: the members of rulesets and rules, each action's parameters, and the expressions.

Every problem is a 400 ``ApiError`` whose ``source.pointer`` names the offending member, relative to the request
body (``/rules/3/action_parameters/overrides/rules/0/id``). Checks follow the Rulesets API as the official clients
use it; where the product's rules are not written down the choices are documented in docs/rulesets.md:

- phases: ``http_request_firewall_custom``, ``http_ratelimit`` and ``http_request_firewall_managed`` (any other
  phase is a 400);
- actions per phase: custom phase ``block``, ``challenge``, ``js_challenge``, ``managed_challenge``, ``log``,
  ``skip``; rate limiting phase the same but ``skip`` (in both, an account ``root`` entrypoint adds ``execute`` of
  the account's custom rulesets of the phase); managed phase ``execute``, ``skip``, ``log``;
- a rule of the rate limiting phase (but an ``execute``) has a ``ratelimit`` object, checked by
  ``edgeplane.waf.rate_limit_spec`` and stored as written; no other rule has one;
- ``skip`` in the custom phase skips ``ruleset: current``, ``phases`` or ``products``; in the managed phase
  ``ruleset: current``, ``rulesets`` or ``rules`` (exceptions for managed rules);
- ``execute`` runs a managed ruleset (managed phase) or an account custom ruleset of the same phase (account
  entrypoint); overrides name rules and categories that exist in it, ``score_threshold`` only where the rule has one.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeGuard

from edgeplane.api.errors import ApiError, bad_request
from edgeplane.rules import RulesError, check_expression
from edgeplane.waf.catalogue import MANAGED_PHASE, OWASP_RULESET_ID, load_catalogue, owasp_unavailable_reason
from edgeplane.waf.errors import RateLimitError
from edgeplane.waf.rate_limit_spec import INVALID_RATELIMIT, parse_rate_limit

CUSTOM_PHASE: Final = "http_request_firewall_custom"
RATELIMIT_PHASE: Final = "http_ratelimit"
# In the order the engine runs them, as the product does.
SUPPORTED_PHASES: Final = (CUSTOM_PHASE, RATELIMIT_PHASE, MANAGED_PHASE)
# The phases an account's custom rulesets may be of (each runs from the account entrypoint of its phase).
CUSTOM_RULESET_PHASES: Final = (CUSTOM_PHASE, RATELIMIT_PHASE)
KINDS: Final = ("managed", "custom", "root", "zone")

# v4 error codes of the Rulesets API (edgeplane's choice; the product does not publish them).
INVALID_RULESET: Final = 20001
INVALID_EXPRESSION: Final = 20002
UNSUPPORTED_PHASE: Final = 20003
READ_ONLY_RULESET: Final = 20004
RULESET_IN_USE: Final = 20005
ENTRYPOINT_EXISTS: Final = 20006
RULESET_UNAVAILABLE: Final = 20007  # a managed ruleset this server cannot run (the OWASP Core Rule Set not installed)

MAX_RULES: Final = 1000
MAX_NAME: Final = 255
MAX_DESCRIPTION: Final = 500
MAX_REF: Final = 256
MAX_EXPRESSION: Final = 4096
MAX_RESPONSE_CONTENT: Final = 10 * 1024
MAX_RATELIMIT_RESPONSE_CONTENT: Final = 30 * 1024

_CHALLENGES: Final = frozenset({"challenge", "js_challenge", "managed_challenge"})
_TERMINATING: Final = frozenset({"block"}) | _CHALLENGES
_PHASE_ACTIONS: Final[Mapping[str, frozenset[str]]] = {
    CUSTOM_PHASE: _TERMINATING | {"log", "skip"},
    RATELIMIT_PHASE: _TERMINATING | {"log"},
    MANAGED_PHASE: frozenset({"execute", "skip", "log"}),
}
# What an override may set a rule's action to.
OVERRIDE_ACTIONS: Final = _TERMINATING | {"log"}
# Later phases a custom-phase skip rule may skip, and the products (Cloudflare's names) it may skip.
SKIPPABLE_PHASES: Final = (RATELIMIT_PHASE, MANAGED_PHASE, "http_request_sbfm")
SKIPPABLE_PRODUCTS: Final = ("zoneLockdown", "uaBlock", "bic", "hot", "securityLevel", "rateLimit", "waf")
_SKIP_MEMBERS: Final[Mapping[str, frozenset[str]]] = {  # the phases that have skip
    CUSTOM_PHASE: frozenset({"ruleset", "phases", "products"}),
    MANAGED_PHASE: frozenset({"ruleset", "rulesets", "rules"}),
}
RESPONSE_CONTENT_TYPES: Final = ("text/html", "text/plain", "application/json", "text/xml")
# The Core Ruleset's paranoia levels are categories whether or not a shipped rule carries each one.
_PARANOIA_LEVELS: Final = frozenset(f"paranoia-level-{level}" for level in range(1, 5))

_ID = re.compile(r"[0-9a-f]{32}")
_RULE_MEMBERS: Final = frozenset(
    {"id", "ref", "action", "expression", "description", "enabled", "action_parameters", "logging", "ratelimit"}
)
# Members the API answers with that a client may send back unchanged; they are ignored.
_RULE_READ_ONLY: Final = frozenset({"version", "last_updated", "categories"})


def _one_of(value: Any, allowed: Collection[str]) -> TypeGuard[str]:
    """Whether ``value`` is one of the strings ``allowed`` (any JSON value may arrive, lists included)."""
    return isinstance(value, str) and value in allowed


def invalid(message: str, pointer: str) -> ApiError:
    """A 400 for a ruleset or rule member, pointing at it."""
    return bad_request(message, code=INVALID_RULESET, pointer=pointer)


def check_phase(phase: Any, pointer: str = "/phase") -> str:
    """``phase`` if edgeplane runs it; a 400 naming the supported phases otherwise."""
    if phase not in SUPPORTED_PHASES:
        raise bad_request(
            f"phase {phase!r} is not supported; supported phases: {', '.join(SUPPORTED_PHASES)}",
            code=UNSUPPORTED_PHASE,
            pointer=pointer,
        )
    return str(phase)


def check_text(body: Mapping[str, Any], member: str, limit: int, *, required: bool = False) -> str | None:
    """The string member ``member`` of ``body`` (None when absent and not required); a 400 when it is not a string,
    is longer than ``limit`` characters, or is missing or empty while required."""
    value = body.get(member)
    if value is None:
        if required:
            raise invalid(f"{member} is required", f"/{member}")
        return None
    if not isinstance(value, str):
        raise invalid(f"{member} must be a string", f"/{member}")
    if len(value) > limit:
        raise invalid(f"{member} must be at most {limit} characters", f"/{member}")
    if required and not value.strip():
        raise invalid(f"{member} must not be empty", f"/{member}")
    return value


@dataclass(frozen=True, slots=True)
class RuleContext:
    """Where rules are being written: the ruleset's phase and kind, and the account's custom rulesets (by id, their
    phase and rule ids) that ``execute`` and ``skip`` may name."""

    phase: str
    kind: str
    custom_rulesets: Mapping[str, tuple[str, frozenset[str]]] = field(default_factory=dict)

    @property
    def actions(self) -> frozenset[str]:
        """The actions a rule of this ruleset may take."""
        allowed = _PHASE_ACTIONS[self.phase]
        if self.phase in CUSTOM_RULESET_PHASES and self.kind == "root":
            allowed = allowed | {"execute"}
        return allowed


@dataclass(frozen=True, slots=True)
class RuleInput:
    """A checked rule as the client wrote it: its id (None for a new rule), ref (None to default to the id), and the
    members that make up the rule's behaviour."""

    id: str | None
    ref: str | None
    content: dict[str, Any]


def check_rules(rules: Any, context: RuleContext, pointer: str = "/rules") -> list[RuleInput]:
    """Each rule of ``rules`` checked (see ``check_rule``); a 400 when ``rules`` is not an array of at most
    ``MAX_RULES`` rules or when two rules share an id or a ref."""
    if not isinstance(rules, list):
        raise invalid("rules must be an array of rules", pointer)
    if len(rules) > MAX_RULES:
        raise invalid(f"a ruleset holds at most {MAX_RULES} rules", pointer)
    checked = [check_rule(rule, context, f"{pointer}/{index}") for index, rule in enumerate(rules)]
    seen_ids: set[str] = set()
    seen_refs: set[str] = set()
    for index, rule in enumerate(checked):
        if rule.id is not None:
            if rule.id in seen_ids:
                raise invalid(f"rule id {rule.id} appears more than once", f"{pointer}/{index}/id")
            seen_ids.add(rule.id)
        if rule.ref is not None:
            if rule.ref in seen_refs:
                raise invalid(f"rule ref {rule.ref!r} appears more than once", f"{pointer}/{index}/ref")
            seen_refs.add(rule.ref)
    return checked


def check_rule(rule: Any, context: RuleContext, pointer: str, *, extra: frozenset[str] = frozenset()) -> RuleInput:
    """A rule checked against its phase: members, action, action parameters, expression. ``extra`` names further
    members the caller handles itself (``position``). Raises a 400 ``ApiError`` pointing under ``pointer``."""
    if not isinstance(rule, dict):
        raise invalid("a rule must be an object", pointer)
    unknown = sorted(set(rule) - _RULE_MEMBERS - _RULE_READ_ONLY - extra)
    if unknown:
        raise invalid(f"unknown rule member {unknown[0]!r}", f"{pointer}/{unknown[0]}")
    rule_id = rule.get("id")
    if rule_id in (None, ""):
        rule_id = None  # a new rule (the migration's configuration sends empty ids)
    elif not isinstance(rule_id, str) or not _ID.fullmatch(rule_id):
        raise invalid("id must be 32 lowercase hexadecimal characters", f"{pointer}/id")
    ref = rule.get("ref")
    if ref in (None, ""):
        ref = None
    elif not isinstance(ref, str) or len(ref) > MAX_REF:
        raise invalid(f"ref must be a string of at most {MAX_REF} characters", f"{pointer}/ref")
    action = rule.get("action")
    if not _one_of(action, context.actions):
        raise invalid(
            f"action {action!r} is not allowed in phase {context.phase}; allowed: {', '.join(sorted(context.actions))}",
            f"{pointer}/action",
        )
    content: dict[str, Any] = {
        "action": action,
        "expression": _expression(rule.get("expression"), f"{pointer}/expression"),
    }
    if "description" in rule:
        description = rule["description"]
        if description is not None and not isinstance(description, str):
            raise invalid("description must be a string", f"{pointer}/description")
        if description is not None and len(description) > MAX_DESCRIPTION:
            raise invalid(f"description must be at most {MAX_DESCRIPTION} characters", f"{pointer}/description")
        content["description"] = description or ""
    if "enabled" in rule:
        if not isinstance(rule["enabled"], bool):
            raise invalid("enabled must be true or false", f"{pointer}/enabled")
        content["enabled"] = rule["enabled"]
    parameters = _action_parameters(action, rule.get("action_parameters"), context, f"{pointer}/action_parameters")
    if parameters is not None:
        content["action_parameters"] = parameters
    ratelimit = _ratelimit(rule.get("ratelimit"), action, context, f"{pointer}/ratelimit")
    if ratelimit is not None:
        content["ratelimit"] = ratelimit
    if rule.get("logging") is not None:
        if action != "skip":
            raise invalid("logging is only available on skip rules", f"{pointer}/logging")
        content["logging"] = _logging(rule["logging"], f"{pointer}/logging")
    return RuleInput(id=rule_id, ref=ref, content=content)


def _expression(expression: Any, pointer: str) -> str:
    if not isinstance(expression, str) or not expression.strip():
        raise bad_request(
            "expression is required and must be a non-empty string", code=INVALID_EXPRESSION, pointer=pointer
        )
    if len(expression) > MAX_EXPRESSION:
        raise bad_request(
            f"expression must be at most {MAX_EXPRESSION} characters", code=INVALID_EXPRESSION, pointer=pointer
        )
    try:
        check_expression(expression)
    except RulesError as error:
        raise bad_request(
            f"invalid expression: {error.message} at position {error.position}",
            code=INVALID_EXPRESSION,
            pointer=pointer,
        ) from None
    return expression


def _ratelimit(ratelimit: Any, action: str, context: RuleContext, pointer: str) -> dict[str, Any] | None:
    """A rate limiting rule's ``ratelimit`` object as written (a deep copy), once ``parse_rate_limit`` accepts it;
    None for a rule that has none. Required in the rate limiting phase but on ``execute`` rules; refused
    elsewhere."""
    if context.phase != RATELIMIT_PHASE or action == "execute":
        if ratelimit is not None:
            raise invalid(f"ratelimit is only available on the rules of phase {RATELIMIT_PHASE}", pointer)
        return None
    if ratelimit is None:
        raise bad_request(
            "a rate limiting rule needs a ratelimit object (characteristics, period, requests_per_period, ...)",
            code=INVALID_RATELIMIT,
            pointer=pointer,
        )
    try:
        parse_rate_limit(ratelimit, action)
    except RateLimitError as error:
        raise bad_request(error.message, code=error.code, pointer=pointer + error.pointer) from None
    return copy.deepcopy(dict(ratelimit))


def _logging(logging: Any, pointer: str) -> dict[str, Any]:
    if not isinstance(logging, dict) or set(logging) != {"enabled"} or not isinstance(logging["enabled"], bool):
        raise invalid('logging must be {"enabled": true|false}', pointer)
    return {"enabled": logging["enabled"]}


def _object(value: Any, pointer: str, allowed: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid("must be an object", pointer)
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise invalid(f"unknown member {unknown[0]!r}", f"{pointer}/{unknown[0]}")
    return value


def _action_parameters(action: str, parameters: Any, context: RuleContext, pointer: str) -> dict[str, Any] | None:
    if action == "block" and context.phase == RATELIMIT_PHASE:
        return _ratelimit_block_parameters(parameters, pointer) if parameters is not None else None
    if action == "block":
        return _block_parameters(parameters, pointer) if parameters is not None else None
    if action == "skip":
        return _skip_parameters(parameters, context, pointer)
    if action == "execute":
        return _execute_parameters(parameters, context, pointer)
    if parameters not in (None, {}):
        raise invalid(f"the {action} action takes no action_parameters", pointer)
    return None


def _block_parameters(parameters: Any, pointer: str) -> dict[str, Any] | None:
    parameters = _object(parameters, pointer, frozenset({"response"}))
    if parameters.get("response") is None:
        return None
    response = _object(
        parameters["response"], f"{pointer}/response", frozenset({"status_code", "content", "content_type"})
    )
    status = response.get("status_code")
    if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 499:
        raise invalid("status_code must be an integer from 400 to 499", f"{pointer}/response/status_code")
    content = response.get("content", "")
    if not isinstance(content, str) or len(content.encode()) > MAX_RESPONSE_CONTENT:
        raise invalid(
            f"content must be a string of at most {MAX_RESPONSE_CONTENT} bytes", f"{pointer}/response/content"
        )
    content_type = response.get("content_type", "text/plain")
    if content_type not in RESPONSE_CONTENT_TYPES:
        raise invalid(
            f"content_type must be one of {', '.join(RESPONSE_CONTENT_TYPES)}", f"{pointer}/response/content_type"
        )
    return {"response": {"status_code": status, "content": content, "content_type": content_type}}


def _ratelimit_block_parameters(parameters: Any, pointer: str) -> dict[str, Any] | None:
    """A rate limiting rule's custom ``response``, stored as written: every member is optional (the edge answers
    429 when ``status_code`` is absent), ``content`` may be up to ``MAX_RATELIMIT_RESPONSE_CONTENT`` bytes."""
    parameters = _object(parameters, pointer, frozenset({"response"}))
    if parameters.get("response") is None:
        return None
    where = f"{pointer}/response"
    response = _object(parameters["response"], where, frozenset({"status_code", "content", "content_type"}))
    status = response.get("status_code")
    if status is not None and (not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 499):
        raise invalid("status_code must be an integer from 400 to 499", f"{where}/status_code")
    content = response.get("content")
    if content is not None and not isinstance(content, str):
        raise invalid("content must be a string", f"{where}/content")
    if content is not None and len(content.encode()) > MAX_RATELIMIT_RESPONSE_CONTENT:
        raise invalid(f"content must be at most {MAX_RATELIMIT_RESPONSE_CONTENT} bytes (30 KB)", f"{where}/content")
    content_type = response.get("content_type")
    if content_type is not None and content_type not in RESPONSE_CONTENT_TYPES:
        raise invalid(f"content_type must be one of {', '.join(RESPONSE_CONTENT_TYPES)}", f"{where}/content_type")
    return {"response": dict(response)}


def _skip_parameters(parameters: Any, context: RuleContext, pointer: str) -> dict[str, Any]:
    allowed = _SKIP_MEMBERS[context.phase]
    if parameters is None:
        raise invalid(f"a skip rule needs action_parameters with one of {', '.join(sorted(allowed))}", pointer)
    if not isinstance(parameters, dict):
        raise invalid("must be an object", pointer)
    for member in sorted(parameters):
        if member not in allowed:
            raise invalid(
                f"skip member {member!r} is not available in phase {context.phase}; "
                f"available: {', '.join(sorted(allowed))}",
                f"{pointer}/{member}",
            )
    if not parameters:
        raise invalid(f"a skip rule needs one of {', '.join(sorted(allowed))}", pointer)
    checked: dict[str, Any] = {}
    if "ruleset" in parameters:
        if parameters["ruleset"] != "current":
            raise invalid('ruleset must be "current"', f"{pointer}/ruleset")
        checked["ruleset"] = "current"
    if "phases" in parameters:
        checked["phases"] = _names(parameters["phases"], SKIPPABLE_PHASES, "phase", f"{pointer}/phases")
    if "products" in parameters:
        checked["products"] = _names(parameters["products"], SKIPPABLE_PRODUCTS, "product", f"{pointer}/products")
    if "rulesets" in parameters:
        rulesets = parameters["rulesets"]
        if not isinstance(rulesets, list) or not rulesets:
            raise invalid("rulesets must be a non-empty array of ruleset ids", f"{pointer}/rulesets")
        for index, ruleset_id in enumerate(rulesets):
            _target_rule_ids(ruleset_id, context, f"{pointer}/rulesets/{index}")
        checked["rulesets"] = list(rulesets)
    if "rules" in parameters:
        rules = parameters["rules"]
        if not isinstance(rules, dict) or not rules:
            raise invalid("rules must be an object of ruleset id to an array of rule ids", f"{pointer}/rules")
        for ruleset_id, rule_ids in rules.items():
            known = _target_rule_ids(ruleset_id, context, f"{pointer}/rules/{ruleset_id}")
            if not isinstance(rule_ids, list) or not rule_ids:
                raise invalid("must be a non-empty array of rule ids", f"{pointer}/rules/{ruleset_id}")
            for index, rule_id in enumerate(rule_ids):
                if not _one_of(rule_id, known):
                    raise invalid(
                        f"rule {rule_id!r} is not a rule of ruleset {ruleset_id}",
                        f"{pointer}/rules/{ruleset_id}/{index}",
                    )
        checked["rules"] = {ruleset_id: list(rule_ids) for ruleset_id, rule_ids in rules.items()}
    return checked


def _names(values: Any, known: Sequence[str], noun: str, pointer: str) -> list[str]:
    if not isinstance(values, list) or not values:
        raise invalid(f"must be a non-empty array; known {noun}s: {', '.join(known)}", pointer)
    for index, value in enumerate(values):
        if value not in known:
            raise invalid(f"unknown {noun} {value!r}; known {noun}s: {', '.join(known)}", f"{pointer}/{index}")
    return list(values)


def _target_rule_ids(ruleset_id: Any, context: RuleContext, pointer: str) -> frozenset[str]:
    """The rule ids of the ruleset a skip rule names: a managed ruleset, or a custom ruleset of the account."""
    if isinstance(ruleset_id, str):
        managed = load_catalogue().get(ruleset_id)
        if managed is not None:
            return frozenset(rule.id for rule in managed.rules)
        if ruleset_id in context.custom_rulesets:
            return context.custom_rulesets[ruleset_id][1]
    raise invalid(f"{ruleset_id!r} is not a managed ruleset or a custom ruleset of this account", pointer)


def _execute_parameters(parameters: Any, context: RuleContext, pointer: str) -> dict[str, Any]:
    if parameters is None:
        raise invalid("an execute rule needs action_parameters with the id of the ruleset to run", pointer)
    parameters = _object(parameters, pointer, frozenset({"id", "version", "overrides"}))
    target_id = parameters.get("id")
    managed = load_catalogue().get(target_id) if isinstance(target_id, str) else None
    if managed is not None:
        if context.phase != managed.phase:
            raise invalid(
                f"managed ruleset {target_id} runs in phase {managed.phase}, not {context.phase}", f"{pointer}/id"
            )
        rule_ids = frozenset(rule.id for rule in managed.rules)
        categories = managed.categories | (_PARANOIA_LEVELS if managed.id == OWASP_RULESET_ID else frozenset())
        thresholds = frozenset(rule.id for rule in managed.rules if rule.score_threshold is not None)
        latest = managed.version
    elif isinstance(target_id, str) and target_id in context.custom_rulesets:
        phase, rule_ids = context.custom_rulesets[target_id]
        if phase != context.phase:
            raise invalid(f"custom ruleset {target_id} is of phase {phase}, not {context.phase}", f"{pointer}/id")
        categories = frozenset()
        thresholds = frozenset()
        latest = None
    elif target_id == OWASP_RULESET_ID:
        raise bad_request(
            f"the OWASP Core Ruleset is not available on this server: {owasp_unavailable_reason()}",
            code=RULESET_UNAVAILABLE,
            pointer=f"{pointer}/id",
        )
    else:
        raise invalid(
            f"id {target_id!r} must name a managed ruleset or a custom ruleset of this account", f"{pointer}/id"
        )
    checked: dict[str, Any] = {"id": target_id}
    if parameters.get("version") not in (None, ""):
        version = parameters["version"]
        if not isinstance(version, str) or not (version == "latest" or version.isdigit()):
            raise invalid('version must be "latest" or a version number as a string', f"{pointer}/version")
        if latest is not None and version not in ("latest", latest):
            raise invalid(f"managed ruleset {target_id} has only version {latest}", f"{pointer}/version")
        checked["version"] = version
    if parameters.get("overrides") is not None:
        checked["overrides"] = _overrides(
            parameters["overrides"], rule_ids, categories, thresholds, f"{pointer}/overrides"
        )
    return checked


def _overrides(
    overrides: Any, rule_ids: frozenset[str], categories: frozenset[str], thresholds: frozenset[str], pointer: str
) -> dict[str, Any]:
    overrides = _object(overrides, pointer, frozenset({"action", "enabled", "categories", "rules"}))
    checked: dict[str, Any] = {}
    checked.update(_override_switches(overrides, pointer))
    if overrides.get("categories") is not None:
        entries = _override_list(overrides["categories"], f"{pointer}/categories")
        checked["categories"] = []
        seen: set[str] = set()
        for index, entry in enumerate(entries):
            where = f"{pointer}/categories/{index}"
            entry = _object(entry, where, frozenset({"category", "action", "enabled"}))
            category = entry.get("category")
            if not _one_of(category, categories):
                raise invalid(f"category {category!r} is not a category of the executed ruleset", f"{where}/category")
            if category in seen:
                raise invalid(f"category {category!r} is overridden more than once", f"{where}/category")
            seen.add(category)
            checked["categories"].append({"category": category, **_override_switches(entry, where, needed=True)})
    if overrides.get("rules") is not None:
        entries = _override_list(overrides["rules"], f"{pointer}/rules")
        checked["rules"] = []
        seen = set()
        for index, entry in enumerate(entries):
            where = f"{pointer}/rules/{index}"
            entry = _object(entry, where, frozenset({"id", "action", "enabled", "score_threshold"}))
            rule_id = entry.get("id")
            if not _one_of(rule_id, rule_ids):
                raise invalid(f"rule {rule_id!r} is not a rule of the executed ruleset", f"{where}/id")
            if rule_id in seen:
                raise invalid(f"rule {rule_id} is overridden more than once", f"{where}/id")
            seen.add(rule_id)
            override: dict[str, Any] = {"id": rule_id, **_override_switches(entry, where)}
            if entry.get("score_threshold") is not None:
                threshold = entry["score_threshold"]
                if rule_id not in thresholds:
                    raise invalid(f"rule {rule_id} has no score threshold to override", f"{where}/score_threshold")
                if not isinstance(threshold, int) or isinstance(threshold, bool) or not 1 <= threshold <= 1000:
                    raise invalid("score_threshold must be an integer from 1 to 1000", f"{where}/score_threshold")
                override["score_threshold"] = threshold
            if len(override) == 1:
                raise invalid("a rule override needs action, enabled or score_threshold", where)
            checked["rules"].append(override)
    return checked


def _override_list(entries: Any, pointer: str) -> list[Any]:
    if not isinstance(entries, list):
        raise invalid("must be an array", pointer)
    if len(entries) > MAX_RULES:
        raise invalid(f"at most {MAX_RULES} overrides", pointer)
    return entries


def _override_switches(entry: Mapping[str, Any], pointer: str, *, needed: bool = False) -> dict[str, Any]:
    """The ``action`` and ``enabled`` of an override, checked."""
    switches: dict[str, Any] = {}
    if entry.get("action") is not None:
        if not _one_of(entry["action"], OVERRIDE_ACTIONS):
            raise invalid(f"override action must be one of {', '.join(sorted(OVERRIDE_ACTIONS))}", f"{pointer}/action")
        switches["action"] = entry["action"]
    if entry.get("enabled") is not None:
        if not isinstance(entry["enabled"], bool):
            raise invalid("enabled must be true or false", f"{pointer}/enabled")
        switches["enabled"] = entry["enabled"]
    if needed and not switches:
        raise invalid("an override needs action or enabled", pointer)
    return switches
