"""The managed rulesets' content: the Managed Ruleset's rules compile and are well tagged, the OWASP Core Ruleset is the
CRS installed on the machine in the Rulesets API's shape; attacks are caught, benign JSON-RPC passes.

Benign JSON-RPC traffic (this corpus, the benchmark's benign mix, generated calls) matches nothing at PL1 and PL2 and
scores nothing up to PL3; at PL4 a JSON value in a cookie may add one warning (3), below every threshold. The Managed
Ruleset blocks every attack of the corpus; CRS alone at PL1, at its own threshold (5), sees those it has rules for.
How much CRS detects is measured on its own regression suite (``tests/seclang/test_crs_regression.py``)."""

from __future__ import annotations

import pytest
from bench.waf_requests import HttpRequest, attack_requests, benign_requests
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from edgeplane.rules import RequestFields, compile_expression
from edgeplane.waf.catalogue import (
    MANAGED_RULESET_ID,
    OWASP_RULESET_ID,
    OWASP_SCORE_RULE_ID,
    SEVERITY_SCORES,
    core_rule_id,
    load_catalogue,
)
from edgeplane.waf.core_ruleset import core_rule_set
from edgeplane.waf.firewall import compile_firewall, deploy_managed_rulesets
from tests.waf.corpus import ATTACKS, BENIGN, PLACES, TYPICAL, Attack, Sample, placed, rpc

CATALOGUE = load_catalogue()
ALL_RULES = [(ruleset.id, rule) for ruleset in CATALOGUE.values() for rule in ruleset.rules]
EXPRESSION_RULES = [(ruleset_id, rule) for ruleset_id, rule in ALL_RULES if rule.crs_id is None]


def test_both_rulesets_are_shipped_with_their_public_ids() -> None:
    assert set(CATALOGUE) == {MANAGED_RULESET_ID, OWASP_RULESET_ID}
    assert CATALOGUE[OWASP_RULESET_ID].rules[-1].id == OWASP_SCORE_RULE_ID


def test_rule_ids_are_unique_across_rulesets() -> None:
    ids = [rule.id for _, rule in ALL_RULES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(("ruleset_id", "rule"), EXPRESSION_RULES, ids=lambda value: getattr(value, "id", value))
def test_every_rule_compiles(ruleset_id: str, rule: object) -> None:
    expression = compile_expression(rule.expression)  # type: ignore[attr-defined]
    if rule.id != OWASP_SCORE_RULE_ID and "matches" in rule.expression:  # type: ignore[attr-defined]
        assert expression.prefilter is not None, "a signature the multi-pattern index cannot run"


def test_the_core_ruleset_offers_every_crs_rule_that_scores() -> None:
    crs = core_rule_set()
    *core, score_rule = CATALOGUE[OWASP_RULESET_ID].rules
    assert [rule.crs_id for rule in core] == [rule.crs_id for rule in crs.rules]
    assert 150 <= len(core) <= 400
    for rule, source in zip(core, crs.rules, strict=True):
        assert rule.id == core_rule_id(source.crs_id)
        assert rule.ref == str(source.crs_id)
        assert rule.description.startswith(f"{source.crs_id}: ")
        assert rule.action == "score"
        assert rule.severity in SEVERITY_SCORES
        levels = [category for category in rule.categories if category.startswith("paranoia-level-")]
        assert levels == [f"paranoia-level-{source.paranoia_level}"]
    assert score_rule.score_threshold == 40
    assert score_rule.action == "block"


def test_core_rule_ids_are_stable() -> None:
    # The id of a CRS rule's managed rule is derived from the CRS id alone: deployments that name it keep working.
    assert core_rule_id(942100) == core_rule_id(942100) != core_rule_id(942101)
    assert len(core_rule_id(942100)) == 32


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
# At PL4, CRS counts SQL special characters in cookies (942421): a JSON cookie value is a warning. Documented.
JSON_COOKIE_WARNING = 3


def core_score(fields: RequestFields, level: int = 1) -> int:
    """The request's anomaly score in the Core Ruleset at ``level``."""
    for match in CORE_SCORES[level].evaluate(fields).matches:
        if match.rule_id == OWASP_SCORE_RULE_ID:
            return int(match.metadata["score"])
    return 0


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
    allowed = 0 if level <= 3 else JSON_COOKIE_WARNING
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
@given(call=CALLS, request_id=st.one_of(st.integers(min_value=0, max_value=2**32), st.uuids().map(str)))
@example(call=("eth_chainId", ()), request_id=2147483647)  # 942220's integer overflow values, as a request id
@example(call=("eth_chainId", ()), request_id=4294967295)
def test_generated_json_rpc_calls_score_nothing_at_pl2(
    call: tuple[str, tuple[object, ...]], request_id: object
) -> None:
    method, params = call
    sample = Sample("generated", rpc(method, list(params), request_id))
    assert core_score(sample.fields(), 2) == 0
    assert FULL[2].evaluate(sample.fields()).matches == ()
