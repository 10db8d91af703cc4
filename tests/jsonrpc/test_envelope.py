"""The JSON-RPC 2.0 envelope rules (jsonrpc, method and id required; params an array, which may be omitted)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgeplane.body_document import BodyDocument
from edgeplane.jsonrpc.envelope import RejectedItem, RpcRequest, check_request, parse_body
from edgeplane.jsonrpc.errors import INVALID_REQUEST, InvalidRequest, ParseError
from tests.support.go_style_node import go_fold

VALID = {"jsonrpc": "2.0", "method": "eth_blockNumber", "params": [], "id": 1}


def test_omitted_params_read_as_an_empty_array() -> None:
    item = check_request({k: v for k, v in VALID.items() if k != "params"})
    assert item == RpcRequest(1, "eth_blockNumber", [])
    body = parse_body(BodyDocument(b'{"jsonrpc":"2.0","id":"a","method":"eth_chainId"}'), max_batch_size=10)
    assert body.items == [RpcRequest("a", "eth_chainId", [])]


@pytest.mark.parametrize(
    ("request_object", "problem"),
    [
        ({k: v for k, v in VALID.items() if k != "jsonrpc"}, 'missing member "jsonrpc"'),
        ({**VALID, "jsonrpc": "1.0"}, '"jsonrpc" must be the string "2.0"'),
        ({**VALID, "jsonrpc": 2.0}, '"jsonrpc" must be the string "2.0"'),
        ({k: v for k, v in VALID.items() if k != "method"}, 'missing member "method"'),
        ({**VALID, "method": 5}, '"method" must be a non-empty string'),
        ({**VALID, "method": ""}, '"method" must be a non-empty string'),
        ({**VALID, "params": {"a": 1}}, '"params" must be an array'),
        ({**VALID, "params": "x"}, '"params" must be an array'),
        ({**VALID, "params": None}, '"params" must be an array'),
        ({k: v for k, v in {**VALID, "Params": ["0x1"]}.items() if k != "params"}, '"params" spelt in another case'),
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
        parse_body(BodyDocument(body), max_batch_size=10)
    assert caught.value.code == -32700
    assert caught.value.http_status == 400


@pytest.mark.parametrize("body", [b"", b"{", b'{"a":}', b"\xff\xfe", b'{"a":1} x'])
def test_a_parse_error_says_what_the_parser_found(body: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError) as parser:
        orjson.loads(body)
    with pytest.raises(ParseError) as caught:
        parse_body(BodyDocument(body), max_batch_size=10)
    assert caught.value.message == f"parse error: the body is not valid JSON ({parser.value.msg})"


def test_the_envelope_is_checked_on_the_document_parsed_before() -> None:
    body = BodyDocument(orjson.dumps([VALID, {**VALID, "id": 2}]))
    document = body.document()
    parsed = parse_body(body, max_batch_size=10)
    assert [item.id for item in parsed.items] == [1, 2]
    assert isinstance(parsed.items[0], RpcRequest)
    assert parsed.items[0].params is document[0]["params"]  # read from that document, not from a second parse


@pytest.mark.parametrize("body", [b"[]", b"1", b'"x"', b"null", b"true"])
def test_bodies_that_are_no_request_are_invalid(body: bytes) -> None:
    with pytest.raises(InvalidRequest):
        parse_body(BodyDocument(body), max_batch_size=10)


def test_batch_items_are_checked_one_by_one() -> None:
    body = orjson.dumps([VALID, 5, {**VALID, "id": 2, "method": 1}, {**VALID, "id": 3}])
    parsed = parse_body(BodyDocument(body), max_batch_size=10)
    assert parsed.is_batch
    kinds = [type(item).__name__ for item in parsed.items]
    assert kinds == ["RpcRequest", "RejectedItem", "RejectedItem", "RpcRequest"]


def test_batch_size_is_limited() -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_body(BodyDocument(orjson.dumps([VALID] * 11)), max_batch_size=10)
    assert caught.value.data == {"limit": 10, "value": 11}
    assert len(parse_body(BodyDocument(orjson.dumps([VALID] * 10)), max_batch_size=10).items) == 10


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
        parsed = parse_body(BodyDocument(body), max_batch_size=100)
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


# -- member names repeated ignoring case ---------------------------------------------------------------------------

ENVELOPE = '"jsonrpc":"2.0","id":1,"method":"eth_call","params":'


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('{"jsonrpc":"2.0","id":1,"method":"a","METHOD":"b","params":[]}', 'names "method" and "METHOD"'),
        ('{"jsonrpc":"2.0","id":1,"method":"a","method":"b","params":[]}', 'name "method" appears twice'),
        (r'{"jsonrpc":"2.0","id":1,"method":"a","\u006dethod":"b","params":[]}', 'name "method" appears twice'),
        ('{"jsonrpc":"2.0","id":1,"method":"a","params":[],"param\u017f":[]}', 'names "params" and "param\u017f"'),
        ("{" + ENVELOPE + '[{"to":"x","To":"y"}]}', 'names "to" and "To"'),
        ("{" + ENVELOPE + '[[[{"a":{"b":1,"B":2}}]]]}', 'names "b" and "B"'),
        ("{" + ENVELOPE + '[{"\u00df":1,"ss":2}]}', 'names "\u00df" and "ss"'),  # folded further than Go does
        ("{" + ENVELOPE + "[" * 64 + "]" * 64 + "}", "nested deeper than 64 levels"),
    ],
)
def test_a_request_whose_names_repeat_ignoring_case_is_invalid(body: str, problem: str) -> None:
    (item,) = parse_body(BodyDocument(body.encode()), max_batch_size=10).items
    assert isinstance(item, RejectedItem)
    assert item.error.code == INVALID_REQUEST
    assert problem in item.error.message


@pytest.mark.parametrize(
    "body",
    [
        "{" + ENVELOPE + '[{"to":"a:b","data":"{\\"to\\":1,\\"TO\\":2}"}],"extra":1}',
        "{" + ENVELOPE + '[{"to":1},{"TO":2},{"to":3}]}',  # the same name in different objects
        "{" + ENVELOPE + "[" * 63 + "]" * 63 + "}",  # the request object is level 1, params level 2
        "{" + ENVELOPE + '[{"\u212a":1,"\u00df":2,"s":3}]}',
    ],
)
def test_names_that_differ_ignoring_case_are_fine(body: str) -> None:
    (item,) = parse_body(BodyDocument(body.encode()), max_batch_size=10).items
    assert isinstance(item, RpcRequest)


def test_a_repeated_id_is_not_echoed() -> None:
    (item,) = parse_body(
        BodyDocument(b'{"jsonrpc":"2.0","id":1,"Id":2,"method":"a","params":[]}'), max_batch_size=10
    ).items
    assert isinstance(item, RejectedItem)
    assert item.id is None
    (item,) = parse_body(
        BodyDocument(b'{"jsonrpc":"2.0","id":1,"method":"a","params":[{"x":1,"x":2}]}'), max_batch_size=10
    ).items
    assert isinstance(item, RejectedItem)
    assert item.id == 1


NAMES = st.sampled_from(["a", "A", "s", "S", "\u017f", "ss", "\u00df", "k", "\u212a", "to", "To", "method", "id"])


@dataclass(frozen=True)
class Written:
    """An object as text: members in order, repeats included."""

    members: tuple[tuple[str, str], ...]


def written_text(value: object) -> str:
    if isinstance(value, Written):
        return "{" + ",".join(f"{name}:{written_text(member)}" for name, member in value.members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(written_text(item) for item in value) + "]"
    return json.dumps(value)


def _written_name(name: str, escape: bool) -> str:
    return json.dumps(name, ensure_ascii=escape)


written_values = st.recursive(
    st.none() | st.integers() | st.sampled_from(["x", "a:b", "{", '"', "\\u0041"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.lists(st.tuples(st.builds(_written_name, NAMES, st.booleans()), children), max_size=4).map(
            lambda members: Written(tuple(members))
        )
    ),
    max_leaves=12,
)


def _reads(text: str) -> tuple[bool, bool]:
    """Whether an object in ``text`` holds two names that Go folds together, and two that casefold does."""
    go_clash = cased_clash = False

    def hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
        nonlocal go_clash, cased_clash
        names = [name for name, _ in pairs]
        go_clash |= len({go_fold(name) for name in names}) < len(names)
        cased_clash |= len({name.casefold() for name in names}) < len(names)
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    return go_clash, cased_clash


@given(written_values, st.lists(st.tuples(st.builds(_written_name, NAMES, st.booleans()), written_values), max_size=2))
def test_a_request_is_refused_exactly_when_its_names_repeat_ignoring_case(params: object, extra: list[Any]) -> None:
    """The cheap check (member count against colons, folded names) and the exact one (a parser showing every
    object's names) together refuse every request Go would read differently, and only requests that casefold finds
    ambiguous: differential against Go's folding (the stand-in's) and casefold."""
    envelope = Written((('"jsonrpc"', '"2.0"'), ('"id"', "1"), ('"method"', '"eth_call"')))
    members = list(envelope.members)
    members += [('"params"', written_text([params]))] + [(name, written_text(value)) for name, value in extra]
    text = "{" + ",".join(f"{name}:{value}" for name, value in members) + "}"
    go_clash, cased_clash = _reads(text)
    (item,) = parse_body(BodyDocument(text.encode()), max_batch_size=10).items
    if go_clash:
        assert isinstance(item, RejectedItem)
    if isinstance(item, RejectedItem):
        assert cased_clash or "nested deeper" in item.error.message
        assert item.error.code == INVALID_REQUEST
