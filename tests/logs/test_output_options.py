"""output_options and the legacy logpull_options: parsed, validated against the dataset, derived from each other."""

from __future__ import annotations

from typing import Any

import pytest

from edgeplane.logs.datasets import load_dataset
from edgeplane.logs.errors import OutputOptionsError
from edgeplane.logs.output_options import (
    LogpullOptions,
    OutputOptions,
    logpull_options_from_output,
    output_options_from_logpull,
    parse_logpull_options,
    parse_output_options,
)

HTTP = load_dataset("http_requests")


def test_seed_logpull_options() -> None:
    options = parse_logpull_options("fields=ClientRequestHost,BotScore&timestamps=rfc3339&CVE-2021-44228=true", HTTP)
    assert options == LogpullOptions(("ClientRequestHost", "BotScore"), "rfc3339", 1.0, True)
    assert options.to_query() == "fields=ClientRequestHost,BotScore&timestamps=rfc3339&CVE-2021-44228=true"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", LogpullOptions()),
        ("?fields=RayID", LogpullOptions(("RayID",))),
        ("fields=", LogpullOptions()),
        ("timestamps=unix", LogpullOptions(timestamps="unix")),
        ("CVE-2021-4428=true", LogpullOptions(cve_2021_44228=True)),
        ("CVE-2021-44228=false&CVE-2021-4428=false", LogpullOptions()),
        ("sample=0.1&fields=RayID", LogpullOptions(("RayID",), sample=0.1)),
    ],
)
def test_logpull_options_accepted(query: str, expected: LogpullOptions) -> None:
    assert parse_logpull_options(query, HTTP) == expected


@pytest.mark.parametrize(
    ("query", "member", "message"),
    [
        ("fields=RayID,NoSuchField", "logpull_options.fields", "unknown field 'NoSuchField'"),
        ("fields=RayID,,BotScore", "logpull_options.fields", "field name 2 is empty"),
        ("fields=RayID,RayID", "logpull_options.fields", "more than once"),
        ("fields=rayid", "logpull_options.fields", "unknown field"),
        ("timestamps=iso8601", "logpull_options.timestamps", "unixnano, unix, rfc3339"),
        ("CVE-2021-44228=yes", "logpull_options.CVE-2021-44228", "true or false"),
        ("CVE-2021-44228=true&CVE-2021-4428=false", "logpull_options.CVE-2021-4428", "contradicts"),
        ("sample=2", "logpull_options.sample", "between 0 and 1"),
        ("sample=x", "logpull_options.sample", "between 0 and 1"),
        ("format=json", "logpull_options.format", "unknown parameter"),
        ("fields=RayID&fields=BotScore", "logpull_options.fields", "more than once"),
        ("fields", "logpull_options", "query string"),
    ],
)
def test_logpull_options_refused(query: str, member: str, message: str) -> None:
    with pytest.raises(OutputOptionsError) as caught:
        parse_logpull_options(query, HTTP)
    assert caught.value.member == member
    assert message in caught.value.message
    assert str(caught.value).startswith(member)


def test_output_options_defaults() -> None:
    options = parse_output_options({}, HTTP)
    assert options == OutputOptions() == parse_output_options(None, HTTP)
    assert options.to_json() == {
        "field_names": [],
        "output_type": "ndjson",
        "batch_prefix": "",
        "batch_suffix": "",
        "record_prefix": "{",
        "record_suffix": "}\n",
        "record_delimiter": "",
        "field_delimiter": ",",
        "record_template": "",
        "sample_rate": 1.0,
        "timestamp_format": "unixnano",
        "merge_subrequests": False,
        "CVE-2021-44228": False,
    }
    assert options.selected_fields(HTTP) == HTTP.field_names


def test_output_options_full() -> None:
    value = {
        "field_names": ["RayID", "BotScore"],
        "output_type": "csv",
        "batch_prefix": "[",
        "batch_suffix": "]",
        "record_delimiter": ";",
        "field_delimiter": "\t",
        "record_template": "",
        "sample_rate": 0.5,
        "timestamp_format": "rfc3339",
        "CVE-2021-4428": True,
        "record_prefix": None,
    }
    options = parse_output_options(value, HTTP)
    assert (options.record_prefix, options.record_suffix) == ("", "\n")  # csv defaults
    assert options.cve_2021_44228 is True
    assert parse_output_options(options.to_json(), HTTP) == options


@pytest.mark.parametrize(
    ("value", "member", "message"),
    [
        ([], "output_options", "must be an object"),
        ({"fields": []}, "output_options.fields", "unknown member"),
        ({"field_names": "RayID"}, "output_options.field_names", "array of field names"),
        ({"field_names": ["RayID", 3]}, "output_options.field_names", "array of field names"),
        ({"field_names": ["Datetime"]}, "output_options.field_names", "unknown field 'Datetime'"),
        ({"output_type": "parquet"}, "output_options.output_type", "ndjson, csv"),
        ({"record_prefix": 1}, "output_options.record_prefix", "must be a string"),
        ({"sample_rate": 1.5}, "output_options.sample_rate", "between 0 and 1"),
        ({"sample_rate": -0.1}, "output_options.sample_rate", "between 0 and 1"),
        ({"sample_rate": "0.5"}, "output_options.sample_rate", "a number"),
        ({"sample_rate": True}, "output_options.sample_rate", "a number"),
        ({"timestamp_format": "iso"}, "output_options.timestamp_format", "unixnano, unix, rfc3339"),
        ({"CVE-2021-44228": "true"}, "output_options.CVE-2021-44228", "true or false"),
        ({"CVE-2021-44228": True, "CVE-2021-4428": False}, "output_options.CVE-2021-4428", "contradicts"),
    ],
)
def test_output_options_refused(value: Any, member: str, message: str) -> None:
    with pytest.raises(OutputOptionsError) as caught:
        parse_output_options(value, HTTP)
    assert caught.value.member == member
    assert message in caught.value.message


def test_each_form_derives_from_the_other() -> None:
    logpull = parse_logpull_options("fields=RayID,EdgeStartTimestamp&timestamps=unix&CVE-2021-44228=true", HTTP)
    output = output_options_from_logpull(logpull)
    assert output == OutputOptions(("RayID", "EdgeStartTimestamp"), timestamp_format="unix", cve_2021_44228=True)
    assert logpull_options_from_output(output) == logpull
    assert parse_logpull_options(logpull_options_from_output(output).to_query(), HTTP) == logpull


def test_deriving_logpull_drops_what_it_cannot_express() -> None:
    output = parse_output_options({"field_names": ["RayID"], "output_type": "csv", "batch_prefix": "["}, HTTP)
    assert logpull_options_from_output(output).to_query() == "fields=RayID&timestamps=unixnano"
