"""The engine's semantics on small rule sets: targets, pipelines, chains, captures, setvar, flow, ctl, logging."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeplane.seclang.engine import Evaluation, compile_rules
from edgeplane.seclang.request import HttpRequest
from edgeplane.seclang.rule_files import parse_rules


def request(
    target: bytes = b"/",
    *,
    method: bytes = b"GET",
    headers: tuple[tuple[bytes, bytes], ...] = ((b"Host", b"localhost"), (b"User-Agent", b"test")),
    body: bytes = b"",
) -> HttpRequest:
    if body:
        headers = (
            *headers,
            (b"Content-Type", b"application/x-www-form-urlencoded"),
            (b"Content-Length", str(len(body)).encode()),
        )
    return HttpRequest(method=method, target=target, protocol=b"HTTP/1.1", headers=headers, body=body)


def evaluate(rules: str, http_request: HttpRequest, **options: object) -> Evaluation:
    engine = compile_rules(parse_rules(rules), data_dir=Path("/nonexistent"))
    return engine.evaluate(http_request, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("target_text", "url", "fires"),
    [
        ("ARGS:foo", b"/?foo=attack", True),
        ("ARGS:foo", b"/?FOO=attack", True),  # key selectors ignore case
        ("ARGS:foo", b"/?bar=attack", False),
        ("ARGS|!ARGS:foo", b"/?foo=attack", False),
        ("ARGS|!ARGS:/^f/", b"/?foo=attack&bar=attack", True),
        ("ARGS|!ARGS:/^f/", b"/?foo=attack&far=attack", False),
        ("ARGS:/^f.o$/", b"/?fxo=attack", True),
        ("ARGS_NAMES", b"/?attack=1", True),
        ("REQUEST_HEADERS:user-agent", b"/?x=attack", False),
        ("QUERY_STRING", b"/?x=attack", True),
    ],
)
def test_targets(target_text: str, url: bytes, fires: bool) -> None:
    result = evaluate(f'SecRule {target_text} "@rx attack" "id:1,phase:2,pass"', request(url))
    assert (1 in result.fired_ids) is fires


def test_header_selector_ignores_case() -> None:
    rules = 'SecRule REQUEST_HEADERS:user-agent "@rx ^sqlmap" "id:1,phase:1,pass"'
    http = request(headers=((b"Host", b"x"), (b"USER-AGENT", b"sqlmap/1.0")))
    assert evaluate(rules, http).fired_ids == {1}


@pytest.mark.parametrize(
    ("url", "count"),
    [(b"/", b"0"), (b"/?a=1", b"1"), (b"/?a=1&b=2&c=3", b"3")],
)
def test_count(url: bytes, count: bytes) -> None:
    rules = 'SecRule &ARGS "@unconditionalMatch" "id:1,phase:2,pass,nolog,setvar:tx.n=%{MATCHED_VAR}"'
    assert evaluate(rules, request(url)).tx["n"] == count


def test_match_is_logged_with_expanded_metadata() -> None:
    rules = (
        'SecRule ARGS "@rx (att)ack" "id:10,phase:2,pass,capture,t:none,t:lowercase,severity:\'CRITICAL\','
        "tag:'attack-x',msg:'Attack in %{MATCHED_VAR_NAME}',logdata:'Matched %{TX.1} in %{MATCHED_VAR}'\""
    )
    (match,) = evaluate(rules, request(b"/?q=ATTACK")).matches
    assert match.rule_id == 10
    assert match.msg == "Attack in ARGS:q"
    assert match.logdata == "Matched att in attack"
    assert match.severity == "CRITICAL"
    assert match.tags == ("attack-x",)
    assert (match.matched_var_name, match.matched_var) == ("ARGS:q", b"attack")


def test_nolog_rule_runs_its_actions_but_is_not_reported() -> None:
    rules = 'SecRule ARGS "@rx a" "id:1,phase:2,pass,nolog,setvar:tx.seen=1"'
    result = evaluate(rules, request(b"/?x=a"))
    assert result.fired_ids == frozenset()
    assert result.tx["seen"] == b"1"


def test_setvar_runs_once_per_matching_value() -> None:
    rules = 'SecRule ARGS "@rx a" "id:1,phase:2,pass,setvar:\'tx.anomaly_score=+%{tx.critical_anomaly_score}\'"'
    result = evaluate(rules, request(b"/?x=a&y=a&z=b"), tx={"critical_anomaly_score": "5"})
    assert result.anomaly_score == 10


@pytest.mark.parametrize(
    ("setvar", "before", "after"),
    [
        ("tx.v=7", None, b"7"),
        ("tx.v=+3", b"4", b"7"),
        ("tx.v=-3", b"4", b"1"),
        ("tx.v=+3", None, b"3"),
        ("tx.v=%{tx.w}-x", None, b"w-x"),
    ],
)
def test_setvar_operations(setvar: str, before: bytes | None, after: bytes) -> None:
    seed: dict[str, str | bytes] = {"w": "w"}
    if before is not None:
        seed["v"] = before
    rules = f"SecAction \"id:1,phase:1,pass,nolog,setvar:'{setvar}'\""
    assert evaluate(rules, request(), tx=seed).tx["v"] == after


def test_setvar_delete_and_macro_in_name() -> None:
    rules = (
        "SecAction \"id:1,phase:1,pass,nolog,setvar:'tx.%{rule.id}-x=1',setvar:'!tx.gone'\"\n"
        'SecRule TX:1-x "@streq 1" "id:2,phase:1,pass"'
    )
    result = evaluate(rules, request(), tx={"gone": "1"})
    assert "gone" not in result.tx
    assert result.fired_ids == {2}


@pytest.mark.parametrize(
    ("method", "length", "fires"), [(b"GET", b"5", True), (b"GET", b"0", False), (b"POST", b"5", False)]
)
def test_chain_needs_every_link(method: bytes, length: bytes, fires: bool) -> None:
    rules = (
        'SecRule REQUEST_METHOD "@rx ^(?:GET|HEAD)$" "id:5,phase:1,pass,chain,msg:\'GET with a body\'"\n'
        '    SecRule REQUEST_HEADERS:Content-Length "!@rx ^0?$" "setvar:tx.chained=1"'
    )
    http = request(method=method, headers=((b"Host", b"x"), (b"Content-Length", length)))
    result = evaluate(rules, http)
    assert (5 in result.fired_ids) is fires


def test_negated_operator_without_values_does_not_match() -> None:
    rules = 'SecRule REQUEST_HEADERS:Content-Length "!@rx ^0?$" "id:1,phase:1,pass"'
    assert evaluate(rules, request()).fired_ids == frozenset()


def test_capture_feeds_the_chained_rule() -> None:
    rules = (
        'SecRule REQUEST_FILENAME "@rx \\.(\\w+)$" "id:1,phase:2,pass,capture,chain"\n'
        '    SecRule TX:1 "@within .bak .old" "setvar:\'tx.ext=%{tx.1}\'"'
    )
    assert evaluate(rules, request(b"/a.bak")).fired_ids == {1}
    assert evaluate(rules, request(b"/a.php")).fired_ids == frozenset()


def test_skip_after_marker_gates_by_paranoia_level() -> None:
    rules = (
        'SecRule TX:EXECUTING_PARANOIA_LEVEL "@lt 2" "id:100,phase:2,pass,nolog,skipAfter:END-PL2"\n'
        'SecRule ARGS "@rx a" "id:101,phase:2,pass"\n'
        'SecMarker "END-PL2"\n'
        'SecRule ARGS "@rx a" "id:102,phase:2,pass"'
    )
    assert evaluate(rules, request(b"/?x=a"), tx={"executing_paranoia_level": "1"}).fired_ids == {102}
    assert evaluate(rules, request(b"/?x=a"), tx={"executing_paranoia_level": "2"}).fired_ids == {101, 102}


@pytest.mark.parametrize(
    ("control", "fired"),
    [
        ("ctl:ruleRemoveById=3", {2}),
        ("ctl:ruleRemoveById=3-9", {2}),
        ("ctl:ruleRemoveByTag=t3", {2}),
        ("ctl:ruleRemoveTargetById=3;ARGS:x", {2}),
        ("ctl:ruleRemoveTargetById=3;ARGS", {2}),
        ("ctl:ruleRemoveTargetByTag=t3;ARGS:x", {2}),
        ("ctl:ruleRemoveTargetById=3;ARGS:y", {2, 3}),
    ],
)
def test_ctl_removes_rules_and_targets(control: str, fired: set[int]) -> None:
    rules = (
        f'SecRule REQUEST_URI "@rx ^/" "id:2,phase:1,pass,{control}"\n'
        'SecRule ARGS "@rx a" "id:3,phase:2,pass,tag:\'t3\'"'
    )
    assert evaluate(rules, request(b"/?x=a")).fired_ids == fired


@pytest.mark.parametrize(
    ("disabled", "fired", "tx_n"),
    [
        (frozenset(), {2, 3}, b"2"),
        (frozenset({3}), {2}, b"1"),
        (frozenset({2}), {3}, b"1"),
        (frozenset({2, 3}), frozenset(), None),
    ],
)
def test_disabled_rules_do_not_run(disabled: frozenset[int], fired: set[int], tx_n: bytes | None) -> None:
    rules = (
        'SecRule REQUEST_URI "@rx ^/" "id:2,phase:1,pass,setvar:tx.n=+1"\n'
        'SecRule ARGS "@rx a" "id:3,phase:2,pass,setvar:tx.n=+1"'
    )
    result = evaluate(rules, request(b"/?x=a"), disabled=disabled)
    assert result.fired_ids == fired
    assert result.tx.get("n") == tx_n


def test_transformations_and_none() -> None:
    rules = 'SecRule ARGS "@rx ^abc$" "id:1,phase:2,pass,t:lowercase,t:none,t:urlDecodeUni"'
    assert evaluate(rules, request(b"/?x=%61bc")).fired_ids == {1}
    assert evaluate(rules, request(b"/?x=ABC")).fired_ids == frozenset()


def test_multi_match_tries_each_step() -> None:
    plain = 'SecRule ARGS "@rx ^ABC$" "id:1,phase:2,pass,t:lowercase"'
    multi = 'SecRule ARGS "@rx ^ABC$" "id:1,phase:2,pass,t:lowercase,multiMatch"'
    assert evaluate(plain, request(b"/?x=ABC")).fired_ids == frozenset()
    assert evaluate(multi, request(b"/?x=ABC")).fired_ids == {1}


def test_operator_argument_macro() -> None:
    rules = 'SecRule REQUEST_METHOD "!@within %{tx.allowed_methods}" "id:911100,phase:1,pass"'
    assert evaluate(rules, request(method=b"PUT"), tx={"allowed_methods": "GET POST"}).fired_ids == {911100}
    assert evaluate(rules, request(method=b"GET"), tx={"allowed_methods": "GET POST"}).fired_ids == frozenset()


def test_phase_1_does_not_see_the_body() -> None:
    rules = 'SecRule ARGS "@rx a" "id:1,phase:1,pass"\nSecRule ARGS "@rx a" "id:2,phase:2,pass"'
    assert evaluate(rules, request(method=b"POST", body=b"x=a")).fired_ids == {2}


@pytest.mark.parametrize(("mode", "fired"), [("On", {1}), ("DetectionOnly", {1, 2})])
def test_allow_stops_without_blocking_when_the_engine_is_on(mode: str, fired: set[int]) -> None:
    rules = 'SecRule ARGS "@rx a" "id:1,phase:1,allow"\nSecRule ARGS "@rx a" "id:2,phase:2,deny"'
    result = evaluate(rules, request(b"/?x=a"), mode=mode)
    assert result.fired_ids == fired
    assert result.interrupted_by is None


def test_anomaly_scores_leave_out_weights() -> None:
    rules = (
        'SecAction "id:1,phase:1,pass,nolog,setvar:tx.critical_anomaly_score=5,setvar:tx.anomaly_score_pl1=5,'
        'setvar:tx.sql_injection_score=5,setvar:tx.anomaly_score=5,setvar:tx.inbound_anomaly_score_threshold=5"'
    )
    assert evaluate(rules, request()).anomaly_scores == {
        "anomaly_score_pl1": 5,
        "sql_injection_score": 5,
        "anomaly_score": 5,
    }


@pytest.mark.parametrize(("mode", "fired"), [("On", {1}), ("DetectionOnly", {1, 2})])
def test_deny_stops_only_when_the_engine_is_on(mode: str, fired: set[int]) -> None:
    rules = 'SecRule ARGS "@rx a" "id:1,phase:1,deny"\nSecRule ARGS "@rx a" "id:2,phase:2,pass"'
    result = evaluate(rules, request(b"/?x=a"), mode=mode)
    assert result.fired_ids == fired
    assert result.interrupted_by == (1 if mode == "On" else None)


def test_matched_vars_of_a_chain() -> None:
    rules = (
        'SecRule ARGS "@rx a" "id:1,phase:2,pass,chain"\n'
        '    SecRule MATCHED_VARS_NAMES "@rx ^ARGS:y$" "setvar:\'tx.names=%{MATCHED_VAR}\'"'
    )
    result = evaluate(rules, request(b"/?x=a&y=a"))
    assert result.fired_ids == {1}
    assert result.tx["names"] == b"ARGS:y"


def json_request(body: bytes, content_type: bytes = b"application/json") -> HttpRequest:
    headers = ((b"Host", b"x"), (b"Content-Type", content_type), (b"Content-Length", str(len(body)).encode()))
    return HttpRequest(method=b"POST", target=b"/", protocol=b"HTTP/1.1", headers=headers, body=body)


@pytest.mark.parametrize(
    ("rules", "fired"),
    [
        ('SecRule REQUEST_BODY "@rx attack" "id:1,phase:2,pass"', frozenset()),
        (
            'SecAction "id:2,phase:1,pass,nolog,ctl:forceRequestBodyVariable=On"\n'
            'SecRule REQUEST_BODY "@rx attack" "id:1,phase:2,pass"',
            {1},
        ),
        ('SecRule ARGS:json.a "@rx attack" "id:1,phase:2,pass"', {1}),
    ],
)
def test_json_body(rules: str, fired: set[int]) -> None:
    assert evaluate(rules, json_request(b'{"a": "attack"}')).fired_ids == fired


def test_ctl_request_body_processor() -> None:
    rules = (
        'SecRule REQUEST_HEADERS:Content-Type "@rx ^text/plain" '
        '"id:2,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"\n'
        'SecRule ARGS:json.a "@rx attack" "id:1,phase:2,pass"'
    )
    assert evaluate(rules, json_request(b'{"a": "attack"}', b"text/plain")).fired_ids == {1}


CRS_RULES = Path("/usr/share/modsecurity-crs/rules")


@pytest.mark.skipif(not CRS_RULES.is_dir(), reason="modsecurity-crs is not installed")
@pytest.mark.parametrize(
    ("paranoia_level", "url", "fired", "blocked"),
    [
        ("1", b"/?id=1%27%20or%20%271%27%3D%271", {942100, 949110}, True),
        ("1", b"/?q=hello%20world", frozenset(), False),
        ("1", b"/?file=../../etc/passwd", {930100, 930110, 930120, 949110}, True),
    ],
)
def test_crs_anomaly_scoring(paranoia_level: str, url: bytes, fired: set[int], blocked: bool) -> None:
    from edgeplane.seclang.engine import load_crs

    engine = load_crs(CRS_RULES)
    http = request(url, headers=((b"Host", b"localhost"), (b"User-Agent", b"test"), (b"Accept", b"*/*")))
    result = engine.evaluate(http, tx={"crs_setup_version": "334", "paranoia_level": paranoia_level})
    assert fired <= result.fired_ids if fired else result.fired_ids == frozenset()
    assert (result.interrupted_by == 949110) is blocked
    assert (result.anomaly_score >= 5) is blocked


_TOKENS = st.sampled_from(
    [b"a", b"=", b"&", b"%", b"%2", b"%zz", b"\x00", b"\xff", b"'", b'"', b"<", b"{", b"}", b"[", b";", b"\r\n", b" "]
)
_BYTES = st.lists(st.one_of(_TOKENS, st.binary(max_size=4)), max_size=12).map(b"".join)
_CONTENT_TYPES = st.sampled_from(
    [b"application/json", b"application/xml", b"multipart/form-data; boundary=x", b"application/x-www-form-urlencoded"]
)


@pytest.fixture(scope="module")
def crs_engine() -> object:
    from edgeplane.seclang.engine import load_crs

    return load_crs(CRS_RULES)


@pytest.mark.skipif(not CRS_RULES.is_dir(), reason="modsecurity-crs is not installed")
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(method=_BYTES, target=_BYTES, header=_BYTES, content_type=_CONTENT_TYPES, body=_BYTES)
def test_any_request_evaluates_without_raising(
    crs_engine: object, method: bytes, target: bytes, header: bytes, content_type: bytes, body: bytes
) -> None:
    http = HttpRequest(
        method=method,
        target=b"/" + target,
        protocol=b"HTTP/1.1",
        headers=((b"Host", b"x"), (b"X-" + header[:4], header), (b"Content-Type", content_type), (b"Cookie", header)),
        body=body,
    )
    result = crs_engine.evaluate(http, tx={"crs_setup_version": "334", "paranoia_level": "4"})  # type: ignore[attr-defined]
    assert all(match.rule_id > 0 for match in result.matches)
