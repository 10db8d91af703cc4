"""The multi-pattern index changes only the cost of evaluation, never the verdict."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.rules import RequestFields, compile_expression
from edgeplane.waf import multipattern
from edgeplane.waf.firewall import Firewall, compile_firewall, deploy_managed_rulesets
from edgeplane.waf.multipattern import PatternIndex
from tests.rules.sample_requests import make_request

FRAGMENTS = [
    "union select",
    "' or '1'='1",
    "<script>",
    "onerror=",
    "../",
    "/etc/passwd",
    "${jndi:",
    "${${lower:j}",
    "; cat ",
    "$(id)",
    "169.254.169.254",
    "sleep(5)",
    "{{7*7}}",
    "<?php",
    "__proto__",
    "0x70a08231",
    '"method":"eth_call"',
    "%27",
    "%3c",
    "--",
    "#",
    "*/",
]
text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=6).map("".join)
FIREWALL = compile_firewall({"http_request_firewall_managed": deploy_managed_rulesets(paranoia_level=4)})


class _Broken:
    def candidates(self, request: Any) -> set[int]:
        raise RuntimeError("no index")


def without_index(firewall: Firewall) -> Firewall:
    return Firewall(firewall._stages, _Broken(), firewall.problems, firewall.rule_count)  # type: ignore[arg-type]


def fields(query: str, body: str, user_agent: str, cookie: str) -> RequestFields:
    return RequestFields.from_http(
        method="POST",
        scheme="http",
        host="rpc.example.com",
        raw_path="/v1/mainnet",
        query=query,
        headers=[(b"user-agent", user_agent.encode()), (b"cookie", cookie.encode())],
        body=body.encode(),
        client_ip="192.0.2.1",
    )


@settings(max_examples=300, deadline=None)
@given(query=text, body=text, user_agent=text, cookie=text)
def test_the_index_never_changes_the_verdict(query: str, body: str, user_agent: str, cookie: str) -> None:
    request = fields(query, body, user_agent, cookie)
    assert FIREWALL.evaluate(request) == without_index(FIREWALL).evaluate(request)


def test_rules_are_grouped_by_input() -> None:
    expressions = [
        'lower(http.request.uri.query) matches "a+b"',
        'lower(http.request.uri.query) contains "zz"',
        'http.user_agent matches "^curl"',
    ]
    index = PatternIndex((serial, compile_expression(text).prefilter) for serial, text in enumerate(expressions))
    assert index.inputs == 2
    assert index.indexed == frozenset({0, 1, 2})
    assert index.candidates(fields("xAAB", "", "curl/8", "")) == {0, 2}
    assert index.candidates(fields("zz", "", "", "")) == {1}


def test_invalid_utf8_is_searched_as_bytes() -> None:
    # Invalid UTF-8 reaches the index as lone surrogates; it must search the original bytes rather than fail (a
    # failing index would make every request with one stray byte evaluate every rule).
    request = RequestFields.from_http(
        method="POST",
        scheme="http",
        host="rpc.example.com",
        raw_path="/v1/mainnet",
        query="q=%ff\udcff union select password from users--",
        headers=[(b"user-agent", b"\xff\xfe ${jndi:ldap://x/a}")],
        body=b'{"params":["\xc3\x28 <script>alert(1)</script>"]}',
        client_ip="192.0.2.1",
    )
    index = FIREWALL._index
    candidates = index.candidates(request)
    assert candidates
    assert FIREWALL.evaluate(request) == without_index(FIREWALL).evaluate(request)
    assert FIREWALL.evaluate(request).blocked


def test_remembered_searches_find_what_a_fresh_search_finds(monkeypatch: Any) -> None:
    monkeypatch.setattr(multipattern, "MEMO_ENTRIES", 2)  # so that the memory fills and starts again
    expressions = ['lower(http.request.uri.query) matches "a+b"', 'http.user_agent contains "zz"']

    def index() -> PatternIndex:
        return PatternIndex((serial, compile_expression(text).prefilter) for serial, text in enumerate(expressions))

    long_query = "q" * (multipattern.MEMO_MAX_VALUE_LENGTH + 1) + "ab"
    requests = [
        fields(query, "", agent, "")
        for query, agent in [
            ("xAAB", "zz"),
            ("none", "zz"),
            ("xAAB", "curl"),
            (long_query, "zz"),
            ("other", "curl"),
            ("xAAB", "zz"),
            (long_query, "zzz"),
        ]
    ]
    remembering = index()
    assert [remembering.candidates(request) for request in requests] == [
        index().candidates(request) for request in requests
    ]


def _headers_request(*headers: tuple[bytes, bytes]) -> RequestFields:
    return make_request(headers=list(headers))


HEADER_INPUTS = [
    'any(lower(url_decode(http.request.headers.values[*])[*])[*] contains "<script")',
    'lower(url_decode(http.referer)) matches "union.+select"',
    'http.request.headers["x-a"][0] contains "zz"',
]


def _header_index() -> PatternIndex:
    return PatternIndex((serial, compile_expression(text).prefilter) for serial, text in enumerate(HEADER_INPUTS))


def test_inputs_remembered_by_field_value_find_what_a_fresh_search_finds(monkeypatch: Any) -> None:
    # Whatever is remembered or forgotten (a full memory starts again), the candidates are a fresh index's.
    monkeypatch.setattr(multipattern, "MEMO_ENTRIES", 2)
    long_value = b"a" * (multipattern.MEMO_MAX_LIST_CHARACTERS + 1)
    requests = [
        _headers_request((b"x-b", b"%3CSCRIPT>")),
        _headers_request((b"x-b", b"plain")),
        _headers_request((b"referer", b"http://a/?q=UNION%20all%20SELECT")),
        _headers_request((b"x-b", b"%3CSCRIPT>")),
        _headers_request((b"x-b", long_value), (b"x-c", b"<script>")),
        _headers_request((b"x-a", b"zzz"), (b"x-b", long_value)),
        _headers_request((b"x-b", b"plain")),
        _headers_request((b"x-b", long_value), (b"x-c", b"<script>")),
    ]
    remembering = _header_index()
    found = [remembering.candidates(each) for each in requests]
    assert found == [_header_index().candidates(each) for each in requests]
    assert found[0] == found[3] == found[4] == {0}
    assert found[2] == {1}
    assert found[5] == {2}


def test_a_list_field_is_remembered_within_its_bounds() -> None:
    index = _header_index()
    headers_values = index._inputs[0]
    calls: list[object] = []
    original = headers_values.values_of

    def counted(field_value: Any) -> Any:
        calls.append(field_value)
        return original(field_value)

    headers_values.values_of = counted
    many = [(b"x-%d" % number, b"v") for number in range(multipattern.MEMO_MAX_LIST_ITEMS + 1)]
    long_value = (b"x-b", b"a" * (multipattern.MEMO_MAX_LIST_CHARACTERS + 1))
    for headers, remembered in [
        ([(b"x-b", b"<SCRIPT>")], True),
        ([(b"x-b", b"plain"), (b"x-c", b"<script>")], True),
        (many, False),
        ([long_value], False),
    ]:
        calls.clear()
        first = index.candidates(_headers_request(*headers))
        again = index.candidates(_headers_request(*headers))
        assert first == again == _header_index().candidates(_headers_request(*headers))
        assert len(calls) == (1 if remembered else 2), headers[:2]
