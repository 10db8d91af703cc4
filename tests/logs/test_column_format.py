"""A job's output written from columns with Arrow kernels (ndjson, csv, templates) is byte for byte what the
per-record encoder writes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.logs.column_format import compile_column_encoder
from edgeplane.logs.datasets import load_dataset
from edgeplane.logs.output_options import parse_output_options
from edgeplane.logs.record_columns import batch_of_any_rows, decode_block, encode_rows
from tests.support.record_encoder import compile_record_encoder

HTTP = load_dataset("http_requests")
FIREWALL = load_dataset("firewall_events")
FIELDS = {
    "RayID": "string",
    "ClientRequestUserAgent": "string",
    "ClientRequestPath": "string",
    "EdgeResponseStatus": "int",
    "ClientASN": "int",
    "EdgeStartTimestamp": "timestamp",
    "EdgeEndTimestamp": "timestamp",
    "CacheTieredFill": "bool",
    "EdgeResponseCompressionRatio": "float",
    "BotTags": "array_string",
}
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12) | st.sampled_from(
    ['a"b', "c\\d", "x\ny", "\x01", "é漢字", "${jndi:x}", ""]
)
VALUES = {
    "string": TEXT,
    "int": st.integers(min_value=-(2**63), max_value=2**63 - 1),
    "timestamp": st.integers(min_value=-(10**18), max_value=4 * 10**18) | st.just(1_795_219_200_123_456_789),
    "bool": st.booleans(),
    "float": st.floats(allow_nan=False, allow_infinity=False, width=64),
    "array_string": st.lists(TEXT, max_size=3),
}


def record_strategy() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional={name: VALUES[kind] for name, kind in FIELDS.items()})


def both(records: list[dict[str, Any]], output_options: dict[str, Any] | None, dataset: Any = HTTP) -> tuple[Any, Any]:
    options = parse_output_options(output_options, dataset)
    per_record = [compile_record_encoder(options, dataset).encode(record) for record in records]
    payload = encode_rows(dataset.name, records)
    assert payload is not None
    encoder = compile_column_encoder(options, dataset)
    return encoder(decode_block(payload)), per_record


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(record_strategy().filter(bool), min_size=1, max_size=12),
    names=st.lists(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=6, unique=True),
    timestamp_format=st.sampled_from(["unixnano", "unix", "rfc3339", "rfc3339ms", "rfc3339ns"]),
    affixes=st.sampled_from([None, ("{", "}\n", ","), ("[", "]", ";"), ("", "\n", "\t"), ("<", ">", " , ")]),
)
def test_column_encoder_writes_what_the_record_encoder_writes(
    records: list[dict[str, Any]], names: list[str], timestamp_format: str, affixes: tuple[str, str, str] | None
) -> None:
    options: dict[str, Any] = {"field_names": names, "timestamp_format": timestamp_format}
    if affixes is not None:
        options |= {"record_prefix": affixes[0], "record_suffix": affixes[1], "field_delimiter": affixes[2]}
    columns, per_record = both(records, options)
    assert columns == per_record


def test_every_field_of_the_dataset_by_default() -> None:
    records = [{"RayID": "a", "EdgeResponseStatus": 200, "ZoneName": "z"}, {"ClientIP": "192.0.2.1"}]
    columns, per_record = both(records, None)
    assert columns == per_record
    assert columns[0].startswith(b'{"BotScore":null,')


def test_firewall_events_records() -> None:
    records = [{"Action": "block", "RuleID": "r1", "Datetime": 1_795_219_200_000_000_000, "ZoneName": "z"}]
    columns, per_record = both(records, {"timestamp_format": "rfc3339"}, FIREWALL)
    assert columns == per_record


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(record_strategy().filter(bool), min_size=1, max_size=12),
    names=st.lists(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=6, unique=True),
    timestamp_format=st.sampled_from(["unixnano", "unix", "rfc3339", "rfc3339ms", "rfc3339ns"]),
    affixes=st.sampled_from(
        [None, ("", "\n", ","), ("[", "]", ";"), ("", "\r\n", "\t"), ("<", ">", "1"), ("", "", "")]
    ),
)
def test_csv_from_columns_is_what_the_record_encoder_writes(
    records: list[dict[str, Any]], names: list[str], timestamp_format: str, affixes: tuple[str, str, str] | None
) -> None:
    options: dict[str, Any] = {"output_type": "csv", "field_names": names, "timestamp_format": timestamp_format}
    if affixes is not None:
        options |= {"record_prefix": affixes[0], "record_suffix": affixes[1], "field_delimiter": affixes[2]}
    columns, per_record = both(records, options)
    assert columns == per_record


@settings(max_examples=100, deadline=None)
@given(
    records=st.lists(record_strategy().filter(bool), min_size=1, max_size=12),
    names=st.lists(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=4, unique=True),
    placed=st.lists(st.sampled_from([*sorted(FIELDS), "ClientIP"]), min_size=1, max_size=4),
    output_type=st.sampled_from(["ndjson", "csv"]),
    timestamp_format=st.sampled_from(["unixnano", "rfc3339ms"]),
)
def test_templates_from_columns_are_what_the_record_encoder_writes(
    records: list[dict[str, Any]], names: list[str], placed: list[str], output_type: str, timestamp_format: str
) -> None:
    template = "<" + " | ".join(f"{{{{.{name}}}}}" for name in placed) + ">"  # ClientIP is never selected: missing
    options = {
        "output_type": output_type,
        "field_names": names,
        "record_template": template,
        "timestamp_format": timestamp_format,
    }
    columns, per_record = both(records, options)
    assert columns == per_record


@pytest.mark.parametrize(
    "options",
    [
        {"output_type": "csv", "field_names": ["RayID", "EdgeResponseStatus", "BotTags"]},
        {"record_template": "{{.RayID}} {{ .EdgeResponseStatus }}", "field_names": ["RayID", "EdgeResponseStatus"]},
        {"output_type": "csv", "record_template": "{{.BotTags}};{{.RayID}}", "field_names": ["RayID", "BotTags"]},
    ],
    ids=["csv", "template", "csv-template"],
)
def test_loose_columns_are_written_as_the_record_encoder_writes_their_values(options: dict[str, Any]) -> None:
    records = [
        {"RayID": "a,b", "EdgeResponseStatus": "not a number", "BotTags": ["x", 'q"uote']},
        {"RayID": 7, "EdgeResponseStatus": 200, "BotTags": "loose"},
        {"EdgeResponseStatus": None},
    ]
    parsed = parse_output_options(options, HTTP)
    encoder = compile_column_encoder(parsed, HTTP)
    batch = batch_of_any_rows(HTTP.name, records)
    assert batch.schema.field("RayID").type == pa.binary()  # loose
    per_record = [compile_record_encoder(parsed, HTTP).encode(record) for record in records]
    assert encoder(batch) == per_record


def test_an_empty_batch_and_an_unexpected_column_type() -> None:
    encoder = compile_column_encoder(parse_output_options({"field_names": ["EdgeResponseStatus"]}, HTTP), HTTP)
    empty = pa.RecordBatch.from_pydict({"EdgeResponseStatus": pa.array([], pa.int64())})
    assert encoder(empty) == []
    odd = pa.RecordBatch.from_pydict({"EdgeResponseStatus": pa.array(["200", None])})
    assert encoder(odd) == [b'{"EdgeResponseStatus":"200"}\n', b'{"EdgeResponseStatus":null}\n']
