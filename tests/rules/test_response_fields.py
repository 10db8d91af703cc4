"""The ``http.response.*`` fields: refused in any expression but a counting expression, and there read from the
answer ``RequestFields.set_response`` gave."""

from __future__ import annotations

import pytest

from edgeplane.rules import RulesError, check_expression, compile_expression
from tests.rules.sample_requests import make_request

RESPONSE_EXPRESSIONS = [
    "http.response.code eq 429",
    'any(http.response.headers["x-cache"][*] eq "HIT")',
    'any(http.response.headers.names[*] eq "retry-after")',
    'any(http.response.headers.values[*] contains "json")',
    'http.response.content_type.media_type eq "application/json"',
    'http.request.method eq "POST" and http.response.code ge 500',
]


@pytest.mark.parametrize("text", RESPONSE_EXPRESSIONS)
def test_response_fields_are_refused_outside_a_counting_expression(text: str) -> None:
    with pytest.raises(RulesError) as refused:
        check_expression(text)
    name = refused.value.message.split(" ")[0]
    assert name.startswith("http.response.")
    assert refused.value.message == f"{name} is only available in a counting expression (it describes the answer)"
    assert text[refused.value.position :].startswith(name)
    with pytest.raises(RulesError):
        compile_expression(text)


@pytest.mark.parametrize("text", RESPONSE_EXPRESSIONS)
def test_response_fields_are_accepted_in_a_counting_expression(text: str) -> None:
    check_expression(text, response=True)
    compile_expression(text, response=True)


def test_a_counting_expression_reads_the_answer() -> None:
    request = make_request()
    counted = compile_expression(
        'http.response.code eq 200 and http.response.content_type.media_type eq "application/json" and '
        'http.response.headers["x-cache"][0] eq "MISS" and http.response.headers.names[1] eq "x-cache"',
        response=True,
    )
    assert not counted(request)  # no answer yet: code 0, no headers
    request.set_response(200, [(b"content-type", b"Application/JSON; charset=utf-8"), (b"x-cache", b"MISS")])
    assert counted(request)
    assert request.http_response_headers_values == ["Application/JSON; charset=utf-8", "MISS"]
    request.set_response(429, [(b"retry-after", b"10")])  # a second answer replaces the first, decoded again
    assert not counted(request)
    assert compile_expression('http.response.headers["retry-after"][0] eq "10"', response=True)(request)
    assert request.http_response_content_type_media_type == ""


def test_request_fields_stay_available_in_a_counting_expression() -> None:
    request = make_request()
    request.set_response(503, [])
    counted = compile_expression(
        'http.response.code in {500..599} and edgeplane.jsonrpc.methods[0] eq "eth_call"', response=True
    )
    assert counted(request)
