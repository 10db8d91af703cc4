"""The managed rulesets edgeplane offers, loaded once per process: the Cloudflare Managed Ruleset, a data file
written for edgeplane (``managed/managed.toml`` beside this module), and the Cloudflare OWASP Core Ruleset, the OWASP
Core Rule Set installed on the machine (``edgeplane.waf.core_ruleset``) in the Rulesets API's shape.

A managed ruleset is read-only: users deploy it from a phase entrypoint with an ``execute`` rule and change its
behaviour only through overrides. Its rules carry their own ids, default actions and categories (tags such as
``sqli`` or ``paranoia-level-2``). Core-ruleset rules have the action ``score`` and a ``severity`` whose anomaly
score they add to the request; the score rule (``score_threshold`` set) acts when the sum reaches the threshold.

The OWASP Core Ruleset's rules are the CRS rules that score, one each: id derived from the CRS id (stable across
releases), description ``<CRS id>: <msg>``, ``ref`` the CRS id, categories ``paranoia-level-N`` then the CRS tags
lower-cased with ``/`` and ``.`` turned into ``-`` (``attack-sqli``, ``language-php``, ``capec-1000-152-248-66``);
then the score rule. When the CRS is not installed the catalogue leaves that ruleset out (logged once), and the
Rulesets API refuses deployments of it with a coded error.
"""

from __future__ import annotations

import functools
import hashlib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

import structlog

from edgeplane.waf import core_ruleset
from edgeplane.waf.core_ruleset import CoreRuleSetUnavailable, CrsRule

log = structlog.get_logger(__name__)

MANAGED_PHASE: Final = "http_request_firewall_managed"
MANAGED_RULESET_ID: Final = "efb7b8c949ac4650a09736fc376e9aee"
OWASP_RULESET_ID: Final = "4814384a9e5d4991b9815dcfc25d2f1f"
OWASP_SCORE_RULE_ID: Final = "6179ae15870a4bb7b2d480d4843b323c"

# CRS anomaly scores by severity.
SEVERITY_SCORES: Final[Mapping[str, int]] = {"critical": 5, "error": 4, "warning": 3, "notice": 2}

_ID = re.compile(r"[0-9a-f]{32}")
_RULE_KEYS = frozenset(
    {"id", "description", "categories", "action", "expression", "enabled", "severity", "score_threshold"}
)


class CatalogueError(Exception):
    """A managed ruleset data file is malformed (a bug in edgeplane's own data)."""


@dataclass(frozen=True, slots=True)
class ManagedRule:
    """One rule of a managed ruleset."""

    id: str
    description: str
    categories: tuple[str, ...]
    action: str  # the default action: block, log, score (core ruleset), ...
    expression: str
    enabled: bool = True
    severity: str | None = None  # core ruleset: critical, error, warning or notice
    score_threshold: int | None = None  # the score rule only: its default threshold
    ref: str = ""  # the rule's reference when it is not its id (the CRS id of a core rule)
    crs_id: int | None = None  # core ruleset: the CRS rule it runs

    @property
    def score(self) -> int:
        """The anomaly score a match adds (0 for rules that are not scored)."""
        return SEVERITY_SCORES.get(self.severity or "", 0)

    def to_json(self, ruleset: ManagedRuleset) -> dict[str, Any]:
        """The rule in the Rulesets API shape."""
        document: dict[str, Any] = {
            "id": self.id,
            "version": ruleset.version,
            "action": self.action,
            "categories": list(self.categories),
            "description": self.description,
            "expression": self.expression,
            "last_updated": ruleset.last_updated,
            "ref": self.ref or self.id,
            "enabled": self.enabled,
        }
        if self.score:
            document["score"] = self.score
        if self.score_threshold is not None:
            document["score_threshold"] = self.score_threshold
        return document


@dataclass(frozen=True, slots=True)
class ManagedRuleset:
    """A managed ruleset: read-only content of the ``http_request_firewall_managed`` phase."""

    id: str
    name: str
    description: str
    version: str
    last_updated: str
    rules: tuple[ManagedRule, ...]

    @property
    def phase(self) -> str:
        """The phase the ruleset runs in."""
        return MANAGED_PHASE

    @property
    def categories(self) -> frozenset[str]:
        """Every category a rule of the ruleset carries."""
        return frozenset(category for rule in self.rules for category in rule.categories)

    def rule(self, rule_id: str) -> ManagedRule | None:
        """The rule with ``rule_id``, or None."""
        return next((rule for rule in self.rules if rule.id == rule_id), None)

    def to_json(self, *, with_rules: bool) -> dict[str, Any]:
        """The ruleset in the Rulesets API shape (``kind: managed``); list responses leave the rules out."""
        document: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "kind": "managed",
            "version": self.version,
            "last_updated": self.last_updated,
            "phase": self.phase,
        }
        if with_rules:
            document["rules"] = [rule.to_json(self) for rule in self.rules]
        return document


@functools.cache
def load_catalogue() -> Mapping[str, ManagedRuleset]:
    """Every managed ruleset available on this machine, by id. Raises ``CatalogueError`` if a data file is
    malformed."""
    rulesets: dict[str, ManagedRuleset] = {}
    folder = resources.files(__package__ or "edgeplane.waf").joinpath("managed")
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if entry.name.endswith(".toml"):
            ruleset = _ruleset(entry.name, tomllib.loads(entry.read_text(encoding="utf-8")))
            rulesets[ruleset.id] = ruleset
    try:
        rulesets[OWASP_RULESET_ID] = _owasp_ruleset(core_ruleset.read_crs())
    except CoreRuleSetUnavailable as unavailable:
        log.debug("the OWASP Core Ruleset is not available", reason=str(unavailable))  # serve warns at start
    return rulesets


def use_crs_rules_dir(path: Path) -> None:
    """Reads the OWASP Core Rule Set from ``path`` (the ``waf.crs_rules_dir`` setting): called at process start."""
    if path != core_ruleset.rules_dir():
        core_ruleset.use_rules_dir(path)
        load_catalogue.cache_clear()


def owasp_unavailable_reason() -> str | None:
    """Why the OWASP Core Ruleset is not in the catalogue, or None when it is."""
    if OWASP_RULESET_ID in load_catalogue():
        return None
    try:
        core_ruleset.read_crs()
    except CoreRuleSetUnavailable as unavailable:
        return str(unavailable)
    return None


def core_rule_id(crs_id: int) -> str:
    """The managed rule id of the CRS rule ``crs_id``: stable across releases of edgeplane and of CRS."""
    return hashlib.md5(f"owasp-crs:{crs_id}".encode(), usedforsecurity=False).hexdigest()


def _owasp_ruleset(compiled: core_ruleset.CrsRules) -> ManagedRuleset:
    rules = [_core_rule(rule) for rule in compiled.rules]
    score_rule = ManagedRule(
        id=OWASP_SCORE_RULE_ID,
        description="949110: Inbound anomaly score exceeded",
        categories=("paranoia-level-1",),
        action="block",
        expression="true",
        score_threshold=40,
        ref="949110",
    )
    return ManagedRuleset(
        id=OWASP_RULESET_ID,
        name="Cloudflare OWASP Core Ruleset",
        description=f"The OWASP Core Rule Set {compiled.version}, compiled into edgeplane's engine, with anomaly "
        "scoring.",
        version=compiled.version,
        last_updated="2026-11-26T00:00:00Z",
        rules=(*rules, score_rule),
    )


def _core_rule(rule: CrsRule) -> ManagedRule:
    categories = [f"paranoia-level-{rule.paranoia_level}"]
    for tag in rule.tags:
        if tag.lower().startswith("paranoia-level/") or tag == "OWASP_CRS":
            continue
        category = re.sub(r"[/.]", "-", tag.lower())
        if category not in categories:
            categories.append(category)
    return ManagedRule(
        id=core_rule_id(rule.crs_id),
        description=f"{rule.crs_id}: {rule.message}",
        categories=tuple(categories),
        action="score",
        expression="",
        severity=rule.severity,
        ref=str(rule.crs_id),
        crs_id=rule.crs_id,
    )


def _ruleset(source: str, data: dict[str, Any]) -> ManagedRuleset:
    try:
        rules = tuple(_rule(source, item) for item in data["rules"])
        ruleset = ManagedRuleset(
            id=data["id"],
            name=data["name"],
            description=data["description"],
            version=str(data["version"]),
            last_updated=data["last_updated"],
            rules=rules,
        )
    except KeyError as missing:
        raise CatalogueError(f"{source}: missing {missing}") from None
    if not _ID.fullmatch(ruleset.id):
        raise CatalogueError(f"{source}: ruleset id {ruleset.id!r} is not 32 lowercase hex characters")
    ids = [rule.id for rule in rules]
    if len(set(ids)) != len(ids):
        raise CatalogueError(f"{source}: duplicate rule ids")
    return ruleset


def _rule(source: str, item: dict[str, Any]) -> ManagedRule:
    unknown = set(item) - _RULE_KEYS
    if unknown:
        raise CatalogueError(f"{source}: unknown rule keys {sorted(unknown)}")
    rule = ManagedRule(
        id=item["id"],
        description=item["description"],
        categories=tuple(item.get("categories", ())),
        action=item["action"],
        expression=item["expression"],
        enabled=bool(item.get("enabled", True)),
        severity=item.get("severity"),
        score_threshold=item.get("score_threshold"),
    )
    if not _ID.fullmatch(rule.id):
        raise CatalogueError(f"{source}: rule id {rule.id!r} is not 32 lowercase hex characters")
    if rule.severity is not None and rule.severity not in SEVERITY_SCORES:
        raise CatalogueError(f"{source}: rule {rule.id} has unknown severity {rule.severity!r}")
    return rule
