"""Properties of the filter language over random filters and records (hypothesis)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from edgeplane.logs.datasets import Field, load_dataset
from edgeplane.logs.errors import FilterError
from edgeplane.logs.filter_checker import OPERATORS_BY_TYPE
from edgeplane.logs.filter_interpreter import evaluate
from edgeplane.logs.filter_parser import MAX_FILTER_BYTES, MAX_OPERATORS, count_operators, parse_filter
from edgeplane.logs.filter_tree import OPERATORS, SET_OPERATORS, Condition, Filter, Group, Node, serialise_filter
from tests.support.filter_compiler import compile_filter

HTTP = load_dataset("http_requests")
FILTERABLE = [field for field in HTTP.fields if field.filterable]
# Few distinct values, shared by filters and records, so that conditions hit as often as they miss.
WORDS = st.sampled_from(["", "a", "ab", "b", "/foo", "/foo/bar", "é", "A"]) | st.text(max_size=4)
SMALL_INTS = st.integers(-3, 3) | st.integers()
FLOATS = st.sampled_from([0.0, 0.5, 1.0, -1.5, 2.0]) | st.floats(allow_nan=False, allow_infinity=False)
BASE_NS = 1_795_219_200_000_000_000
TIMESTAMPS = st.integers(-3, 3).map(lambda n: BASE_NS + n * 1_000_000_000)


def _rfc3339(nanoseconds: int) -> str:
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=nanoseconds // 1000)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def single_value(field: Field) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind in ("string", "array_string"):
        return WORDS
    if kind == "int":
        return SMALL_INTS | SMALL_INTS.map(str)
    if kind == "float":
        return FLOATS | FLOATS.map(repr)
    if kind == "timestamp":
        return TIMESTAMPS | TIMESTAMPS.map(str) | TIMESTAMPS.map(_rfc3339)
    return st.sampled_from([True, False, "true", "false"])


def array_value(field: Field) -> st.SearchStrategy[tuple[Any, ...]]:
    kind = field.type
    item: st.SearchStrategy[Any] = {
        "string": WORDS, "array_string": WORDS, "int": SMALL_INTS, "float": FLOATS | SMALL_INTS,
        "timestamp": TIMESTAMPS | TIMESTAMPS.map(_rfc3339),
    }[kind]  # fmt: skip
    return st.lists(item, min_size=1, max_size=4).map(tuple)


@st.composite
def conditions(draw: st.DrawFn) -> Condition:
    field = draw(st.sampled_from(FILTERABLE))
    operator = draw(st.sampled_from(sorted(OPERATORS_BY_TYPE[field.type])))
    value = draw(array_value(field) if operator in SET_OPERATORS else single_value(field))
    return Condition(field.name, operator, value)


nodes: st.SearchStrategy[Node] = st.recursive(
    conditions(),
    lambda children: st.builds(
        Group, st.sampled_from(["and", "or"]), st.lists(children, min_size=1, max_size=4).map(tuple)
    ),
    max_leaves=12,
)
filters = nodes.map(Filter)


def within_limits(tree: Filter) -> bool:
    return len(serialise_filter(tree).encode()) <= MAX_FILTER_BYTES and count_operators(tree) <= MAX_OPERATORS


def record_value(field: Field) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind == "array_string":
        return st.lists(WORDS, max_size=3)
    if kind == "int":
        return SMALL_INTS
    if kind == "float":
        return FLOATS | SMALL_INTS
    if kind == "timestamp":
        return TIMESTAMPS | st.just(BASE_NS + 1)
    if kind == "bool":
        return st.booleans()
    return WORDS


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for field in FILTERABLE:
        choice = draw(st.integers(0, 9))
        if choice == 0:
            record[field.name] = None
        elif choice >= 4:
            record[field.name] = draw(record_value(field))
    return record


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(filters)
def test_valid_filters_round_trip_through_serialise(tree: Filter) -> None:
    assume(within_limits(tree))
    text = serialise_filter(tree)
    parsed = parse_filter(text, HTTP)
    assert parsed == tree
    assert serialise_filter(parsed) == text


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(filters, st.lists(records(), min_size=1, max_size=8))
def test_compiled_predicate_agrees_with_the_interpreter(tree: Filter, batch: list[dict[str, Any]]) -> None:
    predicate = compile_filter(tree, HTTP)
    for record in batch:
        assert predicate(record) is evaluate(tree, record, HTTP)


MEMBER_NAMES = st.sampled_from(["where", "and", "or", "key", "operator", "value", "x"]) | st.text(max_size=3)
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6) | st.just([]) | st.just({}),
    lambda children: (
        st.lists(children, min_size=1, max_size=3) | st.dictionaries(MEMBER_NAMES, children, min_size=1, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def near_filters(draw: st.DrawFn) -> str:
    """A JSON text that is a valid filter with one part replaced by a random JSON value."""
    tree = draw(filters)
    document: Any = json.loads(serialise_filter(tree))
    target, path = document, []
    while isinstance(target, dict | list) and draw(st.booleans()):
        keys = list(target) if isinstance(target, dict) else list(range(len(target)))
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        path.append(key)
        target = target[key]
    replacement = draw(json_values)
    if not path:
        return json.dumps(replacement)
    holder = document
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = replacement
    return json.dumps(document)


def accepts_or_refuses(text: str | bytes) -> None:
    try:
        tree = parse_filter(text, HTTP)
    except FilterError as error:
        refused: FilterError | None = error
    else:
        refused = None
        compile_filter(tree, HTTP)
    if refused is not None:
        assert isinstance(refused.path, str)
        assert refused.message


@settings(max_examples=300)
@given(st.text(max_size=60) | st.binary(max_size=60) | json_values.map(json.dumps))
def test_arbitrary_text_never_raises_anything_but_filter_error(text: str | bytes) -> None:
    accepts_or_refuses(text)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(near_filters())
def test_mutated_filters_never_raise_anything_but_filter_error(text: str) -> None:
    accepts_or_refuses(text)


@given(st.sampled_from(OPERATORS), st.sampled_from(HTTP.fields), json_values)
def test_any_condition_is_accepted_or_refused_cleanly(operator: str, field: Field, value: Any) -> None:
    accepts_or_refuses(json.dumps({"where": {"key": field.name, "operator": operator, "value": value}}))
