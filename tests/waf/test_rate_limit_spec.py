"""The ``ratelimit`` object of a rate limiting rule: what is accepted becomes a ``RateLimitSpec``, what is not is a
``RateLimitError`` with its code and the pointer of the member (tables of object → outcome), and any list of
characteristics is accepted or refused exactly as the documented order of checks says (hypothesis)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.waf.rate_limit_spec import (
    COLO,
    MITIGATION_TIMEOUTS,
    PERIODS,
    RateLimitError,
    RateLimitSpec,
    characteristic_field,
    parse_rate_limit,
)

SECOND = "/characteristics/1"
BASE: dict[str, Any] = {"characteristics": [COLO, "ip.src"], "period": 60, "requests_per_period": 100}


def with_(**members: Any) -> dict[str, Any]:
    return {**BASE, **members}


def refused(document: Any, action: str = "block") -> tuple[int, str]:
    with pytest.raises(RateLimitError) as raised:
        parse_rate_limit(document, action)
    assert raised.value.message
    return raised.value.code, raised.value.pointer


def test_a_minimal_object_takes_the_defaults() -> None:
    assert parse_rate_limit(BASE, "block") == RateLimitSpec(
        characteristics=(COLO, "ip.src"),
        period=60,
        requests_per_period=100,
        mitigation_timeout=0,
        counting_expression="",
        requests_to_origin=False,
        score_per_period=None,
        score_response_header_name=None,
    )


def test_every_member_is_read() -> None:
    spec = parse_rate_limit(
        {
            "characteristics": [COLO, 'http.request.headers["x-api-key"]'],
            "period": 10,
            "score_per_period": 500,
            "score_response_header_name": "x-edgeplane-cost",
            "mitigation_timeout": 600,
            "counting_expression": 'http.request.uri.path eq "/v1/mainnet"',
            "requests_to_origin": True,
        },
        "log",
    )
    assert spec.characteristics == (COLO, 'http.request.headers["x-api-key"]')
    assert (spec.period, spec.requests_per_period, spec.score_per_period) == (10, None, 500)
    assert spec.score_response_header_name == "x-edgeplane-cost"
    assert (spec.mitigation_timeout, spec.requests_to_origin) == (600, True)
    assert spec.counting_expression == 'http.request.uri.path eq "/v1/mainnet"'


def test_null_members_are_absent() -> None:
    spec = parse_rate_limit(
        with_(mitigation_timeout=None, counting_expression=None, score_per_period=None, requests_to_origin=None),
        "block",
    )
    assert (spec.mitigation_timeout, spec.counting_expression, spec.requests_to_origin) == (0, "", False)


@pytest.mark.parametrize("period", PERIODS)
def test_each_period_is_accepted(period: int) -> None:
    assert parse_rate_limit(with_(period=period), "block").period == period


@pytest.mark.parametrize("timeout", MITIGATION_TIMEOUTS)
def test_each_mitigation_timeout_is_accepted(timeout: int) -> None:
    assert parse_rate_limit(with_(mitigation_timeout=timeout), "block").mitigation_timeout == timeout


@pytest.mark.parametrize(
    ("document", "action", "code", "pointer"),
    [
        ([], "block", 20010, ""),
        ("60", "block", 20010, ""),
        (with_(burst=5), "block", 20010, "/burst"),
        ({"period": 60, "requests_per_period": 1}, "block", 20010, "/characteristics"),
        (with_(characteristics=COLO), "block", 20010, "/characteristics"),
        (with_(characteristics=[COLO, 7]), "block", 20010, "/characteristics/1"),
        (with_(period="60"), "block", 20010, "/period"),
        (with_(period=True), "block", 20010, "/period"),
        (with_(requests_per_period=10.5), "block", 20010, "/requests_per_period"),
        (with_(mitigation_timeout="0"), "block", 20010, "/mitigation_timeout"),
        (with_(counting_expression=1), "block", 20010, "/counting_expression"),
        (with_(requests_to_origin="yes"), "block", 20010, "/requests_to_origin"),
        (with_(score_response_header_name=5), "block", 20010, "/score_response_header_name"),
        (
            {**BASE, "requests_per_period": None, "score_per_period": 5, "score_response_header_name": "a b"},
            "block",
            20010,
            "/score_response_header_name",
        ),
        ({"characteristics": [COLO]}, "block", 20011, "/period"),
        (with_(period=30), "block", 20011, "/period"),
        (with_(period=65535), "block", 20011, "/period"),
        (with_(mitigation_timeout=30), "block", 20012, "/mitigation_timeout"),
        (with_(mitigation_timeout=-1), "block", 20012, "/mitigation_timeout"),
        (with_(mitigation_timeout=60), "managed_challenge", 20012, "/mitigation_timeout"),
        (with_(mitigation_timeout=10), "challenge", 20012, "/mitigation_timeout"),
        (with_(mitigation_timeout=10), "js_challenge", 20012, "/mitigation_timeout"),
        (with_(characteristics=[]), "block", 20013, "/characteristics"),
        (with_(characteristics=["ip.src"]), "block", 20013, "/characteristics"),
        (with_(characteristics=[COLO, "ip.dst"]), "block", 20014, "/characteristics/1"),
        (with_(characteristics=[COLO, 'http.request.headers["X-Api-Key"]']), "block", 20014, "/characteristics/1"),
        (with_(characteristics=[COLO, 'http.request.headers[""]']), "block", 20014, "/characteristics/1"),
        (with_(characteristics=[COLO, "http.request.headers"]), "block", 20014, "/characteristics/1"),
        (with_(characteristics=[COLO, 'http.request.cookies[""]']), "block", 20014, "/characteristics/1"),
        (with_(characteristics=[COLO, 'http.request.body.form["a"]']), "block", 20014, "/characteristics/1"),
        (with_(characteristics=[COLO, 'lookup_json_string(http.request.uri, "a")']), "block", 20014, SECOND),
        (with_(characteristics=[COLO, 'lookup_json_float(http.request.body.raw, "a")']), "block", 20014, SECOND),
        (with_(characteristics=[COLO, "ip.src", "cf.unique_visitor_id"]), "block", 20015, "/characteristics"),
        (with_(characteristics=[COLO, "ip.src", "ip.src"]), "block", 20015, "/characteristics/2"),
        (with_(characteristics=[COLO, COLO]), "block", 20015, "/characteristics/1"),
        (
            with_(
                characteristics=[
                    COLO,
                    'lookup_json_string(http.request.body.raw, "method")',
                    'lookup_json_string( http.request.body.raw , "method" )',
                ]
            ),
            "block",
            20015,
            "/characteristics/2",
        ),
        ({"characteristics": [COLO], "period": 60}, "block", 20016, "/requests_per_period"),
        (with_(requests_per_period=0), "block", 20016, "/requests_per_period"),
        (with_(requests_per_period=10_000_001), "block", 20016, "/requests_per_period"),
        (with_(score_per_period=10, score_response_header_name="x-cost"), "block", 20016, "/score_per_period"),
        ({**BASE, "requests_per_period": None, "score_per_period": 10}, "block", 20016, "/score_response_header_name"),
        (
            {**BASE, "requests_per_period": None, "score_per_period": 0, "score_response_header_name": "x-cost"},
            "block",
            20016,
            "/score_per_period",
        ),
        (
            {**BASE, "requests_per_period": None, "score_per_period": 1_000_001, "score_response_header_name": "x"},
            "block",
            20016,
            "/score_per_period",
        ),
        (with_(score_response_header_name="x-cost"), "block", 20016, "/score_response_header_name"),
        (with_(counting_expression="http.host eq"), "block", 20017, "/counting_expression"),
        (with_(counting_expression='http.nothing eq "a"'), "block", 20017, "/counting_expression"),
        (with_(counting_expression="true or " * 600 + "true"), "block", 20017, "/counting_expression"),
    ],
)
def test_an_invalid_object_is_refused_with_its_code_and_pointer(
    document: Any, action: str, code: int, pointer: str
) -> None:
    assert refused(document, action) == (code, pointer)


def test_a_challenge_with_no_timeout_is_accepted() -> None:
    assert parse_rate_limit(with_(mitigation_timeout=0), "managed_challenge").mitigation_timeout == 0


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (COLO, (COLO, None)),
        ("ip.src", ("ip.src", None)),
        ("ip.src.asnum", ("ip.src.asnum", None)),
        ("ip.src.country", ("ip.src.country", None)),
        ("http.host", ("http.host", None)),
        ("http.request.uri.path", ("http.request.uri.path", None)),
        ("cf.unique_visitor_id", ("cf.unique_visitor_id", None)),
        ("cf.bot_management.ja3_hash", ("cf.bot_management.ja3_hash", None)),
        ("cf.bot_management.ja4", ("cf.bot_management.ja4", None)),
        ("edgeplane.jsonrpc.methods", ("edgeplane.jsonrpc.methods", None)),
        ("edgeplane.jsonrpc.network", ("edgeplane.jsonrpc.network", None)),
        ('http.request.headers["x-api-key"]', ("http.request.headers", "x-api-key")),
        ('http.request.cookies["Session"]', ("http.request.cookies", "Session")),
        ('http.request.uri.args["page"]', ("http.request.uri.args", "page")),
        ('http.request.uri.args["a \\"b\\" \\\\"]', ("http.request.uri.args", 'a "b" \\')),
        ('lookup_json_string(http.request.body.raw, "method")', ("lookup_json_string", "method")),
        ('lookup_json_string(http.request.body.raw,"method")', ("lookup_json_string", "method")),
        ('lookup_json_integer(http.request.body.raw, "id")', ("lookup_json_integer", "id")),
    ],
)
def test_characteristic_field_names_what_to_read(text: str, field: tuple[str, str | None]) -> None:
    assert characteristic_field(text) == field


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ip",
        "IP.SRC",
        " ip.src",
        'http.request.headers["X-Key"]',
        'http.request.headers["a b"]',
        "http.request.headers[x]",
        'http.request.headers["a"',
        'http.request.uri.args["a\\nb"]',
        'lookup_json_string(http.request.body.raw, "")',
        'lookup_json_string(http.request.body.raw, "a", "b")',
        "lookup_json_string(http.request.body.raw)",
    ],
)
def test_characteristic_field_refuses_the_rest(text: str) -> None:
    with pytest.raises(RateLimitError) as raised:
        characteristic_field(text)
    assert (raised.value.code, raised.value.pointer) == (20014, "")


KNOWN = [
    COLO,
    "ip.src",
    "ip.src.asnum",
    "http.host",
    "cf.unique_visitor_id",
    'http.request.headers["x-api-key"]',
    'lookup_json_string(http.request.body.raw, "method")',
    "edgeplane.jsonrpc.methods",
]
UNKNOWN = ["ip.dst", 'http.request.headers["X-Api-Key"]', "http.request.uri.query"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(KNOWN + UNKNOWN) | st.integers(0, 3), max_size=6))
def test_any_characteristics_are_checked_in_the_documented_order(characteristics: list[Any]) -> None:
    expected: tuple[int, str] | None = None
    seen: set[Any] = set()
    for index, value in enumerate(characteristics):
        pointer = f"/characteristics/{index}"
        if not isinstance(value, str):
            expected = (20010, pointer)
        elif value in UNKNOWN:
            expected = (20014, pointer)
        elif value in seen:
            expected = (20015, pointer)
        if expected is not None:
            break
        seen.add(value)
    if expected is None and {"ip.src", "cf.unique_visitor_id"} <= seen:
        expected = (20015, "/characteristics")
    if expected is None and COLO not in seen:
        expected = (20013, "/characteristics")
    document = with_(characteristics=characteristics)
    if expected is None:
        assert parse_rate_limit(document, "block").characteristics == tuple(characteristics)
    else:
        assert refused(document) == expected
