"""The managed rulesets' content: every rule compiles and is well tagged; attacks are caught, benign JSON-RPC passes.

The Core Ruleset's scores are checked as the anomaly thresholds see them: a typical vector of each attack family
reaches 40 (medium) at PL1 in the query string and in a JSON-RPC parameter, and 25 (high) in any header; benign
traffic (this corpus and the benchmark's benign mix) scores 0 at PL1 and PL2."""

from __future__ import annotations

import pytest
from bench.waf_requests import HttpRequest, attack_requests, benign_requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeplane.rules import RequestFields, compile_expression
from edgeplane.waf.catalogue import (
    MANAGED_RULESET_ID,
    OWASP_RULESET_ID,
    OWASP_SCORE_RULE_ID,
    SEVERITY_SCORES,
    load_catalogue,
)
from edgeplane.waf.firewall import compile_firewall, deploy_managed_rulesets
from tests.waf.corpus import ATTACKS, BENIGN, BLATANT, PARTIAL, PLACES, TYPICAL, Attack, Sample, placed, rpc

CATALOGUE = load_catalogue()
ALL_RULES = [(ruleset.id, rule) for ruleset in CATALOGUE.values() for rule in ruleset.rules]
# Rules that need no pattern: they cannot be prefiltered and run on every request.
UNINDEXED = {'http.user_agent eq ""', OWASP_SCORE_RULE_ID}


def test_both_rulesets_are_shipped_with_their_public_ids() -> None:
    assert set(CATALOGUE) == {MANAGED_RULESET_ID, OWASP_RULESET_ID}
    assert 60 <= len(CATALOGUE[OWASP_RULESET_ID].rules) <= 500
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


# The Core Ruleset alone with its score rule logging from a score of 1: the score rule's record carries the sum.
CORE_SCORES = {
    level: compile_firewall(
        {
            "http_request_firewall_managed": deploy_managed_rulesets(
                paranoia_level=level, score_threshold=1, core_action="log", managed=False
            )
        }
    )
    for level in (1, 2, 3, 4)
}
# A scripting client's User-Agent (curl, okhttp, ...) is a notice at PL3 and above: 2 points, documented.
SCRIPTING_CLIENT_NOTICE = 2


def core_score(fields: RequestFields, level: int = 1) -> int:
    """The request's anomaly score in the Core Ruleset at ``level``."""
    for match in CORE_SCORES[level].evaluate(fields).matches:
        if match.rule_id == OWASP_SCORE_RULE_ID:
            return int(match.metadata["score"])
    return 0


def core_blocks(fields: RequestFields, threshold: int) -> bool:
    """Whether the Core Ruleset alone at PL1, its score rule blocking at ``threshold``, blocks the request."""
    firewall = compile_firewall(
        {"http_request_firewall_managed": deploy_managed_rulesets(score_threshold=threshold, managed=False)}
    )
    verdict = firewall.evaluate(fields)
    return verdict.terminal is not None and verdict.terminal.rule_id == OWASP_SCORE_RULE_ID


def bench_fields(request: HttpRequest) -> RequestFields:
    """A request of the benchmark's mixes as the firewall sees it."""
    return RequestFields.from_http(
        method=request.method,
        scheme="https",
        host=request.host,
        raw_path=request.path,
        query=request.query,
        headers=request.headers,
        body=request.body,
        client_ip=request.client_ip,
    )


@pytest.mark.parametrize("place", ["query", "rpc-param"])
@pytest.mark.parametrize(("family", "payload"), TYPICAL, ids=[family for family, _ in TYPICAL])
def test_a_typical_attack_reaches_the_medium_threshold_at_pl1(family: str, payload: str, place: str) -> None:
    sample = placed(payload, place)
    assert core_score(sample.fields()) >= 40
    assert core_blocks(sample.fields(), threshold=40)


@pytest.mark.parametrize("place", [place for place in PLACES if place not in ("query", "rpc-param")])
@pytest.mark.parametrize(("family", "payload"), TYPICAL, ids=[family for family, _ in TYPICAL])
def test_a_typical_attack_in_a_header_reaches_the_high_threshold_at_pl1(family: str, payload: str, place: str) -> None:
    assert core_blocks(placed(payload, place).fields(), threshold=25)


@pytest.mark.parametrize("place", ["query", "rpc-param"])
@pytest.mark.parametrize(("family", "payload"), BLATANT, ids=[family for family, _ in BLATANT])
def test_a_blatant_attack_reaches_the_low_threshold_at_pl1(family: str, payload: str, place: str) -> None:
    assert core_blocks(placed(payload, place).fields(), threshold=60)


@pytest.mark.parametrize("place", ["query", "rpc-param"])
@pytest.mark.parametrize(("family", "payload", "minimum"), PARTIAL, ids=[family for family, _, _ in PARTIAL])
def test_weaker_vectors_still_score_at_pl1(family: str, payload: str, minimum: int, place: str) -> None:
    assert core_score(placed(payload, place).fields()) >= minimum


def test_higher_paranoia_levels_only_add_to_the_score() -> None:
    for _, payload in TYPICAL:
        fields = placed(payload, "query").fields()
        scores = [core_score(fields, level) for level in (1, 2, 3, 4)]
        assert scores == sorted(scores), payload


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize(("family", "payload"), TYPICAL, ids=[family for family, _ in TYPICAL])
def test_the_managed_ruleset_blocks_typical_attacks_anywhere(family: str, payload: str, place: str) -> None:
    verdict = DEFAULT.evaluate(placed(payload, place).fields())
    assert verdict.terminal is not None
    assert verdict.terminal.ruleset_id == MANAGED_RULESET_ID


@pytest.mark.parametrize("level", [1, 2, 3, 4])
@pytest.mark.parametrize("sample", BENIGN, ids=lambda sample: sample.name)
def test_benign_json_rpc_scores_nothing(sample: Sample, level: int) -> None:
    allowed = 0 if level <= 2 else SCRIPTING_CLIENT_NOTICE
    assert core_score(sample.fields(), level) <= allowed


@pytest.mark.parametrize("level", [1, 2])
def test_the_benchmark_benign_mix_matches_nothing(level: int) -> None:
    hits = [request.label for request in benign_requests() if FULL[level].evaluate(bench_fields(request)).matches]
    assert hits == []
    assert all(core_score(bench_fields(request), level) == 0 for request in benign_requests())


def test_the_benchmark_attack_mix_is_blocked_at_pl1() -> None:
    missed = [request.label for request in attack_requests() if not FULL[1].evaluate(bench_fields(request)).blocked]
    assert missed == []


HEX = st.binary(min_size=0, max_size=96).map(lambda raw: "0x" + raw.hex())
QUANTITY = st.integers(min_value=0, max_value=2**64).map(hex)
BLOCK = st.one_of(QUANTITY, st.sampled_from(["latest", "pending", "earliest", "safe", "finalized"]))
ADDRESSES = st.binary(min_size=20, max_size=20).map(lambda raw: "0x" + raw.hex())
CALLS = st.one_of(
    st.tuples(st.just("eth_call"), st.tuples(st.fixed_dictionaries({"to": ADDRESSES, "data": HEX}), BLOCK)),
    st.tuples(st.just("eth_getBalance"), st.tuples(ADDRESSES, BLOCK)),
    st.tuples(st.just("eth_getLogs"), st.tuples(st.fixed_dictionaries({"fromBlock": BLOCK, "toBlock": BLOCK,
                                                                           "address": ADDRESSES,
                                                                           "topics": st.lists(HEX, max_size=4)}))),
    st.tuples(st.just("eth_sendRawTransaction"), st.tuples(HEX)),
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call=CALLS, request_id=st.one_of(st.integers(min_value=0, max_value=2**31), st.uuids().map(str)))
def test_generated_json_rpc_calls_score_nothing_at_pl2(
    call: tuple[str, tuple[object, ...]], request_id: object
) -> None:
    method, params = call
    sample = Sample("generated", rpc(method, list(params), request_id))
    assert core_score(sample.fields(), 2) == 0
    assert FULL[2].evaluate(sample.fields()).matches == ()
