"""Parsing of quantities, block parameters and addresses."""

from __future__ import annotations

import pytest

from edgeplane.jsonrpc.errors import InvalidParams
from edgeplane.jsonrpc.quantities import parse_address, parse_block_ref, parse_quantity


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0x0", 0), ("0x1f", 31), ("0X10", None), (10, 10), (0, 0), ("10", None), (-1, None), (True, None), (1.5, None)],
)
def test_quantities(value: object, expected: int | None) -> None:
    if expected is None:
        with pytest.raises(InvalidParams, match="invalid count"):
            parse_quantity(value, name="count")
    else:
        assert parse_quantity(value, name="count") == expected


def test_decimal_strings_only_where_allowed() -> None:
    assert parse_quantity("200", name="count", allow_decimal_string=True) == 200
    with pytest.raises(InvalidParams):
        parse_quantity("200", name="count")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("latest", "latest"),
        ("earliest", "earliest"),
        ("safe", "safe"),
        ("finalized", "finalized"),
        ("pending", "pending"),
        ("0x64", 100),
        (100, 100),
        ("100", 100),
    ],
)
def test_block_refs(value: object, expected: object) -> None:
    assert parse_block_ref(value, name="fromBlock") == expected


@pytest.mark.parametrize("value", ["Latest", "head", "", None, [], "0x", -3, "0xg"])
def test_bad_block_refs_name_the_parameter(value: object) -> None:
    with pytest.raises(InvalidParams, match="invalid fromBlock"):
        parse_block_ref(value, name="fromBlock")


def test_addresses_are_lower_cased() -> None:
    assert parse_address("0xABCDEFabcdef0123456789012345678901234567", name="a") == (
        "0xabcdefabcdef0123456789012345678901234567"
    )
    for bad in ["0x12", "ABCDEFabcdef0123456789012345678901234567", 5, None]:
        with pytest.raises(InvalidParams):
            parse_address(bad, name="a")
