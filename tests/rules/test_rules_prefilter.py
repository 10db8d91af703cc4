"""Prefilters: which conjunct an expression's prefilter comes from, its key, pattern and values."""

from __future__ import annotations

import pytest
import re2

from edgeplane.rules import compile_expression
from tests.rules.sample_requests import make_request

# (expression, key, pattern) - None when the expression has no prefilter
PREFILTERS = [
    ('lower(url_decode(http.request.uri.query)) matches "union[\\\\s/*]+select"',
     "lower(url_decode(http.request.uri.query))", "union[\\s/*]+select"),
    ('ssl and http.user_agent contains "sqlmap/"', "http.user_agent", "sqlmap\\/"),
    ('http.user_agent contains "a.b*" and ssl', "http.user_agent", "a\\.b\\*"),
    ('ip.geoip.country eq "DE" and lower(http.request.uri.path) matches "^/wp-"', "lower(http.request.uri.path)",
     "^/wp-"),
    ('any(http.request.headers.values[*] contains "${jndi:")', "http.request.headers.values[*]", "\\$\\{jndi\\:"),
    ('any(lower(http.request.headers["x-a"][*])[*] matches "^x")', 'lower(http.request.headers["x-a"][*])[*]', "^x"),
    ('http.request.headers["referer"][0] contains "evil"', 'http.request.headers["referer"][0]', "evil"),
    ('http.user_agent contains "a" or ssl', None, None),
    ('not http.user_agent contains "a"', None, None),
    ('http.user_agent eq "a"', None, None),
    ('all(http.request.headers.values[*] contains "a")', None, None),
    ('concat(http.host, http.user_agent) contains "a"', None, None),
    ('http.user_agent contains "\\xff"', None, None),
]  # fmt: skip


@pytest.mark.parametrize(("text", "key", "pattern"), PREFILTERS)
def test_prefilter(text: str, key: str | None, pattern: str | None) -> None:
    prefilter = compile_expression(text).prefilter
    if key is None:
        assert prefilter is None
        return
    assert prefilter is not None
    assert (prefilter.key, prefilter.pattern) == (key, pattern)
    re2.compile(prefilter.pattern)  # usable with default options


def test_prefilter_values() -> None:
    request = make_request(query="q=UNION%20select", headers=[(b"x-a", b"One"), (b"x-a", b"two")])
    query = compile_expression('lower(url_decode(http.request.uri.query)) matches "union select"').prefilter
    assert query is not None
    assert query.values(request) == ["q=union select"]
    each = compile_expression('any(lower(http.request.headers["x-a"][*])[*] contains "o")').prefilter
    assert each is not None
    assert each.values(request) == ["one", "two"]
    missing = compile_expression('http.request.headers["nope"][0] contains "o"').prefilter
    assert missing is not None
    assert missing.values(request) == []


def test_equal_inputs_share_a_key() -> None:
    first = compile_expression('ip.geoip.country eq "x" and http.request.uri.query contains "a"').prefilter
    second = compile_expression('http.request.uri.query matches "b"').prefilter
    assert first is not None
    assert second is not None
    assert first.key == second.key


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('lower(url_decode(http.request.uri.query)) matches "a"', "http_request_uri_query"),
        ('ip.geoip.country eq "DE" and lower(http.request.uri.path) matches "^/wp-"', "http_request_uri_path"),
        ('any(http.request.headers.values[*] contains "${jndi:")', "http_request_headers_values"),
        ('http.request.headers["referer"][0] contains "evil"', "http_request_headers"),
    ],
)
def test_the_field_an_input_reads(text: str, field: str) -> None:
    prefilter = compile_expression(text).prefilter
    assert prefilter is not None
    assert prefilter.field == field
    request = make_request()
    assert prefilter.values_of(getattr(request, field)) == prefilter.values(request)
