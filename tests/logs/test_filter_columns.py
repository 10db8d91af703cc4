"""The filter over Arrow record batches: the same selection as the per-record predicate and the interpreter."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeplane.logs import filter_columns
from edgeplane.logs.datasets import Field, load_dataset
from edgeplane.logs.errors import FilterError
from edgeplane.logs.filter_checker import validate_filter
from edgeplane.logs.filter_columns import compile_column_filter
from edgeplane.logs.filter_interpreter import evaluate
from edgeplane.logs.filter_parser import parse_filter
from edgeplane.logs.filter_tree import Condition, Filter, Group
from edgeplane.logs.record_columns import arrow_schema, decode_block, encode_rows
from tests.logs.test_filter_properties import FILTERABLE, FLOATS, HTTP, TIMESTAMPS, WORDS, filters
from tests.logs.test_filter_semantics import SEMANTICS
from tests.support.filter_compiler import compile_filter

# Every record carries an object field, which no filter can name, so that a block of records that have none of the
# filtered fields still has one row per record.
ANCHOR = "Cookies"


def block(records: list[dict[str, Any]]) -> pa.RecordBatch:
    """``records`` as the log store holds them: one Arrow block, with only the columns the records have."""
    rows = [{ANCHOR: {}, **record} for record in records]
    payload = encode_rows("http_requests", rows)
    if payload is None:  # an int in a float field, which the store keeps as a line: the column it would convert to
        schema = arrow_schema(load_dataset("http_requests"))
        present = {name for row in rows for name in row}
        texts = [{**row, ANCHOR: "{}"} for row in rows]
        return pa.RecordBatch.from_pylist(texts, schema=pa.schema([f for f in schema if f.name in present]))
    batch = decode_block(payload)
    assert batch.num_rows == len(records)
    return batch


def tree_of(where: Any) -> Filter:
    return parse_filter(json.dumps({"where": where}), HTTP)


def selection(tree: Filter, batch: pa.RecordBatch) -> list[bool]:
    """The mask of the column predicate, checked to be a Boolean array of one value per record, with no nulls."""
    mask = compile_column_filter(tree, HTTP)(batch)
    assert isinstance(mask, pa.BooleanArray)
    assert len(mask) == batch.num_rows
    assert mask.null_count == 0
    values: list[bool] = mask.to_pylist()
    return values


def per_record(tree: Filter, records: list[dict[str, Any]]) -> list[bool]:
    """The per-record selection, checked to agree with the reference interpreter."""
    predicate = compile_filter(tree, HTTP)
    compiled = [predicate(record) for record in records]
    assert compiled == [evaluate(tree, record, HTTP) for record in records]
    return compiled


def c(key: str, operator: str, value: Any) -> dict[str, Any]:
    return {"key": key, "operator": operator, "value": value}


# -- the semantics table of the per-record predicate, one record per block and all of them in one block ----------


@pytest.mark.parametrize(("where", "record", "expected"), SEMANTICS)
def test_semantics_table(where: Any, record: dict[str, Any], expected: bool) -> None:
    assert selection(tree_of(where), block([record])) == [expected]


def test_semantics_table_in_one_block() -> None:
    records = [record for _, record, _ in SEMANTICS]
    batch = block(records)
    for where, _, _ in SEMANTICS:
        tree = tree_of(where)
        assert selection(tree, batch) == per_record(tree, records), where


# -- every operator x field type, over values, nulls and absent fields ---------------------------------------------

STRINGS: list[Any] = ["/foo", "/foo/bar", "/bar/foo", "", "é/foo", "FOO", None, "<absent>"]
INTS: list[Any] = [-(2**63), -1, 0, 29, 30, 31, 2**63 - 1, None, "<absent>"]
FLOAT_VALUES: list[Any] = [-1.5, -0.0, 0.0, 1.5, 2.0, 2.5, 1e300, float("nan"), None, "<absent>"]
TIMESTAMP = 1_795_219_200_000_000_000
TIMES: list[Any] = [TIMESTAMP, TIMESTAMP + 1, TIMESTAMP - 1, None, "<absent>"]
BOOLS: list[Any] = [True, False, None, "<absent>"]
LISTS: list[Any] = [[], ["api"], ["crawler", "api"], ["verifiedBot"], ["ap"], [""], None, "<absent>"]

OPERATOR_TABLE = [
    ("ClientRequestPath", STRINGS, [
        ("eq", "/foo"), ("!eq", "/foo"), ("eq", ""), ("startsWith", "/foo"), ("!startsWith", "/foo"),
        ("startsWith", ""), ("endsWith", "/foo"), ("!endsWith", "/foo"), ("contains", "foo"), ("!contains", "foo"),
        ("contains", ""), ("in", ["/foo", "", "x"]), ("!in", ["/foo", "", "x"]), ("eq", "é/foo"),
    ]),
    ("BotScore", INTS, [
        ("eq", "30"), ("!eq", "30"), ("lt", "30"), ("leq", "30"), ("gt", "30"), ("geq", "30"), ("in", [29, 31]),
        ("!in", [29, 31]), ("lt", str(2**64)), ("leq", str(2**63 - 1)), ("gt", str(-(2**64))), ("geq", str(2**64)),
        ("eq", str(2**64)), ("!eq", str(2**64)), ("in", [2**64, -(2**64), 0]), ("geq", str(-(2**63))),
        ("gt", str(2**63 - 1)), ("lt", str(-(2**63))),
    ]),
    ("EdgeResponseCompressionRatio", FLOAT_VALUES, [
        ("eq", "2"), ("!eq", "2"), ("lt", "1.5"), ("leq", "1.5"), ("gt", "1.5"), ("geq", "1.5"), ("eq", "0"),
        ("eq", "-0.0"), ("in", [0, 2.5]), ("in", [-0.0]), ("!in", [0.0, 1.5]), ("gt", "1e308"), ("lt", "-1e308"),
    ]),
    ("EdgeStartTimestamp", TIMES, [
        ("eq", "2026-11-21T00:00:00Z"), ("!eq", "2026-11-21T00:00:00Z"), ("lt", "2026-11-21T00:00:00Z"),
        ("leq", "2026-11-21T00:00:00Z"), ("gt", "2026-11-21T00:00:00.000000001Z"), ("geq", str(TIMESTAMP)),
        ("in", ["2026-11-21T00:00:00Z", TIMESTAMP + 1]), ("!in", [TIMESTAMP - 1]), ("lt", "9999-12-31T23:59:59Z"),
        ("gt", "9999-12-31T23:59:59Z"),
    ]),
    ("CacheTieredFill", BOOLS, [("eq", "true"), ("eq", "false"), ("!eq", "true"), ("!eq", False)]),
    ("BotTags", LISTS, [
        ("contains", "api"), ("!contains", "api"), ("contains", "ap"), ("contains", ""), ("in", ["api", "x"]),
        ("!in", ["api", "x"]), ("in", ["x"]), ("in", [""]), ("!in", [""]),
    ]),
]  # fmt: skip
OPERATOR_CASES = [(key, values, op, value) for key, values, cases in OPERATOR_TABLE for op, value in cases]


@pytest.mark.parametrize(("key", "values", "operator", "value"), OPERATOR_CASES)
def test_every_operator_and_field_type(key: str, values: list[Any], operator: str, value: Any) -> None:
    records = [{} if item == "<absent>" else {key: item} for item in values]
    tree = tree_of(c(key, operator, value))
    assert selection(tree, block(records)) == per_record(tree, records)


@pytest.mark.parametrize(("key", "values", "operator", "value"), OPERATOR_CASES)
def test_an_absent_column_is_a_missing_field(key: str, values: list[Any], operator: str, value: Any) -> None:
    batch = block([{"ZoneName": "example.com"}, {}])
    expected = operator.startswith("!")
    assert selection(tree_of(c(key, operator, value)), batch) == [expected, expected]


def test_comparisons_on_an_int_column_are_exact_beyond_float_precision() -> None:
    big = 2**53 + 1
    records: list[dict[str, Any]] = [{"BotScore": big}, {"BotScore": big - 1}, {"BotScore": big + 1}]
    for operator in ("eq", "lt", "leq", "gt", "geq"):
        tree = tree_of(c("BotScore", operator, str(big)))
        assert selection(tree, block(records)) == per_record(tree, records)


# -- columns of other Arrow types ----------------------------------------------------------------------------------


def arrow_batch(columns: dict[str, pa.Array]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))


@pytest.mark.parametrize(
    ("where", "column"),
    [
        (c("BotScore", "lt", "30"), pa.array(["20", "40"])),
        (c("BotScore", "lt", "30"), pa.array([20.0, 40.0])),
        (c("BotScore", "lt", "30"), pa.array([True, False])),
        (c("ClientRequestPath", "startsWith", "/"), pa.array([7, 8])),
        (c("ClientRequestPath", "contains", "/"), pa.array([["/"], ["/a"]])),
        (c("ClientCountry", "in", ["us"]), pa.array([["us"], ["de"]])),
        (c("BotTags", "in", ["api"]), pa.array([3, 4])),
        (c("BotTags", "contains", "api"), pa.array(["api", "x"])),
        (c("BotTags", "contains", "1"), pa.array([[1], [2]])),
        (c("CacheTieredFill", "eq", "true"), pa.array([1, 0])),
        (c("EdgeResponseCompressionRatio", "gt", "1"), pa.array(["2", "0"])),
        (c("BotScore", "eq", "1"), pa.nulls(2)),
        (c("BotScore", "eq", "1"), pa.array([1, 2], pa.uint64())),
    ],
)
def test_a_column_of_another_type_is_a_missing_field(where: Any, column: pa.Array) -> None:
    key = where["key"]
    batch = arrow_batch({key: column})
    operator = where["operator"] if where["operator"] not in ("lt", "leq", "gt", "geq") else "eq"
    negated = {**where, "operator": "!" + operator}
    assert selection(tree_of(where), batch) == [False, False]
    assert selection(tree_of(negated), batch) == [True, True]


@pytest.mark.parametrize(
    ("where", "column", "expected"),
    [
        (c("BotScore", "lt", "30"), pa.array([20, 40, None], pa.int32()), [True, False, False]),
        (c("BotScore", "in", [255]), pa.array([255, 0, None], pa.uint8()), [True, False, False]),
        (c("EdgeResponseCompressionRatio", "gt", "1.5"), pa.array([1, 2, None]), [False, True, False]),
        (c("EdgeResponseCompressionRatio", "eq", "2"), pa.array([2, 3, None]), [True, False, False]),
        (c("EdgeResponseCompressionRatio", "eq", "2.5"), pa.array([2, 3, None]), [False, False, False]),
        (c("EdgeResponseCompressionRatio", "leq", "2.5"), pa.array([2, 3, None]), [True, False, False]),
        (c("EdgeResponseCompressionRatio", "geq", "2.5"), pa.array([2, 3, None]), [False, True, False]),
        (c("EdgeResponseCompressionRatio", "in", [2.5, 3]), pa.array([2, 3, None]), [False, True, False]),
        (c("EdgeResponseCompressionRatio", "lt", "1.5"), pa.array([1.0, 2.0, None], pa.float32()),
         [True, False, False]),
        (c("ClientRequestHost", "eq", "a"), pa.array(["a", "b", None], pa.large_string()), [True, False, False]),
        (c("ClientRequestHost", "in", ["b"]), pa.array(["a", "b", None]).dictionary_encode(), [False, True, False]),
        (c("ClientRequestHost", "endsWith", "b"), pa.array(["ab", "b", None]).dictionary_encode(), [True, True, False]),
        (c("BotTags", "contains", "a"), pa.array([["a"], ["b"], None], pa.large_list(pa.large_string())),
         [True, False, False]),
    ],
)  # fmt: skip
def test_columns_of_compatible_types(where: Any, column: pa.Array, expected: list[bool]) -> None:
    """Other Arrow types that hold the field's values exactly are read as the values they hold."""
    batch = arrow_batch({where["key"]: column})
    records = [{} if value is None else {where["key"]: value} for value in column.to_pylist()]
    tree = tree_of(where)
    assert selection(tree, batch) == expected == per_record(tree, records)


def test_a_list_with_a_null_element_is_a_missing_field() -> None:
    """As in the interpreter: a list holding something other than strings is not a value of the field."""
    column = pa.array([["api", None], ["api"], [None], None, []], pa.list_(pa.string()))
    batch = arrow_batch({"BotTags": column})
    assert selection(tree_of(c("BotTags", "contains", "api")), batch) == [False, True, False, False, False]
    assert selection(tree_of(c("BotTags", "!contains", "api")), batch) == [True, False, True, True, True]
    assert selection(tree_of(c("BotTags", "!in", ["x"])), batch) == [True, True, True, True, True]
    records = [{"BotTags": value} for value in column.to_pylist()]
    assert [evaluate(tree_of(c("BotTags", "contains", "api")), r, HTTP) for r in records] == [
        False, True, False, False, False
    ]  # fmt: skip


def test_a_null_list_whose_offsets_span_elements_matches_nothing() -> None:
    # Arrow allows a null list to cover elements of the child array; they are not the record's.
    offsets = pa.array([0, 1, 2, 3], pa.int32())
    column = pa.ListArray.from_arrays(offsets, pa.array(["api", "api", "x"]), mask=pa.array([False, True, False]))
    batch = arrow_batch({"BotTags": column})
    assert selection(tree_of(c("BotTags", "contains", "api")), batch) == [True, False, False]
    assert selection(tree_of(c("BotTags", "in", ["api", "x"])), batch) == [True, False, True]


def test_sliced_batches() -> None:
    records: list[dict[str, Any]] = [
        {"BotTags": ["a"], "BotScore": 1, "ClientRequestHost": "h"},
        {"BotTags": ["b", "a"], "BotScore": 2},
        {"BotTags": None, "ClientRequestHost": "h"},
        {"BotTags": ["b"], "BotScore": 40},
        {"BotTags": [], "ClientRequestHost": "x"},
    ]
    batch = block(records)
    where = {
        "or": [c("BotTags", "contains", "a"), {"and": [c("BotScore", "lt", "30"), c("ClientRequestHost", "eq", "h")]}]
    }
    tree = tree_of(where)
    for start in range(len(records)):
        for length in range(len(records) - start + 1):
            expected = per_record(tree, records[start : start + length])
            assert selection(tree, batch.slice(start, length)) == expected


def test_an_empty_batch() -> None:
    batch = block([{"BotScore": 1, "BotTags": ["a"]}]).slice(0, 0)
    assert selection(tree_of(c("BotScore", "lt", "30")), batch) == []
    assert selection(tree_of({"and": [c("BotScore", "lt", "30"), c("BotTags", "!in", ["a"])]}), batch) == []


def test_constants_that_no_arrow_value_can_equal() -> None:
    """Trees built in code can hold values no JSON filter can: a lone surrogate matches nothing."""
    records: list[dict[str, Any]] = [{"ClientRequestPath": "a", "EdgeResponseCompressionRatio": float("nan")}, {}]
    batch = block(records)
    surrogate = "\ud800"
    trees = [
        Filter(Condition("ClientRequestPath", operator, surrogate))
        for operator in ("eq", "!eq", "startsWith", "!endsWith", "contains", "!contains")
    ] + [
        Filter(Condition("ClientRequestPath", "in", (surrogate, "a"))),
        Filter(Condition("BotTags", "!in", (surrogate,))),
    ]
    for tree in trees:
        assert selection(tree, batch) == [evaluate(tree, record, HTTP) for record in records], tree


@pytest.mark.parametrize(
    "condition",
    [
        Condition("EdgeResponseCompressionRatio", "in", (float("nan"),)),
        Condition("EdgeResponseCompressionRatio", "!eq", float("nan")),
        Condition("EdgeResponseCompressionRatio", "lt", float("inf")),
    ],
)
def test_non_finite_constants_are_refused_by_both_compilers(condition: Condition) -> None:
    with pytest.raises(FilterError, match="out of range"):
        compile_column_filter(Filter(condition), HTTP)
    with pytest.raises(FilterError, match="out of range"):
        compile_filter(Filter(condition), HTTP)


# -- groups ---------------------------------------------------------------------------------------------------------

GROUP_RECORDS: list[dict[str, Any]] = [
    {"BotScore": 1, "ClientCountry": "de", "BotTags": ["api"]},
    {"BotScore": 99, "ClientCountry": "de"},
    {"BotScore": 1, "ClientCountry": "fr", "BotTags": []},
    {"ClientCountry": "fr"},
    {},
]


@pytest.mark.parametrize(
    "where",
    [
        {"and": [c("BotScore", "lt", "30"), c("ClientCountry", "eq", "de")]},
        {"or": [c("BotScore", "lt", "30"), c("ClientCountry", "eq", "de")]},
        {"and": [c("ClientCountry", "eq", "xx"), c("BotTags", "contains", "api")]},  # decided by its first member
        {"or": [c("ClientCountry", "!eq", "xx"), c("BotTags", "contains", "api")]},  # decided by its first member
        {"and": [c("SecurityAction", "eq", "block"), c("BotScore", "lt", "30")]},  # an absent column decides it
        {"or": [c("SecurityAction", "!eq", "block"), c("BotScore", "lt", "30")]},
        {"and": [c("SecurityAction", "!eq", "block"), c("BotScore", "lt", "30")]},
        {"or": [c("SecurityAction", "eq", "block"), c("BotScore", "lt", "30")]},
        {"and": [c("SecurityAction", "!eq", "block")]},
        {"or": [c("SecurityAction", "eq", "block"), c("BotScore", "lt", "30"), c("BotTags", "in", ["api"])]},
        {"and": [c("BotScore", "lt", "30"), {"or": [c("ClientCountry", "eq", "fr"), c("BotTags", "!contains", "a")]}]},
        {"or": [{"or": [c("BotScore", "gt", "50"), {"or": [c("ClientCountry", "eq", "fr")]}]},
                c("BotScore", "eq", "1")]},
        {"and": [{"and": [c("BotScore", "lt", "50"), {"and": [c("ClientCountry", "eq", "de")]}]},
                 c("BotTags", "in", ["api"])]},
    ],
)  # fmt: skip
def test_groups(where: Any) -> None:
    tree = tree_of(where)
    assert selection(tree, block(GROUP_RECORDS)) == per_record(tree, GROUP_RECORDS)


# -- invalid filters: the same error as the per-record compiler -----------------------------------------------------


@pytest.mark.parametrize(
    "where",
    [
        c("NoSuchField", "eq", "x"),
        c("RequestHeaders", "eq", "x"),
        c("BotScore", "startsWith", "1"),
        c("BotScore", "eq", "one"),
        c("CacheTieredFill", "eq", "yes"),
        c("EdgeStartTimestamp", "in", ["30"]),
        {"and": [c("BotScore", "lt", "30"), {"or": [c("ClientCountry", "eq", 3)]}]},
    ],
)
def test_an_invalid_tree_raises_the_filter_error_of_the_compiler(where: Any) -> None:
    tree = Filter(_tree_node(where))
    with pytest.raises(FilterError) as compiled:
        compile_filter(tree, HTTP)
    with pytest.raises(FilterError) as checked:
        validate_filter(tree, HTTP)
    with pytest.raises(FilterError) as columns:
        compile_column_filter(tree, HTTP)
    assert columns.value.message == compiled.value.message == checked.value.message
    # The path is the checker's, which names every group on the way; the per-record compiler's leaves out the
    # groups it splices into their parent.
    assert columns.value.path == checked.value.path


def _tree_node(where: Any) -> Condition | Group:
    """The tree of ``where`` without the checker's validation (the parser would refuse it first)."""
    if "key" in where:
        value = tuple(where["value"]) if isinstance(where["value"], list) else where["value"]
        return Condition(where["key"], where["operator"], value)
    kind = "and" if "and" in where else "or"
    return Group(kind, tuple(_tree_node(member) for member in where[kind]))


# -- random filters over random blocks ------------------------------------------------------------------------------

INT64 = st.integers(-3, 3) | st.integers(-(2**63), 2**63 - 1)


def typed_value(field: Field) -> st.SearchStrategy[Any]:
    """A value of ``field``'s schema type, as a block holds it exactly (a float field holds floats)."""
    kind = field.type
    if kind == "array_string":
        return st.lists(WORDS, max_size=3)
    if kind == "int":
        return INT64
    if kind == "float":
        return FLOATS
    if kind == "timestamp":
        return TIMESTAMPS
    if kind == "bool":
        return st.booleans()
    return WORDS


@st.composite
def typed_records(draw: st.DrawFn) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for field in FILTERABLE:
        choice = draw(st.integers(0, 9))
        if choice == 0:
            record[field.name] = None
        elif choice >= 5:
            record[field.name] = draw(typed_value(field))
    return record


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filters, st.lists(typed_records(), min_size=1, max_size=12), st.integers(0, 3))
def test_random_filters_select_what_the_per_record_predicate_selects(
    tree: Filter, records: list[dict[str, Any]], cut: int
) -> None:
    batch = block(records)
    assert selection(tree, batch) == per_record(tree, records)
    assert selection(tree, batch.slice(cut)) == per_record(tree, records[cut:])


@contextmanager
def always_narrowing() -> Iterator[None]:
    """Groups narrow to their undecided records whenever they can, whatever it costs: the narrowing path is taken on
    the tiny blocks of these tests too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(filter_columns, "_NARROW_FIXED_COST", -math.inf)
        yield


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filters, st.lists(typed_records(), min_size=1, max_size=12))
def test_random_filters_select_the_same_when_groups_narrow(tree: Filter, records: list[dict[str, Any]]) -> None:
    batch = block(records)
    with always_narrowing():
        assert selection(tree, batch) == per_record(tree, records)


def generated_records(count: int) -> list[dict[str, Any]]:
    """Records with skewed values, as traffic has them: some conditions pass few records, some most."""
    rng = random.Random(7)
    records = []
    for _ in range(count):
        record: dict[str, Any] = {
            "ClientRequestHost": rng.choice(["api.example.com", "www.example.com", "example.com"]),
            "EdgeResponseStatus": rng.choice([200] * 20 + [404, 500, 429]),
            "ClientRequestPath": rng.choice(["/", "/v1/users", "/admin/login", "/wp-login.php"]),
            "BotScore": rng.randint(1, 99),
            "ClientCountry": rng.choice(["us", "de", "kp", "ir", "fr"]),
            "EdgeResponseCompressionRatio": rng.random() * 4,
        }
        if rng.random() < 0.3:
            record["BotTags"] = rng.choice([[], ["api"], ["headless"], ["crawler", "headless"]])
        if rng.random() < 0.2:
            record["SecurityAction"] = rng.choice(["block", "log"])
        records.append(record)
    return records


LARGE_BLOCK_FILTERS = [
    {"and": [c("EdgeResponseStatus", "geq", "500"), c("ClientRequestHost", "eq", "api.example.com"),
             {"or": [c("BotScore", "lt", "5"), c("ClientRequestPath", "contains", "admin")]}]},
    {"or": [{"and": [c("ClientCountry", "in", ["kp", "ir"]), c("ClientRequestPath", "startsWith", "/admin")]},
            {"and": [c("BotTags", "contains", "headless"), c("EdgeResponseStatus", "eq", "429")]},
            {"and": [c("SecurityAction", "eq", "block"), c("ClientRequestPath", "!endsWith", ".php")]},
            {"and": [c("EdgeResponseCompressionRatio", "gt", "3.9"), c("ClientRequestHost", "!contains", "api")]}]},
    {"or": [c("BotScore", "gt", "2"), c("ClientRequestPath", "contains", "admin")]},
    {"or": [c("BotScore", "gt", "3"), {"and": [c("ClientCountry", "!eq", "us"), c("ClientRequestPath", "eq", "/")]}]},
]  # fmt: skip


@pytest.mark.parametrize("where", LARGE_BLOCK_FILTERS)
def test_large_blocks_narrow_and_select_the_same(where: Any) -> None:
    records = generated_records(5000)
    batch = block(records)
    tree = tree_of(where)
    written_back = []
    replace_with_mask = pc.replace_with_mask

    def spy(*arguments: Any) -> Any:
        written_back.append(len(arguments[0]))
        return replace_with_mask(*arguments)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pc, "replace_with_mask", spy)
        assert selection(tree, batch) == per_record(tree, records)
    assert written_back, "the group did not narrow"


def test_a_kernel_that_refuses_a_column_falls_back_to_the_interpreter() -> None:
    records: list[dict[str, Any]] = [{"ClientRequestHost": "a"}, {"ClientRequestHost": "b"}, {}]
    batch = block(records)

    def refuse(*arguments: Any, **options: Any) -> Any:
        raise pa.ArrowNotImplementedError("no kernel")

    for operator in ("eq", "!eq"):
        tree = tree_of(c("ClientRequestHost", operator, "a"))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(pc, "equal", refuse)
            assert selection(tree, batch) == per_record(tree, records)
