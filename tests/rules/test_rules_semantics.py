"""What expressions evaluate to: operators x types, fields, functions, indexing, logic (tables)."""

from __future__ import annotations

import pytest

from edgeplane.rules import RequestFields, compile_expression
from tests.rules.sample_requests import make_request

REQUEST = make_request()
NO_AGENT = make_request(headers=[], query="", body=b"", scheme="http", client_ip="2001:db8::7")

# (expression, value on REQUEST)
TABLE = [
    # Bytes: equality is exact and case-sensitive
    ('http.request.method eq "POST"', True),
    ('http.request.method == "post"', False),
    ('http.request.method ne "GET"', True),
    ('http.request.method != "POST"', False),
    ('http.host lt "b"', True),
    ('http.host le "api.example.com"', True),
    ('http.host gt "api"', True),
    ('http.host ge "b"', False),
    ('http.request.uri.path contains "main"', True),
    ('http.request.uri.path contains "MAIN"', False),
    ('http.request.uri.path matches "^/v[0-9]+/"', True),
    ('http.request.uri.path ~ "net$"', True),
    ('http.request.uri.path matches "(?i)MAINNET"', True),
    ('http.request.uri.path matches "^mainnet"', False),
    ('http.host wildcard "*.EXAMPLE.com"', True),
    ('http.host wildcard "example.com"', False),
    ('http.host strict wildcard "*.EXAMPLE.com"', False),
    ('http.host strict wildcard "api.*"', True),
    ('http.host wildcard "api.example.co"', False),
    ('http.request.method in {"GET" "POST"}', True),
    ('http.request.method in {"GET" "HEAD"}', False),
    ("http.request.method in {}", False),
    # strings: escapes and raw strings
    ('http.request.uri.path eq "\\x2fv1\\x2fmainnet"', True),
    ('http.request.uri.path eq "\\057v1\\057mainnet"', True),
    ('http.user_agent contains r"(X11;"', True),
    ('http.request.body.raw contains r#""jsonrpc":"2.0""#', True),
    ('http.request.body.raw contains "\\"method\\":\\"eth_call\\""', True),
    # fields
    ('http.request.uri eq "/v1/mainnet?id=7&tag=a&tag=b&q=union%20SELECT+1"', True),
    ('http.request.uri.query eq "id=7&tag=a&tag=b&q=union%20SELECT+1"', True),
    ('starts_with(http.request.full_uri, "https://api.example.com/v1/")', True),
    ('ends_with(http.request.full_uri, "SELECT+1")', True),
    ('http.request.version eq "HTTP/1.1"', True),
    ('http.user_agent contains "Firefox"', True),
    ('http.cookie eq "session=abc; theme=dark"', True),
    ('http.request.cookies["theme"][0] eq "dark"', True),
    ('http.referer eq ""', True),
    ("http.request.body.size eq 69", True),
    ("http.request.body.size gt 0x10", True),
    ("http.request.body.truncated", False),
    ('http.request.body.mime eq "application/json"', True),
    ('http.request.uri.path.extension eq ""', True),
    ('raw.http.request.uri.path eq "/v1/mainnet"', True),
    ('ip.src.country eq "DE"', True),
    ('ip.geoip.country eq "DE"', True),
    ("ip.src.asnum eq 3320", True),
    ("ip.geoip.asnum in {3320 13335}", True),
    ("cf.edge.server_port eq 443", True),
    ('cf.ray_id eq "8f0c0a1b2c3d4e5f"', True),
    ("ssl", True),
    ("not ssl", False),
    ("cf.waf.score eq 100", True),
    ("cf.waf.score.sqli lt 20", False),
    # Int
    ("cf.edge.server_port lt 444", True),
    ("cf.edge.server_port le 443", True),
    ("cf.edge.server_port gt 443", False),
    ("cf.edge.server_port ge 443", True),
    ("cf.edge.server_port ne 80", True),
    ("cf.edge.server_port in {80 400..450}", True),
    ("cf.edge.server_port in {80 8000..8080}", False),
    ("cf.edge.server_port & 1", True),
    ("cf.edge.server_port & 4", False),
    ("ip.src.asnum in {-5..-1}", False),
    # IP
    ("ip.src eq 203.0.113.9", True),
    ("ip.src ne 203.0.113.9", False),
    ("ip.src in {203.0.113.0/24}", True),
    ("ip.src in {203.0.113.0/30 10.0.0.0/8}", False),
    ("ip.src in {203.0.113.1..203.0.113.9}", True),
    ("ip.src in {203.0.113.9}", True),
    ("ip.src in {::/0}", False),
    ("ip.src in {0.0.0.0/0}", True),
    # logic and precedence: not > and > xor > or
    ('ssl and http.request.method eq "POST"', True),
    ('ssl && http.request.method eq "GET"', False),
    ("ssl or not ssl", True),
    ("not ssl || not ssl", False),
    ("ssl xor ssl", False),
    ("ssl ^^ not ssl", True),
    ("ssl ^^ ssl ^^ ssl", True),
    ("not ssl and not ssl or ssl", True),
    ("not (ssl and not ssl)", True),
    ("! ssl or ssl and not ssl", False),
    ("ssl or ssl xor ssl", True),
    ("(ssl or ssl) xor ssl", False),
    ("not not ssl", True),
    ("true", True),
    ("false or ssl", True),
    # indexing
    ('http.request.headers["x-tag"][0] eq "one"', True),
    ('http.request.headers["x-tag"][1] eq "two"', True),
    ('http.request.headers["x-tag"][2] eq "three"', False),
    ('http.request.headers["x-tag"][2] ne "three"', False),
    ('not http.request.headers["nope"][0] eq "x"', True),
    ('http.request.headers["X-Tag"][0] eq "one"', False),
    ('http.request.headers.names[1] eq "user-agent"', True),
    ('http.request.uri.args["tag"][1] eq "b"', True),
    ('http.request.uri.args["q"][0] eq "union%20SELECT+1"', True),
    ('http.request.uri.args.names[0] eq "id"', True),
    ('http.request.uri.args.values[0] eq "7"', True),
    ('any(http.request.headers["x-tag"][*] eq "two")', True),
    ('all(http.request.headers["x-tag"][*] eq "two")', False),
    ('all(http.request.headers["nope"][*] eq "two")', True),
    ('any(http.request.headers["nope"][*] eq "two")', False),
    ('any(http.request.headers[*][*] eq "dark")', False),
    ('any(http.request.headers[*][0] eq "one")', True),
    ('any(http.request.headers.names[*] in {"cookie"})', True),
    ('any(lower(http.request.headers.values[*])[*] contains "firefox")', True),
    ('any(url_decode(http.request.uri.args.values[*])[*] eq "union SELECT 1")', True),
    ('lower(http.request.headers.names[*])[0] eq "host"', True),
    # functions
    ('lower(http.request.uri.query) contains "union%20select"', True),
    ('upper(http.request.method) eq "POST"', True),
    ('url_decode(http.request.uri.query) contains "union SELECT 1"', True),
    ('lower(url_decode(http.request.uri.query)) matches "union\\\\s+select"', True),
    ("len(http.host) eq 15", True),
    ("len(http.request.uri.path) > 100", False),
    ('concat(http.host, http.request.uri.path) eq "api.example.com/v1/mainnet"', True),
    ('concat(http.request.headers["x-tag"], http.request.uri.args["tag"])[3] eq "b"', True),
    ('to_string(cf.edge.server_port) eq "443"', True),
    ('lookup_json_string(http.request.body.raw, "method") eq "eth_call"', True),
    ('lookup_json_string(http.request.body.raw, "id") eq "1"', False),
    ('lookup_json_integer(http.request.body.raw, "id") eq 1', True),
    ('lookup_json_integer(http.request.body.raw, "nope") ne 1', False),
    ('lookup_json_integer(http.request.uri.path, "id") eq 1', False),
    ('wildcard_replace(http.host, "*.example.com", "${1}.example.net") eq "api.example.net"', True),
    ('wildcard_replace(http.host, "*.EXAMPLE.com", "x", "s") eq "api.example.com"', True),
    ('regex_replace(http.request.uri.path, "^/v([0-9])/", "/version${1}/") eq "/version1/mainnet"', True),
    ('regex_replace(http.host, "z", "y") eq "api.example.com"', True),
    ('remove_bytes(http.host, ".e") eq "apixamplcom"', True),
    ("starts_with(http.host, http.request.method)", False),
    ('http.host eq http.request.headers["host"][0]', True),
]


@pytest.mark.parametrize(("expression", "expected"), TABLE)
def test_expression_value(expression: str, expected: bool) -> None:
    assert compile_expression(expression)(REQUEST) is expected


# (expression, value on a request without headers, query or body, over plain HTTP from an IPv6 client)
ABSENT = [
    ('http.user_agent eq ""', True),
    ('http.user_agent ne "curl"', True),
    ('http.user_agent contains "a"', False),
    ('http.referer matches ".*"', True),
    ("len(http.cookie) eq 0", True),
    ('http.request.headers["user-agent"][0] eq ""', False),
    ('any(http.request.headers.names[*] eq "host")', False),
    ('all(http.request.headers.names[*] eq "host")', True),
    ('http.request.uri eq "/v1/mainnet"', True),
    ('lookup_json_string(http.request.body.raw, "a") eq ""', False),
    ("http.request.body.size eq 0", True),
    ('http.request.body.mime eq ""', True),
    ("ssl", False),
    ("ip.src in {2001:db8::/32}", True),
    ("ip.src eq 2001:db8::7", True),
    ("ip.src in {0.0.0.0/0}", False),
    ("ip.src in {2001:db8::1..2001:db8::ff}", True),
]


@pytest.mark.parametrize(("expression", "expected"), ABSENT)
def test_absent_fields(expression: str, expected: bool) -> None:
    assert compile_expression(expression)(NO_AGENT) is expected


def test_bytes_are_bytes() -> None:
    """Invalid UTF-8 in a request is matched byte for byte, by escapes, regexes and lengths."""
    request = make_request(raw_path="/a\udcffb", headers=[(b"user-agent", b"\xff\xfe")])
    assert compile_expression('http.user_agent eq "\\xff\\xfe"')(request)
    assert compile_expression("len(http.user_agent) eq 2")(request)
    # RE2 runs in UTF-8 mode, as wirefilter's regex crate in its default Unicode mode: \\xff is U+00FF there,
    # not the byte, and "." does not match an invalid byte; the other bytes of the value still match.
    assert compile_expression('http.request.uri.path matches "^/a.b$"')(request) is False
    assert compile_expression('http.request.uri.path matches "b$"')(request)
    assert compile_expression('lower(http.request.headers["user-agent"][0]) contains "\\xfe"')(request)


def test_waf_scores_are_settable() -> None:
    request = make_request()
    expression = compile_expression("cf.waf.score.sqli lt 20 and cf.waf.score lt 30")
    assert not expression(request)
    request.waf_score_sqli, request.waf_score = 5, 12
    assert expression(request)
    request.waf_score_xss = request.waf_score_rce = 7
    assert compile_expression("cf.waf.score.xss eq 7 and cf.waf.score.rce eq 7")(request)


def test_expression_metadata() -> None:
    expression = compile_expression('ip.geoip.country eq "DE" and any(http.request.headers.names[*] eq "x")')
    assert expression.source.startswith("ip.geoip.country")
    assert expression.fields == frozenset({"ip.src.country", "http.request.headers.names"})


def test_evaluation_never_raises_on_wrong_types() -> None:
    """A request whose attributes hold wrong types (a bug elsewhere) makes expressions false, never an exception."""
    request = RequestFields()
    request.http_host = None  # type: ignore[assignment]
    request.ip_src = "10.0.0.1"  # type: ignore[assignment]
    for text in ('http.host eq "a"', 'lower(http.host) contains "a"', "ip.src in {10.0.0.0/8}", 'http.host ~ "a"'):
        assert compile_expression(text)(request) is False
