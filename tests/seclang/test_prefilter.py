"""The prefilter: superset patterns, the pattern set, and the prefiltered walk against the plain walk (the oracle) on
CRS's regression corpus and on generated requests."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeplane.seclang.engine import RuleEngine, compile_rules
from edgeplane.seclang.operators import compile_operator
from edgeplane.seclang.prefilter import PatternSet, superset_pattern
from edgeplane.seclang.request import HttpRequest
from edgeplane.seclang.rule_files import SecRule, load_rule_files, parse_rules
from edgeplane.waf.core_ruleset import EXCLUSION_FILES

CRS_RULES = Path("/usr/share/modsecurity-crs/rules")
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "waf" / "crs-regression-3.3.4.json"
needs_crs = pytest.mark.skipif(not CRS_RULES.is_dir(), reason="modsecurity-crs is not installed")


@pytest.mark.parametrize(
    ("operator", "argument", "matching", "not_matching"),
    [
        ("rx", "^a+b$", [b"aab", b"x\nab"], [b"ba", b"AB"]),
        ("rx", "(?i)select", [b"SeLeCt"], [b"selec"]),
        ("pm", "foo Bar", [b"xFOOx", b"bar"], [b"fo"]),
        ("pm", '"|41 42|c"', [b"C41", b"x42|c"], [b"abc"]),  # ModSecurity reads only a-f as hex digits
        ("pm", "a.b (x)", [b"A.B", b"(X)"], [b"axb", b"x"]),
        ("validateByteRange", "10, 13, 32-126", [b"a\x00", b"\xff", b"\t"], [b"abc", b"a b\r\n"]),
        ("validateUrlEncoding", "", [b"%", b"a%zz", b"%4"], [b"abc"]),
        ("validateUtf8Encoding", "", [b"\xff", b"a\xc3"], [b"abc"]),
        ("contains", "a.b", [b"xa.bx"], [b"axb", b"A.B"]),
        ("containsWord", "cat", [b"a cat"], [b"ca t"]),
        ("beginsWith", "GET ", [b"GET /"], [b" GET /", b"get /"]),
        ("endsWith", ".php", [b"/a.php"], [b"/a.php/", b"a\n.php\n"]),
        ("streq", "POST", [b"POST"], [b"POSTS", b"xPOST", b"POST\n"]),
    ],
)
def test_superset_pattern_matches_what_the_operator_matches(
    operator: str, argument: str, matching: list[bytes], not_matching: list[bytes]
) -> None:
    pattern = superset_pattern(operator, argument, data_dir=Path("/nonexistent"))
    assert pattern is not None
    patterns = PatternSet([pattern])
    compiled = compile_operator(operator, argument, data_dir=Path("/nonexistent"))
    for value in matching:
        assert compiled(value) is not None, value
        assert patterns.hits(value) == (0,), value
    for value in not_matching:
        assert patterns.hits(value) == (), value


@pytest.mark.parametrize(
    ("operator", "argument"),
    [
        ("rx", ""),
        ("rx", "(?<=a"),
        ("eq", "1"),
        ("detectSQLi", ""),
        ("pmFromFile", "missing.data"),
        ("pm", ""),
        ("contains", ""),
        ("validateByteRange", "0-255"),
        ("within", "GET POST"),
    ],
)
def test_no_superset_pattern(operator: str, argument: str) -> None:
    assert superset_pattern(operator, argument, data_dir=Path("/nonexistent")) is None


def test_pattern_set_reports_every_pattern_that_matches() -> None:
    patterns = PatternSet([b"a", b"b", b"^c"])
    assert patterns.hits(b"ab") == (0, 1)
    assert patterns.hits(b"xc") == ()
    assert patterns.hits(b"x\ncab") == (0, 1)  # ^ matches at any line start, as PCRE's MULTILINE


def _crs_patterns() -> list[tuple[Any, bytes]]:
    out = []
    for directive in load_rule_files(sorted(CRS_RULES.glob("REQUEST-9*.conf"))):
        link = directive if isinstance(directive, SecRule) else None
        while link is not None:
            pattern = superset_pattern(link.operator, link.operator_argument, data_dir=CRS_RULES)
            if pattern is not None and not link.operator_negated:
                out.append((compile_operator(link.operator, link.operator_argument, data_dir=CRS_RULES), pattern))
            link = link.chained_rule
    return out


_ATTACK_TOKENS = st.sampled_from(
    [b"select", b"union", b"<script>", b"alert(", b"../", b"/etc/passwd", b"${jndi:", b"; cat ", b"|", b"'", b'"',
     b"or 1=1", b"<?php", b"eval(", b"java.lang.", b"%00", b"\n", b" ", b"onerror=", b"cmd.exe", b"$(", b"`",
     b"sleep(", b"--", b"/*", b"document.cookie", b"0x", b"char(", b"php://", b"\\", b"UNION", b"Select"]
)  # fmt: skip
_VALUES = st.lists(st.one_of(_ATTACK_TOKENS, st.binary(max_size=6)), max_size=8).map(b"".join)


@needs_crs
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_VALUES, min_size=1, max_size=5))
def test_crs_superset_patterns_hit_whenever_the_operator_matches(values: list[bytes]) -> None:
    pairs = _CRS_PATTERNS.get()
    patterns = PatternSet([pattern for _, pattern in pairs])
    for value in values:
        hits = set(patterns.hits(value))
        for index, (operator, _) in enumerate(pairs):
            if operator(value) is not None:
                assert index in hits, (value, pairs[index][1][:100])


class _Lazy:
    def __init__(self) -> None:
        self.value: list[tuple[Any, bytes]] | None = None

    def get(self) -> list[tuple[Any, bytes]]:
        if self.value is None:
            self.value = _crs_patterns()
        return self.value


_CRS_PATTERNS = _Lazy()


# --- the prefiltered walk equals the plain walk ------------------------------------------------------------------

SETUP = 'SecAction "id:900990,phase:1,nolog,pass,setvar:tx.crs_setup_version=334"'


@pytest.fixture(scope="module")
def engines() -> tuple[RuleEngine, RuleEngine]:
    directives = parse_rules(SETUP) + load_rule_files(sorted(CRS_RULES.glob("REQUEST-9*.conf")))
    return (
        compile_rules(directives, data_dir=CRS_RULES),
        compile_rules(directives, data_dir=CRS_RULES, prefilter=False),
    )


def _corpus_requests() -> list[HttpRequest]:
    requests = []
    for case in orjson.loads(CORPUS.read_bytes())["cases"]:
        request = case["request"]
        body = (
            base64.b64decode(request["body_b64"])
            if request.get("body_b64") is not None
            else (request.get("body") or "").encode()
        )
        requests.append(
            HttpRequest(
                method=request["method"].encode(),
                target=request["uri"].encode(),
                protocol=request["version"].encode(),
                headers=tuple((name.encode(), value.encode()) for name, value in request["headers"]),
                body=body,
            )
        )
    return requests


@needs_crs
@pytest.mark.skipif(not CORPUS.is_file(), reason="the CRS regression corpus is absent")
@pytest.mark.parametrize(
    ("paranoia_level", "mode"), [("1", "On"), ("2", "DetectionOnly"), ("3", "On"), ("4", "DetectionOnly")]
)
def test_prefiltered_walk_equals_plain_walk_on_the_crs_corpus(
    engines: tuple[RuleEngine, RuleEngine], paranoia_level: str, mode: Any
) -> None:
    fast, plain = engines
    tx = {"paranoia_level": paranoia_level}
    differences = []
    for request in _corpus_requests():
        ours = fast.evaluate(request, tx=tx, mode=mode)
        reference = plain.evaluate(request, tx=tx, mode=mode)
        if ours != reference:
            differences.append((request, ours.fired_ids ^ reference.fired_ids))
    assert not differences, differences[:5]


_TOKENS = st.sampled_from(
    [b"a", b"=", b"&", b"%", b"%27", b"%zz", b"\x00", b"\xff", b"'", b'"', b"<", b"{", b"}", b"[", b";", b" ",
     b"select", b"<script>", b"../", b"/etc/passwd", b"${jndi:ldap://x}", b"1 or 1=1", b"<?php", b"cmd", b"$(id)",
     b"json", b"0x70a08231", b"eth_call", b"\\u0027"]
)  # fmt: skip
_BYTES = st.lists(_TOKENS, max_size=10).map(b"".join)
_CONTENT_TYPES = st.sampled_from(
    [b"application/json", b"application/xml", b"multipart/form-data; boundary=x", b"application/x-www-form-urlencoded",
     b"text/plain"]
)  # fmt: skip


@needs_crs
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    method=st.sampled_from([b"GET", b"POST", b"PUT", b"OPTIONS"]),
    path=_BYTES,
    query=_BYTES,
    header=_BYTES,
    content_type=_CONTENT_TYPES,
    body=_BYTES,
    paranoia_level=st.sampled_from(["1", "2", "3", "4"]),
    # none; a detection rule; a paranoia level gate (920014: phase 2, "@lt 2"), which keeps the full program
    disabled=st.sampled_from([frozenset(), frozenset({942100}), frozenset({920014, 941100})]),
)
def test_prefiltered_walk_equals_plain_walk_on_generated_requests(
    engines: tuple[RuleEngine, RuleEngine],
    method: bytes,
    path: bytes,
    query: bytes,
    header: bytes,
    content_type: bytes,
    body: bytes,
    paranoia_level: str,
    disabled: frozenset[int],
) -> None:
    fast, plain = engines
    request = HttpRequest(
        method=method,
        target=b"/" + path + b"?" + query,
        protocol=b"HTTP/1.1",
        headers=(
            (b"Host", b"localhost"),
            (b"User-Agent", header),
            (b"Cookie", b"a=" + header),
            (b"Content-Type", content_type),
            (b"Referer", b"http://x/" + header),
        ),
        body=body,
        remote_addr="198.51.100.7",
    )
    tx = {"paranoia_level": paranoia_level}
    assert fast.evaluate(request, tx=tx, disabled=disabled) == plain.evaluate(request, tx=tx, disabled=disabled)


GATED_RULES = """
SecRule TX:LEVEL "@lt 1" "id:2,phase:2,pass,nolog,skipAfter:END-1"
SecRule ARGS "@rx a" "id:10,phase:2,pass"
SecMarker END-1
SecRule REQUEST_URI "@rx ^/remove" "id:11,phase:2,pass,nolog,ctl:ruleRemoveById=3"
SecRule TX:LEVEL "@lt 2" "id:3,phase:2,pass,nolog,skipAfter:END-2"
SecRule ARGS "@rx a" "id:12,phase:2,pass"
SecMarker END-2
SecRule ARGS "@rx a" "id:13,phase:2,pass"
"""


@pytest.mark.parametrize(
    ("target", "level", "disabled", "fired"),
    [
        (b"/?x=a", "1", frozenset(), {10, 13}),
        (b"/?x=a", "2", frozenset(), {10, 12, 13}),
        (b"/?x=a", "0", frozenset(), {13}),
        (b"/remove?x=a", "1", frozenset(), {10, 12, 13}),  # the ctl removes a gate after the walk specialised
        (b"/?x=a", "1", frozenset({3}), {10, 12, 13}),  # a disabled gate
        (b"/?x=a", "1", frozenset({2}), {10, 13}),
        (b"/?x=a", None, frozenset(), {10, 12, 13}),  # no variable, no value: a gate without a value skips nothing
    ],
)
def test_gates_with_removals(target: bytes, level: str | None, disabled: frozenset[int], fired: set[int]) -> None:
    directives = parse_rules(GATED_RULES)
    fast = compile_rules(directives, data_dir=Path("/nonexistent"))
    plain = compile_rules(directives, data_dir=Path("/nonexistent"), prefilter=False)
    request = HttpRequest(method=b"GET", target=target, protocol=b"HTTP/1.1", headers=((b"Host", b"x"),), body=b"")
    tx = {"level": level} if level is not None else {}
    for _ in range(2):  # the second time from what the engine remembered
        ours = fast.evaluate(request, tx=tx, disabled=disabled)
        assert ours == plain.evaluate(request, tx=tx, disabled=disabled)
        assert ours.fired_ids == fired


SEGMENT_RULES = """
SecAction "id:1,phase:1,pass,nolog,setvar:tx.x=0,setvar:!tx.gone"
SecRule &TX:y "@eq 0" "id:2,phase:1,pass,nolog,setvar:tx.y=7"
SecRule TX:x "@eq 0" "id:3,phase:1,pass,log,msg:'x is %{tx.x}, y %{tx.y}',setvar:tx.score=+%{tx.y}"
SecRule ARGS_GET "@rx attack" "id:7,phase:1,pass,nolog,setvar:tx.y=+10"
SecRule TX:y "@gt 10" "id:8,phase:1,pass,log"
SecRule REQUEST_HEADERS:X-Level "@gt 2" "id:4,phase:1,deny,log,msg:'level %{MATCHED_VAR}'"
SecRule REQUEST_URI "@rx ." "id:5,phase:1,pass,log"
"""


@pytest.mark.parametrize(
    ("tx", "level", "mode"),
    [
        ({"x": "0"}, b"1", "On"),
        ({"x": "5", "gone": "1", "score": "3"}, b"1", "On"),  # same values read, other values written over
        ({"x": "0", "y": "2"}, b"3", "On"),
        ({"x": "0", "y": "2"}, b"3", "DetectionOnly"),
        ({"x": "0"}, b"3", "On"),
    ],
)
def test_remembered_segments_do_what_the_walk_does(tx: dict[str, str], level: bytes, mode: Any) -> None:
    directives = parse_rules(SEGMENT_RULES)
    fast = compile_rules(directives, data_dir=Path("/nonexistent"))
    plain = compile_rules(directives, data_dir=Path("/nonexistent"), prefilter=False)
    requests = [
        HttpRequest(b"GET", target, b"HTTP/1.1", ((b"Host", b"x"), (b"X-Level", level)), b"")
        for target in (b"/a", b"/a?q=attack")  # a rule outside the segments writes TX in between
    ]
    for previous in ({"x": "0"}, {"x": "9", "y": "1"}, tx):  # fill the memo with other values first
        for request in requests:
            fast.evaluate(request, tx=previous, mode=mode)
    for _ in range(2):
        for request in requests:
            assert fast.evaluate(request, tx=tx, mode=mode) == plain.evaluate(request, tx=tx, mode=mode)


# --- the prefiltered walk equals the plain walk under ctl removals (exclusion packages) ---------------------------

# Removals a request asks for by a header, besides the JSON-RPC package's own: a gate (920014, phase 2), rules by
# tag, targets by id and by tag; each touches some segments and programs and leaves others as they were.
REMOVALS = """
SecRule REQUEST_HEADERS:X-Remove "@streq gate" "id:9199001,phase:1,pass,nolog,ctl:ruleRemoveById=920014"
SecRule REQUEST_HEADERS:X-Remove "@streq xss" "id:9199002,phase:1,pass,nolog,ctl:ruleRemoveByTag=attack-xss"
SecRule REQUEST_HEADERS:X-Remove "@streq target" \
    "id:9199003,phase:1,pass,nolog,ctl:ruleRemoveTargetById=920280;REQUEST_HEADERS:Host,\
ctl:ruleRemoveTargetByTag=attack-sqli;ARGS:json.params.0"
SecRule REQUEST_HEADERS:X-Remove "@streq range" "id:9199004,phase:1,pass,nolog,ctl:ruleRemoveById=901000-901999"
"""


@pytest.fixture(scope="module")
def json_rpc_engines() -> tuple[RuleEngine, RuleEngine]:
    files = sorted(CRS_RULES.glob("REQUEST-9*.conf"))
    initialisation = [path for path in files if path.name.startswith("REQUEST-901-")]
    detection = [path for path in files if not path.name.startswith("REQUEST-901-")]
    directives = (
        parse_rules(SETUP)
        + load_rule_files(initialisation)
        + load_rule_files(list(EXCLUSION_FILES))
        + parse_rules(REMOVALS)
        + load_rule_files(detection)
    )
    return (
        compile_rules(directives, data_dir=CRS_RULES),
        compile_rules(directives, data_dir=CRS_RULES, prefilter=False),
    )


_PARAMS = st.lists(
    st.one_of(
        st.binary(min_size=0, max_size=40).map(lambda raw: "0x" + raw.hex()),
        st.sampled_from(["latest", "1 or 1=1", "<script>alert(1)</script>", "../../etc/passwd", "${jndi:ldap://x}"]),
        st.integers(min_value=0, max_value=2**32),
    ),
    max_size=4,
)


@needs_crs
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    method=st.sampled_from(["eth_call", "eth_getBalance", "eth_signTypedData_v4", "eth_chainId"]),
    params=_PARAMS,
    request_id=st.one_of(st.integers(min_value=0, max_value=2**32), st.text(max_size=8)),
    batch=st.booleans(),
    removal=st.sampled_from([None, "gate", "xss", "target", "range"]),
    paranoia_level=st.sampled_from(["1", "2", "3", "4"]),
)
def test_prefiltered_walk_equals_plain_walk_on_json_rpc_with_removals(
    json_rpc_engines: tuple[RuleEngine, RuleEngine],
    method: str,
    params: list[object],
    request_id: object,
    batch: bool,
    removal: str | None,
    paranoia_level: str,
) -> None:
    fast, plain = json_rpc_engines
    call = {"jsonrpc": "2.0", "method": method, "params": params, "id": request_id}
    body = orjson.dumps([call, call] if batch else call)
    headers = [(b"Host", b"localhost"), (b"Content-Type", b"application/json"), (b"User-Agent", b"web3.py/7.6.0")]
    if removal is not None:
        headers.append((b"X-Remove", removal.encode()))
    request = HttpRequest(
        method=b"POST", target=b"/v1/mainnet", protocol=b"HTTP/1.1", headers=tuple(headers), body=body
    )
    tx = {"paranoia_level": paranoia_level}
    for _ in range(2):  # the second time from what the fast engine remembered
        assert fast.evaluate(request, tx=tx) == plain.evaluate(request, tx=tx)
