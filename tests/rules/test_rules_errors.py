"""Invalid expressions: each gives a RulesError naming the problem and its 0-based position (table), and no input
makes the parser fail otherwise (generated junk)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.rules import RulesError, check_expression, compile_expression
from edgeplane.rules.parser import MAX_EXPRESSION_LENGTH, MAX_NESTING

# (expression, fragment of the message, position)
ERRORS = [
    ("", "empty expression", 0),
    ("   ", "empty expression", 3),
    ('http.hots eq "a"', "unknown field 'http.hots'", 0),
    ('ssl and lowr(http.host) eq "a"', "unknown function 'lowr'", 8),
    ('ip.src eq "x"', "expected an IP address of type Ip, found a string", 10),
    ("http.host > 3", "expected a string of type Bytes, found an integer", 12),
    ('cf.waf.score eq "1"', "expected an integer of type Int, found a string", 16),
    ('http.host in {"a" 1}', "expected a string", 18),
    ("cf.waf.score in {1 2.5}", "expected an integer", 19),
    ("ip.src in {10.0.0.0/33}", "invalid CIDR", 11),
    ("ip.src in {10.0.0.1/8}", "invalid CIDR", 11),
    ("ip.src eq 300.1.1.1", "invalid IP address", 10),
    ("ip.src eq 10.0.0.0/8", "invalid IP address", 10),
    ("ip.src in {10.0.0.9..10.0.0.1}", "incompatible range bounds", 11),
    ("cf.waf.score in {9..1}", "incompatible range bounds", 17),
    ("ip.src in {10.0.0.1..::1}", "incompatible range bounds", 11),
    ('http.host matches "(a"', "invalid regular expression", 18),
    ('http.host matches "(?=a)"', "invalid regular expression", 18),
    ('http.host wildcard "a\\\\?"', "invalid wildcard", 19),
    ('http.host eq "abc', "unterminated string", 13),
    ('http.host eq r#"abc"', "unterminated raw string", 13),
    ('http.host eq "\\n"', "invalid escape", 15),
    ('http.host eq "\\x4"', "invalid \\x escape", 16),
    ('http.host eq "a" and', "expected a field or a function, found end of expression", 20),
    ('http.host eq "a")', "unexpected ')' after the expression", 16),
    ('(http.host eq "a"', "expected ')', found end of expression", 17),
    ('http.host eq "a" ssl', "unexpected 'ssl' after the expression", 17),
    ("http.host", "expected a comparison operator after a value of type Bytes", 9),
    ("cf.waf.score", "expected a comparison operator after a value of type Int", 12),
    ('http.request.headers.names[*] eq "a"', "expected value of type Bool, but got Array<Bool>", 0),
    ('http.request.headers["a"] eq "a"', "cannot perform this operation on type Array<Bytes>", 26),
    ('http.request.headers.names["a"] eq "a"', "cannot access index 'a' for type Array<Bytes>", 26),
    ('http.request.headers.names[-1] eq "a"', "non-negative integer", 27),
    ('http.host[0] eq "a"', "cannot index a value of type Bytes", 9),
    ("any(ssl)", "expected value of type Array<Bool>, but got Bool", 4),
    ("len(http.request.headers.names) > 1", "expected value of type Bytes, but got Array<Bytes>", 4),
    ('url_decode(http.host, "r") eq "x"', "invalid number of arguments", 0),
    ('to_string(ip.src) eq "1"', "expected value of type Int, but got Ip", 10),
    ('http.host contains "a" and http.host & 1', "operator 'bitwise_and' cannot be applied to type Bytes", 37),
    ('ip.src contains "a"', "operator 'contains' cannot be applied to type Ip", 7),
    ("ssl eq 1", "cannot perform this operation on type Bool", 4),
    ("ip.src in $blocked", "lists are not supported", 10),
    ('http.host eq "a" or "b"', "expected a condition, found a literal", 20),
    ("cf.waf.score eq 9223372036854775808", "64-bit integer", 16),
    ("http.request.body.size gt 0X10", "invalid number", 26),
    ('http.host in {"a", "b"}', "expected a literal or '}' in the set, found ','", 17),
    ("http.host eq 'a'", "unexpected character", 13),
    ('http.host strict  wildcard "a"', "expected 'strict wildcard' (one space)", 10),
    ('http.host eq "a" # comment', "unexpected character '#'", 17),
]


@pytest.mark.parametrize(("text", "fragment", "position"), ERRORS)
def test_error(text: str, fragment: str, position: int) -> None:
    with pytest.raises(RulesError) as caught:
        check_expression(text)
    assert fragment in caught.value.message
    assert caught.value.position == position
    with pytest.raises(RulesError):
        compile_expression(text)


def test_length_limit() -> None:
    longest = "ssl" + " or ssl" * ((MAX_EXPRESSION_LENGTH - 3) // 7)
    assert len(longest) <= MAX_EXPRESSION_LENGTH
    compile_expression(longest)
    with pytest.raises(RulesError, match="longer than 4096") as caught:
        check_expression(longest + " " * (MAX_EXPRESSION_LENGTH - len(longest) + 1))
    assert caught.value.position == MAX_EXPRESSION_LENGTH


def test_long_xor_chain_compiles() -> None:
    text = "ssl" + " xor ssl" * 500
    assert compile_expression(text[:MAX_EXPRESSION_LENGTH].rsplit(" xor", 1)[0])


@pytest.mark.parametrize("opening", ["(", "not ", "!", "any(lower(", "not ("])
def test_nesting_limit(opening: str) -> None:
    closing = ")" * opening.count("(")
    inner = 'http.host eq "a"' if "any" not in opening else 'http.request.headers.names[*])[*] eq "a"'
    within = opening * (MAX_NESTING // 2) + inner + closing * (MAX_NESTING // 2)
    if "any" not in opening:
        compile_expression(within)
    deep = opening * (MAX_NESTING + 1) + inner + closing * (MAX_NESTING + 1)
    with pytest.raises(RulesError, match="nested deeper than 64"):
        check_expression(deep)
    with pytest.raises(RulesError, match="nested deeper than 64"):
        check_expression(opening * ((MAX_EXPRESSION_LENGTH - 100) // len(opening)) + inner)


PIECES = ['http.host', 'ip.src', 'ssl', 'eq', '==', 'in', 'and', 'or', 'not', '!', '(', ')', '{', '}', '[', ']',
          '[*]', '"a"', 'r#"a"#', '"\\x4', '1', '-1', '0x', '..', '10.0.0.0/8', '::1', 'any(', 'lower(', ',',
          'matches', '"("', '$x', 'strict', 'wildcard', '&', '~', '\\', '"', 'true',
          'http.request.headers']  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(st.sampled_from(PIECES), max_size=14).map(" ".join)))
def test_junk_only_raises_rules_error(text: str) -> None:
    position = 0
    try:
        compile_expression(text)
    except RulesError as error:
        position = error.position
    assert 0 <= position <= len(text)
