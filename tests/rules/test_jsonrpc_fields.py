"""The ``edgeplane.jsonrpc.*`` fields in expressions, over requests built as the edge router builds them (one
``BodyDocument`` shared with the other readers of the body): methods, batches, the network, the addresses a request
names, and defined values for every body, however malformed or hostile."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.body_document import BodyDocument
from edgeplane.rules import RequestFields, compile_expression
from edgeplane.rules.jsonrpc_facts import JsonRpcFacts

TOKEN = "0x6B175474E89094C44Da98b954EedeAC495271d0F"  # mixed case, as wallets send it
TOKEN_LOWER = TOKEN.lower()
ROUTER = "0x7a250d5630b4cf539739df2c5dacb4c659f2488d"
OTHER = "0x00000000000000000000000000000000000000aa"


def request(body: bytes | Any, path: str = "/v1/mainnet") -> RequestFields:
    """A request to the gateway with this body (bytes, or a document written as JSON), as the router builds it."""
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return RequestFields.from_http(
        method="POST",
        scheme="http",
        host="localhost",
        raw_path=path,
        query="",
        headers=[(b"host", b"localhost"), (b"content-type", b"application/json")],
        body=raw,
        body_document=BodyDocument(raw),
        client_ip="203.0.113.9",
        client_port=40000,
        server_port=8787,
    )


def call(method: Any, params: Any = (), request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": list(params)}


def matches(expression: str, fields: RequestFields) -> bool:
    return compile_expression(expression)(fields)


SINGLE = call("eth_call", [{"to": TOKEN, "data": "0x70a08231"}, "latest"])
BATCH = [
    call("eth_blockNumber", request_id=1),
    call("eth_getLogs", [{"address": [ROUTER, TOKEN], "fromBlock": "0x1", "toBlock": "0x2"}], request_id=2),
    call("eth_getBalance", [OTHER, "latest"], request_id=3),
    call("eth_call", [{"to": TOKEN}], request_id=4),
]


@pytest.mark.parametrize(
    ("body", "expression", "expected"),
    [
        (SINGLE, 'edgeplane.jsonrpc.methods[0] eq "eth_call"', True),
        (SINGLE, "edgeplane.jsonrpc.batch", False),
        (SINGLE, "edgeplane.jsonrpc.batch_size eq 1", True),
        (SINGLE, f'edgeplane.jsonrpc.addresses[0] eq "{TOKEN_LOWER}"', True),
        (SINGLE, 'edgeplane.jsonrpc.network eq "mainnet"', True),
        (SINGLE, "edgeplane.jsonrpc.cost eq 0", True),  # without the gateway's reader, no call is priced
        (BATCH, "edgeplane.jsonrpc.batch and edgeplane.jsonrpc.batch_size eq 4", True),
        (BATCH, 'any(edgeplane.jsonrpc.methods[*] eq "eth_getLogs")', True),
        (BATCH, 'edgeplane.jsonrpc.methods[3] eq "eth_call"', True),
        (BATCH, 'all(edgeplane.jsonrpc.methods[*] in {"eth_blockNumber" "eth_call"})', False),
        (BATCH, f'any(edgeplane.jsonrpc.addresses[*] eq "{OTHER}")', True),
        (BATCH, f'edgeplane.jsonrpc.addresses[1] eq "{TOKEN_LOWER}"', True),  # named twice, listed once
        (BATCH, f'edgeplane.jsonrpc.addresses[2] eq "{OTHER}"', True),
        (BATCH, 'edgeplane.jsonrpc.addresses[3] eq ""', False),  # no fourth address: no value
        (b"not json", 'edgeplane.jsonrpc.batch_size eq 0 and not any(edgeplane.jsonrpc.methods[*] ne "")', True),
        (b"not json", 'edgeplane.jsonrpc.network eq "mainnet"', True),  # the network is the path's
    ],
)
def test_fields_in_expressions(body: Any, expression: str, expected: bool) -> None:
    assert matches(expression, request(body)) is expected


def test_a_contract_allowlist_is_one_rule() -> None:
    allowlist = compile_expression(
        f'edgeplane.jsonrpc.network eq "mainnet" and '
        f'not all(edgeplane.jsonrpc.addresses[*] in {{"{TOKEN_LOWER}" "{ROUTER}"}})'
    )
    assert not allowlist(request(SINGLE))
    assert not allowlist(request([call("eth_call", [{"to": TOKEN}]), call("eth_getCode", [ROUTER, "latest"])]))
    assert allowlist(request(BATCH))  # eth_getBalance of another address
    assert not allowlist(request(SINGLE, path="/v1/sepolia"))


@pytest.mark.parametrize(
    ("params", "method", "addresses"),
    [
        ([{"to": TOKEN}], "eth_call", [TOKEN_LOWER]),
        ([{"to": TOKEN}], "eth_estimateGas", [TOKEN_LOWER]),
        ([{"to": TOKEN}], "eth_createAccessList", [TOKEN_LOWER]),
        ([{"address": TOKEN}], "eth_getLogs", [TOKEN_LOWER]),
        ([{"address": [TOKEN, ROUTER, TOKEN]}], "eth_getLogs", [TOKEN_LOWER, ROUTER]),
        ([{"address": [ROUTER]}], "eth_newFilter", [ROUTER]),
        ([TOKEN, "latest"], "eth_getBalance", [TOKEN_LOWER]),
        ([TOKEN, "latest"], "eth_getCode", [TOKEN_LOWER]),
        ([TOKEN, "latest"], "eth_getTransactionCount", [TOKEN_LOWER]),
        ([TOKEN, "0x0", "latest"], "eth_getStorageAt", [TOKEN_LOWER]),
        ([TOKEN, [], "latest"], "eth_getProof", [TOKEN_LOWER]),
        ([{"from": TOKEN}], "eth_call", []),  # the sender is not the contract
        ([{"to": None}], "eth_estimateGas", []),  # a deployment names no contract
        ([{"to": TOKEN[:-1]}], "eth_call", []),  # not an address
        ([{"to": TOKEN + "00"}], "eth_call", []),
        ([{"to": "0x" + "g" * 40}], "eth_call", []),
        ([TOKEN], "eth_blockNumber", []),  # a method that names no address
        ([{"address": {"a": TOKEN}}], "eth_getLogs", []),
        ([[TOKEN]], "eth_call", []),
        ([], "eth_call", []),
    ],
)
def test_addresses_each_method_names(params: list[Any], method: str, addresses: list[str]) -> None:
    assert request(call(method, params)).edgeplane_jsonrpc_addresses == addresses


def test_network_is_the_gateway_path_as_sent() -> None:
    assert request(SINGLE, path="/v1/sepolia").edgeplane_jsonrpc_network == "sepolia"
    assert request(SINGLE, path="/v1/main%6eet").edgeplane_jsonrpc_network == "main%6eet"
    assert request(SINGLE, path="/healthz").edgeplane_jsonrpc_network == ""


@pytest.mark.parametrize(
    ("body", "methods", "batch", "batch_size"),
    [
        (b"", [], False, 0),
        (b"{", [], False, 0),
        (b"null", [], False, 0),
        (b'"eth_call"', [], False, 0),
        (b"42", [], False, 0),
        (b"[]", [], False, 0),  # an empty batch is no JSON-RPC request
        (b"{}", [], False, 1),  # one (invalid) request, as the request log counts it
        (b'{"method": 7}', [], False, 1),
        (b'{"method": ""}', [], False, 1),
        (b'{"method": ["eth_call"]}', [], False, 1),
        (b'{"method": {"eth_call": 1}}', [], False, 1),
        (b'[1, "a", null, [], {"method": "eth_chainId"}]', ["eth_chainId"], True, 5),
        (b'[{"method": "eth_call", "params": {"to": "x"}}]', ["eth_call"], True, 1),
        (b'{"method": "eth_call", "params": "0x"}', ["eth_call"], False, 1),
        (b"[" + b"[" * 2000 + b"]" * 2000 + b"]", [], False, 0),  # deeper than the JSON reader goes: not JSON
    ],
)
def test_malformed_bodies_give_defined_facts(body: bytes, methods: list[str], batch: bool, batch_size: int) -> None:
    fields = request(body)
    assert fields.edgeplane_jsonrpc_methods == methods
    assert fields.edgeplane_jsonrpc_batch is batch
    assert fields.edgeplane_jsonrpc_batch_size == batch_size
    assert fields.edgeplane_jsonrpc_addresses == []
    assert fields.edgeplane_jsonrpc_cost == 0


def test_a_huge_batch_is_counted_whole_and_read_within_a_bound() -> None:
    items = [call("eth_call", [{"to": OTHER}], request_id=index) for index in range(20_000)]
    fields = request(items)
    assert fields.edgeplane_jsonrpc_batch_size == 20_000
    assert len(fields.edgeplane_jsonrpc_methods) == 10_000  # more objects than the gateway accepts: refused anyway
    assert fields.edgeplane_jsonrpc_addresses == [OTHER]


def test_the_reader_runs_once_and_only_when_a_field_is_read() -> None:
    asked: list[RequestFields] = []

    def reader(fields: RequestFields) -> JsonRpcFacts:
        asked.append(fields)
        return JsonRpcFacts(methods=("eth_call",), batch_size=1, network="mainnet", cost=20)

    fields = request(SINGLE)
    fields.jsonrpc_reader = reader
    assert matches('http.request.method eq "POST" and ip.src in {203.0.113.0/24}', fields)
    assert asked == []
    expression = compile_expression('edgeplane.jsonrpc.cost ge 20 and edgeplane.jsonrpc.methods[0] eq "eth_call"')
    assert expression(fields)
    assert expression(fields)
    assert fields.edgeplane_jsonrpc_batch_size == 1
    assert fields.edgeplane_jsonrpc_network == "mainnet"
    assert asked == [fields]


def test_the_body_is_parsed_once_for_all_its_readers() -> None:
    body = BodyDocument(orjson.dumps(BATCH))
    fields = RequestFields.from_http(
        method="POST",
        scheme="http",
        host="localhost",
        raw_path="/v1/mainnet",
        query="",
        headers=[],
        body=body.raw,
        body_document=body,
        client_ip="127.0.0.1",
    )
    document = body.document()
    assert fields.edgeplane_jsonrpc_batch_size == 4
    assert body.document() is document  # the same reading, not a second parse
    assert fields.body_document is body


def test_fingerprint_fields_are_empty() -> None:
    fields = request(SINGLE)
    assert matches('cf.bot_management.ja3_hash eq "" and cf.bot_management.ja4 eq ""', fields)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=30,
)
METHODS = st.sampled_from(["eth_call", "eth_getLogs", "eth_getBalance", "eth_getProof", "eth_newFilter"]) | JSON
ADDRESSES = st.sampled_from([TOKEN, ROUTER, OTHER, TOKEN[:-1], "0x", ""]) | JSON
PARAMS = (
    st.lists(
        st.one_of(
            ADDRESSES, st.dictionaries(st.sampled_from(["to", "address", "from"]), ADDRESSES | st.lists(ADDRESSES))
        ),
        max_size=3,
    )
    | JSON
)
CALLS = st.fixed_dictionaries({"method": METHODS, "params": PARAMS}, optional={"jsonrpc": JSON, "id": JSON})
DOCUMENTS = st.one_of(CALLS, st.lists(CALLS | JSON, max_size=6), JSON)


def check_facts(fields: RequestFields) -> None:
    facts = fields.jsonrpc_facts
    assert all(isinstance(method, str) and method for method in fields.edgeplane_jsonrpc_methods)
    assert len(facts.methods) <= max(facts.batch_size, 0)
    assert facts.batch_size >= 0
    assert (facts.batch_size > 1) <= facts.batch
    assert len(set(facts.addresses)) == len(facts.addresses)
    for address in facts.addresses:
        assert address == address.lower()
        assert len(address) == 42
        assert address.startswith("0x")
    assert facts.cost == 0
    every = compile_expression(
        'any(edgeplane.jsonrpc.methods[*] contains "eth") or edgeplane.jsonrpc.batch_size gt 2 or '
        'any(edgeplane.jsonrpc.addresses[*] eq "0x") or edgeplane.jsonrpc.batch or edgeplane.jsonrpc.cost gt 0'
    )
    every(fields)  # never raises: a failure would be swallowed into false, so the facts are asserted above


@settings(max_examples=300, deadline=None)
@given(DOCUMENTS)
def test_hostile_documents_give_defined_facts(document: Any) -> None:
    check_facts(request(json.dumps(document).encode()))  # integers beyond 64 bits included


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_hostile_bytes_give_defined_facts(body: bytes) -> None:
    check_facts(request(body))
