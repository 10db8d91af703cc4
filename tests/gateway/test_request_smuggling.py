"""A request that reads one way to the gateway and another to a Go node is refused; what a node receives is the
request the gateway checked, written again. Against a stand-in node that decodes as geth does
(``tests/support/go_style_node.py``): keys matched ignoring case, the last match winning."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest

from edgeplane.config import GatewaySettings, ResponseCacheSettings, UpstreamSettings
from edgeplane.gateway.policy import load_method_policy
from edgeplane.gateway.service import Gateway
from edgeplane.gateway.upstream import UpstreamNode
from edgeplane.gateway.upstream_pool import UpstreamPool
from tests.support.go_style_node import GoStyleNode, balance_of, decode_requests, go_loads, go_view, python_view

POLICY = load_method_policy()
A = "0x" + "aa" * 20
B = "0x" + "bb" * 20
AT_A = f'["{A}","latest"]'
HASH = "0x" + "cd" * 32


@pytest.fixture(scope="module")
def node() -> Iterator[GoStyleNode]:
    with GoStyleNode() as stand_in:
        yield stand_in


def make_gateway(node: GoStyleNode, *, cache: bool) -> Gateway:
    settings = GatewaySettings(cache=ResponseCacheSettings(enabled=cache, max_head_age_seconds=60.0))
    upstream = UpstreamNode(UpstreamSettings(url=node.url), timeout_seconds=10)
    return Gateway(POLICY, {"mainnet": UpstreamPool("mainnet", [upstream], settings)}, settings)


@pytest.fixture
async def gateway(node: GoStyleNode) -> AsyncIterator[Gateway]:
    gateway = make_gateway(node, cache=False)
    node.taken()
    yield gateway
    for pool in gateway.pools.values():
        for upstream in pool.nodes:
            upstream.close()


def envelope(method: str, params: str, *, extra: str = "", request_id: str = "7") -> bytes:
    return f'{{"jsonrpc":"2.0","id":{request_id},"method":"{method}","params":{params}{extra}}}'.encode()


REFUSED = (400, -32600)
LIMITED = (200, -32602)

# (body, HTTP status, JSON-RPC error code or None for an answer); what the node decodes is checked for every row.
CASES: dict[str, tuple[bytes, int, int | None]] = {
    # The three bodies of the issue.
    "METHOD after method": (
        b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId","METHOD":"admin_addPeer","params":["enode://x"]}',
        *REFUSED,
    ),
    "FromBlock after fromBlock": (
        envelope("eth_getLogs", '[{"fromBlock":"0x100000","toBlock":"0x100000","FromBlock":"0x0"}]'),
        *REFUSED,
    ),
    "PARAMS after params": (
        envelope("eth_getBalance", AT_A, extra=f',"PARAMS":["{B}","latest"]'),
        *REFUSED,
    ),
    # The same class, other spellings.
    "Method before method": (
        b'{"jsonrpc":"2.0","id":1,"Method":"admin_addPeer","method":"eth_chainId","params":[]}',
        *REFUSED,
    ),
    "method twice": (envelope("admin_addPeer", "[]", extra=',"method":"eth_chainId"'), *REFUSED),
    "method twice, escaped": (envelope("eth_chainId", "[]", extra=r',"\u006d\u0065thod":"admin_addPeer"'), *REFUSED),
    "params with a long s": (
        envelope("eth_getBalance", AT_A, extra=f',"param\u017f":["{B}"]'),
        *REFUSED,
    ),
    "id and ID": (envelope("eth_chainId", "[]", extra=',"ID":8'), *REFUSED),
    "jsonrpc and JSONRPC": (envelope("eth_chainId", "[]", extra=',"JSONRPC":"1.0"'), *REFUSED),
    "only METHOD": (b'{"jsonrpc":"2.0","id":1,"METHOD":"admin_addPeer","params":[]}', *REFUSED),
    "to and TO in a call": (envelope("eth_call", f'[{{"to":"{A}","TO":"{B}"}},"latest"]'), *REFUSED),
    "to twice in a call": (envelope("eth_call", f'[{{"to":"{B}","to":"{A}"}},"latest"]'), *REFUSED),
    "nested deeper than 64 levels": (envelope("eth_call", "[" * 70 + "]" * 70), *REFUSED),
    "an unpaired surrogate": (envelope("eth_chainId", r'["\ud800"]'), 400, -32700),
    "invalid UTF-8": (envelope("eth_chainId", "[]").replace(b"[]", b'["\xff"]'), 400, -32700),
    # Filter members the gateway does not read, which a Go node may.
    "only FromBlock": (envelope("eth_getLogs", '[{"FromBlock":"0x0","toBlock":"0x100000"}]'), *LIMITED),
    "blockHash with a Kelvin sign": (
        envelope("eth_getLogs", f'[{{"fromBlock":"0x1","toBlock":"0x1","bloc\u212aHash":"{HASH}"}}]'),
        *LIMITED,
    ),
    "an unknown filter member": (envelope("eth_getLogs", '[{"fromBlock":"0x1","toBlock":"0x1","limit":5}]'), *LIMITED),
    "trace_filter FROMBLOCK": (envelope("trace_filter", '[{"fromBlock":"0x1","FROMBLOCK":"0x0"}]'), *REFUSED),
    # What is fine stays fine.
    "an unknown envelope member is dropped": (
        envelope("eth_getBalance", AT_A, extra=',"foo":1'),
        200,
        None,
    ),
    "a colon inside a string": (envelope("eth_getBalance", AT_A, request_id='"a:b"'), 200, None),
    "a filter the gateway reads": (
        envelope("eth_getLogs", f'[{{"fromBlock":"0x1","toBlock":"0x10","address":"{A}","topics":[]}}]'),
        200,
        None,
    ),
    "a call object": (envelope("eth_call", f'[{{"to":"{A}","data":"0x"}},"latest"]'), 200, None),
}


@pytest.mark.parametrize("case", CASES)
async def test_a_request_is_run_as_checked_or_refused(gateway: Gateway, node: GoStyleNode, case: str) -> None:
    body, status, code = CASES[case]
    answer = await gateway.handle("mainnet", body)
    document = orjson.loads(answer.body)
    assert answer.status == status, document
    decoded = node.taken()
    if code is not None:
        assert document["error"]["code"] == code, document
        assert decoded == []  # refused before any node
        return
    assert "result" in document, document
    (received,) = decoded
    assert_forwarded_as_checked(body, received.body)
    assert document["id"] == orjson.loads(body)["id"]


def assert_forwarded_as_checked(client_body: bytes, node_body: bytes) -> None:
    """The node's body has the four envelope members only, and reads to the client's request (as the gateway read
    it) by Python's rules and by Go's."""
    checked = orjson.loads(client_body)
    allowed = {member: checked[member] for member in ("jsonrpc", "id", "method", "params")}
    assert orjson.loads(node_body) == allowed
    assert list(orjson.loads(node_body)) == ["jsonrpc", "id", "method", "params"]
    (as_go,) = decode_requests(node_body)
    assert (as_go.id, as_go.method) == (allowed["id"], allowed["method"])
    assert go_view(as_go.params) == python_view(allowed["params"])
    assert go_view(go_loads(node_body)) == python_view(allowed)


async def test_a_batch_refuses_only_the_smuggling_item(gateway: Gateway, node: GoStyleNode) -> None:
    items = [
        f'{{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["{A}","latest"]}}',
        '{"jsonrpc":"2.0","id":2,"method":"eth_chainId","METHOD":"admin_addPeer","params":[]}',
        f'{{"jsonrpc":"2.0","id":3,"method":"eth_getBalance","params":["{A}","latest"],"Params":["{B}","latest"]}}',
        '{"jsonrpc":"2.0","id":4,"ID":5,"method":"eth_chainId","params":[]}',
        '{"jsonrpc":"2.0","id":6,"method":"eth_chainId","params":[]}',
    ]
    answer = await gateway.handle("mainnet", ("[" + ",".join(items) + "]").encode())
    assert answer.status == 200
    answers = orjson.loads(answer.body)
    assert [item.get("result") for item in answers] == [balance_of(A), None, None, None, "0x1"]
    assert [item.get("error", {}).get("code") for item in answers] == [None, -32600, -32600, -32600, None]
    assert [item["id"] for item in answers] == [1, 2, 3, None, 6]  # an id given twice is not echoed
    decoded = node.taken()
    assert [(received.request.method, received.request.batch) for received in decoded] == [
        ("eth_getBalance", True),
        ("eth_chainId", True),
    ]
    assert go_view(decoded[0].request.params) == [A, "latest"]


async def test_a_smuggled_answer_never_reaches_the_cache(node: GoStyleNode) -> None:
    gateway = make_gateway(node, cache=True)
    try:
        smuggle = envelope("eth_getBalance", AT_A, extra=f',"PARAMS":["{B}","latest"]')
        assert (await gateway.handle("mainnet", smuggle)).status == 400
        for expected_status in ("miss", "hit"):
            answer = await gateway.handle("mainnet", envelope("eth_getBalance", f'["{A}","latest"]'))
            assert answer.cache_status == expected_status
            assert orjson.loads(answer.body) == {"jsonrpc": "2.0", "id": 7, "result": balance_of(A)}
        node.taken()
        # A request with a member the node never sees is the same request to the cache as one without it.
        dropped = envelope("eth_getBalance", AT_A, extra=',"foo":1', request_id='"x"')
        answer = await gateway.handle("mainnet", dropped)
        assert answer.cache_status == "hit"
        assert orjson.loads(answer.body) == {"jsonrpc": "2.0", "id": "x", "result": balance_of(A)}
        assert node.taken() == []
    finally:
        for pool in gateway.pools.values():
            for upstream in pool.nodes:
                upstream.close()


@pytest.mark.parametrize(
    ("request_id", "echoed"), [("1", 1), ('"abc"', "abc"), ("1.5", 1.5), ('"\\u0041"', "A"), ("-0", 0)]
)
async def test_the_nodes_answer_carries_the_callers_id(
    gateway: Gateway, node: GoStyleNode, request_id: str, echoed: Any
) -> None:
    answer = await gateway.handle("mainnet", envelope("eth_chainId", "[]", request_id=request_id))
    assert orjson.loads(answer.body) == {"jsonrpc": "2.0", "id": echoed, "result": "0x1"}
    (received,) = node.taken()
    assert received.request.id == echoed


async def test_a_body_of_too_many_objects_is_refused(gateway: Gateway, node: GoStyleNode) -> None:
    many = "[" + ",".join(["{}"] * 10_001) + "]"
    answer = await gateway.handle("mainnet", envelope("eth_call", many))
    assert answer.status == 400
    assert "more than 10000 objects and arrays" in orjson.loads(answer.body)["error"]["message"]
    fine = "[" + ",".join(['"{["'] * 10_001) + "]"  # brackets inside strings are not objects
    answer = await gateway.handle("mainnet", envelope("eth_call", fine))
    assert answer.status == 200
    assert node.taken() != []
