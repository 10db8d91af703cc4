"""The filter parser and checker: every refusal names its path and says what is wrong."""

from __future__ import annotations

import json
from typing import Any

import pytest

from edgeplane.logs.datasets import load_dataset
from edgeplane.logs.errors import FilterError
from edgeplane.logs.filter_parser import MAX_FILTER_BYTES, MAX_OPERATORS, count_operators, parse_filter
from edgeplane.logs.filter_tree import OPERATORS, Condition, Filter, Group, serialise_filter

HTTP = load_dataset("http_requests")
FIREWALL = load_dataset("firewall_events")


def cond(key: str, operator: str, value: Any) -> dict[str, Any]:
    return {"key": key, "operator": operator, "value": value}


def text(where: Any) -> str:
    return json.dumps({"where": where})


def refusal(filter_text: str | bytes, dataset: Any = HTTP) -> FilterError:
    with pytest.raises(FilterError) as caught:
        parse_filter(filter_text, dataset)
    return caught.value


# The seed's examples, as written in its table of logical compositions.
X = cond("ClientRequestHost", "eq", "example.com")
Y = cond("ClientCountry", "!eq", "ca")
Z = cond("BotScore", "lt", "30")


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (X, Condition("ClientRequestHost", "eq", "example.com")),
        ({"and": [X, Y, Z]}, Group("and", (Condition("ClientRequestHost", "eq", "example.com"),
                                           Condition("ClientCountry", "!eq", "ca"),
                                           Condition("BotScore", "lt", "30")))),
        ({"and": [X, {"or": [Y, Z]}]}, Group("and", (Condition("ClientRequestHost", "eq", "example.com"),
                                                     Group("or", (Condition("ClientCountry", "!eq", "ca"),
                                                                  Condition("BotScore", "lt", "30")))))),
        ({"or": [{"and": [X, Y]}, Z]}, Group("or", (Group("and", (Condition("ClientRequestHost", "eq", "example.com"),
                                                                  Condition("ClientCountry", "!eq", "ca"))),
                                                    Condition("BotScore", "lt", "30")))),
        (cond("EdgeResponseStatus", "in", [200, 304]), Condition("EdgeResponseStatus", "in", (200, 304))),
    ],
)  # fmt: skip
def test_seed_shapes_parse(where: Any, expected: Any) -> None:
    tree = parse_filter(text(where), HTTP)
    assert tree == Filter(expected)
    assert parse_filter(serialise_filter(tree), HTTP) == tree


def test_serialise_is_canonical() -> None:
    tree = parse_filter('{ "where" : {"value":"30", "operator":"lt", "key":"BotScore"} }')
    assert serialise_filter(tree) == '{"where":{"key":"BotScore","operator":"lt","value":"30"}}'


def test_bytes_are_accepted() -> None:
    assert parse_filter(text(X).encode()) == parse_filter(text(X))


@pytest.mark.parametrize(
    ("filter_text", "path", "message"),
    [
        ("", "", "empty"),
        ("   ", "", "empty"),
        ("{", "", "not valid JSON"),
        ("[]", "", "JSON object"),
        ('"where"', "", "JSON object"),
        ("{}", "where", "missing"),
        ('{"where": {}, "limit": 3}', "limit", "unknown member"),
        ('{"where": {}}', "where", "empty"),
        ('{"where": null}', "where", "not null"),
        ('{"where": [1]}', "where", "not an array"),
        ('{"where": {"and": []}}', "where.and", "must not be empty"),
        ('{"where": {"or": {}}}', "where.or", "array of conditions"),
        ('{"where": {"and": [], "or": []}}', "where", "not both"),
        ('{"where": {"and": [1]}}', "where.and[0]", "not a number"),
        ('{"where": {"and": [{"key":"BotScore","operator":"lt","value":"1"}], "key": "x"}}', "where.key", "group"),
        ('{"where": {"key":"BotScore","operator":"lt"}}', "where.value", "missing"),
        ('{"where": {"key":"BotScore","value":"1"}}', "where.operator", "missing"),
        ('{"where": {"operator":"lt","value":"1"}}', "where.key", "missing"),
        ('{"where": {"key":"BotScore","operator":"lt","value":"1","not":true}}', "where.not", "unknown member"),
        ('{"where": {"key":1,"operator":"lt","value":"1"}}', "where.key", "must be a string"),
        ('{"where": {"key":"","operator":"lt","value":"1"}}', "where.key", "empty"),
        ('{"where": {"key":"BotScore","operator":"less","value":"1"}}', "where.operator", "unknown operator 'less'"),
        ('{"where": {"key":"BotScore","operator":"LT","value":"1"}}', "where.operator", "unknown operator"),
        ('{"where": {"key":"BotScore","operator":null,"value":"1"}}', "where.operator", "must be a string"),
        ('{"where": {"key":"BotScore","operator":"lt","value":null}}', "where.value", "not null"),
        ('{"where": {"key":"BotScore","operator":"lt","value":["1"]}}', "where.value", "not an array"),
        ('{"where": {"key":"BotScore","operator":"in","value":"1"}}', "where.value", "array"),
        ('{"where": {"key":"BotScore","operator":"in","value":[]}}', "where.value", "non-empty"),
        ('{"where": {"key":"BotScore","operator":"in","value":[1,[2]]}}', "where.value[1]", "not an array"),
        ('{"where": {"key":"BotScore","operator":"in","value":[true]}}', "where.value[0]", "boolean"),
        ('{"where": {"key":"BotScore","operator":"lt","value":NaN}}', "", "not valid JSON"),
        ('{"where": {"key":"BotScore","operator":"lt","value":1e999}}', "", "not valid JSON"),
        ('{"where": {"key":"BotScore","key":"BotScore","operator":"lt","value":"1"}}', "where.key", "more than once"),
        ('{"where": {"key":"BotScore","operator":"lt","value":"\\ud800"}}', "where.value", "lone surrogate"),
        ('{"where": {"and": [{"key":"BotScore","operator":"lt","value":"1"}, {"or": [{"k":1}]}]}}',
         "where.and[1].or[0].k", "unknown member"),
        ('{"where": {"and": [{"key":"BotScore","operator":"lt","value":"1"},'
         ' {"key":"BotScore","operator":"ltt","value":"1"}, {"key":"BotScore","operator":"eq","value":"1"}]}}',
         "where.and[1].operator", "unknown operator"),
    ],
)  # fmt: skip
def test_shape_errors(filter_text: str, path: str, message: str) -> None:
    error = refusal(filter_text, None)
    assert error.path == path
    assert message in error.message
    assert str(error).startswith(f"{path}: " if path else error.message)


def test_invalid_utf8_bytes() -> None:
    assert "UTF-8" in refusal(b'{"where": "\xff"}').message


def test_size_limit_is_in_bytes_of_utf8() -> None:
    padding_at_limit = MAX_FILTER_BYTES - len(text(cond("ClientRequestPath", "eq", "")).encode())
    at_limit = text(cond("ClientRequestPath", "eq", "a" * padding_at_limit))
    assert len(at_limit.encode()) == MAX_FILTER_BYTES
    parse_filter(at_limit, HTTP)
    over = text(cond("ClientRequestPath", "eq", "a" * (padding_at_limit - 1) + "é")).replace("\\u00e9", "é")
    assert len(over) == MAX_FILTER_BYTES
    assert len(over.encode()) == MAX_FILTER_BYTES + 1
    error = refusal(over)
    assert error.path == ""
    assert "1000 bytes are allowed" in error.message


def nested(depth: int) -> Any:
    node: Any = cond("BotScore", "lt", "1")
    for _ in range(depth):
        node = {"or": [node]}
    return node


def test_operator_limit_counts_conditions_and_groups() -> None:
    at_limit = parse_filter(text(nested(MAX_OPERATORS - 1)), HTTP)
    assert count_operators(at_limit) == MAX_OPERATORS
    error = refusal(text(nested(MAX_OPERATORS)))
    assert error.path == ""
    assert "31 operators" in error.message


def test_fifteen_conditions_in_one_group_are_sixteen_operators() -> None:
    tree = parse_filter(text({"and": [cond("BotScore", "lt", str(i)) for i in range(15)]}), HTTP)
    assert count_operators(tree) == 16


# --- the checker: operators x field types -------------------------------------------------------------------------

VALUE_FOR_TYPE = {
    "string": ("ClientRequestHost", "example.com", ["a.com", "b.com"]),
    "int": ("BotScore", "30", [1, 2]),
    "float": ("EdgeResponseCompressionRatio", "1.5", [1.5, 2]),
    "timestamp": ("EdgeStartTimestamp", "2026-11-21T00:00:00Z", [1795000000000000000]),
    "bool": ("CacheTieredFill", "true", ["true"]),
    "array_string": ("BotTags", "api", ["api", "verifiedBot"]),
}

ALLOWED = {
    # The seed's table, by column; float and timestamp take the int column (edgeplane's decision).
    "string": {"eq", "!eq", "startsWith", "endsWith", "!startsWith", "!endsWith", "contains", "!contains", "in", "!in"},
    "int": {"eq", "!eq", "lt", "leq", "gt", "geq", "in", "!in"},
    "float": {"eq", "!eq", "lt", "leq", "gt", "geq", "in", "!in"},
    "timestamp": {"eq", "!eq", "lt", "leq", "gt", "geq", "in", "!in"},
    "bool": {"eq", "!eq"},
    "array_string": {"contains", "!contains", "in", "!in"},
}


@pytest.mark.parametrize("type_", sorted(ALLOWED))
@pytest.mark.parametrize("operator", OPERATORS)
def test_operator_by_field_type(type_: str, operator: str) -> None:
    key, single, array = VALUE_FOR_TYPE[type_]
    value = array if operator in ("in", "!in") else single
    where = {"and": [cond("ZoneName", "eq", "example.com"), cond(key, operator, value)]}
    if operator in ALLOWED[type_]:
        parse_filter(text(where), HTTP)
        return
    error = refusal(text(where))
    assert error.path == "where.and[1].operator"
    assert f"operator {operator} does not apply to {key}, a field of type {type_}" in error.message


@pytest.mark.parametrize("field", ["RequestHeaders", "ResponseHeaders", "Cookies"])
def test_object_fields_cannot_be_filtered(field: str) -> None:
    error = refusal(text(cond(field, "eq", "x")))
    assert (error.path, "cannot be used in a filter" in error.message) == ("where.key", True)


@pytest.mark.parametrize("field", ["Action", "Kind", "MatchIndex", "RuleID", "Source", "Metadata"])
def test_firewall_events_unfilterable_fields(field: str) -> None:
    error = refusal(text({"or": [cond("ClientCountry", "eq", "de"), cond(field, "eq", "x")]}), FIREWALL)
    assert error.path == "where.or[1].key"
    assert f"field {field} of dataset firewall_events cannot be used in a filter" in error.message


def test_unknown_field_names_the_field_and_dataset() -> None:
    error = refusal(text({"and": [X, Y, cond("BotScoreX", "eq", "1")]}))
    assert error.path == "where.and[2].key"
    assert error.message == "unknown field 'BotScoreX'; dataset http_requests has no such field"


def test_field_of_another_dataset_is_unknown() -> None:
    assert refusal(text(cond("Datetime", "gt", "1")), HTTP).path == "where.key"
    parse_filter(text(cond("Datetime", "gt", "1")), FIREWALL)


@pytest.mark.parametrize(
    ("condition", "path", "message"),
    [
        (cond("BotScore", "lt", "thirty"), "where.value", "must be an integer"),
        (cond("BotScore", "lt", "3.5"), "where.value", "must be an integer"),
        (cond("BotScore", "lt", " 30"), "where.value", "must be an integer"),
        (cond("BotScore", "lt", "٣"), "where.value", "must be an integer"),
        (cond("BotScore", "lt", 3.5), "where.value", "must be an integer"),
        (cond("BotScore", "eq", True), "where.value", "not a boolean"),
        (cond("BotScore", "in", ["30"]), "where.value[0]", "numbers are written as numbers"),
        (cond("BotScore", "in", [1, "2"]), "where.value[1]", "numbers are written as numbers"),
        (cond("BotScore", "in", [1.5]), "where.value[0]", "must be an integer"),
        (cond("ClientRequestHost", "eq", 30), "where.value", "must be a string"),
        (cond("ClientRequestHost", "eq", False), "where.value", "must be a string"),
        (cond("ClientRequestHost", "in", ["a", 1]), "where.value[1]", "must be a string"),
        (cond("BotTags", "contains", 1), "where.value", "must be a string"),
        (cond("CacheTieredFill", "eq", "yes"), "where.value", '"true" or "false"'),
        (cond("CacheTieredFill", "eq", 1), "where.value", '"true" or "false"'),
        (cond("EdgeResponseCompressionRatio", "gt", "fast"), "where.value", "must be a number"),
        (cond("EdgeResponseCompressionRatio", "in", ["1.5"]), "where.value[0]", "numbers are written as numbers"),
        (cond("EdgeStartTimestamp", "gt", "yesterday"), "where.value", "RFC 3339"),
        (cond("EdgeStartTimestamp", "gt", "2026-02-30T00:00:00Z"), "where.value", "RFC 3339"),
        (cond("EdgeStartTimestamp", "gt", "2026-11-21T00:00:00"), "where.value", "RFC 3339"),
        (cond("EdgeStartTimestamp", "in", ["30"]), "where.value[0]", "RFC 3339"),
    ],
)
def test_value_errors(condition: Any, path: str, message: str) -> None:
    error = refusal(text(condition))
    assert error.path == path
    assert message in error.message


@pytest.mark.parametrize(
    "condition",
    [
        cond("BotScore", "lt", "30"),
        cond("BotScore", "lt", 30),
        cond("BotScore", "geq", "-1"),
        cond("BotScore", "in", [1, 2, 3]),
        cond("CacheTieredFill", "eq", "false"),
        cond("CacheTieredFill", "!eq", True),
        cond("EdgeResponseCompressionRatio", "leq", "1.25"),
        cond("EdgeResponseCompressionRatio", "in", [1, 2.5]),
        cond("EdgeStartTimestamp", "geq", "1795000000000000000"),
        cond("EdgeStartTimestamp", "geq", "2026-11-21T10:00:00.5+01:00"),
        cond("EdgeStartTimestamp", "in", [1795000000000000000, "2026-11-21T10:00:00Z"]),
        cond("ClientRequestPath", "contains", ""),
        cond("BotTags", "!in", ["api"]),
    ],
)
def test_values_accepted(condition: Any) -> None:
    parse_filter(text(condition), HTTP)


def test_validation_is_optional_and_separate() -> None:
    unchecked = parse_filter(text(cond("NoSuchField", "lt", "x")))
    assert unchecked.where == Condition("NoSuchField", "lt", "x")


def test_a_number_too_large_for_a_float_field_is_a_filter_error() -> None:
    text = '{"where":{"key":"EdgeResponseCompressionRatio","operator":"in","value":[1' + "0" * 400 + "]}}"
    with pytest.raises(FilterError, match="out of range") as caught:
        parse_filter(text, HTTP)
    assert caught.value.path == "where.value[0]"
