"""Records given column by column (``batch_of_columns``, for producers that know their types) become a record batch
of the dataset's schema: typed as the fields are, without columns of nulls, and the same as the rows would have
made."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgeplane.logs.record_columns import batch_of_columns, batch_of_rows, conform, rows_of

HTTP = "http_requests"


def test_columns_take_their_field_types_and_nulls_are_missing() -> None:
    batch = batch_of_columns(
        HTTP,
        {
            "RayID": ["a", "b", "c"],
            "EdgeResponseStatus": [200, 403, 200],
            "ClientCountry": [None, "nz", None],
            "OriginResponseStatus": (None, None, None),  # a column of nulls is left out
            "SecurityActions": [None, ["block"], None],
        },
    )
    assert batch is not None
    assert batch.schema.names == ["RayID", "EdgeResponseStatus", "ClientCountry", "SecurityActions"]
    assert batch.schema.field("EdgeResponseStatus").type == pa.int64()
    assert batch.schema.field("SecurityActions").type == pa.list_(pa.string())
    assert rows_of(batch)[1] == {
        "RayID": "b",
        "EdgeResponseStatus": 403,
        "ClientCountry": "nz",
        "SecurityActions": ["block"],
    }


def test_a_repeated_value_and_a_shared_sequence_are_converted_once() -> None:
    hosts = ("rpc.example.com",) * 4
    batch = batch_of_columns(
        HTTP,
        {
            "ClientRequestHost": hosts,
            "EdgeRequestHost": hosts,
            "ClientRequestScheme": ("http",) * 4,
            "SecurityRuleIDs": [["r1", "r2"]] * 4,  # a repeated value that is a list
        },
    )
    assert batch is not None
    assert batch.column(0).to_pylist() == list(hosts)
    assert batch.column(1).to_pylist() == list(hosts)
    assert batch.column(2).to_pylist() == ["http"] * 4
    assert batch.column(3).to_pylist() == [["r1", "r2"]] * 4


def test_every_column_null_is_no_batch() -> None:
    assert batch_of_columns(HTTP, {"RayID": [None, None]}) is None
    assert batch_of_columns(HTTP, {}) is None


def test_a_foreign_field_or_a_value_of_another_type_is_refused() -> None:
    with pytest.raises(KeyError, match="NotAField"):
        batch_of_columns(HTTP, {"NotAField": ["x"]})
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        batch_of_columns(HTTP, {"EdgeResponseStatus": ["200", "201"]})
    with pytest.raises(UnicodeEncodeError):
        batch_of_columns(HTTP, {"ClientRequestPath": ["/", "/\udc80"]})
    with pytest.raises(KeyError):
        batch_of_columns("no_such_dataset", {"RayID": ["a"]})


def test_conform_gives_a_batch_the_dataset_fields_and_refuses_others() -> None:
    batch = pa.RecordBatch.from_pydict({"RayID": ["a"], "Cookies": ['{"a":"1"}']})
    conformed = conform(HTTP, batch)
    assert conformed.schema.field("Cookies").metadata == {b"edgeplane.json": b"1"}
    assert rows_of(conformed) == [{"RayID": "a", "Cookies": {"a": "1"}}]
    with pytest.raises(ValueError, match="NotAField"):
        conform(HTTP, pa.RecordBatch.from_pydict({"NotAField": ["a"]}))
    with pytest.raises(ValueError, match="EdgeResponseStatus"):
        conform(HTTP, pa.RecordBatch.from_pydict({"EdgeResponseStatus": ["200"]}))


ROWS = st.lists(
    st.fixed_dictionaries(
        {"RayID": st.text(min_size=1, max_size=8)},
        optional={
            "EdgeResponseStatus": st.integers(100, 599),
            "ClientCountry": st.sampled_from(["nz", "fr", "us"]),
            "ClientRequestPath": st.sampled_from(["/v1/mainnet", "/v1/sepolia"]),
            "EdgeStartTimestamp": st.integers(0, 2**62),
        },
    ),
    min_size=1,
    max_size=30,
)


def present(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    return [{name: value for name, value in row.items() if value is not None} for row in rows_of(batch)]


@given(ROWS)
def test_columns_make_the_batch_rows_make(rows: list[dict[str, Any]]) -> None:
    names = list(dict.fromkeys(name for row in rows for name in row))
    from_columns = batch_of_columns(HTTP, {name: [row.get(name) for row in rows] for name in names})
    from_rows = batch_of_rows(HTTP, rows)
    assert from_columns is not None
    assert from_rows is not None
    assert present(from_columns) == present(from_rows) == rows


def test_one_sequence_given_for_fields_of_other_types_is_converted_for_each() -> None:
    ports = [40000, 40001]
    batch = batch_of_columns(HTTP, {"ClientSrcPort": ports, "ClientRequestBytes": ports})
    assert batch is not None
    assert batch.column(1).to_pylist() == ports
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        batch_of_columns(HTTP, {"ClientSrcPort": ports, "ClientIP": ports})  # not text: refused, not cast


def test_a_batch_naming_a_column_twice_is_refused() -> None:
    batch = pa.RecordBatch.from_arrays([pa.array(["a"]), pa.array(["b"])], names=["ZoneName", "ZoneName"])
    with pytest.raises(ValueError, match="twice"):
        conform(HTTP, batch)
