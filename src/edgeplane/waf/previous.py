"""The previous (package-based) managed WAF: its packages, groups and rules, a zone's configuration of them, and
that configuration expressed as rules of the ruleset engine — for the edge while the previous version runs, and for
the migration to the ruleset-based WAF (seed 002).

Content is derived from the managed rulesets (``edgeplane.waf.catalogue``) so both versions run the same signatures:

- "CloudFlare Managed ruleset" (detection mode ``traditional``) holds every rule of the Managed Ruleset; rule modes
  ``default|disable|simulate|block|challenge``.
- "OWASP ModSecurity Core Rule Set" (detection mode ``anomaly``, series 2.x, which had no paranoia levels) holds the
  Core Ruleset's scored rules (from the CRS installed on the machine; none without it) of paranoia levels 1 and 2;
  rule modes ``on|off``; the package's ``sensitivity`` sets the anomaly threshold (high 25, medium 40, low 60; off
  disables the package) and ``action_mode`` the action.

Groups are categories: a rule's group is its first category that is not a CVE id or a paranoia level (OWASP: its
``attack-*`` category). Previous ids are derived from the managed ids, so they are stable while content grows.

This module reads no database: a zone's configuration (``ZoneConfiguration``) is read by
``edgeplane.configuration.previous_waf``.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from edgeplane.waf.catalogue import (
    MANAGED_RULESET_ID,
    OWASP_RULESET_ID,
    OWASP_SCORE_RULE_ID,
    CatalogueError,
    ManagedRule,
    ManagedRuleset,
    load_catalogue,
)

TRADITIONAL_MODES: Final = ("default", "disable", "simulate", "block", "challenge")
ANOMALY_MODES: Final = ("on", "off")
GROUP_MODES: Final = ("on", "off")
SENSITIVITIES: Final = ("high", "medium", "low", "off")
ACTION_MODES: Final = ("simulate", "block", "challenge")
MIGRATION_STATES: Final = ("start", "validation", "complete")

# The previous version's thresholds by sensitivity, and what the migration turns each into: (paranoia level,
# threshold). ``None`` is a package whose sensitivity the user never set (REFERENCE: "default").
SENSITIVITY_THRESHOLDS: Final[Mapping[str, int]] = {"high": 25, "medium": 40, "low": 60}
DEFAULT_SENSITIVITY: Final = "high"
DEFAULT_ACTION_MODE: Final = "challenge"
MIGRATED_SENSITIVITY: Final[Mapping[str | None, tuple[int, int]]] = {
    None: (2, 40),
    "high": (2, 25),
    "medium": (1, 40),
    "low": (1, 60),
    "off": (2, 40),
}
# Series 2.x had no paranoia levels; the previous version runs what it had, which the seed equates with PL2.
PREVIOUS_PARANOIA_LEVEL: Final = 2
# Actions of the previous version in the ruleset engine's words.
RULESET_ACTIONS: Final[Mapping[str, str]] = {"simulate": "log", "block": "block", "challenge": "challenge"}

MAX_MIGRATED_FIREWALL_RULES: Final = 200
MAX_MIGRATED_EXPRESSION_BYTES: Final = 4096

_MODE_OF_ACTION: Final[Mapping[str, str]] = {
    "block": "block",
    "log": "simulate",
    "challenge": "challenge",
    "js_challenge": "challenge",
    "managed_challenge": "challenge",
}


class PreviousWafError(Exception):
    """A zone's previous configuration cannot be expressed in the ruleset-based WAF."""


class TooManyFirewallRules(PreviousWafError):
    """More firewall rules to migrate than the migration takes."""


class FirewallExpressionTooLong(PreviousWafError):
    """A firewall rule to migrate has an expression longer than the migration takes."""


# --- content -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PreviousRule:
    """A rule of a previous package, standing for one managed rule."""

    id: str
    description: str
    priority: str
    group_id: str
    package_id: str
    managed_rule: ManagedRule

    @property
    def default_mode(self) -> str:
        """The mode the rule has until changed: traditional ``disable|simulate|block|challenge``, anomaly ``on|off``."""
        if self.package_id == OWASP_PACKAGE_ID:
            return "on" if self.managed_rule.enabled else "off"
        if not self.managed_rule.enabled:
            return "disable"
        return _MODE_OF_ACTION.get(self.managed_rule.action, "block")


@dataclass(frozen=True, slots=True)
class PreviousGroup:
    """A group of a previous package: the rules of one category."""

    id: str
    name: str
    description: str
    package_id: str
    rule_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PreviousPackage:
    """A previous package: a managed ruleset seen through the previous version's groups and rules."""

    id: str
    name: str
    description: str
    detection_mode: str
    ruleset_id: str
    groups: tuple[PreviousGroup, ...]
    rules: tuple[PreviousRule, ...]
    _rules_by_id: dict[str, PreviousRule] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_anomaly(self) -> bool:
        """Whether rules add to an anomaly score (OWASP) rather than act on their own."""
        return self.detection_mode == "anomaly"

    @property
    def rule_modes(self) -> tuple[str, ...]:
        """The modes a rule of the package may be set to."""
        return ANOMALY_MODES if self.is_anomaly else TRADITIONAL_MODES

    def group(self, group_id: str) -> PreviousGroup | None:
        """The group with ``group_id``, or None."""
        return next((group for group in self.groups if group.id == group_id), None)

    def rule(self, rule_id: str) -> PreviousRule | None:
        """The rule with ``rule_id``, or None."""
        return self._rules_by_id.get(rule_id)


def _stable_id(*parts: str) -> str:
    return hashlib.sha256(" ".join(("edgeplane previous waf", *parts)).encode()).hexdigest()[:32]


MANAGED_PACKAGE_ID: Final = _stable_id("package", "managed")
OWASP_PACKAGE_ID: Final = _stable_id("package", "owasp")


def previous_rule_id(managed_rule_id: str) -> str:
    """The previous version's (numeric) id of the rule standing for ``managed_rule_id``: seven digits."""
    return str(int(managed_rule_id[:8], 16) % 9_000_000 + 1_000_000)


@functools.cache
def load_previous_packages() -> Mapping[str, PreviousPackage]:
    """The two previous packages by id, built from the managed rulesets. Raises ``CatalogueError`` when two
    managed rules would get the same previous id."""
    catalogue = load_catalogue()
    packages = [
        _package(
            MANAGED_PACKAGE_ID,
            "CloudFlare Managed ruleset",
            "Signatures of common attacks, maintained with the Managed Ruleset.",
            "traditional",
            MANAGED_RULESET_ID,
            [rule for rule in catalogue[MANAGED_RULESET_ID].rules if rule.score_threshold is None],
            _managed_group,
            "Cloudflare",
        ),
        _package(
            OWASP_PACKAGE_ID,
            "OWASP ModSecurity Core Rule Set",
            "Anomaly-scoring rules of the OWASP Core Rule Set.",
            "anomaly",
            OWASP_RULESET_ID,
            [rule for rule in _rules_of(catalogue, OWASP_RULESET_ID) if _in_previous_core_set(rule)],
            _owasp_group,
            "OWASP",
        ),
    ]
    seen: dict[str, str] = {}
    for package in packages:
        for rule in package.rules:
            if rule.id in seen:
                raise CatalogueError(f"managed rules {seen[rule.id]} and {rule.managed_rule.id} share id {rule.id}")
            seen[rule.id] = rule.managed_rule.id
    return {package.id: package for package in packages}


def _rules_of(catalogue: Mapping[str, ManagedRuleset], ruleset_id: str) -> Sequence[ManagedRule]:
    """The rules of a managed ruleset; none when this machine does not offer it (the OWASP Core Ruleset without
    the CRS installed)."""
    ruleset = catalogue.get(ruleset_id)
    return ruleset.rules if ruleset is not None else ()


def _in_previous_core_set(rule: ManagedRule) -> bool:
    if rule.score_threshold is not None:
        return False
    levels = [int(tag.rsplit("-", 1)[1]) for tag in rule.categories if _is_paranoia_tag(tag)]
    return not levels or min(levels) <= PREVIOUS_PARANOIA_LEVEL


def _is_paranoia_tag(category: str) -> bool:
    return category.startswith("paranoia-level-") and category.rsplit("-", 1)[1].isdigit()


def _managed_group(rule: ManagedRule) -> str:
    chosen = [tag for tag in rule.categories if not tag.startswith("cve-") and not _is_paranoia_tag(tag)]
    return (chosen or list(rule.categories) or ["uncategorized"])[0]


def _owasp_group(rule: ManagedRule) -> str:
    attack = [tag.removeprefix("attack-") for tag in rule.categories if tag.startswith("attack-")]
    return (attack or [_managed_group(rule)])[0]


def _package(
    package_id: str,
    name: str,
    description: str,
    detection_mode: str,
    ruleset_id: str,
    managed_rules: Sequence[ManagedRule],
    group_of: Callable[[ManagedRule], str],
    group_prefix: str,
) -> PreviousPackage:
    members: dict[str, list[ManagedRule]] = {}
    for managed in managed_rules:
        members.setdefault(group_of(managed), []).append(managed)
    groups: list[PreviousGroup] = []
    rules: list[PreviousRule] = []
    for category, group_rules in members.items():
        group_id = _stable_id("group", package_id, category)
        group_rule_ids = []
        for position, managed in enumerate(group_rules, start=1):
            rule = PreviousRule(
                id=previous_rule_id(managed.id),
                description=managed.description,
                priority=str(position),
                group_id=group_id,
                package_id=package_id,
                managed_rule=managed,
            )
            rules.append(rule)
            group_rule_ids.append(rule.id)
        groups.append(
            PreviousGroup(
                id=group_id,
                name=f"{group_prefix} {category}",
                description=f"Rules of the {category} category.",
                package_id=package_id,
                rule_ids=tuple(group_rule_ids),
            )
        )
    return PreviousPackage(
        id=package_id,
        name=name,
        description=description,
        detection_mode=detection_mode,
        ruleset_id=ruleset_id,
        groups=tuple(groups),
        rules=tuple(rules),
        _rules_by_id={rule.id: rule for rule in rules},
    )


def managed_package() -> PreviousPackage:
    """The "CloudFlare Managed ruleset" package."""
    return load_previous_packages()[MANAGED_PACKAGE_ID]


def owasp_package() -> PreviousPackage:
    """The "OWASP ModSecurity Core Rule Set" package."""
    return load_previous_packages()[OWASP_PACKAGE_ID]


def find_rule(rule_id: str) -> PreviousRule | None:
    """The previous rule with ``rule_id`` in either package, or None."""
    for package in load_previous_packages().values():
        rule = package.rule(rule_id)
        if rule is not None:
            return rule
    return None


def find_group(group_id: str) -> PreviousGroup | None:
    """The previous group with ``group_id`` in either package, or None."""
    for package in load_previous_packages().values():
        group = package.group(group_id)
        if group is not None:
            return group
    return None


# --- a zone's configuration ----------------------------------------------------------------------------------------


class FirewallRuleRecord(Protocol):
    """What the previous WAF reads of a zone's firewall rule (``edgeplane.store.previous_waf_models.FirewallRule``)."""

    @property
    def id(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def priority(self) -> int | None: ...
    @property
    def paused(self) -> bool: ...
    @property
    def products(self) -> list[Any]: ...
    @property
    def filter_expression(self) -> str: ...
    @property
    def filter_paused(self) -> bool: ...


class PageRuleRecord(Protocol):
    """What the previous WAF reads of a zone's page rule (``edgeplane.store.previous_waf_models.PageRule``)."""

    @property
    def id(self) -> str: ...
    @property
    def targets(self) -> list[Any]: ...
    @property
    def actions(self) -> list[Any]: ...
    @property
    def status(self) -> str: ...


class WafOverrideRecord(Protocol):
    """What the previous WAF reads of a zone's URI-based WAF override
    (``edgeplane.store.previous_waf_models.WafOverride``)."""

    @property
    def id(self) -> str: ...
    @property
    def urls(self) -> list[Any]: ...
    @property
    def paused(self) -> bool: ...
    @property
    def groups(self) -> dict[str, Any]: ...
    @property
    def rules(self) -> dict[str, Any]: ...
    @property
    def rewrite_action(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ZoneConfiguration:
    """Everything of a zone the previous WAF's behaviour depends on (read from the database by
    ``edgeplane.configuration.previous_waf``): its settings, its firewall rules in the order they run, its page rules
    by priority and its URI-based WAF overrides by priority."""

    setting: str = "off"
    migration_state: str = "start"
    sensitivity: str | None = None
    action_mode: str = DEFAULT_ACTION_MODE
    group_modes: Mapping[str, str] = field(default_factory=dict)
    rule_modes: Mapping[str, str] = field(default_factory=dict)
    firewall_rules: Sequence[FirewallRuleRecord] = ()
    page_rules: Sequence[PageRuleRecord] = ()
    overrides: Sequence[WafOverrideRecord] = ()

    @property
    def finished(self) -> bool:
        """Whether the zone finished its migration (the previous version is gone for good)."""
        return self.migration_state == "complete"

    def group_on(self, group: PreviousGroup, extra: Mapping[str, str] | None = None) -> bool:
        """Whether ``group`` is on, ``extra`` (a URI-based override's group modes) taking precedence."""
        mode = (extra or {}).get(group.id) or self.group_modes.get(group.id, "on")
        return mode in ("on", "default")

    def package_on(self, package: PreviousPackage) -> bool:
        """Whether ``package`` takes part: some group on, and (OWASP) a sensitivity other than ``off``."""
        if package.is_anomaly and self.sensitivity == "off":
            return False
        return any(self.group_on(group) for group in package.groups)

    @property
    def effective_sensitivity(self) -> str:
        """The OWASP package's sensitivity as the API reports it."""
        return self.sensitivity or DEFAULT_SENSITIVITY


def bypasses_waf(rule: FirewallRuleRecord) -> bool:
    """Whether a firewall rule bypasses the WAF managed rules (action ``bypass``, product ``waf``)."""
    return rule.action == "bypass" and "waf" in (rule.products or [])


def page_rule_waf_action(rule: PageRuleRecord) -> str | None:
    """What a page rule does to the WAF: ``off`` (Disable Security, or Web Application Firewall off), ``on``, or
    None."""
    for action in rule.actions or []:
        if action.get("id") == "disable_security":
            return "off"
        if action.get("id") == "waf" and action.get("value") in ("on", "off"):
            return str(action["value"])
    return None


def page_rule_expression(rule: PageRuleRecord) -> str:
    """The Rules-language expression matching what a page rule's URL targets match."""
    patterns = [
        str(target.get("constraint", {}).get("value", ""))
        for target in rule.targets or []
        if isinstance(target, dict) and isinstance(target.get("constraint"), dict)
    ]
    return _any_of([url_pattern_expression(pattern) for pattern in patterns])


def url_pattern_expression(pattern: str) -> str:
    """A URL pattern of page rules and URI-based overrides (``[scheme://]host[/path]``, ``*`` matching any run of
    characters) as a Rules-language expression. A pattern without a path matches the path ``/``."""
    text = pattern.strip()
    clauses: list[str] = []
    scheme, separator, rest = text.partition("://")
    if separator and scheme.lower() in ("http", "https"):
        clauses.append("ssl" if scheme.lower() == "https" else "not ssl")
        text = rest
    elif separator and scheme == "*":
        text = rest
    host, slash, path = text.partition("/")
    if host and host != "*":
        clauses.append(f"http.host wildcard {_string(_wildcard(host.lower()))}")
    if not (slash and path == "*"):
        clauses.append(f"http.request.uri wildcard {_string(_wildcard('/' + path))}")
    return " and ".join(clauses) if clauses else "true"


def _wildcard(text: str) -> str:
    # In a wildcard pattern a backslash escapes; a literal one is doubled. ``*`` stays the wildcard.
    return text.replace("\\", "\\\\")


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _any_of(expressions: Sequence[str]) -> str:
    if not expressions:
        return "false"
    if len(expressions) == 1:
        return expressions[0]
    return " or ".join(f"({expression})" for expression in expressions)


# --- eligibility -----------------------------------------------------------------------------------------------------


def has_uri_overrides(configuration: ZoneConfiguration) -> bool:
    """Whether the zone has URI-based WAF overrides (which keep it from migrating)."""
    return bool(configuration.overrides)


def phase_one_eligible(configuration: ZoneConfiguration) -> bool:
    """Phase 1 eligibility: the WAF off, or on with the core rule set off; no firewall rule bypassing the WAF, no
    page rule disabling security or setting the WAF; no URI-based overrides."""
    if configuration.setting == "on" and configuration.package_on(owasp_package()):
        return False
    if any(bypasses_waf(rule) for rule in configuration.firewall_rules):
        return False
    if any(page_rule_waf_action(rule) is not None for rule in configuration.page_rules):
        return False
    return not has_uri_overrides(configuration)


def migration_compatible(configuration: ZoneConfiguration, *, phase_two: bool) -> bool:
    """Whether the zone may migrate now: not already finished, no URI-based overrides, and in phase 1 its
    phase-1 eligibility."""
    if configuration.finished or has_uri_overrides(configuration):
        return False
    return phase_two or phase_one_eligible(configuration)


# --- the configuration as rules --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scope:
    """What a URI-based override changes, for the requests it matches."""

    groups: Mapping[str, str] = field(default_factory=dict)
    rules: Mapping[str, str] = field(default_factory=dict)
    rewrite: Mapping[str, str] = field(default_factory=dict)


def edge_rules(configuration: ZoneConfiguration) -> list[dict[str, Any]] | None:
    """The zone's previous WAF as rules of the ``http_request_firewall_managed`` phase (v4 rule objects: ``skip``
    and ``execute`` rules with overrides), to run after the ruleset-based version; None when the previous version
    does not run (off with no page rule switching it on, or the migration finished)."""
    if configuration.finished:
        return None
    waf_on_pages = _waf_on_pages(configuration)
    if configuration.setting != "on" and not waf_on_pages:
        return None
    rules = _skip_rules(configuration, migrated=False)
    for override in configuration.overrides:
        if override.paused or not override.urls:
            continue
        expression = _any_of([url_pattern_expression(str(url)) for url in override.urls])
        scope = _Scope(groups=override.groups or {}, rules=override.rules or {}, rewrite=override.rewrite_action or {})
        rules += _execute_rules(configuration, expression, scope, rule_id_prefix=override.id)
        rules.append(
            _rule(
                _stable_id("override", override.id),
                "skip",
                expression,
                f"URI-based WAF override {override.id}: the previous WAF ends here",
                {"ruleset": "current"},
            )
        )
    expression = "true" if configuration.setting == "on" else _any_of(waf_on_pages)
    rules += _execute_rules(configuration, expression, _Scope(), rule_id_prefix="")
    return rules


def migration_rules(configuration: ZoneConfiguration) -> list[dict[str, Any]]:
    """The new configuration equivalent to the zone's previous one, as the ``rules`` of the managed entrypoint
    (``id``, ``version`` and ``ref`` empty): skip rules for firewall rules bypassing the WAF and for page rules
    turning it off, then execute rules for the two managed rulesets on all traffic, each enabled unless its package
    is off. The zone's ``waf`` setting and page rules switching the WAF on do not narrow them: the new version has no
    global switch and a zone runs it from creation, so the migration keeps it on. The Managed package's group and
    rule modes carry over; the core rule set's do not (its sensitivity becomes a paranoia level and threshold, its
    action carries over with simulate as log). Raises ``TooManyFirewallRules`` or ``FirewallExpressionTooLong`` past the
    migration's limits."""
    migrated = [rule for rule in configuration.firewall_rules if bypasses_waf(rule)]
    if len(migrated) > MAX_MIGRATED_FIREWALL_RULES:
        raise TooManyFirewallRules(
            f"{len(migrated)} firewall rules bypass the WAF managed rules; the migration takes at most "
            f"{MAX_MIGRATED_FIREWALL_RULES}"
        )
    for rule in migrated:
        if len(rule.filter_expression.encode()) > MAX_MIGRATED_EXPRESSION_BYTES:
            raise FirewallExpressionTooLong(
                f"the expression of firewall rule {rule.id} is longer than {MAX_MIGRATED_EXPRESSION_BYTES} bytes"
            )
    managed = managed_package()
    owasp = owasp_package()
    paranoia, threshold = MIGRATED_SENSITIVITY[configuration.sensitivity]
    rules = _skip_rules(configuration, migrated=True)
    rules.append(
        _execute(
            "",
            MANAGED_RULESET_ID,
            "true",
            enabled=configuration.package_on(managed),
            rules=_traditional_overrides(configuration, managed, _Scope()),
        )
    )
    rules.append(
        _execute(
            "",
            OWASP_RULESET_ID,
            "true",
            enabled=configuration.package_on(owasp),
            rules=[_score_override(RULESET_ACTIONS[configuration.action_mode], threshold)],
            paranoia_level=paranoia,
        )
    )
    return rules


def _waf_on_pages(configuration: ZoneConfiguration) -> list[str]:
    return [
        page_rule_expression(rule)
        for rule in configuration.page_rules
        if rule.status == "active" and page_rule_waf_action(rule) == "on"
    ]


def _skip_rules(configuration: ZoneConfiguration, *, migrated: bool) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = []
    for firewall_rule in configuration.firewall_rules:
        if bypasses_waf(firewall_rule):
            rules.append(
                _rule(
                    "" if migrated else firewall_rule.id,
                    "skip",
                    firewall_rule.filter_expression,
                    f"Firewall rule {firewall_rule.id} bypasses WAF managed rules"
                    + (f": {firewall_rule.description}" if firewall_rule.description else ""),
                    {"ruleset": "current"},
                    enabled=not firewall_rule.paused and not firewall_rule.filter_paused,
                )
            )
    for page_rule in configuration.page_rules:
        if page_rule_waf_action(page_rule) == "off":
            rules.append(
                _rule(
                    "" if migrated else page_rule.id,
                    "skip",
                    page_rule_expression(page_rule),
                    f"Page rule {page_rule.id} disables the WAF",
                    {"ruleset": "current"},
                    enabled=page_rule.status == "active",
                )
            )
    return rules


def _execute_rules(
    configuration: ZoneConfiguration, expression: str, scope: _Scope, *, rule_id_prefix: str
) -> list[dict[str, Any]]:
    managed = managed_package()
    owasp = owasp_package()
    action_mode = scope.rewrite.get(configuration.action_mode, configuration.action_mode)
    owasp_on = configuration.package_on(owasp) and action_mode in RULESET_ACTIONS
    threshold = SENSITIVITY_THRESHOLDS[configuration.effective_sensitivity] if owasp_on else 0
    return [
        _execute(
            _stable_id("execute", rule_id_prefix, managed.id),
            MANAGED_RULESET_ID,
            expression,
            enabled=configuration.package_on(managed) or any(mode == "default" for mode in scope.groups.values()),
            rules=_traditional_overrides(configuration, managed, scope),
        ),
        _execute(
            _stable_id("execute", rule_id_prefix, owasp.id),
            OWASP_RULESET_ID,
            expression,
            enabled=owasp_on,
            rules=[
                *_anomaly_overrides(configuration, owasp, scope),
                _score_override(RULESET_ACTIONS.get(action_mode, "log"), threshold),
            ],
            paranoia_level=PREVIOUS_PARANOIA_LEVEL,
        ),
    ]


def _traditional_overrides(
    configuration: ZoneConfiguration, package: PreviousPackage, scope: _Scope
) -> list[dict[str, Any]]:
    overrides: list[dict[str, Any]] = []
    for group in package.groups:
        group_on = configuration.group_on(group, scope.groups)
        for rule_id in group.rule_ids:
            rule = package.rule(rule_id)
            assert rule is not None  # a group lists only its package's rules
            mode = scope.rules.get(rule.id) or configuration.rule_modes.get(rule.id, "default")
            resolved = rule.default_mode if mode == "default" else mode
            resolved = scope.rewrite.get(resolved, resolved)
            if resolved == "default":
                resolved = rule.default_mode
            enabled = group_on and resolved != "disable"
            if enabled == rule.managed_rule.enabled and (not enabled or resolved == rule.default_mode):
                continue
            override: dict[str, Any] = {"id": rule.managed_rule.id, "enabled": enabled}
            if enabled:
                override["action"] = RULESET_ACTIONS[resolved]
            overrides.append(override)
    return overrides


def _anomaly_overrides(
    configuration: ZoneConfiguration, package: PreviousPackage, scope: _Scope
) -> list[dict[str, Any]]:
    overrides: list[dict[str, Any]] = []
    for group in package.groups:
        group_on = configuration.group_on(group, scope.groups)
        for rule_id in group.rule_ids:
            rule = package.rule(rule_id)
            assert rule is not None
            mode = scope.rules.get(rule.id) or configuration.rule_modes.get(rule.id, rule.default_mode)
            enabled = group_on and mode in ("on", "default")
            if enabled != rule.managed_rule.enabled:
                overrides.append({"id": rule.managed_rule.id, "enabled": enabled})
    return overrides


def _score_override(action: str, threshold: int) -> dict[str, Any]:
    return {"id": OWASP_SCORE_RULE_ID, "action": action, "score_threshold": threshold}


def _execute(
    rule_id: str,
    ruleset_id: str,
    expression: str,
    *,
    enabled: bool,
    rules: list[dict[str, Any]],
    paranoia_level: int | None = None,
) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if paranoia_level is not None:
        overrides["categories"] = [
            {"category": f"paranoia-level-{level}", "enabled": False} for level in range(paranoia_level + 1, 5)
        ]
    if rules:
        overrides["rules"] = rules
    parameters: dict[str, Any] = {"id": ruleset_id}
    if overrides:
        parameters["overrides"] = overrides
    return _rule(rule_id, "execute", expression, "", parameters, enabled=enabled)


def _rule(
    rule_id: str,
    action: str,
    expression: str,
    description: str,
    parameters: dict[str, Any],
    *,
    enabled: bool = True,
) -> dict[str, Any]:
    return {
        "id": rule_id,
        "version": "",
        "ref": rule_id,
        "action": action,
        "expression": expression,
        "description": description,
        "enabled": enabled,
        "action_parameters": parameters,
    }
