"""Record formatting: output options applied to records, sampling, redaction, gzip and object names."""

from __future__ import annotations

import csv
import gzip
import io
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.logs.datasets import load_dataset
from edgeplane.logs.errors import OutputOptionsError
from edgeplane.logs.output_options import parse_output_options
from edgeplane.logs.record_format import gzip_batch, object_name, sample_hash
from tests.support.record_encoder import RecordEncoder, compile_record_encoder

HTTP = load_dataset("http_requests")
FIREWALL = load_dataset("firewall_events")
START = 1_795_219_200_123_456_789  # 2026-11-21T00:00:00.123456789Z

RECORD: dict[str, Any] = {
    "RayID": "8f1e2d3c4b5a6978",
    "ClientIP": "192.0.2.1",
    "EdgeResponseStatus": 200,
    "EdgeStartTimestamp": START,
    "CacheTieredFill": False,
    "EdgeResponseCompressionRatio": 1.5,
    "BotTags": ["api", "verified"],
    "ClientRequestUserAgent": 'curl/8 "quoted", comma',
}


def formatter(dataset: Any = HTTP, **options: Any) -> RecordEncoder:
    return compile_record_encoder(parse_output_options(options, dataset), dataset)


FIELDS = ["RayID", "EdgeResponseStatus", "EdgeStartTimestamp"]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            {"field_names": FIELDS},
            b'{"RayID":"8f1e2d3c4b5a6978","EdgeResponseStatus":200,"EdgeStartTimestamp":%d}\n' % START,
        ),
        ({"field_names": ["EdgeResponseStatus", "RayID"]}, b'{"EdgeResponseStatus":200,"RayID":"8f1e2d3c4b5a6978"}\n'),
        ({"field_names": ["EdgeStartTimestamp"], "timestamp_format": "unix"}, b'{"EdgeStartTimestamp":1795219200}\n'),
        (
            {"field_names": ["EdgeStartTimestamp"], "timestamp_format": "rfc3339"},
            b'{"EdgeStartTimestamp":"2026-11-21T00:00:00Z"}\n',
        ),
        ({"field_names": ["ClientIP", "OriginIP"]}, b'{"ClientIP":"192.0.2.1","OriginIP":null}\n'),
        ({"field_names": ["BotTags", "CacheTieredFill"]}, b'{"BotTags":["api","verified"],"CacheTieredFill":false}\n'),
        ({"field_names": ["ClientIP"], "record_prefix": "<", "record_suffix": ">\n"}, b'<"ClientIP":"192.0.2.1">\n'),
        (
            {"field_names": ["ClientIP", "EdgeResponseStatus"], "field_delimiter": " "},
            b'{"ClientIP":"192.0.2.1" "EdgeResponseStatus":200}\n',
        ),
        ({"field_names": FIELDS, "output_type": "csv"}, b"8f1e2d3c4b5a6978,200,%d\n" % START),
        (
            {"field_names": ["ClientIP", "ClientRequestUserAgent", "OriginIP"], "output_type": "csv"},
            b'192.0.2.1,"curl/8 ""quoted"", comma",\n',
        ),
        (
            {"field_names": ["BotTags", "CacheTieredFill", "EdgeResponseCompressionRatio"], "output_type": "csv"},
            b'"[""api"",""verified""]",false,1.5\n',
        ),
        (
            {"field_names": ["ClientIP", "ClientRequestUserAgent"], "output_type": "csv", "field_delimiter": "\t"},
            b'192.0.2.1\tcurl/8 "quoted", comma\n'.replace(b"curl", b'"curl')
            .replace(b"comma\n", b'comma"\n')
            .replace(b'"quoted"', b'""quoted""'),
        ),
        (
            {"field_names": ["EdgeStartTimestamp"], "output_type": "csv", "timestamp_format": "rfc3339"},
            b"2026-11-21T00:00:00Z\n",
        ),
        (
            {
                "field_names": ["ClientIP", "EdgeResponseStatus"],
                "record_template": "ip={{.ClientIP}} s={{ .EdgeResponseStatus }}",
            },
            b'{ip="192.0.2.1" s=200}\n',
        ),
        (
            {
                "field_names": ["ClientIP"],
                "record_template": "{{.ClientIP}}|{{.EdgeResponseStatus}}",
                "record_prefix": "",
                "record_suffix": "\n",
            },
            b'"192.0.2.1"|null\n',
        ),
        (
            {
                "field_names": ["ClientIP", "ClientRequestUserAgent"],
                "output_type": "csv",
                "record_template": "{{.ClientIP}};{{.ClientRequestUserAgent}}",
            },
            b'192.0.2.1;"curl/8 ""quoted"", comma"\n',
        ),
    ],
)
def test_one_record(options: dict[str, Any], expected: bytes) -> None:
    assert formatter(**options).format([RECORD]) == expected


def test_default_output_is_one_compact_json_object_per_line_with_every_field() -> None:
    output = formatter().format([RECORD, {"RayID": "2"}])
    lines = output.split(b"\n")
    assert lines[-1] == b""
    first, second = (orjson.loads(line) for line in lines[:-1])
    assert list(first) == list(HTTP.field_names)
    assert first["ClientIP"] == "192.0.2.1"
    assert first["OriginIP"] is None
    assert second["RayID"] == "2"
    assert b" " not in lines[1]


def test_batch_prefix_suffix_and_record_delimiter() -> None:
    array = formatter(
        field_names=["EdgeResponseStatus"],
        batch_prefix="[",
        batch_suffix="]",
        record_suffix="}",
        record_delimiter=",",
    )
    output = array.format([{"EdgeResponseStatus": status} for status in (200, 404, 500)])
    assert output == b'[{"EdgeResponseStatus":200},{"EdgeResponseStatus":404},{"EdgeResponseStatus":500}]'
    assert orjson.loads(output) == [
        {"EdgeResponseStatus": 200},
        {"EdgeResponseStatus": 404},
        {"EdgeResponseStatus": 500},
    ]
    assert array.format([]) == b"[]"


def test_csv_header_in_the_batch_prefix() -> None:
    table = formatter(
        field_names=["ClientIP", "EdgeResponseStatus"], output_type="csv", batch_prefix="ClientIP,EdgeResponseStatus\n"
    )
    assert table.format([RECORD, {}]) == b"ClientIP,EdgeResponseStatus\n192.0.2.1,200\n,\n"


@pytest.mark.parametrize("member", ["CVE-2021-44228", "CVE-2021-4428"])
def test_cve_2021_44228_redaction(member: str) -> None:
    record = {"ClientRequestUserAgent": "${jndi:ldap://x/a}", "ClientRequestPath": "/$${x}"}
    fields = ["ClientRequestUserAgent", "ClientRequestPath"]
    assert b"${" in formatter(field_names=fields).format([record])
    redacted = formatter(field_names=fields, **{member: True}).format([record])
    assert redacted == b'{"ClientRequestUserAgent":"x{jndi:ldap://x/a}","ClientRequestPath":"/$x{x}"}\n'
    # across the boundary of a record and the text around it
    joined = formatter(
        field_names=["ClientIP"],
        record_prefix="{",
        record_suffix="$",
        record_delimiter="",
        batch_suffix="{",
        **{member: True},
    )
    assert b"${" not in joined.format([{"ClientIP": "a"}, {"ClientIP": "b"}])


def test_firewall_events_fields() -> None:
    event = {"Action": "block", "RuleID": "r1", "Datetime": START, "Metadata": {"k": "v"}}
    output = formatter(FIREWALL, field_names=["Action", "RuleID", "Datetime", "Metadata"], timestamp_format="unix")
    assert output.format([event]) == b'{"Action":"block","RuleID":"r1","Datetime":1795219200,"Metadata":{"k":"v"}}\n'


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{.NoSuchField}}", "unknown field 'NoSuchField'"),
        ("{{if .ClientIP}}x{{end}}", "only {{.FieldName}} placeholders"),
        ("{{.ClientIP | printf}}", "only {{.FieldName}} placeholders"),
        ("{{ClientIP}}", "only {{.FieldName}} placeholders"),
        ("x }} y", "only {{.FieldName}} placeholders"),
    ],
)
def test_unsupported_templates_are_refused(template: str, message: str) -> None:
    with pytest.raises(OutputOptionsError) as error:
        formatter(record_template=template)
    assert error.value.member == "output_options.record_template"
    assert message in str(error.value)


def test_sampling_is_deterministic_and_proportional() -> None:
    records = [{"RayID": f"{index:016x}"} for index in range(20_000)]
    half = formatter(sample_rate=0.5)
    kept = [record for record in records if half.keep(record)]
    assert 9_400 < len(kept) < 10_600
    retry = formatter(sample_rate=0.5)
    assert kept == [record for record in records if retry.keep(record)]  # a retry keeps the same records
    tenth = formatter(sample_rate=0.1)
    assert 1_700 < sum(map(tenth.keep, records)) < 2_300
    assert all(map(formatter(sample_rate=1).keep, records[:100]))
    assert not any(map(formatter(sample_rate=0).keep, records[:100]))


def test_sampling_without_a_ray_id_uses_the_whole_record() -> None:
    assert sample_hash({"a": 1, "b": 2}) == sample_hash({"b": 2, "a": 1})
    assert sample_hash({"a": 1}) != sample_hash({"a": 2})
    assert sample_hash({"RayID": "x", "a": 1}) == sample_hash({"RayID": "x", "a": 2})


# -- properties ---------------------------------------------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
STRING_FIELDS = ["ClientIP", "ClientRequestHost", "ClientRequestPath", "ClientRequestUserAgent", "RayID"]
INT_FIELDS = ["EdgeResponseStatus", "BotScore", "ClientASN"]
ALL = STRING_FIELDS + INT_FIELDS + ["EdgeStartTimestamp", "BotTags"]


@st.composite
def http_records(draw: st.DrawFn) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for name in STRING_FIELDS:
        value = draw(st.none() | TEXT)
        if value is not None or draw(st.booleans()):
            record[name] = value
    for name in INT_FIELDS:
        if draw(st.booleans()):
            record[name] = draw(st.integers(-(2**63), 2**63 - 1))
    if draw(st.booleans()):
        record["EdgeStartTimestamp"] = draw(st.integers(0, 4_000_000_000 * 10**9))
    if draw(st.booleans()):
        record["BotTags"] = draw(st.lists(TEXT, max_size=3))
    return record


@given(
    records=st.lists(http_records(), max_size=5),
    fields=st.lists(st.sampled_from(ALL), min_size=1, unique=True),
)
@settings(max_examples=200, deadline=None)
def test_ndjson_parses_back_to_the_selected_values(records: list[dict[str, Any]], fields: list[str]) -> None:
    output = formatter(field_names=fields).format(records)
    lines = output.split(b"\n")
    assert lines[-1] == b""
    assert len(lines) == len(records) + 1
    for record, line in zip(records, lines, strict=False):
        assert orjson.loads(line) == {name: record.get(name) for name in fields}


@given(
    records=st.lists(http_records(), max_size=5),
    fields=st.lists(st.sampled_from(STRING_FIELDS + INT_FIELDS), min_size=1, unique=True),
    delimiter=st.sampled_from([",", ";", "\t", "|", " "]),
)
@settings(max_examples=200, deadline=None)
def test_csv_parses_back_to_the_selected_values(
    records: list[dict[str, Any]], fields: list[str], delimiter: str
) -> None:
    output = formatter(field_names=fields, output_type="csv", field_delimiter=delimiter).format(records)
    rows = list(csv.reader(io.StringIO(output.decode(), newline=""), delimiter=delimiter, strict=True))
    expected = [["" if record.get(name) is None else str(record[name]) for name in fields] for record in records]
    # the csv module reads a row of one empty value as an empty row
    assert [row or [""] for row in rows] == expected


@given(
    records=st.lists(http_records(), max_size=4),
    affixes=st.lists(st.sampled_from(["", "$", "{", "${", "$$", "x"]), min_size=5, max_size=5),
    output_type=st.sampled_from(["ndjson", "csv"]),
)
@settings(max_examples=300, deadline=None)
def test_no_dollar_brace_survives_redaction(
    records: list[dict[str, Any]], affixes: list[str], output_type: str
) -> None:
    batch_prefix, batch_suffix, record_prefix, record_suffix, record_delimiter = affixes
    output = formatter(
        field_names=STRING_FIELDS,
        output_type=output_type,
        batch_prefix=batch_prefix,
        batch_suffix=batch_suffix,
        record_prefix=record_prefix,
        record_suffix=record_suffix,
        record_delimiter=record_delimiter,
        **{"CVE-2021-44228": True},
    ).format([{**record, "ClientRequestPath": "${jndi:x}$"} for record in records])
    assert b"${" not in output


# -- gzip and object names ----------------------------------------------------------------------------------------


def test_gzip_batch_round_trip() -> None:
    chunks = [b'{"a":%d}\n' % index for index in range(10_000)]
    compressed = gzip_batch(chunks)
    assert compressed[:2] == b"\x1f\x8b"
    assert gzip.decompress(compressed) == b"".join(chunks)
    assert gzip.decompress(gzip_batch([])) == b""
    assert len(compressed) < len(b"".join(chunks)) / 3


NAME = re.compile(r"(?:(.*)/)?(\d{8}T\d{6}\.\d{3}Z)_(\d+)_(\d{20})-(\d{20})_([0-9a-f]{8})\.log\.gz")


def test_object_name_shape_and_date() -> None:
    when = datetime(2026, 11, 21, 10, 0, 5, 123_456, tzinfo=UTC)
    name = object_name("logs/{DATE}/edge", 42, 1000, 1999, when, nonce=0x9F86D081)
    assert (
        name == "logs/20261121/edge/20261121T100005.123Z_42_00000000000000001000-00000000000000001999_9f86d081.log.gz"
    )
    assert object_name("", 1, 0, 0, when, nonce=1).startswith("20261121T100005.123Z_1_")
    assert object_name("/var/log/edgeplane/", 1, 0, 0, when, nonce=1).startswith("/var/log/edgeplane/2026")
    # a time zone other than UTC is converted, so the date is the UTC date
    local = datetime(2026, 11, 21, 1, 0, 0, tzinfo=UTC).astimezone(__import__("datetime").timezone(timedelta(hours=5)))
    assert object_name("{DATE}", 1, 0, 0, local, nonce=1).startswith("20261121/20261121T010000.000Z")
    assert NAME.fullmatch(object_name("a/{DATE}", 7, 5, 9, when))


def test_object_names_are_unique_and_sort_by_time() -> None:
    start = datetime(2026, 12, 31, 23, 59, 58, tzinfo=UTC)
    names = []
    position = 0
    for step in range(3000):
        when = start + timedelta(milliseconds=step * 7 // 10)  # several batches in the same millisecond
        names.append(object_name("bucket/{DATE}", 3, position, position + 99, when))
        position += 100
    assert len(set(names)) == len(names)
    bare = [name.rsplit("/", 1)[1] for name in names]
    assert bare == sorted(bare)
    # the same batch named twice (a retry after a crash) still gets two names
    when = datetime(2026, 1, 1, tzinfo=UTC)
    assert len({object_name("", 1, 0, 9, when) for _ in range(1000)}) == 1000
