"""trace_filter parameters: the forms seed 000 leaves open are all accepted; anything else is named in the error."""

from __future__ import annotations

import pytest

from edgeplane.jsonrpc.errors import InvalidParams
from edgeplane.jsonrpc.trace_filter_params import parse_trace_filter_params

A = "0x" + "aa" * 20
B = "0x" + "BB" * 20


def test_defaults() -> None:
    params = parse_trace_filter_params([{}])
    assert params.from_block == 0
    assert params.to_block == "latest"
    assert params.after == 0
    assert params.count is None
    assert params.mode == "union"
    assert params.from_addresses == frozenset() == params.to_addresses


@pytest.mark.parametrize("to_address", [B, [B], [B, B]])
def test_to_address_single_or_array(to_address: object) -> None:
    params = parse_trace_filter_params([{"toAddress": to_address}])
    assert params.to_addresses == frozenset({B.lower()})


@pytest.mark.parametrize(("after", "count"), [(1, 2), ("0x1", "0x2"), ("1", "2")])
def test_after_and_count_as_numbers_or_strings(after: object, count: object) -> None:
    params = parse_trace_filter_params([{"after": after, "count": count}])
    assert (params.after, params.count) == (1, 2)


@pytest.mark.parametrize(
    ("from_block", "expected"), [("0x10", 16), (16, 16), ("latest", "latest"), ("earliest", "earliest")]
)
def test_block_forms(from_block: object, expected: object) -> None:
    assert parse_trace_filter_params([{"fromBlock": from_block}]).from_block == expected


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ([], "expected \\[filter object\\]"),
        ([{}, {}], "expected \\[filter object\\]"),
        (["0x1"], "expected \\[filter object\\]"),
        ([{"fromblock": "0x1"}], "unknown member 'fromblock'"),
        ([{"mode": "both"}], "invalid trace_filter mode"),
        ([{"fromAddress": ["0x12"]}], "invalid trace_filter fromAddress\\[0\\]"),
        ([{"toAddress": [A, 5]}], "invalid trace_filter toAddress\\[1\\]"),
        ([{"after": -1}], "invalid trace_filter after"),
        ([{"count": "many"}], "invalid trace_filter count"),
        ([{"toBlock": "newest"}], "invalid trace_filter toBlock"),
    ],
)
def test_bad_params_are_named(params: list[object], message: str) -> None:
    with pytest.raises(InvalidParams, match=message):
        parse_trace_filter_params(params)
