"""What a filter means for a record: expression x record -> result, for the interpreter and the compiled predicate."""

from __future__ import annotations

import json
from typing import Any

import pytest

from edgeplane.logs.datasets import load_dataset
from edgeplane.logs.filter_interpreter import evaluate
from edgeplane.logs.filter_parser import parse_filter
from tests.support.filter_compiler import compile_filter, generate_source

HTTP = load_dataset("http_requests")


def check(where: Any, record: dict[str, Any]) -> bool:
    tree = parse_filter(json.dumps({"where": where}), HTTP)
    compiled = compile_filter(tree, HTTP)(record)
    interpreted = evaluate(tree, record, HTTP)
    assert compiled is interpreted
    return compiled


def c(key: str, operator: str, value: Any) -> dict[str, Any]:
    return {"key": key, "operator": operator, "value": value}


MISSING: dict[str, Any] = {}
NOV21 = 1_795_219_200_000_000_000  # 2026-11-21T00:00:00Z in Unix nanoseconds
BOT_DE = [c("BotScore", "lt", "30"), c("ClientCountry", "eq", "de")]

SEMANTICS = [
    # strings: exact, case-sensitive
    (c("ClientRequestHost", "eq", "example.com"), {"ClientRequestHost": "example.com"}, True),
    (c("ClientRequestHost", "eq", "example.com"), {"ClientRequestHost": "Example.com"}, False),
    (c("ClientRequestHost", "!eq", "example.com"), {"ClientRequestHost": "example.org"}, True),
    (c("ClientRequestPath", "startsWith", "/foo"), {"ClientRequestPath": "/foobar"}, True),
    (c("ClientRequestPath", "startsWith", "/foo"), {"ClientRequestPath": "/bar/foo"}, False),
    (c("ClientRequestPath", "endsWith", "/foo"), {"ClientRequestPath": "/bar/foo"}, True),
    (c("ClientRequestPath", "!startsWith", "/foo"), {"ClientRequestPath": "/foo"}, False),
    (c("ClientRequestPath", "!endsWith", "/foo"), {"ClientRequestPath": "/foo/"}, True),
    (c("ClientRequestPath", "contains", "/foo"), {"ClientRequestPath": "/a/foo/b"}, True),
    (c("ClientRequestPath", "contains", ""), {"ClientRequestPath": ""}, True),
    (c("ClientRequestPath", "!contains", "/foo"), {"ClientRequestPath": "/a/fo/b"}, True),
    (c("ClientCountry", "in", ["us", "ca"]), {"ClientCountry": "ca"}, True),
    (c("ClientCountry", "in", ["us", "ca"]), {"ClientCountry": "de"}, False),
    (c("ClientCountry", "!in", ["us", "ca"]), {"ClientCountry": "de"}, True),
    (c("ClientRequestHost", "eq", ""), {"ClientRequestHost": ""}, True),
    # integers: numeric, values written as strings
    (c("BotScore", "lt", "30"), {"BotScore": 29}, True),
    (c("BotScore", "lt", "30"), {"BotScore": 30}, False),
    (c("BotScore", "leq", "30"), {"BotScore": 30}, True),
    (c("BotScore", "gt", "30"), {"BotScore": 100}, True),
    (c("BotScore", "gt", "9"), {"BotScore": 10}, True),  # numeric, not lexicographic
    (c("BotScore", "geq", "30"), {"BotScore": 29}, False),
    (c("BotScore", "eq", "30"), {"BotScore": 30}, True),
    (c("BotScore", "eq", 30), {"BotScore": 30}, True),
    (c("BotScore", "!eq", "30"), {"BotScore": 31}, True),
    (c("EdgeResponseStatus", "in", [403, 404]), {"EdgeResponseStatus": 404}, True),
    (c("EdgeResponseStatus", "!in", [403, 404]), {"EdgeResponseStatus": 200}, True),
    (c("BotScore", "geq", "-5"), {"BotScore": 0}, True),
    # floats and timestamps
    (c("EdgeResponseCompressionRatio", "gt", "1.5"), {"EdgeResponseCompressionRatio": 1.75}, True),
    (c("EdgeResponseCompressionRatio", "eq", "2"), {"EdgeResponseCompressionRatio": 2}, True),
    (c("EdgeStartTimestamp", "geq", "2026-11-21T00:00:00Z"), {"EdgeStartTimestamp": 1_795_219_200_000_000_000}, True),
    (c("EdgeStartTimestamp", "lt", "2026-11-21T01:00:00+01:00"), {"EdgeStartTimestamp": NOV21}, False),
    (c("EdgeStartTimestamp", "gt", "2026-11-21T00:00:00.000000001Z"), {"EdgeStartTimestamp": NOV21 + 1}, False),
    (c("EdgeStartTimestamp", "eq", "1795219200000000000"), {"EdgeStartTimestamp": 1_795_219_200_000_000_000}, True),
    # booleans
    (c("CacheTieredFill", "eq", "true"), {"CacheTieredFill": True}, True),
    (c("CacheTieredFill", "eq", False), {"CacheTieredFill": False}, True),
    (c("CacheTieredFill", "!eq", "true"), {"CacheTieredFill": False}, True),
    # arrays: contains is element membership, in is "any element in the set"
    (c("BotTags", "contains", "api"), {"BotTags": ["api", "verifiedBot"]}, True),
    (c("BotTags", "contains", "ap"), {"BotTags": ["api"]}, False),
    (c("BotTags", "!contains", "api"), {"BotTags": ["verifiedBot"]}, True),
    (c("BotTags", "in", ["api", "x"]), {"BotTags": ["verifiedBot", "api"]}, True),
    (c("BotTags", "in", ["api"]), {"BotTags": []}, False),
    (c("BotTags", "!in", ["api"]), {"BotTags": []}, True),
    (c("BotTags", "!in", ["api"]), {"BotTags": ["crawler", "api"]}, False),
    # missing fields: positive operators false, negated operators true
    (c("ClientRequestHost", "eq", "example.com"), MISSING, False),
    (c("ClientRequestHost", "!eq", "example.com"), MISSING, True),
    (c("ClientRequestHost", "eq", ""), MISSING, False),
    (c("ClientRequestPath", "startsWith", ""), MISSING, False),
    (c("ClientRequestPath", "!startsWith", "/foo"), MISSING, True),
    (c("ClientRequestPath", "!endsWith", "/foo"), MISSING, True),
    (c("ClientRequestPath", "contains", ""), MISSING, False),
    (c("ClientRequestPath", "!contains", "/foo"), MISSING, True),
    (c("ClientCountry", "in", ["us"]), MISSING, False),
    (c("ClientCountry", "!in", ["us"]), MISSING, True),
    (c("BotScore", "lt", "30"), MISSING, False),
    (c("BotScore", "geq", "30"), MISSING, False),
    (c("BotScore", "!eq", "30"), MISSING, True),
    (c("BotScore", "!in", [1]), MISSING, True),
    (c("CacheTieredFill", "eq", "false"), MISSING, False),
    (c("CacheTieredFill", "!eq", "true"), MISSING, True),
    (c("BotTags", "contains", "api"), MISSING, False),
    (c("BotTags", "!contains", "api"), MISSING, True),
    (c("BotTags", "!in", ["api"]), MISSING, True),
    (c("BotScore", "lt", "30"), {"BotScore": None}, False),  # None is missing
    (c("BotScore", "!eq", "30"), {"BotScore": None}, True),
    # logical composition (the seed's four shapes)
    ({"and": BOT_DE}, {"BotScore": 1, "ClientCountry": "de"}, True),
    ({"and": BOT_DE}, {"BotScore": 1, "ClientCountry": "fr"}, False),
    ({"or": BOT_DE}, {"BotScore": 99, "ClientCountry": "de"}, True),
    ({"or": BOT_DE}, {"BotScore": 99}, False),
    ({"and": [c("BotScore", "lt", "30"), {"or": [c("ClientCountry", "eq", "de"), c("ClientCountry", "eq", "fr")]}]},
     {"BotScore": 1, "ClientCountry": "fr"}, True),
    ({"or": [{"and": [c("BotScore", "lt", "30"), c("ClientCountry", "eq", "de")]}, c("BotTags", "contains", "x")]},
     {"BotScore": 1, "ClientCountry": "fr", "BotTags": ["x"]}, True),
]  # fmt: skip


@pytest.mark.parametrize(("where", "record", "expected"), SEMANTICS)
def test_semantics(where: Any, record: dict[str, Any], expected: bool) -> None:
    assert check(where, record) is expected


@pytest.mark.parametrize(
    ("where", "record"),
    [
        (c("BotScore", "lt", "30"), {"BotScore": "20"}),
        (c("ClientRequestPath", "startsWith", "/"), {"ClientRequestPath": 7}),
        (c("ClientCountry", "in", ["us"]), {"ClientCountry": ["us"]}),
        (c("BotTags", "in", ["api"]), {"BotTags": 3}),
        (c("BotTags", "contains", "api"), {"BotTags": 3}),
    ],
)
def test_values_of_the_wrong_type_count_as_missing_and_never_raise(where: Any, record: dict[str, Any]) -> None:
    assert check(where, record) is False


def test_no_filter_text_reaches_the_generated_source() -> None:
    hostile = "'); __import__('os').system('true'); ('"
    where = {"or": [c("ClientRequestHost", "eq", hostile), c("ClientRequestPath", "in", [hostile, "\\"])]}
    tree = parse_filter(json.dumps({"where": where}), HTTP)
    source, constants = generate_source(tree, HTTP)
    assert "import" not in source
    assert "system" not in source
    assert "\\" not in source
    assert constants == [hostile, frozenset({hostile, "\\"})]
    predicate = compile_filter(tree, HTTP)
    assert predicate({"ClientRequestHost": hostile}) is True
    assert predicate({"ClientRequestPath": "\\"}) is True


def test_numbers_are_literals_and_strings_are_bound() -> None:
    where = {"and": [c("BotScore", "lt", "30"), c("ClientASN", "in", [13335, 15169]), c("ZoneName", "eq", "x")]}
    source, constants = generate_source(parse_filter(json.dumps({"where": where}), HTTP), HTTP)
    assert "v < 30" in source
    assert "{13335, 15169}" in source
    assert constants == ["x"]


def test_deep_nesting_compiles() -> None:
    node: Any = c("BotScore", "lt", "30")
    for depth in range(29):
        node = {"and" if depth % 2 else "or": [node]}
    tree = parse_filter(json.dumps({"where": node}), HTTP)
    assert compile_filter(tree, HTTP)({"BotScore": 3}) is True


def test_alternating_groups_keep_their_meaning() -> None:
    where = {"and": [c("BotScore", "lt", "30"), {"or": [c("ZoneName", "eq", "a"), {"and": [
        c("ZoneName", "eq", "b"), c("ClientCountry", "eq", "de")]}]}]}  # fmt: skip
    assert check(where, {"BotScore": 1, "ZoneName": "b", "ClientCountry": "de"}) is True
    assert check(where, {"BotScore": 1, "ZoneName": "b", "ClientCountry": "fr"}) is False
    assert check(where, {"BotScore": 1, "ZoneName": "a"}) is True
