"""Phase execution: actions, skip, execute with overrides, anomaly scoring, and the records a verdict makes."""

from __future__ import annotations

from typing import Any

import pytest

from edgeplane.rules import RequestFields
from edgeplane.waf.catalogue import MANAGED_RULESET_ID, OWASP_RULESET_ID, OWASP_SCORE_RULE_ID, load_catalogue
from edgeplane.waf.errors import UnknownPhaseError
from edgeplane.waf.events import firewall_event_records, security_fields
from edgeplane.waf.firewall import ALLOWED, Entrypoint, Verdict, compile_firewall, deploy_managed_rulesets

CUSTOM = "http_request_firewall_custom"
MANAGED = "http_request_firewall_managed"
UNION_URI = next(
    rule.id for rule in load_catalogue()[MANAGED_RULESET_ID].rules if rule.description == "SQLi - UNION SELECT (URI)"
)
ATTACK_QUERY = "id=1%20union%20select%202"


def request(query: str = "", user_agent: bytes = b"web3.py/7") -> RequestFields:
    return RequestFields.from_http(
        method="POST",
        scheme="http",
        host="rpc.example.com",
        raw_path="/v1/mainnet",
        query=query,
        headers=[(b"user-agent", user_agent), (b"content-type", b"application/json")],
        body=b'{"jsonrpc":"2.0","id":7,"method":"eth_blockNumber","params":[]}',
        client_ip="192.0.2.1",
    )


def rule(action: str, expression: str = "true", rule_id: str = "", **parameters: Any) -> dict[str, Any]:
    document: dict[str, Any] = {"id": rule_id or f"{action}-{abs(hash(expression)) % 10**8}", "action": action}
    document["expression"] = expression
    if parameters:
        document["action_parameters"] = parameters
    return document


def execute(ruleset_id: str = MANAGED_RULESET_ID, **overrides: Any) -> dict[str, Any]:
    parameters: dict[str, Any] = {"id": ruleset_id}
    if overrides:
        parameters["overrides"] = overrides
    return rule("execute", rule_id=f"exec-{ruleset_id[:6]}", **parameters)


def outcome(verdict: Verdict) -> tuple[str | None, list[tuple[str, str]]]:
    return verdict.action, [(match.rule_id, match.action) for match in verdict.matches]


ON_ATTACK = 'http.request.uri.query contains "union"'

# (name, phases, previous, expected terminating action, expected (rule id, action) matches)
CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]] | None, str | None, list[tuple[str, str]]]] = [
    ("nothing deployed", {}, None, None, []),
    ("managed blocks by default", {MANAGED: [execute()]}, None, "block", [(UNION_URI, "block")]),
    (
        "custom block ends evaluation",
        {CUSTOM: [rule("block", rule_id="c1")], MANAGED: [execute()]},
        None,
        "block",
        [("c1", "block")],
    ),
    (
        "log continues",
        {CUSTOM: [rule("log", rule_id="l1")], MANAGED: [execute()]},
        None,
        "block",
        [("l1", "log"), (UNION_URI, "block")],
    ),
    ("a false expression does nothing", {CUSTOM: [rule("block", "false", rule_id="c1")]}, None, None, []),
    ("a disabled rule does nothing", {CUSTOM: [{**rule("block", rule_id="c1"), "enabled": False}]}, None, None, []),
    (
        "challenges are answered as a block",
        {CUSTOM: [rule("managed_challenge", rule_id="ch")]},
        None,
        "managed_challenge",
        [("ch", "managed_challenge")],
    ),
    (
        "skip phases",
        {CUSTOM: [rule("skip", rule_id="s1", phases=[MANAGED])], MANAGED: [execute()]},
        None,
        None,
        [("s1", "skip")],
    ),
    (
        "skip without logging is not recorded",
        {
            CUSTOM: [{**rule("skip", rule_id="s1", phases=[MANAGED]), "logging": {"enabled": False}}],
            MANAGED: [execute()],
        },
        None,
        None,
        [],
    ),
    (
        "skip current ends the entrypoint",
        {MANAGED: [rule("skip", rule_id="s1", ruleset="current"), execute()]},
        None,
        None,
        [("s1", "skip")],
    ),
    (
        "skip current leaves the next entrypoint",
        {
            MANAGED: [
                Entrypoint([rule("skip", rule_id="s1", ruleset="current"), rule("block", rule_id="a1")], "account"),
                Entrypoint([rule("block", rule_id="z1")], "zone"),
            ]
        },
        None,
        "block",
        [("s1", "skip"), ("z1", "block")],
    ),
    (
        "skip rulesets",
        {MANAGED: [rule("skip", rule_id="s1", rulesets=[MANAGED_RULESET_ID]), execute()]},
        None,
        None,
        [("s1", "skip")],
    ),
    (
        "skip rules",
        {MANAGED: [rule("skip", rule_id="s1", rules={MANAGED_RULESET_ID: [UNION_URI]}), execute()]},
        None,
        None,
        [("s1", "skip")],
    ),
    (
        "skip rules of the ruleset the skip is in",
        {
            CUSTOM: [
                Entrypoint(
                    [
                        rule("skip", rule_id="s1", rules={"zone-custom": ["c1"]}),
                        rule("block", rule_id="c1"),
                        rule("log", rule_id="l1"),
                    ],
                    "zone-custom",
                )
            ]
        },
        None,
        None,
        [("s1", "skip"), ("l1", "log")],
    ),
    (
        "a skip that does not match skips nothing",
        {MANAGED: [rule("skip", "false", rule_id="s1", rulesets=[MANAGED_RULESET_ID]), execute()]},
        None,
        "block",
        [(UNION_URI, "block")],
    ),
    ("ruleset action override", {MANAGED: [execute(action="log")]}, None, None, [(UNION_URI, "log")]),
    ("ruleset disabled", {MANAGED: [execute(enabled=False)]}, None, None, []),
    (
        "category beats ruleset",
        {MANAGED: [execute(enabled=False, categories=[{"category": "sqli", "enabled": True}])]},
        None,
        "block",
        [(UNION_URI, "block")],
    ),
    (
        "rule beats category",
        {
            MANAGED: [
                execute(
                    categories=[{"category": "sqli", "action": "log"}],
                    rules=[{"id": UNION_URI, "action": "js_challenge"}],
                )
            ]
        },
        None,
        "js_challenge",
        [(UNION_URI, "js_challenge")],
    ),
    (
        "rule disabled beats category enabled",
        {
            MANAGED: [
                execute(categories=[{"category": "sqli", "enabled": True}], rules=[{"id": UNION_URI, "enabled": False}])
            ]
        },
        None,
        None,
        [],
    ),
    (
        "previous runs last",
        {CUSTOM: [rule("log", rule_id="l1")]},
        [execute()],
        "block",
        [("l1", "log"), (UNION_URI, "block")],
    ),
    (
        "skip products waf skips the previous version",
        {CUSTOM: [rule("skip", rule_id="s1", products=["waf"])]},
        [execute()],
        None,
        [("s1", "skip")],
    ),
    (
        "the new version's block comes before the previous one",
        {MANAGED: [execute(action="managed_challenge")]},
        [execute()],
        "managed_challenge",
        [(UNION_URI, "managed_challenge")],
    ),
]


@pytest.mark.parametrize(("name", "phases", "previous", "action", "matches"), CASES, ids=[case[0] for case in CASES])
def test_phase_execution(
    name: str, phases: dict[str, Any], previous: list[dict[str, Any]] | None, action: str | None, matches: list[Any]
) -> None:
    firewall = compile_firewall(phases, previous=previous)
    assert firewall.problems == ()
    verdict = firewall.evaluate(request(ATTACK_QUERY))
    assert outcome(verdict) == (action, matches)


def test_sources_name_the_stage() -> None:
    firewall = compile_firewall(
        {CUSTOM: [rule("log", rule_id="c")], MANAGED: [rule("log", rule_id="m")]}, previous=[rule("log", rule_id="p")]
    )
    assert [match.source for match in firewall.evaluate(request()).matches] == [
        "firewallCustom",
        "firewallManaged",
        "waf",
    ]


def test_a_benign_request_is_allowed() -> None:
    firewall = compile_firewall({MANAGED: deploy_managed_rulesets(paranoia_level=4)})
    assert firewall.evaluate(request("block=latest")) is ALLOWED


# (threshold, disabled paranoia levels, score rule action, expected action)
SCORING = [
    (5, [], "block", "block"),
    (10, [], "block", "block"),  # a UNION in the query: several critical rules at PL1 and PL2
    (100, [], "block", None),
    (5, [1, 2, 3, 4], "block", None),
    (5, [], "log", None),
]


@pytest.mark.parametrize(("threshold", "disabled", "score_action", "action"), SCORING)
def test_anomaly_scoring(threshold: int, disabled: list[int], score_action: str, action: str | None) -> None:
    overrides = {
        "categories": [{"category": f"paranoia-level-{level}", "enabled": False} for level in disabled],
        "rules": [{"id": OWASP_SCORE_RULE_ID, "score_threshold": threshold, "action": score_action}],
    }
    firewall = compile_firewall({MANAGED: [execute(OWASP_RULESET_ID, **overrides)]})
    verdict = firewall.evaluate(request("id=1%27%20union%20select%202,3"))
    assert verdict.action == action
    scored = [match for match in verdict.matches if match.rule_id == OWASP_SCORE_RULE_ID]
    if action is None and score_action == "log" and scored:
        assert int(scored[0].metadata["score"]) >= threshold
    if scored:
        assert scored[0].metadata["threshold"] == str(threshold)
        assert scored[0].metadata["rules"]


def test_ruleset_action_override_leaves_scoring_rules_scoring() -> None:
    overrides = {"action": "log", "rules": [{"id": OWASP_SCORE_RULE_ID, "score_threshold": 5}]}
    firewall = compile_firewall({MANAGED: [execute(OWASP_RULESET_ID, **overrides)]})
    verdict = firewall.evaluate(request("id=1%27%20union%20select%202,3"))
    assert [match.rule_id for match in verdict.matches] == [OWASP_SCORE_RULE_ID]
    assert verdict.matches[0].action == "log"


def test_a_custom_block_response() -> None:
    response = {"status_code": 429, "content": '{"error":"slow down"}', "content_type": "application/json"}
    verdict = compile_firewall({CUSTOM: [rule("block", response=response)]}).evaluate(request())
    assert verdict.status == 429
    assert verdict.response is not None
    assert verdict.response.content == b'{"error":"slow down"}'


def test_a_block_without_response_is_403() -> None:
    assert compile_firewall({CUSTOM: [rule("block")]}).evaluate(request()).status == 403


def test_broken_rules_are_left_out_and_reported() -> None:
    firewall = compile_firewall(
        {
            CUSTOM: [
                rule("block", "http.nope eq 1", rule_id="bad-field"),
                rule("frobnicate", rule_id="bad-action"),
                rule("execute", rule_id="bad-ruleset", id="0" * 32),
                rule("log", rule_id="good"),
            ]
        }
    )
    assert len(firewall.problems) == 3
    assert outcome(firewall.evaluate(request())) == (None, [("good", "log")])


def test_execute_an_account_custom_ruleset() -> None:
    custom_id = "c" * 32
    firewall = compile_firewall(
        {CUSTOM: [execute(custom_id, rules=[{"id": "r2", "enabled": False}])]},
        rulesets={
            custom_id: [rule("block", "false", rule_id="r1"), rule("block", rule_id="r2"), rule("log", rule_id="r3")]
        },
    )
    assert outcome(firewall.evaluate(request())) == (None, [("r3", "log")])


def test_an_unknown_phase_is_a_caller_error() -> None:
    with pytest.raises(UnknownPhaseError):
        compile_firewall({"http_request_late_transform": []})


def test_deploy_managed_rulesets_checks_the_paranoia_level() -> None:
    with pytest.raises(ValueError, match="paranoia level 5"):
        deploy_managed_rulesets(paranoia_level=5)


def test_records_of_a_verdict() -> None:
    firewall = compile_firewall({CUSTOM: [rule("log", rule_id="l1")], MANAGED: [rule("challenge", rule_id="b1")]})
    verdict = firewall.evaluate(request())
    common = {"ClientIP": "192.0.2.1", "RayID": "00000000000000aa"}
    events = firewall_event_records(verdict, common, datetime_ns=123, edge_status=403)
    assert [(event["RuleID"], event["Action"], event["MatchIndex"], event["Source"]) for event in events] == [
        ("l1", "log", 1, "firewallCustom"),
        ("b1", "block", 0, "firewallManaged"),
    ]
    assert events[1]["Metadata"]["action"] == "challenge"
    assert all(event["Kind"] == "firewall" and event["RayID"] == "00000000000000aa" for event in events)
    assert security_fields(verdict) == {
        "SecurityAction": "block",
        "SecurityActions": ["log", "block"],
        "SecurityRuleID": "b1",
        "SecurityRuleIDs": ["l1", "b1"],
        "SecurityRuleDescription": "",
        "SecuritySources": ["firewallCustom", "firewallManaged"],
    }
    assert security_fields(ALLOWED) == {}


def test_evaluation_never_raises_on_a_failing_rule() -> None:
    def exploding(_: RequestFields) -> bool:
        raise RuntimeError("boom")

    firewall = compile_firewall({CUSTOM: [rule("log", rule_id="x"), rule("log", rule_id="y")]})
    firewall._stages[0].entrypoints[0].rules[0].predicate = exploding
    assert outcome(firewall.evaluate(request())) == (None, [("y", "log")])
