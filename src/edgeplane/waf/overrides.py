"""Overrides of an ``execute`` rule: how a deployment changes the managed rules it runs.

``action_parameters.overrides`` holds a ruleset-level ``action`` and ``enabled``, category overrides
(``categories: [{category, action, enabled}]``) and rule overrides (``rules: [{id, action, enabled,
score_threshold}]``). For each rule and each setting, the most specific override that sets it wins: a rule override
beats a category override, which beats the ruleset override, which beats the rule's own default. When several
category overrides name categories of the same rule, the last one in the list that sets the value wins.

Action overrides at ruleset and category level leave the scoring rules of the Core Ruleset (action ``score``)
alone: those rules only add to the anomaly score, and the action that matters is the score rule's. A rule override
may still change a scoring rule's action, since it names that rule on purpose.

The Rulesets API validates overrides when they are written; here malformed members are ignored rather than raised,
so that a stored configuration can always be compiled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SCORE_ACTION = "score"


@dataclass(frozen=True, slots=True)
class Setting:
    """The values one override sets (None: left as it is)."""

    action: str | None = None
    enabled: bool | None = None
    score_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class EffectiveRule:
    """How a rule runs once every override is applied."""

    enabled: bool
    action: str
    score_threshold: int | None


@dataclass(frozen=True, slots=True)
class Overrides:
    """The overrides of one ``execute`` rule."""

    ruleset: Setting = Setting()
    categories: tuple[tuple[str, Setting], ...] = ()
    rules: Mapping[str, Setting] = field(default_factory=dict)

    @classmethod
    def from_json(cls, document: object) -> Overrides:
        """The overrides in ``document`` (the ``overrides`` member of ``action_parameters``); malformed members
        are ignored, never raised."""
        if not isinstance(document, Mapping):
            return cls()
        categories = tuple(
            (item["category"], _setting(item))
            for item in _objects(document.get("categories"))
            if isinstance(item.get("category"), str)
        )
        rules = {
            item["id"]: _setting(item) for item in _objects(document.get("rules")) if isinstance(item.get("id"), str)
        }
        return cls(ruleset=_setting(document), categories=categories, rules=rules)

    def resolve(
        self,
        rule_id: str,
        categories: Sequence[str],
        *,
        action: str,
        enabled: bool,
        score_threshold: int | None = None,
    ) -> EffectiveRule:
        """How the rule ``rule_id`` (with its ``categories`` and its defaults) runs under these overrides."""
        scoring = action == SCORE_ACTION
        if not scoring and self.ruleset.action is not None:
            action = self.ruleset.action
        if self.ruleset.enabled is not None:
            enabled = self.ruleset.enabled
        for category, setting in self.categories:
            if category in categories:
                if not scoring and setting.action is not None:
                    action = setting.action
                if setting.enabled is not None:
                    enabled = setting.enabled
        rule = self.rules.get(rule_id)
        if rule is not None:
            action = rule.action if rule.action is not None else action
            enabled = rule.enabled if rule.enabled is not None else enabled
            if rule.score_threshold is not None:
                score_threshold = rule.score_threshold
        return EffectiveRule(enabled=enabled, action=action, score_threshold=score_threshold)


def _setting(item: Mapping[str, Any]) -> Setting:
    action = item.get("action")
    enabled = item.get("enabled")
    threshold = item.get("score_threshold")
    return Setting(
        action=action if isinstance(action, str) and action else None,
        enabled=enabled if isinstance(enabled, bool) else None,
        score_threshold=threshold if isinstance(threshold, int) and not isinstance(threshold, bool) else None,
    )


def _objects(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]
