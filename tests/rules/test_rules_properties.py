"""Properties over generated expressions and requests: valid expressions compile and never raise, compiled
evaluation agrees with plain Python on the same fields, and a prefilter is a necessary condition."""

from __future__ import annotations

import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.rules import RequestFields, compile_expression

TEXT = st.text(alphabet=st.sampled_from("aAzZ09 /.-_%+=&;:'\"<>()*é\x00\udcff"), max_size=20)
HEADER_NAMES = st.sampled_from([b"user-agent", b"cookie", b"referer", b"x-forwarded-for", b"x-a", b"content-type"])


@st.composite
def requests(draw: st.DrawFn) -> RequestFields:
    def raw(text: str) -> bytes:
        return text.encode("utf-8", "surrogateescape")

    headers = draw(st.lists(st.tuples(HEADER_NAMES, TEXT.map(raw)), max_size=5))
    return RequestFields.from_http(
        method=draw(st.sampled_from(["GET", "POST", "get", ""])),
        scheme=draw(st.sampled_from(["http", "https"])),
        host=draw(TEXT),
        raw_path="/" + draw(TEXT),
        query=draw(TEXT),
        headers=headers,
        body=raw(draw(st.one_of(TEXT, st.just('{"a": "b", "n": 3}')))),
        client_ip=draw(st.sampled_from(["10.0.0.1", "203.0.113.7", "2001:db8::1", "::1", "unix", ""])),
        server_port=draw(st.sampled_from([80, 443, 8080])),
        asn=draw(st.integers(0, 70000)),
    )


STRINGS = ['"a"', '"A"', '"/"', '"%27"', '"é"', '"\\xff"', '""', 'r"a*"']
BYTES_VALUES = ["http.host", "http.request.uri.path", "http.request.uri.query", "http.user_agent", "http.cookie",
                "http.request.body.raw", 'http.request.headers["x-a"][0]', "lower(http.host)", "upper(http.cookie)",
                "url_decode(http.request.uri.query)", 'lookup_json_string(http.request.body.raw, "a")',
                'concat(http.host, "x")', 'regex_replace(http.host, "a+", "b")', 'remove_bytes(http.host, "a")',
                'wildcard_replace(http.host, "*a", "${1}")', "to_string(ip.src.asnum)"]  # fmt: skip
INT_VALUES = ["http.request.body.size", "ip.src.asnum", "len(http.host)", "cf.edge.server_port",
              'lookup_json_integer(http.request.body.raw, "n")']  # fmt: skip


@st.composite
def comparisons(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["bytes", "int", "ip", "bool", "array"]))
    if kind == "bytes":
        operator = draw(st.sampled_from(["eq", "ne", "lt", "ge", "contains", "matches", "wildcard", "strict wildcard"]))
        right = draw(st.sampled_from(STRINGS)) if operator != "matches" else draw(st.sampled_from(['"a.*b"', '"^/"']))
        if draw(st.booleans()):
            return f'{draw(st.sampled_from(BYTES_VALUES))} in {{{right} "b"}}'
        return f"{draw(st.sampled_from(BYTES_VALUES))} {operator} {right}"
    if kind == "int":
        operator = draw(st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge", "&"]))
        if draw(st.booleans()):
            return f"{draw(st.sampled_from(INT_VALUES))} in {{1 3..10 443}}"
        return f"{draw(st.sampled_from(INT_VALUES))} {operator} {draw(st.integers(-5, 500))}"
    if kind == "ip":
        return draw(st.sampled_from(["ip.src in {10.0.0.0/8 ::1}", "ip.src eq 203.0.113.7", "ip.src ne ::1",
                                     "ip.src in {2001:db8::/32 0.0.0.0..10.0.0.1}"]))  # fmt: skip
    if kind == "bool":
        return draw(st.sampled_from(["ssl", "http.request.body.truncated", 'starts_with(http.host, "a")']))
    quantifier = draw(st.sampled_from(["any", "all"]))
    element = draw(st.sampled_from(["http.request.headers.names[*]", "http.request.headers[*][*]",
                                    "lower(http.request.headers.values[*])[*]", "http.request.uri.args[*][0]",
                                    'http.request.headers["x-a"][*]', "http.request.uri.args.values[*]"]))  # fmt: skip
    operator = draw(st.sampled_from(["eq", "contains", "matches"]))
    operator = draw(st.sampled_from(["eq", "contains", "matches"]))
    return f"{quantifier}({element} {operator} {draw(st.sampled_from(STRINGS[:4]))})"


def expressions() -> st.SearchStrategy[str]:
    return st.recursive(
        comparisons(),
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["and", "or", "xor"]), inner).map(" ".join),
            inner.map(lambda text: f"not ({text})"),
        ),
        max_leaves=5,
    )


@settings(max_examples=400, deadline=None)
@given(expressions(), st.lists(requests(), min_size=1, max_size=4))
def test_valid_expressions_compile_and_never_raise(text: str, batch: list[RequestFields]) -> None:
    expression = compile_expression(text)
    for request in batch:
        result = expression(request)
        assert isinstance(result, bool)
        # evaluation is pure: the same request gives the same answer (lazy fields included)
        assert expression(request) is result


PREFILTERED = [
    'lower(url_decode(http.request.uri.query)) matches "union.+select"',
    'http.request.uri.path contains "/a" and ssl',
    'ssl and any(lower(http.request.headers.values[*])[*] contains "a*")',
    'http.request.headers["x-a"][0] matches "(?i)^a" or ssl',
    'any(http.request.uri.args.values[*] matches "%2[27]")',
    'not ssl and http.cookie contains "é"',
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PREFILTERED), requests())
def test_prefilter_is_necessary(text: str, request: RequestFields) -> None:
    expression = compile_expression(text)
    prefilter = expression.prefilter
    if prefilter is None:
        assert " or " in text
        return
    pattern = re2.compile(prefilter.pattern)
    found = any(pattern.search(value.encode("utf-8", "surrogateescape")) for value in prefilter.values(request))
    if expression(request):
        assert found


# Inputs of every shape a prefilter takes: plain, mapped ([*]) and indexed fields, through functions, by alias.
INPUTS = [*BYTES_VALUES, "raw.http.request.uri.path", "ip.geoip.country", "http.request.headers.names[0]",
          "http.request.headers.values[*]", "lower(url_decode(http.request.headers.values[*])[*])[*]",
          'http.request.headers["x-a"][*]', "http.request.uri.args.values[*]", 'http.request.cookies["a"][*]',
          "http.request.accepted_languages[*]", "lower(http.request.uri.args.names[*])[*]"]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(INPUTS), st.sampled_from(['"a"', '"/"', '"%27"', '"é"', '""']), requests())
def test_a_prefilter_input_is_a_function_of_its_field(value: str, literal: str, request: RequestFields) -> None:
    # The index remembers an input's search by the value of the field it reads (edgeplane.waf.multipattern).
    text = f"any({value} contains {literal})" if value.endswith("[*]") else f"{value} contains {literal}"
    prefilter = compile_expression(text).prefilter
    assert prefilter is not None, text
    assert prefilter.values_of(getattr(request, prefilter.field)) == prefilter.values(request)
