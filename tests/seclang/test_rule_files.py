"""SecLang text read into the typed model (targets, operators, actions, chains, markers), and the CRS files whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgeplane.seclang.actions import Control, compile_actions
from edgeplane.seclang.errors import RuleFileError
from edgeplane.seclang.rule_files import Action, SecMarker, SecRule, Target, load_rule_files, parse_rules

CRS_RULES = Path("/usr/share/modsecurity-crs/rules")


def only_rule(text: str) -> SecRule:
    (directive,) = parse_rules(text)
    assert isinstance(directive, SecRule)
    return directive


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ("ARGS", (Target("ARGS"),)),
        ("ARGS:foo", (Target("ARGS", "foo"),)),
        ("REQUEST_HEADERS:User-Agent", (Target("REQUEST_HEADERS", "User-Agent"),)),
        (
            "REQUEST_COOKIES|!REQUEST_COOKIES:/__utm/",
            (Target("REQUEST_COOKIES"), Target("REQUEST_COOKIES", "__utm", True, excluded=True)),
        ),
        ("&TX:paranoia_level", (Target("TX", "paranoia_level", counted=True),)),
        ("&ARGS", (Target("ARGS", counted=True),)),
        ("request_filename", (Target("REQUEST_FILENAME"),)),
        ("XML:/*", (Target("XML", "/*"),)),
        ("TX:/^HEADER_NAME_/", (Target("TX", "^HEADER_NAME_", True),)),
    ],
)
def test_targets(variables: str, expected: tuple[Target, ...]) -> None:
    rule = only_rule(f'SecRule {variables} "@rx a" "id:1,phase:2,pass"')
    assert rule.targets == expected


@pytest.mark.parametrize(
    ("operator", "name", "argument", "negated"),
    [
        ('"@rx ^a$"', "rx", "^a$", False),
        ('"!@rx ^a$"', "rx", "^a$", True),
        ('"@eq 0"', "eq", "0", False),
        ('"@detectSQLi"', "detectSQLi", "", False),
        ('"@within %{tx.allowed_methods}"', "within", "%{tx.allowed_methods}", False),
        ('"@pmFromFile unix-shell.data"', "pmFromFile", "unix-shell.data", False),
        ('"^plain pattern"', "rx", "^plain pattern", False),
    ],
)
def test_operators(operator: str, name: str, argument: str, negated: bool) -> None:
    rule = only_rule(f'SecRule ARGS {operator} "id:1,phase:2,pass"')
    assert (rule.operator, rule.operator_argument, rule.operator_negated) == (name, argument, negated)


def test_actions_keep_their_whole_argument() -> None:
    rule = only_rule(
        'SecRule ARGS "@rx a" "id:7,phase:2,block,t:none,t:urlDecodeUni,msg:\'A message\','
        "ctl:ruleRemoveTargetById=942450;ARGS:foo,setvar:'tx.score=+%{tx.critical_anomaly_score}',nolog\""
    )
    assert rule.actions == (
        Action("id", "7"),
        Action("phase", "2"),
        Action("block"),
        Action("t", "none"),
        Action("t", "urlDecodeUni"),
        Action("msg", "A message"),
        Action("ctl", "ruleRemoveTargetById=942450;ARGS:foo"),
        Action("setvar", "tx.score=+%{tx.critical_anomaly_score}"),
        Action("nolog"),
    )
    assert rule.rule_id == 7


def test_sec_action_is_an_unconditional_rule() -> None:
    rule = only_rule('SecAction "id:900000,phase:1,nolog,pass,setvar:tx.paranoia_level=1"')
    assert rule.targets == ()
    assert rule.operator == "unconditionalMatch"


def test_chain_links_follow_the_starter() -> None:
    (directive,) = parse_rules(
        'SecRule REQUEST_METHOD "@rx ^GET$" "id:5,phase:2,block,chain"\n'
        '    SecRule REQUEST_HEADERS:Content-Length "!@rx ^0?$" "chain"\n'
        '        SecRule ARGS "@rx x" "setvar:tx.a=1"\n'
    )
    assert isinstance(directive, SecRule)
    assert directive.chained_rule is not None
    assert directive.chained_rule.targets == (Target("REQUEST_HEADERS", "Content-Length"),)
    assert directive.chained_rule.chained_rule is not None
    assert directive.chained_rule.chained_rule.chained_rule is None
    assert directive.chained_rule.rule_id is None


def test_markers_and_comments() -> None:
    directives = parse_rules('# a comment\nSecMarker "END-X"\nSecComponentSignature "x/1"\n')
    assert directives == (SecMarker("END-X", "<rules>:2"),)


@pytest.mark.parametrize(
    "text",
    [
        'SecRule ARGS "@rx a" "id:1,phase:2,chain"\n',
        "SecRuleEngine On\n",
    ],
)
def test_refused(text: str) -> None:
    with pytest.raises(RuleFileError):
        parse_rules(text)


@pytest.mark.parametrize(
    ("actions", "field", "expected"),
    [
        ("t:lowercase,t:none,t:urlDecodeUni", "transformations", ("urlDecodeUni",)),
        ("t:lowercase,t:urlDecodeUni", "transformations", ("lowercase", "urlDecodeUni")),
        ("severity:'CRITICAL'", "severity", "CRITICAL"),
        ("severity:2", "severity", "CRITICAL"),
        ("phase:request", "phase", 2),
        ("nolog", "log", False),
        ("skipAfter:END-REQUEST-942", "skip_after", "END-REQUEST-942"),
        ("ctl:ruleRemoveById=942100", "controls", (Control("ruleRemoveById", "942100"),)),
        (
            "ctl:ruleRemoveTargetByTag=OWASP_CRS;ARGS:x",
            "controls",
            (Control("ruleRemoveTargetByTag", "OWASP_CRS", "ARGS:x"),),
        ),
        ("tag:'a',tag:'b'", "tags", ("a", "b")),
        ("deny", "disruptive", "deny"),
        ("multiMatch,capture", "multi_match", True),
    ],
)
def test_compiled_actions(actions: str, field: str, expected: object) -> None:
    rule = only_rule(f'SecRule ARGS "@rx a" "id:1,{actions}"')
    assert getattr(compile_actions(rule.actions), field) == expected


@pytest.mark.parametrize(
    ("setvar", "collection", "operation", "value"),
    [
        ("tx.a=1", "TX", "set", "1"),
        ("tx.a=+%{tx.critical_anomaly_score}", "TX", "add", "%{tx.critical_anomaly_score}"),
        ("ip.a=-1", "IP", "subtract", "1"),
        ("!tx.a", "TX", "delete", ""),
        ("tx.a", "TX", "set", "1"),
    ],
)
def test_setvar_forms(setvar: str, collection: str, operation: str, value: str) -> None:
    rule = only_rule(f'SecRule ARGS "@rx a" "id:1,setvar:\'{setvar}\'"')
    (compiled,) = compile_actions(rule.actions).setvars
    assert (compiled.collection, compiled.operation, compiled.value.text) == (collection, operation, value)


@pytest.mark.parametrize("actions", ["setvar:nocollection", "phase:9", "severity:LOUD", "id:x"])
def test_bad_actions(actions: str) -> None:
    rule = only_rule(f'SecRule ARGS "@rx a" "{actions}"')
    with pytest.raises(RuleFileError):
        compile_actions(rule.actions)


def test_unknown_action_is_refused() -> None:
    with pytest.raises(RuleFileError):
        compile_actions([Action("bogus")])


@pytest.mark.skipif(not CRS_RULES.is_dir(), reason="modsecurity-crs is not installed")
def test_crs_request_files_load() -> None:
    directives = load_rule_files(sorted(CRS_RULES.glob("REQUEST-9*.conf")))
    rules = [directive for directive in directives if isinstance(directive, SecRule)]
    ids = [rule.rule_id for rule in rules]
    assert len(ids) == len(set(ids)) > 400
    assert all(rule_id is not None for rule_id in ids)
    assert any(
        isinstance(directive, SecMarker) and directive.name == "END-REQUEST-942-APPLICATION-ATTACK-SQLI"
        for directive in directives
    )
    for rule in rules:
        link: SecRule | None = rule
        while link is not None:
            compile_actions(link.actions, source=link.source)
            link = link.chained_rule


@pytest.mark.parametrize(
    ("written", "argument"),
    [
        (r'"@rx (?:^|[^\\\\])\\\\[cd]"', r"(?:^|[^\\])\\[cd]"),
        (r'"@rx a\"b"', 'a"b'),
        (r'"@rx \d+\s"', r"\d+\s"),
    ],
)
def test_operator_argument_loses_one_level_of_escaping(written: str, argument: str) -> None:
    assert only_rule(f'SecRule ARGS {written} "id:1"').operator_argument == argument
