"""The JSON-RPC 2.0 envelope rules (seed 000: jsonrpc, method, params, id all required)."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgeplane.gateway.errors import INVALID_REQUEST, InvalidRequest, ParseError
from edgeplane.gateway.jsonrpc import RejectedItem, RpcRequest, check_request, parse_body

VALID = {"jsonrpc": "2.0", "method": "eth_blockNumber", "params": [], "id": 1}


@pytest.mark.parametrize(
    ("request_object", "problem"),
    [
        ({k: v for k, v in VALID.items() if k != "jsonrpc"}, 'missing member "jsonrpc"'),
        ({**VALID, "jsonrpc": "1.0"}, '"jsonrpc" must be the string "2.0"'),
        ({**VALID, "jsonrpc": 2.0}, '"jsonrpc" must be the string "2.0"'),
        ({k: v for k, v in VALID.items() if k != "method"}, 'missing member "method"'),
        ({**VALID, "method": 5}, '"method" must be a non-empty string'),
        ({**VALID, "method": ""}, '"method" must be a non-empty string'),
        ({k: v for k, v in VALID.items() if k != "params"}, 'missing member "params"'),
        ({**VALID, "params": {"a": 1}}, '"params" must be an array'),
        ({**VALID, "params": "x"}, '"params" must be an array'),
        ({k: v for k, v in VALID.items() if k != "id"}, 'missing member "id"'),
        ({**VALID, "id": None}, '"id" must be a number or a string'),
        ({**VALID, "id": True}, '"id" must be a number or a string'),
        ({**VALID, "id": [1]}, '"id" must be a number or a string'),
        ({**VALID, "id": {"a": 1}}, '"id" must be a number or a string'),
    ],
)
def test_envelope_problems_are_invalid_requests(request_object: dict[str, object], problem: str) -> None:
    item = check_request(request_object)
    assert isinstance(item, RejectedItem)
    assert item.error.code == INVALID_REQUEST
    assert problem in item.error.message


@pytest.mark.parametrize("request_id", [1, 0, -5, 2**70, 1.5, "abc", ""])
def test_valid_ids_are_kept(request_id: object) -> None:
    item = check_request({**VALID, "id": request_id})
    assert isinstance(item, RpcRequest)
    assert item.id == request_id


def test_invalid_request_echoes_a_valid_id() -> None:
    item = check_request({**VALID, "params": None, "id": 42})
    assert isinstance(item, RejectedItem)
    assert item.id == 42


@pytest.mark.parametrize("body", [b"", b"{", b"not json", b'{"a":}', b"\xff\xfe"])
def test_unparseable_bodies_are_parse_errors(body: bytes) -> None:
    with pytest.raises(ParseError) as caught:
        parse_body(body, max_batch_size=10)
    assert caught.value.code == -32700
    assert caught.value.http_status == 400


@pytest.mark.parametrize("body", [b"[]", b"1", b'"x"', b"null", b"true"])
def test_bodies_that_are_no_request_are_invalid(body: bytes) -> None:
    with pytest.raises(InvalidRequest):
        parse_body(body, max_batch_size=10)


def test_batch_items_are_checked_one_by_one() -> None:
    body = orjson.dumps([VALID, 5, {**VALID, "id": 2, "method": 1}, {**VALID, "id": 3}])
    parsed = parse_body(body, max_batch_size=10)
    assert parsed.is_batch
    kinds = [type(item).__name__ for item in parsed.items]
    assert kinds == ["RpcRequest", "RejectedItem", "RejectedItem", "RpcRequest"]


def test_batch_size_is_limited() -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_body(orjson.dumps([VALID] * 11), max_batch_size=10)
    assert caught.value.data == {"limit": 10, "value": 11}
    assert len(parse_body(orjson.dumps([VALID] * 10), max_batch_size=10).items) == 10


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
request_like = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | json_values,
        "method": st.sampled_from(["eth_call", ""]) | json_values,
        "params": st.just([]) | json_values,
        "id": st.integers() | st.text(max_size=5) | json_values,
    },
)


def _dumps(value: object) -> bytes:
    return json.dumps(value).encode()


@given(st.binary(max_size=64) | json_values.map(_dumps) | request_like.map(_dumps))
def test_any_body_is_parsed_or_refused_with_a_coded_error(body: bytes) -> None:
    try:
        parsed = parse_body(body, max_batch_size=100)
    except (ParseError, InvalidRequest) as error:
        refused: ParseError | InvalidRequest = error
    else:
        for item in parsed.items:
            if isinstance(item, RejectedItem):
                assert item.error.code == INVALID_REQUEST
            else:
                assert isinstance(item.method, str)
                assert item.method
                assert isinstance(item.params, list)
        return
    assert refused.http_status == 400
