"""Differential tests against wirefilter itself (``octorules_wirefilter`` wraps the real parser): our checker
accepts exactly what it accepts, on hand-written edge cases and on a generated corpus, for expressions over fields
and functions both know.

Known, documented differences are excluded (see docs/rules-language.md, "Differences from wirefilter"): ``true``
and ``false`` standing alone, managed lists (``$name``), ``regex_replace`` patterns validated when compiled, and
fields or functions edgeplane does not implement.
"""

from __future__ import annotations

import functools
import operator
from pathlib import Path

import octorules_wirefilter
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.rules import RulesError, check_expression

CASES = [line for line in (Path(__file__).with_name("differential_cases.txt").read_text().splitlines()) if line.strip()]


def wirefilter_accepts(text: str) -> bool:
    return "error" not in octorules_wirefilter.parse_expression(text)


def we_accept(text: str) -> bool:
    try:
        check_expression(text)
    except RulesError:
        return False
    return True


@pytest.mark.parametrize("text", CASES)
def test_same_verdict_as_wirefilter(text: str) -> None:
    assert we_accept(text) == wirefilter_accepts(text)


FIELDS = {
    "Bytes": ["http.host", "http.request.uri.path", "http.user_agent", "http.request.method", "ip.src.country",
              'http.request.headers["x"][0]', "lower(http.host)", "url_decode(http.request.uri.query)",
              'lookup_json_string(http.request.body.raw, "a")'],
    "Int": ["cf.bot_management.score", "http.request.body.size", "ip.src.asnum", "cf.waf.score", "len(http.host)"],
    "Ip": ["ip.src"],
    "Bool": ["ssl", "http.request.body.truncated"],
}  # fmt: skip
LITERALS = {
    "Bytes": ['"a"', '"\\x41b"', 'r"x\\y"', '"(a"', '"[a-z]+"', '"*.com"', "1", "10.0.0.1"],
    "Int": ["1", "-3", "0x1f", '"1"', "9223372036854775807"],
    "Ip": ["10.0.0.1", "2001:db8::1", "10.0.0.0/8", '"x"', "1"],
}
OPERATORS = ["eq", "==", "ne", "lt", "<=", "gt", ">=", "contains", "matches", "~", "wildcard", "strict wildcard", "&"]
SETS = {
    "Bytes": ['{"a" "b"}', "{1 2}", "{}"],
    "Int": ["{1 2..5}", "{5..2}", '{"a"}', "{-1..1 7}"],
    "Ip": ["{10.0.0.0/8 1.2.3.4}", "{10.0.0.1..10.0.0.9}", "{2001:db8::/32}", "{1}", "{10.0.0.0/40}"],
}


@st.composite
def comparisons(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(sorted(FIELDS)))
    left = draw(st.sampled_from(FIELDS[kind]))
    if kind == "Bool":
        return left
    if draw(st.booleans()) and kind in SETS:
        return f"{left} in {draw(st.sampled_from(SETS[kind]))}"
    right = draw(st.sampled_from(functools.reduce(operator.iadd, LITERALS.values(), [])))
    return f"{left} {draw(st.sampled_from(OPERATORS))} {right}"


def expressions() -> st.SearchStrategy[str]:
    return st.recursive(
        comparisons(),
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["and", "or", "xor", "&&", "||", "^^"]), inner).map(" ".join),
            inner.map(lambda text: f"not {text}"),
            inner.map(lambda text: f"({text})"),
        ),
        max_leaves=6,
    )


@settings(max_examples=500, deadline=None)
@given(expressions())
def test_generated_corpus_same_verdict(text: str) -> None:
    assert we_accept(text) == wirefilter_accepts(text), text
