"""The managed rulesets' content: every rule compiles and is well tagged; attacks are caught, benign JSON-RPC passes."""

from __future__ import annotations

import pytest

from edgeplane.rules import compile_expression
from edgeplane.waf.catalogue import (
    MANAGED_RULESET_ID,
    OWASP_RULESET_ID,
    OWASP_SCORE_RULE_ID,
    SEVERITY_SCORES,
    load_catalogue,
)
from edgeplane.waf.firewall import compile_firewall, deploy_managed_rulesets
from tests.waf.corpus import ATTACKS, BENIGN, Attack, Sample

CATALOGUE = load_catalogue()
ALL_RULES = [(ruleset.id, rule) for ruleset in CATALOGUE.values() for rule in ruleset.rules]
# Rules that need no pattern: they cannot be prefiltered and run on every request.
UNINDEXED = {'http.user_agent eq ""', OWASP_SCORE_RULE_ID}


def test_both_rulesets_are_shipped_with_their_public_ids() -> None:
    assert set(CATALOGUE) == {MANAGED_RULESET_ID, OWASP_RULESET_ID}
    assert 60 <= len(CATALOGUE[OWASP_RULESET_ID].rules) <= 200
    assert CATALOGUE[OWASP_RULESET_ID].rules[-1].id == OWASP_SCORE_RULE_ID


def test_rule_ids_are_unique_across_rulesets() -> None:
    ids = [rule.id for _, rule in ALL_RULES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(("ruleset_id", "rule"), ALL_RULES, ids=lambda value: getattr(value, "id", value))
def test_every_rule_compiles(ruleset_id: str, rule: object) -> None:
    expression = compile_expression(rule.expression)  # type: ignore[attr-defined]
    if rule.id != OWASP_SCORE_RULE_ID and "matches" in rule.expression:  # type: ignore[attr-defined]
        assert expression.prefilter is not None, "a signature the multi-pattern index cannot run"


def test_core_rules_carry_one_paranoia_level_an_attack_tag_and_a_severity() -> None:
    for rule in CATALOGUE[OWASP_RULESET_ID].rules:
        if rule.id == OWASP_SCORE_RULE_ID:
            assert rule.score_threshold == 40
            assert rule.action == "block"
            continue
        levels = [category for category in rule.categories if category.startswith("paranoia-level-")]
        assert len(levels) == 1, rule.id
        assert any(category.startswith("attack-") for category in rule.categories), rule.id
        assert rule.action == "score", rule.id
        assert rule.severity in SEVERITY_SCORES, rule.id


def test_managed_rules_have_a_category_and_a_default_action() -> None:
    for rule in CATALOGUE[MANAGED_RULESET_ID].rules:
        assert rule.categories
        assert rule.description
        assert rule.action in {"block", "log"}


def test_every_paranoia_level_has_rules() -> None:
    categories = CATALOGUE[OWASP_RULESET_ID].categories
    assert {f"paranoia-level-{level}" for level in (1, 2, 3, 4)} <= categories


DEFAULT = compile_firewall(
    {"http_request_firewall_managed": deploy_managed_rulesets(paranoia_level=1, core_action="log")}
)
# The Core Ruleset alone, acting at the first critical match (the CRS default threshold).
CORE_STRICT = {
    level: compile_firewall(
        {
            "http_request_firewall_managed": deploy_managed_rulesets(
                paranoia_level=level, score_threshold=5, managed=False
            )
        }
    )
    for level in (1, 2, 3, 4)
}
FULL = {
    level: compile_firewall({"http_request_firewall_managed": deploy_managed_rulesets(paranoia_level=level)})
    for level in (1, 2, 3, 4)
}


def test_the_shipped_rules_compile_without_problems() -> None:
    assert DEFAULT.problems == ()
    assert FULL[4].problems == ()


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda attack: attack.sample.name)
def test_the_managed_ruleset_blocks_attacks(attack: Attack) -> None:
    verdict = DEFAULT.evaluate(attack.sample.fields())
    assert verdict.blocked
    assert verdict.terminal is not None
    assert verdict.terminal.ruleset_id == MANAGED_RULESET_ID


@pytest.mark.parametrize("attack", [attack for attack in ATTACKS if attack.core], ids=lambda attack: attack.sample.name)
def test_the_core_ruleset_scores_attacks_at_pl1(attack: Attack) -> None:
    verdict = CORE_STRICT[1].evaluate(attack.sample.fields())
    assert verdict.blocked
    assert verdict.terminal is not None
    assert verdict.terminal.rule_id == OWASP_SCORE_RULE_ID
    assert int(verdict.terminal.metadata["score"]) >= 5


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("sample", BENIGN, ids=lambda sample: sample.name)
def test_benign_json_rpc_matches_nothing_up_to_pl2(sample: Sample, level: int) -> None:
    assert CORE_STRICT[level].evaluate(sample.fields()).matches == ()
    assert FULL[level].evaluate(sample.fields()).matches == ()


@pytest.mark.parametrize("level", [3, 4])
@pytest.mark.parametrize("sample", BENIGN, ids=lambda sample: sample.name)
def test_benign_json_rpc_passes_at_pl3_and_pl4_with_the_default_threshold(sample: Sample, level: int) -> None:
    assert not FULL[level].evaluate(sample.fields()).blocked
